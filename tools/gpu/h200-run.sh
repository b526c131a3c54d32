#!/bin/bash
# h200-run.sh - one run on a GPU test machine (as root): build, GPU tests,
# then the copy, pin and io benchmarks; everything is logged under OUTDIR.
#   bash tools/gpu/h200-run.sh [OUTDIR] 2>&1 | tee OUTDIR/run.log
# OUTDIR defaults to $OUT, else /tmp/tencache-h200.
# Build: natively (nvcc, make), with headers and static liburing/libnuma/libaio
# from .devdeps/{include,lib} when the machine lacks them; if that fails, the
# binaries in .devdeps/prebuilt (built elsewhere, same layout as build/).
# Huge pages: the GPU tests run once with none reserved (THP pools) and once
# with vm.nr_hugepages set (hugetlb pools); copy and pin run with them reserved.
# COPY_ARGS, PIN_ARGS and IO_ARGS replace each benchmark's arguments.
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$TOP"
O=${1:-${OUT:-/tmp/tencache-h200}}
mkdir -p "$O"
step() { echo "==== $(date -u +%T) $*"; }
HP=/proc/sys/vm/nr_hugepages

step "machine"
uname -a
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>&1
command -v nvcc make gcc
nvcc --version 2>&1 | tail -1
grep -E 'MemTotal|MemAvailable|Hugepagesize' /proc/meminfo
cat /sys/kernel/mm/transparent_hugepage/enabled
findmnt -no SOURCE,FSTYPE,OPTIONS / 2>&1
ls /dev/tencache 2>&1
ulimit -l

step "build"
D=$TOP/.devdeps
export C_INCLUDE_PATH=$D/include CPLUS_INCLUDE_PATH=$D/include LIBRARY_PATH=$D/lib
export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}	# libcjson.so.1
B=$TOP/build
if command -v make > /dev/null &&
	make -s -j8 -C runtime "$TOP/build/libtencache.a" > "$O/build.log" 2>&1 &&
	make -s -C tools >> "$O/build.log" 2>&1 && make -s -C tests/gpu >> "$O/build.log" 2>&1 &&
	[ -x build/tools/tencache-bench ] && [ -x build/tests/gpu/copy ]; then
	echo "built here"
else
	tail -20 "$O/build.log"
	B=$D/prebuilt
	echo "native build failed: using the prebuilt binaries in $B"
fi
BENCH=$B/tools/tencache-bench

step "GPU tests, no huge pages reserved (THP pools)"
echo 0 > $HP
VERBOSE=1 TEST_TIMEOUT=60 bash tests/runner.sh "$B"/tests/gpu/* | tee "$O/tests.tap"

step "reserve 2 MiB huge pages for 32 GiB + 32 MiB"
t0=$(date +%s%N)
for i in 1 2 3 4 5; do
	echo 16400 > $HP
	[ "$(cat $HP)" -ge 16400 ] && break
	sleep 1
done
echo "nr_hugepages $(cat $HP) after $((($(date +%s%N) - t0) / 1000000)) ms"

step "GPU tests, hugetlb pools"
VERBOSE=1 TEST_TIMEOUT=60 bash tests/runner.sh "$B"/tests/gpu/* | tee -a "$O/tests.tap"

step "copy"
timeout 150 "$BENCH" copy ${COPY_ARGS:--S -n 5} -o "$O/bench.txt"; echo "copy: exit $?"

step "pin"
timeout 240 "$BENCH" pin ${PIN_ARGS:--g 1,8,32 -r 2} -o "$O/bench.txt"; echo "pin: exit $?"
echo 0 > $HP

step "io"
RAW=$(findmnt -no SOURCE / 2>/dev/null)
[ -b "$RAW" ] || RAW=
timeout 160 "$BENCH" io -f "$TOP/tencache-io.dat" -s 1024 ${IO_ARGS:--q 1,4,16,32,64,128 -b 256,1024,4096} \
	${RAW:+-r "$RAW"} -o "$O/bench.txt"; echo "io: exit $?"
rm -f "$TOP/tencache-io.dat"
step "done"
