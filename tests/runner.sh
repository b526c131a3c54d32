#!/bin/bash
# runner.sh - run test programs with a timeout each and print one TAP line per
# program: exit 0 = ok, 77 = ok # SKIP, anything else (timeout too) = not ok.
# Output of a failing or skipped program is shown indented below its line.
# Usage: runner.sh [-t SECONDS] PROGRAM [ARGS...] -- PROGRAM ... | runner.sh PROG...
# Env: TEST_TIMEOUT (default 120 s per program).
set -u
TIMEOUT=${TEST_TIMEOUT:-120}
n=0; fail=0
for prog in "$@"; do
	[ -x "$prog" ] || continue
	n=$((n + 1))
	name=${prog#"$PWD"/}
	log=$(mktemp)
	start=$(date +%s%N)
	timeout -k 5 "$TIMEOUT" "$prog" > "$log" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000))
	case $rc in
	0) echo "ok $n - $name (${ms} ms)" ;;
	77) echo "ok $n - $name # SKIP $(tail -n 1 "$log")" ;;
	124|137) echo "not ok $n - $name (timed out after ${TIMEOUT} s)"; fail=1 ;;
	*) echo "not ok $n - $name (exit $rc)"; fail=1 ;;
	esac
	if [ "$rc" != 0 ] || [ -n "${VERBOSE:-}" ]; then
		sed 's/^/    /' "$log" | tail -n 40
	fi
	rm -f "$log"
done
exit $fail
