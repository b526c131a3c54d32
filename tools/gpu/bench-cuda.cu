/* SPDX-License-Identifier: MIT */
/*
 * bench-cuda.cu - the parts of tencache-bench that need the CUDA runtime,
 * built with nvcc when it is present (see bench.h):
 *   copy  H2D, D2H and bidirectional bandwidth, tencache_copy_async from a
 *         tencache pool into a GPU arena against raw cudaMemcpyAsync from
 *         cudaMallocHost memory into cudaMalloc memory, side by side; and a
 *         sweep of copy_chunk
 *   pin   the cudaHostAlloc and cudaHostRegister(malloc) baselines
 * Rates are bytes / CUDA-event time, in GB/s (1e9 B/s).
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "tencache.h"
#include "../bench.h"

extern "C" const int bench_have_cudart = 1;

#define BUF		GiB		/* each buffer: the largest size */
#define NR_SIZES	8		/* 64 KiB, 256 KiB, ... 1 GiB */
#define MAX_REPS	32

enum { RAW, TC, NR_METHODS };
enum { M_H2D, M_D2H, M_BIDIR, NR_MODES };

static int cu_fail(cudaError_t e, const char *what, int line)
{
	fprintf(stderr, "bench-cuda.cu:%d: %s: %s\n", line, what, cudaGetErrorString(e));
	return -EIO;
}
#define CU(call)							\
	do {								\
		cudaError_t e_ = (call);				\
		if (e_ != cudaSuccess)					\
			return cu_fail(e_, #call, __LINE__);		\
	} while (0)
#define TRY(call)							\
	do {								\
		int r_ = (call);					\
		if (r_)							\
			return r_;					\
	} while (0)

extern "C" int cb_init(int gpu)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || gpu >= n) {
		cudaGetLastError();
		return -ENODEV;
	}
	if (cudaSetDevice(gpu) != cudaSuccess || cudaFree(0) != cudaSuccess) {
		cudaGetLastError();
		return -ENODEV;
	}
	return 0;
}

/* ---- copy ---- */

/* One method's buffers: H2D goes h2d_src -> h2d_dst, D2H d2h_src -> d2h_dst. */
struct side {
	void *h2d_src, *h2d_dst, *d2h_src, *d2h_dst;
};

struct bench {
	struct side s[NR_METHODS];
	cudaStream_t st[2];
	cudaEvent_t e0, e1, e2;
};

static int issue(struct bench *b, struct tencache *tc, int m, int dir, uint64_t size,
		 cudaStream_t st)
{
	struct side *s = &b->s[m];
	int ret;

	if (m == RAW) {
		if (dir == M_H2D)
			CU(cudaMemcpyAsync(s->h2d_dst, s->h2d_src, size, cudaMemcpyHostToDevice, st));
		else
			CU(cudaMemcpyAsync(s->d2h_dst, s->d2h_src, size, cudaMemcpyDeviceToHost, st));
		return 0;
	}
	if (dir == M_H2D)
		ret = tencache_copy_async(tc, TENCACHE_COPY_H2D, s->h2d_dst, s->h2d_src, size, st,
					  NULL);
	else
		ret = tencache_copy_async(tc, TENCACHE_COPY_D2H, s->d2h_dst, s->d2h_src, size, st,
					  NULL);
	if (ret)
		fprintf(stderr, "copy: tencache_copy_async: %s\n", strerror(-ret));
	return ret;
}

static int batch(struct bench *b, struct tencache *tc, int m, int mode, uint64_t size,
		 unsigned iters)
{
	unsigned i;

	for (i = 0; i < iters; i++) {
		if (mode != M_D2H)
			TRY(issue(b, tc, m, M_H2D, size, b->st[0]));
		if (mode != M_H2D)
			TRY(issue(b, tc, m, M_D2H, size, b->st[mode == M_BIDIR]));
	}
	return 0;
}

/* Enough copies that one figure moves about 1 GiB per direction. */
static unsigned iters_for(uint64_t size)
{
	uint64_t n = GiB / size;

	return n < 4 ? 4 : n > 4096 ? 4096 : (unsigned)n;
}

/* GB/s of one batch of `mode` copies of `size`, after one untimed warm-up. */
static int measure(struct bench *b, struct tencache *tc, int m, int mode, uint64_t size,
		   double *gbs)
{
	unsigned iters = iters_for(size);
	float ms = 0;

	TRY(batch(b, tc, m, mode, size, 1));
	CU(cudaDeviceSynchronize());
	CU(cudaEventRecord(b->e0, b->st[0]));
	if (mode == M_BIDIR)
		CU(cudaStreamWaitEvent(b->st[1], b->e0, 0));
	TRY(batch(b, tc, m, mode, size, iters));
	if (mode == M_BIDIR) {
		CU(cudaEventRecord(b->e2, b->st[1]));
		CU(cudaStreamWaitEvent(b->st[0], b->e2, 0));
	}
	CU(cudaEventRecord(b->e1, b->st[0]));
	CU(cudaEventSynchronize(b->e1));
	CU(cudaEventElapsedTime(&ms, b->e0, b->e1));
	if (ms <= 0) {
		fprintf(stderr, "copy: event time %.6f ms\n", ms);
		return -EIO;
	}
	*gbs = (double)size * iters * (mode == M_BIDIR ? 2 : 1) / (ms * 1e-3) / 1e9;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n)
{
	double t[MAX_REPS];

	memcpy(t, v, n * sizeof(*v));
	qsort(t, n, sizeof(*t), cmp_double);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void fmt_size(char *buf, size_t n, uint64_t b)
{
	if (b >= GiB)
		snprintf(buf, n, "%llu GiB", (unsigned long long)(b / GiB));
	else if (b >= MiB)
		snprintf(buf, n, "%llu MiB", (unsigned long long)(b / MiB));
	else
		snprintf(buf, n, "%llu KiB", (unsigned long long)(b >> 10));
}

static int new_tc(struct tencache **tcp, uint64_t chunk, int gpu)
{
	struct tencache_params p;
	int ret;

	memset(&p, 0, sizeof(p));
	p.log_level = TENCACHE_LOG_WARN;
	p.copy_chunk = chunk;
	p.gpu = gpu;
	ret = tencache_init(tcp, &p);
	if (ret)
		return ret;
	ret = tencache_cuda_available(*tcp);
	if (ret) {
		fprintf(stderr, "copy: libtencache sees no GPU: %s\n", strerror(-ret));
		tencache_exit(*tcp);
		*tcp = NULL;
	}
	return ret;
}

/* The chunk sweep: tencache at each copy_chunk, raw alongside, 1 GiB and 64 MiB. */
static int sweep(struct bench *b, const struct cb_copy_opts *o)
{
	static const uint64_t chunks[] = { 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB,
					   32 * MiB, 64 * MiB, 256 * MiB, UINT64_MAX };
	enum { NC = sizeof(chunks) / sizeof(chunks[0]), NCOL = 4 };
	static const int col_mode[NCOL] = { M_H2D, M_D2H, M_BIDIR, M_BIDIR };
	static const uint64_t col_size[NCOL] = { GiB, GiB, GiB, 64 * MiB };
	static double v[NC + 1][NCOL][MAX_REPS];
	struct tencache *tcs[NC] = { NULL };
	unsigned r, c, k;
	char name[32];
	int ret = 0;

	for (c = 0; c < NC && !ret; c++)
		ret = new_tc(&tcs[c], chunks[c], o->gpu);
	for (r = 0; r < o->reps && !ret; r++) {
		for (k = 0; k < NCOL && !ret; k++) {
			ret = measure(b, NULL, RAW, col_mode[k], col_size[k], &v[NC][k][r]);
			for (c = 0; c < NC && !ret; c++)
				ret = measure(b, tcs[c], TC, col_mode[k], col_size[k], &v[c][k][r]);
		}
	}
	if (!ret) {
		say("# copy_chunk sweep: tencache_copy_async at each copy_chunk, GB/s, median of %u\n",
		    o->reps);
		say("%-14s %10s %10s %12s %12s\n", "copy_chunk", "H2D 1G", "D2H 1G", "bidir 1G",
		    "bidir 64M");
		for (c = 0; c <= NC; c++) {
			if (c == NC)
				snprintf(name, sizeof(name), "raw (cudart)");
			else if (chunks[c] == UINT64_MAX)
				snprintf(name, sizeof(name), "none (whole)");
			else
				fmt_size(name, sizeof(name), chunks[c]);
			say("%-14s %10.2f %10.2f %12.2f %12.2f\n", name, median(v[c][0], o->reps),
			    median(v[c][1], o->reps), median(v[c][2], o->reps),
			    median(v[c][3], o->reps));
		}
	}
	for (c = 0; c < NC; c++)
		tencache_exit(tcs[c]);	/* NULL is fine */
	return ret;
}

static int copy_run(struct bench *b, struct tencache *tc, const struct cb_copy_opts *o,
		    const char *backend)
{
	static double v[NR_METHODS][NR_MODES][NR_SIZES][MAX_REPS];
	double med[NR_METHODS][NR_MODES][NR_SIZES];
	double worst[2] = { 1e9, 1e9 }, peak[NR_METHODS] = { 0, 0 };
	unsigned worst_at[2] = { 0, 0 }, peak_at[NR_METHODS] = { 0, 0 };
	unsigned r, i, d, m;
	uint64_t size;
	char sz[32];
	int ok1, ok2;

	for (r = 0; r < o->reps; r++)
		for (i = 0; i < NR_SIZES; i++)
			for (d = 0; d < NR_MODES; d++)
				for (m = 0; m < NR_METHODS; m++)
					TRY(measure(b, tc, m, d, (64ULL << 10) << (2 * i), &v[m][d][i][r]));
	for (m = 0; m < NR_METHODS; m++)
		for (d = 0; d < NR_MODES; d++)
			for (i = 0; i < NR_SIZES; i++)
				med[m][d][i] = median(v[m][d][i], o->reps);

	say("# copy: pinned host <-> GPU %d, GB/s (1e9 B/s) from CUDA events, median of %u; "
	    "each figure moves about 1 GiB per direction (at least 4 copies, at most 4096)\n",
	    o->gpu, o->reps);
	say("# raw: cudaMemcpyAsync, cudaMallocHost -> cudaMalloc memory, whole copies\n");
	fmt_size(sz, sizeof(sz), o->chunk);
	say("# tencache: tencache_copy_async, %s pool (CUDA-registered per segment) -> GPU "
	    "arena, copy_chunk %s\n", backend, o->chunk ? sz : "default");
	say("# bidir: H2D on one stream and D2H on another at once; the sum of both\n");
	say("%-8s | %7s %7s %6s | %7s %7s %6s | %7s %7s %6s\n", "size", "H2D raw", "tc", "ratio",
	    "D2H raw", "tc", "ratio", "bi raw", "tc", "ratio");
	for (i = 0; i < NR_SIZES; i++) {
		size = (64ULL << 10) << (2 * i);
		fmt_size(sz, sizeof(sz), size);
		say("%-8s", sz);
		for (d = 0; d < NR_MODES; d++)
			say(" | %7.2f %7.2f %6.3f", med[RAW][d][i], med[TC][d][i],
			    med[TC][d][i] / med[RAW][d][i]);
		say("\n");
		for (d = 0; d < 2; d++) {
			double q = med[TC][d][i] / med[RAW][d][i];

			if (size >= 4 * MiB && q < worst[d]) {
				worst[d] = q;
				worst_at[d] = i;
			}
		}
		for (m = 0; m < NR_METHODS; m++) {
			if (med[m][M_BIDIR][i] > peak[m]) {
				peak[m] = med[m][M_BIDIR][i];
				peak_at[m] = i;
			}
		}
	}
	ok1 = worst[0] >= 0.95 && worst[1] >= 0.95;
	say("# goal: tencache >= 95%% of raw for sizes >= 4 MiB: lowest ratio H2D %.3f (at ",
	    worst[0]);
	fmt_size(sz, sizeof(sz), (64ULL << 10) << (2 * worst_at[0]));
	say("%s), D2H %.3f (at ", sz, worst[1]);
	fmt_size(sz, sizeof(sz), (64ULL << 10) << (2 * worst_at[1]));
	say("%s): %s\n", sz, ok1 ? "met" : "NOT met");
	ok2 = peak[TC] >= 0.90 * peak[RAW];
	fmt_size(sz, sizeof(sz), (64ULL << 10) << (2 * peak_at[TC]));
	say("# goal: tencache bidirectional peak >= 90%% of raw's: tencache %.2f GB/s (at %s), ",
	    peak[TC], sz);
	fmt_size(sz, sizeof(sz), (64ULL << 10) << (2 * peak_at[RAW]));
	say("raw %.2f GB/s (at %s), ratio %.3f: %s\n", peak[RAW], sz, peak[TC] / peak[RAW],
	    ok2 ? "met" : "NOT met");
	return 0;
}

extern "C" int cb_copy(const struct cb_copy_opts *o)
{
	struct tencache_gpu_arena *g = NULL;
	struct tencache_pool *pool = NULL;
	struct tencache_pool_info info;
	struct tencache *tc = NULL;
	struct bench b;
	struct side *raw = &b.s[RAW], *t = &b.s[TC];
	int ret;

	if (o->reps < 1 || o->reps > MAX_REPS)
		return -EINVAL;
	memset(&b, 0, sizeof(b));
	TRY(cb_init(o->gpu));
	TRY(new_tc(&tc, o->chunk, o->gpu));

	/* tencache side: a 2 GiB pool (one buffer per direction), a 2 GiB GPU arena. */
	ret = tencache_pool_create(tc, &pool, 2 * BUF, NULL, 0);
	if (!ret)
		ret = tencache_pool_info(pool, &info);
	if (!ret && !info.cuda_registered)
		ret = -EIO;
	if (!ret)
		ret = tencache_pool_alloc(pool, BUF, &t->h2d_src);
	if (!ret)
		ret = tencache_pool_alloc(pool, BUF, &t->d2h_dst);
	if (!ret)
		ret = tencache_gpu_arena_create(tc, &g, 2 * BUF, NULL, 0);
	if (!ret)
		ret = tencache_gpu_arena_alloc(g, BUF, &t->h2d_dst);
	if (!ret)
		ret = tencache_gpu_arena_alloc(g, BUF, &t->d2h_src);
	if (ret) {
		fprintf(stderr, "copy: tencache setup: %s\n", strerror(-ret));
		goto out;
	}
	ret = -EIO;
	if (cudaMallocHost(&raw->h2d_src, BUF) || cudaMallocHost(&raw->d2h_dst, BUF) ||
	    cudaMalloc(&raw->h2d_dst, BUF) || cudaMalloc(&raw->d2h_src, BUF) ||
	    cudaStreamCreateWithFlags(&b.st[0], cudaStreamNonBlocking) ||
	    cudaStreamCreateWithFlags(&b.st[1], cudaStreamNonBlocking) ||
	    cudaEventCreate(&b.e0) || cudaEventCreate(&b.e1) || cudaEventCreate(&b.e2)) {
		fprintf(stderr, "copy: CUDA setup: %s\n", cudaGetErrorString(cudaGetLastError()));
		goto out;
	}
	/* Touch everything once, with real data. */
	memset(raw->h2d_src, 0x5a, BUF);
	memset(raw->d2h_dst, 0, BUF);
	memset(t->h2d_src, 0x5a, BUF);
	memset(t->d2h_dst, 0, BUF);
	if (cudaMemset(raw->d2h_src, 0xa5, BUF) || cudaMemset(t->d2h_src, 0xa5, BUF) ||
	    cudaDeviceSynchronize()) {
		fprintf(stderr, "copy: cudaMemset failed\n");
		goto out;
	}

	ret = copy_run(&b, tc, o, tencache_pool_backend_name(info.backend));
	/* A check that the timed copies moved the bytes: the last D2H landed. */
	if (!ret && (((unsigned char *)t->d2h_dst)[BUF - 1] != 0xa5 ||
		     ((unsigned char *)raw->d2h_dst)[BUF - 1] != 0xa5)) {
		fprintf(stderr, "copy: D2H destination does not hold the device's bytes\n");
		ret = -EIO;
	}
	if (!ret && o->sweep)
		ret = sweep(&b, o);
out:
	cudaDeviceSynchronize();
	if (b.e0)
		cudaEventDestroy(b.e0);
	if (b.e1)
		cudaEventDestroy(b.e1);
	if (b.e2)
		cudaEventDestroy(b.e2);
	if (b.st[0])
		cudaStreamDestroy(b.st[0]);
	if (b.st[1])
		cudaStreamDestroy(b.st[1]);
	cudaFreeHost(raw->h2d_src);
	cudaFreeHost(raw->d2h_dst);
	cudaFree(raw->h2d_dst);
	cudaFree(raw->d2h_src);
	tencache_gpu_arena_destroy(g);
	tencache_pool_destroy(pool);
	tencache_exit(tc);
	return ret;
}

/* ---- pin baselines ---- */

extern "C" int cb_pin_hostalloc(uint64_t bytes, double *t_alloc, double *t_free)
{
	void *p = NULL;
	double t0;
	cudaError_t e;

	t0 = now();
	e = cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
	*t_alloc = now() - t0;
	if (e != cudaSuccess) {
		fprintf(stderr, "pin: cudaHostAlloc(%llu): %s\n", (unsigned long long)bytes,
			cudaGetErrorString(e));
		cudaGetLastError();
		return -ENOMEM;
	}
	t0 = now();
	e = cudaFreeHost(p);
	*t_free = now() - t0;
	return e == cudaSuccess ? 0 : cu_fail(e, "cudaFreeHost", __LINE__);
}

extern "C" int cb_pin_register(uint64_t bytes, double *t_touch, double *t_reg, double *t_unreg)
{
	char *p = (char *)malloc(bytes);
	double t0;
	cudaError_t e;
	uintptr_t a;

	if (!p)
		return -ENOMEM;
	/* 4 KiB pages whatever the THP mode is (glibc mmaps a block this big). */
	a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095;
	madvise((void *)a, bytes - (a - (uintptr_t)p), MADV_NOHUGEPAGE);
	t0 = now();
	memset(p, 1, bytes);
	*t_touch = now() - t0;
	t0 = now();
	e = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
	*t_reg = now() - t0;
	if (e != cudaSuccess) {
		fprintf(stderr, "pin: cudaHostRegister(%llu): %s\n", (unsigned long long)bytes,
			cudaGetErrorString(e));
		cudaGetLastError();
		free(p);
		return -EIO;
	}
	t0 = now();
	e = cudaHostUnregister(p);
	*t_unreg = now() - t0;
	free(p);
	return e == cudaSuccess ? 0 : cu_fail(e, "cudaHostUnregister", __LINE__);
}
