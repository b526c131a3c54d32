/* stage_uring.c - the io_uring staging backend on a real file with O_DIRECT:
 * round trips across pool segments, a full queue, every error completion,
 * and short files. Skips when the file system refuses O_DIRECT. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "test.h"

#define KiB 1024ULL
#define MiB (1024 * KiB)

static char dir[256] = "/var/tmp";
static int warnings;

static void log_hook(void *arg, int level, const char *msg)
{
	(void)arg;
	if (level <= TENCACHE_LOG_WARN) {
		warnings++;
		fprintf(stderr, "log: %s\n", msg);
	}
}

static int wait_one(struct tencache_stage *s, struct tencache_stage_cqe *cqe)
{
	int ret;

	T_EQ(tencache_stage_submit(s) >= 0, 1);
	ret = tencache_stage_wait(s, 1, cqe, 1, 5000000000ULL);
	T_EQ(ret, 1);
	return ret == 1 ? 0 : -1;
}

static int64_t do_io(struct tencache_stage *s, int write, int fd, void *buf, uint64_t len,
		     uint64_t off, unsigned flags)
{
	struct tencache_stage_cqe cqe = { 0 };
	int ret = write ? tencache_stage_write(s, fd, buf, len, off, 42, flags)
			: tencache_stage_read(s, fd, buf, len, off, 42, flags);

	if (ret)
		return 1000 + ret;	/* distinct from any completion */
	if (wait_one(s, &cqe))
		return 2000;
	T_EQ(cqe.user_data, 42);
	return cqe.res;
}

static void fill(char *p, uint64_t len, unsigned seed)
{
	for (uint64_t i = 0; i < len; i += 8)
		*(uint64_t *)(p + i) = (i + seed) * 0x9e3779b97f4a7c15ULL;
}

static int check(const char *p, uint64_t len, unsigned seed)
{
	for (uint64_t i = 0; i < len; i += 8)
		if (*(const uint64_t *)(p + i) != (i + seed) * 0x9e3779b97f4a7c15ULL)
			return 0;
	return 1;
}

int main(void)
{
	struct tencache_params p = {
		.log_fn = log_hook, .flags = TENCACHE_F_NO_CUDA,
		.pool_backend = TENCACHE_POOL_THP, .stage_backend = TENCACHE_STAGE_URING,
		.segment_size = 4 * MiB, .io_size = 256 * KiB, .queue_depth = 8,
	};
	struct tencache_stage_cqe cqes[16];
	struct tencache *tc;
	struct tencache_pool *pool;
	struct tencache_stage *s;
	struct tencache_swap *sw;
	struct tencache_pool_info info;
	char path[300], spath[300], *a, *b, small[4096];
	uint64_t ext;
	int fd, sfd, rofd, ret, i;

	if (getenv("TEST_DIR"))
		snprintf(dir, sizeof(dir), "%s", getenv("TEST_DIR"));
	snprintf(path, sizeof(path), "%s/tencache-stage-%d", dir, getpid());
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd < 0) {
		printf("%s: O_DIRECT not supported here (%s)\n", dir, strerror(errno));
		return T_EXIT_SKIP;
	}
	close(fd);
	unlink(path);

	T_EQ(tencache_init(&tc, &p), 0);
	T_EQ(tencache_pool_create(tc, &pool, 16 * MiB, NULL, 0), 0);
	ret = tencache_stage_create(tc, pool, &s);
	if (ret) {
		printf("io_uring unavailable: %s\n", strerror(-ret));
		return T_EXIT_SKIP;
	}
	T_EQ(tencache_stage_backend(s), TENCACHE_STAGE_URING);
	T_EQ(warnings, 0);	/* the fixed buffers were registered */
	T_EQ(tencache_swap_create(tc, &sw, path, 32 * MiB, NULL, 0), 0);
	fd = tencache_swap_fd(sw);

	/* Round trip of 10 MiB: crosses segments, 40+ chunks through a QD of 8. */
	T_EQ(tencache_pool_alloc(pool, 5 * MiB + 4096, (void **)&b), 0); /* a: chunks cross segments */
	T_EQ(tencache_pool_alloc(pool, 10 * MiB, (void **)&a), 0);
	T_EQ(tencache_swap_alloc(sw, 10 * MiB, &ext), 0);
	fill(a, 10 * MiB, 1);
	T_EQ(do_io(s, 1, fd, a, 10 * MiB, ext, 0), 10 * MiB);
	memset(a, 0, 10 * MiB);
	T_EQ(do_io(s, 0, fd, a, 10 * MiB, ext, 0), 10 * MiB);
	T_CHECK(check(a, 10 * MiB, 1), "10 MiB round trip data");

	/* A full queue of requests, then one more: -EAGAIN; completions all arrive. */
	for (i = 0; i < 8; i++) {
		fill(b + i * 512 * KiB, 512 * KiB, 100 + i);
		T_EQ(tencache_stage_write(s, fd, b + i * 512 * KiB, 512 * KiB,
					  ext + i * 512 * KiB, i, 0), 0);
	}
	T_EQ(tencache_stage_write(s, fd, b, 4096, 0, 99, 0), -EAGAIN);
	T_EQ(tencache_stage_inflight(s), 8);
	T_EQ(tencache_stage_submit(s) > 0, 1);
	T_EQ(tencache_stage_wait(s, 8, cqes, 16, 0), 8);
	for (i = 0; i < 8; i++)
		T_EQ(cqes[i].res, 512 * KiB);
	T_EQ(tencache_stage_inflight(s), 0);
	memset(b, 0, 4 * MiB);
	T_EQ(do_io(s, 0, fd, b, 4 * MiB, ext, 0), 4 * MiB);
	for (i = 0; i < 8; i++)
		T_CHECK(check(b + i * 512 * KiB, 512 * KiB, 100 + i), "piece %d", i);
	/* Nothing in flight: wait returns at once. */
	T_EQ(tencache_stage_wait(s, 1, cqes, 16, 0), 0);

	/* Bad arguments, refused when queued. */
	T_EQ(tencache_stage_read(s, fd, small, 4096, 0, 0, 0), -EFAULT);	/* not pool memory */
	T_EQ(tencache_stage_read(s, fd, a, 0, 0, 0, 0), -EINVAL);
	T_EQ(tencache_stage_read(s, -1, a, 4096, 0, 0, 0), -EINVAL);
	T_EQ(tencache_stage_read(s, fd, a, 4096, 0, 0, 1u << 5), -EINVAL);
	T_EQ(tencache_stage_write(s, fd, a, 4096, 0, 0, TENCACHE_STAGE_SHORT_OK), -EINVAL);
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(tencache_stage_read(s, fd, (char *)info.base + 16 * MiB - 4096, 8192, 0, 0, 0),
	     -EFAULT);						/* runs past the pool */
	T_EQ(tencache_stage_read(NULL, fd, a, 4096, 0, 0, 0), -EINVAL);
	T_EQ(tencache_stage_wait(s, 2, cqes, 1, 0), -EINVAL);
	T_EQ(tencache_stage_wait(s, 0, NULL, 1, 0), -EINVAL);

	/* Errors the kernel reports come back in the completion. */
	T_EQ(do_io(s, 0, 1000, a, 4096, 0, 0), -EBADF);			/* not an fd */
	T_EQ(do_io(s, 0, fd, a, 4096, 100, 0), -EINVAL);		/* unaligned offset */
	T_EQ(do_io(s, 0, fd, a + 100, 4096, 0, 0), -EINVAL);		/* unaligned buffer */
	rofd = open(path, O_RDONLY | O_DIRECT);
	T_CHECK(rofd >= 0, "open read-only");
	T_EQ(do_io(s, 1, rofd, a, 4096, 0, 0), -EBADF);			/* not open for writing */
	close(rofd);

	/* Short files: 12 KiB of data, 1 MiB read. */
	snprintf(spath, sizeof(spath), "%s/tencache-short-%d", dir, getpid());
	sfd = open(spath, O_RDWR | O_CREAT | O_TRUNC, 0600);
	T_CHECK(sfd >= 0, "create %s", spath);
	memset(small, 'x', sizeof(small));
	for (i = 0; i < 3; i++)
		T_EQ(write(sfd, small, sizeof(small)), 4096);
	close(sfd);
	sfd = open(spath, O_RDONLY | O_DIRECT);
	T_CHECK(sfd >= 0, "open O_DIRECT");
	memset(a, 0, MiB);
	T_EQ(do_io(s, 0, sfd, a, MiB, 0, 0), -EIO);			/* unexpected: error */
	T_EQ(do_io(s, 0, sfd, a, MiB, 0, TENCACHE_STAGE_SHORT_OK), 12 * KiB);	/* EOF: fine */
	T_CHECK(a[0] == 'x' && a[12 * KiB - 1] == 'x' && a[12 * KiB] == 0, "short read data");
	T_EQ(do_io(s, 0, sfd, a, MiB, 1 * MiB, TENCACHE_STAGE_SHORT_OK), 0);	/* past EOF */
	close(sfd);
	unlink(spath);

	tencache_stage_destroy(s);
	tencache_swap_destroy(sw);
	T_CHECK(access(path, F_OK) != 0, "the swap file we created is removed");
	tencache_pool_destroy(pool);
	tencache_exit(tc);
	return t_exit();
}
