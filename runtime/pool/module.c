/*
 * module.c - pool backend on tencache.ko: one TENCACHE_ALLOC per segment,
 * each mmap'ed (offset = handle << 40) into one reserved virtual range, so
 * the pool is contiguous like the userspace backends.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <uapi/tencache.h>

#include "internal.h"

static void module_unmap(struct tencache_pool *pool)
{
	unsigned i;

	if (pool->map_base)
		munmap(pool->map_base, pool->map_len);
	for (i = 0; i < pool->nr_segs; i++) {
		struct tencache_free f = { .size = sizeof(f), .handle = pool->segs[i].handle };

		if (f.handle && ioctl(pool->fd, TENCACHE_FREE, &f))
			tc_warn(pool->tc, "pool: module FREE of handle %u: %s", f.handle,
				strerror(errno));
		pool->segs[i].handle = 0;
	}
	if (pool->fd >= 0)
		close(pool->fd);
	pool->fd = -1;
	pool->map_base = NULL;
}

static void explain_enomem(struct tencache_pool *pool, const struct tencache_info *info,
			   uint64_t len)
{
	struct rlimit rl = { 0 };
	char want[32], cap[32], held[32], lim[32] = "unlimited";

	getrlimit(RLIMIT_MEMLOCK, &rl);
	if (rl.rlim_cur != RLIM_INFINITY)
		tc_fmt_bytes(lim, sizeof(lim), rl.rlim_cur);
	tc_fmt_bytes(want, sizeof(want), len);
	tc_fmt_bytes(cap, sizeof(cap), info->max_bytes);
	tc_fmt_bytes(held, sizeof(held), info->pool_bytes);
	snprintf(pool->reason, sizeof(pool->reason),
		 "ALLOC of %s: ENOMEM: module cap (max_pool_mb) %s with %s held, "
		 "memlock rlimit %s%s, or no free 2 MiB blocks", want, cap, held, lim,
		 tc_have_cap_ipc_lock() ? " (not applied: CAP_IPC_LOCK)" : "");
}

static int module_map(struct tencache_pool *pool)
{
	struct tencache *tc = pool->tc;
	struct tencache_info info = { .size = sizeof(info) };
	uint64_t off;
	unsigned i;
	char *va;
	int ret;

	pool->fd = open(tc->p.dev_path, O_RDWR | O_CLOEXEC);
	if (pool->fd < 0) {
		ret = -errno;
		snprintf(pool->reason, sizeof(pool->reason), "%s: %s", tc->p.dev_path,
			 strerror(errno));
		return ret == -EACCES || ret == -EPERM || ret == -ENXIO ? -ENODEV : ret;
	}
	if (ioctl(pool->fd, TENCACHE_INFO, &info)) {
		snprintf(pool->reason, sizeof(pool->reason), "INFO: %s", strerror(errno));
		ret = -ENODEV;
		goto err_close;
	}
	if (info.abi_version != TENCACHE_ABI_VERSION || !(info.features & TENCACHE_FEAT_POOL) ||
	    info.block_size != TENCACHE_BLOCK_SIZE) {
		snprintf(pool->reason, sizeof(pool->reason),
			 "ABI %u (want %u), features %#llx, block %llu: unusable", info.abi_version,
			 TENCACHE_ABI_VERSION, (unsigned long long)info.features,
			 (unsigned long long)info.block_size);
		ret = -EOPNOTSUPP;
		goto err_close;
	}
	pool->module_features = info.features;

	/* Reserve a 2 MiB-aligned range, then map each buffer into it. */
	pool->map_len = pool->size + TC_2M;
	pool->map_base = mmap(NULL, pool->map_len, PROT_NONE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (pool->map_base == MAP_FAILED) {
		pool->map_base = NULL;
		ret = -ENOMEM;
		snprintf(pool->reason, sizeof(pool->reason), "no address space");
		goto err_close;
	}
	pool->base = (char *)TC_ALIGN_UP((uintptr_t)pool->map_base, TC_2M);

	for (i = 0, off = 0; i < pool->nr_segs; i++, off += pool->seg_size) {
		uint64_t len = pool->size - off < pool->seg_size ? pool->size - off : pool->seg_size;
		struct tencache_alloc a = {
			.size = sizeof(a),
			.length = len,
			.node = pool->node >= 0 ? (__u32)pool->node : TENCACHE_NODE_ANY,
		};

		if (ioctl(pool->fd, TENCACHE_ALLOC, &a)) {
			ret = -errno;
			if (ret == -ENOMEM)
				explain_enomem(pool, &info, len);
			else
				snprintf(pool->reason, sizeof(pool->reason), "ALLOC: %s",
					 strerror(errno));
			goto err_unmap;
		}
		pool->segs[i].handle = a.handle;
		va = mmap(pool->base + off, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			  pool->fd, a.mmap_offset);
		if (va == MAP_FAILED) {
			ret = -errno;
			snprintf(pool->reason, sizeof(pool->reason), "mmap: %s", strerror(errno));
			goto err_unmap;
		}
	}
	/* Module memory is zeroed and pinned; fault the mappings in now. */
	tc_prefault(pool->base, pool->size);
	return 0;

err_unmap:
	module_unmap(pool);
	return ret;
err_close:
	close(pool->fd);
	pool->fd = -1;
	return ret;
}

const struct tc_pool_ops tc_pool_module_ops = {
	.name = "module",
	.map = module_map,
	.unmap = module_unmap,
};
