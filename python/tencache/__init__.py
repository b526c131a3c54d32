"""tencache: train models larger than GPU memory. Parameters, gradients and
AdamW state live in libtencache's tensor cache (GPU, pinned host memory,
NVMe) and are fetched by module hooks; the optimizer step runs in C on the
CPU.

    model, optimizer = tencache.offload(model, gpu_budget="8GiB")
    for batch in data:
        loss = model(batch).loss
        loss.backward()
        optimizer.step()

libtencache.so is found through TENCACHE_LIB, the repository's build/
directory, or the system library path (build it with `make lib`).
"""
from ._lib import TencacheError, lib
from .offload import OffloadAdamW, Runtime, adamw_step, offload, parse_bytes

__version__ = "0.1.0"
__all__ = ["offload", "OffloadAdamW", "Runtime", "TencacheError", "adamw_step", "lib",
           "parse_bytes"]
