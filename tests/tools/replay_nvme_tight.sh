#!/bin/bash
# replay_nvme_tight.sh - OPT-13B at 10% with NVMe, scaled down for host mode:
# its 20 layers at a quarter of the hidden size and a quarter of the
# vocabulary, a GPU budget 3% over the largest op, 80% pinned and a swap of
# under half the tensors. On the H100 the full-size run failed in the
# profiling step ("no GPU space for 209715200 bytes ... largest free
# 200380416": the op's tensors scattered by LRU eviction). Scaled down it
# failed there too, then the baselines (no plan fits their allocations:
# on demand) filled the swap with the slots of stale values, and ours'
# plan found the swap full of values it keeps pinned. Every policy must run
# all its steps. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-nvme-tight /var/tmp	# O_DIRECT: not tmpfs

run_replay "^(tencache|zero-inf) |error" \
	--host --model opt-13b --layers 20 --hidden 1280 --vocab 12568 \
	--gpu-budget 10.5% --pinned-budget 80% --nvme "$T/swap" --nvme-budget 3G \
	--batch 2 --adam-rate 5e9 --overlap --warmup 2 --steps 1 --policies ours,zero
python3 - "$T/r.json" <<'PY'
import json, sys

res = json.load(open(sys.argv[1]))
bad = []
for p in res["policies"]:
    name = p.get("policy", "?")
    print("%s: ok %s, step %.1f ms, planned steps %d" %
          (name, p.get("ok"), (p.get("step_mean_ns") or 0) / 1e6, p["planned_steps"]))
    if not p.get("ok") or not p.get("step_mean_ns"):
        bad.append(name + " did not run")
if len(res["policies"]) != 2:
    bad.append("%d policies, want 2" % len(res["policies"]))
print("FAIL: " + "; ".join(bad) if bad else "every policy ran its steps")
sys.exit(1 if bad else 0)
PY
