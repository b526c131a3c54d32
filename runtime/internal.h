/* internal.h - what the runtime's files share: the context, logging, the pool
 * layout (segments) that staging and CUDA need, and the backend interfaces. */
#ifndef TENCACHE_INTERNAL_H
#define TENCACHE_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "tencache.h"

#define TC_2M			(2ULL << 20)
#define TC_GIB			(1ULL << 30)
#define TC_DEF_SEGMENT		TC_GIB
/*
 * From measurements on the H200 test machine (results/h200-runtime.md; its
 * disk is virtio-blk, not NVMe: re-measure there). Staging: 1 MiB requests
 * beat 256 KiB and 4 MiB at every depth but 128; at 1 MiB, QD16 was within
 * 8% of the best read and write in both runs, and QD64-128 lost up to 40%.
 * Copies: pieces below 64 MiB cost bandwidth (8 MiB -1.7%, 1 MiB -12%), and
 * splitting did not help H2D/D2H overlap (3 copy engines); 64 MiB is within
 * 0.2% of whole copies and still lets other streams' copies interleave.
 */
#define TC_DEF_QUEUE_DEPTH	16
#define TC_DEF_IO_SIZE		(1u << 20)
#define TC_DEF_COPY_CHUNK	(64ULL << 20)

#define TC_ALIGN_UP(x, a)	(((x) + (a) - 1) / (a) * (a))
#define TC_ALIGN_DOWN(x, a)	((x) / (a) * (a))

struct tc_cuda;

struct tencache {
	struct tencache_params p;	/* defaults filled in */
	pthread_mutex_t lock;		/* guards cuda loading */
	struct tc_cuda *cuda;		/* NULL until loaded (or failed) */
	int cuda_err;			/* 0, or -errno of the failed load */
	int cuda_tried;
};

void tc_log(struct tencache *tc, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define tc_err(tc, ...)		tc_log(tc, TENCACHE_LOG_ERR, __VA_ARGS__)
#define tc_warn(tc, ...)	tc_log(tc, TENCACHE_LOG_WARN, __VA_ARGS__)
#define tc_info(tc, ...)	tc_log(tc, TENCACHE_LOG_INFO, __VA_ARGS__)
#define tc_dbg(tc, ...)		tc_log(tc, TENCACHE_LOG_DEBUG, __VA_ARGS__)

/* Small helpers (core.c). */
uint64_t tc_meminfo(const char *key);		/* bytes, 0 if unknown */
long tc_read_sysfs_long(const char *path, long dflt);
int tc_have_cap_ipc_lock(void);
void tc_fmt_bytes(char *buf, size_t n, uint64_t bytes);
/* Prefault [addr, addr+len) for writing with a few threads. */
int tc_prefault(void *addr, uint64_t len);
void tc_par_zero(void *addr, uint64_t len);
/* Prefer NUMA node for [addr, addr+len); node < 0 does nothing. */
int tc_bind_node(void *addr, uint64_t len, int node);
/* A 2 MiB huge page counter of sysfs ("nr_hugepages", "free_hugepages", ...),
 * of node if node >= 0, else of the machine; -1 if unreadable. */
long tc_hugetlb_count(const char *name, int node);
/* Free 2 MiB huge pages not promised to a mapping (on node, if node >= 0). */
long tc_hugetlb_free_pages(int node);

/* ---- Pool ---- */
struct tc_segment {
	char *addr;
	uint64_t len;
	uint32_t handle;	/* module buffer handle, 0 for userspace pools */
	uint32_t cuda_reg;
};

struct tencache_pool;

struct tc_pool_ops {
	const char *name;
	/*
	 * Map pool->size bytes at pool->base as pool->nr_segs segments of
	 * pool->seg_size. On failure, write why into pool->reason and return
	 * -errno: -ENODEV/-ENOENT/-EOPNOTSUPP mean "try the next backend".
	 */
	int (*map)(struct tencache_pool *pool);
	void (*unmap)(struct tencache_pool *pool);
};

extern const struct tc_pool_ops tc_pool_module_ops;
extern const struct tc_pool_ops tc_pool_hugetlb_ops;
extern const struct tc_pool_ops tc_pool_thp_ops;
extern const struct tc_pool_ops tc_pool_reserved_ops;

/*
 * hugetlbfs mounts with 2 MiB pages (reserved.c), from /proc/mounts in order;
 * returns how many were written to dirs (at most max), 0 if none.
 */
int tc_hugetlbfs_mounts(char (*dirs)[256], int max);

struct tencache_pool {
	struct tencache *tc;
	const struct tc_pool_ops *ops;
	unsigned backend;
	int node;
	char *base;
	uint64_t size;
	uint64_t seg_size;
	unsigned nr_segs;
	struct tc_segment *segs;
	int fd;			/* module fd, memfd or reservation file, -1 if none */
	uint64_t module_features;
	void *map_base;		/* what to munmap (may differ from base) */
	uint64_t map_len;
	struct tencache_arena *arena;
	pthread_mutex_t lock;	/* guards cuda registration */
	int cuda_registered;
	char reason[1024];
};

/* Segment holding [p, p+len) or NULL; *off is p's offset in it. */
struct tc_segment *tc_pool_find(struct tencache_pool *pool, const void *p, uint64_t *off);
int tc_pool_seg_index(struct tencache_pool *pool, const struct tc_segment *seg);

/* ---- Staging ---- */
struct tencache_stage;

/* One I/O: a piece of a request that lies inside one pool segment. */
struct tc_chunk {
	struct tc_req *req;
	int op;			/* TENCACHE_OP_READ / WRITE (uapi values) */
	int fd;
	char *buf;
	uint64_t len;
	uint64_t file_off;
	struct tc_segment *seg;
	struct tc_chunk *next;	/* free list */
};

struct tc_stage_ops {
	const char *name;
	int (*init)(struct tencache_stage *s);
	void (*exit)(struct tencache_stage *s);
	/* Queue one chunk for the next submit. Never fails: room is checked. */
	void (*prep)(struct tencache_stage *s, struct tc_chunk *c);
	/* Hand queued chunks to the kernel; returns how many, or -errno. */
	int (*submit)(struct tencache_stage *s);
	/*
	 * Wait for at least min_nr chunk completions (or the timeout, 0: none)
	 * and pass each to tc_stage_complete(). Returns the number reaped,
	 * 0 on timeout, or -errno.
	 */
	int (*reap)(struct tencache_stage *s, unsigned min_nr, uint64_t timeout_ns);
};

extern const struct tc_stage_ops tc_stage_uring_ops;
extern const struct tc_stage_ops tc_stage_module_ops;

struct tencache_stage {
	struct tencache *tc;
	struct tencache_pool *pool;
	const struct tc_stage_ops *ops;
	unsigned backend;
	unsigned qd;
	uint64_t io_size;
	void *priv;		/* backend state */
	struct tc_chunk *chunks, *free_chunks;
	unsigned chunks_inflight;	/* prepped or in the kernel */
	struct tc_req *reqs, *free_reqs;
	struct tc_req *pend_head, *pend_tail;	/* requests with chunks to issue */
	struct tc_req *done_head, *done_tail;	/* finished, not yet returned */
	unsigned nr_reqs;	/* requests not yet returned by wait */
};

void tc_stage_complete(struct tencache_stage *s, struct tc_chunk *c, int64_t res);

/* ---- CUDA (cuda/cuda.c) ---- */
int tc_cuda_get(struct tencache *tc, struct tc_cuda **cu);
int tc_cuda_host_register(struct tencache *tc, void *p, uint64_t len);
int tc_cuda_host_unregister(struct tencache *tc, void *p);
/* Bytes of [p, p+len) before the end of the registered range p is in. */
uint64_t tc_cuda_host_span(const void *p, uint64_t len);
void tc_cuda_unload(struct tencache *tc);

#endif
