/*
 * pool.c - the pinned host pool: sizes it from the budget, picks a backend at
 * run time (module, else the reservation file, else hugetlb, else THP +
 * mlock), logs the choice once, registers each segment with CUDA when a GPU
 * is present, and puts an arena over the whole range.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define TC_POOL_ALIGN	4096	/* O_DIRECT-safe and page-aligned buffers */

static const struct tc_pool_ops *const pool_ops[] = {
	[TENCACHE_POOL_MODULE] = &tc_pool_module_ops,
	[TENCACHE_POOL_HUGETLB] = &tc_pool_hugetlb_ops,
	[TENCACHE_POOL_THP] = &tc_pool_thp_ops,
	[TENCACHE_POOL_RESERVED] = &tc_pool_reserved_ops,
};

/* TENCACHE_POOL_AUTO tries these in turn. */
static const unsigned auto_order[] = {
	TENCACHE_POOL_MODULE, TENCACHE_POOL_RESERVED, TENCACHE_POOL_HUGETLB, TENCACHE_POOL_THP,
};

TENCACHE_API const char *tencache_pool_backend_name(unsigned backend)
{
	switch (backend) {
	case TENCACHE_POOL_AUTO: return "auto";
	case TENCACHE_POOL_MODULE: return "module";
	case TENCACHE_POOL_HUGETLB: return "hugetlb";
	case TENCACHE_POOL_THP: return "thp";
	case TENCACHE_POOL_RESERVED: return "reserved";
	}
	return "unknown";
}

static int pool_node(struct tencache *tc)
{
	int node = -1;

	if (tc->p.flags & TENCACHE_F_NUMA_NODE)
		return tc->p.numa_node;
	if (tencache_gpu_numa_node(tc, tc->p.gpu, &node))
		return -1;
	return node;
}

/*
 * Segments are registered by up to REG_THREADS threads at once: one
 * cuMemHostRegister pins (and maps for the GPU) a whole segment. On the H200
 * machine, 8 threads registered 32 GiB in 1.15-1.37 s (cold memory) where one
 * thread had taken 1.48-1.88 s; no gain at 8 GiB (results/h200-runtime.md).
 */
#define REG_THREADS	8

struct reg_job {
	struct tencache_pool *pool;
	unsigned next;		/* next segment to take (atomic) */
	int err;		/* first error (atomic) */
};

static void *reg_thread(void *arg)
{
	struct reg_job *j = arg;
	struct tencache_pool *pool = j->pool;
	unsigned i;
	int ret, zero;

	while ((i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED)) < pool->nr_segs) {
		struct tc_segment *s = &pool->segs[i];

		if (s->cuda_reg)
			continue;
		ret = tc_cuda_host_register(pool->tc, s->addr, s->len);
		if (!ret) {
			s->cuda_reg = 1;
			continue;
		}
		zero = 0;
		__atomic_compare_exchange_n(&j->err, &zero, ret, 0, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
	}
	return NULL;
}

static int pool_register(struct tencache_pool *pool)
{
	struct reg_job job = { .pool = pool, .next = 0, .err = 0 };
	pthread_t tids[REG_THREADS];
	unsigned i, todo = 0, n, started = 0;

	pthread_mutex_lock(&pool->lock);
	for (i = 0; i < pool->nr_segs; i++)
		todo += !pool->segs[i].cuda_reg;
	n = todo < REG_THREADS ? todo : REG_THREADS;
	for (i = 1; i < n; i++) {
		if (pthread_create(&tids[started], NULL, reg_thread, &job))
			break;	/* the threads we have do the rest */
		started++;
	}
	reg_thread(&job);
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	pool->cuda_registered = !job.err;
	pthread_mutex_unlock(&pool->lock);
	return job.err;
}

TENCACHE_API int tencache_pool_create(struct tencache *tc, struct tencache_pool **poolp,
				      uint64_t bytes, const struct tencache_size_count *hist,
				      unsigned nr)
{
	struct tencache_pool *pool;
	char sz[32], why[sizeof(pool->reason)] = "";
	unsigned b, k, nr_try, i;
	int ret = -ENODEV;

	if (!tc || !poolp)
		return -EINVAL;
	if (!bytes)
		bytes = tc->p.host_budget;
	if (!bytes)
		bytes = tc_meminfo("MemAvailable") / 2;
	bytes = TC_ALIGN_DOWN(bytes, TC_2M);	/* never more than asked */
	if (!bytes) {
		tc_err(tc, "pool: size below one 2 MiB block");
		return -EINVAL;
	}

	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	pool->tc = tc;
	pool->fd = -1;
	pool->size = bytes;
	pool->seg_size = tc->p.segment_size < bytes ? tc->p.segment_size : bytes;
	pool->nr_segs = (bytes + pool->seg_size - 1) / pool->seg_size;
	pool->node = pool_node(tc);
	pthread_mutex_init(&pool->lock, NULL);
	pool->segs = calloc(pool->nr_segs, sizeof(*pool->segs));
	if (!pool->segs) {
		ret = -ENOMEM;
		goto err_free;
	}
	ret = tencache_arena_create(&pool->arena, bytes, TC_POOL_ALIGN, hist, nr);
	if (ret) {
		tc_err(tc, "pool: the size-class histogram does not fit: %s", strerror(-ret));
		goto err_free;
	}

	nr_try = tc->p.pool_backend ? 1 : sizeof(auto_order) / sizeof(auto_order[0]);
	for (k = 0; k < nr_try; k++) {
		b = tc->p.pool_backend ? tc->p.pool_backend : auto_order[k];
		pool->reason[0] = 0;
		pool->backend = b;
		pool->ops = pool_ops[b];
		ret = pool->ops->map(pool);
		if (!ret)
			break;
		/* Remember why each earlier backend was passed over. */
		snprintf(why + strlen(why), sizeof(why) - strlen(why), "%s%s: %.200s",
			 why[0] ? "; " : "", pool->ops->name, pool->reason);
		if (ret != -ENODEV && ret != -ENOENT && ret != -EOPNOTSUPP)
			break;	/* a real limit: report it, don't silently fall back */
	}
	if (ret) {
		tc_fmt_bytes(sz, sizeof(sz), bytes);
		tc_err(tc, "pool: cannot get %s of pinned memory: %s", sz, why);
		snprintf(pool->reason, sizeof(pool->reason), "%s", why);
		goto err_arena;
	}
	for (i = 0; i < pool->nr_segs; i++) {
		uint64_t off = (uint64_t)i * pool->seg_size;

		if (!pool->segs[i].addr)
			pool->segs[i].addr = pool->base + off;
		if (!pool->segs[i].len)
			pool->segs[i].len = bytes - off < pool->seg_size ? bytes - off : pool->seg_size;
	}

	if (!(tc->p.flags & (TENCACHE_F_NO_CUDA | TENCACHE_F_NO_CUDA_REG)) &&
	    !tencache_cuda_available(tc)) {
		ret = pool_register(pool);
		if (ret)
			goto err_unmap;
	}

	tc_fmt_bytes(sz, sizeof(sz), bytes);
	{
		char line[sizeof(pool->reason)];

		snprintf(line, sizeof(line), "backend %s, %s in %u segment(s), node %d%s%s%.200s%s",
			 pool->ops->name, sz, pool->nr_segs, pool->node,
			 pool->cuda_registered ? ", CUDA-registered" : "",
			 pool->reason[0] ? " (" : "", pool->reason, pool->reason[0] ? ")" : "");
		if (why[0])
			snprintf(line + strlen(line), sizeof(line) - strlen(line),
				 "; passed over %.700s", why);
		memcpy(pool->reason, line, sizeof(line));
	}
	tc_info(tc, "pool: %s", pool->reason);
	*poolp = pool;
	return 0;

err_unmap:
	pool->ops->unmap(pool);
err_arena:
	tencache_arena_destroy(pool->arena);
err_free:
	pthread_mutex_destroy(&pool->lock);
	free(pool->segs);
	free(pool);
	return ret;
}

TENCACHE_API void tencache_pool_destroy(struct tencache_pool *pool)
{
	unsigned i;

	if (!pool)
		return;
	for (i = 0; i < pool->nr_segs; i++)
		if (pool->segs[i].cuda_reg)
			tc_cuda_host_unregister(pool->tc, pool->segs[i].addr);
	pool->ops->unmap(pool);
	tencache_arena_destroy(pool->arena);
	pthread_mutex_destroy(&pool->lock);
	free(pool->segs);
	free(pool);
}

TENCACHE_API int tencache_pool_info(struct tencache_pool *pool, struct tencache_pool_info *info)
{
	if (!pool || !info)
		return -EINVAL;
	memset(info, 0, sizeof(*info));
	info->backend = pool->backend;
	info->numa_node = pool->node;
	info->base = pool->base;
	info->size = pool->size;
	info->segment_size = pool->seg_size;
	info->nr_segments = pool->nr_segs;
	info->cuda_registered = pool->cuda_registered;
	info->reason = pool->reason;
	return 0;
}

TENCACHE_API int tencache_pool_cuda_register(struct tencache_pool *pool)
{
	int ret;

	if (!pool)
		return -EINVAL;
	ret = tencache_cuda_available(pool->tc);
	return ret ? ret : pool_register(pool);
}

TENCACHE_API int tencache_pool_alloc(struct tencache_pool *pool, uint64_t size, void **ptr)
{
	uint64_t off;
	int ret;

	if (!pool || !ptr)
		return -EINVAL;
	ret = tencache_arena_alloc(pool->arena, size, &off);
	if (!ret)
		*ptr = pool->base + off;
	return ret;
}

TENCACHE_API int tencache_pool_free(struct tencache_pool *pool, void *ptr)
{
	if (!pool || (char *)ptr < pool->base || (char *)ptr >= pool->base + pool->size)
		return -EINVAL;
	return tencache_arena_free(pool->arena, (char *)ptr - pool->base);
}

TENCACHE_API int tencache_pool_stats(struct tencache_pool *pool, struct tencache_arena_stats *st)
{
	return pool ? tencache_arena_stats(pool->arena, st) : -EINVAL;
}

TENCACHE_API struct tencache_arena *tencache_pool_arena(struct tencache_pool *pool)
{
	return pool ? pool->arena : NULL;
}

struct tc_segment *tc_pool_find(struct tencache_pool *pool, const void *p, uint64_t *off)
{
	const char *c = p;
	uint64_t o;
	struct tc_segment *s;

	if (c < pool->base || c >= pool->base + pool->size)
		return NULL;
	o = c - pool->base;
	s = &pool->segs[o / pool->seg_size];
	*off = c - s->addr;
	return s;
}

int tc_pool_seg_index(struct tencache_pool *pool, const struct tc_segment *seg)
{
	return seg - pool->segs;
}
