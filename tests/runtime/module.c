/* module.c - the module-backed pool and staging (tencache.ko). Skips when
 * /dev/tencache is absent; runs inside the QEMU VM as a static binary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "test.h"

#define MiB (1ULL << 20)

static int64_t do_io(struct tencache_stage *s, int write, int fd, void *buf, uint64_t len,
		     uint64_t off, unsigned flags)
{
	struct tencache_stage_cqe cqe = { 0 };
	int ret = write ? tencache_stage_write(s, fd, buf, len, off, 7, flags)
			: tencache_stage_read(s, fd, buf, len, off, 7, flags);

	if (ret)
		return 1000 + ret;
	T_CHECK(tencache_stage_submit(s) >= 0, "submit");
	if (tencache_stage_wait(s, 1, &cqe, 1, 10000000000ULL) != 1)
		return 2000;
	T_EQ(cqe.user_data, 7);
	return cqe.res;
}

int main(int argc, char **argv)
{
	struct tencache_params p = {
		.flags = TENCACHE_F_NO_CUDA, .pool_backend = TENCACHE_POOL_MODULE,
		.segment_size = 2 * MiB, .io_size = 256 * 1024,
	};
	const char *dir = argc > 1 ? argv[1] : (getenv("TEST_DIR") ? getenv("TEST_DIR") : "/var/tmp");
	struct tencache *tc;
	struct tencache_pool *pool;
	struct tencache_pool_info info;
	struct tencache_stage *s;
	char path[300], *a;
	uint64_t i;
	int fd, ret;

	if (access("/dev/tencache", F_OK)) {
		printf("/dev/tencache absent (tencache.ko not loaded)\n");
		return T_EXIT_SKIP;
	}
	T_EQ(tencache_init(&tc, &p), 0);
	ret = tencache_pool_create(tc, &pool, 8 * MiB, NULL, 0);
	T_EQ(ret, 0);
	if (ret)
		return T_EXIT_FAIL;
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.backend, TENCACHE_POOL_MODULE);
	T_EQ(info.nr_segments, 4);
	T_CHECK(((uintptr_t)info.base & (2 * MiB - 1)) == 0, "base 2 MiB aligned");
	/* The four buffers read as one zeroed, writable range. */
	a = info.base;
	for (i = 0; i < 8 * MiB; i += 4096)
		T_CHECK(a[i] == 0, "module memory is zeroed");
	for (i = 0; i < 8 * MiB; i += 8)
		*(uint64_t *)(a + i) = i * 31;

	ret = tencache_stage_create(tc, pool, &s);
	if (ret == -EOPNOTSUPP) {
		printf("module without staging I/O: pool part passed\n");
		tencache_pool_destroy(pool);
		tencache_exit(tc);
		return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
	}
	T_EQ(ret, 0);
	T_EQ(tencache_stage_backend(s), TENCACHE_STAGE_MODULE);
	snprintf(path, sizeof(path), "%s/tencache-module-%d", dir, getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0, "open %s", path);
	/* 6 MiB from offset 1 MiB: chunks cross buffer (segment) boundaries. */
	T_EQ(do_io(s, 1, fd, a + MiB, 6 * MiB, 0, 0), 6 * MiB);
	memset(a, 0, 8 * MiB);
	T_EQ(do_io(s, 0, fd, a + MiB, 6 * MiB, 0, 0), 6 * MiB);
	for (i = 0; i < 6 * MiB; i += 8)
		if (*(uint64_t *)(a + MiB + i) != (MiB + i) * 31)
			break;
	T_EQ(i, 6 * MiB);
	/* Short: the file has 6 MiB. */
	T_EQ(do_io(s, 0, fd, a, 2 * MiB, 5 * MiB, 0), -EIO);
	T_EQ(do_io(s, 0, fd, a, 2 * MiB, 5 * MiB, TENCACHE_STAGE_SHORT_OK), MiB);
	/* Errors from the module come back in the completion. */
	T_EQ(do_io(s, 0, 1000, a, 4096, 0, 0), -EBADF);
	T_EQ(do_io(s, 0, fd, a, 4096, 100, 0), -EINVAL);
	close(fd);
	unlink(path);
	tencache_stage_destroy(s);
	tencache_pool_destroy(pool);
	tencache_exit(tc);
	return t_exit();
}
