#!/bin/bash
# replay_killed.sh - a replay killed part way (a caller's timeout) keeps what
# it measured: each policy's figures are in the JSON result as soon as that
# policy ends, with a "measured:" line on stderr, and a policy that had not
# run yet says so. Kills tencache-bench replay (host mode) with SIGKILL once
# the first policy's line is out, while the second runs. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-killed

# ours, then LRU: more steps than the time limit allows, so ours stops at its
# half of it (about 4 s) and LRU runs for 4 s more, when the kill lands
"$BENCH" replay --host --layers 4 --vocab 2048 --batch 1 --tflops 10 --gpu-budget 75% \
	--warmup 2 --steps 1000 --time-limit 8 --policies ours,lru -o "$T/r.json" > "$T/r.txt" 2>&1 &
pid=$!
for _ in $(seq 600); do
	grep -q 'measured:' "$T/r.txt" && break
	kill -0 $pid 2> /dev/null || break
	sleep 0.1
done
kill -KILL $pid 2> /dev/null
wait $pid 2> /dev/null
grep -E 'measured:' "$T/r.txt" || { echo "FAIL: no 'measured:' line"; tail -20 "$T/r.txt"; exit 1; }
grep -q '^lru ' "$T/r.txt" && { echo "FAIL: the replay ended before the kill (raise --steps)"; exit 1; }

python3 - "$T/r.json" <<'PY'
import json, sys

d = json.load(open(sys.argv[1]))
pols = {p["policy"]: p for p in d["policies"]}
bad = []
ours, lru = pols.get("tencache", {}), pols.get("lru", {})
if not ours.get("ok") or not ours.get("step_ns") or not ours.get("bound_ns"):
    bad.append("ours' figures are not in the JSON: %r" % {k: ours.get(k) for k in ("ok", "error", "bound_ns")})
if lru.get("ok") or lru.get("error") != "not run yet":
    bad.append("lru, killed in its run, is %r, want ok false and 'not run yet'" %
               {k: lru.get(k) for k in ("ok", "error")})
for b in bad:
    print("FAIL:", b)
if not bad:
    print("ours: %d steps kept, %.1f ms mean; lru: %s" % (len(ours["step_ns"]),
          ours["step_mean_ns"] / 1e6, lru["error"]))
sys.exit(1 if bad else 0)
PY
