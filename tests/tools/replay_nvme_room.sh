#!/bin/bash
# replay_nvme_room.sh - where a plan's pinned ranges do not lay out in the
# pool, the next plan keeps out about what the layout lacked, not 1/16 of
# the pinned budget. OPT-13B at 25% with NVMe, scaled down for host mode
# (20 layers, a quarter of the hidden size and of the vocabulary, 80%
# pinned). First fit packs these plans 1-3% past their peak. Keeping 1/16
# out moved ZeRO-like's and 10Cache's staging to 857 MB each way per step,
# ours' to 798 MB; keeping out what the layout lacked, 647, 726 and 563 MB;
# with best fit and a third order tried too (the least height kept out),
# 594, 621 and 520 MB. Each policy's plan must be made for at least 97% of
# the pinned budget (10Cache's was 96.0% with the two first-fit orders),
# laid out, with no re-plan mid-step. Exit 0 pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-nvme-room /var/tmp	# O_DIRECT: not tmpfs

run_replay "^(zero-inf|10cache) |pinned budget|error" \
	--host --model opt-13b --layers 20 --hidden 1280 --vocab 12568 \
	--gpu-budget 25% --pinned-budget 80% --nvme "$T/swap" --nvme-budget 3G \
	--batch 2 --adam-rate 5e9 --overlap --warmup 2 --steps 1 --policies zero,10cache
python3 - "$T/r.json" <<'PY'
import json, sys

res = json.load(open(sys.argv[1]))
budget = res["cache"]["pinned_budget"]
bad = []
for p in res["policies"]:
    name = p.get("policy", "?")
    share = p.get("exec_plan_pinned_bytes", 0) / budget
    print("%s: ok %s, plan made for %.1f%% of the pinned budget, pinned layouts %d, replans %d, "
          "NVMe read %.1f MB/step" % (name, p.get("ok"), 100 * share, p.get("pinned_layouts", 0),
                                      p["replans"], p["link_bytes"][2] / 1e6))
    if not p.get("ok") or not p.get("step_mean_ns"):
        bad.append(name + " did not run")
    if share < 0.97:
        bad.append("%s planned for %.1f%% of the pinned budget, want >= 97%%" % (name, 100 * share))
    if p.get("pinned_layouts", 0) < 1:
        bad.append(name + " ran no plan with laid-out pinned ranges")
    if p["replans"]:
        bad.append(name + " re-planned mid-step")
if len(res["policies"]) != 2:
    bad.append("%d policies, want 2" % len(res["policies"]))
print("FAIL: " + "; ".join(bad) if bad else "each plan kept out only its layout's room")
sys.exit(1 if bad else 0)
PY
