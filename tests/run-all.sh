#!/bin/bash
# run-all.sh - build everything and run every test suite; the last line is
# "N passed, N failed, N skipped" over all of them.
#   --install   first install the Debian packages (tests/deps.sh, needs root)
# Suites: runtime and planner programs (tests/runner.sh), GPU programs (skip
# without a GPU), and the kernel module in a QEMU-booted Debian kernel with its
# kselftests and VM benchmarks (tests/vm/run-vm.sh).
set -uo pipefail
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$TOP"
[ "${1:-}" != --install ] || bash tests/deps.sh || exit 1
LOG=$(mktemp -d /tmp/tencache-test.XXXXXX)
step() { echo "==== $*"; }

step "build (library, tools, tests)"
if ! make -s lib tools > "$LOG/build.log" 2>&1 || ! make -s -C tests >> "$LOG/build.log" 2>&1; then
	cat "$LOG/build.log"
	echo "not ok - build" > "$LOG/build.tap"
fi
make -s -C tests/gpu >> "$LOG/build.log" 2>&1 || echo "not ok - build tests/gpu" >> "$LOG/build.tap"

for suite in runtime plan gpu; do
	step "$suite tests"
	bins=$(ls -d build/tests/$suite/* 2> /dev/null)
	if [ -z "$bins" ]; then
		echo "ok - $suite: nothing built # SKIP" | tee "$LOG/$suite.tap"
		continue
	fi
	# shellcheck disable=SC2086
	bash tests/runner.sh $bins | tee "$LOG/$suite.tap"
done

step "tools: the main job (replay) and the decide benchmark, smoke runs (tests/tools)"
bash tests/runner.sh tests/tools/replay_smoke.sh tests/tools/replay_overlap.sh tests/tools/replay_model_only.sh tests/tools/replay_fallback.sh tests/tools/replay_nvme_overlap.sh tests/tools/replay_nvme_layout.sh tests/tools/replay_nvme_tight.sh tests/tools/replay_nvme_room.sh tests/tools/replay_gpu_local.sh tests/tools/replay_killed.sh tests/tools/decide_smoke.sh tests/tools/bench_io.sh tests/tools/stack_sample.sh | tee "$LOG/tools.tap"

step "python tests (tests/python/run.sh)"
TEST_TIMEOUT=900 bash tests/runner.sh tests/python/run.sh | tee "$LOG/python.tap"

step "kernel module in QEMU (tests/vm/run-vm.sh)"
# the runtime's module-backed tests run in the guest too, linked statically
mkdir -p build/vm
extra=""
for t in tests/runtime/module.c; do
	b=build/vm/runtime-$(basename "$t" .c)
	if gcc -O2 -static -std=gnu11 -pthread -Iinclude -Itests/helpers -o "$b" "$t" \
		build/libtencache.a -luring -lnuma -ldl -lpthread -lm >> "$LOG/build.log" 2>&1; then
		extra+=" $TOP/$b"
	else
		echo "not ok - static build of $t for the VM" >> "$LOG/build.tap"
	fi
done
EXTRA_TESTS="$extra" bash tests/vm/run-vm.sh 2>&1 | tee "$LOG/vm.out" | grep -vE '^(#  |#   |# [A-Z][a-z]+ )' 
grep -E '^(not )?ok ' "$LOG/vm.out" > "$LOG/vm.tap" || true
grep -q '^kmodvm: .* passed' "$LOG/vm.out" || echo "not ok - QEMU run did not finish" >> "$LOG/vm.tap"

cat "$LOG"/*.tap > "$LOG/all.tap" 2> /dev/null
skipped=$(grep -cE '^ok .*# SKIP' "$LOG/all.tap")
passed=$(($(grep -cE '^ok ' "$LOG/all.tap") - skipped))
failed=$(grep -cE '^not ok ' "$LOG/all.tap")
if [ "$failed" != 0 ]; then
	echo "==== failures"
	grep -E '^not ok ' "$LOG/all.tap"
fi
echo "logs in $LOG"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
