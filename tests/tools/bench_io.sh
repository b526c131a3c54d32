#!/bin/bash
# bench_io.sh - tencache-bench io on a real file (O_DIRECT, under /var/tmp):
# every figure of the staging grid, both ways at once beside taking turns,
# the baselines and the goal lines; its file is removed after. Bad queue
# depths and request sizes are refused up front. Not timed: the figures are
# the benchmark's to show. Exit 0 pass, 1 fail, 77 skip (no O_DIRECT there).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" bench-io /var/tmp
refused "usage: tencache-bench io" io -f "$T/f" -s 8 -q 300
refused "usage: tencache-bench io" io -f "$T/f" -s 8 -b 3
refused "usage: tencache-bench io" io -f "$T/f" -s 0
timeout 120 "$BENCH" io -f "$T/f" -s 8 -q 2,16 -b 256,1024 > "$T/out" 2>&1
rc=$?
cat "$T/out"
if [ "$rc" != 0 ] && grep -q "Invalid argument" "$T/out"; then
	echo "SKIP: /var/tmp refuses O_DIRECT"
	exit 77
fi
[ "$rc" = 0 ] || { echo "FAIL: io exited $rc"; exit 1; }
python3 - "$T/out" <<'PY' || exit 1
import re, sys

txt = open(sys.argv[1]).read()
rows = re.findall(r"^tencache stage +(\d+) +(\d+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+)$", txt, re.M)
bad = []
if sorted((int(q), int(b)) for q, b, *_ in rows) != [(2, 256), (2, 1024), (16, 256), (16, 1024)]:
    bad.append("stage rows %s, want QD 2 and 16 at 256 and 1024 KiB" % rows)
for q, b, w, r, both, turns in rows:
    w, r, both, turns = map(float, (w, r, both, turns))
    if min(w, r, both) <= 0:
        bad.append("QD %s %s KiB: a figure is 0" % (q, b))
    elif abs(turns - 2 / (1 / r + 1 / w)) > 0.002:
        bad.append("QD %s %s KiB: turns %.3f is not 2 / (1/read + 1/write)" % (q, b, turns))
if not re.search(r"^method +QD +req KiB +write +read +both +turns$", txt, re.M):
    bad.append("no header with both and turns")
for m in ("pread/pwrite", "libaio"):
    if not re.search(r"^%s +\d+ +\d+ +[\d.]+ +[\d.]+$" % m, txt, re.M):
        bad.append("no %s row" % m)
if "# goal: stage >= 90%" not in txt:
    bad.append("no goal line")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
[ ! -e "$T/f" ] || { echo "FAIL: io left its file behind"; exit 1; }
echo "bench io: pass"
