#!/bin/bash
# h200-pin.sh - the pin benchmark with the "pool reserved" column on a GPU test
# machine (as root), for issue 5's goal (a pool <= 1/10 of cudaHostAlloc):
# builds, mounts hugetlbfs at /dev/hugepages if no 2 MiB hugetlbfs is mounted,
# sets vm.nr_hugepages for 32 GiB + 32 MiB, runs
#   tencache-bench pin -g 1,8,32 -r 2     (PIN_ARGS replaces the arguments)
# which reserves N GiB before each reserved row (one-time cost reported on its
# own row) and releases it after; then releases anything left, restores
# nr_hugepages and unmounts what it mounted, even when interrupted. PAGES
# replaces the number of huge pages.
#   bash tools/gpu/h200-pin.sh [OUTDIR] 2>&1 | tee OUTDIR/pin.log
# OUTDIR defaults to $OUT, else /tmp/tencache-pin; bench.txt holds the figures.
# About 3 minutes on the H200 machine (16 CPUs, 128 GiB).
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$TOP"
O=${1:-${OUT:-/tmp/tencache-pin}}
mkdir -p "$O"
step() { echo "==== $(date -u +%T) $*"; }
HP=/proc/sys/vm/nr_hugepages
PAGES=${PAGES:-16400}	# 32 GiB + 32 MiB of 2 MiB pages
CTL=$TOP/build/tools/tencache-ctl
BENCH=$TOP/build/tools/tencache-bench
NR0=$(cat $HP)
MOUNTED=
PRE=	# a reservation of ours that existed before: never released here

cleanup() {
	step "cleanup"
	[ -x "$CTL" ] && [ -z "$PRE" ] && "$CTL" release > /dev/null 2>&1 &&
		echo "released a reservation left behind"
	echo "$NR0" > $HP
	[ -n "$MOUNTED" ] && umount "$MOUNTED" && echo "unmounted $MOUNTED"
	echo "nr_hugepages back to $(cat $HP)"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "machine"
uname -a
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
grep -E 'MemTotal|MemAvailable|Hugepagesize|HugePages_(Total|Free)' /proc/meminfo
nproc
[ "$(id -u)" = 0 ] || { echo "h200-pin.sh: run as root (hugetlbfs mount, nr_hugepages)"; exit 1; }

step "build"
D=$TOP/.devdeps
export C_INCLUDE_PATH=$D/include CPLUS_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}	# libnuma/libcjson .so
if ! { make -s -j16 -C runtime "$TOP/build/libtencache.a" && make -s -C tools; } > "$O/build.log" 2>&1 ||
	[ ! -x "$BENCH" ] || [ ! -x "$CTL" ]; then
	tail -30 "$O/build.log"
	echo "h200-pin.sh: build failed (the reserved column needs this branch's build)"
	exit 1
fi
grep -q "no nvcc" "$O/build.log" && echo "warning: built without nvcc: no cudaHostAlloc baseline"
echo "built"

"$CTL" status | grep -q "/tencache-uid$(id -u)[ -]" && PRE=1 &&
	echo "warning: you already hold a reservation: the bench skips the reserved column"

step "hugetlbfs mount with 2 MiB pages"
if ! "$CTL" status | grep -q '^hugetlbfs mounts with 2 MiB pages: [1-9]'; then
	mkdir -p /dev/hugepages
	mount -t hugetlbfs -o pagesize=2M none /dev/hugepages || exit 1
	MOUNTED=/dev/hugepages
	echo "mounted /dev/hugepages"
fi

step "reserve $PAGES 2 MiB huge pages (32 GiB + 32 MiB)"
t0=$(date +%s%N)
for i in 1 2 3 4 5; do
	echo $PAGES > $HP
	[ "$(cat $HP)" -ge $PAGES ] && break
	sleep 1
done
echo "nr_hugepages $(cat $HP) after $((($(date +%s%N) - t0) / 1000000)) ms"
"$CTL" status | tee "$O/status-before.txt"

step "pin"
# shellcheck disable=SC2086
timeout 250 "$BENCH" pin ${PIN_ARGS:--g 1,8,32 -r 2} -o "$O/bench.txt"
echo "pin: exit $?"
"$CTL" status > "$O/status-after.txt" 2>&1
step "done"
