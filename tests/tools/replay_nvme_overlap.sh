#!/bin/bash
# replay_nvme_overlap.sh - the CPU Adam detached beside backward (--overlap)
# with an NVMe tier, in host mode, on OPT-13B's first layer with smaller
# shapes. The caller settles a detached op only when it next needs one of its
# tensors, so finished ops keep their optimizer state held while later ops
# need pinned space: the on-demand steps must push those out (or wait for a
# running op), and values a plan keeps on the GPU for good whose pinned copy
# the plan stages out must get NVMe space. Every policy must run its steps.
# The disk's rates are measured on the swap file once, first, for the model
# and every policy's cache (a swap file that cannot be made stops the replay
# there, exit 1).
# --queue-depth and --io-size set the staging's requests; the timeline puts
# NVMe jobs in flight at once on tracks of their own.
# A pinned budget below the largest optimizer op is refused up front, with
# what to do. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-nvme-overlap /var/tmp	# O_DIRECT: not tmpfs
fail=0

run() {	# NAME ARGS...: every policy must end with a step time, not an error
	local name=$1
	shift
	"$BENCH" replay --host --model opt-13b --layers 1 --gpu-budget 99% --nvme "$T/swap" \
		--batch 2 --adam-rate 5e9 --warmup 2 --steps 2 --overlap "$@" \
		-o "$T/$name.json" > "$T/$name.txt" 2>&1
	local rc=$?
	grep -E "^(tencache|lru|zero-inf|10cache) |error" "$T/$name.txt"
	if [ "$rc" != 0 ]; then
		echo "FAIL: $name: replay exited $rc"
		fail=1
		return
	fi
	python3 - "$T/$name.json" "$name" <<'PY' || fail=1
import json, sys

res, name = json.load(open(sys.argv[1])), sys.argv[2]
bad = [p.get("policy", "?") for p in res["policies"] if not p.get("ok") or not p.get("step_mean_ns")]
# the disk's time in flight per direction: some wherever it moved bytes
bad += ["%s: NVMe bytes %s, in flight %s ns" % (p.get("policy", "?"), p["link_bytes"][2:],
                                                p.get("disk_busy_ns"))
        for p in res["policies"] if p.get("ok") and
        any(b and not t for b, t in zip(p["link_bytes"][2:], p.get("disk_busy_ns", [0, 0])))]
print("%s: %d policies, %s" % (name, len(res["policies"]),
                               "failed: " + ", ".join(bad) if bad else "all ran"))
sys.exit(1 if bad or len(res["policies"]) != 4 else 0)
PY
}

# detached ops hold 256 MiB of a 293 MiB pinned budget; staged 4 requests of
# 64 KiB at a time (--queue-depth, --io-size reach the library)
run held --hidden 1024 --vocab 16384 --pinned-budget 60% --queue-depth 4 --io-size 64 --verbose \
	--timeline "$T/held-tl.json"
# the model (which picks the Adam schedule) takes the disk's rates measured
# on the swap file, not the planner's defaults; so do the policies' caches,
# which do not measure the disk again
if ! grep -qE "NVMe read [0-9.]+, write [0-9.]+ \(both at once [0-9.]+ in the model\): memcpy measured here, NVMe measured on the swap file" "$T/held.txt"; then
	echo "FAIL: held: the model's disk rates were not measured on the swap file"
	grep "links" "$T/held.txt"
	fail=1
fi
for what in "NVMe read" "NVMe write" "NVMe read \+ write at once"; do
	m=$(grep -cE "cache: $what [0-9.]+ GB/s \(measured\)" "$T/held.txt")
	g=$(grep -cE "cache: $what [0-9.]+ GB/s \(given\)" "$T/held.txt")
	if [ "$m" != 1 ] || [ "$g" != 4 ]; then
		echo "FAIL: held: $what measured $m times (want 1) and given to $g caches (want 4)"
		fail=1
	fi
done
# each policy says what the disk gave against the rates it planned for
n=$(grep -cE "the disk: reads in flight [0-9.]+ ms a step \([0-9.]+ GB/s\), writes [0-9.]+ \([0-9.]+ GB/s\), both at once [0-9.]+; planned at" "$T/held.txt")
if [ "$n" != 4 ]; then
	echo "FAIL: held: $n lines of what the disk gave (want 4, one a policy)"
	fail=1
fi
if ! grep -q "stage: backend .*queue depth 4, 64 KiB requests" "$T/held.txt"; then
	echo "FAIL: held: no stage line with --queue-depth 4 --io-size 64"
	grep "stage:" "$T/held.txt"
	fail=1
fi
# the timeline: NVMe jobs in flight at once go on tracks of their own, so no
# two spans of a track overlap (Perfetto drops slices that do)
python3 - "$T/held-tl.json" <<'PY' || fail=1
import collections, json, re, sys

ev = json.load(open(sys.argv[1]))["traceEvents"]
# tracks by process (1: the executor, 2: the timing model) and thread
names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
         if e["ph"] == "M" and e["name"] == "thread_name"}
procs = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
tracks = collections.defaultdict(list)
for e in ev:
    if e["ph"] == "X":
        tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["cat"]))
bad = []
for tid, spans in tracks.items():
    spans.sort()
    if tid not in names:
        bad.append("spans on track %s, which has no name" % (tid,))
    for a, b in zip(spans, spans[1:]):
        if b[0] < a[1] - 0.001:
            bad.append("%s: a span at %.3f starts inside one at %.3f-%.3f" %
                       (names.get(tid), b[0], a[0], a[1]))
    if any(s[2] != names.get(tid, "").rstrip(" 0123456789") for s in spans):
        bad.append("track %s holds other kinds" % names.get(tid))
nvme = sorted(n for t, n in names.items() if t[0] == 1 and n.startswith("NVMe") and tracks.get(t))
print("timeline: NVMe tracks used: %s" % ", ".join(nvme))
if "NVMe read" not in nvme or "NVMe write" not in nvme:
    bad.append("no NVMe read or write spans")
# a worker waits for its next job's dependencies only with nothing of its
# own in flight (the CPU Adam's write-backs wait for their op)
for kind in ("NVMe read", "NVMe write"):
    own = [s for t, v in tracks.items()
           if t[0] == 1 and names.get(t, "").rstrip(" 0123456789") == kind for s in v]
    for w in (s for t, v in tracks.items() if t[0] == 1 and names.get(t) == kind + " wait"
              for s in v):
        if any(a < w[1] - 0.001 and w[0] < b - 0.001 for a, b, _ in own):
            bad.append("%s wait at %.3f-%.3f overlaps a %s in flight" % (kind, w[0], w[1], kind))
            break
if "NVMe write wait" not in nvme:
    bad.append("no NVMe write wait spans (the write-backs of the CPU Adam's states wait for it)")
# a wait names what it waited for last: a plan op of a tensor, an op's end,
# copies, or (a disk taking turns) the other worker's jobs
why = [e["args"].get("waited for") for e in ev
       if e["ph"] == "X" and e["cat"].endswith(" wait") and "waited for" in e["args"]]
form = re.compile(r"((H2D|GPU alloc|D2H|GPU drop|NVMe read|pinned alloc|NVMe write|pinned drop) "
                  r"of tensor \d+|(host|GPU) op ending at access \d+|copies on the GPU's streams|"
                  r"its turn on the disk)$")
if not why:
    bad.append("no NVMe wait says what it waited for")
bad += ["an NVMe wait's \"waited for\" reads %r" % w for w in why if not form.match(w)][:3]
# beside it, the timing model's step for the same plan (pid 2): its staging,
# and every host op a wait names is one of its ops (by END access)
model = {e["cat"] for e in ev if e["ph"] == "X" and e["pid"] == 2}
hostops = {e["args"]["access"] for e in ev if e["ph"] == "X" and e["pid"] == 2
           and e["cat"] == "host op"}
if not procs.get(2, "").startswith("timing model") or not {"NVMe read", "NVMe write"} <= model:
    bad.append("no timing model beside the executor (process %r, kinds %s)" % (procs.get(2), model))
for w in why:
    m = re.match(r"host op ending at access (\d+)$", w)
    if m and int(m.group(1)) not in hostops:
        bad.append("a wait names access %s, not a host op's end" % m.group(1))
        break
# the caller's long tencache calls (100 us or more), named for the tensor
calls = [e for e in ev if e["ph"] == "X" and e["pid"] == 1 and e["cat"] == "tencache call"]
print("timeline: %d tencache calls of 100 us or more" % len(calls))
bad += ["a tencache call span of %.3f us" % e["dur"] for e in calls if e["dur"] < 99.999][:3]
for b in bad[:10]:
    print("FAIL: timeline:", b)
sys.exit(1 if bad else 0)
PY
# timeline-busy.py splits the disk's idle time by what its workers did, and
# sets each span beside the model's
python3 "$TOP/tools/gpu/timeline-busy.py" "$T/held-tl.json" > "$T/busy.txt" || fail=1
python3 - "$T/busy.txt" <<'PY' || fail=1
import re, sys

txt = open(sys.argv[1]).read()
win = float(re.search(r": ([0-9.]+) ms\n", txt).group(1))
busy = float(re.search(r"disk \(either\)\s+busy\s+([0-9.]+) ms", txt).group(1))
m = re.search(r"disk idle\s+([0-9.]+) ms: .*dependencies ([0-9.]+) ms .*queued ([0-9.]+) ms", txt)
print("\n".join(l.strip() for l in txt.splitlines() if "disk idle" in l or "waited for last" in l))
if not m or abs(busy + float(m.group(1)) - win) > 0.2 or \
        abs(float(m.group(2)) + float(m.group(3)) - float(m.group(1))) > 0.2:
    print("FAIL: timeline-busy: the disk's busy and idle time do not add up to the step")
    sys.exit(1)
# the caller's time in long tencache calls, within the time no job was queued
c = re.search(r"no job queued, the caller was in a tencache call \(>= 100 us\) for ([0-9.]+) ms; "
              r"such calls took ([0-9.]+) ms", txt)
if c:
    print(c.group(0))
if c and (float(c.group(1)) > float(m.group(3)) + 0.2 or float(c.group(1)) > float(c.group(2)) + 0.2):
    print("FAIL: timeline-busy: more caller time in calls than the disk had no job, or than the calls took")
    sys.exit(1)
if not re.search(r"^  timing model \([0-9.]+ ms/step\): ", txt, re.M) or \
        not re.search(r"^    NVMe read +\d+ spans: median +[-+]?[0-9.]+ ms", txt, re.M):
    print("FAIL: timeline-busy: no timing model, or no NVMe reads set beside the model's")
    sys.exit(1)
PY
# the plans keep tensors on the GPU whose pinned copies they stage
run gpu-staged --hidden 2048 --vocab 32768 --pinned-budget 75%

"$BENCH" replay --host --model opt-13b --layers 1 --hidden 2048 --vocab 50272 \
	--gpu-budget 99% --nvme "$T/swap" --pinned-budget 50% > "$T/small.txt" 2>&1
rc=$?
cat "$T/small.txt"
if [ "$rc" != 2 ] || ! grep -q "below the largest CPU optimizer op.*raise --pinned-budget" "$T/small.txt"; then
	echo "FAIL: a pinned budget below the largest optimizer op: exit $rc, want 2 and the advice"
	fail=1
fi
# a swap file that cannot be made: the replay stops at measuring it, says
# why, and exits 1
"$BENCH" replay --host --model opt-13b --layers 1 --hidden 1024 --vocab 16384 --gpu-budget 99% \
	--batch 2 --adam-rate 5e9 --nvme "$T/no-such-dir/swap" --pinned-budget 60% --overlap \
	> "$T/nodir.txt" 2>&1
rc=$?
if [ "$rc" != 1 ] || ! grep -q "measuring the swap file's rates: No such file or directory" "$T/nodir.txt"; then
	echo "FAIL: a swap file in a missing directory: exit $rc, want 1 and the reason"
	cat "$T/nodir.txt"
	fail=1
fi
exit $fail
