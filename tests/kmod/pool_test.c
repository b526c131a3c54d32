// SPDX-License-Identifier: GPL-2.0
/*
 * pool_test.c - kselftest for the pool side of tencache.ko: INFO/ALLOC/FREE,
 * the ABI rules, mmap (2 MiB mappings, GUP through O_DIRECT and io_uring),
 * buffer lifetime (free while mapped, close, kill -9, fork), the cap, the
 * memlock limit, concurrency, the reservation and the device permissions.
 * Runs in the QEMU guest (tests/vm/run-vm.sh) with the module loaded.
 */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <liburing.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include "kselftest_harness.h"
#include "tc_test.h"

FIXTURE(pool) {
	int fd;
	struct tencache_info info;
	long long used0;
};

FIXTURE_SETUP(pool)
{
	const char *only = getenv("TC_TESTS");	/* developer aid: a subset */

	if (only && !strstr(only, _metadata->name))
		SKIP(return, "not in TC_TESTS");
	self->fd = open(TENCACHE_DEV_PATH, O_RDWR | O_CLOEXEC);
	if (self->fd < 0)
		SKIP(return, "%s: %s (is tencache.ko loaded?)", TENCACHE_DEV_PATH,
		     strerror(errno));
	memset(&self->info, 0, sizeof(self->info));
	self->info.size = sizeof(self->info);
	ASSERT_EQ(0, ioctl(self->fd, TENCACHE_INFO, &self->info));
	self->used0 = tc_used();
}

FIXTURE_TEARDOWN(pool)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(pool, info)
{
	EXPECT_EQ(TENCACHE_ABI_VERSION, self->info.abi_version);
	EXPECT_EQ(TENCACHE_BLOCK_SIZE, self->info.block_size);
	EXPECT_LE(1, self->info.nr_nodes);
	EXPECT_TRUE(self->info.features & TENCACHE_FEAT_POOL);
	EXPECT_TRUE(self->info.features & TENCACHE_FEAT_PMD_MAP);
	EXPECT_EQ(tc_sysfs("max_bytes"), self->info.max_bytes);
	EXPECT_EQ(tc_sysfs("reserved_bytes"), self->info.reserved_bytes);
	EXPECT_EQ(self->info.pool_bytes, self->info.used_bytes + self->info.free_bytes);
	EXPECT_EQ(0, self->info.file_bytes);
	EXPECT_EQ(0, self->info.file_buffers);
}

/*
 * ABI length rules for every command (iommufd's cmd_length): one byte short
 * is EINVAL, a longer struct with a non-zero tail is E2BIG, and a longer
 * struct with a zero tail behaves exactly like the real size.
 */
#define TEST_LENGTH(_struct, _ioctl, _init)                                      \
	{                                                                        \
		struct {                                                         \
			struct _struct cmd;                                      \
			uint8_t extra[8];                                        \
		} big;                                                           \
		struct _struct *c = &big.cmd;                                    \
		int exact_ret, exact_errno;                                      \
                                                                                 \
		memset(&big, 0, sizeof(big));                                    \
		_init;                                                           \
		c->size = sizeof(*c) - 1;                                        \
		EXPECT_ERRNO(EINVAL, ioctl(self->fd, _ioctl, c));                \
		memset(&big, 0, sizeof(big));                                    \
		_init;                                                           \
		c->size = sizeof(big);                                           \
		big.extra[3] = 0xaa;                                             \
		EXPECT_ERRNO(E2BIG, ioctl(self->fd, _ioctl, c));                 \
		memset(&big, 0, sizeof(big));                                    \
		_init;                                                           \
		c->size = sizeof(*c);                                            \
		exact_ret = ioctl(self->fd, _ioctl, c);                          \
		exact_errno = errno;                                             \
		memset(&big, 0, sizeof(big));                                    \
		_init;                                                           \
		c->size = sizeof(big);                                           \
		EXPECT_EQ(exact_ret, ioctl(self->fd, _ioctl, c));                \
		if (exact_ret)                                                   \
			EXPECT_EQ(exact_errno, errno);                           \
		EXPECT_EQ(0, big.extra[0] | big.extra[7]);                       \
	}

TEST_F(pool, cmd_length)
{
	struct tencache_io io = { .op = TENCACHE_OP_FSYNC, .fd = self->fd };
	struct tencache_cqe cqes[4];

	TEST_LENGTH(tencache_info, TENCACHE_INFO, );
	TEST_LENGTH(tencache_alloc, TENCACHE_ALLOC,
		    ({ c->length = 1; c->node = TENCACHE_NODE_ANY; }));
	/* the two ALLOCs that succeeded made handles 1 and 2 */
	TEST_LENGTH(tencache_free, TENCACHE_FREE, ({ c->handle = 3; }));
	EXPECT_EQ(0, tc_free(self->fd, 1));
	EXPECT_EQ(0, tc_free(self->fd, 2));
	TEST_LENGTH(tencache_submit, TENCACHE_SUBMIT,
		    ({ c->nr = 1; c->entry_size = sizeof(io);
		       c->ios = (uintptr_t)&io; }));
	TEST_LENGTH(tencache_reap, TENCACHE_REAP,
		    ({ c->max_nr = 4; c->entry_size = sizeof(cqes[0]);
		       c->cqes = (uintptr_t)cqes; }));
}

TEST_F(pool, bad_ioctl)
{
	struct tencache_info info = { .size = sizeof(info) };

	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IO(TENCACHE_TYPE, 0x7f), &info));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IO(TENCACHE_TYPE, 0x90), &info));
	EXPECT_ERRNO(ENOTTY, ioctl(self->fd, _IOWR(TENCACHE_TYPE, TENCACHE_CMD_INFO,
						   struct tencache_info), &info));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, TENCACHE_INFO, NULL));
	EXPECT_ERRNO(EFAULT, ioctl(self->fd, TENCACHE_ALLOC, (void *)8));
	info.flags = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_INFO, &info));
}

TEST_F(pool, alloc_bad_input)
{
	struct tencache_alloc a;

	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, 0, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, self->info.max_bytes + 1,
				      TENCACHE_NODE_ANY, 0, &a));
	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, UINT64_MAX, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, MiB, TENCACHE_NODE_ANY, 2, &a));
	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, MiB, TENCACHE_NODE_ANY, 1u << 31, &a));
	EXPECT_ERRNO(EINVAL, tc_alloc(self->fd, MiB, TENCACHE_NODE_ANY,
				      TENCACHE_ALLOC_NODE_STRICT, &a));
	EXPECT_ERRNO(ENODEV, tc_alloc(self->fd, MiB, 4096, 0, &a));
	EXPECT_ERRNO(ENODEV, tc_alloc(self->fd, MiB, 0x7fffffff, 0, &a));
	if (self->info.nr_nodes == 1)
		EXPECT_ERRNO(ENODEV, tc_alloc(self->fd, MiB, 1, 0, &a));
	EXPECT_EQ(self->used0, tc_used());
	EXPECT_EQ(0, tc_sysfs("buffers_live"));
}

TEST_F(pool, free_bad_input)
{
	struct tencache_free f = { .size = sizeof(f) };
	struct tencache_alloc a;
	int fd2;

	f.handle = 0;
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, TENCACHE_FREE, &f));
	f.handle = 12345;
	EXPECT_ERRNO(ENOENT, ioctl(self->fd, TENCACHE_FREE, &f));
	ASSERT_EQ(0, tc_alloc(self->fd, MiB, TENCACHE_NODE_ANY, 0, &a));
	f.handle = a.handle;
	f.flags = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_FREE, &f));
	f.flags = 0;
	f.__reserved = 1;
	EXPECT_ERRNO(EINVAL, ioctl(self->fd, TENCACHE_FREE, &f));
	/* a handle belongs to its open file */
	fd2 = open(TENCACHE_DEV_PATH, O_RDWR);
	ASSERT_LE(0, fd2);
	EXPECT_ERRNO(ENOENT, tc_free(fd2, a.handle));
	close(fd2);
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	EXPECT_ERRNO(ENOENT, tc_free(self->fd, a.handle));
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, alloc_map_readback_free)
{
	struct tencache_alloc a;
	struct tencache_info info = { .size = sizeof(info) };
	uint64_t *p, i, n;

	ASSERT_EQ(0, tc_alloc(self->fd, 7 * MiB + 1, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_NE(0, a.handle);
	EXPECT_EQ(8 * MiB, a.alloc_length);
	EXPECT_EQ((uint64_t)a.handle << TENCACHE_MMAP_SHIFT, a.mmap_offset);
	EXPECT_EQ(self->used0 + 8 * MiB, tc_used());
	ASSERT_EQ(0, ioctl(self->fd, TENCACHE_INFO, &info));
	EXPECT_EQ(8 * MiB, info.file_bytes);
	EXPECT_EQ(1, info.file_buffers);

	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_EQ(0, (uintptr_t)p & (TENCACHE_BLOCK_SIZE - 1));
	n = a.alloc_length / 8;
	for (i = 0; i < n; i++)
		if (p[i])
			break;
	EXPECT_EQ(n, i);	/* zeroed */
	for (i = 0; i < n; i++)
		p[i] = i * 0x9e3779b97f4a7c15ULL;
	ASSERT_EQ(0, munmap(p, a.alloc_length));

	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < n; i++)
		if (p[i] != i * 0x9e3779b97f4a7c15ULL)
			break;
	EXPECT_EQ(n, i);
	ASSERT_EQ(0, munmap(p, a.alloc_length));
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	EXPECT_EQ(self->used0, tc_used());
}

/* smaps FilePmdMapped of the VMA at @addr, in kB; -1 if not found */
static long pmd_mapped_kb(void *addr)
{
	char line[256];
	unsigned long lo, hi;
	long kb = -1;
	int in = 0;
	FILE *f = fopen("/proc/self/smaps", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
		else if (in && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1)
			break;
	}
	fclose(f);
	return kb;
}

TEST_F(pool, pmd_mapping)
{
	struct tencache_alloc a;
	volatile char *p;
	uint64_t off;

	ASSERT_EQ(0, tc_alloc(self->fd, 16 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (off = 0; off < a.alloc_length; off += TENCACHE_BLOCK_SIZE)
		p[off] = 1;
	EXPECT_EQ(16 * 1024, pmd_mapped_kb((void *)p));
	/* a partial munmap splits a PMD; the rest still works */
	ASSERT_EQ(0, munmap((void *)(p + MiB), MiB));
	p[0] = 2;
	p[3 * MiB] = 3;
	EXPECT_EQ(2, p[0]);
	EXPECT_EQ(3, p[3 * MiB]);
	ASSERT_EQ(0, munmap((void *)p, MiB));
	ASSERT_EQ(0, munmap((void *)(p + 2 * MiB), a.alloc_length - 2 * MiB));
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, mmap_bad_input)
{
	struct tencache_alloc a;
	char *p;

	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_EQ(MAP_FAILED, mmap(NULL, a.alloc_length, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE, self->fd, a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, a.alloc_length + 4096, PROT_READ,
				   MAP_SHARED, self->fd, a.mmap_offset));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd,
				   a.mmap_offset + a.alloc_length));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd,
				   (uint64_t)(a.handle + 1) << TENCACHE_MMAP_SHIFT));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(MAP_FAILED, mmap(NULL, 4096, PROT_READ, MAP_SHARED, self->fd, 0));
	EXPECT_EQ(EINVAL, errno);
	/* a sub-range mapping sees the same bytes */
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	p[3 * MiB + 5] = 42;
	{
		char *q = mmap(NULL, MiB, PROT_READ, MAP_SHARED, self->fd,
			       a.mmap_offset + 3 * MiB);

		ASSERT_NE(MAP_FAILED, q);
		EXPECT_EQ(42, q[5]);
		/* mremap cannot grow it (VM_DONTEXPAND) */
		EXPECT_EQ(MAP_FAILED, mremap(q, MiB, 2 * MiB, 0));
		munmap(q, MiB);
	}
	munmap(p, a.alloc_length);
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, zeroed_on_reuse)
{
	struct tencache_alloc a;
	unsigned char *p;
	uint64_t i;
	long long recycled = tc_sysfs("blocks_recycled");

	/* the pool keeps its reservation, so the second ALLOC reuses blocks */
	ASSERT_LT(0, self->info.reserved_bytes);
	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	memset(p, 0xab, a.alloc_length);
	munmap(p, a.alloc_length);
	ASSERT_EQ(0, tc_free(self->fd, a.handle));
	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_LT(recycled, tc_sysfs("blocks_recycled"));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	for (i = 0; i < a.alloc_length; i++)
		if (p[i])
			break;
	EXPECT_EQ(a.alloc_length, i);
	munmap(p, a.alloc_length);
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
}

TEST_F(pool, free_while_mapped)
{
	struct tencache_alloc a;
	long long live = tc_sysfs("buffers_live");
	char *p;

	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	p[0] = 7;
	ASSERT_EQ(0, tc_free(self->fd, a.handle));
	/* the handle is gone, the memory lives on while mapped */
	EXPECT_ERRNO(ENOENT, tc_free(self->fd, a.handle));
	EXPECT_EQ(live + 1, tc_sysfs("buffers_live"));
	EXPECT_EQ(self->used0 + 4 * MiB, tc_used());
	p[4 * MiB - 1] = 9;
	EXPECT_EQ(7, p[0]);
	EXPECT_EQ(0, munmap(p, a.alloc_length));
	EXPECT_EQ(live, tc_sysfs("buffers_live"));
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, close_frees)
{
	struct tencache_alloc a;
	int fd2 = open(TENCACHE_DEV_PATH, O_RDWR), i;

	ASSERT_LE(0, fd2);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(0, tc_alloc(fd2, (i + 1) * 2 * MiB, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_EQ(self->used0 + 12 * MiB, tc_used());
	close(fd2);
	EXPECT_EQ(self->used0, tc_used());
}

/* close with a live mapping: blocks stay until munmap */
TEST_F(pool, close_while_mapped)
{
	struct tencache_alloc a;
	int fd2 = open(TENCACHE_DEV_PATH, O_RDWR);
	char *p;

	ASSERT_LE(0, fd2);
	ASSERT_EQ(0, tc_alloc(fd2, 2 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(fd2, &a);
	ASSERT_NE(MAP_FAILED, p);
	close(fd2);
	p[100] = 1;
	EXPECT_EQ(self->used0 + 2 * MiB, tc_used());
	munmap(p, a.alloc_length);
	EXPECT_EQ(self->used0, tc_used());
}

static void wait_used(long long want)
{
	int i;

	/* the dying process's file is released asynchronously after wait() */
	for (i = 0; i < 200 && tc_used() != want; i++)
		usleep(10000);
}

TEST_F(pool, kill_child_frees)
{
	int pipefd[2], status;
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct tencache_alloc a;
		int fd = open(TENCACHE_DEV_PATH, O_RDWR);
		char *p;

		if (fd < 0 || tc_alloc(fd, 6 * MiB, TENCACHE_NODE_ANY, 0, &a))
			_exit(1);
		p = tc_map(fd, &a);	/* one mapped ... */
		if (p == MAP_FAILED)
			_exit(1);
		memset(p, 1, a.alloc_length);
		if (tc_alloc(fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a))	/* ... one not */
			_exit(1);
		write(pipefd[1], "r", 1);
		pause();
		_exit(0);
	}
	close(pipefd[1]);
	ASSERT_EQ(1, read(pipefd[0], &c, 1));
	EXPECT_EQ(self->used0 + 10 * MiB, tc_used());
	kill(pid, SIGKILL);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	wait_used(self->used0);
	EXPECT_EQ(self->used0, tc_used());
	close(pipefd[0]);
}

/* fork(): the child does not inherit mappings (VM_DONTCOPY) */
TEST_F(pool, fork_does_not_share_mappings)
{
	struct tencache_alloc a;
	int status;
	pid_t pid;
	char *p;

	ASSERT_EQ(0, tc_alloc(self->fd, 2 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	p[0] = 5;
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		signal(SIGSEGV, SIG_DFL);
		p[0] = 6;	/* no mapping here: SIGSEGV */
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
	EXPECT_EQ(5, p[0]);
	EXPECT_EQ(self->used0 + 2 * MiB, tc_used());
	munmap(p, a.alloc_length);
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	EXPECT_EQ(self->used0, tc_used());
}

/* O_DIRECT and io_uring pin the mapping's pages through GUP. */
TEST_F(pool, gup_odirect_and_io_uring)
{
	const char *dev = getenv("TENCACHE_NVME");
	struct io_uring ring;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct tencache_alloc a;
	struct iovec iov;
	struct utsname u;
	unsigned char *p, *src;
	int dfd, i, ret, major, minor;

	if (!dev)
		SKIP(return, "TENCACHE_NVME is not set");
	dfd = open(dev, O_RDWR | O_DIRECT);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, posix_memalign((void **)&src, 4096, 4 * MiB));
	for (i = 0; i < (int)(4 * MiB); i++)
		src[i] = (i * 7 + 3) & 0xff;
	ASSERT_EQ(4 * MiB, pwrite(dfd, src, 4 * MiB, 8 * MiB));

	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a));
	p = tc_map(self->fd, &a);
	ASSERT_NE(MAP_FAILED, p);
	/* O_DIRECT pread into the mapping, across the 2 MiB block boundary */
	ASSERT_EQ(8192, pread(dfd, p + 2 * MiB - 4096, 8192, 8 * MiB + 2 * MiB - 4096));
	EXPECT_EQ(0, memcmp(p + 2 * MiB - 4096, src + 2 * MiB - 4096, 8192));
	ASSERT_EQ(2 * MiB, pread(dfd, p, 2 * MiB, 8 * MiB));
	EXPECT_EQ(0, memcmp(p, src, 2 * MiB));

	/* io_uring READ (not fixed) into the mapping */
	memset(p, 0, a.alloc_length);
	ASSERT_EQ(0, io_uring_queue_init(4, &ring, 0));
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_read(sqe, dfd, p + 2 * MiB, 2 * MiB, 8 * MiB + 2 * MiB);
	ASSERT_EQ(1, io_uring_submit(&ring));
	ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
	EXPECT_EQ(2 * MiB, cqe->res);
	io_uring_cqe_seen(&ring, cqe);
	EXPECT_EQ(0, memcmp(p + 2 * MiB, src + 2 * MiB, 2 * MiB));

	/*
	 * Registering it as a fixed buffer: 6.1 refuses file-backed memory that
	 * is not shmem/hugetlbfs (EOPNOTSUPP); 6.5 and later accept it.
	 */
	iov.iov_base = p;
	iov.iov_len = a.alloc_length;
	ret = io_uring_register_buffers(&ring, &iov, 1);
	ASSERT_EQ(0, uname(&u));
	ASSERT_EQ(2, sscanf(u.release, "%d.%d", &major, &minor));
	if (major < 6 || (major == 6 && minor < 5)) {
		EXPECT_EQ(-EOPNOTSUPP, ret);
	} else {
		EXPECT_EQ(0, ret);
		io_uring_unregister_buffers(&ring);
	}
	io_uring_queue_exit(&ring);
	munmap(p, a.alloc_length);
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	free(src);
	close(dfd);
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, fill_to_cap)
{
	struct tencache_alloc a;
	long long fails = tc_sysfs("alloc_failures");
	uint64_t room = self->info.max_bytes - self->info.used_bytes;
	uint32_t handles[1024];
	int n = 0, i;

	/* 32 MiB at a time up to the cap, then one more block */
	while (room >= 32 * MiB && n < 1024) {
		ASSERT_EQ(0, tc_alloc(self->fd, 32 * MiB, TENCACHE_NODE_ANY, 0, &a));
		handles[n++] = a.handle;
		room -= 32 * MiB;
	}
	while (room && n < 1024) {
		ASSERT_EQ(0, tc_alloc(self->fd, 2 * MiB, TENCACHE_NODE_ANY, 0, &a));
		handles[n++] = a.handle;
		room -= 2 * MiB;
	}
	EXPECT_EQ(self->info.max_bytes, tc_sysfs("pool_bytes"));
	EXPECT_ERRNO(ENOMEM, tc_alloc(self->fd, 2 * MiB, TENCACHE_NODE_ANY, 0, &a));
	EXPECT_EQ(fails + 1, tc_sysfs("alloc_failures"));
	EXPECT_EQ(self->info.max_bytes, tc_sysfs("used_bytes"));
	EXPECT_EQ(0, tc_sysfs("free_bytes"));
	for (i = 0; i < n; i++)
		EXPECT_EQ(0, tc_free(self->fd, handles[i]));
	EXPECT_EQ(self->used0, tc_used());
	/* back to the reservation: the rest went back to the kernel */
	EXPECT_EQ(self->info.reserved_bytes, tc_sysfs("pool_bytes"));
}

struct thread_arg {
	int fd;
	unsigned int seed;
	int errors;
};

static void *alloc_free_thread(void *arg)
{
	struct thread_arg *t = arg;
	struct tencache_alloc a;
	uint32_t held[8] = { 0 };
	int i;

	for (i = 0; i < 300; i++) {
		int slot = rand_r(&t->seed) % 8;

		if (held[slot]) {
			if (tc_free(t->fd, held[slot]))
				t->errors++;
			held[slot] = 0;
		} else {
			uint64_t len = (1 + rand_r(&t->seed) % 3) * TENCACHE_BLOCK_SIZE;

			if (tc_alloc(t->fd, len, TENCACHE_NODE_ANY, 0, &a))
				t->errors++;
			else
				held[slot] = a.handle;
		}
	}
	for (i = 0; i < 8; i++)
		if (held[i] && tc_free(t->fd, held[i]))
			t->errors++;
	return NULL;
}

TEST_F(pool, concurrent_alloc_free)
{
	struct thread_arg args[4];
	pthread_t th[4];
	int i, fd2 = open(TENCACHE_DEV_PATH, O_RDWR);

	ASSERT_LE(0, fd2);
	for (i = 0; i < 4; i++) {
		/* two threads per open file, two files */
		args[i] = (struct thread_arg){ .fd = i & 1 ? fd2 : self->fd, .seed = i + 1 };
		ASSERT_EQ(0, pthread_create(&th[i], NULL, alloc_free_thread, &args[i]));
	}
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		EXPECT_EQ(0, args[i].errors);
	}
	close(fd2);
	EXPECT_EQ(self->used0, tc_used());
	EXPECT_EQ(tc_sysfs("pool_bytes"),
		  tc_sysfs("used_bytes") + tc_sysfs("free_bytes"));
}

static int drop_cap_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

static long vm_pin_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* Without CAP_IPC_LOCK, buffers are charged to VmPin against RLIMIT_MEMLOCK. */
TEST_F(pool, memlock_limit)
{
	int status;
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 5 * MiB, 5 * MiB };
		struct tencache_alloc a, b;
		long pin0;

		if (drop_cap_ipc_lock() || setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(10);
		pin0 = vm_pin_kb();
		if (tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &a))
			_exit(11);
		if (vm_pin_kb() != pin0 + 4096)
			_exit(12);
		if (tc_alloc(self->fd, 2 * MiB, TENCACHE_NODE_ANY, 0, &b) != -1 ||
		    errno != ENOMEM)
			_exit(13);
		if (tc_free(self->fd, a.handle) || vm_pin_kb() != pin0)
			_exit(14);
		if (tc_alloc(self->fd, 4 * MiB, TENCACHE_NODE_ANY, 0, &b) ||
		    tc_free(self->fd, b.handle))
			_exit(15);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
	EXPECT_EQ(self->used0, tc_used());
}

TEST_F(pool, device_permissions)
{
	struct stat st;
	int status;
	pid_t pid;

	ASSERT_EQ(0, stat(TENCACHE_DEV_PATH, &st));
	EXPECT_EQ(0, st.st_uid);
	EXPECT_EQ(0, st.st_mode & 0077);	/* default 0600 */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(10);
		if (open(TENCACHE_DEV_PATH, O_RDWR) != -1 || errno != EACCES)
			_exit(11);
		if (tc_sysfs_write("reserved_mb", "64") != -EACCES)
			_exit(12);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

TEST_F(pool, reservation)
{
	long long res0 = self->info.reserved_bytes;
	char val[32];

	ASSERT_EQ(0, tc_sysfs_write("reserved_mb", "96"));
	EXPECT_EQ(96 * MiB, tc_sysfs("reserved_bytes"));
	EXPECT_LE(96 * MiB, tc_sysfs("pool_bytes"));
	EXPECT_EQ(-EINVAL, tc_sysfs_write("reserved_mb", "3"));
	EXPECT_EQ(-EINVAL, tc_sysfs_write("reserved_mb", "abc"));
	snprintf(val, sizeof(val), "%llu", self->info.max_bytes / MiB + 2);
	EXPECT_EQ(-EINVAL, tc_sysfs_write("reserved_mb", val));
	EXPECT_EQ(96 * MiB, tc_sysfs("reserved_bytes"));
	snprintf(val, sizeof(val), "%lld", res0 / (long long)MiB);
	ASSERT_EQ(0, tc_sysfs_write("reserved_mb", val));
	EXPECT_EQ(res0, tc_sysfs("reserved_bytes"));
	EXPECT_EQ(res0 + tc_used(), tc_sysfs("pool_bytes"));
}

TEST_F(pool, node_strict)
{
	struct tencache_alloc a;
	char name[64];

	ASSERT_EQ(0, tc_alloc(self->fd, 4 * MiB, 0, TENCACHE_ALLOC_NODE_STRICT, &a));
	snprintf(name, sizeof(name), "node0/used_bytes");
	EXPECT_LE(4 * MiB, tc_sysfs(name));
	EXPECT_EQ(0, tc_free(self->fd, a.handle));
	if (self->info.nr_nodes == 1)
		EXPECT_EQ(tc_sysfs("pool_bytes"), tc_sysfs("node0/held_bytes"));
}

TEST_HARNESS_MAIN
