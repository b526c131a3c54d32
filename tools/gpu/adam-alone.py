"""adam-alone.py - the library's C AdamW (tencache.offload.adamw_step) alone
on a host, over torch CPU tensors as train_bench's bound uses them, at 4, 8,
11 and 16 threads; prints ns/param, GB/s at 30 B/param and each array's
address mod 64 KiB (their relative placement). Companion of adam-probe.c.
  TENCACHE_LIB=build/libtencache.so python tools/gpu/adam-alone.py
"""
import time, torch, sys
sys.path.insert(0, "python")
from tencache.offload import adamw_step
n = 64 << 20
for thr in (4, 8, 11, 16):
    master, ea, eas = (torch.zeros(n, dtype=torch.float32) for _ in range(3))
    g, p = torch.full((n,), 1e-3, dtype=torch.bfloat16), torch.zeros(n, dtype=torch.bfloat16)
    ptrs = [t.data_ptr() for t in (master, ea, eas, g, p)]
    best = 9
    for step in range(1, 7):
        t0 = time.perf_counter()
        adamw_step(master, ea, eas, g, p, lr=1e-4, step=step, threads=thr, weight_decay=0.01)
        dt = time.perf_counter() - t0
        if step > 1: best = min(best, dt)
    print(f"threads {thr}: {best/n*1e9:.3f} ns/param, {30*n/best/1e9:.1f} GB/s; ptr mod 64K: {[x % 65536 for x in ptrs]}", flush=True)
