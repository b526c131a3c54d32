// SPDX-License-Identifier: GPL-2.0
/*
 * staging_test.c - kselftest for tencache.ko's staging I/O (SUBMIT/REAP,
 * poll): round trips to the raw NVMe disk and to a file on ext4, plain
 * pread/pwrite interop, EOF and device-end handling, every bad input, the
 * in-flight cap, FREE while busy, kill -9 with I/O in flight, fault
 * injection and two processes at once. Runs in the QEMU guest.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "tc_test.h"

#define PARAM "/sys/module/tencache/parameters/"

static int set_param(const char *name, const char *val)
{
	char path[128];
	int fd, ret;

	snprintf(path, sizeof(path), PARAM "%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ret = write(fd, val, strlen(val)) < 0 ? -errno : 0;
	close(fd);
	return ret;
}

static int submit(int fd, struct tencache_io *ios, uint32_t nr, uint32_t *queued)
{
	struct tencache_submit s = {
		.size = sizeof(s), .nr = nr, .entry_size = sizeof(*ios),
		.ios = (uintptr_t)ios,
	};
	int ret = ioctl(fd, TENCACHE_SUBMIT, &s);

	if (queued)
		*queued = ret ? 0 : s.queued;
	return ret;
}

/* Reap exactly @n completions (waiting up to 30 s); returns how many came. */
static int reap(int fd, struct tencache_cqe *cqes, uint32_t n)
{
	uint32_t got = 0;

	while (got < n) {
		struct tencache_reap r = {
			.size = sizeof(r), .min_nr = n - got,
			.max_nr = n - got, .timeout_ns = 30ULL * 1000000000,
			.cqes = (uintptr_t)(cqes + got), .entry_size = sizeof(*cqes),
		};

		if (ioctl(fd, TENCACHE_REAP, &r) || !r.nr)
			break;
		got += r.nr;
	}
	return got;
}

static struct tencache_io rw(uint32_t op, int fd, uint32_t handle, uint64_t boff,
			     uint64_t foff, uint64_t len, uint64_t ud)
{
	return (struct tencache_io){ .op = op, .fd = fd, .handle = handle,
		.buf_offset = boff, .file_offset = foff, .length = len,
		.user_data = ud };
}

static void fill(unsigned char *p, uint64_t len, unsigned int seed)
{
	uint64_t i;

	for (i = 0; i < len; i += 8)
		*(uint64_t *)(p + i) = (i + seed) * 0x9e3779b97f4a7c15ULL;
}

FIXTURE(stage) {
	int fd;			/* /dev/tencache */
	int tfd;		/* the target: raw NVMe or a file on ext4 */
	struct tencache_alloc src, dst;
	unsigned char *s, *d;
	long long used0;
};

FIXTURE_VARIANT(stage) {
	const char *target;	/* "nvme" or "ext4" */
};

FIXTURE_VARIANT_ADD(stage, nvme) { .target = "nvme" };
FIXTURE_VARIANT_ADD(stage, ext4) { .target = "ext4" };

#define BUF (64 * MiB)

FIXTURE_SETUP(stage)
{
	const char *nvme = getenv("TENCACHE_NVME"), *dir = getenv("TENCACHE_EXT4");
	char path[256];

	self->fd = open(TENCACHE_DEV_PATH, O_RDWR);
	if (self->fd < 0)
		SKIP(return, "%s: %s", TENCACHE_DEV_PATH, strerror(errno));
	if (!strcmp(variant->target, "nvme")) {
		if (!nvme)
			SKIP(return, "TENCACHE_NVME not set");
		self->tfd = open(nvme, O_RDWR);
	} else {
		if (!dir)
			SKIP(return, "TENCACHE_EXT4 not set");
		snprintf(path, sizeof(path), "%s/stage.bin", dir);
		self->tfd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		ASSERT_EQ(0, ftruncate(self->tfd, 2 * BUF));	/* not extending */
	}
	ASSERT_LE(0, self->tfd);
	self->used0 = tc_used();
	ASSERT_EQ(0, tc_alloc(self->fd, BUF, TENCACHE_NODE_ANY, 0, &self->src));
	ASSERT_EQ(0, tc_alloc(self->fd, BUF, TENCACHE_NODE_ANY, 0, &self->dst));
	self->s = tc_map(self->fd, &self->src);
	self->d = tc_map(self->fd, &self->dst);
	ASSERT_NE(MAP_FAILED, self->s);
	ASSERT_NE(MAP_FAILED, self->d);
}

FIXTURE_TEARDOWN(stage)
{
	if (self->fd < 0)
		return;
	close(self->fd);
	close(self->tfd);
}

/* Write [0,len) of src at @foff in @parts descriptors, read it back into dst. */
static int roundtrip(struct __test_metadata *_metadata, FIXTURE_DATA(stage) *self,
		     uint64_t len, uint64_t foff, uint32_t parts)
{
	struct tencache_io ios[8];
	struct tencache_cqe cqes[8];
	uint64_t part = len / parts;
	uint32_t i, queued;
	int ok = 1;

	fill(self->s, len, (unsigned int)len);
	memset(self->d, 0, len);
	for (i = 0; i < parts; i++)
		ios[i] = rw(TENCACHE_OP_WRITE, self->tfd, self->src.handle,
			    i * part, foff + i * part, part, 100 + i);
	EXPECT_EQ(0, submit(self->fd, ios, parts, &queued));
	EXPECT_EQ(parts, queued);
	EXPECT_EQ(parts, reap(self->fd, cqes, parts));
	for (i = 0; i < parts; i++) {
		EXPECT_EQ(part, cqes[i].result);
		EXPECT_EQ(0, cqes[i].flags);
		ok &= cqes[i].result == (int64_t)part;
	}
	for (i = 0; i < parts; i++)
		ios[i] = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
			    i * part, foff + i * part, part, 200 + i);
	EXPECT_EQ(0, submit(self->fd, ios, parts, &queued));
	EXPECT_EQ(parts, reap(self->fd, cqes, parts));
	for (i = 0; i < parts; i++) {
		EXPECT_EQ(part, cqes[i].result);
		EXPECT_LE(200, cqes[i].user_data);
		EXPECT_GT(200 + parts, cqes[i].user_data);
	}
	EXPECT_EQ(0, memcmp(self->s, self->d, len));
	return ok && !memcmp(self->s, self->d, len);
}

TEST_F(stage, roundtrip_sizes)
{
	static const struct { uint64_t len, foff; uint32_t parts; } cases[] = {
		{ 512, 0, 1 }, { 4096, 512, 1 }, { 3 * 512, 1024 * 1024 - 512, 3 },
		{ 1 * MiB, 4 * MiB, 4 }, { 2 * MiB + 8192, 6 * MiB + 4096, 2 },
		{ 8 * MiB, 16 * MiB, 8 }, { 64 * MiB, 64 * MiB, 8 },
	};
	long long r0 = tc_sysfs("io_reads"), w0 = tc_sysfs("io_writes");
	long long rb0 = tc_sysfs("io_read_bytes");
	uint64_t bytes = 0;
	unsigned int i, nios = 0;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		TH_LOG("%s: %llu bytes at %llu in %u parts", variant->target,
		       (unsigned long long)cases[i].len,
		       (unsigned long long)cases[i].foff, cases[i].parts);
		ASSERT_TRUE(roundtrip(_metadata, self, cases[i].len, cases[i].foff,
				      cases[i].parts));
		bytes += cases[i].len;
		nios += cases[i].parts;
	}
	EXPECT_EQ(r0 + nios, tc_sysfs("io_reads"));
	EXPECT_EQ(w0 + nios, tc_sysfs("io_writes"));
	EXPECT_EQ(rb0 + (long long)bytes, tc_sysfs("io_read_bytes"));
}

/* The module's writes are plain bytes on disk, and the other way round. */
TEST_F(stage, pread_pwrite_interop)
{
	struct tencache_io io;
	struct tencache_cqe cqe;
	unsigned char *tmp;
	int dfd;

	ASSERT_EQ(0, posix_memalign((void **)&tmp, 4096, 4 * MiB));
	/* a second, O_DIRECT descriptor: no page cache between the two paths */
	{
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", self->tfd);
		dfd = open(path, O_RDWR | O_DIRECT);
	}
	ASSERT_LE(0, dfd);
	fill(self->s, 4 * MiB, 77);
	io = rw(TENCACHE_OP_WRITE, self->tfd, self->src.handle, 0, 32 * MiB, 4 * MiB, 1);
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	ASSERT_EQ(1, reap(self->fd, &cqe, 1));
	ASSERT_EQ(4 * MiB, cqe.result);
	ASSERT_EQ(4 * MiB, pread(dfd, tmp, 4 * MiB, 32 * MiB));
	EXPECT_EQ(0, memcmp(tmp, self->s, 4 * MiB));

	fill(tmp, 4 * MiB, 99);
	ASSERT_EQ(4 * MiB, pwrite(dfd, tmp, 4 * MiB, 40 * MiB));
	io = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle, 0, 40 * MiB, 4 * MiB, 2);
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	ASSERT_EQ(1, reap(self->fd, &cqe, 1));
	ASSERT_EQ(4 * MiB, cqe.result);
	EXPECT_EQ(0, memcmp(tmp, self->d, 4 * MiB));
	close(dfd);
	free(tmp);
}

TEST_F(stage, fsync_and_fdatasync)
{
	struct tencache_io ios[3] = {
		rw(TENCACHE_OP_WRITE, self->tfd, self->src.handle, 0, 0, MiB, 1),
		{ .op = TENCACHE_OP_FDATASYNC, .fd = self->tfd, .user_data = 2 },
		{ .op = TENCACHE_OP_FSYNC, .fd = self->tfd, .user_data = 3 },
	};
	struct tencache_cqe cqes[3];
	long long syncs = tc_sysfs("io_syncs");
	int i;

	ASSERT_EQ(0, submit(self->fd, ios, 3, NULL));
	ASSERT_EQ(3, reap(self->fd, cqes, 3));
	for (i = 0; i < 3; i++)
		EXPECT_EQ(cqes[i].user_data == 1 ? (int64_t)MiB : 0, cqes[i].result);
	EXPECT_EQ(syncs + 2, tc_sysfs("io_syncs"));
}

/* Reads at and across the end: short, flagged, never an error. */
TEST_F(stage, eof_and_device_end)
{
	struct tencache_io io;
	struct tencache_cqe cqe;
	uint64_t end;

	if (!strcmp(variant->target, "ext4")) {
		ASSERT_EQ(0, ftruncate(self->tfd, MiB + 4096));
		end = MiB + 4096;
	} else {
		ASSERT_EQ(0, ioctl(self->tfd, _IOR(0x12, 114, size_t), &end)); /* BLKGETSIZE64 */
	}
	io = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle, 0, end - 4096, 2 * MiB, 1);
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	ASSERT_EQ(1, reap(self->fd, &cqe, 1));
	EXPECT_EQ(4096, cqe.result);
	EXPECT_EQ(TENCACHE_CQE_SHORT, cqe.flags);
	io.file_offset = end;
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	ASSERT_EQ(1, reap(self->fd, &cqe, 1));
	EXPECT_EQ(0, cqe.result);
	EXPECT_EQ(TENCACHE_CQE_SHORT, cqe.flags);
	if (!strcmp(variant->target, "nvme")) {
		/* a write past the end of the device fails in its completion */
		io = rw(TENCACHE_OP_WRITE, self->tfd, self->src.handle, 0, end, 4096, 2);
		ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
		ASSERT_EQ(1, reap(self->fd, &cqe, 1));
		EXPECT_EQ(-ENOSPC, cqe.result);
	}
}

TEST_F(stage, submit_bad_input)
{
	struct tencache_io io, good = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
					 0, 0, 4096, 1);
	char path[256];
	int pfd[2], rofd, wofd, tmpfd, fd2;
	struct tencache_alloc other;

#define BAD(err, ...) do { io = good; __VA_ARGS__; \
		EXPECT_ERRNO(err, submit(self->fd, &io, 1, NULL)); } while (0)
	BAD(EINVAL, io.op = 0);
	BAD(EINVAL, io.op = 99);
	BAD(EINVAL, io.flags = 1);
	BAD(EBADF, io.fd = 9999);
	BAD(EBADF, io.fd = (uint32_t)-1);
	BAD(EOPNOTSUPP, io.fd = self->fd);		/* a char device */
	ASSERT_EQ(0, pipe(pfd));
	BAD(EOPNOTSUPP, io.fd = pfd[0]);
	tmpfd = open("/tmp/tencache-tmpfs.bin", O_RDWR | O_CREAT, 0600);
	ASSERT_LE(0, tmpfd);
	ASSERT_EQ(0, ftruncate(tmpfd, MiB));
	BAD(EOPNOTSUPP, io.fd = tmpfd);			/* tmpfs: no direct I/O */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", self->tfd);
	rofd = open(path, O_RDONLY);
	wofd = open(path, O_WRONLY);
	ASSERT_LE(0, rofd);
	ASSERT_LE(0, wofd);
	BAD(EBADF, io.fd = wofd);			/* read needs FMODE_READ */
	BAD(EBADF, io.op = TENCACHE_OP_WRITE; io.fd = rofd);
	BAD(EINVAL, io.file_offset = 100);
	BAD(EINVAL, io.buf_offset = 256);
	BAD(EINVAL, io.length = 1000);
	BAD(EINVAL, io.length = 0);
	BAD(EINVAL, io.buf_offset = BUF - 4096; io.length = 8192);
	BAD(EINVAL, io.buf_offset = BUF);
	BAD(EINVAL, io.buf_offset = UINT64_MAX - 511);
	BAD(EINVAL, io.file_offset = INT64_MAX - 511);
	BAD(ENOENT, io.handle = 0);
	BAD(ENOENT, io.handle = 777);
	fd2 = open(TENCACHE_DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, tc_alloc(fd2, 2 * MiB, TENCACHE_NODE_ANY, 0, &other));
	if (other.handle != self->src.handle && other.handle != self->dst.handle)
		BAD(ENOENT, io.handle = other.handle);	/* another file's buffer */
	close(fd2);
	BAD(EINVAL, io.op = TENCACHE_OP_FSYNC);		/* buffer fields set */
	BAD(EINVAL, io.op = TENCACHE_OP_FDATASYNC; io.handle = 0; io.buf_offset = 0;
	    io.file_offset = 0; io.length = 512);
#undef BAD
	{
		struct tencache_submit s = { .size = sizeof(s), .nr = 1,
			.entry_size = sizeof(io), .ios = (uintptr_t)&good };

		s.flags = 1;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.flags = 0;
		s.__reserved = 1;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.__reserved = 0;
		s.nr = 0;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.nr = TENCACHE_BATCH_MAX + 1;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.nr = 1;
		s.entry_size = sizeof(io) - 8;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.entry_size = sizeof(io) + 4;
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		s.entry_size = sizeof(io);
		s.ios = 8;
		EXPECT_ERRNO(EFAULT, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		/* a larger entry with a non-zero tail */
		{
			struct { struct tencache_io io; uint64_t tail; } big = { good, 1 };

			s.ios = (uintptr_t)&big;
			s.entry_size = sizeof(big);
			EXPECT_ERRNO(E2BIG, ioctl(self->fd, TENCACHE_SUBMIT, &s));
		}
	}
	EXPECT_EQ(0, tc_sysfs("io_inflight"));
	close(pfd[0]);
	close(pfd[1]);
	close(rofd);
	close(wofd);
	close(tmpfd);
	unlink("/tmp/tencache-tmpfs.bin");
}

TEST_F(stage, reap_bad_input)
{
	struct tencache_cqe cqe;
	struct tencache_io io = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
				   0, 0, 4096, 42);
	struct tencache_reap r = { .size = sizeof(r), .max_nr = 1,
				   .cqes = (uintptr_t)&cqe, .entry_size = sizeof(cqe) };

	r.flags = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_REAP, &r));
	r.flags = 0;
	r.max_nr = 0;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_REAP, &r));
	r.max_nr = TENCACHE_BATCH_MAX + 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_REAP, &r));
	r.max_nr = 1;
	r.min_nr = 2;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_REAP, &r));
	r.min_nr = 0;
	r.entry_size = sizeof(cqe) + 8;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_REAP, &r));
	r.entry_size = sizeof(cqe);
	/* nothing in flight: min_nr 1 returns at once with nothing */
	r.min_nr = 1;
	ASSERT_EQ(0, ioctl(self->fd, TENCACHE_REAP, &r));
	EXPECT_EQ(0, r.nr);
	/* a bad cqe pointer loses nothing: the completion is still there */
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	r.cqes = 8;
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, TENCACHE_REAP, &r));
	r.cqes = (uintptr_t)&cqe;
	ASSERT_EQ(0, ioctl(self->fd, TENCACHE_REAP, &r));
	EXPECT_EQ(1, r.nr);
	EXPECT_EQ(42, cqe.user_data);
	EXPECT_EQ(4096, cqe.result);
}

/* The batch stops at the first bad request; what came before is queued. */
TEST_F(stage, partial_batch)
{
	struct tencache_io ios[3] = {
		rw(TENCACHE_OP_READ, self->tfd, self->dst.handle, 0, 0, 4096, 1),
		rw(TENCACHE_OP_READ, self->tfd, 999, 0, 0, 4096, 2),
		rw(TENCACHE_OP_READ, self->tfd, self->dst.handle, 4096, 0, 4096, 3),
	};
	struct tencache_cqe cqes[3];
	uint32_t queued;

	ASSERT_EQ(0, submit(self->fd, ios, 3, &queued));
	EXPECT_EQ(1, queued);
	EXPECT_EQ(1, reap(self->fd, cqes, 1));
	EXPECT_EQ(1, cqes[0].user_data);
}

TEST_F(stage, inflight_cap)
{
	struct tencache_io ios[6];
	struct tencache_cqe cqes[6];
	uint32_t queued;
	int i;

	ASSERT_EQ(0, set_param("max_inflight", "4"));
	for (i = 0; i < 6; i++)
		ios[i] = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
			    i * MiB, i * MiB, MiB, i);
	EXPECT_EQ(0, submit(self->fd, ios, 6, &queued));
	EXPECT_EQ(4, queued);
	/* submitted and not yet reaped count, completed or not */
	EXPECT_ERRNO(EAGAIN, submit(self->fd, &ios[4], 1, NULL));
	EXPECT_EQ(4, reap(self->fd, cqes, 4));
	EXPECT_EQ(0, submit(self->fd, &ios[4], 2, &queued));
	EXPECT_EQ(2, queued);
	EXPECT_EQ(2, reap(self->fd, cqes, 2));
	ASSERT_EQ(0, set_param("max_inflight", "256"));
}

TEST_F(stage, free_busy)
{
	struct tencache_io io = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
				   0, 0, 4 * MiB, 1);
	struct tencache_cqe cqe;

	ASSERT_EQ(0, set_param("delay_ms", "300"));	/* keep it in flight */
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	EXPECT_ERRNO(EBUSY, tc_free(self->fd, self->dst.handle));
	EXPECT_EQ(1, tc_sysfs("io_inflight"));
	ASSERT_EQ(0, set_param("delay_ms", "0"));
	EXPECT_EQ(1, reap(self->fd, &cqe, 1));
	EXPECT_EQ(4 * MiB, cqe.result);
	EXPECT_EQ(0, munmap(self->d, BUF));
	EXPECT_EQ(0, tc_free(self->fd, self->dst.handle));
	EXPECT_EQ(self->used0 + BUF, tc_used());
}

TEST_F(stage, kill_with_io_in_flight)
{
	long long live = tc_sysfs("buffers_live");
	int pipefd[2], status, i;
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(pipefd));
	ASSERT_EQ(0, set_param("delay_ms", "200"));	/* all 32 still in flight */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct tencache_io ios[32];
		struct tencache_alloc a;
		int fd = open(TENCACHE_DEV_PATH, O_RDWR);
		uint32_t queued;

		if (fd < 0 || tc_alloc(fd, 64 * MiB, TENCACHE_NODE_ANY, 0, &a))
			_exit(1);
		for (i = 0; i < 32; i++)
			ios[i] = rw(i & 1 ? TENCACHE_OP_WRITE : TENCACHE_OP_READ,
				    self->tfd, a.handle, i * 2 * MiB, i * 2 * MiB,
				    2 * MiB, i);
		if (submit(fd, ios, 32, &queued) || queued != 32)
			_exit(2);
		write(pipefd[1], "s", 1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	EXPECT_EQ(32, tc_sysfs("io_inflight"));
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_EQ(0, set_param("delay_ms", "0"));
	EXPECT_TRUE(WIFSIGNALED(status));
	for (i = 0; i < 500 && tc_sysfs("buffers_live") != live; i++)
		usleep(10000);
	EXPECT_EQ(live, tc_sysfs("buffers_live"));
	EXPECT_EQ(0, tc_sysfs("io_inflight"));
	EXPECT_EQ(self->used0 + 2 * BUF, tc_used());
	close(pipefd[0]);
}

TEST_F(stage, fault_injection)
{
	struct tencache_io ios[5];
	struct tencache_cqe cqes[5];
	long long errs = tc_sysfs("io_errors");
	int i;

	for (i = 0; i < 5; i++)
		ios[i] = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
			    i * MiB, i * MiB, MiB, i);
	ASSERT_EQ(0, set_param("fail_nth", "3"));
	ASSERT_EQ(0, submit(self->fd, ios, 5, NULL));
	ASSERT_EQ(5, reap(self->fd, cqes, 5));
	for (i = 0; i < 5; i++)
		EXPECT_EQ(cqes[i].user_data == 2 ? -EIO : (int64_t)MiB, cqes[i].result);
	EXPECT_EQ(errs + 1, tc_sysfs("io_errors"));
	/* it fired once and disarmed itself */
	ASSERT_EQ(0, submit(self->fd, ios, 5, NULL));
	ASSERT_EQ(5, reap(self->fd, cqes, 5));
	for (i = 0; i < 5; i++)
		EXPECT_EQ(MiB, cqes[i].result);
}

TEST_F(stage, poll_reports_completions)
{
	struct pollfd pfd = { .fd = self->fd, .events = POLLIN };
	struct tencache_io io = rw(TENCACHE_OP_READ, self->tfd, self->dst.handle,
				   0, 0, MiB, 5);
	struct tencache_cqe cqe;

	EXPECT_EQ(0, poll(&pfd, 1, 0));
	ASSERT_EQ(0, submit(self->fd, &io, 1, NULL));
	ASSERT_EQ(1, poll(&pfd, 1, 30000));
	EXPECT_TRUE(pfd.revents & POLLIN);
	ASSERT_EQ(1, reap(self->fd, &cqe, 1));
	EXPECT_EQ(0, poll(&pfd, 1, 0));
}

TEST_F(stage, latency_histogram)
{
	char line[1024], name[16];
	int lines = 0, fields, off;
	unsigned long long v;
	FILE *f = fopen(TC_SYSFS "io_latency_hist", "r");

	ASSERT_NE(NULL, f);
	while (fgets(line, sizeof(line), f)) {
		char *p = line;

		ASSERT_EQ(1, sscanf(p, "%15s%n", name, &off));
		p += off;
		for (fields = 0; sscanf(p, "%llu%n", &v, &off) == 1; fields++)
			p += off;
		EXPECT_EQ(24, fields);
		lines++;
	}
	fclose(f);
	EXPECT_EQ(3, lines);
}

/* Two processes stage at once on separate buffers and regions. */
TEST_F(stage, two_processes)
{
	pid_t pids[2];
	int i, status;

	for (i = 0; i < 2; i++) {
		pids[i] = fork();
		ASSERT_LE(0, pids[i]);
		if (pids[i] == 0) {
			struct tencache_io ios[8];
			struct tencache_cqe cqes[8];
			struct tencache_alloc a;
			unsigned char *p;
			uint64_t base = (uint64_t)i * 16 * MiB;
			int fd = open(TENCACHE_DEV_PATH, O_RDWR), j, round;

			if (fd < 0 || tc_alloc(fd, 16 * MiB, TENCACHE_NODE_ANY, 0, &a))
				_exit(1);
			p = tc_map(fd, &a);
			if (p == MAP_FAILED)
				_exit(2);
			for (round = 0; round < 4; round++) {
				fill(p, 8 * MiB, i * 1000 + round);
				for (j = 0; j < 8; j++)
					ios[j] = rw(TENCACHE_OP_WRITE, self->tfd, a.handle,
						    j * MiB, base + j * MiB, MiB, j);
				if (submit(fd, ios, 8, NULL) || reap(fd, cqes, 8) != 8)
					_exit(3);
				for (j = 0; j < 8; j++)
					ios[j] = rw(TENCACHE_OP_READ, self->tfd, a.handle,
						    8 * MiB + j * MiB, base + j * MiB, MiB, j);
				if (submit(fd, ios, 8, NULL) || reap(fd, cqes, 8) != 8)
					_exit(4);
				for (j = 0; j < 8; j++)
					if (cqes[j].result != (int64_t)MiB)
						_exit(5);
				if (memcmp(p, p + 8 * MiB, 8 * MiB))
					_exit(6);
			}
			_exit(0);
		}
	}
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(pids[i], waitpid(pids[i], &status, 0));
		EXPECT_TRUE(WIFEXITED(status));
		EXPECT_EQ(0, WEXITSTATUS(status));
	}
}

TEST_HARNESS_MAIN
