#!/bin/bash
# replay_fallback.sh - the cache's ways out of a tight GPU budget with NVMe on,
# in host mode: OPT-13B's 8-layer cut, scaled, at a GPU budget 6% above its
# largest op (results/host-replay-tight.md). No layout of ours' plan fits
# there, so the cache must run the ZeRO-like plan (plan_fallbacks) rather
# than on demand, and when the pinned arena fragments mid-step it must plan
# again with more room (replans) without profiling the order again
# (reprofiles 0). The measured steps must all run from a plan, and ours'
# model must be that of the ZeRO-like plan that ran. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-fallback /var/tmp	# O_DIRECT: not tmpfs
STEPS=2

"$BENCH" replay --host --model opt-13b --layers 8 --hidden 1280 --vocab 12568 \
	--gpu-budget 30% --nvme "$T/swap" --pinned-budget 50% --policies ours \
	--warmup 4 --steps $STEPS -o "$T/replay.json" > "$T/out.txt" 2>&1
rc=$?
cat "$T/out.txt"
[ "$rc" = 0 ] || { echo "FAIL: replay exited $rc"; exit 1; }
grep -q "using the ZeRO-like streaming plan instead" "$T/out.txt" ||
	{ echo "FAIL: no warning that ours fell back to the ZeRO-like plan"; exit 1; }

python3 - "$T/replay.json" "$STEPS" <<'PY'
import json, sys

res, steps = json.load(open(sys.argv[1])), int(sys.argv[2])
ours = res["policies"][0]
bad = []
if ours.get("plan_fallbacks", 0) < 1:
    bad.append("plan_fallbacks %r: ours did not fall back" % ours.get("plan_fallbacks"))
if ours.get("reprofiles", 1) != 0:
    bad.append("reprofiles %r: a fragmented arena must re-plan, not re-profile"
               % ours.get("reprofiles"))
if ours.get("model", {}).get("policy") != "zero":
    bad.append("model policy %r: the model must be of the plan that ran (zero)"
               % ours.get("model", {}).get("policy"))
if ours.get("planned_steps", 0) < steps:
    bad.append("planned_steps %r < %d: the measured steps ran on demand"
               % (ours.get("planned_steps"), steps))
for b in bad:
    print("FAIL:", b)
print("ours: plan_fallbacks %s, replans %s, reprofiles %s, planned_steps %s" %
      (ours.get("plan_fallbacks"), ours.get("replans"), ours.get("reprofiles"),
       ours.get("planned_steps")))
sys.exit(1 if bad else 0)
PY
