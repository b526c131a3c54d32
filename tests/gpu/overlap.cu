/* overlap.cu - an H2D and a D2H on two streams run at the same time: together
 * they take clearly less than one after the other. Prints the rates. */
#include <time.h>

#include "gpu.h"

#define MiB (1ULL << 20)
#define LEN (512 * MiB)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	struct tencache_params p = {};
	struct tencache_pool *pool;
	struct tencache *tc;
	cudaStream_t s1, s2;
	char *h1, *h2;
	void *d1, *d2;
	double t0, th2d, td2h, tboth;

	tc = gpu_setup(&p);
	CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
	CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
	CK(cudaMalloc(&d1, LEN));
	CK(cudaMalloc(&d2, LEN));
	T_EQ(tencache_pool_create(tc, &pool, 2 * LEN, NULL, 0), 0);
	T_EQ(tencache_pool_alloc(pool, LEN, (void **)&h1), 0);
	T_EQ(tencache_pool_alloc(pool, LEN, (void **)&h2), 0);

	/* Warm up both directions. */
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, d1, h1, LEN, s1, NULL), 0);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, h2, d2, LEN, s2, NULL), 0);
	CK(cudaDeviceSynchronize());

	t0 = now();
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, d1, h1, LEN, s1, NULL), 0);
	CK(cudaStreamSynchronize(s1));
	th2d = now() - t0;
	t0 = now();
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, h2, d2, LEN, s2, NULL), 0);
	CK(cudaStreamSynchronize(s2));
	td2h = now() - t0;
	t0 = now();
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, d1, h1, LEN, s1, NULL), 0);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, h2, d2, LEN, s2, NULL), 0);
	CK(cudaDeviceSynchronize());
	tboth = now() - t0;

	printf("H2D %.1f GB/s, D2H %.1f GB/s, both at once %.1f GB/s aggregate\n",
	       LEN / th2d / 1e9, LEN / td2h / 1e9, 2.0 * LEN / tboth / 1e9);
	T_CHECK(tboth < 0.8 * (th2d + td2h), "no overlap: %.3f s together, %.3f + %.3f apart",
		tboth, th2d, td2h);
	tencache_pool_destroy(pool);
	CK(cudaFree(d1));
	CK(cudaFree(d2));
	tencache_exit(tc);
	return t_exit();
}
