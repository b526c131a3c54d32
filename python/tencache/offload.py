"""offload.py - tencache.offload(): a torch model whose parameters, gradients,
fp32 master weights and Adam moments live in the tensor cache.

Per parameter five cache tensors: the compute copy (the model's dtype), its
gradient, the fp32 master (the copy itself for fp32 models), exp_avg and
exp_avg_sq. One training step of the cache is forward + backward +
optimizer.step():
  forward   pre-hook of each leaf module: acquire its parameters (READ) and
            point param.data at them, zero-copy; post-hook: release. Saved
            tensors that alias a parameter are saved as references
            (saved_tensors_hooks), so backward never reads released memory.
  backward  when the gradient of a module's output arrives (a tensor hook):
            acquire the parameters again and the gradients (WRITE); each
            gradient is copied into the cache as it is accumulated
            (post-accumulate-grad hook) and param.grad is dropped; the op is
            released once every gradient is in and every saved reference was
            used.
  step      per parameter a host op: grad, master, moments and the copy
            acquired as pinned host memory, the C AdamW, release; then the
            cache step ends. With overlap (the default) the host ops start
            during backward, a few modules after their own, AdamW runs on a
            worker thread (overlap.py), and an update still running at
            step() carries over: the next forward waits for each of its
            modules' updates (with NVMe, step() waits for them all).
Everything runs on torch's current stream.
"""
import ctypes
import os
import re
import warnings

import torch
from torch import nn

from . import _lib as L
from . import ddp as D
from . import overlap as O
from ._lib import TencacheError, check

_ELEM = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}
_DTYPE = {torch.float32: L.DTYPE_FP32, torch.float16: L.DTYPE_FP16, torch.bfloat16: L.DTYPE_BF16}
_ROLE = {torch.float32: L.ROLE_MASTER_FP32, torch.float16: L.ROLE_PARAM_FP16,
         torch.bfloat16: L.ROLE_PARAM_BF16}
_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "kib": 2**10, "m": 10**6, "mb": 10**6,
          "mib": 2**20, "g": 10**9, "gb": 10**9, "gib": 2**30, "t": 10**12, "tb": 10**12,
          "tib": 2**40}

IDLE, WAIT_BWD, BWD, DONE, REDUCE = range(5)    # REDUCE: gradients wait for the ranks


def parse_bytes(x, what="size"):
    """8GiB, "512 MiB", 1.5e9, 4096 -> bytes."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        if x <= 0:
            raise TencacheError(f"{what} must be positive, not {x}")
        return int(x)
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][0-9]+)?)\s*([a-zA-Z]*)\s*", str(x))
    if not m or m.group(2).lower() not in _UNITS:
        raise TencacheError(f"{what}: cannot read {x!r} (e.g. 8GiB, 512MiB, 4096)")
    return parse_bytes(float(m.group(1)) * _UNITS[m.group(2).lower()], what)


def fmt_bytes(n):
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def _align(n, a=256):
    return (n + a - 1) // a * a


def _tensors(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _tensors(o)]
    return []


class _CudaMem:
    """Device memory for torch.as_tensor, through __cuda_array_interface__."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1",
                                          "data": (ptr, False), "version": 3,
                                          "strides": None, "stream": None}


class _ChurnWatch:
    """Warns once when torch's caching allocator retries an allocation in
    each of `steps` consecutive steps. Under a memory cap
    (set_per_process_memory_fraction) with expandable segments, torch then
    unmaps and maps memory every step, and each unmap waits for the GPU to
    drain: 33 ms of a 560 ms step on the H200 (results/h200-train.md)."""

    def __init__(self, retries, steps=3):
        self.retries, self.steps = retries, steps    # retries(): torch's counter
        self.last, self.run, self.warned = None, 0, False

    def step(self):
        """Call once per step; the warning text the first time it triggers."""
        if self.warned:
            return None
        n = self.retries()
        self.run = self.run + 1 if self.last is not None and n > self.last else 0
        self.last = n
        if self.run < self.steps:
            return None
        self.warned = True
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        why = ("PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True, which under a memory "
               "cap unmaps and maps memory again every step; unset it, or "
               if "expandable_segments:true" in conf.lower().replace(" ", "") else "")
        return (f"tencache: torch's CUDA allocator ran out of its share and retried an "
                f"allocation in each of the last {self.steps} steps "
                f"(torch.cuda.memory_stats()['num_alloc_retries'] = {n}); each retry frees "
                f"cached memory and waits for the GPU to drain. {why}give torch more of the "
                "GPU (a smaller gpu_budget or a larger memory fraction)")


class _Ref:
    """A saved tensor that is (a view of) a parameter."""
    __slots__ = ("p", "size", "stride", "offset")

    def __init__(self, p, t):
        self.p, self.size, self.stride, self.offset = p, tuple(t.shape), t.stride(), \
            t.storage_offset()


class _Param:
    def __init__(self, name, param, leaf, dtype):
        self.name, self.param, self.leaf, self.dtype = name, param, leaf, dtype
        self.shape, self.numel = tuple(param.shape), param.numel()
        self.nbytes = self.numel * _ELEM[dtype]
        self.trained = param.requires_grad
        self.id_param = self.id_grad = self.id_master = self.id_m = self.id_v = None
        self.cur = None          # the acquired parameter (a tensor over cache memory)
        self.gview = None        # the acquired gradient, during the module's backward
        self.has_grad = False    # a gradient arrived this step
        self.step = 0
        self.placeholder = None


class _Leaf:
    def __init__(self, name, module):
        self.name, self.module, self.params = name, module, []
        # nn.Embedding's backward reads only the indices
        self.bwd_params = not isinstance(module, nn.Embedding)
        self.reset()

    def reset(self):
        self.state, self.hooks, self.packed, self.unpacked, self.pending = IDLE, None, 0, 0, 0
        self.grad_mode = False


class Runtime:
    """The cache, the optimizer and the hooks of one offloaded model."""

    def __init__(self, model, gpu_budget, nvme_path, host_mode, dtype, pinned_budget,
                 nvme_budget, policy, warmup_steps, timeline, threads, process_group=None,
                 host_budget=None, bucket_bytes=D.DEFAULT_BUCKET, overlap=True):
        self.lib = L.lib()
        if host_mode is None:
            host_mode = not torch.cuda.is_available()
        if not host_mode and not torch.cuda.is_available():
            raise TencacheError("host_mode=False needs a CUDA GPU; torch sees none")
        self.host_mode = bool(host_mode)
        self.device = torch.device("cpu") if self.host_mode else \
            torch.device("cuda", torch.cuda.current_device())
        if policy not in L.POLICIES:
            raise TencacheError(f"policy must be one of {sorted(L.POLICIES)}, not {policy!r}")
        if not isinstance(overlap, bool) and overlap != "backward":
            raise TencacheError(f"overlap must be False, True or \"backward\", not {overlap!r}")
        if dtype is not None and dtype not in _ELEM:
            raise TencacheError(f"dtype must be torch.float32, float16 or bfloat16, not {dtype}")
        self.gpu_budget = parse_bytes(gpu_budget, "gpu_budget")
        self.leaves, self.params, self.in_step = [], [], False
        self._live = {}          # data_ptr of an acquired parameter -> _Param
        self._active = set()     # leaves whose backward op is acquired
        self.tc = self.cache = self.adam = self.host_ops = self.optimizer = None
        self._hp = None          # overlap=False: this step's AdamW hyperparameters
        self._hp_used = set()    # overlap: the ones the launched updates read
        self._hp_warned = False
        self._churn = None if self.host_mode else _ChurnWatch(
            lambda: torch.cuda.memory_stats(self.device).get("num_alloc_retries", 0))
        self.group = self.reducer = self.host_share = self.pool_bytes = None
        # the NVMe tier stages whole tensors with O_DIRECT: sizes in 4 KiB blocks
        self._pad = 4096 if nvme_path else 1
        self._collect(model, dtype)
        self._check_budget()
        self._ddp_setup(model, process_group, host_budget, bucket_bytes)
        if self.group:
            nvme_path = self.group.rank_path(nvme_path) if nvme_path else None
        if not threads and (self.group or overlap):
            # this host's CPUs shared by its ranks; beside backward, 70% of them:
            # the memory-bound AdamW loses little, and the training thread, the
            # overlap worker, the issuer and the driver keep CPUs. On the H200
            # host (16 CPUs) 11 threads were the fastest or within 1% of it on
            # two machines and 14 were 27% slower on one; on a fourth, whose
            # host memory drifted by 27% within minutes, 14 were faster
            # (results/h200-train.md, sessions 6 and 7)
            threads = len(os.sched_getaffinity(0)) // (self.group.local_world if self.group else 1)
            threads = max(1, round(threads * 0.7)) if overlap else max(1, threads)
        self.nvme_path = str(nvme_path) if nvme_path else None
        self.threads = threads    # AdamW threads; 0: the library's default
        self.overlap = overlap
        try:
            self._create(nvme_path, pinned_budget, nvme_budget, policy, warmup_steps,
                         timeline, threads)
            if overlap:
                # with NVMe only pinned_budget is pinned: hold a quarter of it;
                # "backward": no bound, but all released at step()
                window = self._pinned_budget // 4 if nvme_path else None
                if overlap == "backward":
                    window = window or float("inf")
                self.host_ops = O.HostOps(self.lib, self.cache, self.adam, self._host_op,
                                          self._host_op_done, window)
            self._register()
            self._init_values()
        except BaseException:
            self.close()
            raise
        self._install(model)

    # ---- setup -------------------------------------------------------------

    def _collect(self, model, dtype):
        owner = {}
        for mname, mod in model.named_modules():
            own = [(n, p) for n, p in mod.named_parameters(recurse=False)]
            if not own:
                continue
            below = [f"{mname}.{c}".strip(".") for c, sub in mod.named_modules()
                     if c and any(True for _ in sub.parameters(recurse=False))]
            if below:
                raise TencacheError(
                    f"unsupported module '{mname or '<root>'}' ({type(mod).__name__}): it owns "
                    f"parameters ({', '.join(n for n, _ in own)}) and has submodules with "
                    f"parameters ({', '.join(below[:3])}); tencache supports parameters owned "
                    "by leaf modules (e.g. nn.Linear, nn.LayerNorm, nn.Embedding)")
            if isinstance(mod, nn.Embedding) and (mod.max_norm is not None or mod.sparse):
                raise TencacheError(f"unsupported module '{mname}': nn.Embedding with max_norm "
                                    "or sparse=True writes or scatters its weight")
            leaf = _Leaf(mname, mod)
            leaf.order = len(self.leaves)    # a fixed order: the ranks reduce in it
            for n, p in own:
                full = f"{mname}.{n}".strip(".")
                if id(p) in owner:
                    raise TencacheError(
                        f"unsupported module '{mname}': parameter '{full}' is shared with "
                        f"'{owner[id(p)]}' (tied weights); untie them (e.g. "
                        "tie_word_embeddings=False) to offload this model")
                owner[id(p)] = full
                if p.numel() == 0:
                    continue
                pd = dtype or p.dtype
                if pd not in _ELEM:
                    raise TencacheError(f"parameter '{full}' has dtype {p.dtype}; tencache "
                                        "supports float32, float16 and bfloat16")
                q = _Param(full, p, leaf, pd)
                leaf.params.append(q)
                self.params.append(q)
            if leaf.params:
                self.leaves.append(leaf)
        if not self.params:
            raise TencacheError("the model has no parameters to offload")
        for i, q in enumerate(self.params):    # module order: forward's, roughly
            q.index = i

    def _check_budget(self):
        a = max(256, self._pad)
        self._largest_need = 0
        for leaf in self.leaves:
            fwd = sum(_align(p.nbytes, a) for p in leaf.params)
            bwd = sum(_align(p.nbytes, a) for p in leaf.params if leaf.bwd_params) + \
                sum(_align(p.nbytes, a) for p in leaf.params if p.trained)
            need = max(fwd, bwd)
            self._largest_need = max(self._largest_need, need)
            leaf.bwd_bytes = bwd
            if need > self.gpu_budget:
                raise TencacheError(
                    f"gpu_budget {fmt_bytes(self.gpu_budget)} ({self.gpu_budget} bytes) is too "
                    f"small for layer '{leaf.name}' ({type(leaf.module).__name__}): it needs "
                    f"{need} bytes ({fmt_bytes(need)}) on the GPU at once (its parameters"
                    f"{' and their gradients' if bwd >= fwd else ''})")

    # ---- data parallelism (torch.distributed; the rest is in ddp.py) ----------

    def _ddp_setup(self, model, process_group, host_budget, bucket_bytes):
        """Join the ranks: rank 0's weights and buffers, this rank's share of
        the host's pinned memory, the gradient reducer. Without a group only
        host_budget (if given) is checked, as for one rank."""
        if host_budget:
            self.host_share = parse_bytes(host_budget, "host_budget")
        dist, pg = D.resolve(process_group)
        if pg is None:
            return
        sig = (len(self.params), sum(q.numel for q in self.params))
        self.group = g = D.Group(pg, dist, self.host_mode, sig)
        self.host_share = g.host_share(self.host_share)
        g.broadcast_([q.param.data for q in self.params] +
                     [b for b in model.buffers() if b is not None])
        # modules waiting for a bucket hold their backward ops: at most half
        # of what the GPU budget leaves beside two of the largest modules (the
        # op and the next one, prefetched), so the planner still plans
        room = max(0, self.gpu_budget - 2 * self._largest_need) // 2
        self.reducer = D.GradReducer(
            g, parse_bytes(bucket_bytes, "bucket_bytes") if bucket_bytes else 0, room)

    def _check_host_share(self, cp):
        """The pool this runtime will pin (exec/setup.c: every tensor without
        NVMe, else pinned_budget + the largest tensor) against the rank's share."""
        regs = []
        for q in self.params:
            regs.append(q.nbytes)
            if q.trained:
                regs += [q.nbytes, 4 * q.numel, 4 * q.numel] + \
                    ([4 * q.numel] if q.dtype != torch.float32 else [])
        regs = [_align(_align(n, self._pad), 4096) for n in regs]
        need = cp.pinned_budget + max(regs) if cp.nvme_budget else sum(regs)
        self.pool_bytes = _align(need + (2 << 20), 2 << 20)
        if not self.host_share or self.pool_bytes <= self.host_share:
            return
        g = self.group
        who = f"rank {g.rank} of {g.world} ({g.local_world} on this host)" if g else "this runtime"
        how = "pass nvme_path= (a swap file per rank) so that only pinned_budget stays pinned," \
            if not cp.nvme_budget else "lower pinned_budget,"
        raise TencacheError(
            f"{who} needs {fmt_bytes(self.pool_bytes)} of pinned host memory but its share of "
            f"the host budget is {fmt_bytes(self.host_share)} (host_budget / ranks on the host; "
            f"default: half of MemAvailable); {how} or raise host_budget")

    def dist_info(self):
        """This rank's runtime: rank, world, ranks on the host, its pinned
        share and pool, its NVMe swap file, the reductions made."""
        g, r = self.group, self.reducer
        node = ctypes.c_int32(-1)
        if not self.host_mode:    # the pool's node: the GPU's (tencache_params.numa_node unset)
            self.lib.tencache_gpu_numa_node(self.tc, self.device.index, ctypes.byref(node))
        return {"numa_node": node.value, "gpu": None if self.host_mode else self.device.index,
                "rank": g.rank if g else 0, "world": g.world if g else 1,
                "local_world": g.local_world if g else 1,
                "backend": g.backend if g else None, "host_share": self.host_share,
                "pool_bytes": self.pool_bytes, "nvme_path": self.nvme_path,
                "bucket_bytes": r.cap if r else None, "bucket_room": r.room if r else None,
                "reduce_calls": r.calls if r else 0,
                "reduced_bytes": r.reduced_bytes if r else 0}

    def _create(self, nvme_path, pinned_budget, nvme_budget, policy, warmup_steps, timeline,
                threads):
        lib = self.lib
        p = L.Params(log_level=L.LOG_WARN, host_budget=self.host_share or 0)
        if self.host_mode:
            p.flags |= L.F_NO_CUDA
        else:
            p.gpu = self.device.index
        tc = ctypes.c_void_p()
        check(lib.tencache_init(ctypes.byref(tc), ctypes.byref(p)), "tencache_init")
        self.tc = tc
        total = sum(self._tensor_bytes(q) for q in self.params)
        cp = L.CacheParams(gpu_budget=self.gpu_budget, policy=L.POLICIES[policy],
                           warmup_steps=warmup_steps)
        if self.host_mode:
            cp.flags |= L.CACHE_HOST_MODE
        if timeline:
            cp.flags |= L.CACHE_TIMELINE
        if self.overlap and not self.host_mode:
            # a prefetch that waits for an update blocks the issuer's thread,
            # not the one running backward (on the H200 run 4 with it took
            # 542 ms per step, run 3 without 615: results/h200-train.md)
            cp.flags |= L.CACHE_ISSUER
        if nvme_path:
            largest_op = max(self._tensor_bytes(q) for q in self.params)
            # the cache keeps the pointer: the bytes live as long as the runtime
            self._nvme_path = str(nvme_path).encode()
            cp.nvme_path = self._nvme_path
            cp.pinned_budget = parse_bytes(pinned_budget, "pinned_budget") if pinned_budget \
                else max(total // 4, 4 * largest_op)
            if self.host_share and not pinned_budget:    # the rank's share of the host
                cp.pinned_budget = min(cp.pinned_budget,
                                       max(self.host_share - largest_op - (4 << 20), 0))
            cp.nvme_budget = parse_bytes(nvme_budget, "nvme_budget") if nvme_budget \
                else total + total // 4 + (64 << 20)
            if cp.pinned_budget < largest_op:
                q = max(self.params, key=self._tensor_bytes)
                raise TencacheError(
                    f"pinned_budget {fmt_bytes(cp.pinned_budget)} is too small for parameter "
                    f"'{q.name}': its AdamW step holds {largest_op} bytes "
                    f"({fmt_bytes(largest_op)}) in pinned memory at once (gradient, master "
                    f"weights, moments and compute copy); raise pinned_budget to at least that"
                    + ("" if pinned_budget else " (or host_budget: this rank's share set it)"))
        elif pinned_budget:
            cp.pinned_budget = parse_bytes(pinned_budget, "pinned_budget")
        self._check_host_share(cp)
        self._pinned_budget = cp.pinned_budget
        cache = ctypes.c_void_p()
        check(lib.tencache_cache_create(tc, ctypes.byref(cache), ctypes.byref(cp)),
              "tencache_cache_create")
        self.cache = cache
        ap = L.AdamParams(threads=threads or 0)
        adam = ctypes.c_void_p()
        check(lib.tencache_adam_create(ctypes.byref(adam), ctypes.byref(ap)),
              "tencache_adam_create")
        self.adam = adam
        self.adam_kernel = lib.tencache_adam_kernel(adam).decode()    # "avx512", "avx2", "scalar"

    @staticmethod
    def _tensor_bytes(q):
        n = q.nbytes
        if q.trained:
            n += q.nbytes + 8 * q.numel + (4 * q.numel if q.dtype != torch.float32 else 0)
        return n

    def _register(self):
        reg = self.lib.tencache_tensor_register

        def r(nbytes, role, what):
            return check(reg(self.cache, _align(nbytes, self._pad), role), f"registering {what}")

        for q in self.params:
            q.id_param = r(q.nbytes, _ROLE[q.dtype], q.name)
            if q.trained:
                q.id_grad = r(q.nbytes, L.ROLE_GRAD, q.name + " (grad)")
                if q.dtype != torch.float32:
                    q.id_master = r(4 * q.numel, L.ROLE_MASTER_FP32, q.name + " (master)")
                q.id_m = r(4 * q.numel, L.ROLE_OPT_STATE, q.name + " (exp_avg)")
                q.id_v = r(4 * q.numel, L.ROLE_OPT_STATE, q.name + " (exp_avg_sq)")

    def _host(self, tid, dtype, shape):
        ptr = ctypes.c_void_p()
        check(self.lib.tencache_tensor_host(self.cache, tid, ctypes.byref(ptr)),
              "tencache_tensor_host")
        return self._view_host(ptr.value, dtype, shape)

    @torch.no_grad()
    def _init_values(self):
        for q in self.params:
            src = q.param.detach()
            self._host(q.id_param, q.dtype, q.shape).copy_(src.to("cpu", q.dtype))
            if q.trained:
                if q.id_master is not None:
                    self._host(q.id_master, torch.float32, q.shape).copy_(
                        src.to("cpu", torch.float32))
                self._host(q.id_m, torch.float32, q.shape).zero_()
                self._host(q.id_v, torch.float32, q.shape).zero_()

    def _install(self, model):
        for leaf in self.leaves:
            for q in leaf.params:
                q.placeholder = torch.zeros((), dtype=q.dtype, device=self.device).expand(q.shape)
                q.param.data = q.placeholder
                q.param.grad = None
                if q.trained:
                    q.param.register_post_accumulate_grad_hook(self._grad_hook(q))
            leaf.module.register_forward_pre_hook(self._fwd_pre(leaf))
            leaf.module.register_forward_hook(self._fwd_post(leaf))
        if not self.host_mode:    # buffers (e.g. rotary tables) to the GPU
            for mod in model.modules():
                for n, b in list(mod._buffers.items()):
                    if b is not None:
                        mod._buffers[n] = b.to(self.device)
        model.register_forward_hook(self._root_post)

    # ---- cache calls ---------------------------------------------------------

    def _stream(self):
        if self.host_mode:
            return None
        return ctypes.c_void_p(torch.cuda.current_stream(self.device).cuda_stream)

    def _acquire(self, tid, flags, stream, what):
        ptr = ctypes.c_void_p()
        check(self.lib.tencache_acquire(self.cache, tid, flags, stream, ctypes.byref(ptr)),
              f"acquiring {what}")
        return ptr.value

    def _release(self, tid, stream, what):
        check(self.lib.tencache_release(self.cache, tid, stream, 0), f"releasing {what}")

    def _view_host(self, ptr, dtype, shape):
        n = 1
        for s in shape:
            n *= s
        buf = (ctypes.c_char * (n * _ELEM[dtype])).from_address(ptr)
        return torch.frombuffer(buf, dtype=dtype, count=n).view(shape)

    def _view(self, ptr, dtype, shape):
        if self.host_mode:
            return self._view_host(ptr, dtype, shape)
        n = 1
        for s in shape:
            n *= s
        raw = torch.as_tensor(_CudaMem(ptr, n * _ELEM[dtype]), device=self.device)
        return raw.view(dtype).view(shape)

    def _begin_step(self):
        if self.in_step:
            return
        check(self.lib.tencache_step_begin(self.cache), "tencache_step_begin")
        self.in_step = True
        for leaf in self.leaves:
            leaf.reset()
        for q in self.params:
            q.has_grad = False

    def _end_step(self):
        self._finish_backward(force=True)
        self.in_step = False
        check(self.lib.tencache_step_end(self.cache), "tencache_step_end")

    # ---- hooks ---------------------------------------------------------------

    def _fwd_pre(self, leaf):
        def hook(module, args):
            self._begin_step()
            if self.host_ops:    # their last updates done and released
                self.host_ops.settle(leaf.params)
            if leaf.state != IDLE:
                raise TencacheError(
                    f"module '{leaf.name}' ran twice in one step: tencache supports one "
                    "forward and one backward per optimizer.step() (no gradient accumulation, "
                    "no reuse of a layer, no activation checkpointing); run evaluation "
                    "under torch.no_grad() between steps")
            s = self._stream()
            for q in leaf.params:
                ptr = self._acquire(q.id_param, L.ACQ_READ, s, q.name)
                q.cur = self._view(ptr, q.dtype, q.shape)
                q.param.data = q.cur
                self._live[ptr] = q
            leaf.grad_mode = torch.is_grad_enabled()
            if leaf.grad_mode:
                leaf.hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
                leaf.hooks.__enter__()
            leaf.state = DONE
        return hook

    def _fwd_post(self, leaf):
        def hook(module, args, output):
            if leaf.hooks is not None:
                leaf.hooks.__exit__(None, None, None)
                leaf.hooks = None
            s = self._stream()
            for q in leaf.params:
                q.param.data = q.placeholder
                self._live.pop(q.cur.data_ptr(), None)
                q.cur = None
                self._release(q.id_param, s, q.name)
            outs = [t for t in _tensors(output) if t.requires_grad] if leaf.grad_mode else []
            if outs:
                leaf.state = WAIT_BWD
                hk = self._bwd_hook(leaf)
                for t in outs:
                    t.register_hook(hk)
        return hook

    def _root_post(self, module, args, output):
        # a forward without autograd (evaluation) is a step of its own
        if self.in_step and not torch.is_grad_enabled() and \
                not any(leaf.state in (WAIT_BWD, BWD) for leaf in self.leaves):
            self._end_step()

    def _pack(self, t):
        if t.device != self.device:
            return t
        q = self._live.get(t.untyped_storage().data_ptr())
        if q is None:
            return t
        if t.dtype != q.dtype:
            raise TencacheError(f"a {t.dtype} view of parameter '{q.name}' is saved for "
                                "backward; not supported")
        q.leaf.packed += 1
        return _Ref(q, t)

    def _unpack(self, x):
        if not isinstance(x, _Ref):
            return x
        q = x.p
        if q.cur is None:
            raise TencacheError(f"backward needs parameter '{q.name}' of module "
                                f"'{q.leaf.name}' outside that module's backward; not supported")
        q.leaf.unpacked += 1
        return q.cur.as_strided(x.size, x.stride, x.offset)

    def _bwd_hook(self, leaf):
        def hook(grad):
            self._finish_backward()
            if leaf.state == WAIT_BWD:
                self._bwd_begin(leaf)
        return hook

    def _bwd_begin(self, leaf):
        s = self._stream()
        leaf.state = BWD
        leaf.pending = 0
        for q in leaf.params:
            if leaf.bwd_params:
                ptr = self._acquire(q.id_param, L.ACQ_READ, s, q.name)
                q.cur = self._view(ptr, q.dtype, q.shape)
                self._live[ptr] = q
            if q.trained:
                ptr = self._acquire(q.id_grad, L.ACQ_WRITE, s, q.name + " (grad)")
                q.gview = self._view(ptr, q.dtype, q.shape)
                leaf.pending += 1
        self._active.add(leaf)
        self._maybe_release(leaf)

    def _grad_hook(self, q):
        def hook(param):
            leaf = q.leaf
            if q.gview is None:
                raise TencacheError(f"the gradient of '{q.name}' arrived outside the backward "
                                    f"of module '{leaf.name}'; not supported")
            q.gview.copy_(param.grad)
            if self.reducer:
                self.reducer.add(leaf, q.gview)
            param.grad = None
            q.gview = None
            q.has_grad = True
            leaf.pending -= 1
            self._maybe_release(leaf)
            self._finish_backward()
        return hook

    def _maybe_release(self, leaf, force=False):
        if leaf.state != BWD or (not force and (leaf.pending or leaf.unpacked < leaf.packed)):
            return
        if self.reducer:    # released once its gradients are averaged across the ranks
            leaf.state = REDUCE
            self._active.discard(leaf)
            self.reducer.ready(leaf, lambda: self._release_bwd(leaf), leaf.bwd_bytes)
            return
        self._release_bwd(leaf)

    def _release_bwd(self, leaf):
        s = self._stream()
        for q in leaf.params:
            if leaf.bwd_params:
                self._live.pop(q.cur.data_ptr(), None)
                q.cur = None
                self._release(q.id_param, s, q.name)
            if q.trained:
                q.gview = None    # a gradient that never came is not used (has_grad)
                self._release(q.id_grad, s, q.name + " (grad)")
        leaf.state = DONE
        self._active.discard(leaf)
        if self.host_ops:    # its parameters' AdamW may start
            self.host_ops.released([q for q in leaf.params if q.has_grad])

    def _finish_backward(self, force=False):
        """Release the backward ops that are complete (all of them when force)."""
        for leaf in sorted(self._active, key=lambda x: x.order):
            self._maybe_release(leaf, force)
        if force and self.reducer:
            self.reducer.flush()
        if force:
            for leaf in self.leaves:
                if leaf.state == WAIT_BWD:
                    leaf.state = DONE

    # ---- the optimizer -------------------------------------------------------

    def optimizer_step(self, lr, betas, eps, weight_decay):
        if not self.in_step:
            return
        self._finish_backward(force=True)
        if self.host_ops:
            self.host_ops.finish()
            used, self._hp_used = self._hp_used, set()
            now = (lr, tuple(betas), eps, weight_decay)
            if used - {now} and not self._hp_warned:
                self._hp_warned = True
                warnings.warn("tencache: the AdamW hyperparameters changed between backward "
                              f"and optimizer.step(); some updates used {sorted(used - {now})} "
                              f"instead of {now}. Change them after step() (as LR schedulers "
                              "do), or pass offload(overlap=False)", stacklevel=3)
        else:
            self._hp = (lr, tuple(betas), eps, weight_decay)
            for q in self.params:
                if q.has_grad:
                    t, hp, held, _ = self._host_op(q)
                    check(self.lib.tencache_adam_step(self.adam, ctypes.byref(hp),
                                                      ctypes.byref(t)),
                          f"AdamW step of '{q.name}'")
                    self._host_op_done(q, held)
        self._end_step()
        msg = self._churn.step() if self._churn else None
        if msg:
            warnings.warn(msg, stacklevel=3)

    def _host_op(self, q):
        """Acquire q's gradient, master, moments and compute copy as pinned
        host memory: (AdamTensor, AdamHparams, the ids held, their bytes)."""
        # overlapped (detached): the worker waits for the copies (tencache_op_wait)
        H = L.ACQ_HOST | (L.ACQ_NOWAIT if self._hp is None else 0)
        RW = L.ACQ_READ | L.ACQ_WRITE | H
        if self._hp is None:    # overlapped: the group's values when backward runs
            g = self.optimizer.param_groups
            if len(g) != 1:
                raise TencacheError("tencache's AdamW supports one parameter group")
            g = g[0]
            hp = (g["lr"], tuple(g["betas"]), g["eps"], g["weight_decay"])
            self._hp_used.add(hp)
        lr, betas, eps, wd = self._hp or hp
        q.step += 1
        hp = L.AdamHparams(lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=wd,
                           step=q.step)
        held = [q.id_grad]
        g = self._acquire(q.id_grad, L.ACQ_READ | H, None, q.name + " (grad)")
        if q.id_master is not None:
            held += [q.id_master, q.id_param]
            master = self._acquire(q.id_master, RW, None, q.name + " (master)")
            copy = self._acquire(q.id_param, L.ACQ_WRITE | H, None, q.name)
        else:    # fp32: the copy is the master
            held.append(q.id_param)
            master, copy = self._acquire(q.id_param, RW, None, q.name), None
        held += [q.id_m, q.id_v]
        m = self._acquire(q.id_m, RW, None, q.name + " (exp_avg)")
        v = self._acquire(q.id_v, RW, None, q.name + " (exp_avg_sq)")
        t = L.AdamTensor(master=master, exp_avg=m, exp_avg_sq=v, grad=g, param=copy,
                         grad_dtype=_DTYPE[q.dtype], param_dtype=_DTYPE[q.dtype],
                         numel=q.numel)
        return t, hp, held, self._tensor_bytes(q)

    def _host_op_done(self, q, held):
        for tid in held:
            self._release(tid, None, q.name)

    # ---- outside steps -------------------------------------------------------

    def state(self, master=True):
        """{name: CPU tensor}: the master weights (fp32), or the compute copies."""
        if self.in_step:
            raise TencacheError("state() is only available between steps")
        check(self.lib.tencache_cache_flush(self.cache), "tencache_cache_flush")
        out = {}
        for q in self.params:
            if master and q.id_master is not None:
                out[q.name] = self._host(q.id_master, torch.float32, q.shape).clone()
            else:
                out[q.name] = self._host(q.id_param, q.dtype, q.shape).clone()
        return out

    def stats(self):
        st = L.CacheStats()
        check(self.lib.tencache_cache_stats(self.cache, ctypes.byref(st), ctypes.sizeof(st)), "tencache_cache_stats")
        d = {k: getattr(st, k) for k, _ in L.CacheStats._fields_ if k != "reserved"}
        d["link_bytes"] = list(st.link_bytes)    # H2D, D2H, NVMe read, NVMe write
        d["link_bw"] = list(st.link_bw)          # B/s the plans used, same order
        d["duplex_bw"] = list(st.duplex_bw)      # both ways at once: PCIe, NVMe
        d["disk_busy_ns"] = list(st.disk_busy_ns)  # NVMe reads, writes in flight
        return d

    def timeline(self, path):
        check(self.lib.tencache_cache_timeline(self.cache, str(path).encode()),
              "tencache_cache_timeline")

    def close(self):
        lib = self.lib
        if self.host_ops:
            self.host_ops.close()
            self.host_ops = None
        if self.adam:
            lib.tencache_adam_destroy(self.adam)
            self.adam = None
        if self.cache:
            lib.tencache_cache_destroy(self.cache)
            self.cache = None
        if self.tc:
            lib.tencache_exit(self.tc)
            self.tc = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class OffloadAdamW(torch.optim.Optimizer):
    """AdamW over the cache's fp32 masters, in C on the CPU (one param group).
    step() ends the cache's training step; zero_grad() has nothing to do
    (gradients are handed to the cache during backward)."""

    def __init__(self, runtime, params, lr, betas, eps, weight_decay):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay))
        self.tencache = runtime

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        if len(self.param_groups) != 1:
            raise TencacheError("tencache's AdamW supports one parameter group")
        g = self.param_groups[0]
        self.tencache.optimizer_step(g["lr"], g["betas"], g["eps"], g["weight_decay"])
        return loss

    def zero_grad(self, set_to_none=True):
        pass


def offload(model, gpu_budget="8GiB", nvme_path=None, host_mode=None, *, dtype=None,
            lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, pinned_budget=None,
            nvme_budget=None, policy="ours", warmup_steps=1, timeline=False, threads=0,
            process_group=None, host_budget=None, bucket_bytes=D.DEFAULT_BUCKET, overlap=True):
    """Offload model's parameters, gradients and AdamW state to tencache.

    Returns (model, optimizer): the same model, its parameters now fetched by
    hooks, and an AdamW whose step() runs in C on the CPU. gpu_budget is the
    GPU memory for cached tensors (bytes or "8GiB"); host_mode=None picks the
    CPU-only mode when torch sees no GPU. dtype: the compute dtype of the
    parameter copies (None: keep each parameter's); masters are fp32.

    Data parallelism (ddp.py): process_group=None uses torch.distributed's
    default group when it is initialized with more than one rank (False: never).
    Then rank 0's weights are broadcast, gradients are averaged across the
    ranks (bucket_bytes per reduction), nvme_path gets a -rank<N> suffix (a
    directory: tencache-swap-rank<N> inside), AdamW threads default to the
    CPUs / ranks on the host, and each rank pins at most host_budget / ranks on
    the host (host_budget: pinned bytes for all ranks of a host; default half
    of MemAvailable). Call torch.cuda.set_device(local_rank) first on a GPU.

    overlap=True (the default) runs each parameter's AdamW on a worker thread
    as soon as its module's backward is done (overlap.py), so the CPU
    optimizer overlaps the GPU's backward and, without NVMe, the next forward:
    step() returns with the last updates running, and each module's forward
    waits for its own (state() and the next step see every update). It reads
    lr, betas, eps and weight_decay when backward runs: change them after
    optimizer.step(), as LR schedulers do. overlap="backward" overlaps
    backward only: step() returns with every update done. overlap=False runs
    every update inside optimizer.step(), after backward.
    """
    rt = Runtime(model, gpu_budget, nvme_path, host_mode, dtype, pinned_budget, nvme_budget,
                 policy, warmup_steps, timeline, threads, process_group, host_budget,
                 bucket_bytes, overlap)
    opt = OffloadAdamW(rt, [q.param for q in rt.params if q.trained], lr, betas, eps,
                       weight_decay)
    rt.optimizer = opt
    return model, opt


def adamw_step(master, exp_avg, exp_avg_sq, grad, param=None, *, lr, betas=(0.9, 0.999),
               eps=1e-8, weight_decay=1e-2, step, threads=0, flags=0, _cache={}):
    """One C AdamW update of CPU tensors (contiguous; master/moments fp32,
    grad and param fp32/fp16/bf16), in place; for tests and benchmarks.
    flags: TENCACHE_ADAM_F_* (the kernel)."""
    lib = L.lib()
    if (threads, flags) not in _cache:
        a = ctypes.c_void_p()
        check(lib.tencache_adam_create(ctypes.byref(a),
                                       ctypes.byref(L.AdamParams(threads=threads, flags=flags))),
              "tencache_adam_create")
        _cache[threads, flags] = a
    for t in (master, exp_avg, exp_avg_sq, grad) + ((param,) if param is not None else ()):
        if t.device.type != "cpu" or not t.is_contiguous() or t.numel() != master.numel():
            raise TencacheError("adamw_step takes contiguous CPU tensors of one size")
    for t in (master, exp_avg, exp_avg_sq):
        if t.dtype != torch.float32:
            raise TencacheError("master, exp_avg and exp_avg_sq must be float32")
    hp = L.AdamHparams(lr=lr, beta1=betas[0], beta2=betas[1], eps=eps, weight_decay=weight_decay,
                       step=step)
    t = L.AdamTensor(master=master.data_ptr(), exp_avg=exp_avg.data_ptr(),
                     exp_avg_sq=exp_avg_sq.data_ptr(), grad=grad.data_ptr(),
                     param=param.data_ptr() if param is not None else None,
                     grad_dtype=_DTYPE[grad.dtype],
                     param_dtype=_DTYPE[param.dtype] if param is not None else 0,
                     numel=master.numel())
    check(lib.tencache_adam_step(_cache[threads, flags], ctypes.byref(hp), ctypes.byref(t)),
          "tencache_adam_step")
