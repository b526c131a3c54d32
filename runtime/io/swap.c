/*
 * swap.c - a swap file: one preallocated (fallocate'd) file opened O_DIRECT,
 * with an arena of extents aligned to the file system's block size (at least
 * 4096) over it, so that every extent can be staged with direct I/O.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

struct tencache_swap {
	struct tencache *tc;
	int fd;
	char *path;		/* set when we created the file (unlinked at destroy) */
	struct tencache_arena *arena;
};

TENCACHE_API int tencache_swap_create(struct tencache *tc, struct tencache_swap **swp,
				      const char *path, uint64_t bytes,
				      const struct tencache_size_count *hist, unsigned nr)
{
	struct tencache_swap *sw;
	struct stat st;
	uint64_t align;
	int created, ret;

	if (!tc || !swp || !path || !bytes)
		return -EINVAL;
	sw = calloc(1, sizeof(*sw));
	if (!sw)
		return -ENOMEM;
	sw->tc = tc;
	created = access(path, F_OK) != 0;
	sw->fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (sw->fd < 0) {
		ret = errno == EINVAL ? -EOPNOTSUPP : -errno;
		tc_err(tc, "swap: open %s with O_DIRECT: %s", path, strerror(errno));
		goto err_free;
	}
	if (created)
		sw->path = strdup(path);
	if (fstat(sw->fd, &st)) {
		ret = -errno;
		goto err_close;
	}
	align = st.st_blksize > 4096 ? (uint64_t)st.st_blksize : 4096;
	bytes = TC_ALIGN_DOWN(bytes, align);
	ret = tencache_arena_create(&sw->arena, bytes, align, hist, nr);
	if (ret)
		goto err_close;
	ret = posix_fallocate(sw->fd, 0, bytes);
	if (ret) {
		tc_err(tc, "swap: fallocate %s to %llu bytes: %s", path,
		       (unsigned long long)bytes, strerror(ret));
		ret = ret == EINVAL || ret == EOPNOTSUPP ? -EOPNOTSUPP : -ret;
		goto err_arena;
	}
	tc_info(tc, "swap: %s, %llu MiB, %llu-byte extents", path,
		(unsigned long long)bytes >> 20, (unsigned long long)align);
	*swp = sw;
	return 0;

err_arena:
	tencache_arena_destroy(sw->arena);
err_close:
	close(sw->fd);
	if (sw->path)
		unlink(sw->path);
	free(sw->path);
err_free:
	free(sw);
	return ret;
}

TENCACHE_API void tencache_swap_destroy(struct tencache_swap *sw)
{
	if (!sw)
		return;
	close(sw->fd);
	if (sw->path)
		unlink(sw->path);
	free(sw->path);
	tencache_arena_destroy(sw->arena);
	free(sw);
}

TENCACHE_API int tencache_swap_fd(struct tencache_swap *sw)
{
	return sw ? sw->fd : -EINVAL;
}

TENCACHE_API int tencache_swap_alloc(struct tencache_swap *sw, uint64_t size, uint64_t *off)
{
	return sw ? tencache_arena_alloc(sw->arena, size, off) : -EINVAL;
}

TENCACHE_API int tencache_swap_free(struct tencache_swap *sw, uint64_t off)
{
	return sw ? tencache_arena_free(sw->arena, off) : -EINVAL;
}

TENCACHE_API struct tencache_arena *tencache_swap_arena(struct tencache_swap *sw)
{
	return sw ? sw->arena : NULL;
}
