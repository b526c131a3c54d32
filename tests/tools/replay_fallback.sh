#!/bin/bash
# replay_fallback.sh - the cache's ways out of a tight GPU budget with NVMe on,
# in host mode: OPT-13B's 8-layer cut, scaled, at a GPU budget 6% above its
# largest op (results/host-replay-tight.md). By default ours runs its plan
# laid out by the planner there (planner_layouts). With
# --no-layout no layout of ours' plan fits, so the cache must run the
# ZeRO-like plan (plan_fallbacks) rather than on demand. Either way, when
# the pinned arena fragments mid-step it must plan again with more room
# (replans) without profiling the order again (reprofiles 0), the measured
# steps must all run from a plan, and ours' model must be that of the plan
# that ran. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-fallback /var/tmp	# O_DIRECT: not tmpfs
STEPS=2

for mode in layout no-layout; do
	flag=
	[ $mode = no-layout ] && flag=--no-layout
	# shellcheck disable=SC2086
	"$BENCH" replay --host --model opt-13b --layers 8 --hidden 1280 --vocab 12568 \
		--gpu-budget 30% --nvme "$T/swap" --pinned-budget 50% --policies ours $flag \
		--warmup 4 --steps $STEPS -o "$T/replay.json" > "$T/out.txt" 2>&1
	rc=$?
	cat "$T/out.txt"
	[ "$rc" = 0 ] || { echo "FAIL ($mode): replay exited $rc"; exit 1; }
	if [ $mode = no-layout ]; then
		grep -q "using the ZeRO-like streaming plan instead" "$T/out.txt" ||
			{ echo "FAIL ($mode): no warning that ours fell back to the ZeRO-like plan"; exit 1; }
	fi
	python3 - "$T/replay.json" "$STEPS" "$mode" <<'PY' || exit 1
import json, sys

res, steps, mode = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
ours = res["policies"][0]
bad = []
if mode == "no-layout":
    if ours.get("plan_fallbacks", 0) < 1:
        bad.append("plan_fallbacks %r: ours did not fall back" % ours.get("plan_fallbacks"))
    if ours.get("planner_layouts", 1) != 0:
        bad.append("planner_layouts %r with --no-layout" % ours.get("planner_layouts"))
    want = "zero"
else:
    # a re-plan for fragmented pinned memory may end on the ZeRO-like plan
    if ours.get("planner_layouts", 0) < 1:
        bad.append("planner_layouts %r: ours' laid-out plan did not run"
                   % ours.get("planner_layouts"))
    want = "zero" if ours.get("plan_fallbacks", 0) else "ours"
if ours.get("reprofiles", 1) != 0:
    bad.append("reprofiles %r: a fragmented arena must re-plan, not re-profile"
               % ours.get("reprofiles"))
if ours.get("model", {}).get("policy") != want:
    bad.append("model policy %r: the model must be of the plan that ran (%s)"
               % (ours.get("model", {}).get("policy"), want))
if ours.get("planned_steps", 0) < steps:
    bad.append("planned_steps %r < %d: the measured steps ran on demand"
               % (ours.get("planned_steps"), steps))
for b in bad:
    print("FAIL (%s):" % mode, b)
print("ours (%s): plan_fallbacks %s, planner_layouts %s, replans %s, reprofiles %s, "
      "planned_steps %s" % (mode, ours.get("plan_fallbacks"), ours.get("planner_layouts"),
                            ours.get("replans"), ours.get("reprofiles"), ours.get("planned_steps")))
sys.exit(1 if bad else 0)
PY
done
