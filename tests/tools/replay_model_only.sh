#!/bin/bash
# replay_model_only.sh - tencache-bench replay --model-only: the planner and
# its timing model per policy, no cache and no memory, on the full OPT-6.7B
# at 25% with the H200 link figures: every policy gets a model row and a
# bound, the JSON says model-only, and with --overlap ours' modelled step is
# shorter than with the Adam after backward (a deterministic simulation, not
# a timing). --model-only with --timeline is refused, and so are --layout with
# --no-layout, --timeline-all without --timeline, and outputs (-o, --timeline,
# --plot) in a directory that cannot take them, before anything runs. Exit 0
# pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-model

for v in serial overlap; do
	args="--model opt-6.7b --batch 2 --adam-rate 5e9 --gpu-budget 25% --model-only"
	[ $v = overlap ] && args="$args --overlap"
	echo "+ tencache-bench replay $args"
	"$BENCH" replay $args -o "$T/$v.json" > "$T/$v.txt" 2>&1
	rc=$?
	cat "$T/$v.txt"
	[ "$rc" = 0 ] || { echo "FAIL: replay $args exited $rc"; exit 1; }
done

python3 - "$T/serial.json" "$T/overlap.json" <<'PY' || exit 1
import json, sys

bad = []
def check(cond, msg):
    if not cond:
        bad.append(msg)

ours = {}
for path in sys.argv[1:]:
    d = json.load(open(path))
    check(d.get("mode") == "model-only", "%s: mode %r" % (path, d.get("mode")))
    pols = {p["policy"]: p for p in d["policies"]}
    check(sorted(pols) == sorted(["tencache", "lru", "zero-inf", "10cache"]),
          "%s: policies %s" % (path, sorted(pols)))
    for name, p in pols.items():
        m = p.get("model", {})
        check(p.get("ok") and m.get("step_ns", 0) > 0 and m.get("bound_ns", 0) > 0 and
              m["step_ns"] >= m["bound_ns"] * 0.999 and "step_ns" not in p,
              "%s: %s: ok %r, model %r" % (path, name, p.get("ok"), m))
    ours[d["generator"]["overlap"]] = pols["tencache"]["model"]
s, o = ours.get(False, {}), ours.get(True, {})
print("ours, modelled: Adam after backward %.1f ms (bound %.1f), beside it %.1f ms (bound %.1f)" %
      (s.get("step_ns", 0) / 1e6, s.get("bound_ns", 0) / 1e6, o.get("step_ns", 0) / 1e6,
       o.get("bound_ns", 0) / 1e6))
check(0 < o.get("step_ns", 0) < s.get("step_ns", 0), "overlap does not shorten the modelled step")
check(o.get("host_ns", 0) > 0 and s.get("host_ns", 1) == 0, "host_ns: %r / %r" %
      (o.get("host_ns"), s.get("host_ns")))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

refused "--model-only" replay --model opt-6.7b --model-only --timeline "$T/x.json"
echo "--model-only --timeline refused"
refused "pick one" replay --model opt-6.7b --model-only --layout --no-layout
echo "--layout --no-layout refused"

# outputs that cannot be written are refused before anything runs
refused "cannot write in" replay --host -o "$T/no-such-dir/r.json"
refused "cannot write in" replay --host --timeline "$T/no-such-dir/t.json"
refused "cannot write in" replay --host --plot "$T/no-such-dir/p.png"
refused "needs --timeline" replay --host --timeline-all
echo "unwritable outputs and --timeline-all without --timeline refused"
exit 0
