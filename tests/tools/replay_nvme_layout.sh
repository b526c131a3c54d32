#!/bin/bash
# replay_nvme_layout.sh - with an NVMe tier, the plan's pinned ranges are laid
# out ahead (setup.c pinned_place), in host mode, on OPT-13B's first 3 layers
# with a quarter of its hidden size and half its vocabulary: a 123 MiB
# embedding among 6-25 MiB layer tensors, as OPT-13B's 1 GiB embedding among
# its 100-400 MiB ones. Placed by best fit as they came, the staged values
# fragmented the pool and the plans of ours, ZeRO-like and 10Cache stopped
# mid-step ("pinned memory fragmented"), step after step. Every policy must
# run from its first plan to the end with no re-plan, its pinned ranges laid
# out, and its measured steps planned; ours' CPU Adam acquires must leave
# some NVMe read or pinned space to the worker (TENCACHE_ACQ_NOWAIT), and the
# copy streams queue their waits for host events (queued_host_waits). Exit 0
# pass, 1 fail.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" replay-nvme-layout /var/tmp	# O_DIRECT: not tmpfs

run_replay "^(tencache|zero-inf|10cache) |fragmented|error" \
	--host --model opt-13b --layers 3 --hidden 1280 --vocab 25136 \
	--gpu-budget 332M --pinned-budget 50% --nvme "$T/swap" --batch 2 --adam-rate 5e9 \
	--overlap --warmup 2 --steps 2 --policies ours,zero,10cache --verbose
python3 - "$T/r.json" <<'PY'
import json, sys

res = json.load(open(sys.argv[1]))
bad = []
for p in res["policies"]:
    name = p.get("policy", "?")
    print("%s: ok %s, replans %d, pinned layouts %d, planned steps %d" %
          (name, p.get("ok"), p["replans"], p.get("pinned_layouts", 0), p["planned_steps"]))
    if not p.get("ok") or not p.get("step_mean_ns"):
        bad.append(name + " did not run")
    if p["replans"]:
        bad.append(name + " re-planned mid-step")
    if p.get("pinned_layouts", 0) < 1:
        bad.append(name + " ran no plan with laid-out pinned ranges")
    if p["planned_steps"] < 3:	# the first plan's warm-up step and the 2 measured
        bad.append(name + " ran fewer than 3 planned steps")
    # the replay's worker runs the CPU Adam in order (TENCACHE_CACHE_DETACH_FIFO):
    # an NVMe read or pinned space an op still waited for is its wait, not the caller's
    print("%s: deferred waits %d, of which NVMe or pinned %d; stream waits for host events queued %d" %
          (name, p.get("deferred_waits", 0), p.get("deferred_host_waits", 0),
           p.get("queued_host_waits", 0)))
    if name == "tencache" and p.get("deferred_host_waits", 0) < 1:
        bad.append(name + ": the caller waited for every NVMe read and pinned space of the CPU Adam")
    # host mode queues a copy stream's wait for a host event on the stream
    # (a GPU, with cuStreamWaitValue64); none counted: the count is broken
    if p.get("queued_host_waits", 0) < 1:
        bad.append(name + ": no copy stream's wait for a host event was queued")
if len(res["policies"]) != 3:
    bad.append("%d policies, want 3" % len(res["policies"]))
print("FAIL: " + "; ".join(bad) if bad else "all planned throughout, pinned ranges laid out")
sys.exit(1 if bad else 0)
PY
