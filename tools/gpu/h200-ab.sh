#!/bin/bash
# h200-ab.sh - the main job's replay on two trees of the code on one GPU
# machine, one after the other, as an A/B: this tree ("new") and another
# (OLD, a copy of an older commit: git archive COMMIT | tar -x -C OLD, carried
# to the machine as untracked files). Both plan for the same disk: the link
# rates are given (BW, passed as --bw), since each run measuring the swap
# file on its own planned for rates 1.6-2.2 GB/s apart on one H100 machine
# (session 29). ORDER=old-first runs the old tree first. After each run,
# timeline-busy.py's report goes next to its log and the timelines and plots
# are deleted (they are large). If a run's first planned step has not
# begun 70 s after its plan, the threads' stacks are taken (cuda-gdb -p)
# once, as for session 28's hang. WARM=1 first runs this tree once more
# (warm.log, not compared): a fresh machine's first replay is slower (its
# disk: 1.87 against 2.22-2.29 GB/s in session 32). TIMELINE=0 (read by
# h200-replay.sh) leaves the timelines out.
#   bash tools/gpu/h200-ab.sh OLD OUTDIR
# RUNS, LIMIT13, GRACE, PINNED, NVME_BUDGET and RESERVE_GIB go to
# h200-replay.sh (defaults: 13b-25, 150, 60, 80%, 52G, 82); POLICIES the
# replay's policies (ours); BW its --bw (54.6,55.0,2.0,3.0,2.4: an H100
# machine's links and disk as measured in sessions 27-29).
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OLD=${1:?usage: h200-ab.sh OLD_TREE OUTDIR}
O=${2:?usage: h200-ab.sh OLD_TREE OUTDIR}
OLD=$(cd "$OLD" && pwd) || exit 1
[ -f "$OLD/tools/gpu/h200-replay.sh" ] ||
	{ echo "h200-ab: $OLD holds no tools/gpu/h200-replay.sh: not a tree of this project"; exit 1; }
mkdir -p "$O"
export PATH=$PATH:/usr/local/cuda/bin
[ -e "$OLD/.devdeps" ] || ln -sfn "$TOP/.devdeps" "$OLD/.devdeps"	# headers and libraries
BW=${BW:-54.6,55.0,2.0,3.0,2.4}
ARGS="--batch 2 --adam-rate 5e9 --warmup 2 --steps 2 --policies ${POLICIES:-ours} --verbose --bw $BW"

# stacks of a replay whose first planned step does not begin
watch() {	# LOG NAME
	local p=''
	for _ in $(seq 1 400); do sleep 1; grep -q "ops (tencache) in" "$1" 2>/dev/null && break; done
	for _ in $(seq 1 70); do sleep 1; grep -q "step 2/" "$1" && return; done
	p=$(pgrep -x tencache-bench | head -1)
	[ -n "$p" ] || return
	{ date; cat "/proc/$p/io"
	  timeout 60 cuda-gdb -p "$p" -batch -ex "thread apply all bt" 2>&1 |
		grep -v '^\[New\|^warning' | head -400
	} > "$O/$2.stacks" 2>&1
}

run() {	# TREE NAME
	echo "==== $(date -u +%T) $2 ($1)"
	RESERVE_GIB=${RESERVE_GIB:-82} RUNS=${RUNS:-13b-25} PINNED=${PINNED:-80%} \
	NVME_BUDGET=${NVME_BUDGET:-52G} LIMIT13=${LIMIT13:-150} GRACE=${GRACE:-60} DECIDE=0 \
	REPLAY_ARGS="$ARGS" bash "$1/tools/gpu/h200-replay.sh" "$O/$2" > "$O/$2.log" 2>&1 &
	local pid=$!
	watch "$O/$2.log" "$2" &
	local w=$!
	wait $pid
	kill $w 2> /dev/null
	wait $w 2> /dev/null
	grep -E "step [0-9]+/|measured:|the disk:|made for|timed:|disk read at" "$O/$2.log" | tail -10
	for t in "$O/$2"/timeline*.json; do
		[ -f "$t" ] && python3 "$TOP/tools/gpu/timeline-busy.py" "$t" > "$O/$2.busy.txt" 2>&1
	done
	find "$O/$2" \( -name 'timeline*.json' -o -name '*.png' \) -delete
}

[ "${WARM:-0}" = 1 ] && run "$TOP" warm
if [ "${ORDER:-new-first}" = old-first ]; then
	run "$OLD" old
	run "$TOP" new
else
	run "$TOP" new
	run "$OLD" old
fi
echo "==== $(date -u +%T) done: $O/{new,old}.log and .busy.txt"
