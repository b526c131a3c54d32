#!/bin/bash
# replay_model_only.sh - tencache-bench replay --model-only: the planner and
# its timing model per policy, no cache and no memory, on the full OPT-6.7B
# at 25% with the H200 link figures: every policy gets a model row and a
# bound, the JSON says model-only, and with --overlap ours' modelled step is
# shorter than with the Adam after backward (a deterministic simulation, not
# a timing). --model-only --timeline writes each plan's modelled step as a
# timeline (timeline-busy.py reads it); --model-only --table is refused, and so are --layout with
# --no-layout, --timeline-all without --timeline, and outputs (-o, --timeline,
# --plot) in a directory that cannot take them, before anything runs. With
# NVMe (OPT-1.3B, 25% pinned), --bw's fifth figure (the disk's rate serving
# reads and writes at once) is in the JSON and can only lengthen ours'
# modelled step and bound, and the JSON gives the disk's idle time in the
# modelled step; a --bw of 3 or 6 figures, or a zero, is refused. Ours'
# model in the JSON says what its plan search chose (the reserves and
# victim choice, and with NVMe the pinned horizon and stage-out place).
# --plan-bench prints ours' laid-out plan's time on --plan-threads 2 and on
# one thread, the same plan both times, and puts both in the JSON;
# --plan-threads 17 is refused, and so are --queue-depth and --io-size out of range.
# Exit 0 pass, 1 fail.
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
# what ours' search chose: the GPU level's only, without NVMe; no other policy's
for m in (s, o):
    c = m.get("search", {})
    check(sorted(c) == ["cold_first", "gpu_reserve_bytes"] and c["gpu_reserve_bytes"] >= 0,
          "ours' search choices without NVMe: %r" % c)
check(all("search" not in p["model"] for p in json.load(open(sys.argv[1]))["policies"]
          if p["policy"] != "tencache"), "another policy's model has search choices")
check(o.get("host_ns", 0) > 0 and s.get("host_ns", 1) == 0, "host_ns: %r / %r" %
      (o.get("host_ns"), s.get("host_ns")))
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY

# the disk's both-at-once rate: the model's reads and writes share it
for v in apart shared; do
	bw=50,50,4,3
	[ $v = shared ] && bw=$bw,2.5
	args="--model opt-1.3b --gpu-budget 25% --nvme $T/x.swap --pinned-budget 25% --bw $bw"
	echo "+ tencache-bench replay $args --model-only --policies ours"
	"$BENCH" replay $args --model-only --policies ours -o "$T/$v.json" > "$T/$v.txt" 2>&1
	rc=$?
	[ "$rc" = 0 ] || { cat "$T/$v.txt"; echo "FAIL: replay $args exited $rc"; exit 1; }
	grep -E '^  links|^tencache ' "$T/$v.txt"
done
python3 - "$T/apart.json" "$T/shared.json" <<'PY'
import json, sys
a, s = (json.load(open(p)) for p in sys.argv[1:])
ma, ms = a["policies"][0]["model"], s["policies"][0]["model"]
ch = [m.get("search", {}) for m in (ma, ms)]
print("ours' search chose:", ch)
ok = (all(sorted(c) == ["cold_first", "gpu_reserve_bytes", "pinned_horizon_64ths",
                        "pinned_reserve_bytes", "pinned_stage_out"] and
          0 <= c["pinned_horizon_64ths"] <= 64 and
          c["pinned_stage_out"] in ("eviction", "written", "halfway") for c in ch) and
      "NVMe-rd+wr" not in a["cache"]["bw"] and
      s["cache"]["bw"].get("NVMe-rd+wr") == 2.5e9 and
      ma["link_bytes"][2] > 0 and
      ms["step_ns"] >= ma["step_ns"] and ms["bound_ns"] > ma["bound_ns"] and
      all(0 <= m["nvme_gap_ns"] <= m["nvme_idle_ns"] < m["step_ns"] and
          m["nvme_gap_at_ns"] + m["nvme_gap_ns"] <= m["step_ns"] for m in (ma, ms)))
print("ours, modelled: reads and writes apart %.1f ms (bound %.1f, disk idle %.1f), sharing 2.5 GB/s %.1f ms (bound %.1f, disk idle %.1f)" %
      (ma["step_ns"] / 1e6, ma["bound_ns"] / 1e6, ma.get("nvme_idle_ns", -1e6) / 1e6,
       ms["step_ns"] / 1e6, ms["bound_ns"] / 1e6, ms.get("nvme_idle_ns", -1e6) / 1e6))
sys.exit(0 if ok else 1)
PY
[ $? = 0 ] || { echo "FAIL: --bw's fifth figure: not in the JSON or the model did not share the disk, or no disk idle time or search choices in the model's JSON"; exit 1; }
# --plan-bench: ours' laid-out plan on 2 threads and on one, the same plan
args="--model opt-1.3b --gpu-budget 25% --nvme $T/x.swap --pinned-budget 25% --bw 50,50,4,3"
args="$args --model-only --policies ours --layout --plan-threads 2 --plan-bench"
echo "+ tencache-bench replay $args"
"$BENCH" replay $args -o "$T/pb.json" > "$T/pb.txt" 2>&1 || { cat "$T/pb.txt"; echo "FAIL: replay $args"; exit 1; }
grep '^  plan-bench' "$T/pb.txt"
grep -q '^  plan-bench: ours planned in [0-9]* ms (threads: --plan-threads), [0-9]* ms on one thread: [0-9.]*x; the same plan' "$T/pb.txt" ||
	{ echo "FAIL: no plan-bench line, or the plans differ"; exit 1; }
python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))["policies"][0]["model"]
sys.exit(0 if m["plan_ns"] > 0 and m["plan_one_thread_ns"] > 0 else 1)' "$T/pb.json" ||
	{ echo "FAIL: plan_ns / plan_one_thread_ns not in the JSON"; exit 1; }
refused "bad value for --plan-threads" replay --model-only --plan-threads 17
echo "--plan-threads 17 refused"
for bad in "--queue-depth 0" "--queue-depth 257" "--io-size 6" "--io-size 0" "--io-size 65540"; do
	refused "bad value for ${bad% *}" replay --model-only $bad
done
echo "--queue-depth outside 1-256, --io-size not a multiple of 4 KiB in 4-65536, refused"

for bw in 50,50,4 50,50,4,3,2.5,1 50,0 50,50,4,3,0; do
	refused "bad value for --bw" replay --model-only --bw $bw
done
echo "--bw with 3 or 6 figures, or a zero, refused"

refused "--model-only" replay --model opt-6.7b --model-only --table "$T/x.tbl"
echo "--model-only --table refused"
# --model-only --timeline: the model's step of each policy's plan (pid 2),
# which timeline-busy.py reads as a model's: the disk busy, in the span of
# a step, as the JSON's idle time says
args="--model opt-1.3b --gpu-budget 25% --nvme $T/x.swap --pinned-budget 25% --bw 50,50,4,3"
args="$args --model-only --policies ours,zero --timeline $T/m.json --timeline-all"
echo "+ tencache-bench replay $args"
"$BENCH" replay $args -o "$T/mt.json" > "$T/mt.txt" 2>&1 || { cat "$T/mt.txt"; echo "FAIL: replay $args"; exit 1; }
[ -s "$T/m-zero-inf.json" ] || { echo "FAIL: no timeline for zero-inf next to $T/m.json"; exit 1; }
python3 "$TOP/tools/gpu/timeline-busy.py" "$T/m.json" > "$T/busy.txt" || { echo "FAIL: timeline-busy.py"; exit 1; }
cat "$T/busy.txt"
python3 - "$T/m.json" "$T/mt.json" "$T/busy.txt" <<'PY' || exit 1
import json, re, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
m = json.load(open(sys.argv[2]))["policies"][0]["model"]
busy = open(sys.argv[3]).read()
x = [e for e in ev if e.get("ph") == "X"]
kinds = {e["cat"] for e in x}
disk = re.search(r"disk \(either\)\s+busy\s+([0-9.]+) ms", busy)
ok = (x and all(e["pid"] == 2 for e in x) and {"H2D", "compute", "NVMe read", "NVMe write"} <= kinds
      and "timing model (%.1f ms/step)" % (m["step_ns"] / 1e6) in json.dumps(ev) and disk
      and abs(float(disk.group(1)) - (m["step_ns"] - m["nvme_idle_ns"]) / 1e6) <= 0.02 * m["step_ns"] / 1e6)
print("model-only timeline: %d spans (%s); disk busy %s ms, the JSON's step less its idle %.1f ms" %
      (len(x), ", ".join(sorted(kinds)), disk.group(1) if disk else "?",
       (m["step_ns"] - m["nvme_idle_ns"]) / 1e6))
sys.exit(0 if ok else 1)
PY
refused "pick one" replay --model opt-6.7b --model-only --layout --no-layout
echo "--layout --no-layout refused"

# outputs that cannot be written are refused before anything runs
refused "cannot write in" replay --host -o "$T/no-such-dir/r.json"
refused "cannot write in" replay --host --timeline "$T/no-such-dir/t.json"
refused "cannot write in" replay --host --plot "$T/no-such-dir/p.png"
refused "needs --timeline" replay --host --timeline-all
echo "unwritable outputs and --timeline-all without --timeline refused"
exit 0
