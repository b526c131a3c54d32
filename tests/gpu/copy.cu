/* copy.cu - H2D and D2H through tencache_copy_async are byte-exact, with an
 * odd length split into chunks, into a GPU arena, with an event at the end;
 * the buffers straddle pool segments (separate CUDA registrations). */
#include <errno.h>
#include <string.h>

#include "gpu.h"

#define MiB (1ULL << 20)

int main(void)
{
	struct tencache_params p = {};
	struct tencache_gpu_arena *g;
	struct tencache_pool *pool;
	struct tencache *tc;
	const uint64_t len = 100 * MiB + 3;	/* 100 chunks + an odd tail */
	cudaStream_t st;
	cudaEvent_t ev;
	unsigned char *src, *dst;
	void *dev;
	uint64_t i;

	p.copy_chunk = MiB;
	p.segment_size = 64 * MiB;	/* 100 MiB buffers span 2-3 registrations */
	tc = gpu_setup(&p);
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
	T_EQ(tencache_pool_create(tc, &pool, 256 * MiB, NULL, 0), 0);
	T_EQ(tencache_pool_alloc(pool, len, (void **)&src), 0);
	T_EQ(tencache_pool_alloc(pool, len, (void **)&dst), 0);
	T_EQ(tencache_gpu_arena_create(tc, &g, 128 * MiB, NULL, 0), 0);
	T_EQ(tencache_gpu_arena_alloc(g, len, &dev), 0);
	for (i = 0; i < len; i++)
		src[i] = (unsigned char)(i * 7 + (i >> 20));
	memset(dst, 0, len);

	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_H2D, dev, src, len, st, NULL), 0);
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, dst, dev, len, st, ev), 0);
	CK(cudaEventSynchronize(ev));
	T_CHECK(!memcmp(src, dst, len), "round trip through the GPU");

	/* A device-side change shows up: the copies really went through the GPU. */
	CK(cudaMemsetAsync(dev, 0xab, 4096, st));
	T_EQ(tencache_copy_async(tc, TENCACHE_COPY_D2H, dst, dev, len, st, ev), 0);
	CK(cudaEventSynchronize(ev));
	T_CHECK(dst[0] == 0xab && dst[4095] == 0xab && dst[4096] == src[4096], "device data");

	T_EQ(tencache_gpu_arena_free(g, dev), 0);
	T_EQ(tencache_gpu_arena_free(g, dev), -ENOENT);
	tencache_gpu_arena_destroy(g);
	tencache_pool_destroy(pool);
	CK(cudaEventDestroy(ev));
	CK(cudaStreamDestroy(st));
	tencache_exit(tc);
	return t_exit();
}
