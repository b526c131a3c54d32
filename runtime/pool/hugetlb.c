/*
 * hugetlb.c - pool backend on memfd_create(MFD_HUGETLB) with 2 MiB pages,
 * used when enough huge pages are reserved (vm.nr_hugepages). The pages are
 * not swappable, so no mlock; they are reserved at mmap and prefaulted.
 */
#include <linux/memfd.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

static void hugetlb_unmap(struct tencache_pool *pool)
{
	if (pool->map_base)
		munmap(pool->map_base, pool->map_len);
	if (pool->fd >= 0)
		close(pool->fd);
	pool->map_base = NULL;
	pool->fd = -1;
}

static int hugetlb_map(struct tencache_pool *pool)
{
	long need = pool->size / TC_2M, have = tc_hugetlb_free_pages(pool->node);
	int ret;

	if (have < need) {
		snprintf(pool->reason, sizeof(pool->reason),
			 "%ld free 2 MiB huge pages%s, need %ld (raise vm.nr_hugepages)", have,
			 pool->node >= 0 ? " on the node" : "", need);
		return -ENODEV;
	}
	pool->fd = memfd_create("tencache-pool", MFD_CLOEXEC | MFD_HUGETLB | MFD_HUGE_2MB);
	if (pool->fd < 0) {
		ret = -errno;
		snprintf(pool->reason, sizeof(pool->reason), "memfd_create: %s", strerror(errno));
		return ret == -EINVAL ? -EOPNOTSUPP : ret;
	}
	if (ftruncate(pool->fd, pool->size)) {
		ret = -errno;
		snprintf(pool->reason, sizeof(pool->reason), "ftruncate: %s", strerror(errno));
		goto err_close;
	}
	/* A shared hugetlb mapping reserves its pages here, or fails with ENOMEM. */
	pool->map_len = pool->size;
	pool->map_base = mmap(NULL, pool->size, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd, 0);
	if (pool->map_base == MAP_FAILED) {
		ret = -errno;
		pool->map_base = NULL;
		snprintf(pool->reason, sizeof(pool->reason),
			 "mmap of %ld huge pages: %s (another process took them?)", need,
			 strerror(errno));
		/* Lost a race for the pages: let the next backend try. */
		ret = ret == -ENOMEM ? -ENODEV : ret;
		goto err_close;
	}
	pool->base = pool->map_base;
	if (tc_bind_node(pool->base, pool->size, pool->node))
		tc_warn(pool->tc, "pool: cannot prefer NUMA node %d", pool->node);
	ret = tc_prefault(pool->base, pool->size);
	if (ret) {
		snprintf(pool->reason, sizeof(pool->reason), "prefault: %s", strerror(-ret));
		hugetlb_unmap(pool);
		return ret;
	}
	snprintf(pool->reason, sizeof(pool->reason), "%ld free 2 MiB huge pages", have);
	return 0;

err_close:
	close(pool->fd);
	pool->fd = -1;
	return ret;
}

const struct tc_pool_ops tc_pool_hugetlb_ops = {
	.name = "hugetlb",
	.map = hugetlb_map,
	.unmap = hugetlb_unmap,
};
