#!/bin/bash
# h200-replay.sh - the main job on the GPU test machine (as root): build, then
# tencache-bench replay on OPT-6.7B at GPU budgets of 10, 25 and 50% of its
# fp16 params and on OPT-13B (NVMe on) at the same budgets, and the decide
# benchmark; stdout, JSON results, Perfetto timelines (every policy's) and PNG plots (when
# matplotlib is there) go to OUTDIR. Made to end within 8 minutes: each
# replay has a --time-limit (an equal share per policy) and a hard timeout.
#   bash tools/gpu/h200-replay.sh [OUTDIR] 2>&1 | tee OUTDIR/run.log
# OUTDIR defaults to $OUT, else /tmp/tencache-h200-replay. It builds the shared
# library too (build/libtencache.so), which tests/python/test_offload_gpu.py loads.
#
# Sizes (the machine: 125 GiB RAM, 64 GiB free disk, no NVMe device: the swap
# file is on the virtio disk, ~1.2 GB/s read, ~2 GB/s write):
#  - OPT-6.7B is the full model (32 layers): 107 GB of fp16/fp32 state, all of
#    it in pinned memory.
#  - OPT-13B has 209 GB of state, more than RAM plus disk. The default run
#    (13b8-25) takes 8 of its 40 layers with full-size shapes (~45 GB), half
#    of it pinned and the rest in the swap file. The older 13b-* runs (20
#    layers, 98% pinned, an 8 GiB swap share) can still be picked with RUNS;
#    at 10% the budget is just above the largest op (the lm-head/embedding).
#  - One 101 GiB reservation (tencache-ctl reserve; RESERVE=0: off) serves
#    every pool, so a policy's start maps faulted pages instead of faulting
#    ~100 GiB again; released and nr_hugepages restored at exit.
#  - batch 2 x 1024 tokens, CPU Adam at 5e9 params/s (the host op's time,
#    spent by the replay's caller thread), 2 warm-up (profile + first plan)
#    and 2 measured steps per policy.
# REPLAY_ARGS replaces the common replay options; RUNS picks runs by name
# (default "6.7b-10 6.7b-25 6.7b-50 13b8-25"); OVERLAP=0 replays the CPU Adam
# after backward instead of beside it (--overlap); LIMIT67 / LIMIT13 the seconds per
# run (105 / 90); GRACE the seconds a replay may run past its limit before
# it is killed (default 20: a 13b-* run, whose steps and plan changes take
# 8-45 s, lost its summary at 20 and wants 60); PINNED and NVME_BUDGET the
# 13b-* runs' pinned share and swap file (default 98% and 8G: at 80%, 44G);
# DECIDE=0 skips the decide benchmark; TIMELINE=0 leaves out the Perfetto
# timelines, whose two timing events per copy add to the driver's command
# queue (the 13B caller waited for room in it: session 32).
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$TOP"
O=${1:-${OUT:-/tmp/tencache-h200-replay}}
mkdir -p "$O"
step() { echo "==== $(date -u +%T) $*"; }
T0=$(date +%s)
COMMON=${REPLAY_ARGS:---batch 2 --adam-rate 5e9 --warmup 2 --steps 2}
# the CPU Adam beside backward, as the trainer's default runs it (OVERLAP=0: after it)
[ "${OVERLAP:-1}" = 1 ] && COMMON="$COMMON --overlap"
RUNS=${RUNS:-6.7b-10 6.7b-25 6.7b-50 13b8-25}
NVME=$TOP/tencache-nvme.swap

step "machine"
uname -a
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1
grep -E 'MemTotal|MemAvailable' /proc/meminfo
df -h "$TOP" | tail -1
nproc
HP=/proc/sys/vm/nr_hugepages
NR0=$(cat $HP 2>/dev/null || echo 0)
MOUNTED=
PY=/usr/bin/python3
[ -x /opt/torch/.venv/bin/python3 ] && /opt/torch/.venv/bin/python3 -c 'import matplotlib' 2>/dev/null &&
	PY=/opt/torch/.venv/bin/python3
$PY -c 'import matplotlib' 2>/dev/null && echo "plots: $PY" || echo "plots: no matplotlib here (JSON only)"

step "build"
D=$TOP/.devdeps
export C_INCLUDE_PATH=$D/include CPLUS_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}	# libcjson.so.1
BENCH=$TOP/build/tools/tencache-bench
if ! make -s -j16 -C runtime > "$O/build.log" 2>&1 ||
	! make -s -C tools >> "$O/build.log" 2>&1; then
	tail -30 "$O/build.log"
	BENCH=$D/prebuilt/tools/tencache-bench
	[ -x "$BENCH" ] || { echo "build failed and no $BENCH"; exit 1; }
	echo "native build failed: using $BENCH (prebuilt; it must hold decide)"
fi
CTL=$TOP/build/tools/tencache-ctl
# One reservation (tencache-ctl reserve) for every run: each policy's pool maps
# pages faulted once instead of faulting and zeroing ~100 GiB again (RESERVE=0:
# off). Undone at exit.
cleanup() {
	[ -x "$CTL" ] && "$CTL" release > /dev/null 2>&1 && echo "reservation released"
	echo "$NR0" > $HP 2>/dev/null
	[ -n "$MOUNTED" ] && umount "$MOUNTED"
	rm -f "$NVME"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "${RESERVE:-1}" = 1 ] && [ -x "$CTL" ]; then
	step "reserve ${RESERVE_GIB:=101} GiB of 2 MiB huge pages for the pools"
	if ! "$CTL" status | grep -q '^hugetlbfs mounts with 2 MiB pages: [1-9]'; then
		mkdir -p /dev/hugepages && mount -t hugetlbfs -o pagesize=2M none /dev/hugepages &&
			MOUNTED=/dev/hugepages
	fi
	echo $((RESERVE_GIB * 512 + 16)) > $HP
	"$CTL" reserve "${RESERVE_GIB}G" --quiet && echo "reserved in $(($(date +%s) - T0)) s in all" ||
		echo "no reservation: the pools fault their pages"
fi
export TENCACHE_PLOT_SCRIPT=$TOP/tools/plot_replay.py
export PATH=$(dirname "$PY"):$PATH	# replay plots with the python3 on PATH
echo "built in $(($(date +%s) - T0)) s"

if [ "${DECIDE:-1}" = 1 ]; then
	step "decide (host mode, then GPU)"
	timeout 25 "$BENCH" decide -o "$O/decide.txt"; echo "decide host: exit $?"
	timeout 45 "$BENCH" decide --gpu -o "$O/decide.txt"; echo "decide gpu: exit $?"
fi

# one replay: NAME SECONDS(time limit) ARGS...
replay() {
	local name=$1 limit=$2
	local tl=(--timeline "$O/timeline-$name.json" --timeline-all)
	shift 2
	[ "${TIMELINE:-1}" = 0 ] && tl=()
	step "replay $name ($*)"
	# shellcheck disable=SC2086
	timeout -k 5 $((limit + ${GRACE:-20})) "$BENCH" replay $COMMON --time-limit "$limit" "$@" \
		-o "$O/replay-$name.json" "${tl[@]}" \
		--plot "$O/replay-$name.png" 2>&1 | tee "$O/replay-$name.txt"
	echo "replay $name: exit ${PIPESTATUS[0]} after $(($(date +%s) - T0)) s in all"
	rm -f "$NVME"
}
for r in $RUNS; do
	case $r in
	6.7b-*) replay "opt-6.7b-${r#6.7b-}" "${LIMIT67:-105}" --model opt-6.7b --gpu-budget "${r#6.7b-}%" ;;
	13b-*) replay "opt-13b-${r#13b-}" "${LIMIT13:-90}" --model opt-13b --layers 20 \
		--gpu-budget "${r#13b-}%" --nvme "$NVME" --pinned-budget "${PINNED:-98%}" \
		--nvme-budget "${NVME_BUDGET:-8G}" ;;
	13b8-*) replay "opt-13b-8layers-${r#13b8-}" "${LIMIT13:-90}" --model opt-13b --layers 8 \
		--gpu-budget "${r#13b8-}%" --nvme "$NVME" --pinned-budget 50% ;;
	*) echo "unknown run $r" ;;
	esac
done
step "done in $(($(date +%s) - T0)) s"
ls -la "$O"
