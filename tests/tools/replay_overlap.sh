#!/bin/bash
# replay_overlap.sh - the main job with --overlap (the CPU Adam detached to a
# worker thread beside backward, as tencache.offload(overlap=True) runs it),
# in host mode on a small model: every policy runs and ours from its plan,
# the timing model picked how many Adam ops go inside backward, the JSON says
# so and its bound's compute is the busier of the GPU and the host ops, and
# the timeline shows the detached host ops. A bad --overlap-layers and
# --overlap with --gpu-adam are refused. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-overlap
STEPS=2

# replay_smoke.sh's model and budget; a slow Adam (2e8 params/s: 26 ms a
# step) so that the host ops matter beside the 10 TFLOP/s compute
set -x
"$BENCH" replay --host --layers 4 --vocab 2048 --batch 1 --tflops 10 --gpu-budget 75% \
	--adam-rate 2e8 --overlap --warmup 2 --steps $STEPS -o "$T/replay.json" \
	--timeline "$T/timeline.json" > "$T/out.txt" 2>&1
rc=$?
set +x
cat "$T/out.txt"
[ "$rc" = 0 ] || { echo "FAIL: replay --overlap exited $rc"; exit 1; }
grep -q '^  overlap: CPU Adam detached to a worker thread, [0-9]* of its [0-9]* ops inside backward (the timing model' \
	"$T/out.txt" || { echo "FAIL: no overlap line"; exit 1; }

python3 - "$T/replay.json" "$T/timeline.json" "$STEPS" <<'PY' || exit 1
import json, sys

res, tl, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
bad = []
def check(cond, msg):
    if not cond:
        bad.append(msg)

d = json.load(open(res))
g = d["generator"]
check(g.get("overlap") is True and (isinstance(g.get("overlap_layers"), (int, float)) or
                                   g.get("overlap_pace_ns", 0) > 0),
      "generator: overlap %r, overlap_layers %r, overlap_pace_ns %r" %
      (g.get("overlap"), g.get("overlap_layers"), g.get("overlap_pace_ns")))
tr = d["trace"]
check(0 < tr["bound_compute_ns"] < tr["compute_ns"],
      "the bound's compute %r is not below the serial compute %r" %
      (tr["bound_compute_ns"], tr["compute_ns"]))
for p in d["policies"]:
    name = p["policy"]
    if not p.get("ok"):
        bad.append("%s did not run: %s" % (name, p.get("error")))
        continue
    check(len(p["step_ns"]) == steps, "%s: %d measured steps" % (name, len(p["step_ns"])))
    check(p["gpu_bytes_peak"] <= d["cache"]["gpu_budget"], "%s: over the GPU budget" % name)
    check(p["bound_ns"] >= tr["bound_compute_ns"], "%s: bound below its compute" % name)
ours = {p["policy"]: p for p in d["policies"]}.get("tencache", {})
check(ours.get("planned_steps", 0) >= steps and ours.get("reprofiles", 1) == 0,
      "ours: planned steps %r, reprofiles %r" % (ours.get("planned_steps"), ours.get("reprofiles")))

t = json.load(open(tl))
ev = t["traceEvents"] if isinstance(t, dict) else t
host = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "host op"]
check(len(host) > 0 and sum(e["dur"] for e in host) > 0,
      "timeline: no detached host op spans (%d)" % len(host))
print("timeline: %d host op spans, %.1f ms" % (len(host), sum(e["dur"] for e in host) / 1e3))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

# bad input: refused with exit 2 and a message, before any work
for args in "--overlap --gpu-adam" "--overlap-layers x" "--overlap-layers -1" "--no-defer"; do
	# shellcheck disable=SC2086
	refused "overlap" replay --host --layers 4 --vocab 2048 --batch 1 $args
done
echo "bad --overlap options refused"
exit 0
