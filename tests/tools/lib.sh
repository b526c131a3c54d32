# lib.sh - the common start of the tools tests, sourced as
#   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh" NAME [PARENT]
# Sets TOP, BENCH (the built tencache-bench, or $BENCH as given) and T, a
# scratch directory under PARENT (default /tmp) named for NAME and removed
# at exit; exits 1 when the bench or python3 (the JSON checks) is missing.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH=${BENCH:-$TOP/build/tools/tencache-bench}
T=$(mktemp -d "${2:-/tmp}/tencache-$1.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
[ -x "$BENCH" ] || { echo "no $BENCH: run make lib tools first"; exit 1; }
command -v python3 > /dev/null || { echo "python3 is needed to check the JSON"; exit 1; }

# refused PATTERN ARGS...: tencache-bench ARGS must exit 2 (bad input, before
# any work) with a message matching the extended regex PATTERN; else FAIL, exit 1.
refused() {
	local pat=$1 out rc
	shift
	out=$(timeout 20 "$BENCH" "$@" 2>&1)
	rc=$?
	if [ "$rc" != 2 ] || ! grep -qE -- "$pat" <<< "$out"; then
		echo "FAIL: tencache-bench $*: exit $rc, want 2 and a message matching '$pat': $out"
		exit 1
	fi
}

# run_replay PATTERN ARGS...: tencache-bench replay ARGS, its JSON at $T/r.json
# and its output at $T/r.txt; prints the output's lines matching the extended
# regex PATTERN; else (a non-zero exit) FAIL with the output's tail, exit 1.
run_replay() {
	local pat=$1 rc
	shift
	"$BENCH" replay "$@" -o "$T/r.json" > "$T/r.txt" 2>&1
	rc=$?
	grep -E -- "$pat" "$T/r.txt"
	[ "$rc" = 0 ] || { echo "FAIL: replay exited $rc"; tail -20 "$T/r.txt"; exit 1; }
}
