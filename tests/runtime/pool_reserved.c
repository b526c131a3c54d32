/* pool_reserved.c - persistent reservations (tencache_reserve*) and the
 * "reserved" pool backend: reserve/grow/shrink/release, data that outlives a
 * pool and its process, -EBUSY while held, falling through to the next
 * backend (reason queryable), ownership checks and every bad input. Needs
 * root: mounts a private hugetlbfs in a tmp dir and raises vm.nr_hugepages
 * for the run (both undone at exit); skips when it cannot. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"	/* tc_hugetlbfs_mounts */
#include "tencache.h"
#include "test.h"

#define MiB (1ULL << 20)
#define NR "/proc/sys/vm/nr_hugepages"
#define FREE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
#define RESV "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"
#define PAGES 64	/* 128 MiB: a 32 MiB reservation and a hugetlb pool beside it */

static char dir[64], path[320], path0[320];
static long nr0 = -1;
static int mounted;
static char last_log[1024];
static uid_t uid;

/* open/write only: also called from the signal handler. */
static int write_long(const char *p, long v)
{
	char buf[24], *e = buf + sizeof(buf);
	unsigned long u = v < 0 ? 0 : v;
	int fd = open(p, O_WRONLY), ok;

	if (fd < 0)
		return -1;
	*--e = '\n';
	do
		*--e = '0' + u % 10;
	while (u /= 10);
	ok = write(fd, e, buf + sizeof(buf) - e) == buf + sizeof(buf) - e;
	return (close(fd) == 0 && ok) ? 0 : -1;
}

static long free_pages(void)
{
	return t_read_long(FREE) - t_read_long(RESV);
}

/*
 * free_pages() once it reads want, or after 2 s: the kernel may hand freed
 * huge pages back from a workqueue (free_huge_page outside task context),
 * so a count can lag a release by a moment (CI once read 56 for 64).
 */
static long free_pages_settled(long want)
{
	long v = free_pages();

	for (int i = 0; i < 200 && v != want; i++) {
		usleep(10000);
		v = free_pages();
	}
	return v;
}

static void cleanup(void)
{
	if (mounted) {
		unlink(path);
		unlink(path0);
		umount2(dir, MNT_DETACH);
		mounted = 0;
	}
	if (dir[0])
		rmdir(dir);
	if (nr0 >= 0)
		write_long(NR, nr0);
}

/* A timeout (SIGTERM) or a closed pipe must not leave the mount behind. */
static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void log_hook(void *arg, int level, const char *msg)
{
	(void)arg;
	if (level <= TENCACHE_LOG_WARN || !strncmp(msg, "pool: ", 6))
		snprintf(last_log, sizeof(last_log), "%s", msg);
}

static struct tencache *ctx(unsigned backend, const char *file, int node)
{
	struct tencache_params p = { .pool_backend = backend, .pool_file = file,
				     .flags = TENCACHE_F_NO_CUDA, .log_fn = log_hook,
				     .dev_path = "/nonexistent/tencache" };
	struct tencache *tc = NULL;

	if (node >= 0) {
		p.flags |= TENCACHE_F_NUMA_NODE;
		p.numa_node = node;
	}
	T_EQ(tencache_init(&tc, &p), 0);
	return tc;
}

/* A forced reserved pool of bytes over file; -errno, or 0 with *info filled. */
static int try_pool(const char *file, uint64_t bytes, struct tencache_pool **pool,
		    struct tencache **tcp)
{
	*tcp = ctx(TENCACHE_POOL_RESERVED, file, -1);
	*pool = NULL;
	return tencache_pool_create(*tcp, pool, bytes, NULL, 0);
}

static uint64_t pattern(uint64_t i)
{
	return i * 0x9e3779b97f4a7c15ULL + 1;
}

static int setup(void)
{
	long avail;

	uid = geteuid();
	if (uid != 0) {
		printf("needs root (a private hugetlbfs mount and vm.nr_hugepages)\n");
		return 0;
	}
	snprintf(dir, sizeof(dir), "/tmp/tencache-hp.XXXXXX");
	if (!mkdtemp(dir)) {
		dir[0] = 0;
		printf("mkdtemp: %s\n", strerror(errno));
		return 0;
	}
	if (mount("none", dir, "hugetlbfs", 0, "pagesize=2M")) {
		printf("cannot mount hugetlbfs on %s: %s\n", dir, strerror(errno));
		return 0;
	}
	mounted = 1;
	snprintf(path, sizeof(path), "%s/tencache-uid%u", dir, (unsigned)uid);
	snprintf(path0, sizeof(path0), "%s/tencache-uid%u-node0", dir, (unsigned)uid);
	avail = free_pages();
	if (avail < PAGES) {
		long nr = t_read_long(NR);

		if (nr < 0 || write_long(NR, nr + PAGES - avail)) {
			printf("fewer than %d free 2 MiB huge pages, and cannot reserve them\n", PAGES);
			return 0;
		}
		nr0 = nr;
		if (free_pages() < PAGES) {
			printf("could reserve only %ld of %d 2 MiB huge pages\n", free_pages(), PAGES);
			return 0;
		}
	}
	return 1;
}

static void test_bad_inputs(struct tencache *tc)
{
	struct tencache_reservation r;

	T_EQ(tencache_reserve(tc, dir, 0, -1, 0, &r), -EINVAL);
	T_EQ(tencache_reserve(tc, dir, 2 * MiB, -1, 2, &r), -EINVAL);
	T_EQ(tencache_reserve(tc, dir, 2 * MiB, -2, 0, &r), -EINVAL);
	T_EQ(tencache_reserve(tc, dir, 2 * MiB, 4095, 0, &r), -EINVAL);
	T_EQ(tencache_reserve(NULL, dir, ~0ULL, -1, 0, &r), -EINVAL);
	last_log[0] = 0;
	T_EQ(tencache_reserve(tc, "/tmp", 2 * MiB, -1, 0, &r), -EINVAL);
	T_CHECK(strstr(last_log, "mount -t hugetlbfs -o pagesize=2M") != NULL, "message: %s",
		last_log);
	T_EQ(tencache_reserve(tc, "/nonexistent-tencache-dir", 2 * MiB, -1, 0, &r), -ENOENT);
	T_EQ(tencache_reserve_info(dir, -1, NULL), -EINVAL);
	T_EQ(tencache_reserve_info(dir, -2, &r), -EINVAL);
	T_EQ(tencache_reserve_info(dir, 4095, &r), -EINVAL);
	T_EQ(tencache_reserve_info("/tmp", -1, &r), -EINVAL);
	T_EQ(tencache_reserve_info(dir, -1, &r), -ENOENT);
	T_EQ(tencache_reserve_release(tc, dir, -1), -ENOENT);
	T_EQ(tencache_reserve_release(tc, dir, -3), -EINVAL);
	T_EQ(tencache_reserve_release(tc, "/tmp", -1), -EINVAL);
	T_EQ(tencache_reserve_release(NULL, "/nonexistent-tencache-dir", -1), -ENOENT);

	/* More pages than exist: says what to write, leaves nothing behind. */
	last_log[0] = 0;
	T_EQ(tencache_reserve(tc, dir, 1ULL << 44, -1, 0, &r), -ENOMEM);
	T_CHECK(strstr(last_log, "/proc/sys/vm/nr_hugepages") != NULL, "message: %s", last_log);
	T_EQ(tencache_reserve_info(dir, -1, &r), -ENOENT);
	T_EQ(tencache_reserve(tc, dir, 1ULL << 44, 0, 0, &r), -ENOMEM);
	T_CHECK(strstr(last_log, "node0/hugepages/hugepages-2048kB/nr_hugepages") != NULL,
		"message: %s", last_log);
	T_EQ(tencache_reserve_info(dir, 0, &r), -ENOENT);
}

/* In a mount namespace without hugetlbfs mounts: -ENOENT, and how to mount one. */
static void test_no_mount(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		char dirs[16][256];
		struct tencache_reservation r;
		struct tencache *tc;
		int n, i;

		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			_exit(77);
		n = tc_hugetlbfs_mounts(dirs, 16);
		for (i = 0; i < n; i++)
			umount2(dirs[i], MNT_DETACH);
		T_EQ(tc_hugetlbfs_mounts(dirs, 16), 0);
		tc = ctx(TENCACHE_POOL_RESERVED, NULL, -1);
		T_EQ(tencache_reserve(tc, NULL, 2 * MiB, -1, 0, &r), -ENOENT);
		T_CHECK(strstr(last_log, "mount -t hugetlbfs -o pagesize=2M none /dev/hugepages"),
			"message: %s", last_log);
		T_EQ(tencache_reserve_info(NULL, -1, &r), -ENOENT);
		T_EQ(tencache_reserve_release(tc, NULL, -1), -ENOENT);
		{
			struct tencache_pool *pool = NULL;

			T_EQ(tencache_pool_create(tc, &pool, 4 * MiB, NULL, 0), -ENOENT);
			T_CHECK(strstr(last_log, "no hugetlbfs mount"), "message: %s", last_log);
		}
		tencache_exit(tc);
		_exit(t_exit());
	}
	T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 77)
		fprintf(stderr, "no-mount check skipped (unshare refused)\n");
	else
		T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

static void test_reserve_grow_shrink(struct tencache *tc)
{
	struct tencache_reservation r, r2;
	struct stat st;
	char dirs[16][256];
	long f0 = free_pages();
	int n, i, found = 0;

	n = tc_hugetlbfs_mounts(dirs, 16);
	for (i = 0; i < n; i++)
		found |= !strcmp(dirs[i], dir);
	T_CHECK(found, "%s is not among the %d hugetlbfs mounts found", dir, n);

	T_EQ(tencache_reserve(tc, dir, 7 * MiB, -1, 0, &r), 0);	/* rounds up */
	T_CHECK(!strcmp(r.path, path), "path %s", r.path);
	T_EQ(r.size, 8 * MiB);
	T_EQ(r.allocated, 8 * MiB);
	T_EQ(r.node, -1);
	T_EQ(r.uid, uid);
	T_EQ(r.in_use, 0);
	T_EQ(free_pages_settled(f0 - 4), f0 - 4);
	T_EQ(stat(path, &st), 0);
	T_EQ(st.st_mode & 07777, 0600);
	T_EQ(tencache_reserve_info(dir, -1, &r2), 0);
	T_CHECK(!memcmp(&r, &r2, sizeof(r)), "info equals the reserve's result");

	T_EQ(tencache_reserve(tc, dir, 24 * MiB, -1, 0, &r), 0);	/* grow */
	T_EQ(r.size, 24 * MiB);
	T_EQ(r.allocated, 24 * MiB);
	T_EQ(free_pages_settled(f0 - 12), f0 - 12);
	T_EQ(tencache_reserve(tc, dir, 4 * MiB, -1, 0, &r), 0);	/* shrink */
	T_EQ(r.size, 4 * MiB);
	T_EQ(r.allocated, 4 * MiB);
	T_EQ(free_pages_settled(f0 - 2), f0 - 2);
	/* dir NULL finds it where it is; a loose mode is put back to 0600. */
	T_EQ(chmod(path, 0644), 0);
	T_EQ(tencache_reserve(NULL, NULL, 16 * MiB, -1, 0, &r), 0);
	T_CHECK(!strcmp(r.path, path), "path %s", r.path);
	T_EQ(stat(path, &st), 0);
	T_EQ(st.st_mode & 07777, 0600);
	T_EQ(r.allocated, 16 * MiB);
	T_EQ(tencache_reserve_info(NULL, -1, &r2), 0);
	T_CHECK(!strcmp(r2.path, path), "info(NULL) path %s", r2.path);
	T_EQ(free_pages_settled(f0 - 8), f0 - 8);
}

/* Fill the pool's first bytes with the pattern (check: verify it instead). */
static int pool_pattern(struct tencache_pool *pool, uint64_t bytes, int check, int zero)
{
	struct tencache_pool_info info;
	uint64_t *w, i, bad = 0;

	if (tencache_pool_info(pool, &info))
		return -1;
	w = info.base;
	for (i = 0; i < bytes / 8; i++) {
		uint64_t want = zero ? 0 : pattern(i);

		if (!check)
			w[i] = want;
		else if (w[i] != want)
			bad++;
	}
	return bad ? -1 : 0;
}

/* A later process maps the reservation and checks its contents. */
static int child_check(uint64_t bytes, int zero)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct tencache *tc;
		struct tencache_pool *pool;
		int ok;

		if (try_pool(path, bytes, &pool, &tc))
			_exit(2);
		ok = !pool_pattern(pool, bytes, 1, zero);
		tencache_pool_destroy(pool);
		tencache_exit(tc);
		_exit(ok ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* io_uring staging registers the pool's pages (hugetlbfs file memory) too. */
static void stage_roundtrip(struct tencache *tc, struct tencache_pool *pool, char *base)
{
	struct tencache_stage *s = NULL;
	struct tencache_stage_cqe cqe = { 0 };
	char tmp[] = "/var/tmp/tencache-stage.XXXXXX";
	int fd = mkstemp(tmp);

	T_CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	if (fd < 0)
		return;
	unlink(tmp);
	T_EQ(tencache_stage_create(tc, pool, &s), 0);
	if (s) {
		T_EQ(tencache_stage_write(s, fd, base, 4 * MiB, 0, 1, 0), 0);
		T_CHECK(tencache_stage_submit(s) >= 0, "submit");
		T_EQ(tencache_stage_wait(s, 1, &cqe, 1, 5000000000ULL), 1);
		T_EQ(cqe.res, 4 * MiB);
		memset(base + 4 * MiB, 0, 4 * MiB);
		T_EQ(tencache_stage_read(s, fd, base + 4 * MiB, 4 * MiB, 0, 2, 0), 0);
		T_CHECK(tencache_stage_submit(s) >= 0, "submit");
		T_EQ(tencache_stage_wait(s, 1, &cqe, 1, 5000000000ULL), 1);
		T_EQ(cqe.res, 4 * MiB);
		T_CHECK(!memcmp(base, base + 4 * MiB, 4 * MiB), "read back what was written");
		tencache_stage_destroy(s);
	}
	close(fd);
	/* Put the pattern back for the later checks. */
	pool_pattern(pool, 16 * MiB, 0, 0);
}

static void test_pool(struct tencache *tc)
{
	struct tencache *t1, *t2;
	struct tencache_pool *pool, *p2;
	struct tencache_pool_info info;
	struct tencache_reservation r;
	long f0;
	void *buf;

	f0 = free_pages();
	T_EQ(try_pool(path, 16 * MiB, &pool, &t1), 0);
	if (!pool) {
		tencache_exit(t1);
		return;
	}
	T_EQ(free_pages_settled(f0), f0);	/* no page taken: the pool maps the reservation's */
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.backend, TENCACHE_POOL_RESERVED);
	T_EQ(info.size, 16 * MiB);
	T_CHECK(strstr(info.reason, "backend reserved") && strstr(info.reason, path),
		"reason: %s", info.reason);
	T_CHECK(!strcmp(tencache_pool_backend_name(TENCACHE_POOL_RESERVED), "reserved"), "name");
	T_EQ(tencache_pool_alloc(pool, 16 * MiB, &buf), 0);
	T_CHECK(buf == info.base, "the one buffer is the pool");
	pool_pattern(pool, 16 * MiB, 0, 0);

	/* Held: reserve, release and a second forced pool are refused. */
	T_EQ(tencache_reserve(tc, dir, 16 * MiB, -1, 0, NULL), -EBUSY);
	T_EQ(tencache_reserve(tc, dir, 32 * MiB, -1, TENCACHE_RESERVE_ZERO, NULL), -EBUSY);
	T_EQ(tencache_reserve_release(tc, dir, -1), -EBUSY);
	T_EQ(tencache_reserve_info(dir, -1, &r), 0);
	T_EQ(r.in_use, 1);
	T_EQ(r.size, 16 * MiB);
	T_EQ(try_pool(path, 8 * MiB, &p2, &t2), -EBUSY);
	tencache_exit(t2);
	/* Auto falls through to hugetlb (or THP), saying why. */
	t2 = ctx(TENCACHE_POOL_AUTO, path, -1);
	p2 = NULL;
	T_EQ(tencache_pool_create(t2, &p2, 8 * MiB, NULL, 0), 0);
	if (p2) {
		T_EQ(tencache_pool_info(p2, &info), 0);
		T_CHECK(info.backend == TENCACHE_POOL_HUGETLB || info.backend == TENCACHE_POOL_THP,
			"backend %u", info.backend);
		T_CHECK(strstr(info.reason, "reserved: ") && strstr(info.reason, "in use"),
			"reason: %s", info.reason);
		tencache_pool_destroy(p2);
	}
	tencache_exit(t2);
	T_EQ(tencache_pool_free(pool, buf), 0);
	tencache_pool_destroy(pool);
	tencache_exit(t1);
	T_EQ(tencache_reserve_info(dir, -1, &r), 0);
	T_EQ(r.in_use, 0);

	/* Persistence: another process, a pool over the same pages. */
	T_EQ(child_check(16 * MiB, 0), 0);
	T_EQ(child_check(6 * MiB, 0), 0);	/* a smaller pool maps the start */
	/* Auto, from the environment, picks the reservation first. */
	setenv("TENCACHE_POOL_FILE", path, 1);
	t2 = ctx(TENCACHE_POOL_AUTO, NULL, -1);
	p2 = NULL;
	T_EQ(tencache_pool_create(t2, &p2, 16 * MiB, NULL, 0), 0);
	if (p2) {
		T_EQ(tencache_pool_info(p2, &info), 0);
		T_EQ(info.backend, TENCACHE_POOL_RESERVED);
		T_EQ(pool_pattern(p2, 16 * MiB, 1, 0), 0);
		stage_roundtrip(t2, p2, info.base);
		tencache_pool_destroy(p2);
	}
	tencache_exit(t2);

	/* Too small: auto passes over it (reason queryable), forced -ENOMEM. */
	t2 = ctx(TENCACHE_POOL_AUTO, NULL, -1);
	p2 = NULL;
	T_EQ(tencache_pool_create(t2, &p2, 32 * MiB, NULL, 0), 0);
	if (p2) {
		T_EQ(tencache_pool_info(p2, &info), 0);
		T_CHECK(info.backend == TENCACHE_POOL_HUGETLB || info.backend == TENCACHE_POOL_THP,
			"backend %u", info.backend);
		T_CHECK(strstr(info.reason, "reserved: ") && strstr(info.reason, "holds 16.0 MiB") &&
			strstr(info.reason, "tencache-ctl reserve 32M"), "reason: %s", info.reason);
		tencache_pool_destroy(p2);
	}
	tencache_exit(t2);
	unsetenv("TENCACHE_POOL_FILE");
	T_EQ(try_pool(path, 32 * MiB, &p2, &t2), -ENOMEM);
	T_CHECK(strstr(last_log, "holds 16.0 MiB"), "message: %s", last_log);
	tencache_exit(t2);

	/* ZERO scrubs the pages kept (isolation between runs). */
	T_EQ(tencache_reserve(tc, dir, 16 * MiB, -1, TENCACHE_RESERVE_ZERO, &r), 0);
	T_EQ(r.allocated, 16 * MiB);
	T_EQ(child_check(16 * MiB, 1), 0);
}

static void test_ownership(struct tencache *tc)
{
	struct tencache *t2;
	struct tencache_pool *p2;
	struct tencache_pool_info info;
	struct tencache_reservation r;
	char link[400], plain[64];
	int fd;

	/* Another user's file: refused by everything but info. */
	T_EQ(chown(path, 65534, 65534), 0);
	T_EQ(try_pool(path, 4 * MiB, &p2, &t2), -EPERM);
	T_CHECK(strstr(last_log, "belongs to uid 65534"), "message: %s", last_log);
	tencache_exit(t2);
	t2 = ctx(TENCACHE_POOL_AUTO, path, -1);
	p2 = NULL;
	T_EQ(tencache_pool_create(t2, &p2, 4 * MiB, NULL, 0), 0);
	if (p2) {
		T_EQ(tencache_pool_info(p2, &info), 0);
		T_CHECK(info.backend != TENCACHE_POOL_RESERVED, "backend %u", info.backend);
		T_CHECK(strstr(info.reason, "belongs to uid 65534"), "reason: %s", info.reason);
		tencache_pool_destroy(p2);
	}
	tencache_exit(t2);
	T_EQ(tencache_reserve(tc, dir, 4 * MiB, -1, 0, NULL), -EPERM);
	T_EQ(tencache_reserve_release(tc, dir, -1), -EPERM);
	T_EQ(tencache_reserve_info(dir, -1, &r), 0);
	T_EQ(r.uid, 65534);
	T_EQ(chown(path, uid, 0), 0);

	/* Readable by others: the pool refuses it. */
	T_EQ(chmod(path, 0640), 0);
	T_EQ(try_pool(path, 4 * MiB, &p2, &t2), -EPERM);
	T_CHECK(strstr(last_log, "mode 0640"), "message: %s", last_log);
	tencache_exit(t2);
	T_EQ(chmod(path, 0600), 0);

	/* A symlink is not followed; a file off hugetlbfs is no reservation. */
	snprintf(link, sizeof(link), "%s.link", dir);	/* hugetlbfs has no symlinks */
	T_EQ(symlink(path, link), 0);
	T_EQ(try_pool(link, 4 * MiB, &p2, &t2), -EPERM);
	T_CHECK(strstr(last_log, "symbolic link"), "message: %s", last_log);
	tencache_exit(t2);
	unlink(link);
	snprintf(plain, sizeof(plain), "/tmp/tencache-notfs.XXXXXX");
	fd = mkstemp(plain);
	T_CHECK(fd >= 0 && !ftruncate(fd, 8 * MiB), "tmp file");
	T_EQ(try_pool(plain, 4 * MiB, &p2, &t2), -EINVAL);
	tencache_exit(t2);
	T_EQ(try_pool("/nonexistent/tencache-uid0", 4 * MiB, &p2, &t2), -ENOENT);
	tencache_exit(t2);
	if (fd >= 0) {
		close(fd);
		unlink(plain);
	}
}

static void test_node(struct tencache *tc)
{
	struct tencache_reservation r;
	struct tencache *t2;
	struct tencache_pool *p2 = NULL;
	struct tencache_pool_info info;
	long f0 = free_pages();

	T_EQ(tencache_reserve(tc, dir, 4 * MiB, 0, 0, &r), 0);
	T_CHECK(!strcmp(r.path, path0), "path %s", r.path);
	T_EQ(r.node, 0);
	T_EQ(r.allocated, 4 * MiB);
	T_EQ(free_pages_settled(f0 - 2), f0 - 2);
	/* A pool on node 0 finds it through /proc/mounts. */
	t2 = ctx(TENCACHE_POOL_RESERVED, NULL, 0);
	T_EQ(tencache_pool_create(t2, &p2, 4 * MiB, NULL, 0), 0);
	if (p2) {
		T_EQ(tencache_pool_info(p2, &info), 0);
		T_EQ(info.numa_node, 0);
		T_CHECK(strstr(info.reason, "-node0"), "reason: %s", info.reason);
		tencache_pool_destroy(p2);
	}
	tencache_exit(t2);
	T_EQ(tencache_reserve_release(tc, dir, 0), 0);
	T_EQ(tencache_reserve_info(dir, 0, &r), -ENOENT);
	T_EQ(free_pages_settled(f0), f0);
}

static void test_release(struct tencache *tc)
{
	struct tencache_reservation r;
	long f0 = free_pages(), want;

	T_EQ(tencache_reserve_info(dir, -1, &r), 0);
	T_EQ(tencache_reserve_release(tc, NULL, -1), 0);
	T_CHECK(access(path, F_OK) != 0, "file removed");
	want = f0 + (long)(r.allocated / (2 * MiB));
	T_EQ(free_pages_settled(want), want);
	T_EQ(tencache_reserve_info(dir, -1, &r), -ENOENT);
	T_EQ(tencache_reserve_release(tc, dir, -1), -ENOENT);
}

int main(void)
{
	struct tencache *tc;

	atexit(cleanup);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, on_signal);
	if (!setup())
		return T_EXIT_SKIP;
	tc = ctx(TENCACHE_POOL_AUTO, NULL, -1);
	test_bad_inputs(tc);
	test_no_mount();
	test_reserve_grow_shrink(tc);
	test_pool(tc);
	test_ownership(tc);
	test_node(tc);
	test_release(tc);
	tencache_exit(tc);
	return t_exit();
}
