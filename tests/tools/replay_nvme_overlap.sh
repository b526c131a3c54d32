#!/bin/bash
# replay_nvme_overlap.sh - the CPU Adam detached beside backward (--overlap)
# with an NVMe tier, in host mode, on OPT-13B's first layer with smaller
# shapes. The caller settles a detached op only when it next needs one of its
# tensors, so finished ops keep their optimizer state held while later ops
# need pinned space: the on-demand steps must push those out (or wait for a
# running op), and values a plan keeps on the GPU for good whose pinned copy
# the plan stages out must get NVMe space. Every policy must run its steps.
# --queue-depth and --io-size set the staging's requests.
# A pinned budget below the largest optimizer op is refused up front, with
# what to do. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-nvme-overlap /var/tmp	# O_DIRECT: not tmpfs
fail=0

run() {	# NAME ARGS...: every policy must end with a step time, not an error
	local name=$1
	shift
	"$BENCH" replay --host --model opt-13b --layers 1 --gpu-budget 99% --nvme "$T/swap" \
		--batch 2 --adam-rate 5e9 --warmup 2 --steps 2 --overlap "$@" \
		-o "$T/$name.json" > "$T/$name.txt" 2>&1
	local rc=$?
	grep -E "^(tencache|lru|zero-inf|10cache) |error" "$T/$name.txt"
	if [ "$rc" != 0 ]; then
		echo "FAIL: $name: replay exited $rc"
		fail=1
		return
	fi
	python3 - "$T/$name.json" "$name" <<'PY' || fail=1
import json, sys

res, name = json.load(open(sys.argv[1])), sys.argv[2]
bad = [p.get("policy", "?") for p in res["policies"] if not p.get("ok") or not p.get("step_mean_ns")]
print("%s: %d policies, %s" % (name, len(res["policies"]),
                               "failed: " + ", ".join(bad) if bad else "all ran"))
sys.exit(1 if bad or len(res["policies"]) != 4 else 0)
PY
}

# detached ops hold 256 MiB of a 293 MiB pinned budget; staged 4 requests of
# 64 KiB at a time (--queue-depth, --io-size reach the library)
run held --hidden 1024 --vocab 16384 --pinned-budget 60% --queue-depth 4 --io-size 64 --verbose
if ! grep -q "stage: backend .*queue depth 4, 64 KiB requests" "$T/held.txt"; then
	echo "FAIL: held: no stage line with --queue-depth 4 --io-size 64"
	grep "stage:" "$T/held.txt"
	fail=1
fi
# the plans keep tensors on the GPU whose pinned copies they stage
run gpu-staged --hidden 2048 --vocab 32768 --pinned-budget 75%

"$BENCH" replay --host --model opt-13b --layers 1 --hidden 2048 --vocab 50272 \
	--gpu-budget 99% --nvme "$T/swap" --pinned-budget 50% > "$T/small.txt" 2>&1
rc=$?
cat "$T/small.txt"
if [ "$rc" != 2 ] || ! grep -q "below the largest CPU optimizer op.*raise --pinned-budget" "$T/small.txt"; then
	echo "FAIL: a pinned budget below the largest optimizer op: exit $rc, want 2 and the advice"
	fail=1
fi
exit $fail
