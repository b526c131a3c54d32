/* od_lag.cu - the profiled (on-demand) step with the compute stream far
 * behind the CPU, as offload(overlap=True) runs backward: a gradient written
 * by a kernel still queued behind a long one is acquired by a host op (the
 * AdamW's gradient READ) right away. The acquire's copy to pinned memory must
 * wait for that kernel: the host must read the gradient, not what the GPU
 * space held before. A host WRITE of a tensor the queued kernels still read
 * likewise waits for them (its pinned copy's H2D ran before them). */
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

#define MiB (1ULL << 20)

int main(void)
{
	struct tencache_params tp = {};
	struct tencache_cache_params p = {};
	struct tencache_cache *c;
	struct tencache *tc;
	cudaStream_t st;
	const uint64_t B = 8 * MiB;
	uint64_t bad = 0;
	int clk = 0;
	void *gp, *pp, *hg, *hp;
	int P, G;

	tp.log_level = TENCACHE_LOG_WARN;
	tc = gpu_setup(&tp);
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));	/* kHz */
	p.gpu_budget = 64 * MiB;
	p.warmup_steps = 2;	/* both steps profiled: on demand */
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	P = tencache_tensor_register(c, B, TENCACHE_ROLE_PARAM_BF16);
	G = tencache_tensor_register(c, B, TENCACHE_ROLE_GRAD);
	T_CHECK(P >= 0 && G >= 0, "register %d %d", P, G);
	for (uint32_t s = 1; s <= 2; s++) {
		T_EQ(tencache_step_begin(c), 0);
		/* backward: reads P, writes G, behind ~300 ms of other kernels */
		T_EQ(tencache_acquire(c, P, TENCACHE_ACQ_READ, st, &pp), 0);
		T_EQ(tencache_acquire(c, G, TENCACHE_ACQ_WRITE, st, &gp), 0);
		gpu_busy<<<1, 1, 0, st>>>((long long)clk * 300);
		gpu_fill<<<64, 256, 0, st>>>((uint32_t *)gp, B / 4, 1000 + s);
		CK(cudaGetLastError());
		T_EQ(tencache_release(c, P, st, 0), 0);
		T_EQ(tencache_release(c, G, st, 0), 0);
		/* the AdamW host op, issued while the stream is still busy */
		T_EQ(tencache_acquire(c, G, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &hg), 0);
		T_EQ(tencache_acquire(c, P, TENCACHE_ACQ_WRITE | TENCACHE_ACQ_HOST, NULL, &hp), 0);
		for (uint64_t i = 0; i < B / 4; i++)
			bad += ((uint32_t *)hg)[i] != ((1000 + s) ^ (uint32_t)(i * 2654435761u));
		T_CHECK(bad == 0, "step %u: %llu gradient words read before the kernel wrote them",
			s, (unsigned long long)bad);
		memset(hp, 0x11 * s, B);	/* the update */
		T_EQ(tencache_release(c, G, NULL, 0), 0);
		T_EQ(tencache_release(c, P, NULL, 0), 0);
		T_EQ(tencache_step_end(c), 0);
	}
	tencache_cache_destroy(c);
	CK(cudaStreamDestroy(st));
	tencache_exit(tc);
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}
