#!/usr/bin/env python3
"""test_offload_gpu.py - test_offload.py on a CUDA GPU (exit 77 without one).

A transformer (d 256, 4 blocks, bf16 compute, fp32 masters) trained 20 steps
through tencache (CUDA mode: parameters and gradients in the GPU arena,
masters and moments pinned, AdamW in C on the CPU) against:
  A. the same mixed precision in plain torch: forward/backward on the GPU in
     bf16, fp32 masters on the CPU in torch.optim.AdamW (Tensor.sqrt exact,
     see test_offload.py), copies rounded into the bf16 model: the same math,
     so losses and weights must be bit-identical (deterministic algorithms
     on; GPU kernels see the same inputs, only at other addresses);
  B. the usual all-GPU training: fp32 masters on the GPU, torch's default
     (foreach) AdamW: another operation order and CUDA's sqrt, so within a
     tolerance: losses 1e-3 relative, fp32 master weights 1e-2 relative L2
     (the reason is at the check; A's own distance to B is reported).
Also: the cache's GPU high-water mark stays within gpu_budget, a Perfetto
timeline of the last step (TIMELINE_DIR or /tmp), HF OPT/Llama in bf16 when
transformers is importable, and an NVMe tier when TEST_DIR takes O_DIRECT.
Env: TEST_OFFLOAD_BUDGET (fraction of the bf16 weights, default 0.75).
"""
import contextlib
import copy
import math
import os
import sys
import tempfile

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
try:
    import torch
except ImportError as e:
    print(f"# SKIP torch cannot be imported ({e})")
    sys.exit(77)
# TEST_OFFLOAD_GPU_ON_CPU=1: the same script in host mode, to check the test itself
ON_CPU = os.environ.get("TEST_OFFLOAD_GPU_ON_CPU") == "1"
if not torch.cuda.is_available() and not ON_CPU:
    print("# SKIP no CUDA GPU")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_offload as T    # noqa: E402
from test_offload import tencache, tap, counts, exact_sqrt, loss_of    # noqa: E402

DEV = torch.device("cpu") if ON_CPU else torch.device("cuda", torch.cuda.current_device())
DT = torch.bfloat16
STEPS = 20
BUDGET = float(os.environ.get("TEST_OFFLOAD_BUDGET", "0.75"))
torch.use_deterministic_algorithms(True, warn_only=True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False


def data_for(vocab, b=8, t=128):
    return [x.to(DEV) for x in T.batches(vocab, STEPS, b=b, t=t, seed=5)]


def ref_cpu_adam(model0, data):
    """A: bf16 on the GPU, fp32 masters in torch AdamW on the CPU."""
    model = copy.deepcopy(model0)
    params = list(model.parameters())
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    for p in params:
        p.data = p.data.to(DEV, DT)
    for mod in model.modules():
        for n, b in list(mod._buffers.items()):
            if b is not None:
                mod._buffers[n] = b.to(DEV)
    opt = torch.optim.AdamW(masters, foreach=False, **T.HP)
    losses = []
    for batch in data:
        loss = loss_of(model, batch)
        loss.backward()
        losses.append(loss.item())
        for p, m in zip(params, masters):
            m.grad = p.grad.float().cpu()
            p.grad = None
        with exact_sqrt():
            opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m.to(DEV))
    names = [n for n, _ in model.named_parameters()]
    return losses, {n: m.detach().clone() for n, m in zip(names, masters)}, \
        {n: p.detach().cpu() for n, p in model.named_parameters()}


def ref_gpu_adam(model0, data):
    """B: fp32 masters on the GPU, torch's default AdamW there."""
    model = copy.deepcopy(model0).to(DEV)
    params = list(model.parameters())
    masters = [p.detach().float().clone().requires_grad_(True) for p in params]
    for p in params:
        p.data = p.data.to(DT)
    opt = torch.optim.AdamW(masters, **T.HP)
    losses = []
    for batch in data:
        loss = loss_of(model, batch)
        loss.backward()
        losses.append(loss.item())
        for p, m in zip(params, masters):
            m.grad = p.grad.float()
            p.grad = None
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for p, m in zip(params, masters):
                p.copy_(m)
    names = [n for n, _ in model.named_parameters()]
    return losses, {n: m.detach().cpu() for n, m in zip(names, masters)}


def run_tencache(model0, data, budget_frac=None, slow_adam=0, **kw):
    model = copy.deepcopy(model0)
    bf16_bytes = sum(p.numel() * 2 for p in model.parameters())
    budget = int(bf16_bytes * (budget_frac or BUDGET))
    model, opt = tencache.offload(model, gpu_budget=budget, host_mode=ON_CPU, dtype=DT,
                                  timeline=True, **T.HP, **kw)
    if slow_adam:
        T.slow_down(opt, slow_adam)
    losses = []
    if not ON_CPU:
        torch.cuda.reset_peak_memory_stats()
    for batch in data:
        loss = loss_of(model, batch)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    rt = opt.tencache
    st = rt.stats()
    path = os.path.join(os.environ.get("TIMELINE_DIR", "/tmp"), "tencache-gpu-test-timeline.json")
    with contextlib.suppress(tencache.TencacheError):
        rt.timeline(path)
    st["torch_peak"] = 0 if ON_CPU else torch.cuda.max_memory_allocated()
    st["budget"] = budget
    st["carried"] = rt.host_ops.carried if rt.host_ops else 0
    masters, copies = rt.state(master=True), rt.state(master=False)
    rt.close()
    return losses, masters, copies, st


def rel_l2(a, b, names):
    num = sum((a[n].double() - b[n].double()).square().sum().item() for n in names)
    return math.sqrt(num / sum(b[n].double().square().sum().item() for n in names))


def check(name, model0, vocab, gpu_ref=True, need_carried=False, **kw):
    data = data_for(vocab)
    tl, tm, tc, st = run_tencache(model0, data, **kw)
    rl, rm, rc = ref_cpu_adam(model0, data)
    names = list(rm)
    same = tl == rl and all(torch.equal(tm[n], rm[n]) and torch.equal(tc[n], rc[n])
                            for n in names)
    detail = f"final loss {tl[-1]:.5f}, planned {st['planned_steps']}/{st['steps']}, " \
             f"hits {st['hits']}/{st['acquires']}, stall {st['stall_ns'] / 1e6:.1f} ms, " \
             f"GPU arena peak {st['gpu_bytes_peak']} of {st['budget']}, " \
             f"torch peak {st['torch_peak'] >> 20} MiB, {st['carried']} updates carried " \
             "over a step's end"
    if not same:
        first = next((i for i in range(STEPS) if tl[i] != rl[i]), None)
        detail += f"; first loss difference at step {first}; weights rel L2 " \
                  f"{rel_l2(tm, rm, names):.3g}"
    tap(same and (not need_carried or st["carried"] > 0),
        f"{name}: bit-identical to bf16 + CPU torch AdamW (exact sqrt)" +
        (", updates carried over step ends" if need_carried else ""), detail)
    tap(st["gpu_bytes_peak"] <= st["budget"], f"{name}: GPU arena within gpu_budget",
        f"{st['gpu_bytes_peak']} <= {st['budget']}")
    if gpu_ref:
        # Tolerance: Adam scales every update to about lr, so a gradient near
        # zero whose sign flips under another operation order (foreach AdamW,
        # CUDA's sqrt, bf16 rounding of the compute copy) moves its weight by
        # +-lr. Over 20 steps two correct implementations drift apart by
        # ~0.3% relative L2 of the fp32 masters (A vs B measured 0.0032 on
        # the CPU and 0.0038 on the H200); the losses stay within 1e-4.
        # The HF models (more near-zero gradients: biases, norms) drift further
        # from all-GPU AdamW: on the H200 torch's own CPU AdamW (reference A)
        # was 0.025 (OPT) and 0.066 (Llama) rel L2 from it. So the bound is
        # 1e-2, or no farther than reference A is.
        gl, gm = ref_gpu_adam(model0, data)
        dl = max(abs(a - b) / abs(b) for a, b in zip(tl, gl))
        dw = rel_l2(tm, gm, names)
        dref_l = max(abs(a - b) / abs(b) for a, b in zip(rl, gl))
        dref = rel_l2(rm, gm, names)
        tap(dl <= max(1e-3, dref_l * 1.01) and dw <= max(1e-2, dref * 1.01),
            f"{name}: within tolerance of all-GPU torch AdamW (losses 1e-3, weights 1e-2 "
            "rel L2, or no farther than torch's CPU AdamW)",
            f"loss rel diff {dl:.3g}, weights rel L2 {dw:.3g} "
            f"(reference A vs all-GPU: {dref_l:.3g}, {dref:.3g})")


def main():
    print(f"# torch {torch.__version__}, {'CPU' if ON_CPU else torch.cuda.get_device_name(DEV)}, "
          f"libtencache {tencache.lib().path}")
    torch.manual_seed(0)
    model0 = T.Tiny(vocab=512, d=256, heads=8, layers=4, ctx=128)
    check("Tiny bf16", model0, 512)
    check("Tiny bf16, overlap=False", model0, 512, gpu_ref=False, overlap=False)
    check("Tiny bf16, budget 35%, a slow AdamW carried into the next forward", model0, 512,
          gpu_ref=False, budget_frac=0.35, slow_adam=0.002, need_carried=True,
          overlap=True)
    for policy in ("lru", "zero", "10cache"):
        check(f"Tiny bf16, policy {policy}", model0, 512, gpu_ref=False, policy=policy)
    d = os.environ.get("TEST_DIR", "/var/tmp")
    try:
        with tempfile.TemporaryDirectory(dir=d) as td:
            fd = os.open(os.path.join(td, "probe"), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o600)
            os.close(fd)
            total = sum(p.numel() for p in model0.parameters()) * 16
            check("Tiny bf16, NVMe tier", model0, 512, gpu_ref=False,
                  nvme_path=os.path.join(td, "swap"), pinned_budget=total // 2)
    except OSError as e:
        tap(None, "Tiny bf16, NVMe tier", f"{d} refuses O_DIRECT ({e})")
    try:
        import transformers
    except Exception as e:    # noqa: BLE001
        tap(None, "HF OPT and Llama bf16", f"transformers not importable ({type(e).__name__})")
    else:
        small = dict(vocab_size=512, hidden_size=256, num_attention_heads=8,
                     num_hidden_layers=4, max_position_embeddings=256, tie_word_embeddings=False,
                     attn_implementation="eager")
        torch.manual_seed(0)
        opt = transformers.OPTForCausalLM(transformers.OPTConfig(
            ffn_dim=1024, word_embed_proj_dim=256, dropout=0.0, attention_dropout=0.0,
            activation_dropout=0.0, layerdrop=0.0, **small))
        llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
            intermediate_size=704, num_key_value_heads=4, **small))
        for name, m in (("HF OPT bf16", opt), ("HF Llama bf16", llama)):
            m.train()
            check(name, m, 512)
        # as the benchmark runs it: a budget below the weights, updates that
        # run into the next forward
        check("HF OPT bf16, budget 40%, a slow AdamW carried", opt, 512, gpu_ref=False,
              budget_frac=0.4, slow_adam=0.002, need_carried=True, overlap=True)
    print(f"{counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
