/*
 * tencache-bench.c - benchmarks of libtencache against the plain ways, side by
 * side in one run; each run appends a results block (command, machine,
 * figures) to the file given with -o.
 *   io    staging bandwidth: tencache stage vs O_DIRECT pread/pwrite QD1 vs
 *         libaio QD8 1 MiB, on one file
 *   pin   time to get N GiB of pinned (and, with a GPU, registered) memory
 *         through each pool backend
 *   copy  pinned<->GPU bandwidth (needs a GPU; not written yet)
 * Uses only the public header, plus libaio for the baseline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tencache.h"

#define MiB (1ULL << 20)

static FILE *out;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A line to stdout and to the results file. */
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (out) {
		va_start(ap, fmt);
		vfprintf(out, fmt, ap);
		va_end(ap);
	}
}

static void header(int argc, char **argv)
{
	struct utsname u;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");
	unsigned long long kb = 0;
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
	say("\n# machine: %s %s %s, %ld CPUs, %.1f GiB RAM\n", u.nodename, u.release, u.machine,
	    sysconf(_SC_NPROCESSORS_ONLN), kb / 1048576.0);
}

static int usage(void)
{
	fprintf(stderr,
		"usage: tencache-bench io [-f FILE] [-s MiB] [-q QD] [-b KiB] [-o RESULTS]\n"
		"       tencache-bench pin [-g GiB[,GiB...]] [-o RESULTS]\n"
		"       tencache-bench copy [-o RESULTS]\n"
		"       tencache-bench replay [--help]\n");
	return 2;
}

/* ---- io ---- */

static double bw(uint64_t bytes, double s)
{
	return bytes / s / 1e9;
}

static int bench_stage(struct tencache *tc, int fd, uint64_t size, uint64_t bs, unsigned qd,
		       int write, double *gbs)
{
	struct tencache_pool *pool;
	struct tencache_stage *s;
	struct tencache_stage_cqe cqes[256];
	uint64_t off = 0, done = 0;
	unsigned inflight = 0;
	char *buf;
	double t0;
	int ret, i, n;

	ret = tencache_pool_create(tc, &pool, qd * bs < 2 * MiB ? 2 * MiB : qd * bs, NULL, 0);
	if (ret)
		return ret;
	ret = tencache_stage_create(tc, pool, &s);
	if (ret)
		goto out_pool;
	ret = tencache_pool_alloc(pool, qd * bs, (void **)&buf);
	if (ret)
		goto out_stage;
	memset(buf, 0x5a, qd * bs);
	t0 = now();
	while (done < size) {
		while (inflight < qd && off < size) {
			char *b = buf + (inflight % qd) * bs;

			ret = write ? tencache_stage_write(s, fd, b, bs, off, off, 0)
				    : tencache_stage_read(s, fd, b, bs, off, off, 0);
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
out_pool:
	tencache_pool_destroy(pool);
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
	struct io_event ev[64];
	uint64_t off = 0, done = 0;
	unsigned i, free_n = qd, *freel;
	char *buf;
	double t0;
	int ret, n;

	if (qd > 64 || io_setup(qd, &ctx))
		return -EINVAL;
	cbs = calloc(qd, sizeof(*cbs));
	ptrs = calloc(qd, sizeof(*ptrs));
	freel = calloc(qd, sizeof(*freel));
	if (!cbs || !ptrs || !freel || posix_memalign((void **)&buf, 4096, qd * bs)) {
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
		n = io_getevents(ctx, 1, 64, ev, NULL);
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
	return ret;
}

static int cmd_io(int argc, char **argv)
{
	const char *path = "/var/tmp/tencache-bench.dat";
	uint64_t size = 1024 * MiB, bs = MiB;
	unsigned qd = 32;
	struct tencache_params p = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN };
	struct tencache *tc;
	double r[3][2] = { { 0 } };
	int fd, opt, ret = 0, w, created;

	while ((opt = getopt(argc, argv, "f:s:q:b:o:")) != -1) {
		switch (opt) {
		case 'f': path = optarg; break;
		case 's': size = strtoull(optarg, NULL, 0) * MiB; break;
		case 'q': qd = atoi(optarg); break;
		case 'b': bs = strtoull(optarg, NULL, 0) * 1024; break;
		case 'o': out = fopen(optarg, "a"); break;
		default: return usage();
		}
	}
	if (!size || !bs || bs % 4096 || size % bs || !qd || qd > 256)
		return usage();
	header(argc, argv);
	created = access(path, F_OK) != 0;
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return 1;
	}
	p.queue_depth = qd;
	p.io_size = bs;
	ret = tencache_init(&tc, &p);
	if (ret)
		return 1;
	for (w = 1; w >= 0 && !ret; w--) {	/* write first, so reads find data */
		ret = bench_stage(tc, fd, size, bs, qd, w, &r[0][w]);
		if (!ret)
			ret = bench_pio(fd, size, bs, w, &r[1][w]);
		if (!ret)
			ret = bench_aio(fd, size, MiB, 8, w, &r[2][w]);
	}
	if (ret) {
		fprintf(stderr, "io: %s\n", strerror(-ret));
	} else {
		say("# io: %s, %llu MiB, O_DIRECT; GB/s (1e9 B/s)\n", path,
		    (unsigned long long)(size / MiB));
		say("%-36s %8s %8s\n", "method", "write", "read");
		say("tencache stage QD%-3u %5llu KiB          %8.3f %8.3f\n", qd,
		    (unsigned long long)bs / 1024, r[0][1], r[0][0]);
		say("%-19s%5llu KiB          %8.3f %8.3f\n", "pread/pwrite QD1",
		    (unsigned long long)bs / 1024, r[1][1], r[1][0]);
		say("%-36s %8.3f %8.3f\n", "libaio QD8 1024 KiB", r[2][1], r[2][0]);
	}
	tencache_exit(tc);
	close(fd);
	if (created)
		unlink(path);
	return ret ? 1 : 0;
}

/* ---- pin ---- */

static int cmd_pin(int argc, char **argv)
{
	static const unsigned backends[] = { TENCACHE_POOL_MODULE, TENCACHE_POOL_HUGETLB,
					     TENCACHE_POOL_THP };
	char sizes[128] = "1,8,32", *tok, *save;
	int opt;

	while ((opt = getopt(argc, argv, "g:o:")) != -1) {
		switch (opt) {
		case 'g': snprintf(sizes, sizeof(sizes), "%s", optarg); break;
		case 'o': out = fopen(optarg, "a"); break;
		default: return usage();
		}
	}
	header(argc, argv);
	say("# pin: seconds to create a pool (prefault + lock/pin%s), and s/GiB\n",
	    "; + cuMemHostRegister when a GPU is present");
	say("%-10s %6s %10s %10s\n", "backend", "GiB", "seconds", "s/GiB");
	for (tok = strtok_r(sizes, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t gib = strtoull(tok, NULL, 0);

		for (unsigned i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
			struct tencache_params p = { .pool_backend = backends[i],
						     .log_level = TENCACHE_LOG_NONE };
			struct tencache *tc;
			struct tencache_pool *pool;
			double t0, t;
			int ret;

			if (tencache_init(&tc, &p))
				return 1;
			t0 = now();
			ret = tencache_pool_create(tc, &pool, gib << 30, NULL, 0);
			t = now() - t0;
			if (ret)
				say("%-10s %6llu %10s %10s  (%s)\n", tencache_pool_backend_name(backends[i]),
				    (unsigned long long)gib, "-", "-", strerror(-ret));
			else
				say("%-10s %6llu %10.3f %10.4f\n", tencache_pool_backend_name(backends[i]),
				    (unsigned long long)gib, t, t / gib);
			if (!ret)
				tencache_pool_destroy(pool);
			tencache_exit(tc);
		}
	}
	/* TODO: cudaHostAlloc and cudaHostRegister(malloc) baselines need CUDA in the tool. */
	say("# baselines cudaHostAlloc / cudaHostRegister(4 KiB pages): not measured yet\n");
	return 0;
}

/* ---- copy ---- */

static int cmd_copy(int argc, char **argv)
{
	struct tencache *tc;
	int ret;

	(void)argc;
	(void)argv;
	if (tencache_init(&tc, NULL))
		return 1;
	ret = tencache_cuda_available(tc);
	tencache_exit(tc);
	if (ret) {
		fprintf(stderr, "copy: no CUDA GPU (%s)\n", strerror(-ret));
		return 77;
	}
	/* TODO: needs device memory and streams from the public API (GPU arena
	 * exists; streams/events come from the executor work). */
	fprintf(stderr, "copy: not implemented yet\n");
	return 1;
}

int bench_replay(int argc, char **argv);	/* replay.c */

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
	else
		return usage();
	if (out)
		fclose(out);
	return ret;
}
