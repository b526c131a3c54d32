"""adam-alone.py - the library's C AdamW (tencache.offload.adamw_step) alone
on a host, over torch CPU tensors as train_bench's bound uses them: the AVX2
kernel and the AVX-512 one (the default where the CPU has it: it streams the
bf16 parameter copy) side by side, interleaved so that drift in the host's
memory bandwidth hits both, at 8, 11, 14 and 16 threads. Prints ns/param,
GB/s at 30 B/param and the AVX-512 / AVX2 speed ratio per thread count.
  TENCACHE_LIB=build/libtencache.so python tools/gpu/adam-alone.py [ROUNDS]
"""
import os, sys, time, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../python"))
from tencache import _lib as L
from tencache.offload import adamw_step

n = 64 << 20
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
kernels = (("avx2", L.ADAM_F_NO_AVX512), ("avx512", 0))
master, ea, eas = (torch.zeros(n, dtype=torch.float32) for _ in range(3))
g, p = torch.full((n,), 1e-3, dtype=torch.bfloat16), torch.zeros(n, dtype=torch.bfloat16)
print(f"adam-alone: {n >> 20} M params, best of {rounds} interleaved passes per cell", flush=True)
for thr in (8, 11, 14, 16):
    best = {k: 9.0 for k, _ in kernels}
    step = 1
    for r in range(rounds + 1):
        for k, flags in kernels:
            t0 = time.perf_counter()
            adamw_step(master, ea, eas, g, p, lr=1e-4, step=step, threads=thr, flags=flags,
                       weight_decay=0.01)
            dt = time.perf_counter() - t0
            step += 1
            if r:    # the first pass faults and warms
                best[k] = min(best[k], dt)
    cells = "  ".join(f"{k} {best[k] / n * 1e9:.3f} ns/param {30 * n / best[k] / 1e9:5.1f} GB/s"
                      for k, _ in kernels)
    print(f"threads {thr:2d}: {cells}  avx512/avx2 speed {best['avx2'] / best['avx512']:.2f}x",
          flush=True)
