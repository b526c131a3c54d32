"""ddp.py - data parallelism for tencache.offload() under torch.distributed.

Each rank runs its own tencache runtime (its own pool, GPU arena, NVMe swap
file and planner); the ranks agree only on the model: offload() broadcasts
rank 0's weights, and every step the gradients are averaged across the
ranks before the CPU AdamW reads them, so every rank applies the same
update to the same fp32 masters.

Where the reduction happens: on the gradient the backward wrote into the
cache's device memory (the GPU arena; host memory in host mode), once every
gradient of a module has arrived and before the module's backward op is
released, i.e. before the cache writes the gradient back to pinned host
memory. So each rank still moves one (averaged) gradient over PCIe, NCCL
reduces GPU memory in place on its own stream (the compute stream waits for
it, the host does not), and gloo reduces host-mode gradients in place. A
backend that cannot reach the gradient's device (NCCL and host memory, gloo
and CUDA memory) gets a flat staging copy on a device it can reach. Reducing
the host copies at optimizer time instead would not work with NCCL (no CPU
tensors) and would serialize the reduction after the backward.

Bucketing: the gradients of a module are reduced together with those of
the following modules until they reach the bucket (bucket_bytes of
gradients): the backward ops of the modules waiting stay acquired, so they
also stop at `room` bytes of cache memory (parameters and gradients, as the
cache places them), what the GPU budget leaves beside the largest module; a
gradient at least as large as the bucket is reduced in place, the rest are
flattened into one buffer per dtype. Gradients are
divided by the world size before the sum (as torch DDP's default hook).

Every rank must produce gradients for the same parameters in the same
module order each step (as torch DDP with find_unused_parameters=False):
the reductions are matched by order.
"""
import json
import os
import socket

import torch

from ._lib import TencacheError

DEFAULT_BUCKET = 25 << 20    # bytes per reduction (torch DDP's bucket_cap_mb)


def _meminfo(key):
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Group:
    """The process group and where this rank stands in it."""

    def __init__(self, pg, dist, host_mode, model_sig):
        self.pg, self.dist = pg, dist
        self.rank, self.world = dist.get_rank(pg), dist.get_world_size(pg)
        self.global_rank = dist.get_rank()
        self.src = dist.get_global_rank(pg, 0) if hasattr(dist, "get_global_rank") else 0
        self.backend = str(dist.get_backend(pg)).lower()
        self.host_mode = host_mode
        # one gather at setup: host names (ranks sharing host memory), the
        # host's MemAvailable, the model's shape (the broadcast needs equal models)
        mine = (socket.gethostname(), _meminfo("MemAvailable"), tuple(model_sig))
        everyone = self._all_gather_json(mine)
        for r, (_, _, sig) in enumerate(everyone):
            if sig != model_sig:
                raise TencacheError(
                    f"rank {self.rank}'s model ({model_sig[0]} parameters, {model_sig[1]} "
                    f"elements) differs from rank {r}'s ({sig[0]}, {sig[1]}): every rank must "
                    "build the same model before offload()")
        local = [r for r, e in enumerate(everyone) if e[0] == mine[0]]
        self.local_rank, self.local_world = local.index(self.rank), len(local)
        self.host_avail = min(everyone[r][1] for r in local)

    def _all_gather_json(self, obj):
        """obj (JSON-able) of every rank, through tensor collectives: torch's
        all_gather_object needs numpy, which a torch install may lack."""
        dev = self.comm_device(torch.device("cpu"))
        data = torch.tensor(list(json.dumps(obj).encode()), dtype=torch.uint8, device=dev)
        n = torch.tensor([data.numel()], dtype=torch.int64, device=dev)
        ns = [torch.empty_like(n) for _ in range(self.world)]
        self.dist.all_gather(ns, n, group=self.pg)
        size = max(int(x.item()) for x in ns)
        buf = torch.zeros(size, dtype=torch.uint8, device=dev)
        buf[:data.numel()] = data
        bufs = [torch.empty_like(buf) for _ in range(self.world)]
        self.dist.all_gather(bufs, buf, group=self.pg)
        return [tuple(tuple(v) if isinstance(v, list) else v
                      for v in json.loads(bytes(b[:int(k.item())].tolist()).decode()))
                for b, k in zip(bufs, ns)]

    def comm_device(self, dev):
        """A device the backend reduces on, for a tensor on dev."""
        b = self.backend
        if dev.type == "cuda" and ("nccl" in b or b.startswith("cuda:") or ",cuda:" in b):
            return dev
        if dev.type == "cpu" and "gloo" in b:
            return dev
        if "nccl" in b:
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def host_share(self, host_budget):
        """Pinned host bytes of this rank: its share of the host's budget."""
        total = host_budget if host_budget else self.host_avail // 2
        return total // self.local_world

    def rank_path(self, path):
        """Per-rank NVMe swap file: a directory gets tencache-swap-rank<N>
        inside, a file name gets -rank<N> appended (global rank: unique
        across hosts sharing a file system)."""
        p = str(path)
        if os.path.isdir(p):
            return os.path.join(p, f"tencache-swap-rank{self.global_rank}")
        return f"{p}-rank{self.global_rank}"

    def all_reduce(self, t):
        """Sum t across the ranks, in place, through a staging copy when the
        backend cannot reach t's device."""
        dev = self.comm_device(t.device)
        work = t if dev == t.device else t.to(dev)
        self.dist.all_reduce(work, group=self.pg)
        if work is not t:
            t.copy_(work)

    @torch.no_grad()
    def broadcast_(self, tensors, chunk=64 << 20):
        """Rank 0's values into tensors, flattened per dtype in chunks."""
        by_dtype = {}
        for t in tensors:
            if t.numel():
                by_dtype.setdefault(t.dtype, []).append(t)
        for dtype, ts in by_dtype.items():
            esz = ts[0].element_size()
            i = 0
            while i < len(ts):
                part, n = [], 0
                while i < len(ts) and (not part or (n + ts[i].numel()) * esz <= chunk):
                    part.append(ts[i])
                    n += ts[i].numel()
                    i += 1
                dev = self.comm_device(part[0].device)
                flat = torch.cat([t.detach().reshape(-1).to(dev) for t in part])
                self.dist.broadcast(flat, src=self.src, group=self.pg)
                off = 0
                for t in part:
                    t.copy_(flat[off:off + t.numel()].view(t.shape))
                    off += t.numel()


def resolve(process_group):
    """None: the default group when torch.distributed is initialized with
    more than one rank; False: no data parallelism; else the group given.
    Returns (dist module, group) or (None, None)."""
    if process_group is False:
        return None, None
    try:
        import torch.distributed as dist
    except ImportError:
        dist = None
    if dist is None or not dist.is_available() or not dist.is_initialized():
        if process_group is not None:
            raise TencacheError("process_group given but torch.distributed is not initialized "
                                "(call torch.distributed.init_process_group first)")
        return None, None
    pg = process_group if process_group is not None else dist.group.WORLD
    if dist.get_world_size(pg) < 2:
        return None, None
    return dist, pg


class GradReducer:
    """Averages each module's gradients across the ranks before its backward
    op is released (see the file's comment)."""

    def __init__(self, group, bucket_bytes, room):
        self.g, self.cap, self.room = group, max(0, int(bucket_bytes)), max(0, int(room))
        self.views = {}     # leaf -> its gradient views arrived this step
        self.held = []      # [(leaf, release)] waiting for the bucket
        self.bytes = self.held_bytes = 0
        self.calls = self.reduced_bytes = 0    # collectives and bytes, all steps

    def add(self, leaf, view):
        self.views.setdefault(leaf, []).append(view)

    def ready(self, leaf, release, op_bytes):
        """leaf's gradients are all in; release() ends its backward op, which
        holds op_bytes of cache memory."""
        self.held.append((leaf, release))
        self.bytes += sum(v.numel() * v.element_size() for v in self.views.get(leaf, ()))
        self.held_bytes += op_bytes
        if self.bytes >= self.cap or self.held_bytes >= self.room:
            self.flush()

    @torch.no_grad()
    def flush(self):
        held, self.held, self.bytes, self.held_bytes = self.held, [], 0, 0
        if not held:
            return
        views = [v for leaf, _ in held for v in self.views.pop(leaf, ())]
        world = self.g.world
        small = {}
        for v in views:
            if self.cap and v.numel() * v.element_size() >= self.cap:
                v.div_(world)
                self.g.all_reduce(v)
                self.calls += 1
                self.reduced_bytes += v.numel() * v.element_size()
            else:
                small.setdefault(v.dtype, []).append(v)
        for vs in small.values():
            if len(vs) == 1:
                flat = vs[0]
                flat.div_(world)
            else:
                flat = torch.cat([v.reshape(-1) for v in vs]).div_(world)
            self.g.all_reduce(flat)
            self.calls += 1
            self.reduced_bytes += flat.numel() * flat.element_size()
            if len(vs) > 1:
                off = 0
                for v in vs:
                    v.copy_(flat[off:off + v.numel()].view(v.shape))
                    off += v.numel()
        for _, release in held:
            release()
