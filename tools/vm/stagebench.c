// SPDX-License-Identifier: GPL-2.0
/*
 * stagebench.c - sequential staging bandwidth through tencache.ko (SUBMIT/
 * REAP into pool buffers) at queue depth 1, 8 and 32 with 1 MiB and 8 MiB
 * requests, side by side in one run with: plain O_DIRECT pread/pwrite,
 * io_uring with fixed (registered) buffers at the same depth, and libaio at
 * QD8 with 1 MiB requests (DeepSpeed's default). Ratios are against the
 * O_DIRECT pread/pwrite of the same request size. Also 4 KiB random-read
 * IOPS at QD 32, which shows the per-request overhead.
 *
 * Usage: stagebench [DEVICE_OR_FILE [MiB]]  (default $TENCACHE_NVME, 128 MiB)
 * Run in the QEMU guest by tests/vm/run-vm.sh: absolute figures under TCG
 * emulation mean little, the ratios and the IOPS a little more.
 * Prints TAP: "ok 1 - stagebench" when every run completed without error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libaio.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <uapi/tencache.h>

#define MiB (1ULL << 20)
#define MAXQD 32

static uint64_t total = 128 * MiB;	/* bytes per run */
static int dfd;				/* the device, O_DIRECT */
static int tfd = -1;			/* /dev/tencache */
static struct tencache_alloc pool;	/* MAXQD * 8 MiB pool buffer */
static unsigned char *anon;		/* same size, anonymous (baselines) */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* offset of request i: sequential, or pseudo-random 4 KiB-aligned */
static uint64_t req_off(uint64_t i, uint64_t rs, int rnd)
{
	if (!rnd)
		return (i * rs) % total;
	return ((i * 2654435761ULL) % (total / rs)) * rs;
}

/* ---- tencache.ko: SUBMIT/REAP ------------------------------------------ */
static int run_module(int wr, uint64_t rs, int qd, uint64_t n, int rnd)
{
	struct tencache_io io[MAXQD];
	struct tencache_cqe cqe[MAXQD];
	uint64_t sent = 0, done = 0;
	int inflight = 0, slot[MAXQD], nfree = qd, i;

	for (i = 0; i < qd; i++)
		slot[i] = i;
	while (done < n) {
		struct tencache_submit s = { .size = sizeof(s), .entry_size = sizeof(io[0]),
					     .ios = (uintptr_t)io };
		struct tencache_reap r = { .size = sizeof(r), .min_nr = 1, .max_nr = MAXQD,
					   .cqes = (uintptr_t)cqe, .entry_size = sizeof(cqe[0]) };

		while (nfree && sent < n) {
			int sl = slot[--nfree];

			io[s.nr++] = (struct tencache_io){
				.op = wr ? TENCACHE_OP_WRITE : TENCACHE_OP_READ,
				.fd = dfd, .handle = pool.handle,
				.buf_offset = sl * rs, .file_offset = req_off(sent, rs, rnd),
				.length = rs, .user_data = sl };
			sent++;
		}
		if (s.nr) {
			if (ioctl(tfd, TENCACHE_SUBMIT, &s) || s.queued != s.nr)
				return -1;
			inflight += s.nr;
		}
		if (ioctl(tfd, TENCACHE_REAP, &r))
			return -1;
		for (i = 0; i < (int)r.nr; i++) {
			if (cqe[i].result != (int64_t)rs)
				return -1;
			slot[nfree++] = cqe[i].user_data;
		}
		inflight -= r.nr;
		done += r.nr;
	}
	return 0;
}

/* ---- io_uring, fixed buffers ------------------------------------------- */
static int run_uring(int wr, uint64_t rs, int qd, uint64_t n, int rnd)
{
	struct io_uring ring;
	struct iovec iov = { anon, MAXQD * 8 * MiB };
	uint64_t sent = 0, done = 0;
	int slot[MAXQD], nfree = qd, i, ret = -1;

	if (io_uring_queue_init(qd, &ring, 0))
		return -1;
	if (io_uring_register_buffers(&ring, &iov, 1))
		goto out;
	for (i = 0; i < qd; i++)
		slot[i] = i;
	while (done < n) {
		struct io_uring_cqe *cqe;

		while (nfree && sent < n) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			int sl = slot[--nfree];

			if (wr)
				io_uring_prep_write_fixed(sqe, dfd, anon + sl * rs, rs,
							  req_off(sent, rs, rnd), 0);
			else
				io_uring_prep_read_fixed(sqe, dfd, anon + sl * rs, rs,
							 req_off(sent, rs, rnd), 0);
			sqe->user_data = sl;
			sent++;
		}
		if (io_uring_submit_and_wait(&ring, 1) < 0)
			goto out;
		while (io_uring_peek_cqe(&ring, &cqe) == 0) {
			if (cqe->res != (int)rs)
				goto out;
			slot[nfree++] = cqe->user_data;
			io_uring_cqe_seen(&ring, cqe);
			done++;
		}
	}
	ret = 0;
out:
	io_uring_queue_exit(&ring);
	return ret;
}

/* ---- libaio ------------------------------------------------------------- */
static int run_libaio(int wr, uint64_t rs, int qd, uint64_t n, int rnd)
{
	io_context_t ctx = 0;
	struct iocb cbs[MAXQD], *cbp[1];
	struct io_event ev[MAXQD];
	uint64_t sent = 0, done = 0;
	int slot[MAXQD], nfree = qd, i, got, ret = -1;

	ret = io_setup(qd, &ctx);
	if (ret) {
		errno = -ret;
		return -1;
	}
	ret = -1;
	for (i = 0; i < qd; i++)
		slot[i] = i;
	/* libaio returns -errno rather than setting errno: measure() prints it */
	while (done < n) {
		while (nfree && sent < n) {
			int sl = slot[nfree - 1];

			if (wr)
				io_prep_pwrite(&cbs[sl], dfd, anon + sl * rs, rs, req_off(sent, rs, rnd));
			else
				io_prep_pread(&cbs[sl], dfd, anon + sl * rs, rs, req_off(sent, rs, rnd));
			cbs[sl].data = (void *)(uintptr_t)sl;
			cbp[0] = &cbs[sl];
			got = io_submit(ctx, 1, cbp);
			if (got == -EAGAIN && sent > done)
				break;	/* the kernel's aio is short of room: reap first */
			if (got == -EAGAIN || got == -EINTR) {
				usleep(100);	/* nothing in flight to reap */
				continue;
			}
			if (got != 1) {
				errno = got < 0 ? -got : EIO;
				goto out;
			}
			nfree--;
			sent++;
		}
		got = io_getevents(ctx, 1, MAXQD, ev, NULL);
		if (got == -EINTR)
			continue;
		if (got < 0) {
			errno = -got;
			goto out;
		}
		for (i = 0; i < got; i++) {
			if (ev[i].res != rs) {
				errno = (long)ev[i].res < 0 ? -(long)ev[i].res : EIO;
				goto out;
			}
			slot[nfree++] = (uintptr_t)ev[i].data;
		}
		done += got;
	}
	ret = 0;
out:
	io_destroy(ctx);
	return ret;
}

/* ---- O_DIRECT pread/pwrite (QD 1 by nature) ---------------------------- */
static int run_pread(int wr, uint64_t rs, int qd, uint64_t n, int rnd)
{
	uint64_t i;

	for (i = 0; i < n; i++) {
		ssize_t r = wr ? pwrite(dfd, anon, rs, req_off(i, rs, rnd))
			       : pread(dfd, anon, rs, req_off(i, rs, rnd));
		if (r != (ssize_t)rs)
			return -1;
	}
	return 0;
}

typedef int (*engine_fn)(int wr, uint64_t rs, int qd, uint64_t n, int rnd);
static int failures;

/* bytes/s of one run (best of 2) */
static double measure(engine_fn fn, int wr, uint64_t rs, int qd, uint64_t n, int rnd)
{
	double best = 0;
	int rep;

	for (rep = 0; rep < 2; rep++) {
		double t0 = now();

		if (fn(wr, rs, qd, n, rnd)) {
			fprintf(stderr, "# run failed: %s\n", strerror(errno));
			failures++;
			return 0;
		}
		t0 = now() - t0;
		if (n * rs / t0 > best)
			best = n * rs / t0;
	}
	return best;
}

int main(int argc, char **argv)
{
	static const int qds[] = { 1, 8, 32 };
	static const uint64_t sizes[] = { MiB, 8 * MiB };
	const char *dev = argc > 1 ? argv[1] : getenv("TENCACHE_NVME");
	int wr, si, qi;

	if (argc > 2)
		total = strtoull(argv[2], NULL, 0) * MiB;
	if (!dev) {
		printf("ok 1 - stagebench # SKIP no device (argv[1] or TENCACHE_NVME)\n");
		return 4;
	}
	dfd = open(dev, O_RDWR | O_DIRECT);
	tfd = open(TENCACHE_DEV_PATH, O_RDWR);
	if (dfd < 0 || tfd < 0) {
		printf("ok 1 - stagebench # SKIP %s or %s: %s\n", dev, TENCACHE_DEV_PATH,
		       strerror(errno));
		return 4;
	}
	pool = (struct tencache_alloc){ .size = sizeof(pool), .length = MAXQD * 8 * MiB,
					.node = TENCACHE_NODE_ANY };
	anon = mmap(NULL, MAXQD * 8 * MiB, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (ioctl(tfd, TENCACHE_ALLOC, &pool) || anon == MAP_FAILED) {
		printf("not ok 1 - stagebench: buffers: %s\n", strerror(errno));
		return 1;
	}
	memset(anon, 0x5a, MAXQD * 8 * MiB);
	/* fill the range once so that reads read real data */
	measure(run_pread, 1, 8 * MiB, 1, total / (8 * MiB), 0);

	printf("# stagebench: %s, %llu MiB per run, MB/s (ratio vs O_DIRECT pread/pwrite of the same size)\n",
	       dev, (unsigned long long)(total / MiB));
	printf("# %-5s %-4s %-3s %16s %16s %16s\n", "dir", "req", "QD", "tencache.ko",
	       "io_uring fixed", "O_DIRECT (QD1)");
	for (wr = 0; wr < 2; wr++) {
		for (si = 0; si < 2; si++) {
			uint64_t rs = sizes[si], n = total / rs;
			double base = measure(run_pread, wr, rs, 1, n, 0);

			for (qi = 0; qi < 3; qi++) {
				double m = measure(run_module, wr, rs, qds[qi], n, 0);
				double u = measure(run_uring, wr, rs, qds[qi], n, 0);

				printf("# %-5s %-4s %-3d %8.0f (%4.2fx) %8.0f (%4.2fx) %8.0f\n",
				       wr ? "write" : "read", si ? "8M" : "1M", qds[qi],
				       m / 1e6, m / base, u / 1e6, u / base, base / 1e6);
			}
			if (si == 0) {
				double a = measure(run_libaio, wr, rs, 8, n, 0);

				printf("# %-5s %-4s %-3d libaio (DeepSpeed default) %8.0f (%4.2fx)\n",
				       wr ? "write" : "read", "1M", 8, a / 1e6, a / base);
			}
		}
	}
	{
		uint64_t n = 8192;
		double m = measure(run_module, 0, 4096, 32, n, 1) / 4096;
		double u = measure(run_uring, 0, 4096, 32, n, 1) / 4096;
		double p = measure(run_pread, 0, 4096, 1, n, 1) / 4096;

		printf("# 4 KiB random read IOPS: tencache.ko QD32 %.0f (%.2fx io_uring), io_uring fixed QD32 %.0f, O_DIRECT pread QD1 %.0f\n",
		       m, m / u, u, p);
	}
	if (failures) {
		printf("not ok 1 - stagebench: %d runs failed\n", failures);
		return 1;
	}
	printf("ok 1 - stagebench\n");
	return 0;
}
