"""ctypes bindings over libtencache.so (include/tencache.h): the context, the
tensor cache and the CPU AdamW. Every C call returns 0 (or an id) or -errno;
check() turns -errno into a TencacheError."""
import ctypes
import ctypes.util
import errno
import os

c_u32, c_i32, c_u64, c_ptr = ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64, ctypes.c_void_p


class TencacheError(RuntimeError):
    """An error from libtencache or from the offload hooks."""


# ---- structs (must match include/tencache.h) --------------------------------

class Params(ctypes.Structure):
    _fields_ = [("flags", c_u32), ("log_level", c_i32), ("log_fn", c_ptr), ("log_arg", c_ptr),
                ("host_budget", c_u64), ("pool_backend", c_u32), ("stage_backend", c_u32),
                ("numa_node", c_i32), ("gpu", c_i32), ("segment_size", c_u64),
                ("queue_depth", c_u32), ("io_size", c_u32), ("copy_chunk", c_u64),
                ("dev_path", ctypes.c_char_p), ("reserved", c_u64 * 8)]


class CacheParams(ctypes.Structure):
    _fields_ = [("flags", c_u32), ("policy", c_u32), ("gpu_budget", c_u64),
                ("pinned_budget", c_u64), ("nvme_budget", c_u64), ("nvme_path", ctypes.c_char_p),
                ("warmup_steps", c_u32), ("pad", c_u32), ("bw", ctypes.c_double * 4),
                ("table_path", ctypes.c_char_p), ("duplex_bw", ctypes.c_double * 2),
                ("reserved", c_u64 * 6)]


class CacheStats(ctypes.Structure):
    _fields_ = [("steps", c_u64), ("planned_steps", c_u64), ("reprofiles", c_u64),
                ("acquires", c_u64), ("hits", c_u64), ("stall_ns", c_u64),
                ("last_step_ns", c_u64), ("last_stall_ns", c_u64), ("last_acquires", c_u64),
                ("last_hits", c_u64), ("link_bytes", c_u64 * 4), ("late_prefetches", c_u64),
                ("gpu_bytes_peak", c_u64), ("decision_ns", c_u64), ("decisions", c_u64),
                ("link_bw", ctypes.c_double * 4), ("plan_rejects", c_u64),
                ("table_loads", c_u32), ("table_saves", c_u32),
                # on the compute's clock (GPU stream; host mode: = hits, stall_ns)
                ("gpu_hits", c_u64), ("gpu_stall_ns", c_u64),
                ("last_gpu_hits", c_u64), ("last_gpu_stall_ns", c_u64),
                ("static_layouts", c_u64), ("replans", c_u64),
                ("plan_fallbacks", c_u64), ("held_copies", c_u64),
                ("plan_gpu_bytes", c_u64), ("plan_reads", c_u64), ("plan_hits", c_u64),
                ("plan_read_bytes", c_u64), ("plan_hit_bytes", c_u64),
                ("planner_layouts", c_u64), ("plan_laid_out", c_u64),
                ("plan_trying", c_u64), ("plan_trials", c_u64), ("deferred_waits", c_u64),
                ("pinned_layouts", c_u64),
                ("duplex_bw", ctypes.c_double * 2),    # H2D + D2H, NVMe read + write
                ("plan_pinned_bytes", c_u64), ("deferred_host_waits", c_u64),
                ("queued_host_waits", c_u64), ("plan_pinned_cuts", c_u64),
                # the disk's time with NVMe reads, writes (and both) in flight
                ("disk_busy_ns", c_u64 * 2), ("disk_both_ns", c_u64),
                ("disk_slow_steps", c_u64)]


class AdamParams(ctypes.Structure):
    _fields_ = [("threads", c_u32), ("flags", c_u32), ("reserved", c_u64 * 4)]


class AdamHparams(ctypes.Structure):
    _fields_ = [("lr", ctypes.c_double), ("beta1", ctypes.c_double), ("beta2", ctypes.c_double),
                ("eps", ctypes.c_double), ("weight_decay", ctypes.c_double), ("step", c_u64),
                ("reserved", c_u64 * 2)]


class AdamTensor(ctypes.Structure):
    _fields_ = [("master", c_ptr), ("exp_avg", c_ptr), ("exp_avg_sq", c_ptr), ("grad", c_ptr),
                ("param", c_ptr), ("grad_dtype", c_u32), ("param_dtype", c_u32),
                ("numel", c_u64), ("reserved", c_u64 * 2)]


# constants of tencache.h
F_NO_CUDA = 1 << 1
LOG_WARN = 3
CACHE_HOST_MODE = 1 << 0
CACHE_TIMELINE = 1 << 1
CACHE_ISSUER = 1 << 2
ADAM_F_SCALAR = 1 << 0
ADAM_F_NO_AVX512 = 1 << 1
ACQ_READ, ACQ_WRITE, ACQ_HOST, ACQ_NOWAIT = 1, 2, 4, 8
ROLE_PARAM_FP16, ROLE_PARAM_BF16, ROLE_GRAD, ROLE_MASTER_FP32, ROLE_OPT_STATE = 0, 1, 2, 3, 4
DTYPE_FP32, DTYPE_FP16, DTYPE_BF16 = 0, 1, 2
POLICIES = {"ours": 0, "lru": 1, "zero": 2, "10cache": 3}

_SIGS = {
    "tencache_init": (ctypes.c_int, [ctypes.POINTER(c_ptr), ctypes.POINTER(Params)]),
    "tencache_exit": (None, [c_ptr]),
    "tencache_cache_create": (ctypes.c_int, [c_ptr, ctypes.POINTER(c_ptr),
                                             ctypes.POINTER(CacheParams)]),
    "tencache_cache_destroy": (None, [c_ptr]),
    "tencache_tensor_register": (ctypes.c_int, [c_ptr, c_u64, ctypes.c_uint]),
    "tencache_tensor_host": (ctypes.c_int, [c_ptr, ctypes.c_int, ctypes.POINTER(c_ptr)]),
    "tencache_step_begin": (ctypes.c_int, [c_ptr]),
    "tencache_step_end": (ctypes.c_int, [c_ptr]),
    "tencache_acquire": (ctypes.c_int, [c_ptr, ctypes.c_int, ctypes.c_uint, c_ptr,
                                        ctypes.POINTER(c_ptr)]),
    "tencache_release": (ctypes.c_int, [c_ptr, ctypes.c_int, c_ptr, c_u64]),
    "tencache_op_detach": (ctypes.c_int, [c_ptr, ctypes.POINTER(c_u64)]),
    "tencache_op_wait": (ctypes.c_int, [c_ptr, c_u64]),
    "tencache_op_done": (ctypes.c_int, [c_ptr, c_u64]),
    "tencache_cache_flush": (ctypes.c_int, [c_ptr]),
    "tencache_cache_stats": (ctypes.c_int, [c_ptr, ctypes.POINTER(CacheStats), ctypes.c_size_t]),
    "tencache_cache_timeline": (ctypes.c_int, [c_ptr, ctypes.c_char_p]),
    "tencache_gpu_numa_node": (ctypes.c_int, [c_ptr, ctypes.c_int, ctypes.POINTER(c_i32)]),
    "tencache_adam_create": (ctypes.c_int, [ctypes.POINTER(c_ptr), ctypes.POINTER(AdamParams)]),
    "tencache_adam_destroy": (None, [c_ptr]),
    "tencache_adam_threads": (ctypes.c_int, [c_ptr]),
    "tencache_adam_kernel": (ctypes.c_char_p, [c_ptr]),
    "tencache_adam_step": (ctypes.c_int, [c_ptr, ctypes.POINTER(AdamHparams),
                                          ctypes.POINTER(AdamTensor)]),
}

_lib = None


def _candidates():
    """Where libtencache.so is looked for, in order."""
    env = os.environ.get("TENCACHE_LIB")
    if env:
        return [env], True
    out = []
    # the repository's build/ dir: above this file (in-tree use) or above the cwd
    for start in (os.path.dirname(os.path.abspath(__file__)), os.getcwd()):
        d = start
        while True:
            out.append(os.path.join(d, "build", "libtencache.so"))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
    found = ctypes.util.find_library("tencache")
    out += [found] if found else []
    out += ["libtencache.so.0", "libtencache.so"]    # the system library path
    return out, False


def lib():
    """The loaded library, its functions typed; TencacheError if it is missing."""
    global _lib
    if _lib is not None:
        return _lib
    paths, from_env = _candidates()
    errors = []
    for p in paths:
        if os.sep in p and not os.path.exists(p):
            continue
        try:
            handle = ctypes.CDLL(p)
        except OSError as e:
            errors.append(f"{p}: {e}")
            continue
        for name, (res, args) in _SIGS.items():
            if not hasattr(handle, name):
                raise TencacheError(f"{p} lacks {name}: it is older than this package; "
                                    "rebuild it with `make lib`")
            fn = getattr(handle, name)
            fn.restype, fn.argtypes = res, args
        handle.path = p
        _lib = handle
        return handle
    where = "TENCACHE_LIB=" + paths[0] if from_env else \
        "TENCACHE_LIB, the repository's build/ directory or the system library path"
    raise TencacheError(
        "libtencache.so not found (looked in " + where + ")" +
        ("; " + "; ".join(errors) if errors else "") +
        ". Build it in the tencache repository with `make lib` (it writes build/libtencache.so),"
        " then set TENCACHE_LIB=/path/to/tencache/build/libtencache.so or install it"
        " on the library path.")


def check(ret, what):
    """ret < 0 (-errno) becomes a TencacheError naming the call."""
    if ret < 0:
        raise TencacheError(f"{what}: {os.strerror(-ret)} "
                            f"(-{errno.errorcode.get(-ret, str(-ret))})")
    return ret
