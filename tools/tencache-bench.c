/*
 * tencache-bench.c - benchmarks of libtencache against the plain ways, side by
 * side in one run; each run appends a results block (command, machine,
 * figures) to the file given with -o.
 *   io    staging bandwidth: tencache stage (a grid of queue depths and
 *         request sizes; each also read and written at once, beside taking
 *         turns) vs O_DIRECT pread/pwrite QD1 vs libaio QD8 1 MiB, on one
 *         file, against the raw block device's read bandwidth (-r)
 *   pin   time to get N GiB of pinned, GPU-registered memory through each pool
 *         backend, vs cudaHostAlloc and vs cudaHostRegister of malloc memory
 *   copy  pinned<->GPU bandwidth through tencache_copy_async vs raw
 *         cudaMemcpyAsync (gpu/bench-cuda.cu; needs nvcc at build time)
 * Uses only the public header, plus libaio and the CUDA runtime for the
 * baselines. Exit 0 done, 1 error, 2 usage, 77 no GPU (copy).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <libaio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tencache.h"
#include "bench.h"
#include "plan/plan.h"	/* tc_disk_turns_rate */

#define ALIGN_2M(x) (((x) + 2 * MiB - 1) / (2 * MiB) * (2 * MiB))

static FILE *out;

double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (out) {
		va_start(ap, fmt);
		vfprintf(out, fmt, ap);
		va_end(ap);
		fflush(out);
	}
}

int bench_set_out(const char *path)
{
	FILE *f = fopen(path, "a");

	if (!f)
		return -errno;
	if (out)
		fclose(out);
	out = f;
	return 0;
}

int bench_bad_value(const char *cmd, const struct option *lo, int c, const char *arg)
{
	const char *name = "?";

	for (const struct option *o = lo; o->name; o++)
		if (o->val == c)
			name = o->name;
	fprintf(stderr, "%s: bad value for --%s: %s\n", cmd, name, arg);
	return 2;
}

void bench_header(int argc, char **argv)
{
	struct utsname u;
	char line[256], cpu[256] = "";
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
	time_t t = time(NULL);
	int i;

	say("# command: tencache-bench");
	for (i = 0; i < argc; i++)
		say(" %s", argv[i]);
	uname(&u);
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "model name : %255[^\n]", cpu) == 1)
			break;
	if (f)
		fclose(f);
	strftime(line, sizeof(line), "%Y-%m-%d %H:%M UTC", gmtime(&t));
	say("\n# machine: %s %s %s, %ld CPUs (%s), %.1f GiB RAM; %s\n", u.nodename, u.release,
	    u.machine, sysconf(_SC_NPROCESSORS_ONLN), cpu[0] ? cpu : "?", kb / 1048576.0, line);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: tencache-bench io [-f FILE] [-s MiB] [-q QD[,QD...]] [-b KiB[,KiB...]]\n"
		"                         [-r BLOCKDEV] [-o RESULTS]\n"
		"       tencache-bench pin [-g GiB[,GiB...]] [-r ROUNDS] [-o RESULTS]\n"
		"       tencache-bench copy [-c CHUNK_MiB] [-n REPS] [-S] [-o RESULTS]\n"
		"       tencache-bench replay [--help]\n"
		"       tencache-bench decide [--help]\n"
		"  io: -r reads the raw device (O_DIRECT, read-only) for its bandwidth\n"
		"  copy: -S also sweeps copy_chunk\n");
	return 2;
}

/* Parse "a,b,c" into v[] (at most max); returns the count, 0 on a bad list. */
static unsigned parse_list(const char *s, unsigned long long *v, unsigned max)
{
	unsigned n = 0;
	char *end;

	while (*s && n < max) {
		v[n] = strtoull(s, &end, 0);
		if (end == s || !v[n])
			return 0;
		n++;
		if (!*end)
			return n;
		if (*end != ',')
			return 0;
		s = end + 1;
	}
	return 0;
}

/* ---- io ---- */

static double bw(uint64_t bytes, double s)
{
	return bytes / s / 1e9;
}

/* size bytes from base on, in bs requests, qd at a time; with go, the
 * timing starts once every party is set up (both ways at once) */
static int bench_stage(struct tencache *tc, int fd, uint64_t base, uint64_t size, uint64_t bs,
		       unsigned qd, int write, pthread_barrier_t *go, double *gbs)
{
	struct tencache_pool *pool;
	struct tencache_stage *s;
	struct tencache_stage_cqe cqes[256];
	uint64_t off = 0, done = 0, pool_size = ALIGN_2M(qd * bs);
	unsigned inflight = 0, slot = 0;
	char *buf;
	double t0;
	int ret, i, n;

	ret = tencache_pool_create(tc, &pool, pool_size, NULL, 0);
	if (!ret) {
		ret = tencache_stage_create(tc, pool, &s);
		if (ret)
			tencache_pool_destroy(pool);
	}
	if (go)		/* the other party must not wait forever */
		pthread_barrier_wait(go);
	if (ret)
		return ret;
	ret = tencache_pool_alloc(pool, qd * bs, (void **)&buf);
	if (ret)
		goto out_stage;
	memset(buf, 0x5a, qd * bs);
	t0 = now();
	while (done < size) {
		while (inflight < qd && off < size) {
			char *b = buf + (slot++ % qd) * bs;

			ret = write ? tencache_stage_write(s, fd, b, bs, base + off, off, 0)
				    : tencache_stage_read(s, fd, b, bs, base + off, off, 0);
			if (ret == -EAGAIN)
				break;
			if (ret)
				goto out_stage;
			off += bs;
			inflight++;
		}
		ret = tencache_stage_submit(s);
		if (ret < 0)
			goto out_stage;
		n = tencache_stage_wait(s, 1, cqes, 256, 0);
		if (n < 0) {
			ret = n;
			goto out_stage;
		}
		for (i = 0; i < n; i++) {
			if (cqes[i].res != (int64_t)bs) {
				fprintf(stderr, "stage: I/O at %llu: %lld\n",
					(unsigned long long)cqes[i].user_data, (long long)cqes[i].res);
				ret = cqes[i].res < 0 ? (int)cqes[i].res : -EIO;
				goto out_stage;
			}
			done += bs;
			inflight--;
		}
	}
	*gbs = bw(size, now() - t0);
	ret = 0;
out_stage:
	tencache_stage_destroy(s);
	tencache_pool_destroy(pool);
	return ret;
}

struct duplex_arg {
	struct tencache *tc;
	int fd, ret;
	uint64_t half, bs;
	unsigned qd;
	pthread_barrier_t *go;
	double gbs;
};

static void *duplex_writer(void *arg)
{
	struct duplex_arg *a = arg;

	a->ret = bench_stage(a->tc, a->fd, a->half, a->half, a->bs, a->qd, 1, a->go, &a->gbs);
	return NULL;
}

/*
 * Both ways at once, as the cache's staging workers run them (a stage
 * each): the first half read back while the second is written. *gbs: both
 * halves over the slower one's time, as the cache calibrates it.
 */
static int bench_stage_duplex(struct tencache *tc, int fd, uint64_t size, uint64_t bs,
			      unsigned qd, double *gbs)
{
	pthread_barrier_t go;
	struct duplex_arg w = { .tc = tc, .fd = fd, .half = size / 2, .bs = bs, .qd = qd,
				.go = &go };
	pthread_t th;
	double rd = 0;
	int ret;

	if (pthread_barrier_init(&go, NULL, 2))
		return -ENOMEM;
	ret = -pthread_create(&th, NULL, duplex_writer, &w);
	if (!ret) {
		ret = bench_stage(tc, fd, 0, size / 2, bs, qd, 0, &go, &rd);
		pthread_join(th, NULL);
		ret = ret ?: w.ret;
	}
	pthread_barrier_destroy(&go);
	if (!ret)	/* each moved size / 2: both over the slower's time */
		*gbs = 2 * (rd < w.gbs ? rd : w.gbs);
	return ret;
}

static int bench_pio(int fd, uint64_t size, uint64_t bs, int write, double *gbs)
{
	char *buf;
	uint64_t off;
	double t0;
	ssize_t n;

	if (posix_memalign((void **)&buf, 4096, bs))
		return -ENOMEM;
	memset(buf, 0x5a, bs);
	t0 = now();
	for (off = 0; off < size; off += bs) {
		n = write ? pwrite(fd, buf, bs, off) : pread(fd, buf, bs, off);
		if (n != (ssize_t)bs) {
			free(buf);
			return n < 0 ? -errno : -EIO;
		}
	}
	*gbs = bw(size, now() - t0);
	free(buf);
	return 0;
}

static int bench_aio(int fd, uint64_t size, uint64_t bs, unsigned qd, int write, double *gbs)
{
	io_context_t ctx = 0;
	struct iocb *cbs, **ptrs;
	struct io_event *ev;
	uint64_t off = 0, done = 0;
	unsigned i, free_n = qd, *freel;
	char *buf = NULL;
	double t0;
	int ret, n;

	if (!qd || qd > 256)
		return -EINVAL;
	ret = io_setup(qd, &ctx);
	if (ret)
		return ret;
	cbs = calloc(qd, sizeof(*cbs));
	ptrs = calloc(qd, sizeof(*ptrs));
	freel = calloc(qd, sizeof(*freel));
	ev = calloc(qd, sizeof(*ev));
	if (!cbs || !ptrs || !freel || !ev || posix_memalign((void **)&buf, 4096, qd * bs)) {
		ret = -ENOMEM;
		goto out;
	}
	memset(buf, 0x5a, qd * bs);
	for (i = 0; i < qd; i++)
		freel[i] = i;
	t0 = now();
	while (done < size) {
		unsigned k = 0;

		while (free_n && off < size) {
			i = freel[--free_n];
			if (write)
				io_prep_pwrite(&cbs[i], fd, buf + i * bs, bs, off);
			else
				io_prep_pread(&cbs[i], fd, buf + i * bs, bs, off);
			cbs[i].data = (void *)(uintptr_t)i;
			ptrs[k++] = &cbs[i];
			off += bs;
		}
		if (k && (ret = io_submit(ctx, k, ptrs)) != (int)k) {
			ret = ret < 0 ? ret : -EIO;
			goto out;
		}
		/* EINTR: even with no handler, after a stop and SIGCONT */
		do
			n = io_getevents(ctx, 1, qd, ev, NULL);
		while (n == -EINTR);
		if (n < 0) {
			ret = n;
			goto out;
		}
		for (int j = 0; j < n; j++) {
			if ((long)ev[j].res != (long)bs) {
				ret = (long)ev[j].res < 0 ? (int)(long)ev[j].res : -EIO;
				goto out;
			}
			freel[free_n++] = (uintptr_t)ev[j].data;
			done += bs;
		}
	}
	*gbs = bw(size, now() - t0);
	ret = 0;
out:
	io_destroy(ctx);
	free(cbs);
	free(ptrs);
	free(freel);
	free(ev);
	free(buf);
	return ret;
}

#define IO_MAX_LIST 16

static int cmd_io(int argc, char **argv)
{
	const char *path = "/var/tmp/tencache-bench.dat", *rawdev = NULL;
	uint64_t size = 1024 * MiB;
	unsigned long long qds[IO_MAX_LIST] = { 32 }, bss[IO_MAX_LIST] = { 1024 };
	unsigned nq = 1, nb = 1, iq, ib;
	struct tencache_params p = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN };
	struct tencache *tc;
	double st[IO_MAX_LIST][IO_MAX_LIST][3] = { { { 0 } } }, pio[IO_MAX_LIST][2] = { { 0 } };
	double aio8[2] = { 0 }, aio32[2] = { 0 };
	double raw_rd[2] = { 0, 0 }, raw_best = 0, best_w = 0, sw = 0, sr = 0, x;
	unsigned sw_q = 0, sw_b = 0, sr_q = 0, sr_b = 0;
	int fd, opt, ret = 0, w, created;

	while ((opt = getopt(argc, argv, "f:s:q:b:r:o:")) != -1) {
		switch (opt) {
		case 'f': path = optarg; break;
		case 's': size = strtoull(optarg, NULL, 0) * MiB; break;
		case 'q': nq = parse_list(optarg, qds, IO_MAX_LIST); break;
		case 'b': nb = parse_list(optarg, bss, IO_MAX_LIST); break;
		case 'r': rawdev = optarg; break;
		case 'o':
			if (bench_set_out(optarg)) {
				perror(optarg);
				return 1;
			}
			break;
		default: return usage();
		}
	}
	if (!size || !nq || !nb)
		return usage();
	for (iq = 0; iq < nq; iq++)
		if (qds[iq] > 256)
			return usage();
	for (ib = 0; ib < nb; ib++)
		if ((bss[ib] * 1024) % 4096 || size % (bss[ib] * 1024) || size % MiB)
			return usage();
	bench_header(argc, argv);
	created = access(path, F_OK) != 0;
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	ret = tencache_init(&tc, &p);
	if (ret) {
		close(fd);
		return 1;
	}
	/* Fill the file once, so that every write below overwrites allocated blocks. */
	ret = bench_aio(fd, size, MiB, 8, 1, &x);
	if (!ret && fdatasync(fd))
		ret = -errno;
	if (!ret)
		say("# io: %s, %llu MiB per figure, O_DIRECT, GB/s (1e9 B/s); filled first at "
		    "%.3f GB/s (libaio QD8 1 MiB, fresh file: %s)\n", path,
		    (unsigned long long)(size / MiB), x, created ? "yes" : "no");
	if (!ret && rawdev) {
		int rfd = open(rawdev, O_RDONLY | O_DIRECT);

		if (rfd < 0) {
			say("# raw device %s: %s (not measured)\n", rawdev, strerror(errno));
		} else {
			ret = bench_aio(rfd, size, MiB, 32, 0, &raw_rd[0]);
			if (!ret)
				ret = bench_aio(rfd, size, MiB, 128, 0, &raw_rd[1]);
			close(rfd);
			raw_best = raw_rd[0] > raw_rd[1] ? raw_rd[0] : raw_rd[1];
		}
	}
	for (ib = 0; ib < nb && !ret; ib++) {
		uint64_t bs = bss[ib] * 1024;

		for (iq = 0; iq < nq && !ret; iq++) {
			tencache_exit(tc);
			p.queue_depth = qds[iq];
			p.io_size = bs;
			ret = tencache_init(&tc, &p);
			if (ret) {
				tc = NULL;
				break;
			}
			/* Write first, read back: one figure each; then both at once */
			for (w = 1; w >= 0 && !ret; w--)
				ret = bench_stage(tc, fd, 0, size, bs, qds[iq], w, NULL,
						  &st[ib][iq][w]);
			if (!ret && size / 2 >= bs && (size / 2) % bs == 0)
				ret = bench_stage_duplex(tc, fd, size, bs, qds[iq], &st[ib][iq][2]);
		}
		for (w = 1; w >= 0 && !ret; w--)
			ret = bench_pio(fd, size, bs, w, &pio[ib][w]);
	}
	for (w = 1; w >= 0 && !ret; w--) {
		ret = bench_aio(fd, size, MiB, 8, w, &aio8[w]);
		if (!ret)
			ret = bench_aio(fd, size, MiB, 32, w, &aio32[w]);
	}
	if (ret) {
		fprintf(stderr, "io: %s\n", strerror(-ret));
		goto out;
	}
	if (rawdev && raw_best > 0)
		say("# raw device %s, read, libaio 1 MiB, O_DIRECT: QD32 %.3f, QD128 %.3f GB/s "
		    "(writes are not measured on the raw device: it holds a file system)\n",
		    rawdev, raw_rd[0], raw_rd[1]);
	say("%-24s %5s %8s %8s %8s %8s %8s\n", "method", "QD", "req KiB", "write", "read", "both",
	    "turns");
	for (ib = 0; ib < nb; ib++)
		for (iq = 0; iq < nq; iq++) {
			double *v = st[ib][iq];

			/* both: read + write at once; turns: the two one after the
			 * other at equal bytes, which both must beat for the disk
			 * to gain from doing them at once */
			say("%-24s %5llu %8llu %8.3f %8.3f %8.3f %8.3f\n", "tencache stage", qds[iq],
			    bss[ib], v[1], v[0], v[2], tc_disk_turns_rate(v[0], v[1]));
			if (qds[iq] >= 16 && st[ib][iq][1] > sw) {
				sw = st[ib][iq][1];
				sw_q = iq;
				sw_b = ib;
			}
			if (qds[iq] >= 16 && st[ib][iq][0] > sr) {
				sr = st[ib][iq][0];
				sr_q = iq;
				sr_b = ib;
			}
			if (st[ib][iq][1] > best_w)
				best_w = st[ib][iq][1];
		}
	for (ib = 0; ib < nb; ib++) {
		say("%-24s %5d %8llu %8.3f %8.3f\n", "pread/pwrite", 1, bss[ib], pio[ib][1],
		    pio[ib][0]);
		if (pio[ib][1] > best_w)
			best_w = pio[ib][1];
	}
	say("%-24s %5d %8d %8.3f %8.3f\n", "libaio", 8, 1024, aio8[1], aio8[0]);
	say("%-24s %5d %8d %8.3f %8.3f\n", "libaio", 32, 1024, aio32[1], aio32[0]);
	best_w = best_w > aio8[1] ? best_w : aio8[1];
	best_w = best_w > aio32[1] ? best_w : aio32[1];
	if (!sw) {
		say("# goal (stage >= 90%% of raw at QD >= 16): no QD >= 16 in -q\n");
		goto out;
	}
	if (!raw_best) {
		raw_best = aio32[0] > aio8[0] ? aio32[0] : aio8[0];
		for (ib = 0; ib < nb; ib++) {
			raw_best = raw_best > pio[ib][0] ? raw_best : pio[ib][0];
			for (iq = 0; iq < nq; iq++)
				raw_best = raw_best > st[ib][iq][0] ? raw_best : st[ib][iq][0];
		}
		say("# no raw device figure (-r): the read reference is the best read of any "
		    "method above\n");
	}
	say("# goal: stage >= 90%% of the raw bandwidth at QD >= 16: read %.3f (QD%llu %llu KiB) "
	    "/ raw %.3f = %.3f: %s\n", sr, qds[sr_q], bss[sr_b], raw_best, sr / raw_best,
	    sr >= 0.9 * raw_best ? "met" : "NOT met");
	say("#       write %.3f (QD%llu %llu KiB) / best write of any method %.3f = %.3f: %s\n",
	    sw, qds[sw_q], bss[sw_b], best_w, sw / best_w, sw >= 0.9 * best_w ? "met" : "NOT met");
out:
	tencache_exit(tc);
	close(fd);
	if (created)
		unlink(path);
	return ret ? 1 : 0;
}

/* ---- pin ---- */

static char last_log[512];

static void keep_log(void *arg, int level, const char *msg)
{
	(void)arg;
	(void)level;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void pin_row(const char *name, uint64_t gib, double prep, double reg, double rel,
		    const char *note)
{
	double total = prep + (reg > 0 ? reg : 0);

	say("%-30s %4llu %9.3f ", name, (unsigned long long)gib, prep);
	if (reg >= 0)
		say("%9.3f", reg);
	else
		say("%9s", "-");
	say(" %9.3f %8.4f %9.3f%s%s\n", total, total / gib, rel, note ? "  " : "", note ? note : "");
}

/*
 * The reserved pool's setup, outside the timed region: reserve gib GiB (the
 * one-time cost an admin pays with tencache-ctl reserve); *cost gets its
 * seconds. The row is printed by pin_release, with the release time.
 */
static int pin_reserve(struct tencache *tc, uint64_t gib, double *cost)
{
	double t0 = now();
	int ret;

	last_log[0] = 0;
	ret = tencache_reserve(tc, NULL, gib << 30, -1, 0, NULL);
	*cost = now() - t0;
	if (ret)
		say("%-30s %4llu %9s %9s %9s %8s %9s  (%s: %s)\n", "reserve (one-time)",
		    (unsigned long long)gib, "-", "-", "-", "-", "-", strerror(-ret), last_log);
	return ret;
}

static void pin_release(struct tencache *tc, uint64_t gib, double cost)
{
	double t0 = now();
	int ret = tencache_reserve_release(tc, NULL, -1);

	if (ret)
		say("# reserve release failed: %s: %s\n", strerror(-ret), last_log);
	else
		pin_row("reserve (one-time)", gib, cost, -1, now() - t0, NULL);
}

static int cmd_pin(int argc, char **argv)
{
	static const unsigned backends[] = { TENCACHE_POOL_MODULE, TENCACHE_POOL_HUGETLB,
					     TENCACHE_POOL_THP, TENCACHE_POOL_RESERVED };
	enum { NB = sizeof(backends) / sizeof(backends[0]) };
	unsigned long long sizes[16] = { 1, 8, 32 };
	unsigned nsz = 3, k, i, round, rounds = 1;
	int opt, gpu, cudart, resv_ok;
	struct tencache_reservation resv;

	while ((opt = getopt(argc, argv, "g:r:o:")) != -1) {
		switch (opt) {
		case 'g': nsz = parse_list(optarg, sizes, 16); break;
		case 'r': rounds = atoi(optarg); break;
		case 'o':
			if (bench_set_out(optarg)) {
				perror(optarg);
				return 1;
			}
			break;
		default: return usage();
		}
	}
	if (!nsz || rounds < 1 || rounds > 10)
		return usage();
	bench_header(argc, argv);
	/* The context exists before anything is timed, as in an application. */
	cudart = cb_init(0) == 0;
	{
		struct tencache *tc;

		if (tencache_init(&tc, NULL))
			return 1;
		gpu = !tencache_cuda_available(tc);
		tencache_exit(tc);
	}
	say("# pin: seconds to make N GiB pinned%s\n", gpu ? " and GPU-registered" : "");
	say("#   pool: prepare = tencache_pool_create (map, prefault with up to %ld threads, lock), "
	    "register = tencache_pool_cuda_register (one cuMemHostRegister per 1 GiB segment), "
	    "release = tencache_pool_destroy\n", sysconf(_SC_NPROCESSORS_ONLN));
	say("#   pool reserved: the same over a reservation (tencache_reserve of N GiB just before, "
	    "untimed; its one-time cost is the row just above it, reserve: prepare = tencache_reserve, "
	    "release = tencache_reserve_release)\n");
	/* Never resize or remove a reservation the user made. */
	resv_ok = tencache_reserve_info(NULL, -1, &resv) == -ENOENT;
	if (!resv_ok)
		say("#   pool reserved: skipped: you already hold the reservation %s; "
		    "tencache-ctl release to measure it\n", resv.path);
	say("#   cudaHostAlloc: prepare = the call, release = cudaFreeHost\n");
	say("#   cudaHostRegister: prepare = malloc + memset by one thread (4 KiB pages), "
	    "register = cudaHostRegister, release = cudaHostUnregister\n");
	if (!gpu)
		say("#   no GPU: pools are not registered; no CUDA baselines\n");
	else if (!cudart)
		say("#   built without nvcc: no cudaHostAlloc/cudaHostRegister baselines\n");
	say("%-30s %4s %9s %9s %9s %8s %9s\n", "method", "GiB", "prepare", "register", "total",
	    "s/GiB", "release");
	if (rounds > 1)
		say("#   %u rounds over the sizes: in a VM, round 1 also pays the host's first "
		    "touch of guest memory; later rounds reuse memory the host has backed\n", rounds);
	for (round = 0; round < rounds * nsz; round++) {
		uint64_t gib = sizes[k = round % nsz];
		double pool_total[NB], ha = 0, ha_free = 0, resv_cost = 0;
		int ha_ok = 0;

		if (rounds > 1 && k == 0)
			say("# round %u\n", round / nsz + 1);

		for (i = 0; i < NB; i++) {
			struct tencache_params p = { .flags = TENCACHE_F_NO_CUDA_REG,
						     .log_level = TENCACHE_LOG_ERR,
						     .log_fn = keep_log,
						     .pool_backend = backends[i] };
			struct tencache *tc;
			struct tencache_pool *pool;
			char name[64];
			double t0, prep, reg = -1, rel;
			int ret;

			pool_total[i] = -1;
			snprintf(name, sizeof(name), "pool %s", tencache_pool_backend_name(backends[i]));
			if (backends[i] == TENCACHE_POOL_RESERVED && !resv_ok)
				continue;
			if (tencache_init(&tc, &p))
				return 1;
			if (backends[i] == TENCACHE_POOL_RESERVED &&
			    pin_reserve(tc, gib, &resv_cost)) {
				tencache_exit(tc);
				continue;
			}
			if (gpu && tencache_cuda_available(tc)) {
				tencache_exit(tc);
				return 1;
			}
			last_log[0] = 0;
			t0 = now();
			ret = tencache_pool_create(tc, &pool, gib << 30, NULL, 0);
			prep = now() - t0;
			if (ret) {
				say("%-30s %4llu %9s %9s %9s %8s %9s  (%s: %s)\n", name,
				    (unsigned long long)gib, "-", "-", "-", "-", "-", strerror(-ret),
				    last_log);
				if (backends[i] == TENCACHE_POOL_RESERVED)
					pin_release(tc, gib, resv_cost);
				tencache_exit(tc);
				continue;
			}
			if (gpu) {
				t0 = now();
				ret = tencache_pool_cuda_register(pool);
				reg = now() - t0;
			}
			t0 = now();
			tencache_pool_destroy(pool);
			rel = now() - t0;
			if (backends[i] == TENCACHE_POOL_RESERVED)
				pin_release(tc, gib, resv_cost);
			tencache_exit(tc);
			if (ret) {
				say("%-30s %4llu: register failed: %s\n", name, (unsigned long long)gib,
				    strerror(-ret));
				continue;
			}
			pin_row(name, gib, prep, reg, rel, NULL);
			pool_total[i] = prep + (reg > 0 ? reg : 0);
		}
		if (gpu && cudart) {
			double touch, reg, unreg;
			int ret;

			ret = cb_pin_hostalloc(gib << 30, &ha, &ha_free);
			if (!ret) {
				ha_ok = 1;
				pin_row("cudaHostAlloc", gib, ha, -1, ha_free, NULL);
			} else {
				say("%-30s %4llu: %s\n", "cudaHostAlloc", (unsigned long long)gib,
				    strerror(-ret));
			}
			ret = cb_pin_register(gib << 30, &touch, &reg, &unreg);
			if (!ret)
				pin_row("malloc+cudaHostRegister", gib, touch, reg, unreg, NULL);
			else
				say("%-30s %4llu: %s\n", "malloc+cudaHostRegister",
				    (unsigned long long)gib, strerror(-ret));
		}
		if (ha_ok) {
			say("# goal: pool <= 1/10 of cudaHostAlloc at %llu GiB (%.3f s):",
			    (unsigned long long)gib, ha);
			for (i = 0; i < NB; i++) {
				if (pool_total[i] < 0)
					continue;
				say(" %s %.4f (%s)", tencache_pool_backend_name(backends[i]),
				    pool_total[i] / ha, pool_total[i] <= ha / 10 ? "met" : "NOT met");
			}
			say("\n");
		}
	}
	return 0;
}

/* ---- copy ---- */

static int cmd_copy(int argc, char **argv)
{
	struct cb_copy_opts o = { .gpu = 0, .reps = 5, .chunk = 0, .sweep = 0 };
	struct tencache *tc;
	int ret, opt;

	while ((opt = getopt(argc, argv, "c:n:So:")) != -1) {
		switch (opt) {
		case 'c': o.chunk = strtoull(optarg, NULL, 0) * MiB; break;
		case 'n': o.reps = atoi(optarg); break;
		case 'S': o.sweep = 1; break;
		case 'o':
			if (bench_set_out(optarg)) {
				perror(optarg);
				return 1;
			}
			break;
		default: return usage();
		}
	}
	if (o.reps < 1 || o.reps > 32)
		return usage();
	if (tencache_init(&tc, NULL))
		return 1;
	ret = tencache_cuda_available(tc);
	tencache_exit(tc);
	if (ret) {
		fprintf(stderr, "copy: skipped: no CUDA GPU (libtencache: %s)\n", strerror(-ret));
		return 77;
	}
	if (!bench_have_cudart) {
		fprintf(stderr, "copy: skipped: this tencache-bench was built without nvcc, so it "
			"has no raw cudaMemcpyAsync baseline; rebuild with nvcc on PATH\n");
		return 77;
	}
	bench_header(argc, argv);
	ret = cb_copy(&o);
	if (ret == -ENODEV) {
		fprintf(stderr, "copy: skipped: the CUDA runtime sees no GPU\n");
		return 77;
	}
	if (ret)
		fprintf(stderr, "copy: %s\n", strerror(-ret));
	return ret ? 1 : 0;
}


int main(int argc, char **argv)
{
	int ret;

	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "io"))
		ret = cmd_io(argc - 1, argv + 1);
	else if (!strcmp(argv[1], "pin"))
		ret = cmd_pin(argc - 1, argv + 1);
	else if (!strcmp(argv[1], "copy"))
		ret = cmd_copy(argc - 1, argv + 1);
	else if (!strcmp(argv[1], "replay"))
		ret = bench_replay(argc - 1, argv + 1);
	else if (!strcmp(argv[1], "decide"))
		ret = bench_decide(argc - 1, argv + 1);
	else
		return usage();
	if (out)
		fclose(out);
	return ret;
}
