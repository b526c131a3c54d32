/* SPDX-License-Identifier: MIT */
/*
 * tencache.h - the public API of libtencache: pinned host pools, the
 * size-class allocator, NVMe staging and pinned<->GPU copies.
 *
 * Conventions (as in liburing): every int-returning call returns 0 (or a
 * count) on success and -errno on failure; errno is not used. Structs the
 * caller allocates carry reserved fields that must be zero; every other
 * struct is opaque. Zeroed params mean "all defaults".
 */
#ifndef TENCACHE_H
#define TENCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TENCACHE_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------------------
 * Library context and parameters
 */
struct tencache;

enum tencache_log_level {
	TENCACHE_LOG_DEFAULT = 0,	/* TENCACHE_LOG_INFO */
	TENCACHE_LOG_NONE,
	TENCACHE_LOG_ERR,
	TENCACHE_LOG_WARN,
	TENCACHE_LOG_INFO,
	TENCACHE_LOG_DEBUG,
};

/* A log hook gets one line, without the trailing newline. */
typedef void (*tencache_log_fn)(void *arg, int level, const char *msg);

enum tencache_pool_backend {
	TENCACHE_POOL_AUTO = 0,		/* module, else reserved, else hugetlb, else thp */
	TENCACHE_POOL_MODULE,		/* /dev/tencache ALLOC + mmap */
	TENCACHE_POOL_HUGETLB,		/* memfd_create(MFD_HUGETLB), 2 MiB pages */
	TENCACHE_POOL_THP,		/* anonymous + MADV_HUGEPAGE + mlock */
	TENCACHE_POOL_RESERVED,		/* the caller's hugetlbfs reservation file
					 * (tencache_reserve, tencache-ctl reserve) */
};

enum tencache_stage_backend {
	TENCACHE_STAGE_AUTO = 0,	/* module for module pools, else io_uring */
	TENCACHE_STAGE_MODULE,		/* /dev/tencache SUBMIT/REAP */
	TENCACHE_STAGE_URING,		/* io_uring, fixed buffers, O_DIRECT */
};

/* tencache_params.flags */
#define TENCACHE_F_NUMA_NODE	(1u << 0)	/* numa_node is set */
#define TENCACHE_F_NO_CUDA	(1u << 1)	/* never load the CUDA driver */
#define TENCACHE_F_NO_CUDA_REG	(1u << 2)	/* don't register pools with CUDA */

struct tencache_params {
	uint32_t flags;			/* TENCACHE_F_* */
	int32_t log_level;		/* enum tencache_log_level */
	tencache_log_fn log_fn;		/* NULL: lines go to stderr */
	void *log_arg;
	uint64_t host_budget;		/* pinned host bytes; 0: half of MemAvailable */
	uint32_t pool_backend;		/* enum tencache_pool_backend */
	uint32_t stage_backend;		/* enum tencache_stage_backend */
	int32_t numa_node;		/* with TENCACHE_F_NUMA_NODE; else the GPU's */
	int32_t gpu;			/* CUDA device ordinal (default 0) */
	uint64_t segment_size;		/* pool segment; 0: 1 GiB */
	uint32_t queue_depth;		/* staging requests in flight; 0: 16 */
	uint32_t io_size;		/* staging request size; 0: 1 MiB */
	uint64_t copy_chunk;		/* copies are split into these; 0: 64 MiB */
	const char *dev_path;		/* NULL: /dev/tencache */
	union {				/* (takes the first reserved slot) */
		const char *pool_file;	/* reservation file for the reserved
					 * backend; NULL: $TENCACHE_POOL_FILE, else
					 * tencache-uid<UID>[-node<N>] on a hugetlbfs
					 * mount */
		uint64_t __pool_file_slot;
	};
	uint64_t __reserved[7];		/* must be 0 */
};

/* p may be NULL (all defaults). The params are copied. */
TENCACHE_API int tencache_init(struct tencache **tcp, const struct tencache_params *p);
TENCACHE_API void tencache_exit(struct tencache *tc);

/* ---------------------------------------------------------------------------
 * Size-class allocator (generic: manages offsets in [0, capacity))
 *
 * Sizes named in the histogram get exact-size slots carved from one
 * contiguous slab per size (O(1) alloc/free); every other size, and a class
 * whose slots are all in use, goes to a best-fit region made of the rest.
 */
struct tencache_arena;

struct tencache_size_count {
	uint64_t size;		/* bytes (rounded up to the arena's alignment) */
	uint64_t count;		/* slots of that size */
};

struct tencache_class_stats {
	uint64_t size;		/* slot size */
	uint64_t slots;		/* slots in the slab */
	uint64_t used;		/* slots in use now */
	uint64_t high_water;	/* most slots ever in use at once */
	uint64_t overflows;	/* allocations of this size sent to best-fit */
};

struct tencache_arena_stats {
	uint64_t capacity;	/* bytes managed */
	uint64_t alignment;
	uint64_t used;		/* bytes allocated (rounded sizes) */
	uint64_t requested;	/* bytes asked for (internal waste = used - requested) */
	uint64_t high_water;	/* most bytes ever used at once */
	uint64_t allocs;	/* live allocations */
	uint32_t nr_classes;
	uint32_t __pad;
	uint64_t class_bytes;	/* bytes in class slabs */
	uint64_t class_used;	/* bytes of class slots in use */
	uint64_t general_bytes;	/* bytes of the best-fit region */
	uint64_t general_used;
	uint64_t general_free;
	uint64_t largest_free;	/* largest free extent of the best-fit region */
	uint32_t free_extents;	/* free extents in the best-fit region */
	/* external fragmentation of the best-fit region, in 1/1000:
	 * 1000 * (1 - largest_free / general_free); 0 when nothing is free */
	uint32_t fragmentation;
	uint64_t failed;	/* allocations that returned -ENOMEM */
};

/*
 * alignment: power of two (0: 4096); every offset and size is a multiple of
 * it. The histogram may be empty (hist NULL, nr 0) and may repeat a size.
 * -ENOSPC when the class slabs do not fit in capacity.
 */
TENCACHE_API int tencache_arena_create(struct tencache_arena **ap, uint64_t capacity,
				       uint64_t alignment,
				       const struct tencache_size_count *hist, unsigned nr);
TENCACHE_API void tencache_arena_destroy(struct tencache_arena *a);
/*
 * Best-fit sizes of at least min_size from the high end of the range (the
 * highest extent that fits, carved from its top), all others from the low
 * end: big and small allocations then fragment each other less. 0: off.
 */
TENCACHE_API int tencache_arena_set_high(struct tencache_arena *a, uint64_t min_size);
/* -EINVAL for size 0, -ENOMEM when no extent fits. */
TENCACHE_API int tencache_arena_alloc(struct tencache_arena *a, uint64_t size, uint64_t *off);
/*
 * Allocate exactly [off, off + size) of the best-fit region (a layout made
 * ahead, e.g. a cache plan's). -EINVAL: size 0, off not aligned or outside
 * the region; -EBUSY: part of the range is in use.
 */
TENCACHE_API int tencache_arena_alloc_at(struct tencache_arena *a, uint64_t size, uint64_t off);
/* -ENOENT when off is not the start of a live allocation. */
TENCACHE_API int tencache_arena_free(struct tencache_arena *a, uint64_t off);
TENCACHE_API int tencache_arena_stats(struct tencache_arena *a, struct tencache_arena_stats *st);
/* idx < stats.nr_classes, in increasing size order; -EINVAL otherwise. */
TENCACHE_API int tencache_arena_class_stats(struct tencache_arena *a, unsigned idx,
					    struct tencache_class_stats *cs);

/* ---------------------------------------------------------------------------
 * Pinned host pool: one contiguous virtual range of pinned 2 MiB-backed
 * memory, made of segments (each registered once with CUDA when present),
 * with an arena over it.
 */
struct tencache_pool;

struct tencache_pool_info {
	uint32_t backend;	/* enum tencache_pool_backend actually used */
	int32_t numa_node;	/* -1: no placement */
	void *base;
	uint64_t size;
	uint64_t segment_size;
	uint32_t nr_segments;
	uint32_t cuda_registered; /* 1: every segment is registered with CUDA */
	const char *reason;	/* why this backend (the logged line); owned by the pool */
};

/*
 * bytes: pool size, rounded down to 2 MiB (0: the context's host_budget).
 * Never takes more than asked; -ENOMEM with a logged message naming the limit
 * (memlock rlimit, free huge pages, module cap) when it cannot be had.
 */
TENCACHE_API int tencache_pool_create(struct tencache *tc, struct tencache_pool **poolp,
				      uint64_t bytes,
				      const struct tencache_size_count *hist, unsigned nr);
TENCACHE_API void tencache_pool_destroy(struct tencache_pool *pool);
TENCACHE_API int tencache_pool_info(struct tencache_pool *pool, struct tencache_pool_info *info);
TENCACHE_API const char *tencache_pool_backend_name(unsigned backend);
/* Buffers are 4096-aligned. */
TENCACHE_API int tencache_pool_alloc(struct tencache_pool *pool, uint64_t size, void **ptr);
TENCACHE_API int tencache_pool_free(struct tencache_pool *pool, void *ptr);
TENCACHE_API int tencache_pool_stats(struct tencache_pool *pool, struct tencache_arena_stats *st);
TENCACHE_API struct tencache_arena *tencache_pool_arena(struct tencache_pool *pool);

/*
 * Persistent reservation: the userspace counterpart of the module's pool_mb.
 * A file on a hugetlbfs mount with 2 MiB pages keeps its huge pages
 * (allocated, zeroed and placed once) after the process that made it exits,
 * so a later pool maps pages that exist instead of faulting and zeroing new
 * ones. The file is tencache-uid<UID> (any node) or tencache-uid<UID>-node<N>
 * in the mount, mode 0600, owned by the caller. The "reserved" pool backend
 * (tried after the module, before hugetlb) maps it when it belongs to the
 * caller, holds at least the pool's bytes and no other process holds it (an
 * flock for the pool's life); otherwise the next backend is used, with the
 * reason logged (tencache_pool_info's reason). A pool with a NUMA node takes
 * that node's file, else the any-node one; a pool without one takes the
 * any-node file, else any node's. Forced (TENCACHE_POOL_RESERVED),
 * it fails instead: -ENOENT none, -EBUSY held, -ENOMEM too small, -EPERM not
 * the caller's or readable by others, -EINVAL not on a 2 MiB hugetlbfs.
 *
 * Isolation: the pages are NOT zeroed between runs. A run sees what the
 * previous run of the same user left, as with any file the user owns.
 * tencache_reserve(TENCACHE_RESERVE_ZERO) scrubs them; released pages go
 * back to the kernel, which zeroes a huge page before anyone maps it again.
 */
#define TENCACHE_RESERVE_ZERO	(1u << 0)	/* also zero the pages already held */

struct tencache_reservation {
	char path[256];
	uint64_t size;		/* file size */
	uint64_t allocated;	/* bytes of huge pages the file holds */
	int32_t node;		/* -1: pages on any node */
	uint32_t uid;
	uint32_t in_use;	/* 1: a pool (or a reserve) holds its lock now */
	uint32_t __reserved[5];
};

/*
 * Create, grow or shrink the caller's reservation to bytes (rounded up to
 * 2 MiB) in dir (NULL: where it already is, else the first writable hugetlbfs
 * mount with 2 MiB pages in /proc/mounts); node -1: any node. New pages are
 * faulted in (allocated and zeroed by the kernel) by one thread per CPU of
 * the node, bound to it; shrinking gives the pages past bytes back at once.
 * TENCACHE_RESERVE_ZERO also zeroes the pages kept. r (may be NULL) gets the
 * result. tc (may be NULL: errors only, to stderr) gets the log lines, with
 * progress each second on large reserves. Errors: -EINVAL: bytes 0, unknown
 * flags, node neither -1 nor an existing node, or dir not on a hugetlbfs
 * mount with 2 MiB pages; -ENOENT: dir does not exist, or no hugetlbfs mount;
 * -EACCES: no writable mount; -ENOMEM: too few free huge pages (the message
 * says what to write to nr_hugepages); -EBUSY: a running pool holds it;
 * -EPERM: the file is another user's, a symlink or not a regular file.
 * On failure the reservation is as it was.
 */
TENCACHE_API int tencache_reserve(struct tencache *tc, const char *dir, uint64_t bytes,
				  int node, unsigned flags, struct tencache_reservation *r);
/*
 * Remove the caller's reservation (its pages go back to the kernel).
 * -ENOENT: none; -EBUSY: a pool holds it; -EINVAL, -EPERM: as for reserve.
 */
TENCACHE_API int tencache_reserve_release(struct tencache *tc, const char *dir, int node);
/*
 * The caller's reservation for node (dir NULL: any mount). -ENOENT: none;
 * -EINVAL: r NULL, bad node, or dir not on a 2 MiB hugetlbfs mount.
 */
TENCACHE_API int tencache_reserve_info(const char *dir, int node,
				       struct tencache_reservation *r);

/* ---------------------------------------------------------------------------
 * Swap file: one preallocated (fallocate'd) file opened O_DIRECT, with an
 * arena of O_DIRECT-aligned extents over it.
 */
struct tencache_swap;

/* -EOPNOTSUPP when the file system refuses O_DIRECT or fallocate. */
TENCACHE_API int tencache_swap_create(struct tencache *tc, struct tencache_swap **swp,
				      const char *path, uint64_t bytes,
				      const struct tencache_size_count *hist, unsigned nr);
/* Closes the file; it is unlinked too if it was created by swap_create. */
TENCACHE_API void tencache_swap_destroy(struct tencache_swap *sw);
TENCACHE_API int tencache_swap_fd(struct tencache_swap *sw);
TENCACHE_API int tencache_swap_alloc(struct tencache_swap *sw, uint64_t size, uint64_t *off);
TENCACHE_API int tencache_swap_free(struct tencache_swap *sw, uint64_t off);
TENCACHE_API struct tencache_arena *tencache_swap_arena(struct tencache_swap *sw);

/* ---------------------------------------------------------------------------
 * Staging: NVMe <-> pinned pool. Requests are queued, submitted, and waited
 * for; each request gives one completion. Buffers must lie inside the pool;
 * offsets and lengths must suit O_DIRECT (multiples of the logical block).
 */
struct tencache_stage;

/* tencache_stage_read/write flags */
#define TENCACHE_STAGE_SHORT_OK	(1u << 0)	/* a short read (EOF) is not an error */

struct tencache_stage_cqe {
	uint64_t user_data;
	int64_t res;		/* bytes transferred, or -errno (-EIO for short I/O) */
};

TENCACHE_API int tencache_stage_create(struct tencache *tc, struct tencache_pool *pool,
				       struct tencache_stage **sp);
TENCACHE_API void tencache_stage_destroy(struct tencache_stage *s);
TENCACHE_API unsigned tencache_stage_backend(struct tencache_stage *s);
TENCACHE_API const char *tencache_stage_backend_name(unsigned backend);
/* Queue a request; -EAGAIN when queue_depth requests are queued or in flight. */
TENCACHE_API int tencache_stage_read(struct tencache_stage *s, int fd, void *buf, uint64_t len,
				     uint64_t file_off, uint64_t user_data, unsigned flags);
TENCACHE_API int tencache_stage_write(struct tencache_stage *s, int fd, const void *buf,
				      uint64_t len, uint64_t file_off, uint64_t user_data,
				      unsigned flags);
/*
 * Start queued requests (as many io_size pieces as queue_depth allows; wait
 * issues the rest); returns how many pieces went to the kernel.
 */
TENCACHE_API int tencache_stage_submit(struct tencache_stage *s);
/*
 * Wait for at least min_nr completions (0: don't wait), up to timeout_ns
 * (0: no limit); returns how many were written to cqes (<= max_nr).
 */
TENCACHE_API int tencache_stage_wait(struct tencache_stage *s, unsigned min_nr,
				     struct tencache_stage_cqe *cqes, unsigned max_nr,
				     uint64_t timeout_ns);
/* Requests submitted and not yet returned by tencache_stage_wait. */
TENCACHE_API unsigned tencache_stage_inflight(struct tencache_stage *s);

/* ---------------------------------------------------------------------------
 * CUDA (loaded at run time; without a driver or GPU these return -ENODEV).
 * Streams and events are cudaStream_t/CUstream and cudaEvent_t/CUevent.
 */
enum tencache_copy_dir {
	TENCACHE_COPY_H2D = 1,
	TENCACHE_COPY_D2H,
};

/* 0 when a CUDA driver and the context's GPU are usable, else -ENODEV. */
TENCACHE_API int tencache_cuda_available(struct tencache *tc);
/* NUMA node of the GPU's PCI device (-1: none); -ENODEV without CUDA. */
TENCACHE_API int tencache_gpu_numa_node(struct tencache *tc, int gpu, int *node);
/* Register every pool segment (once; later calls do nothing). */
TENCACHE_API int tencache_pool_cuda_register(struct tencache_pool *pool);
/*
 * Queue an async copy of len bytes on stream, split into copy_chunk pieces;
 * record event (if not NULL) after the last piece.
 */
TENCACHE_API int tencache_copy_async(struct tencache *tc, int dir, void *dst, const void *src,
				     uint64_t len, void *stream, void *event);
/* A device arena: one cuMemAlloc of bytes, with an arena over it. */
struct tencache_gpu_arena;
TENCACHE_API int tencache_gpu_arena_create(struct tencache *tc, struct tencache_gpu_arena **gp,
					   uint64_t bytes,
					   const struct tencache_size_count *hist, unsigned nr);
TENCACHE_API void tencache_gpu_arena_destroy(struct tencache_gpu_arena *g);
TENCACHE_API int tencache_gpu_arena_alloc(struct tencache_gpu_arena *g, uint64_t size,
					  void **dptr);
TENCACHE_API int tencache_gpu_arena_free(struct tencache_gpu_arena *g, void *dptr);
TENCACHE_API struct tencache_arena *tencache_gpu_arena_arena(struct tencache_gpu_arena *g);

/* ---------------------------------------------------------------------------
 * CPU optimizer: AdamW (decoupled weight decay, no amsgrad, no maximize) over
 * fp32 master weights and moments in host memory, with a persistent thread
 * pool and AVX-512 or AVX2/FMA kernels (scalar fallback; all give the same
 * bits).
 *
 * One update does what torch.optim.AdamW's for-loop (_single_tensor_adam,
 * the CPU default) does, in its order and its float32 roundings, with the
 * scalars computed in double as Python does:
 *   p  = p * (float)(1 - lr * weight_decay)          (skipped when wd == 0)
 *   m  = fma(w, g - m, m), w = (float)(1 - beta1)    (lerp; |w| >= 0.5:
 *        fma(w - 1, g - m, g))
 *   v  = fma((float)(1 - beta2) * g, g, v * (float)beta2)
 *   p  = p + ((float)(-lr / bc1) * m) / (sqrtf(v) / (float)sqrt(bc2) + (float)eps)
 * with bc1 = 1 - beta1^step, bc2 = 1 - beta2^step (sqrt(bc2) is pow(bc2, 0.5)).
 * The two FMAs are torch's (lerp's fmadd, and GCC's contraction of addcmul).
 * Every operation is IEEE; torch's CPU sqrt (MKL vsSqrt) is not correctly
 * rounded on every CPU, so results can differ from torch there by an ulp of
 * the denominator. Gradients are read as fp32, fp16 or bf16 (exact); the
 * parameter copy is written as fp32, fp16 or bf16, rounded to nearest even
 * (overflow to inf; a NaN becomes the quiet NaN 0x7e00/0x7fc0 with its sign
 * for fp16, 0x7fc0 for bf16). NaN and inf propagate as in IEEE arithmetic.
 */
struct tencache_adam;

enum tencache_dtype {
	TENCACHE_DTYPE_FP32 = 0,
	TENCACHE_DTYPE_FP16,
	TENCACHE_DTYPE_BF16,
};

/* tencache_adam_params.flags */
#define TENCACHE_ADAM_F_SCALAR	(1u << 0)	/* never use a SIMD kernel */
#define TENCACHE_ADAM_F_NO_AVX512 (1u << 1)	/* AVX2 where AVX-512 is there too */

struct tencache_adam_params {
	uint32_t threads;		/* 0: CPUs of the affinity mask, at most 32 */
	uint32_t flags;			/* TENCACHE_ADAM_F_* */
	uint64_t __reserved[4];		/* must be 0 */
};

struct tencache_adam_hparams {
	double lr, beta1, beta2, eps, weight_decay;	/* as torch validates them */
	uint64_t step;			/* this update's number, from 1 */
	uint64_t __reserved[2];		/* must be 0 */
};

struct tencache_adam_tensor {
	float *master;			/* fp32 weights, updated in place */
	float *exp_avg, *exp_avg_sq;	/* moments, updated in place */
	const void *grad;		/* numel elements of grad_dtype */
	void *param;			/* copy written as param_dtype; NULL: none */
	uint32_t grad_dtype;		/* enum tencache_dtype */
	uint32_t param_dtype;		/* enum tencache_dtype */
	uint64_t numel;
	uint64_t __reserved[2];		/* must be 0 */
};

/* p may be NULL (defaults). The threads live until destroy. */
TENCACHE_API int tencache_adam_create(struct tencache_adam **ap,
				      const struct tencache_adam_params *p);
TENCACHE_API void tencache_adam_destroy(struct tencache_adam *a);
/* Threads that run a step (the caller's included). */
TENCACHE_API int tencache_adam_threads(struct tencache_adam *a);
/* The kernel steps run: "avx512", "avx2" or "scalar"; NULL for NULL. */
TENCACHE_API const char *tencache_adam_kernel(struct tencache_adam *a);
/*
 * One AdamW update of one tensor, spread over the threads; returns when it is
 * done. Calls on one optimizer are serialized. -EINVAL for a bad argument
 * (NULL, misaligned or aliased arrays, a hyperparameter out of range).
 */
TENCACHE_API int tencache_adam_step(struct tencache_adam *a,
				    const struct tencache_adam_hparams *h,
				    const struct tencache_adam_tensor *t);

/* ---------------------------------------------------------------------------
 * Tensor cache: what a trainer uses. Register tensors, then in each step
 * acquire a tensor before the kernels that use it and release it after. The
 * first step(s) run on demand while the profiler records the order; then the
 * planner places every tensor (GPU / pinned / NVMe) and the executor
 * prefetches so that acquire finds the tensor on the GPU. On demand, an op
 * whose tensors fit gpu_budget together always finds room for them: the
 * cache keeps the GPU space outside held tensors in one piece (in the first
 * profiled step, at some cost in hits: it does not know the ops yet).
 *
 * An op is the acquires made before the first release that follows them:
 * their tensors are held together while the op computes. A host op
 * (TENCACHE_ACQ_HOST, e.g. a CPU optimizer step) gets pinned host pointers.
 */
struct tencache_cache;

enum tencache_role {
	TENCACHE_ROLE_PARAM_FP16 = 0,
	TENCACHE_ROLE_PARAM_BF16,
	TENCACHE_ROLE_GRAD,
	TENCACHE_ROLE_MASTER_FP32,
	TENCACHE_ROLE_OPT_STATE,
	TENCACHE_ROLE_ACTIVATION,
};

enum tencache_policy {
	TENCACHE_POLICY_OURS = 0,	/* Belady/MIN eviction + timed prefetch */
	TENCACHE_POLICY_LRU,		/* LRU eviction, fetch on demand */
	TENCACHE_POLICY_ZERO,		/* ZeRO-Infinity-like: release, prefetch bucket */
	TENCACHE_POLICY_10CACHE,	/* 10Cache: resident prefix + MRU window */
};

/* tencache_cache_params.flags */
#define TENCACHE_CACHE_HOST_MODE (1u << 0) /* CPU-only: "GPU" memory is a host
					    * arena, copies are memcpy, compute
					    * time comes from the caller */
#define TENCACHE_CACHE_TIMELINE	(1u << 1) /* record a Perfetto timeline */
#define TENCACHE_CACHE_ISSUER	(1u << 2) /* a thread per cache makes the copy
					    * streams' device calls (copies, their
					    * events): acquire and release only
					    * queue them. Default: the caller's
					    * thread makes them (on the H200 the
					    * thread cost more caller CPU per
					    * decision: results/h200-replay.md) */
#define TENCACHE_CACHE_NO_BATCH	(1u << 3) /* one device call and one event
					    * record per copy. Default: the copies
					    * a plan issues together on one stream
					    * share one event record, and go out
					    * as one batch (CUDA:
					    * cuMemcpyBatchAsync_v2) or one by
					    * one, whichever has lately cost less
					    * CPU per copy */
#define TENCACHE_CACHE_NO_LAYOUT (1u << 4) /* ours' plan leaves the GPU arena's
					    * layout to the executor, which plans
					    * for less than gpu_budget where its
					    * allocations would fragment. Default:
					    * ours also plans with every tensor at
					    * an offset of its own in the whole
					    * budget, and runs that plan unless the
					    * timing model finds it slower; within
					    * 5%, each runs 2 steps and the faster
					    * measured stays (plan_trying) */
#define TENCACHE_CACHE_LAYOUT	(1u << 5) /* ours runs the plan laid out in the
					    * whole budget whenever there is one,
					    * whatever the timing model says (not
					    * with TENCACHE_CACHE_NO_LAYOUT) */
#define TENCACHE_CACHE_DETACH_FIFO (1u << 6) /* detached host ops are run in
					    * the order they were detached (one
					    * runner, first in first out): their
					    * tencache_op_wait may then wait for
					    * earlier ops, and a NOWAIT acquire
					    * never waits for an NVMe read or
					    * pinned space. Without it, the
					    * caller waits for those that may
					    * wait for a detached op not done */

struct tencache_cache_params {
	uint32_t flags;			/* TENCACHE_CACHE_* */
	uint32_t policy;		/* enum tencache_policy */
	uint64_t gpu_budget;		/* GPU bytes for cached tensors (required) */
	uint64_t pinned_budget;		/* 0: every tensor has a pinned home */
	uint64_t nvme_budget;		/* 0: no NVMe tier */
	const char *nvme_path;		/* swap file (created, removed at destroy) */
	uint32_t warmup_steps;		/* profiled steps (0: 1) */
	uint32_t __pad;
	double bw[4];			/* H2D, D2H, NVMe read, NVMe write in B/s;
					 * 0: measured at create (calibration) */
	const char *table_path;		/* a file keeping the learnt step (JSON,
					 * keyed by a signature of the registered
					 * tensors): saved after profiling, loaded
					 * at the first step so that a later run
					 * with the same tensors skips the warm-up;
					 * a mismatched or damaged file is ignored
					 * (logged) and replaced. NULL: none */
	/*
	 * What the links move both ways at once, B/s: [0] H2D + D2H, [1] NVMe
	 * read + write (one disk serves both). 0: measured at create where
	 * that link's two directions are; else the planner's PCIe figure, and
	 * for the disk two independent directions. A disk whose rate both at
	 * once is no more than taking turns (2 / (1/read + 1/write)) is planned
	 * as one queue. Negative, NaN or infinite rates (here or in bw) are
	 * -EINVAL.
	 */
	double duplex_bw[2];
	uint64_t __reserved[6];		/* must be 0 */
};

/* tencache_acquire flags */
#define TENCACHE_ACQ_READ	(1u << 0)	/* the kernels read the value */
#define TENCACHE_ACQ_WRITE	(1u << 1)	/* they write it (WRITE alone: overwrite) */
#define TENCACHE_ACQ_HOST	(1u << 2)	/* a host op: pinned pointer, no stream */
/*
 * With TENCACHE_ACQ_HOST, for an op that will be detached: return the pinned
 * pointer without waiting for the copies that bring the value there (a
 * gradient's copy from the GPU, an NVMe read, the last users of its pinned
 * space); the caller goes on queueing GPU work. The
 * thread that runs the op calls tencache_op_wait(token) before touching the
 * tensors. An op so acquired and released instead waits at its release.
 */
#define TENCACHE_ACQ_NOWAIT	(1u << 3)

struct tencache_cache_stats {
	uint64_t steps;			/* completed steps */
	uint64_t planned_steps;		/* of which ran from a plan */
	uint64_t reprofiles;		/* order changes detected */
	uint64_t acquires, hits;	/* GPU reads; found resident and ready */
	uint64_t stall_ns;		/* host time acquire waited, all steps */
	uint64_t last_step_ns;		/* wall time of the last step */
	uint64_t last_stall_ns;		/* acquire waits in the last step */
	uint64_t last_acquires, last_hits;
	uint64_t link_bytes[4];		/* H2D, D2H, NVMe read, NVMe write */
	uint64_t late_prefetches;	/* prefetches not done when acquired */
	uint64_t gpu_bytes_peak;	/* GPU arena high-water mark */
	uint64_t decision_ns;		/* CPU time in acquire/release decisions */
	uint64_t decisions;
	double link_bw[4];		/* bandwidths the plans used, B/s */
	uint64_t plan_rejects;		/* plans that failed the schedule check
					 * (a planner bug: ran on demand instead) */
	uint32_t table_loads;		/* learnt steps loaded from table_path */
	uint32_t table_saves;		/* learnt steps saved there */
	/*
	 * The same on the compute's clock. acquires and hits are judged when
	 * acquire runs, on the CPU, which on a GPU runs ahead of the stream:
	 * a copy found in flight may well end before the stream needs it.
	 * gpu_hits: GPU reads whose value was resident (hits' first half)
	 * and whose copies ended before the acquiring stream reached the
	 * acquire (>= hits); gpu_stall_ns: the time the compute waited for
	 * copies, per acquire the latest copy's end less the stream's arrival
	 * (0 if before); host acquires and host mode count their host waits,
	 * so in host mode these equal hits and stall_ns. Read by timing
	 * events when the step ends (tencache_step_end): the last_* are the
	 * last step's.
	 */
	uint64_t gpu_hits, gpu_stall_ns;
	uint64_t last_gpu_hits, last_gpu_stall_ns;
	uint64_t static_layouts;	/* plans whose GPU allocations would have
					 * fragmented the arena, laid out ahead */
	uint64_t replans;		/* plans left mid-step for a fragmented
					 * arena, planned again with more room */
	uint64_t plan_fallbacks;	/* times ours found no layout within the
					 * GPU budget and the ZeRO-like plan ran */
	uint64_t held_copies;		/* prefetches of a detached host op's
					 * output that waited for the op in the
					 * cache while the caller and the other
					 * copies went on */
	/*
	 * The plan running now (0 without one): the GPU bytes it was made
	 * for, on average over the step (less than gpu_budget by the room
	 * kept where its allocations would fragment the arena), and per
	 * step its GPU reads and how many of them
	 * it keeps resident (its hit rate, before any copy is late).
	 */
	uint64_t plan_gpu_bytes;
	uint64_t plan_reads, plan_hits;
	uint64_t plan_read_bytes, plan_hit_bytes;	/* the same in bytes */
	uint64_t planner_layouts;	/* plans that ran laid out by the planner
					 * (every tensor at its own offset in the
					 * whole budget: TENCACHE_CACHE_NO_LAYOUT) */
	uint64_t plan_laid_out;		/* 1: the plan running now is one of them */
	/*
	 * Where the timing model finds the laid-out plan and the executor's
	 * own within 5% of each other, each runs for 2 steps and is timed
	 * (step begin to step begin), and the faster stays: plan_trying is 1
	 * until then (measure after it), plan_trials counts those decided.
	 */
	uint64_t plan_trying;
	uint64_t plan_trials;
	/* waits of host acquires (TENCACHE_ACQ_NOWAIT) that went to the op's
	 * tencache_op_wait: copies, NVMe reads or pinned space still in
	 * flight when the caller asked */
	uint64_t deferred_waits;
	/* plans whose pinned ranges were laid out ahead (NVMe tier) */
	uint64_t pinned_layouts;
	/* what the links move both ways at once, as the plans used it, B/s:
	 * H2D + D2H, and NVMe read + write (one disk); 0: taken as independent */
	double duplex_bw[2];
	/* with an NVMe tier, the pinned bytes the plan running now was made
	 * for, on average over the step: pinned_budget less the room its
	 * pinned layout needed (0: no plan, or no NVMe tier) */
	uint64_t plan_pinned_bytes;
	/* of deferred_waits, those for an NVMe read or pinned space (a
	 * staging worker's): the caller did not wait for the disk */
	uint64_t deferred_host_waits;
	/* a copy stream's waits for a host event (an NVMe read, pinned space)
	 * queued on the stream, the caller going on: host mode's queue, or
	 * on the GPU (cuStreamWaitValue64); the others the caller waited for */
	uint64_t queued_host_waits;
	/* of that room, the stretches of the step it was kept out of only
	 * (where the layout reached past the pool), before any kept out of
	 * the whole step */
	uint64_t plan_pinned_cuts;
	/*
	 * The time the disk had NVMe reads ([0]) and writes ([1]) in flight,
	 * and of that the time it had both (disk_both_ns): link_bytes[2] and
	 * [3] over these are the rates the disk gave, to set against
	 * link_bw (what the plans used). A disk that took turns (duplex_bw[1]
	 * no faster than in turn) has no time with both.
	 */
	uint64_t disk_busy_ns[2];
	uint64_t disk_both_ns;
	/* planned steps whose NVMe bytes took the disk more than 1.25 times
	 * as long as link_bw says (logged once, as a warning) */
	uint64_t disk_slow_steps;
};

TENCACHE_API int tencache_cache_create(struct tencache *tc, struct tencache_cache **cp,
				       const struct tencache_cache_params *p);
TENCACHE_API void tencache_cache_destroy(struct tencache_cache *c);
/* Returns the tensor id (>= 0). Only before the first step begins. */
TENCACHE_API int tencache_tensor_register(struct tencache_cache *c, uint64_t bytes,
					  unsigned role);
/* The tensor's pinned host copy (to initialize or read it outside steps). */
TENCACHE_API int tencache_tensor_host(struct tencache_cache *c, int id, void **ptr);
TENCACHE_API int tencache_step_begin(struct tencache_cache *c);
/* Waits for the step's copies and write-backs. */
TENCACHE_API int tencache_step_end(struct tencache_cache *c);
/*
 * Make tensor id usable by work queued on stream (a CUstream/cudaStream_t;
 * NULL: the legacy default stream; ignored in host mode) and return its
 * device pointer; for TENCACHE_ACQ_HOST its pinned host pointer, ready now.
 */
TENCACHE_API int tencache_acquire(struct tencache_cache *c, int id, unsigned flags,
				  void *stream, void **ptr);
/* The op's kernels are queued on stream (host mode: took compute_ns). */
TENCACHE_API int tencache_release(struct tencache_cache *c, int id, void *stream,
				  uint64_t compute_ns);
/*
 * Run the open host op on another thread: ends its acquires as a release
 * would, but the op is finished only when tencache_op_done(token) is called,
 * from any thread. Until then its tensors stay held (tencache_release returns
 * -EBUSY) and every copy of them waits; the cache's other calls go on. Release
 * them from the cache's thread after tencache_op_done, in this step or a
 * later one: tencache_step_end leaves them held, and acquiring them returns
 * -EBUSY until they are released. Entering or leaving a plan, flush and
 * tencache_tensor_host wait for detached ops: finish them on another thread.
 * -EINVAL: no host op is open (acquired, not yet released) or no token.
 */
TENCACHE_API int tencache_op_detach(struct tencache_cache *c, uint64_t *token);
/*
 * Any thread: wait until the detached op's tensors are in place (the copies
 * its TENCACHE_ACQ_NOWAIT acquires did not wait for; at once without them).
 * Call it before the op reads or writes them, then tencache_op_done.
 * -EINVAL: not a detached op's token, or done already.
 */
TENCACHE_API int tencache_op_wait(struct tencache_cache *c, uint64_t token);
/* The detached op is finished. -EINVAL: not a token of this step, or done already. */
TENCACHE_API int tencache_op_done(struct tencache_cache *c, uint64_t token);
/*
 * Write every dirty tensor back to its home (pinned or NVMe) and wait. A
 * planned step does not keep values its trace overwrites before reading
 * them again (activations, rewritten by the next forward; gradients, with
 * an NVMe tier): after a flush, tencache_tensor_host of such a tensor may
 * return an older value, or zeros where its home was never written.
 */
TENCACHE_API int tencache_cache_flush(struct tencache_cache *c);
/*
 * Wait until the work queued on stream (NULL: the legacy default stream) is
 * done, e.g. to time a step; a no-op in host mode. -EINVAL on a bad cache.
 */
TENCACHE_API int tencache_cache_sync(struct tencache_cache *c, void *stream);
/*
 * Copy the statistics into *st, size bytes of it: pass sizeof(*st). A
 * caller built against an older header (a shorter struct) gets the fields
 * it knows; one built against a newer gets zeros past the library's.
 * -EINVAL on a bad cache, a NULL st or a size of 0.
 */
TENCACHE_API int tencache_cache_stats(struct tencache_cache *c, struct tencache_cache_stats *st,
				      size_t size);
/* Chrome trace-event JSON (opens in Perfetto) of what was recorded. */
TENCACHE_API int tencache_cache_timeline(struct tencache_cache *c, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* TENCACHE_H */
