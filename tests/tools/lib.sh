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
