#!/usr/bin/env python3
"""test_ddp.py - tencache.offload() under torch.distributed: 2 ranks (gloo,
host mode, CPU) train the small transformer of test_offload.py 20 steps,
each on half of the global batch, and must end where one rank on the whole
batch ends.

Checks, per case (fp32 with a per-rank NVMe swap file; bf16 compute with
fp32 masters, per-module reductions; fp32 with the default bucket):
  - broadcast: rank 1 builds its model from another seed; after offload()
    its weights are rank 0's, bit for bit;
  - the ranks agree: same fp32 masters, bit for bit, after 20 steps;
  - bit-identical to plain torch doing the same arithmetic in one process:
    backward of each half accumulated, divided by 2, torch AdamW (exact
    sqrt, see test_offload.py): with 2 ranks the sum of 2 gradients is one
    addition, so the order is fixed and the bits must match;
  - against one rank on the whole batch (tencache, one process): within
    a tolerance, not bit for bit: the full batch sums each weight gradient
    over 8 sequences in one GEMM and takes one mean over all tokens, the
    ranks sum over 4, then add 2 halves: the same sum in another order,
    different roundings (relative 1e-7 in fp32). Adam normalizes each update
    to about lr, so a near-zero gradient whose sign flips moves its weight
    by lr: hence fp32 losses within 1e-4 relative and masters within 1e-3
    relative L2 (measured 1.5e-7 and 4e-5). In bf16 each half's gradient is
    rounded to bf16 (2^-9 relative) before the sum and the sum is rounded
    again, where the whole batch rounds once: losses 1e-3, masters 2e-2
    (measured 8e-5 and 7.5e-3; test_offload_gpu.py allows 1e-2 between two
    correct bf16 trainings that differ less);
  - each rank's runtime is its own: its swap file (<nvme>-rank<N>) exists
    while it trains and is gone after close, the two differ; its pool is
    pinned in its own process (locked memory or a tencache-pool memfd grew
    by at least the pool size); its pinned share is half of the host's;
  - bucketing: fewer collectives per step than gradient tensors;
  - a pinned share too small for the pool is a clear error;
  - the checks can fail: the same run with process_group=False (no
    reduction) must fail the comparisons above.
TAP lines, "N passed, N failed, N skipped"; exit 0, 1, or 77 (torch,
torch.distributed or gloo unavailable).
"""
import copy
import datetime
import math
import os
import sys
import tempfile
import traceback

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError as e:
    print(f"# SKIP torch cannot be imported ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_offload as T    # noqa: E402
from test_offload import tencache, tap, counts, exact_sqrt, loss_of    # noqa: E402

STEPS = 20
WORLD = 2
TOL = {None: (1e-4, 1e-3), torch.float32: (1e-4, 1e-3),    # losses rel, masters rel L2
       torch.bfloat16: (1e-3, 2e-2)}
HP = T.HP


# ---- what a rank does ----------------------------------------------------------

def locked_bytes():
    """Pinned memory of this process: mlocked (THP pools) + hugetlb memfd pools."""
    lck = 0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmLck:"):
                lck = int(line.split()[1]) * 1024
    memfd, cur = 0, None
    with open("/proc/self/smaps") as f:
        for line in f:
            if "-" in line.split(" ", 1)[0] and " " in line:
                cur = "tencache-pool" in line
            elif cur and line.startswith("Size:"):
                memfd += int(line.split()[1]) * 1024
    return lck + memfd


def build(cfg, seed):
    torch.manual_seed(seed)
    return T.Tiny(**cfg["model"])


def train(model, opt, data, dev):
    losses = []
    for batch in data:
        loss = loss_of(model, batch.to(dev))
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def rank_main(rank, cfg):
    """One rank: every case of cfg, results to cfg['dir']/rank<N>.pt."""
    out = {"cases": {}, "error": None}
    try:
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cuda.matmul.allow_tf32 = False
        dev = torch.device("cpu")
        if not cfg["host_mode"]:
            torch.cuda.set_device(0)    # the one GPU, shared
            dev = torch.device("cuda", 0)
        dist.init_process_group(cfg["backend"], init_method="file://" + cfg["dir"] + "/" + cfg.get("rdv", "rdv"),
                                rank=rank, world_size=WORLD,
                                timeout=datetime.timedelta(seconds=cfg.get("timeout", 120)))
        data = torch.load(cfg["dir"] + "/data.pt")
        half = data[0].shape[0] // WORLD
        mine = [b[rank * half:(rank + 1) * half] for b in data]
        model0 = build(cfg, 0)
        for case in cfg["cases"]:
            name = case["name"]
            model = build(cfg, 0 if rank == 0 else 1234)
            if rank == 1 and case.get("other_model"):    # a rank whose model differs
                torch.manual_seed(1234)
                model = T.Tiny(**{**cfg["model"], **case["other_model"]})
            same0 = all(torch.equal(a, b) for a, b in zip(model.parameters(), model0.parameters()))
            total = sum(p.numel() * 4 for p in model.parameters())
            kw = dict(gpu_budget=int(total * case.get("budget", 0.6)), host_mode=cfg["host_mode"],
                      dtype=case.get("dtype"), process_group=case.get("group", None), **HP)
            if "bucket" in case:
                kw["bucket_bytes"] = case["bucket"]
            if case.get("nvme"):
                kw.update(nvme_path=os.path.join(case["nvme"], "swap"), pinned_budget=2 * total)
            if case.get("host_budget"):
                kw["host_budget"] = case["host_budget"]
            before = locked_bytes()
            try:
                model, opt = tencache.offload(model, **kw)
            except tencache.TencacheError as e:
                out["cases"][name] = {"error": str(e)}
                continue
            rt = opt.tencache
            r = {"same_seed_model": same0, "locked_delta": locked_bytes() - before}
            r["initial"] = rt.state(master=True)
            losses = train(model, opt, mine[:1], dev)
            info = rt.dist_info()
            r["nvme_during"] = info["nvme_path"] and os.path.exists(info["nvme_path"])
            losses += train(model, opt, mine[1:], dev)
            r.update(losses=losses, masters=rt.state(master=True), info=rt.dist_info(),
                     stats=rt.stats(), grads=sum(1 for q in rt.params if q.trained))
            rt.close()
            r["nvme_after"] = bool(info["nvme_path"]) and os.path.exists(info["nvme_path"])
            out["cases"][name] = r
            dist.barrier()
    except Exception:    # noqa: BLE001
        out["error"] = traceback.format_exc()
    torch.save(out, f"{cfg['dir']}/rank{rank}.pt")
    if dist.is_initialized():
        dist.destroy_process_group()


def run_ranks(cfg):
    """Spawn the ranks; [rank0 result, rank1 result] (a failed rank: its error).
    Ranks still running after cfg['limit'] seconds (default 300) are killed:
    a hang fails the test instead of stalling CI."""
    import time
    ctx = mp.start_processes(rank_main, args=(cfg,), nprocs=WORLD, join=False,
                             start_method="spawn")
    end = time.monotonic() + cfg.get("limit", 300)
    while not ctx.join(timeout=1):
        if time.monotonic() > end:
            for p in ctx.processes:
                p.kill()
            raise TimeoutError(f"the ranks ran past {cfg.get('limit', 300)} s (a hang?); killed")
    return [torch.load(f"{cfg['dir']}/rank{r}.pt", weights_only=False) for r in range(WORLD)]


# ---- the references, in this process ------------------------------------------

def ref_halves(model0, data, dtype, dev):
    """Plain torch: per step backward of each half (accumulated), / 2, torch
    AdamW (exact sqrt) on fp32 masters on the CPU, copies rounded into the
    model on dev. Returns the per-half losses [[l0, l1], ...] and masters."""
    model = copy.deepcopy(model0)
    params = list(model.parameters())
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    for p in params:
        p.data = p.data.to(dev, dtype or torch.float32)
    for mod in model.modules():
        for n, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[n] = b.to(dev)
    opt = torch.optim.AdamW(masters, foreach=False, **HP)
    losses = []
    half = data[0].shape[0] // WORLD
    for batch in data:
        ls = []
        for r in range(WORLD):
            loss = loss_of(model, batch[r * half:(r + 1) * half].to(dev))
            loss.backward()
            ls.append(loss.item())
        losses.append(ls)
        for p, m in zip(params, masters):
            m.grad = p.grad.div_(WORLD).float().cpu()
            p.grad = None
        with exact_sqrt():
            opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m.to(dev))
    names = [n for n, _ in model.named_parameters()]
    return losses, {n: m.detach().clone() for n, m in zip(names, masters)}


def one_rank(model0, data, case, host_mode, dev):
    """tencache in this process (no group) on the whole batch."""
    model = copy.deepcopy(model0)
    total = sum(p.numel() * 4 for p in model.parameters())
    model, opt = tencache.offload(model, gpu_budget=int(total * case.get("budget", 0.6)),
                                  host_mode=host_mode, dtype=case.get("dtype"), **HP)
    losses = train(model, opt, data, dev)
    masters = opt.tencache.state(master=True)
    opt.tencache.close()
    return losses, masters


def rel_l2(a, b):
    num = sum((a[n].double() - b[n].double()).square().sum().item() for n in b)
    return math.sqrt(num / sum(b[n].double().square().sum().item() for n in b))


def bitwise(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in b)


# ---- the comparisons ---------------------------------------------------------------

def compare(case, res, refs, model0, expect_ok=True):
    """The checks of one case; returns whether all passed (a control case
    expects failures: its checks are reported, not counted)."""
    name = case["name"]
    r0, r1 = res[0]["cases"][name], res[1]["cases"][name]
    (hl, hm), (fl, fm) = refs
    init0 = {n: p.detach().float() for n, p in model0.named_parameters()}
    checks = []

    def check(ok, what, detail=""):
        checks.append((bool(ok), f"{name}: {what}", detail))

    check(not r1["same_seed_model"] and bitwise(r1["initial"], init0) and
          bitwise(r0["initial"], init0), "rank 1 (other seed) starts from rank 0's weights")
    glob = [(a + b) / 2 for a, b in zip(r0["losses"], r1["losses"])]
    check(bitwise(r0["masters"], r1["masters"]), "both ranks end with the same fp32 masters",
          "" if bitwise(r0["masters"], r1["masters"]) else
          f"rel L2 {rel_l2(r0['masters'], r1['masters']):.3g}")
    same_l = [[a, b] for a, b in zip(r0["losses"], r1["losses"])] == hl
    check(same_l and bitwise(r0["masters"], hm),
          "bit-identical to torch, halves accumulated / 2 (exact sqrt)",
          "" if same_l and bitwise(r0["masters"], hm) else
          f"losses {'equal' if same_l else 'differ'}, masters rel L2 {rel_l2(r0['masters'], hm):.3g}")
    LOSS_TOL, W_TOL = TOL[case.get("dtype")]
    dl = max(abs(a - b) / abs(b) for a, b in zip(glob, fl))
    dw = rel_l2(r0["masters"], fm)
    check(dl <= LOSS_TOL and dw <= W_TOL, f"within tolerance of 1 rank on the whole batch "
          f"(losses {LOSS_TOL:g} rel, masters {W_TOL:g} rel L2)",
          f"loss rel diff {dl:.3g}, masters rel L2 {dw:.3g}, final loss {glob[-1]:.6f} vs "
          f"{fl[-1]:.6f}")
    i0, i1 = r0["info"], r1["info"]
    if case.get("group", None) is not False:
        calls = i0["reduce_calls"] / STEPS
        check(i0["world"] == WORLD and i1["rank"] == 1 and calls < r0["grads"] and calls >= 1,
              "gradients reduced, bucketed",
              f"{calls:.0f} collectives per step for {r0['grads']} gradients, bucket "
              f"{i0['bucket_bytes']} B (held ops up to {i0['bucket_room']} B), "
              f"{i0['reduced_bytes'] // STEPS} B per step; planned steps "
              f"{r0['stats']['planned_steps']}/{r0['stats']['steps']}")
        ok = all(r["locked_delta"] >= r["info"]["pool_bytes"] for r in (r0, r1))
        check(ok and i0["local_world"] == WORLD and i0["host_share"] and
              i0["pool_bytes"] <= i0["host_share"], "each rank pins its own pool within its share",
              f"pool {i0['pool_bytes']} B; pinned by rank 0 / 1: {r0['locked_delta']} / "
              f"{r1['locked_delta']} B; share {i0['host_share']} B "
              f"(half of MemAvailable / {i0['local_world']})")
    if case.get("nvme"):
        p0, p1 = i0["nvme_path"], i1["nvme_path"]
        check(p0 != p1 and p0.endswith("-rank0") and p1.endswith("-rank1") and
              r0["nvme_during"] and r1["nvme_during"] and not r0["nvme_after"] and
              not r1["nvme_after"], "a swap file per rank, removed at close",
              f"{os.path.basename(p0)}, {os.path.basename(p1)}")
    passed = all(ok for ok, _, _ in checks)
    if expect_ok:
        for ok, what, detail in checks:
            tap(ok, what, detail)
    else:
        failed = [what[len(name) + 2:] for ok, what, _ in checks if not ok]
        tap(bool(failed), f"{name}: the checks catch it",
            "failed: " + "; ".join(failed) if failed else "every check passed: the test is blind")
    return passed


def main():
    if not dist.is_available() or not dist.is_gloo_available():
        print("# SKIP torch.distributed with gloo is not available in this torch build")
        return 77
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")    # the ranks are on this host
    torch.set_num_threads(1)    # as the ranks: GEMM results may depend on threads
    print(f"# torch {torch.__version__}, gloo, {WORLD} ranks, host mode, "
          f"libtencache {tencache.lib().path}")
    tdir = os.environ.get("TEST_DIR", "/var/tmp")
    with tempfile.TemporaryDirectory(prefix="tencache-ddp-") as d, \
            tempfile.TemporaryDirectory(dir=tdir, prefix="tencache-ddp-nvme-") as nd:
        try:
            T.o_direct_probe(nd)
        except OSError as e:
            print(f"# {tdir} refuses O_DIRECT ({e}): the fp32 case runs without NVMe")
            nd = None
        cases = [dict(name="fp32, NVMe tier" if nd else "fp32", nvme=nd),
                 dict(name="bf16 compute, fp32 master, per-module reductions",
                      dtype=torch.bfloat16, bucket=0),
                 dict(name="fp32, budget = the weights (larger buckets)", budget=1.0),
                 dict(name="control: no reduction (process_group=False)", group=False),
                 dict(name="host_budget too small", host_budget="1MiB"),
                 dict(name="the ranks' models differ", other_model=dict(layers=3))]
        cfg = dict(dir=d, backend="gloo", host_mode=True, cases=cases,
                   model=dict(vocab=97, d=32, heads=4, layers=2, ctx=16))
        data = T.batches(97, STEPS, b=8, t=16, seed=7)
        torch.save(data, d + "/data.pt")
        model0 = build(cfg, 0)
        try:
            res = run_ranks(cfg)
        except Exception as e:    # noqa: BLE001
            tap(False, "2 ranks ran", f"{type(e).__name__}: {e}")
            res = None
        for r, x in enumerate(res or []):
            if x["error"]:
                tap(False, f"rank {r} ran", x["error"][-1500:])
                res = None
        if res:
            for case in cases:
                name = case["name"]
                if case.get("other_model"):
                    msgs = [x["cases"][name].get("error", "") for x in res]
                    tap(all("differs from rank" in m and "same model" in m for m in msgs),
                        f"error: {name}", " | ".join(msgs) or "no error raised")
                    continue
                if case.get("host_budget"):
                    msgs = [x["cases"][name].get("error", "") for x in res]
                    tap(all("share of the host budget" in m and "nvme_path" in m for m in msgs),
                        f"error: {name}", msgs[0] or "no error raised")
                    continue
                refs = (ref_halves(model0, data, case.get("dtype"), torch.device("cpu")),
                        one_rank(model0, data, case, True, torch.device("cpu")))
                compare(case, res, refs, model0, expect_ok=case.get("group", None) is not False)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
