/*
 * thp.c - pool backend on anonymous memory: 2 MiB-aligned, MADV_HUGEPAGE,
 * prefaulted by a few threads (first touch is the cost), then mlock'ed.
 * Checks the memlock rlimit and MemAvailable first, to fail with a clear
 * message instead of an OOM kill.
 */
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

static void thp_unmap(struct tencache_pool *pool)
{
	if (pool->map_base)
		munmap(pool->map_base, pool->map_len);	/* also unlocks */
	pool->map_base = NULL;
}

static int thp_map(struct tencache_pool *pool)
{
	struct rlimit rl = { 0 };
	char want[32], lim[32];
	uint64_t avail, locked = tc_meminfo("Mlocked");
	int ret;

	tc_fmt_bytes(want, sizeof(want), pool->size);
	if (!getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    !tc_have_cap_ipc_lock() && pool->size > rl.rlim_cur) {
		tc_fmt_bytes(lim, sizeof(lim), rl.rlim_cur);
		snprintf(pool->reason, sizeof(pool->reason),
			 "memlock rlimit is %s, need %s (raise ulimit -l / LimitMEMLOCK, "
			 "or grant CAP_IPC_LOCK)", lim, want);
		return -ENOMEM;
	}
	avail = tc_meminfo("MemAvailable");
	if (avail && pool->size > avail) {
		tc_fmt_bytes(lim, sizeof(lim), avail);
		snprintf(pool->reason, sizeof(pool->reason), "MemAvailable is %s, need %s",
			 lim, want);
		return -ENOMEM;
	}
	(void)locked;

	pool->map_len = pool->size + TC_2M;
	pool->map_base = mmap(NULL, pool->map_len, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (pool->map_base == MAP_FAILED) {
		pool->map_base = NULL;
		snprintf(pool->reason, sizeof(pool->reason), "mmap: %s", strerror(errno));
		return -ENOMEM;
	}
	pool->base = (char *)TC_ALIGN_UP((uintptr_t)pool->map_base, TC_2M);
	if (madvise(pool->base, pool->size, MADV_HUGEPAGE))
		tc_dbg(pool->tc, "pool: MADV_HUGEPAGE: %s", strerror(errno));
	if (tc_bind_node(pool->base, pool->size, pool->node))
		tc_warn(pool->tc, "pool: cannot prefer NUMA node %d", pool->node);
	ret = tc_prefault(pool->base, pool->size);
	if (ret) {
		snprintf(pool->reason, sizeof(pool->reason), "prefault of %s: %s", want,
			 strerror(-ret));
		goto err_unmap;
	}
	if (mlock(pool->base, pool->size)) {
		ret = -errno;
		tc_fmt_bytes(lim, sizeof(lim), rl.rlim_cur);
		snprintf(pool->reason, sizeof(pool->reason), "mlock of %s: %s (memlock rlimit %s)",
			 want, strerror(errno), rl.rlim_cur == RLIM_INFINITY ? "unlimited" : lim);
		ret = ret == -EPERM ? -ENOMEM : ret;
		goto err_unmap;
	}
	return 0;

err_unmap:
	thp_unmap(pool);
	return ret;
}

const struct tc_pool_ops tc_pool_thp_ops = {
	.name = "thp",
	.map = thp_map,
	.unmap = thp_unmap,
};
