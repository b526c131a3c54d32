#!/bin/bash
# replay_gpu_local.sh - a plan whose GPU allocations lay out only with less
# room than the budget tries the full budget with less room only where the
# layout failed (setup.c plan_local), and runs it only where the timing
# model finds it faster. OPT-13B at 25% with NVMe, scaled down for host
# mode (16 layers, a quarter of the hidden size and of the vocabulary, 80%
# pinned). Cutting room where the first failing residency lay, one at a
# time, never laid out here within its time; cutting it where every one
# failed lays out in 2-3 rounds. Before those, the plan with less room
# throughout and those for 1-2 steps of 1/64 less are candidates too, each
# with the pinned victim horizon searched again. The run must lay out at
# least one plan of each kind, and each choice must follow the models (the
# log's figures are rounded: equal ones may go either way). Exit 0 pass, 1
# fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-gpu-local /var/tmp	# O_DIRECT: not tmpfs

run_replay "only where the layout|room throughout|less than the GPU budget|error" \
	--host --model opt-13b --layers 16 --hidden 1280 --vocab 12568 \
	--gpu-budget 25% --pinned-budget 80% --nvme "$T/swap" --nvme-budget 3G \
	--batch 2 --adam-rate 5e9 --overlap --bw 50,50,1.8,2.6,2.0 --warmup 1 --steps 1 \
	--policies ours --verbose
python3 - "$T/r.txt" <<'PY'
import re, sys

pat = re.compile(r"only where the layout needed it: (\d+) plans laid out, the best modelled at "
                 r"([\d.]+) ms/step against ([\d.]+) with less room throughout: (it|that one) runs")
low = re.compile(r"less GPU room throughout: (\d+) plans for 0-\d+ steps of 1/64 less laid out, "
                 r"each with the pinned horizon searched again, "
                 r"the best modelled at ([\d.]+) ms/step against ([\d.]+) for the first: "
                 r"(it|the first) stands")
text = open(sys.argv[1]).read().splitlines()
lines = [m.groups() for m in map(pat.search, text) if m]
lows = [m.groups() for m in map(low.search, text) if m]
bad = []
if not lines:
    bad.append("no plan laid out with less room only where the layout failed")
if not lows:
    bad.append("no plan laid out with less room throughout, its horizon searched again")
for n, best, whole, which in lines:
    best, whole = float(best), float(whole)
    if int(n) < 1 or (best < whole and which != "it") or (best > whole and which == "it"):
        bad.append("%s plans, %s against %s ms/step: %s runs" % (n, best, whole, which))
for n, best, first, which in lows:
    best, first = float(best), float(first)
    if int(n) < 1 or best > first or (best < first and which != "it"):
        bad.append("%s lower plans, %s against %s ms/step: %s stands" % (n, best, first, which))
print("%d plans tried less room only where the layout failed, %d less room throughout"
      % (len(lines), len(lows)))
print("FAIL: " + "; ".join(bad) if bad else "each laid out, the model chose")
sys.exit(1 if bad else 0)
PY
