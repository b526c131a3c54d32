#!/usr/bin/env python3
"""test_ddp_gpu.py - test_ddp.py on a CUDA GPU: 2 processes share GPU 0
(the plumbing of multi-GPU training on a one-GPU machine; not a scaling
test). Exit 77 without CUDA.

The process group: NCCL if it takes 2 ranks on one GPU (a probe: 2 ranks,
one all_reduce; NCCL normally refuses a communicator with two ranks on the
same device, "Duplicate GPU detected"), else gloo, which reduces the CUDA
gradients through a host staging copy (ddp.py). Which one ran is printed,
and with NCCL refused the probe's error is reported as a skipped line.

A transformer (d 256, 4 blocks, vocab 512, 128 tokens, bf16 compute, fp32
masters, GPU budget 0.75 of the bf16 weights) trained 20 steps by 2 ranks on
half of a global batch of 8 each, against (test_ddp.py's checks):
  - torch on the GPU in one process, doing the same arithmetic (backward of
    each half accumulated, / 2, fp32 masters in torch AdamW with exact sqrt
    on the CPU): bit-identical (deterministic algorithms; the GPU kernels see
    the same shapes);
  - tencache in one process on the whole batch: bf16 tolerance (losses 1e-3
    relative, masters 2e-2 relative L2; why: test_ddp.py);
  - broadcast from rank 0, the ranks agree, per-rank pools and swap files
    (NVMe case, when TEST_DIR takes O_DIRECT), bucketing.
Env: TEST_DDP_BACKEND=nccl|gloo skips the probe; TEST_DDP_GPU_ON_CPU=1 runs
the same script in host mode with gloo, to check the test itself on a CPU;
TEST_DDP_NVME=0 leaves the NVMe case out (in host mode it hangs in the
runtime: a planned acquire waits forever on a deferred pinned free, also
without data parallelism when a backward op is released 2 ms late; see the
branch's report). Each case's ranks are killed after TEST_DDP_LIMIT
seconds (default 120; a failure).
"""
import os
import sys
import tempfile
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")    # NVLink multicast stays off
try:
    import torch
    import torch.multiprocessing as mp
except ImportError as e:
    print(f"# SKIP torch cannot be imported ({e})")
    sys.exit(77)
ON_CPU = os.environ.get("TEST_DDP_GPU_ON_CPU") == "1"
if not torch.cuda.is_available() and not ON_CPU:
    print("# SKIP no CUDA GPU")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_ddp as TD    # noqa: E402
from test_ddp import T, tencache, tap, counts, dist    # noqa: E402

DEV = torch.device("cpu") if ON_CPU else torch.device("cuda", 0)


def _probe_rank(rank, d, backend):
    import datetime
    torch.cuda.set_device(0)
    try:
        dist.init_process_group(backend, init_method=f"file://{d}/probe-rdv", rank=rank,
                                world_size=2, timeout=datetime.timedelta(seconds=60))
        t = torch.full((4,), rank + 1.0, device="cuda")
        dist.all_reduce(t)
        torch.cuda.synchronize()
        ok = t.tolist() == [3.0] * 4
        msg = "" if ok else f"all_reduce gave {t.tolist()}"
        dist.destroy_process_group()
    except Exception as e:    # noqa: BLE001
        ok, msg = False, f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
    with open(f"{d}/probe{rank}", "w") as f:
        f.write(("ok " if ok else "fail ") + msg)


def probe(backend, timeout=90):
    """(works, why) for 2 ranks of backend on GPU 0."""
    with tempfile.TemporaryDirectory(prefix="tencache-probe-") as d:
        ctx = mp.start_processes(_probe_rank, args=(d, backend), nprocs=2, join=False,
                                 start_method="spawn")
        end = time.monotonic() + timeout
        try:
            while not ctx.join(timeout=max(0.1, end - time.monotonic())):
                if time.monotonic() > end:
                    for p in ctx.processes:
                        p.kill()
                    return False, f"no answer in {timeout} s"
        except Exception as e:    # noqa: BLE001
            return False, f"{type(e).__name__}: {str(e)[:300]}"
        outs = []
        for r in range(2):
            try:
                with open(f"{d}/probe{r}") as f:
                    outs.append(f.read())
            except OSError:
                outs.append("fail rank died without a word")
        bad = [o for o in outs if not o.startswith("ok")]
        return not bad, "; ".join(o[5:] for o in bad)


def main():
    if not dist.is_available():
        print("# SKIP torch.distributed is not available")
        return 77
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)    # as the ranks (CPU GEMMs may depend on it)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    backend = os.environ.get("TEST_DDP_BACKEND")
    if ON_CPU:
        backend = backend or "gloo"
    elif not backend:
        t0 = time.monotonic()
        ok, why = probe("nccl")
        if ok:
            backend = "nccl"
            print(f"# NCCL takes 2 ranks on one GPU ({time.monotonic() - t0:.1f} s probe)")
        else:
            tap(None, "NCCL with 2 ranks on one GPU", f"refused: {why}; gloo reduces instead "
                "(CUDA gradients through host staging)")
            backend = "gloo"
    name = "CPU (host mode)" if ON_CPU else torch.cuda.get_device_name(DEV)
    print(f"# torch {torch.__version__}, {name}, 2 ranks on it, backend {backend}, "
          f"libtencache {tencache.lib().path}")
    tdir = os.environ.get("TEST_DIR", "/var/tmp")
    steps = TD.STEPS
    with tempfile.TemporaryDirectory(prefix="tencache-ddp-gpu-") as d, \
            tempfile.TemporaryDirectory(dir=tdir, prefix="tencache-ddp-nvme-") as nd:
        try:
            T.o_direct_probe(nd)
        except OSError as e:
            print(f"# {tdir} refuses O_DIRECT ({e}): no NVMe case")
            nd = None
        if os.environ.get("TEST_DDP_NVME") == "0":
            nd = None
        # budget: a fraction of the fp32 weights; 0.375 = 0.75 of the bf16 weights
        cases = [dict(name="bf16", dtype=torch.bfloat16, budget=0.375)]
        if nd:
            cases.append(dict(name="bf16, NVMe tier, per-module reductions",
                              dtype=torch.bfloat16, budget=0.375, nvme=nd, bucket=0))
        data = T.batches(512, steps, b=8, t=128, seed=5)
        torch.save(data, d + "/data.pt")
        model0 = None
        for i, case in enumerate(cases):    # one spawn each: a hang costs only its case
            cfg = dict(dir=d, rdv=f"rdv{i}", backend=backend, host_mode=ON_CPU, cases=[case],
                       timeout=90,
                       limit=int(os.environ.get("TEST_DDP_LIMIT", "120")),
                       model=dict(vocab=512, d=256, heads=8, layers=4, ctx=128))
            model0 = model0 or TD.build(cfg, 0)
            t0 = time.monotonic()
            try:
                res = TD.run_ranks(cfg)
            except Exception as e:    # noqa: BLE001
                tap(False, f"{case['name']}: 2 ranks ran", f"{type(e).__name__}: {e}")
                continue
            errs = [f"rank {r}: {x['error'][-1500:]}" for r, x in enumerate(res) if x["error"]]
            if errs:
                tap(False, f"{case['name']}: 2 ranks ran", "; ".join(errs))
                continue
            info = res[0]["cases"][case["name"]]["info"]
            print(f"# {case['name']}: 2 ranks {time.monotonic() - t0:.1f} s; rank 0: {info}")
            refs = (TD.ref_halves(model0, data, case["dtype"], DEV),
                    TD.one_rank(model0, data, case, ON_CPU, DEV))
            TD.compare(case, res, refs, model0)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
