#!/usr/bin/env python3
"""train_bench.py - training throughput of a HF transformer under offload
methods, side by side in one run (issue 7's benchmark).

The model is built from a built-in config (OPT / Llama shapes, random
weights, no download) and trained for a few steps under each method, each
in its own subprocess (clean peak-memory counters and CUDA state):

  ideal      no offload, no cap: bf16 parameters and gradients, fp32 master
             weights and torch AdamW (fused on CUDA) all on the GPU; the same
             math as tencache (bf16 compute, fp32 masters, AdamW).
  naive      what users reach for: FSDP2 (torch.distributed.fsdp.fully_shard)
             on one rank with CPUOffloadPolicy: fp32 parameters, gradients
             and torch AdamW on the CPU, bf16 compute (MixedPrecisionPolicy).
             accelerate's cpu_offload is an inference hook (it rebuilds the
             weights from a CPU state dict every forward, so gradients never
             reach the optimizer): it cannot train, hence FSDP2.
  deepspeed2 DeepSpeed ZeRO-Offload: stage 2, offload_optimizer to the CPU
             (DeepSpeedCPUAdam, JIT-built), bf16.
  deepspeed3 DeepSpeed ZeRO-Infinity on the CPU: stage 3, parameters and
             optimizer offloaded to the CPU, bf16.
  deepspeed  deepspeed<--ds-stage>.
  tencache   tencache.offload(model, gpu_budget=...) with its defaults, bf16
             compute, fp32 masters and AdamW in C on the CPU, overlapped
             with backward and the next forward (overlap=True).
  tencache-serial    offload(overlap=False): every AdamW update after
             backward, inside optimizer.step().
  tencache-nocarry   offload(overlap="backward"): beside backward only.
  A tencache method may end in @N: its AdamW runs on N threads (threads=N;
  e.g. tencache@8), so a thread sweep is one run.
  --rounds K runs the offload methods K times in turn (method#2 ... method#K;
  ideal once): the host's memory speed, which the CPU optimizers depend on,
  drifts between runs, so each round's ratios compare methods run minutes
  apart.

GPU memory of the offload methods is capped with
torch.cuda.set_per_process_memory_fraction (--cap; auto: the ideal run's
peak reserved memory minus 12 bytes per parameter, i.e. minus exactly the
fp32 masters and moments that offloading moves out: the model does not fit
without offload). tencache's GPU arena is one cuMemAlloc outside torch's
allocator, so its torch fraction is cap - gpu_budget.

Prints and writes into --out: result.json, table.md, logs/<method>.log and
tencache-timeline.json (Perfetto, the last measured tencache step). Also
the PCIe bound: bytes tencache moved per step / measured link bandwidth, and
the fraction of the ideal that bound allows.

    python bench/train_bench.py --out /tmp/tb                      # H200 defaults
    python bench/train_bench.py --device cpu --model tiny-opt \\
        --methods ideal,tencache --warmup 1 --steps 1 --out /tmp/tb  # smoke test

DeepSpeed is installed on demand from --wheels (pip --no-index --target, or
unzipping the wheels when pip is missing) into --work, and its cpu_adam op is
JIT-built there (--prepare-deepspeed does only that, e.g. while the library
builds). Any failure is recorded with its reason; the run goes on.
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
GiB = 1 << 30

# Built-in shapes. Embeddings are untied for every method (tencache does not
# take tied weights). OPT-6.7B / Llama-2-7B need 16 B/param of host state
# (107 GB) plus the fp32 model being built (27 GB): more than the H200
# machine's 125 GiB of RAM, and it has no NVMe (its virtio disk reads ~1.2
# GB/s). OPT-2.7B fits (43 GB) but doubles every method's time; with the
# DeepSpeed build the whole run must stay within ~8 minutes, so OPT-1.3B
# (1.42 B parameters untied) is the default.
MODELS = {
    "tiny-opt": ("opt", dict(vocab_size=512, hidden_size=64, num_attention_heads=4,
                             num_hidden_layers=2, ffn_dim=256, max_position_embeddings=256)),
    "tiny-llama": ("llama", dict(vocab_size=512, hidden_size=64, num_attention_heads=4,
                                 num_key_value_heads=2, num_hidden_layers=2,
                                 intermediate_size=176, max_position_embeddings=256)),
    "opt-125m": ("opt", dict(hidden_size=768, num_attention_heads=12, num_hidden_layers=12,
                             ffn_dim=3072)),
    "opt-1.3b": ("opt", dict(hidden_size=2048, num_attention_heads=32, num_hidden_layers=24,
                             ffn_dim=8192)),
    "opt-2.7b": ("opt", dict(hidden_size=2560, num_attention_heads=32, num_hidden_layers=32,
                             ffn_dim=10240)),
    "opt-6.7b": ("opt", dict(hidden_size=4096, num_attention_heads=32, num_hidden_layers=32,
                             ffn_dim=16384)),
    "llama-1b": ("llama", dict(vocab_size=32000, hidden_size=2048, num_attention_heads=32,
                               num_key_value_heads=8, num_hidden_layers=22,
                               intermediate_size=5632, max_position_embeddings=4096)),
    "llama-2-7b": ("llama", dict(vocab_size=32000, hidden_size=4096, num_attention_heads=32,
                                 num_key_value_heads=32, num_hidden_layers=32,
                                 intermediate_size=11008, max_position_embeddings=4096)),
}
METHODS = ("ideal", "naive", "deepspeed", "deepspeed2", "deepspeed3", "tencache",
           "tencache-serial", "tencache-nocarry")
TC_OVERLAP = {"tencache": True, "tencache-serial": False, "tencache-nocarry": "backward"}
# per-method timeouts (s), at most what is left of --deadline
TIMEOUTS = {"ideal": 90, "naive": 150, "deepspeed2": 150, "deepspeed3": 180, "tencache": 150,
            "tencache-serial": 150, "tencache-nocarry": 150}


def base_method(method):
    """'tencache@8' -> ('tencache', 8); other names -> (name, 0). A '#K'
    suffix (K >= 2: the method's run in round K of --rounds) is dropped.
    ValueError for an unknown name, @N on a method that is not tencache's or
    N < 1, or a bad round."""
    method, hsh, k = method.partition("#")
    if hsh and not (k.isdigit() and int(k) >= 2):
        raise ValueError(method)
    name, at, n = method.partition("@")
    if name not in METHODS or at and not (name.startswith("tencache") and n.isdigit() and
                                          int(n) > 0):
        raise ValueError(method)
    return name, int(n) if at else 0


def alloc_confs(entries):
    """--alloc-conf entries -> {method or None: PYTORCH_CUDA_ALLOC_CONF}: a
    plain CONF is every method's, METHOD=CONF one method's (all its rounds
    and thread counts). ValueError for an unknown METHOD."""
    out = {}
    for e in entries or []:
        name, eq, conf = e.partition("=")
        if eq:
            if name not in METHODS:
                raise ValueError(name)
            out[name] = conf
        else:
            out[None] = e
    return out


def alloc_conf_of(confs, method):
    """The allocator setting a method runs with ('' = the environment's)."""
    name = base_method(method)[0]
    return confs.get(name, confs.get(None, ""))


def log(*a):
    print(*a, flush=True)


def parse_size(s):
    sys.path.insert(0, os.path.join(TOP, "python"))
    from tencache.offload import parse_bytes    # pure Python: no library needed
    return parse_bytes(s)


def fmt_b(n):
    if n is None:
        return "-"
    return f"{n / GiB:.2f} GiB" if n >= GiB / 10 else f"{n / 2**20:.1f} MiB"


# ---- the worker: one method in its own process ----------------------------------

def build_model(cfg, device):
    import torch
    import transformers
    kind, shape = MODELS[cfg["model"]]
    common = dict(tie_word_embeddings=False, use_cache=False,
                  attn_implementation=cfg["attn"])
    if kind == "opt":
        c = dict(vocab_size=50272, max_position_embeddings=2048, dropout=0.0,
                 attention_dropout=0.0, activation_dropout=0.0, layerdrop=0.0,
                 do_layer_norm_before=True)
        c.update(shape)
        c["word_embed_proj_dim"] = c["hidden_size"]
        conf, cls = transformers.OPTConfig(**c, **common), transformers.OPTForCausalLM
    else:
        c = dict(attention_dropout=0.0)
        c.update(shape)
        conf, cls = transformers.LlamaConfig(**c, **common), transformers.LlamaForCausalLM
    if cfg["seq"] > conf.max_position_embeddings:
        raise SystemExit(f"--seq {cfg['seq']} exceeds {cfg['model']}'s "
                         f"max_position_embeddings {conf.max_position_embeddings}")
    torch.manual_seed(cfg["seed"])
    with torch.device(device):    # random init on the GPU when there is one: seconds, not minutes
        model = cls(conf)
    model.train()
    return model, conf


def decoder_layers(model):
    inner = model.model
    return list(inner.decoder.layers if hasattr(inner, "decoder") else inner.layers)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Ideal:
    desc = ("no offload, no cap: bf16 params/grads, fp32 masters + torch AdamW all on the "
            "device (AdamW fused on CUDA)")

    def __init__(self, model, cfg, dev):
        import torch
        self.torch = torch
        self.model = model
        self.params = [p for p in model.parameters()]
        # masters from the fp32 init, then the model's parameters in bf16
        # (buffers such as rotary tables stay fp32, as in tencache)
        self.masters = [p.detach().to(dev, torch.float32).clone() for p in self.params]
        for p in self.params:
            p.data = p.data.to(dev, torch.bfloat16)
        for mod in model.modules():
            for n, b in list(mod._buffers.items()):
                if b is not None:
                    mod._buffers[n] = b.to(dev)
        kw = dict(fused=True) if dev.type == "cuda" else dict(foreach=False)
        self.opt = torch.optim.AdamW(self.masters, **cfg["hp"], **kw)

    def forward(self, x):
        return self.model(input_ids=x, labels=x).loss

    def backward(self, loss):
        loss.backward()

    def step(self):
        for p, m in zip(self.params, self.masters):
            m.grad = None if p.grad is None else p.grad.float()
            p.grad = None
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        with self.torch.no_grad():
            self.torch._foreach_copy_([p.data for p in self.params], self.masters)


class Naive:
    desc = ("FSDP2 fully_shard per decoder layer on 1 rank, CPUOffloadPolicy (fp32 params, "
            "grads and torch AdamW on the CPU), MixedPrecisionPolicy bf16 compute / fp32 reduce")

    def __init__(self, model, cfg, dev):
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy,
                                            fully_shard)
        backend = "nccl" if dev.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{free_port()}",
                                rank=0, world_size=1)
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        off = CPUOffloadPolicy(pin_memory=dev.type == "cuda")
        for layer in decoder_layers(model):
            fully_shard(layer, mp_policy=mp, offload_policy=off)
        fully_shard(model, mp_policy=mp, offload_policy=off)
        self.model = model
        self.opt = torch.optim.AdamW(model.parameters(), **cfg["hp"])

    def forward(self, x):
        return self.model(input_ids=x, labels=x).loss

    def backward(self, loss):
        loss.backward()

    def step(self):
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


class DeepSpeed:
    def __init__(self, model, cfg, dev, stage):
        import deepspeed
        self.desc = (f"DeepSpeed {deepspeed.__version__} ZeRO stage {stage}, offload_optimizer "
                     f"cpu{' + offload_param cpu' if stage == 3 else ''}"
                     f"{' (pinned)' if dev.type == 'cuda' else ''}, "
                     "DeepSpeedCPUAdam (AdamW), bf16")
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_WORLD_SIZE="1",
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        deepspeed.init_distributed(dist_backend="nccl" if dev.type == "cuda" else "gloo",
                                   auto_mpi_discovery=False)
        h = model.config.hidden_size
        zero = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
                "reduce_bucket_size": h * h,
                "offload_optimizer": {"device": "cpu", "pin_memory": dev.type == "cuda"}}
        if stage == 3:
            # HF Trainer's "auto" values for these
            zero.update(offload_param={"device": "cpu", "pin_memory": dev.type == "cuda"},
                        stage3_prefetch_bucket_size=int(0.9 * h * h),
                        stage3_param_persistence_threshold=10 * h)
        hp = cfg["hp"]
        conf = {"train_micro_batch_size_per_gpu": cfg["batch"], "gradient_accumulation_steps": 1,
                "bf16": {"enabled": True}, "zero_optimization": zero,
                "optimizer": {"type": "AdamW", "params": {
                    "lr": hp["lr"], "betas": list(hp["betas"]), "eps": hp["eps"],
                    "weight_decay": hp["weight_decay"]}},
                "steps_per_print": 10**9, "wall_clock_breakdown": False}
        self.conf = conf
        self.engine, _, _, _ = deepspeed.initialize(model=model, config=conf,
                                                    model_parameters=model.parameters())
        bo = getattr(self.engine, "basic_optimizer", None)
        if bo is not None:    # what DeepSpeed really picked
            self.desc = self.desc.replace("DeepSpeedCPUAdam (AdamW)", f"{type(bo).__name__}"
                                          f"{' (AdamW)' if getattr(bo, 'adam_w_mode', 0) else ''}")

    def forward(self, x):
        return self.engine(input_ids=x, labels=x).loss

    def backward(self, loss):
        self.engine.backward(loss)

    def step(self):
        self.engine.step()


class Tencache:
    desc = "tencache.offload: bf16 compute, params/grads via the GPU arena, fp32 masters + C AdamW on the CPU"

    def __init__(self, model, cfg, dev, overlap=True, threads=0, timeline=False):
        sys.path.insert(0, os.path.join(TOP, "python"))
        import torch
        import tencache
        self.budget = cfg["gpu_budget"]
        if dev.type != "cuda" and not self.budget:    # host mode: 60% of the bf16 weights
            self.budget = int(0.6 * 2 * sum(p.numel() for p in model.parameters()))
        self.model, self.opt = tencache.offload(
            model, gpu_budget=self.budget, host_mode=dev.type != "cuda", dtype=torch.bfloat16,
            timeline=timeline, policy=cfg["policy"], overlap=overlap, threads=threads,
            **cfg["hp"])
        self.rt = self.opt.tencache
        how = {True: "overlapped with backward and the next forward",
               "backward": "overlapped with backward, all done at step() (overlap='backward')",
               False: "after backward (overlap=False)"}[overlap]
        self.desc += (f" (policy {cfg['policy']}, gpu_budget {fmt_b(self.budget)}, AdamW {how}, "
                      f"{self.rt.threads or 'default'} AdamW threads, "
                      f"{getattr(self.rt, 'adam_kernel', '?')} kernel)")
        self.stats = [self.rt.stats()]

    def forward(self, x):
        return self.model(input_ids=x, labels=x).loss

    def backward(self, loss):
        loss.backward()

    def step(self):
        self.opt.step()

    def after_step(self):
        self.stats.append(self.rt.stats())


def measure_link(torch, dev, nbytes=256 << 20, reps=3):
    """Pinned host <-> device copy rates (GB/s): each way, and both at once."""
    h = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    h2 = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    d = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    d2 = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    s1, s2 = torch.cuda.Stream(dev), torch.cuda.Stream(dev)

    def timed(fn):
        """Copies per second, the best of reps (after one warm-up)."""
        best = 0.0
        for i in range(reps + 1):
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize(dev)
            if i:
                best = max(best, 1 / (time.perf_counter() - t0))
        return best

    def h2d():
        with torch.cuda.stream(s1):
            d.copy_(h, non_blocking=True)

    def d2h():
        with torch.cuda.stream(s2):
            h2.copy_(d2, non_blocking=True)

    def both():
        h2d()
        d2h()
    r = {"h2d": timed(h2d) * nbytes, "d2h": timed(d2h) * nbytes,
         "bidir": timed(both) * 2 * nbytes, "bytes": nbytes}
    del h, h2, d, d2
    torch.cuda.empty_cache()
    return r


class Peaks:
    """torch's allocated/reserved high-water marks, per phase and overall."""

    def __init__(self, torch, dev):
        self.torch, self.cuda = torch, dev.type == "cuda"
        self.alloc = self.reserved = self.used = 0
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()

    def phase(self):
        """(allocated peak, reserved peak) since the last call; resets them."""
        if not self.cuda:
            return 0, 0
        c = self.torch.cuda
        a, r = c.max_memory_allocated(), c.max_memory_reserved()
        self.alloc, self.reserved = max(self.alloc, a), max(self.reserved, r)
        c.reset_peak_memory_stats()
        return a, r

    # torch allocator counters that show it giving memory back and taking it
    # again under the cap (each release waits for the stream to drain)
    CHURN = ("num_alloc_retries", "num_sync_all_streams", "num_device_alloc",
             "num_device_free", "num_ooms")

    def churn(self):
        """The CHURN counters' totals so far (empty off CUDA)."""
        if not self.cuda:
            return {}
        st = self.torch.cuda.memory_stats()
        return {k: st.get(k, 0) for k in self.CHURN}

    def sample_device(self):
        if self.cuda:
            free, total = self.torch.cuda.mem_get_info()
            self.used = max(self.used, total - free)


def vm_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return None


def worker(cfg, label, result_path):
    """One method's run; label is its name in the table (method, or
    method#K in round K of --rounds)."""
    t_begin = time.time()
    method = label.partition("#")[0]
    import torch
    dev = torch.device(cfg["device"])
    if dev.type == "cuda" and dev.index is None:    # set_device and the cap need an index
        dev = torch.device("cuda", torch.cuda.current_device())
    res = {"method": label, "ok": False, "device": cfg["device"]}
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
        torch.backends.cuda.matmul.allow_tf32 = True
        res["gpu"] = torch.cuda.get_device_name(dev)
        res["gpu_total"] = torch.cuda.get_device_properties(dev).total_memory
    log(f"[{method}] building {cfg['model']} (random init on {dev.type})")
    model, conf = build_model(cfg, dev)
    n = sum(p.numel() for p in model.parameters())
    res["n_params"] = n
    g = torch.Generator().manual_seed(cfg["seed"] + 1)
    total_steps = cfg["warmup"] + cfg["steps"]
    data = [torch.randint(0, conf.vocab_size, (cfg["batch"], cfg["seq"]), generator=g).to(dev)
            for _ in range(total_steps)]
    if method != "ideal":
        model = model.to("cpu")    # the offload methods start from a CPU model
        if dev.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    if dev.type == "cuda" and method == "tencache":
        res["link"] = measure_link(torch, dev)
        log(f"[{method}] pinned copies: H2D {res['link']['h2d'] / 1e9:.1f}, D2H "
            f"{res['link']['d2h'] / 1e9:.1f}, both at once {res['link']['bidir'] / 1e9:.1f} GB/s")
    cap = cfg.get("cap")
    if dev.type == "cuda" and method != "ideal" and cap:
        torch_cap = cap - (cfg["gpu_budget"] if method.startswith("tencache") else 0)
        if torch_cap <= 0 or cap > res["gpu_total"]:
            raise SystemExit(f"cap {fmt_b(cap)} and gpu_budget {fmt_b(cfg['gpu_budget'])} "
                             f"leave torch {fmt_b(torch_cap)} of {fmt_b(res['gpu_total'])}")
        frac = torch_cap / res["gpu_total"]
        torch.cuda.set_per_process_memory_fraction(frac, dev)
        res["cap"], res["torch_cap"], res["fraction"] = cap, torch_cap, frac
        log(f"[{method}] GPU cap {fmt_b(cap)} (torch allocator fraction {frac:.4f})")
    peaks = Peaks(torch, dev)
    t0 = time.time()
    if method == "ideal":
        m = Ideal(model, cfg, dev)
    elif method == "naive":
        m = Naive(model, cfg, dev)
    elif method.startswith("deepspeed"):
        m = DeepSpeed(model, cfg, dev, int(method[-1]))
        res["ds_config"] = m.conf
    elif method.startswith("tencache"):
        name, threads = base_method(method)
        m = Tencache(model, cfg, dev, overlap=TC_OVERLAP[name], threads=threads,
                     timeline=cfg["timeline"] and label == "tencache")
        res["gpu_budget"] = m.budget
    else:
        raise SystemExit(f"unknown method {method}")
    del model
    res["desc"] = m.desc
    res["setup_s"] = time.time() - t0
    res["setup_peak"] = peaks.phase()
    res["rss_after_setup"] = vm_status("VmRSS")
    log(f"[{method}] set up in {res['setup_s']:.1f} s: {m.desc}")

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
    steps = []
    churn = peaks.churn()
    for i, x in enumerate(data):
        base = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else 0
        sync()
        t0 = time.perf_counter()
        loss = m.forward(x)
        peaks.sample_device()
        m.backward(loss)
        sync()
        t1 = time.perf_counter()
        fb_peak = peaks.phase()
        m.step()
        sync()
        t2 = time.perf_counter()
        st_peak = peaks.phase()
        peaks.sample_device()
        if hasattr(m, "after_step"):
            m.after_step()
        now = peaks.churn()
        rec = {"alloc_churn": {k: v - churn[k] for k, v in now.items() if v != churn[k]}}
        churn = now
        rec.update({"loss": loss.item(), "step_ms": (t2 - t0) * 1e3,
                    "fwd_bwd_ms": (t1 - t0) * 1e3, "opt_ms": (t2 - t1) * 1e3,
                    "act_peak": fb_peak[0] - base, "fwd_bwd_peak": fb_peak,
                    "opt_peak": st_peak, "rss": vm_status("VmRSS")})
        steps.append(rec)
        log(f"[{method}] step {i + 1}/{total_steps}{' (warm-up)' if i < cfg['warmup'] else ''}: "
            f"loss {rec['loss']:.4f}, {rec['step_ms']:.0f} ms (fwd+bwd {rec['fwd_bwd_ms']:.0f}, "
            f"optimizer {rec['opt_ms']:.0f})" +
            (f"; torch allocator {rec['alloc_churn']}" if rec["alloc_churn"] else ""))
    meas = steps[cfg["warmup"]:]
    if cfg.get("gpu_profile") and dev.type == "cuda":
        path = os.path.join(cfg["out"], f"gpu-profile-{label.replace('#', '-round')}.json")
        try:
            res["gpu_profile"] = gp = profile_step(m, data[-1], path)
            log(f"[{method}] profiled step: {gp['step_ms']:.0f} ms, GPU busy "
                f"{gp.get('busy_ms', 0):.1f} of {gp.get('span_ms', 0):.1f} ms, "
                f"{gp.get('n_gaps', 0)} gaps >= 50 us ({gp.get('idle_gaps_ms', 0):.1f} ms)")
            for g in gp.get("gaps", [])[:6]:
                log(f"[{method}]   gap {g['ms']:.2f} ms at {g['at_ms']:.1f}: "
                    f"{g['after']} -> {g['before']}")
        except Exception as e:    # noqa: BLE001 (the measured steps stand)
            res["gpu_profile"] = {"error": f"{type(e).__name__}: {e}"}
    med = statistics.median
    res.update(
        steps=steps, losses=[s["loss"] for s in steps],
        step_ms=med(s["step_ms"] for s in meas), fwd_bwd_ms=med(s["fwd_bwd_ms"] for s in meas),
        opt_ms=med(s["opt_ms"] for s in meas),
        act_peak=max(s["act_peak"] for s in steps),
        gpu_alloc_peak=peaks.alloc if dev.type == "cuda" else None,
        gpu_reserved_peak=peaks.reserved if dev.type == "cuda" else None,
        device_used_peak=peaks.used if dev.type == "cuda" else None,
        host_rss_peak=vm_status("VmHWM"))
    res["tokens_per_s"] = cfg["batch"] * cfg["seq"] / (res["step_ms"] / 1e3)
    res["gpu_total_peak"] = None if dev.type != "cuda" else \
        res["gpu_reserved_peak"] + (m.budget if method.startswith("tencache") else 0)
    if method.startswith("tencache"):
        res["tencache"] = tencache_summary(m, cfg)
        if method == "tencache":
            res["adam_alone"] = adam_alone(m, res["n_params"], cfg)
        if cfg["timeline"] and label == "tencache":
            path = os.path.join(cfg["out"], "tencache-timeline.json")
            try:
                m.rt.timeline(path)
                res["timeline"] = path
            except Exception as e:    # noqa: BLE001
                res["timeline_error"] = str(e)
        m.rt.close()
    res["ok"] = all(math.isfinite(v) for v in res["losses"])
    if not res["ok"]:
        res["error"] = "non-finite loss"
    res["wall_s"] = time.time() - t_begin
    with open(result_path, "w") as f:
        json.dump(res, f, indent=1)
    log(f"[{method}] {label}: {res['tokens_per_s']:.0f} tokens/s, step {res['step_ms']:.0f} ms")
    # no destroy_process_group: main() leaves with os._exit, so NCCL teardown cannot hang


def gpu_gaps(trace, top=12, min_gap_us=50.0):
    """Summarize a torch.profiler Chrome trace of one step: the GPU's busy
    time (union of kernels, any stream), its idle gaps, the copies, and the
    largest gaps with the kernels around them (where the GPU waited)."""
    ev = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
    kern = sorted(((e["ts"], e["ts"] + e.get("dur", 0), e.get("name", "?"))
                   for e in ev if e.get("ph") == "X" and e.get("cat") == "kernel"),
                  key=lambda k: k[0])
    copies = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
    out = {"kernels": len(kern), "copies": len(copies),
           "copy_ms": sum(e.get("dur", 0) for e in copies) / 1e3}
    if not kern:
        return out
    t0 = kern[0][0]
    busy, gaps, end, prev = 0.0, [], kern[0][0], kern[0][2]
    for s, e, name in kern:
        if s > end:
            if s - end >= min_gap_us:
                gaps.append((s - end, end - t0, prev, name))
        busy += max(0.0, e - max(s, end))
        if e > end:
            end, prev = e, name
    span = end - t0
    idle = sum(g[0] for g in gaps)
    out.update(span_ms=span / 1e3, busy_ms=busy / 1e3, idle_ms=(span - busy) / 1e3,
               idle_gaps_ms=idle / 1e3, n_gaps=len(gaps),
               gaps=[{"ms": round(g[0] / 1e3, 3), "at_ms": round(g[1] / 1e3, 3),
                      "after": g[2][:80], "before": g[3][:80]}
                     for g in sorted(gaps, reverse=True)[:top]])
    return out


def profile_step(m, x, path):
    """One extra step under torch.profiler (CUDA activity only); writes the
    Chrome trace to path and returns gpu_gaps() of it."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        loss = m.forward(x)
        m.backward(loss)
        m.step()
        torch.cuda.synchronize()
    step_ms = (time.perf_counter() - t0) * 1e3
    if hasattr(m, "after_step"):
        m.after_step()
    prof.export_chrome_trace(path)
    with open(path) as f:
        out = gpu_gaps(json.load(f))
    out.update(step_ms=step_ms, trace=path)
    return out


def adam_alone(m, n_params, cfg):
    """The host's own bound on a CPU optimizer: the C AdamW with the run's
    threads, nothing else running, over a chunk well beyond the caches (fp32
    master and moments, bf16 grad and param copy, as in training), scaled to
    the model's parameters. Best of 3 after a first touch."""
    import torch
    from tencache.offload import adamw_step
    n = min(n_params, 64 << 20)
    try:
        threads = getattr(m.rt, "threads", 0) or 0
        master, ea, eas = (torch.zeros(n, dtype=torch.float32) for _ in range(3))
        g, p = torch.full((n,), 1e-3, dtype=torch.bfloat16), torch.zeros(n, dtype=torch.bfloat16)
        best = None
        for step in range(1, 5):
            t0 = time.perf_counter()
            adamw_step(master, ea, eas, g, p, lr=1e-4, step=step, threads=threads,
                       **{k: v for k, v in cfg["hp"].items() if k != "lr"})
            dt = time.perf_counter() - t0
            if step > 1:
                best = dt if best is None else min(best, dt)
    except Exception as e:    # noqa: BLE001 (recorded, the run goes on)
        return {"error": f"{type(e).__name__}: {e}"}
    ms = best * 1e3 * n_params / n
    log(f"[tencache] the C AdamW alone: {best / n * 1e9:.3f} ns/param over {n / 1e6:.1f} M, "
        f"{ms:.0f} ms for the model's {n_params / 1e6:.1f} M params ({30 * n / best / 1e9:.0f} GB/s "
        f"of host memory at 30 B/param)")
    return {"ns_per_param": best / n * 1e9, "model_ms": ms, "chunk": n, "threads": threads}


def tencache_summary(m, cfg):
    """Hit rate, stalls and link bytes of the measured steps (stats deltas)."""
    st = m.stats
    w = cfg["warmup"]
    per = []
    for a, b in zip(st[w:-1], st[w + 1:]):
        per.append({"h2d": b["link_bytes"][0] - a["link_bytes"][0],
                    "d2h": b["link_bytes"][1] - a["link_bytes"][1],
                    "nvme_rd": b["link_bytes"][2] - a["link_bytes"][2],
                    "nvme_wr": b["link_bytes"][3] - a["link_bytes"][3],
                    "acquires": b["acquires"] - a["acquires"], "hits": b["hits"] - a["hits"],
                    "stall_ns": b["stall_ns"] - a["stall_ns"],
                    "planned": b["planned_steps"] - a["planned_steps"],
                    "late_prefetches": b["late_prefetches"] - a["late_prefetches"]})
    last = st[-1]
    acq = sum(p["acquires"] for p in per)
    med = statistics.median
    return {
        "measured_steps": len(per), "planned_measured_steps": sum(p["planned"] for p in per),
        "hit_rate": sum(p["hits"] for p in per) / acq if acq else None,
        "stall_ms_per_step": med(p["stall_ns"] for p in per) / 1e6,
        "h2d_bytes_per_step": med(p["h2d"] for p in per),
        "d2h_bytes_per_step": med(p["d2h"] for p in per),
        "nvme_bytes_per_step": med(p["nvme_rd"] + p["nvme_wr"] for p in per),
        "late_prefetches_per_step": med(p["late_prefetches"] for p in per),
        "per_step": per, "final_stats": last, "link_bw": last["link_bw"],
        "gpu_arena_peak": last["gpu_bytes_peak"], "gpu_budget": m.budget}


# ---- the parent: one subprocess per method, the table ---------------------------

def run_worker(args, cfg, method, deadline, env_extra):
    logs = os.path.join(args.out, "logs")
    os.makedirs(logs, exist_ok=True)
    fname = method.replace("@", "-threads").replace("#", "-round")    # [A-Za-z0-9._-]
    rpath = os.path.join(args.out, f"result-{fname}.json")
    lpath = os.path.join(logs, f"{fname}.log")
    if os.path.exists(rpath):
        os.unlink(rpath)
    left = deadline - time.time()
    timeout = min(args.timeout or TIMEOUTS[base_method(method)[0]], left)
    if timeout < 20:
        return {"method": method, "ok": False, "error": "skipped: the --deadline was reached"}
    cpath = os.path.join(args.out, f"config-{fname}.json")
    with open(cpath, "w") as f:
        json.dump(cfg, f)
    env = dict(os.environ, **env_extra)
    env["PYTHONUNBUFFERED"] = "1"
    conf = alloc_conf_of(args.alloc_confs, method)
    if conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    log(f"== {method} (timeout {timeout:.0f} s, log {lpath})")
    t0 = time.time()
    with open(lpath, "w") as lf:
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", method,
                              "--config", cpath, "--result", rpath], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True, text=True, errors="replace")

        def pump():
            for line in p.stdout:
                lf.write(line)
                lf.flush()
                if line.startswith(f"[{method.partition('#')[0]}]"):
                    print("   " + line, end="", flush=True)
        th = threading.Thread(target=pump, daemon=True)
        th.start()
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(p.pid, signal.SIGKILL)    # the worker's own session
            rc = p.wait()
        th.join(5)
    wall = time.time() - t0
    if os.path.exists(rpath):    # written after the last step: a hang in teardown is no failure
        with open(rpath) as f:
            r = json.load(f)
        r["log"] = lpath
        if rc:
            r["note"] = "timed out after writing its result" if timed_out else \
                f"exit {rc} after writing its result"
        return r
    with open(lpath, errors="replace") as f:
        tail = [ln.rstrip() for ln in f.read().splitlines() if ln.strip()][-40:]
    reason = f"timed out after {timeout:.0f} s" if timed_out else f"exit {rc}"
    last = next((ln for ln in reversed(tail) if not ln.startswith(" ") and
                 ("Error" in ln or "error" in ln or "failed" in ln or "Exception" in ln)),
                tail[-1] if tail else "no output")
    return {"method": method, "ok": False, "error": f"{reason}: {last.strip()[:300]}",
            "log_tail": tail, "wall_s": wall, "log": lpath}


def wheel_fits(name):
    """Whether a wheel file name matches this interpreter (others are skipped)."""
    try:
        from packaging.tags import sys_tags
        from packaging.utils import parse_wheel_filename
    except ImportError:
        return True
    ok = {str(t) for t in sys_tags()}
    return any(str(t) in ok for t in parse_wheel_filename(name)[3])


def prepare_deepspeed(args, env_extra):
    """Install DeepSpeed from --wheels into --work and JIT-build cpu_adam.
    Returns {ok, ...}; never raises."""
    info = {"ok": False, "wheels": args.wheels}
    try:
        return _prepare_deepspeed(args, env_extra, info)
    except Exception as e:    # noqa: BLE001 (a timeout, a missing tool: recorded)
        info["error"] = f"{type(e).__name__}: {e}"
        return info


def _prepare_deepspeed(args, env_extra, info):
    target = os.path.join(args.work, "ds-site")
    env = dict(os.environ, **env_extra)
    env["PYTHONPATH"] = target + os.pathsep + env.get("PYTHONPATH", "")
    env_extra["PYTHONPATH"] = env["PYTHONPATH"]
    probe = [sys.executable, "-c", "import deepspeed; print(deepspeed.__version__)"]

    def tail(text, n=25):
        return [ln for ln in text.splitlines() if ln.strip()][-n:]
    r = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=300)
    if r.returncode == 0:
        info["how"] = "already importable"
        try:    # installed by an earlier --prepare-deepspeed into this --out
            with open(os.path.join(args.out, "deepspeed-prepare.json")) as f:
                prev = json.load(f)
            if prev.get("ok"):
                info["how"] = f"--prepare-deepspeed: {prev.get('how')}, cpu_adam JIT build " \
                              f"{prev.get('op_build_s', 0):.0f} s"
                info["prepared"] = prev
        except (OSError, ValueError):
            pass
    else:
        t0 = time.time()
        if not os.path.isdir(args.wheels or ""):
            info["error"] = f"DeepSpeed is not installed and --wheels {args.wheels} is not a " \
                            "directory (make it with tools/gpu/ds-wheels.sh)"
            return info
        files = sorted(os.listdir(args.wheels))
        wheels = [os.path.join(args.wheels, f) for f in files
                  if f.endswith(".whl") and wheel_fits(f)]
        sdist = [os.path.join(args.wheels, f) for f in files
                 if f.startswith("deepspeed-") and f.endswith(".tar.gz")]
        if not any(os.path.basename(w).startswith("deepspeed-") for w in wheels):
            wheels += sdist[-1:]
        if not any(os.path.basename(w).startswith("deepspeed-") for w in wheels):
            info["error"] = f"no deepspeed wheel or sdist in {args.wheels}"
            return info
        os.makedirs(target, exist_ok=True)
        pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True,
                             text=True)
        if pip.returncode == 0:
            cmd = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links",
                   args.wheels, "--no-deps", "--no-build-isolation", "--target", target] + wheels
            r = subprocess.run(cmd, env=dict(env, DS_BUILD_OPS="0"), capture_output=True,
                               text=True, timeout=600)
            info["how"] = "pip install --no-index --no-deps --target " + target
            if r.returncode:
                info["error"] = "pip install failed: " + " | ".join(tail(r.stdout + r.stderr, 8))
                info["log_tail"] = tail(r.stdout + r.stderr)
                return info
        else:    # no pip in this venv: pure-Python wheels are zip files
            info["how"] = f"unzipped wheels into {target} (no pip: {pip.stderr.strip()[-200:]})"
            for w in wheels:
                if not w.endswith(".whl"):
                    info["error"] = "pip is missing and only a deepspeed sdist is available"
                    return info
                with zipfile.ZipFile(w) as z:
                    z.extractall(target)
        info["install_s"] = time.time() - t0
        r = subprocess.run(probe, env=env, capture_output=True, text=True, timeout=300)
        if r.returncode:
            info["error"] = "import deepspeed failed after install: " + \
                " | ".join(tail(r.stdout + r.stderr, 6))
            info["log_tail"] = tail(r.stdout + r.stderr)
            return info
    info["version"] = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "?"
    # cpu_adam: DeepSpeed builds it with ninja at first use, here ahead of the timed runs
    t0 = time.time()
    build = "from deepspeed.ops.op_builder import CPUAdamBuilder; CPUAdamBuilder().load(verbose=True)"
    try:
        r = subprocess.run([sys.executable, "-c", build], env=env, capture_output=True,
                           text=True, timeout=args.ds_build_timeout)
    except subprocess.TimeoutExpired as e:
        info["error"] = f"cpu_adam JIT build timed out after {args.ds_build_timeout} s"
        info["log_tail"] = tail((e.stdout or b"").decode(errors="replace") if
                                isinstance(e.stdout, bytes) else (e.stdout or ""))
        return info
    info["op_build_s"] = time.time() - t0
    if r.returncode:
        lines = tail(r.stdout + r.stderr, 40)
        key = [ln for ln in lines if "error" in ln.lower() or "fatal" in ln.lower()]
        info["error"] = "cpu_adam JIT build failed: " + " | ".join((key or lines)[-4:])[:600]
        info["log_tail"] = lines
        return info
    info["ok"] = True
    return info


def derive_budgets(args, results):
    """--cap and --gpu-budget, or their auto values from the ideal run."""
    setup = {}
    ideal = results.get("ideal")
    if args.cap != "auto":
        setup["cap"] = parse_size(args.cap)
        setup["cap_how"] = "given (--cap)"
    elif ideal and ideal.get("ok") and ideal.get("gpu_reserved_peak"):
        setup["cap"] = (ideal["gpu_reserved_peak"] - 12 * ideal["n_params"]) // (256 << 20) \
            * (256 << 20)
        setup["cap_how"] = "auto: the ideal run's peak reserved memory minus 12 B/param " \
                           "(its fp32 masters and AdamW moments), rounded down to 256 MiB"
    elif args.device == "cpu":
        setup["cap"] = None
        setup["cap_how"] = "none (CPU run)"
    else:
        setup["cap"] = None
        setup["cap_how"] = "none: the ideal run did not give a peak (pass --cap)"
    if args.gpu_budget != "auto":
        setup["gpu_budget"] = parse_size(args.gpu_budget)
        setup["gpu_budget_how"] = "given (--gpu-budget)"
    elif setup["cap"] and ideal and ideal.get("ok"):
        # torch's caching allocator fragments under a cap: at batch 32 x 1024
        # it held 6.1 GiB reserved but unallocated, so the margin grows with
        # the activations (1 GiB sufficed at batch 8)
        torch_share = ideal["act_peak"] + max(GiB, ideal["act_peak"] // 8)
        setup["gpu_budget"] = max(setup["cap"] - torch_share, 0) // (64 << 20) * (64 << 20)
        setup["gpu_budget_how"] = (
            f"auto: cap - (the ideal run's forward+backward growth {fmt_b(ideal['act_peak'])}"
            " + max(1 GiB, 1/8 of it)) for torch's activations; the rest is tencache's arena")
        if setup["gpu_budget"] < 2 * GiB:
            setup["gpu_budget"] = min(2 * GiB, setup["cap"] // 2)
            setup["gpu_budget_how"] += "; raised to min(2 GiB, cap/2): the cap leaves little " \
                                       "beside the activations"
    elif setup["cap"]:
        setup["gpu_budget"] = setup["cap"] // 3 // (64 << 20) * (64 << 20)
        setup["gpu_budget_how"] = "cap/3 (no ideal run to size the activations)"
    else:
        setup["gpu_budget"] = None
        setup["gpu_budget_how"] = "host mode default (60% of the bf16 weights)" \
            if args.device == "cpu" else "none (no cap)"
    return setup


def round_ratios(order, results, rounds):
    """tokens/s ratios: round 1's tencache (and tencache@N) against round 1's
    ideal, naive and best DeepSpeed; round K's tencache#K against the ideal
    and round K's own baselines (method#K)."""
    ideal = results.get("ideal") if results.get("ideal", {}).get("ok") else None
    tc = results.get("tencache") if results.get("tencache", {}).get("ok") else None
    dss = [results[m] for m in order
           if m.startswith("deepspeed") and "#" not in m and results[m].get("ok")]
    best_ds = max(dss, key=lambda r: r["tokens_per_s"]) if dss else None
    naive = results.get("naive") if results.get("naive", {}).get("ok") else None
    ratios = {}
    if tc:
        for name, r in (("ideal", ideal), ("naive", naive), ("deepspeed", best_ds)):
            ratios[f"tencache/{name}"] = tc["tokens_per_s"] / r["tokens_per_s"] if r else None
        if best_ds:
            ratios["deepspeed_best"] = best_ds["method"]
        for v in order:
            r = results[v]
            if v != "tencache" and v.startswith("tencache") and "#" not in v and r.get("ok"):
                ratios[f"{v}/tencache"] = r["tokens_per_s"] / tc["tokens_per_s"]
    # --rounds: each later round's tencache against that round's baselines
    for k in range(2, rounds + 1):
        tk = results.get(f"tencache#{k}")
        if not (tk and tk.get("ok")):
            continue
        dk = [results[m] for m in order if m.startswith("deepspeed") and m.endswith(f"#{k}")
              and results[m].get("ok")]
        nk = results.get(f"naive#{k}")
        for name, r in (("ideal", ideal), ("naive", nk if nk and nk.get("ok") else None),
                        ("deepspeed", max(dk, key=lambda r: r["tokens_per_s"]) if dk else None)):
            ratios[f"tencache#{k}/{name}"] = tk["tokens_per_s"] / r["tokens_per_s"] if r else None
        if dk:
            ratios[f"deepspeed_best#{k}"] = max(dk, key=lambda r: r["tokens_per_s"])["method"]
    return ratios


def summarize(args, results, setup, ds_info):
    order = [m for m in args.methods if m in results]
    ideal = results.get("ideal") if results.get("ideal", {}).get("ok") else None
    tc = results.get("tencache") if results.get("tencache", {}).get("ok") else None
    ratios = round_ratios(order, results, getattr(args, "rounds", 1))
    bound = None
    if tc and tc.get("link") and tc.get("tencache"):
        t = tc["tencache"]
        ln = tc["link"]
        n = tc["n_params"]

        def link_s(h2d, d2h):
            return max(h2d / ln["h2d"], d2h / ln["d2h"], (h2d + d2h) / ln["bidir"])
        bound = {"h2d_bytes": t["h2d_bytes_per_step"], "d2h_bytes": t["d2h_bytes_per_step"],
                 "bw": ln, "runtime_link_bw": t["link_bw"][:2],
                 "link_ms": link_s(t["h2d_bytes_per_step"], t["d2h_bytes_per_step"]) * 1e3,
                 "min_bytes_each_way": 2 * n,
                 "min_link_ms": link_s(2 * n, 2 * n) * 1e3,
                 "tencache_opt_ms": tc["opt_ms"]}
        if ideal:
            ti = ideal["step_ms"]
            bound["ideal_step_ms"] = ti
            bound["fraction_allowed"] = min(1.0, ti / bound["link_ms"]) if bound["link_ms"] else 1
            bound["fraction_allowed_min_bytes"] = min(1.0, ti / bound["min_link_ms"])
            bound["fraction_allowed_serial_adam"] = ti / (ti + tc["opt_ms"])
            aa = tc.get("adam_alone") or {}
            if aa.get("model_ms"):
                bound["adam_alone_ms"] = aa["model_ms"]
                bound["fraction_allowed_host"] = min(1.0, ti / max(ti, bound["link_ms"],
                                                                  aa["model_ms"]))
    out = {"config": {k: v for k, v in vars(args).items()}, "setup": setup,
           "deepspeed_install": ds_info, "results": results, "ratios": ratios,
           "pcie_bound": bound}
    return out, table(args, order, results, setup, ratios, bound, ds_info)


def table(args, order, results, setup, ratios, bound, ds_info):
    env_conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    L = []
    r0 = next((results[m] for m in order if results[m].get("n_params")), {})
    L.append(f"# train_bench: {args.model}, batch {args.batch} x seq {args.seq} "
             f"({args.batch * args.seq} tokens/step), {args.warmup} warm-up + {args.steps} "
             f"measured steps, device {args.device}" +
             (f" ({r0.get('gpu')})" if r0.get("gpu") else ""))
    L.append("")
    if r0.get("n_params"):
        L.append(f"Parameters: {r0['n_params'] / 1e6:.1f} M. GPU cap for the offload methods: "
                 f"{fmt_b(setup.get('cap'))} ({setup.get('cap_how')}). tencache gpu_budget: "
                 f"{fmt_b(setup.get('gpu_budget'))} ({setup.get('gpu_budget_how')}). "
                 f"PYTORCH_CUDA_ALLOC_CONF: "
                 f"{alloc_conf_of(args.alloc_confs, 'ideal') or env_conf or 'unset'}" +
                 "".join(f", {m}: {c or env_conf or 'unset'}" for m, c in
                         args.alloc_confs.items() if m) + ".")
        L.append("")
    hdr = ["method", "status", "tokens/s", "step ms (median)", "fwd+bwd ms", "optimizer ms",
           "GPU alloc peak", "GPU reserved peak", "GPU total (reserved + arena)",
           "device used (mem_get_info)", "host RSS peak", "hit rate", "stall ms/step",
           "final loss"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "---|" * len(hdr))
    for m in order:
        r = results[m]
        if not r.get("ok"):
            e = r.get("error", "?")
            L.append(f"| {m} | {e if e.startswith('skipped') else 'failed: ' + e} |" +
                     " |" * (len(hdr) - 2))
            continue
        t = r.get("tencache") or {}
        hr = t.get("hit_rate")
        L.append("| " + " | ".join([
            m, "ok", f"{r['tokens_per_s']:.0f}", f"{r['step_ms']:.1f}", f"{r['fwd_bwd_ms']:.1f}",
            f"{r['opt_ms']:.1f}", fmt_b(r.get("gpu_alloc_peak")), fmt_b(r.get("gpu_reserved_peak")),
            fmt_b(r.get("gpu_total_peak")), fmt_b(r.get("device_used_peak")),
            fmt_b(r.get("host_rss_peak")), "-" if hr is None else f"{hr:.3f}",
            f"{t['stall_ms_per_step']:.1f}" if t else "-", f"{r['losses'][-1]:.4f}"]) + " |")
    L.append("")
    for m in order:
        if results[m].get("desc"):
            L.append(f"- {m}: {results[m]['desc']}")
    t = (results.get("tencache") or {}).get("tencache")
    if t:
        L.append(f"tencache: {t['planned_measured_steps']} of {t['measured_steps']} measured "
                 f"steps ran from its plan; {fmt_b(t['h2d_bytes_per_step'])} H2D and "
                 f"{fmt_b(t['d2h_bytes_per_step'])} D2H per step; GPU arena high-water "
                 f"{fmt_b(t['gpu_arena_peak'])} of {fmt_b(t['gpu_budget'])}; "
                 f"{t['late_prefetches_per_step']} late prefetches per step.")
    L.append("")
    if ratios:
        L.append("Ratios (tokens/s): " + ", ".join(
            f"{k} = {v:.3f}" if isinstance(v, float) else f"{k} = {v or 'n/a (failed or not run)'}"
            for k, v in ratios.items()))
        L.append("")
    if bound:
        b = bound
        L.append(f"PCIe bound: tencache moved {fmt_b(b['h2d_bytes'])} H2D + {fmt_b(b['d2h_bytes'])}"
                 f" D2H per step; measured pinned copies {b['bw']['h2d'] / 1e9:.1f} GB/s H2D, "
                 f"{b['bw']['d2h'] / 1e9:.1f} D2H, {b['bw']['bidir'] / 1e9:.1f} both at once "
                 f"(runtime's calibration {b['runtime_link_bw'][0] / 1e9:.1f} / "
                 f"{b['runtime_link_bw'][1] / 1e9:.1f}) -> the link needs {b['link_ms']:.1f} ms "
                 f"per step (the minimum, 2 B/param each way: {b['min_link_ms']:.1f} ms).")
        if "fraction_allowed" in b:
            L.append(f"With the ideal step at {b['ideal_step_ms']:.1f} ms and copies fully "
                     f"overlapped, the link allows {100 * b['fraction_allowed']:.0f}% of the "
                     f"ideal ({100 * b['fraction_allowed_min_bytes']:.0f}% at the minimum bytes). "
                     f"tencache's optimizer.step() takes {b['tencache_opt_ms']:.1f} ms after "
                     f"backward: that alone, run serially, allows "
                     f"{100 * b['fraction_allowed_serial_adam']:.0f}% of the ideal.")
        if "fraction_allowed_host" in b:
            L.append(f"Host bound: the C AdamW alone (same threads, nothing else running) takes "
                     f"{b['adam_alone_ms']:.1f} ms for this model's parameters, so even fully "
                     f"overlapped a CPU optimizer allows at most "
                     f"{100 * b['fraction_allowed_host']:.0f}% of the ideal on this host "
                     f"(ideal / max(ideal, link, AdamW alone)).")
        L.append("")
    if ds_info is not None:
        L.append("DeepSpeed install: " + ("ok, " + ds_info.get("version", "?") + " via "
                 + ds_info.get("how", "?") + (f", cpu_adam load {ds_info['op_build_s']:.0f} s"
                                             if "op_build_s" in ds_info else "")
                 if ds_info.get("ok") else "failed: " + ds_info.get("error", "?")))
        L.append("")
    tc = results.get("tencache", {})
    if tc.get("timeline"):
        L.append(f"Perfetto timeline of the last measured tencache step: {tc['timeline']}")
    return "\n".join(L) + "\n"


def parent(args):
    os.makedirs(args.out, exist_ok=True)
    args.work = args.work or os.path.join(args.out, "tmp")
    os.makedirs(args.work, exist_ok=True)
    deadline = time.time() + args.deadline
    if args.device == "auto":
        import torch    # no CUDA context here: the workers make their own
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    methods = []
    for m in args.methods.split(","):
        m = m.strip()
        if m == "deepspeed":
            m = f"deepspeed{args.ds_stage}"
        try:
            base_method(m)
        except ValueError:
            raise SystemExit(f"unknown method {m!r}; choose from {', '.join(METHODS)} (a tencache "
                             "method may end in @N, N > 0 AdamW threads)") from None
        methods.append(m)
    shape = MODELS[args.model][1]
    maxpos = shape.get("max_position_embeddings", 2048)
    if args.seq > maxpos:
        raise SystemExit(f"--seq {args.seq} exceeds {args.model}'s max_position_embeddings "
                         f"{maxpos}")
    if args.rounds < 1:
        raise SystemExit(f"--rounds {args.rounds}: give 1 or more")
    # ideal first: the auto cap is derived from it
    methods.sort(key=lambda m: m != "ideal")
    # --rounds: the offload methods again, in the same order, as method#K
    # (the host's memory speed drifts between runs: each round compares
    # methods run minutes apart; ideal runs once, on the GPU alone)
    methods += [f"{m}#{k}" for k in range(2, args.rounds + 1) for m in methods if m != "ideal"]
    args.methods = methods
    try:
        args.alloc_confs = alloc_confs(args.alloc_conf)
    except ValueError as e:
        raise SystemExit(f"--alloc-conf {e}=...: unknown method; choose from "
                         f"{', '.join(METHODS)}") from None
    hp = dict(lr=args.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    base = dict(model=args.model, batch=args.batch, seq=args.seq, warmup=args.warmup,
                steps=args.steps, seed=args.seed, attn=args.attn, device=args.device,
                hp=hp, out=os.path.abspath(args.out), policy=args.policy,
                timeline=not args.no_timeline, gpu_profile=args.gpu_profile)
    env_extra = {"TORCH_EXTENSIONS_DIR": os.path.join(args.work, "torch_extensions"),
                 "DS_ACCELERATOR": "cuda" if args.device == "cuda" else "cpu",
                 "TMPDIR": args.work}
    if os.environ.get("TENCACHE_LIB") is None and \
            os.path.exists(os.path.join(TOP, "build", "libtencache.so")):
        env_extra["TENCACHE_LIB"] = os.path.join(TOP, "build", "libtencache.so")
    results, setup, ds_info = {}, {}, None
    log(f"train_bench: {args.model}, batch {args.batch} x seq {args.seq}, "
        f"{args.warmup}+{args.steps} steps, methods {', '.join(methods)}, device {args.device}")
    for m in methods:
        cfg = dict(base)
        if m != "ideal" and not setup:
            setup = derive_budgets(args, results)
            log(f"   cap {fmt_b(setup['cap'])} ({setup['cap_how']}); tencache gpu_budget "
                f"{fmt_b(setup['gpu_budget'])} ({setup['gpu_budget_how']})")
        cfg.update(cap=setup.get("cap"), gpu_budget=setup.get("gpu_budget"))
        if args.device == "cuda" and m != "ideal" and not cfg["cap"]:
            results[m] = {"method": m, "ok": False, "error": setup["cap_how"]}
            continue
        if m.startswith("deepspeed") and ds_info is None:
            log("== deepspeed: install and cpu_adam build")
            ds_info = prepare_deepspeed(args, env_extra)
            log("   " + ("ok: " + ds_info.get("how", "") if ds_info["ok"] else
                         "failed: " + ds_info.get("error", "?")))
        if m.startswith("deepspeed") and not ds_info["ok"]:
            results[m] = {"method": m, "ok": False, "error": ds_info.get("error", "?")}
            continue
        results[m] = run_worker(args, cfg, m, deadline, env_extra)
        r = results[m]
        r["alloc_conf"] = alloc_conf_of(args.alloc_confs, m) or \
            os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        if not r.get("ok"):
            log(f"   {m} FAILED: {r.get('error')}")
    try:
        out, md = summarize(args, results, setup, ds_info)
    except Exception:    # noqa: BLE001 (keep the measurements whatever happens)
        md = "summary failed:\n" + traceback.format_exc()
        out = {"config": vars(args), "setup": setup, "deepspeed_install": ds_info,
               "results": results, "summary_error": md}
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md)
    log("")
    log(md)
    if not args.keep_work and os.path.isdir(args.work) and args.work.startswith(args.out):
        shutil.rmtree(args.work, ignore_errors=True)
    return 0 if all(r.get("ok") for r in results.values()) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="opt-1.3b", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=2, help="warm-up steps (tencache profiles "
                    "the first one and plans from the second)")
    ap.add_argument("--steps", type=int, default=4, help="measured steps")
    ap.add_argument("--methods", default="ideal,tencache,naive,deepspeed2,deepspeed3",
                    help=f"comma-separated, from {', '.join(METHODS)} (ideal runs first)")
    ap.add_argument("--cap", default="auto", help="GPU memory cap of the offload methods "
                    "(e.g. 24GiB); auto: ideal's peak reserved minus 12 B/param")
    ap.add_argument("--gpu-budget", default="auto", help="tencache's GPU arena (inside the cap)")
    ap.add_argument("--policy", default="ours", help="tencache eviction/prefetch policy")
    ap.add_argument("--ds-stage", type=int, default=3, choices=(2, 3),
                    help="the stage of method 'deepspeed'")
    ap.add_argument("--device", default="auto", choices=("auto", "cuda", "cpu"))
    ap.add_argument("--attn", default="sdpa", choices=("sdpa", "eager"))
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--alloc-conf", action="append", metavar="[METHOD=]CONF",
                    help="PYTORCH_CUDA_ALLOC_CONF of every method, or with METHOD= of one "
                         "method (repeatable; default: the environment's, else torch's own "
                         "allocator). expandable_segments:True under the cap unmaps and maps "
                         "memory again every step, each time waiting for the GPU to drain "
                         "(33 ms of a 560 ms tencache step on the H200); DeepSpeed needed it at "
                         "a 61.25 GiB cap")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="/tmp/tencache-train-bench")
    ap.add_argument("--work", help="scratch (DeepSpeed install, torch extensions); "
                    "default OUT/tmp, removed at the end unless --keep-work")
    ap.add_argument("--keep-work", action="store_true")
    ap.add_argument("--wheels", default=os.path.join(TOP, ".devdeps", "wheels"),
                    help="DeepSpeed sdist/wheel and its dependencies' wheels")
    ap.add_argument("--timeout", type=float, help="per-method timeout in s (default: per method)")
    ap.add_argument("--deadline", type=float, default=480, help="all methods together, s")
    ap.add_argument("--rounds", type=int, default=1, help="run the offload methods this many "
                    "times in turn (method#K in round K): ratios per round, against drift "
                    "of the host's speed")
    ap.add_argument("--ds-build-timeout", type=float, default=240)
    ap.add_argument("--no-timeline", action="store_true",
                    help="do not record tencache's Perfetto timeline (it records every step)")
    ap.add_argument("--gpu-profile", action="store_true",
                    help="after the measured steps, one more step of each method under "
                    "torch.profiler: gpu-profile-<method>.json (Chrome trace) and the GPU's "
                    "busy time and idle gaps in the result")
    ap.add_argument("--prepare-deepspeed", action="store_true",
                    help="only install DeepSpeed and build cpu_adam into --work, then exit")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        with open(args.config) as f:
            cfg = json.load(f)
        try:
            worker(cfg, args.worker, args.result)
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)    # skip interpreter teardown (DeepSpeed/NCCL atexit hangs)
    if args.prepare_deepspeed:
        os.makedirs(args.out, exist_ok=True)
        args.work = args.work or os.path.join(args.out, "tmp")
        os.makedirs(args.work, exist_ok=True)
        dev = "cuda" if args.device != "cpu" else "cpu"
        env_extra = {"TORCH_EXTENSIONS_DIR": os.path.join(args.work, "torch_extensions"),
                     "DS_ACCELERATOR": dev, "TMPDIR": args.work}
        info = prepare_deepspeed(args, env_extra)
        with open(os.path.join(args.out, "deepspeed-prepare.json"), "w") as f:
            json.dump(info, f, indent=1)
        log(json.dumps({k: v for k, v in info.items() if k != "log_tail"}))
        return 0 if info["ok"] else 1
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
