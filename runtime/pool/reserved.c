/*
 * reserved.c - persistent reservations and the "reserved" pool backend.
 * A reservation is a file, tencache-uid<UID>[-node<N>], on a hugetlbfs mount
 * with 2 MiB pages, whose pages were allocated and zeroed once by
 * tencache_reserve (tencache-ctl reserve). hugetlbfs keeps a file's pages
 * until it is truncated or removed, so a later pool only maps pages that
 * exist: its cost is the page tables and the CUDA registration, not the
 * kernel's zeroing of every page (the first-touch cost of the other backends).
 */
#include <fcntl.h>
#include <linux/magic.h>
#include <mntent.h>
#include <numa.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAX_MOUNTS	16
#define FILL_CHUNK	(64ULL << 20)	/* work unit of the fault threads */
#define FILL_THREADS	64
#define MOUNT_HINT	"mount -t hugetlbfs -o pagesize=2M none /dev/hugepages"

/* Log lines of the reservation calls: with tc NULL, errors and warnings only. */
#define rlog(tc, level, ...)						\
	do {								\
		if ((tc) || (level) <= TENCACHE_LOG_WARN)		\
			tc_log(tc, level, __VA_ARGS__);			\
	} while (0)

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* 0 if dir is a hugetlbfs mount (or a folder in one) with 2 MiB pages. */
static int hugetlbfs_2m(const char *dir)
{
	struct statfs sf;

	if (statfs(dir, &sf))
		return -errno;
	if ((unsigned long)sf.f_type != HUGETLBFS_MAGIC || (uint64_t)sf.f_bsize != TC_2M)
		return -EINVAL;
	return 0;
}

int tc_hugetlbfs_mounts(char (*dirs)[256], int max)
{
	struct mntent ent;
	char buf[4096];
	FILE *f = setmntent("/proc/mounts", "re");
	int n = 0, i, dup;

	if (!f)
		return 0;
	while (n < max && getmntent_r(f, &ent, buf, sizeof(buf))) {
		if (strcmp(ent.mnt_type, "hugetlbfs") || strlen(ent.mnt_dir) >= sizeof(dirs[0]))
			continue;
		/* statfs gives the page size whether pagesize= was given or not. */
		if (hugetlbfs_2m(ent.mnt_dir))
			continue;
		for (i = 0, dup = 0; i < n; i++)
			dup |= !strcmp(dirs[i], ent.mnt_dir);
		if (!dup)
			snprintf(dirs[n++], sizeof(dirs[0]), "%s", ent.mnt_dir);
	}
	endmntent(f);
	return n;
}

/* -1 (any node) or a node that exists. */
static int node_valid(int node)
{
	char path[64];

	if (node == -1)
		return 1;
	if (node < 0 || node >= 4096)
		return 0;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", node);
	if (!access(path, F_OK))
		return 1;
	return node == 0 && numa_available() < 0;	/* a kernel without NUMA */
}

/* The file name in dir; -ENAMETOOLONG if it does not fit in n. */
static int res_name(char *buf, size_t n, const char *dir, int node)
{
	int len;

	if (node >= 0)
		len = snprintf(buf, n, "%s/tencache-uid%u-node%d", dir, (unsigned)geteuid(), node);
	else
		len = snprintf(buf, n, "%s/tencache-uid%u", dir, (unsigned)geteuid());
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/*
 * The caller's reservation file for node: in dir, else in the first 2 MiB
 * hugetlbfs mount that holds one. With create, where to make it when there
 * is none: dir, else the first writable mount. 0 (path set), -ENOENT (none;
 * why in msg), -EINVAL (dir is not a 2 MiB hugetlbfs).
 */
static int res_locate(const char *dir, int node, int create, char *path, size_t n,
		      char *msg, size_t msz)
{
	char dirs[MAX_MOUNTS][256];
	struct stat st;
	int nr, i, ret;

	if (dir) {
		ret = hugetlbfs_2m(dir);
		if (ret == -EINVAL)
			snprintf(msg, msz, "%s is not a hugetlbfs mount with 2 MiB pages "
				 "(mount one: mount -t hugetlbfs -o pagesize=2M none %s)", dir, dir);
		else if (ret)
			snprintf(msg, msz, "%s: %s", dir, strerror(-ret));
		if (!ret && (ret = res_name(path, n, dir, node)))
			snprintf(msg, msz, "%.200s...: name too long", dir);
		if (ret)
			return ret;
		if (create || !lstat(path, &st))
			return 0;
		snprintf(msg, msz, "no reservation %s (make one with tencache-ctl reserve)", path);
		return -ENOENT;
	}
	nr = tc_hugetlbfs_mounts(dirs, MAX_MOUNTS);
	if (!nr) {
		snprintf(msg, msz, "no hugetlbfs mount with 2 MiB pages in /proc/mounts "
			 "(as root: mkdir -p /dev/hugepages; " MOUNT_HINT ")");
		return -ENOENT;
	}
	for (i = 0; i < nr; i++)
		if (!res_name(path, n, dirs[i], node) && !lstat(path, &st))
			return 0;
	if (create) {
		for (i = 0; i < nr; i++) {
			if (!access(dirs[i], W_OK) && !res_name(path, n, dirs[i], node))
				return 0;
		}
		snprintf(msg, msz, "no writable hugetlbfs mount with 2 MiB pages (%s is not "
			 "writable: mount one with uid=%u, or as root: " MOUNT_HINT ")", dirs[0],
			 (unsigned)geteuid());
		return -EACCES;
	}
	if (res_name(path, n, dirs[0], node))
		path[0] = 0;
	snprintf(msg, msz, "no reservation (%s%s; make one with tencache-ctl reserve SIZE%s)",
		 path, nr > 1 ? " or in another mount" : "", node >= 0 ? " --node N" : "");
	return -ENOENT;
}

/*
 * Open path as a reservation of the caller: no symlink, a regular file on a
 * 2 MiB hugetlbfs, owned by the caller. The fd, or -errno with why in msg:
 * -EPERM for a file that is not the caller's to use.
 */
static int res_open(const char *path, int flags, struct stat *st, char *msg, size_t msz)
{
	int fd, ret;

	/* O_NONBLOCK: a FIFO planted under the name must not hang us. */
	fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		if (errno == ELOOP) {
			snprintf(msg, msz, "%s is a symbolic link: refused", path);
			return -EPERM;
		}
		snprintf(msg, msz, "%s: %s", path, strerror(errno));
		return ret == -EACCES ? -EPERM : ret;
	}
	if (fstat(fd, st)) {
		ret = -errno;
		snprintf(msg, msz, "fstat %s: %s", path, strerror(errno));
		goto err;
	}
	ret = -EPERM;
	if (!S_ISREG(st->st_mode)) {
		snprintf(msg, msz, "%s is not a regular file: refused", path);
		goto err;
	}
	if (st->st_uid != geteuid()) {
		snprintf(msg, msz, "%s belongs to uid %u, not to uid %u: refused", path,
			 (unsigned)st->st_uid, (unsigned)geteuid());
		goto err;
	}
	{
		struct statfs sf;

		if (fstatfs(fd, &sf) || (unsigned long)sf.f_type != HUGETLBFS_MAGIC ||
		    (uint64_t)sf.f_bsize != TC_2M) {
			snprintf(msg, msz, "%s is not on a hugetlbfs mount with 2 MiB pages", path);
			ret = -EINVAL;
			goto err;
		}
	}
	return fd;
err:
	close(fd);
	return ret;
}

/* Bytes of huge pages the file holds (hugetlbfs counts them in i_blocks). */
static uint64_t res_allocated(const struct stat *st)
{
	return (uint64_t)st->st_blocks * 512;
}

static void res_fill_info(struct tencache_reservation *r, const char *path,
			  const struct stat *st, int node, int in_use)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->path, sizeof(r->path), "%s", path);
	r->size = st->st_size;
	r->allocated = res_allocated(st);
	r->node = node;
	r->uid = st->st_uid;
	r->in_use = in_use;
}

/* ---- Faulting (and zeroing) the pages of a reservation, in parallel ---- */

struct fill_job {
	char *base;
	uint64_t len;		/* fault [0, len) */
	uint64_t zero_len;	/* and memset [0, zero_len): pages held before */
	int node;		/* bind the threads here; -1: no binding */
	uint64_t next;		/* next chunk offset (atomic) */
	uint64_t done;		/* bytes done (atomic) */
	unsigned running;	/* threads not finished (atomic) */
	int err;		/* first -errno (atomic) */
};

static void fill_bind(int node)
{
	struct bitmask *bm;

	if (node < 0 || numa_available() < 0)
		return;
	numa_run_on_node(node);
	/* Task policy: the huge pages these threads fault come from node only. */
	bm = numa_allocate_nodemask();
	if (bm) {
		numa_bitmask_setbit(bm, node);
		numa_set_membind(bm);
		numa_free_nodemask(bm);
	}
}

static void *fill_thread(void *arg)
{
	struct fill_job *j = arg;
	uint64_t off, len, z;
	int zero = 0, ret;

	fill_bind(j->node);
	while ((off = __atomic_fetch_add(&j->next, FILL_CHUNK, __ATOMIC_RELAXED)) < j->len) {
		if (__atomic_load_n(&j->err, __ATOMIC_RELAXED))
			break;
		len = j->len - off < FILL_CHUNK ? j->len - off : FILL_CHUNK;
		/*
		 * Fault first, then zero: a fault that finds no page fails the
		 * madvise instead of raising SIGBUS in memset.
		 */
		if (madvise(j->base + off, len, MADV_POPULATE_WRITE)) {
			ret = errno == EINVAL ? -EOPNOTSUPP : -errno;
			__atomic_compare_exchange_n(&j->err, &zero, ret, 0, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
			break;
		}
		z = off < j->zero_len ? (j->zero_len - off < len ? j->zero_len - off : len) : 0;
		if (z)
			memset(j->base + off, 0, z);
		__atomic_fetch_add(&j->done, len, __ATOMIC_RELAXED);
	}
	__atomic_fetch_sub(&j->running, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* One thread per CPU of node (of the machine for -1), at most FILL_THREADS. */
static unsigned fill_threads(int node, uint64_t len)
{
	long n = 0;
	uint64_t chunks = (len + FILL_CHUNK - 1) / FILL_CHUNK;

	if (node >= 0 && numa_available() >= 0) {
		struct bitmask *cpus = numa_allocate_cpumask();

		if (cpus && !numa_node_to_cpus(node, cpus))
			n = numa_bitmask_weight(cpus);
		if (cpus)
			numa_free_cpumask(cpus);
	}
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	if (n > FILL_THREADS)
		n = FILL_THREADS;
	if ((uint64_t)n > chunks)
		n = chunks ? chunks : 1;
	return n;
}

/* Fault [0, len) of the mapping and zero [0, zero_len); logs progress each second. */
static int fill(struct tencache *tc, char *base, uint64_t len, uint64_t zero_len, int node)
{
	struct fill_job j = { .base = base, .len = len, .zero_len = zero_len, .node = node };
	pthread_t tids[FILL_THREADS];
	unsigned n = fill_threads(node, len), started = 0, i;
	double t0 = mono(), last = t0;
	char a[32], b[32];

	j.running = n;
	for (i = 0; i < n; i++) {
		if (pthread_create(&tids[started], NULL, fill_thread, &j))
			break;
		started++;
	}
	if (!started) {		/* no threads at all: do it here */
		j.running = 1;
		fill_thread(&j);
	} else if (started < n) {
		__atomic_fetch_sub(&j.running, n - started, __ATOMIC_RELAXED);
	}
	while (__atomic_load_n(&j.running, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		if (mono() - last >= 1.0) {
			uint64_t done = __atomic_load_n(&j.done, __ATOMIC_RELAXED);

			last = mono();
			tc_fmt_bytes(a, sizeof(a), done);
			tc_fmt_bytes(b, sizeof(b), len);
			rlog(tc, TENCACHE_LOG_INFO, "reserve: %s of %s faulted%s (%.2f GiB/s, %u threads)",
			     a, b, zero_len ? " or zeroed" : "",
			     (double)done / TC_GIB / (last - t0), started);
		}
	}
	for (i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	return j.err;
}

/* What to write to have `more` more free huge pages (on node, if >= 0). */
static void explain_shortage(char *msg, size_t msz, const char *path, long need, long have,
			     int node)
{
	long nr = tc_hugetlb_count("nr_hugepages", node);
	char sz[32];

	tc_fmt_bytes(sz, sizeof(sz), (uint64_t)need * TC_2M);
	if (node >= 0)
		snprintf(msg, msz, "%s needs %ld more 2 MiB huge pages (%s) on node %d, %ld are "
			 "free there: as root, echo %ld > /sys/devices/system/node/node%d/"
			 "hugepages/hugepages-2048kB/nr_hugepages", path, need, sz, node, have,
			 (nr > 0 ? nr : 0) + need - have, node);
	else
		snprintf(msg, msz, "%s needs %ld more 2 MiB huge pages (%s), %ld are free: as "
			 "root, echo %ld > /proc/sys/vm/nr_hugepages", path, need, sz, have,
			 (nr > 0 ? nr : 0) + need - have);
}

TENCACHE_API int tencache_reserve(struct tencache *tc, const char *dir, uint64_t bytes,
				  int node, unsigned flags, struct tencache_reservation *r)
{
	char path[256], msg[768], a[32], b[32];
	struct stat st;
	uint64_t size, old_size, held;
	long need, have;
	int fd, ret, created = 0, grown = 0;
	char *map;
	double t0 = mono();

	if (!bytes || bytes > (1ULL << 56) || (flags & ~TENCACHE_RESERVE_ZERO))
		return -EINVAL;
	if (!node_valid(node)) {
		rlog(tc, TENCACHE_LOG_ERR, "reserve: node %d: no such NUMA node (-1: any)", node);
		return -EINVAL;
	}
	size = TC_ALIGN_UP(bytes, TC_2M);
	ret = res_locate(dir, node, 1, path, sizeof(path), msg, sizeof(msg));
	if (ret)
		goto err_log;

	fd = res_open(path, O_RDWR, &st, msg, sizeof(msg));
	if (fd == -ENOENT) {
		fd = res_open(path, O_RDWR | O_CREAT | O_EXCL, &st, msg, sizeof(msg));
		created = fd >= 0;
	}
	if (fd < 0) {
		ret = fd;
		goto err_log;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(msg, sizeof(msg), "%s is in use by a running pool (or another reserve): "
			 "%s", path, ret == -EBUSY ? "stop it first" : strerror(-ret));
		goto err_close;
	}
	/* Only the owner may see the pages (isolation from other users). */
	if ((st.st_mode & 07777) != 0600 && fchmod(fd, 0600)) {
		ret = -errno;
		snprintf(msg, sizeof(msg), "chmod 600 %s: %s", path, strerror(errno));
		goto err_close;
	}

	old_size = st.st_size;
	if (size < old_size && ftruncate(fd, size)) {	/* shrink: pages past size go back */
		ret = -errno;
		snprintf(msg, sizeof(msg), "truncating %s: %s", path, strerror(errno));
		goto err_close;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		snprintf(msg, sizeof(msg), "fstat %s: %s", path, strerror(errno));
		goto err_close;
	}
	held = res_allocated(&st);
	need = (long)(size / TC_2M) - (long)((held < size ? held : size) / TC_2M);
	have = tc_hugetlb_free_pages(node);
	if (need > have) {
		explain_shortage(msg, sizeof(msg), path, need, have, node);
		ret = -ENOMEM;
		goto err_undo;
	}
	if (size > old_size) {
		if (ftruncate(fd, size)) {
			ret = -errno;
			snprintf(msg, sizeof(msg), "growing %s: %s", path, strerror(errno));
			goto err_undo;
		}
		grown = 1;
	}
	if (need > 0 || (flags & TENCACHE_RESERVE_ZERO)) {
		/* A shared mapping promises its missing pages here, or fails. */
		map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			ret = -errno;
			if (ret == -ENOMEM)
				explain_shortage(msg, sizeof(msg), path, need,
						 tc_hugetlb_free_pages(node), node);
			else
				snprintf(msg, sizeof(msg), "mmap of %s: %s", path, strerror(errno));
			goto err_undo;
		}
		tc_fmt_bytes(a, sizeof(a), (uint64_t)(need > 0 ? need : 0) * TC_2M);
		rlog(tc, TENCACHE_LOG_INFO, "reserve: %s: faulting %s of new pages%s", path, a,
		     flags & TENCACHE_RESERVE_ZERO ? ", zeroing the pages held" : "");
		ret = fill(tc, map, size, (flags & TENCACHE_RESERVE_ZERO) ?
			   (old_size < size ? old_size : size) : 0, node);
		munmap(map, size);
		if (ret) {
			if (ret == -EOPNOTSUPP)
				snprintf(msg, sizeof(msg), "faulting %s: this kernel lacks "
					 "MADV_POPULATE_WRITE (5.14 or later needed)", path);
			else
				snprintf(msg, sizeof(msg), "faulting the pages of %s%s: %s (free "
					 "2 MiB huge pages%s: %ld)", path,
					 node >= 0 ? " on the node" : "", strerror(-ret),
					 node >= 0 ? " on the node" : "", tc_hugetlb_free_pages(node));
			goto err_undo;
		}
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		snprintf(msg, sizeof(msg), "fstat %s: %s", path, strerror(errno));
		goto err_undo;
	}
	if (res_allocated(&st) < size)
		rlog(tc, TENCACHE_LOG_WARN, "reserve: %s holds %llu of %llu bytes of pages", path,
		     (unsigned long long)res_allocated(&st), (unsigned long long)size);
	if (r)
		res_fill_info(r, path, &st, node, 0);
	tc_fmt_bytes(a, sizeof(a), size);
	tc_fmt_bytes(b, sizeof(b), old_size);
	rlog(tc, TENCACHE_LOG_INFO, "reserve: %s: %s (was %s), node %d, in %.2f s", path, a, b,
	     node, mono() - t0);
	close(fd);
	return 0;

err_undo:
	if (grown && ftruncate(fd, old_size))
		rlog(tc, TENCACHE_LOG_WARN, "reserve: cannot shrink %s back: %s", path,
		     strerror(errno));
	if (created)
		unlink(path);
err_close:
	close(fd);
err_log:
	rlog(tc, TENCACHE_LOG_ERR, "reserve: %s", msg);
	return ret;
}

TENCACHE_API int tencache_reserve_release(struct tencache *tc, const char *dir, int node)
{
	char path[256], msg[768], a[32];
	struct stat st;
	int fd, ret;

	if (!node_valid(node)) {
		rlog(tc, TENCACHE_LOG_ERR, "release: node %d: no such NUMA node (-1: any)", node);
		return -EINVAL;
	}
	ret = res_locate(dir, node, 0, path, sizeof(path), msg, sizeof(msg));
	if (ret)
		goto err_log;
	fd = res_open(path, O_RDWR, &st, msg, sizeof(msg));
	if (fd < 0) {
		ret = fd;
		goto err_log;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		snprintf(msg, sizeof(msg), "%s is in use by a running pool: %s", path,
			 ret == -EBUSY ? "stop it first" : strerror(-ret));
		close(fd);
		goto err_log;
	}
	/* Truncate first: the pages go back now even if someone has it open. */
	if (ftruncate(fd, 0) || unlink(path)) {
		ret = -errno;
		snprintf(msg, sizeof(msg), "removing %s: %s", path, strerror(errno));
		close(fd);
		goto err_log;
	}
	close(fd);
	tc_fmt_bytes(a, sizeof(a), res_allocated(&st));
	rlog(tc, TENCACHE_LOG_INFO, "release: released %s (%s of huge pages)", path, a);
	return 0;

err_log:
	rlog(tc, ret == -ENOENT ? TENCACHE_LOG_DEBUG : TENCACHE_LOG_ERR, "release: %s", msg);
	return ret;
}

/* 1 when some process holds the file's lock (a pool, or a reserve). */
static int res_in_use(const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), busy = 0;

	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB))
		busy = errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

TENCACHE_API int tencache_reserve_info(const char *dir, int node, struct tencache_reservation *r)
{
	char path[256], msg[768];
	struct stat st;
	int ret;

	if (!r || !node_valid(node))
		return -EINVAL;
	ret = res_locate(dir, node, 0, path, sizeof(path), msg, sizeof(msg));
	if (ret)
		return ret;
	if (lstat(path, &st))
		return -errno;
	res_fill_info(r, path, &st, node, S_ISREG(st.st_mode) && res_in_use(path));
	return 0;
}

/* ---- The pool backend ---- */

static void reserved_unmap(struct tencache_pool *pool)
{
	if (pool->map_base)
		munmap(pool->map_base, pool->map_len);
	if (pool->fd >= 0)
		close(pool->fd);	/* drops the lock */
	pool->map_base = NULL;
	pool->fd = -1;
}

/*
 * The reservation for the pool: the explicit file (params, then
 * $TENCACHE_POOL_FILE), else the pool's node's file, then the any-node file;
 * a pool without a node takes the any-node file, then any node's.
 */
static int reserved_find(struct tencache_pool *pool, char *path, size_t n, int *node,
			 char *msg, size_t msz)
{
	const char *file = pool->tc->p.pool_file;
	int cand[2], i, ret = -ENOENT, max = numa_available() >= 0 ? numa_max_node() : 0;

	if (!file)
		file = getenv("TENCACHE_POOL_FILE");
	if (file && *file) {
		snprintf(path, n, "%s", file);
		*node = -1;
		return 0;
	}
	cand[0] = pool->node;
	cand[1] = -1;
	for (i = 0; i < (pool->node >= 0 ? 2 : 1); i++) {
		ret = res_locate(NULL, cand[i], 0, path, n, msg, msz);
		if (ret != -ENOENT || !strncmp(msg, "no hugetlbfs", 12)) {
			*node = cand[i];
			return ret;
		}
	}
	if (pool->node < 0) {
		char dummy[256];

		for (i = 0; i <= max && i < 4096; i++) {
			if (!res_locate(NULL, i, 0, path, n, dummy, sizeof(dummy))) {
				*node = i;
				return 0;
			}
		}
	}
	return ret;	/* msg: the last candidate's "no reservation" */
}

static int reserved_map(struct tencache_pool *pool)
{
	struct tencache *tc = pool->tc;
	int forced = tc->p.pool_backend == TENCACHE_POOL_RESERVED;
	char path[256], msg[768], a[32], b[32];
	struct stat st;
	int node, ret;

#define REASON(...) snprintf(pool->reason, sizeof(pool->reason), __VA_ARGS__)
	ret = reserved_find(pool, path, sizeof(path), &node, msg, sizeof(msg));
	if (ret) {
		REASON("%s", msg);
		return ret == -EINVAL ? (forced ? -EINVAL : -ENODEV) : -ENOENT;
	}
	pool->fd = res_open(path, O_RDWR, &st, msg, sizeof(msg));
	if (pool->fd < 0) {
		ret = pool->fd;
		pool->fd = -1;
		REASON("%s", msg);
		return forced || ret == -ENOENT ? ret : -ENODEV;
	}
	if (st.st_mode & 077) {
		REASON("%s has mode %04o, others may read or change it: chmod 600 it, or run "
		       "tencache-ctl reserve again", path, (unsigned)(st.st_mode & 07777));
		ret = -EPERM;
		goto err;
	}
	if (flock(pool->fd, LOCK_EX | LOCK_NB)) {
		ret = errno == EWOULDBLOCK ? -EBUSY : -errno;
		REASON("%s is in use by another pool%s%s", path, ret == -EBUSY ? "" : ": ",
		       ret == -EBUSY ? "" : strerror(-ret));
		goto err;
	}
	tc_fmt_bytes(a, sizeof(a), st.st_size);
	tc_fmt_bytes(b, sizeof(b), pool->size);
	if ((uint64_t)st.st_size < pool->size) {
		REASON("%s holds %s, the pool needs %s (tencache-ctl reserve %lluM%s)", path, a, b,
		       (unsigned long long)(pool->size >> 20), node >= 0 ? " --node N" : "");
		ret = -ENOMEM;
		goto err;
	}
	/*
	 * The pages exist: the mapping only needs page tables. Holes (a file
	 * grown by hand) are promised by the mmap and faulted by the prefault.
	 */
	pool->map_len = pool->size;
	pool->map_base = mmap(NULL, pool->size, PROT_READ | PROT_WRITE, MAP_SHARED, pool->fd, 0);
	if (pool->map_base == MAP_FAILED) {
		ret = -errno;
		pool->map_base = NULL;
		REASON("mmap of %s: %s", path, strerror(errno));
		goto err;
	}
	pool->base = pool->map_base;
	ret = tc_prefault(pool->base, pool->size);
	if (ret) {
		REASON("prefault of %s: %s", path, strerror(-ret));
		reserved_unmap(pool);
		return ret;
	}
	tc_fmt_bytes(b, sizeof(b), res_allocated(&st));
	REASON("%s: %s reserved, %s of pages held before%s", path, a, b,
	       pool->node >= 0 && node < 0 ? ", pages on any node" : "");
	return 0;
err:
	close(pool->fd);
	pool->fd = -1;
	/* Forced: the real errno; auto: let the next backend try, reason logged. */
	return forced ? ret : -ENODEV;
#undef REASON
}

const struct tc_pool_ops tc_pool_reserved_ops = {
	.name = "reserved",
	.map = reserved_map,
	.unmap = reserved_unmap,
};
