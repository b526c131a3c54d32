#!/usr/bin/env python3
"""ddp_bench.py - tencache.offload() under torch.distributed: training
throughput at 1 rank and at N ranks side by side in one run (issue 8).

Weak scaling: every rank trains the same transformer (built from a seed,
random tokens) on its own batch of --batch x --seq tokens; a step of N ranks
is N times the tokens of a step of one. Each configuration runs in fresh
processes (torch.multiprocessing spawn, file rendezvous). Reported:
  tokens/s       all ranks' tokens per second of the slowest rank's wall time
                 over the measured steps (after a barrier; CUDA synchronized)
  efficiency     tokens/s(N) / (N x tokens/s(1))
  per rank       host memory (VmHWM, the pinned pool and its share of the
                 host), PCIe bytes per step from the cache's counters (H2D,
                 D2H; NVMe read/write), their rate over the step, and the
                 gradient reductions (collectives and bytes per step).
N: --ranks, default the GPUs torch sees, or 2 processes on the one GPU.
With more ranks than GPUs (or on --device cpu) the ranks share the device:
the result is flagged "shared GPU/CPU: not a scaling figure", it shows the
plumbing and the contention per rank (pinned memory, PCIe), not scaling.

    python bench/ddp_bench.py --out /tmp/ddp                       # H200
    python bench/ddp_bench.py --device cpu --dim 64 --layers 2 --vocab 256 \\
        --seq 32 --batch 2 --warmup 1 --steps 3 --out /tmp/ddp      # smoke test
Writes --out/result.json and --out/table.md, prints the table.
"""
import argparse
import datetime
import json
import math
import os
import sys
import tempfile
import time
import traceback

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")    # NVLink multicast stays off


def vm_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def build_model(torch, a):
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d, heads):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                       for z in (q, k, v))
            y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.out(y.transpose(1, 2).reshape(b, t, d))
            return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(a.vocab, a.dim), nn.Embedding(a.seq, a.dim)
            self.blocks = nn.ModuleList(Block(a.dim, a.heads) for _ in range(a.layers))
            self.ln = nn.LayerNorm(a.dim)
            self.head = nn.Linear(a.dim, a.vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    torch.manual_seed(0)
    return LM()


def worker(rank, world, a, tag):
    """One rank of one configuration; writes <work>/<tag>-rank<N>.json."""
    res = {"rank": rank, "world": world}
    try:
        import torch
        import torch.distributed as dist
        import tencache
        cuda = a.device == "cuda"
        ncpu = len(os.sched_getaffinity(0))
        if not cuda:
            torch.set_num_threads(max(1, ncpu // world))
        dev = torch.device("cpu")
        if cuda:
            torch.cuda.set_device(rank % torch.cuda.device_count())
            dev = torch.device("cuda", torch.cuda.current_device())
        if world > 1:
            dist.init_process_group(a.backend, init_method=f"file://{a.work}/{tag}-rdv",
                                    rank=rank, world_size=world,
                                    timeout=datetime.timedelta(seconds=300))
        model = build_model(torch, a)
        n = sum(p.numel() for p in model.parameters())
        dtype = torch.bfloat16 if cuda else torch.float32
        budget = int(a.budget * n * (2 if cuda else 4))
        kw = {}
        if a.nvme:
            kw["nvme_path"] = os.path.join(a.nvme, f"ddp-bench-{tag}")
        locked0 = vm_status("VmLck")
        t0 = time.monotonic()
        model, opt = tencache.offload(model, gpu_budget=budget, host_mode=not cuda, dtype=dtype,
                                      lr=1e-4, weight_decay=0.1, **kw)
        setup_s = time.monotonic() - t0
        rt = opt.tencache
        g = torch.Generator().manual_seed(100 + rank)
        batches = [torch.randint(0, a.vocab, (a.batch, a.seq + 1), generator=g).to(dev)
                   for _ in range(4)]

        def step(i):
            b = batches[i % len(batches)]
            logits = model(b[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, a.vocab),
                                                     b[:, 1:].reshape(-1))
            loss.backward()
            opt.step()
            return loss

        for i in range(a.warmup):
            step(i)
        if cuda:
            torch.cuda.synchronize()
        if world > 1:
            dist.barrier()
        s0, i0 = rt.stats(), rt.dist_info()
        t0 = time.monotonic()
        for i in range(a.steps):
            loss = step(a.warmup + i)
        last = loss.item()
        if cuda:
            torch.cuda.synchronize()
        wall = time.monotonic() - t0
        if world > 1:
            dist.barrier()
        s1, i1 = rt.stats(), rt.dist_info()
        per = [(s1["link_bytes"][k] - s0["link_bytes"][k]) / a.steps for k in range(4)]
        res.update(params=n, setup_s=setup_s, wall_s=wall, step_s=wall / a.steps,
                   tokens_per_step=a.batch * a.seq, loss=last,
                   h2d_per_step=per[0], d2h_per_step=per[1], nvme_read_per_step=per[2],
                   nvme_write_per_step=per[3],
                   pcie_gbps=(per[0] + per[1]) / (wall / a.steps) / 1e9,
                   hits=s1["hits"] - s0["hits"], acquires=s1["acquires"] - s0["acquires"],
                   planned_steps=s1["planned_steps"], stall_s=(s1["stall_ns"] - s0["stall_ns"]) / 1e9,
                   reduce_calls_per_step=(i1["reduce_calls"] - i0["reduce_calls"]) / a.steps,
                   reduce_bytes_per_step=(i1["reduced_bytes"] - i0["reduced_bytes"]) / a.steps,
                   pool_bytes=i1["pool_bytes"], host_share=i1["host_share"],
                   locked_bytes=vm_status("VmLck") - locked0, vm_hwm=vm_status("VmHWM"),
                   vm_rss=vm_status("VmRSS"), numa_node=i1["numa_node"], gpu=i1["gpu"],
                   nvme_path=i1["nvme_path"], backend=i1["backend"],
                   gpu_peak=torch.cuda.max_memory_allocated() if cuda else 0)
        rt.close()
        if world > 1:
            dist.destroy_process_group()
    except Exception:    # noqa: BLE001
        res["error"] = traceback.format_exc()
    with open(f"{a.work}/{tag}-rank{rank}.json", "w") as f:
        json.dump(res, f)


def run_config(a, world, deadline):
    import torch.multiprocessing as mp
    tag = f"ranks{world}"
    print(f"# {tag}: starting {world} process(es)", flush=True)
    t0 = time.monotonic()
    ctx = mp.start_processes(worker, args=(world, a, tag), nprocs=world, join=False,
                             start_method="spawn")
    err = None
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                for p in ctx.processes:
                    p.kill()
                err = "past the time limit (--time-limit): killed"
                break
    except Exception as e:    # noqa: BLE001
        err = f"{type(e).__name__}: {e}"
    ranks = []
    for r in range(world):
        try:
            with open(f"{a.work}/{tag}-rank{r}.json") as f:
                ranks.append(json.load(f))
        except OSError:
            ranks.append({"rank": r, "error": err or "no result"})
    errs = [x["error"] for x in ranks if "error" in x]
    print(f"# {tag}: {'failed' if errs else 'done'} in {time.monotonic() - t0:.1f} s", flush=True)
    return {"world": world, "ranks": ranks, "error": errs[0] if errs else None}


def fmt_b(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f} B"


def summarize(a, configs, shared_note):
    base = configs[0]
    tps1 = None
    if not base["error"]:
        r = base["ranks"][0]
        tps1 = r["tokens_per_step"] / r["step_s"]
    rows = []
    for c in configs:
        if c["error"]:
            c["summary"] = {"error": c["error"]}
            continue
        step = max(r["step_s"] for r in c["ranks"])
        tps = sum(r["tokens_per_step"] for r in c["ranks"]) / step
        eff = tps / (c["world"] * tps1) if tps1 else None
        c["summary"] = {"tokens_per_s": tps, "step_s": step, "efficiency": eff}
        rows.append(c)
    lines = [f"# tencache data parallel: 1 vs {a.ranks} ranks ({a.device}, backend {a.backend})",
             "", f"{shared_note}" if shared_note else "", "",
             "| ranks | tokens/s | step ms | scaling efficiency |", "|---|---|---|---|"]
    for c in configs:
        s = c["summary"]
        if "error" in s:
            lines.append(f"| {c['world']} | failed: {s['error'].strip().splitlines()[-1][:120]} | | |")
            continue
        eff = "1 (base)" if c is base else (f"{s['efficiency']:.3f}" if s["efficiency"] else "-")
        lines.append(f"| {c['world']} | {s['tokens_per_s']:.0f} | {s['step_s'] * 1e3:.1f} | {eff} |")
    lines += ["", "Per rank (PCIe: bytes per step from tencache's counters; rate over the step):",
              "", "| ranks | rank | step ms | H2D/step | D2H/step | NVMe r/w per step | PCIe GB/s "
              "| reductions/step | reduced/step | pinned pool | share of host | VmHWM | NUMA |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in rows:
        for r in c["ranks"]:
            lines.append(
                f"| {c['world']} | {r['rank']} | {r['step_s'] * 1e3:.1f} | {fmt_b(r['h2d_per_step'])} "
                f"| {fmt_b(r['d2h_per_step'])} | {fmt_b(r['nvme_read_per_step'])} / "
                f"{fmt_b(r['nvme_write_per_step'])} | {r['pcie_gbps']:.2f} "
                f"| {r['reduce_calls_per_step']:.0f} | {fmt_b(r['reduce_bytes_per_step'])} "
                f"| {fmt_b(r['pool_bytes'])} | {fmt_b(r['host_share']) if r['host_share'] else '-'} "
                f"| {fmt_b(r['vm_hwm'])} | {r['numa_node']} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if any")
    p.add_argument("--ranks", type=int, default=0, help="N (default: GPUs, at least 2)")
    p.add_argument("--backend", default="auto",
                   help="nccl, gloo or auto (nccl with a GPU each, else gloo)")
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--budget", type=float, default=0.5,
                   help="GPU budget, fraction of the compute-dtype weights")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--nvme", default=None, help="directory for the per-rank swap files")
    p.add_argument("--time-limit", type=float, default=150, help="seconds for everything")
    p.add_argument("--out", default="/tmp/tencache-ddp-bench")
    a = p.parse_args()
    import torch
    import torch.distributed as dist
    deadline = time.monotonic() + a.time_limit
    if a.device is None:
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no GPU")
    if not dist.is_available():
        sys.exit("torch.distributed is not available in this torch build")
    ngpu = torch.cuda.device_count() if a.device == "cuda" else 0
    a.ranks = a.ranks or max(2, ngpu)
    shared = a.device == "cpu" or a.ranks > ngpu
    if a.backend == "auto":
        a.backend = "nccl" if a.device == "cuda" and not shared else "gloo"
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    note = ""
    if shared:
        what = "CPU" if a.device == "cpu" else f"GPU ({ngpu} GPU(s) for {a.ranks} ranks)"
        note = f"shared {what}: not a scaling figure (the ranks share one device)"
    os.makedirs(a.out, exist_ok=True)
    print(f"# torch {torch.__version__}, {a.device}"
          f"{' ' + torch.cuda.get_device_name(0) if ngpu else ''}, 1 vs {a.ranks} ranks, "
          f"backend {a.backend}; {note or 'one GPU per rank'}", flush=True)
    with tempfile.TemporaryDirectory(prefix="ddp-bench-") as work:
        a.work = work
        configs = [run_config(a, 1, deadline)]
        configs.append(run_config(a, a.ranks, deadline))
    table = summarize(a, configs, note)
    res = {"args": {k: v for k, v in vars(a).items() if k != "work"}, "shared_device": shared,
           "note": note, "gpus": ngpu, "configs": configs}
    with open(os.path.join(a.out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    with open(os.path.join(a.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    return 1 if any(c["error"] for c in configs) else 0


if __name__ == "__main__":
    sys.exit(main())
