/* nowait.cu - a host op acquired with TENCACHE_ACQ_NOWAIT while its gradient
 * is still being written by a kernel queued behind ~300 ms of others, as
 * offload(overlap=True) acquires the AdamW: in the planned steps the acquires
 * return without waiting (deferred_waits), the op is detached to a worker
 * thread, and its tencache_op_wait waits for the gradient's copy to the host
 * (a host function on the cache's ready stream): the worker must read the
 * gradient the kernel wrote, not what the pinned copy held before. */
#include <pthread.h>
#include <string.h>

#include "gpu.h"

#define MiB (1ULL << 20)
#define STEPS 4		/* one profiled, then planned */

struct job {
	struct tencache_cache *c;
	uint64_t token, words;
	uint32_t *hg, *hp, v;
	uint64_t bad;
	int wait_ret, done_ret;
};

/* The AdamW on its worker: wait for the tensors, read, update, done. */
static void *run_op(void *arg)
{
	struct job *j = (struct job *)arg;

	j->wait_ret = tencache_op_wait(j->c, j->token);
	for (uint64_t i = 0; i < j->words; i++)
		j->bad += j->hg[i] != (j->v ^ (uint32_t)(i * 2654435761u));
	memset(j->hp, 0x11 * (int)j->v, j->words * 4);
	j->done_ret = tencache_op_done(j->c, j->token);
	return NULL;
}

int main(void)
{
	struct tencache_params tp = {};
	struct tencache_cache_params p = {};
	struct tencache_cache_stats st0, st1;
	struct tencache_cache *c;
	struct tencache *tc;
	cudaStream_t st;
	const uint64_t B = 8 * MiB;
	int clk = 0;
	void *gp, *pp, *hg, *hp;
	int P, G;

	tp.log_level = TENCACHE_LOG_WARN;
	tc = gpu_setup(&tp);
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0));	/* kHz */
	p.gpu_budget = 64 * MiB;
	p.warmup_steps = 1;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	P = tencache_tensor_register(c, B, TENCACHE_ROLE_PARAM_BF16);
	G = tencache_tensor_register(c, B, TENCACHE_ROLE_GRAD);
	T_CHECK(P >= 0 && G >= 0, "register %d %d", P, G);
	memset(&st0, 0, sizeof(st0));
	for (uint32_t s = 1; s <= STEPS; s++) {
		struct job j = {};
		pthread_t th;

		if (s == 2)
			T_EQ(tencache_cache_stats(c, &st0, sizeof(st0)), 0);
		T_EQ(tencache_step_begin(c), 0);
		/* backward: reads P, writes G, behind ~300 ms of other kernels */
		T_EQ(tencache_acquire(c, P, TENCACHE_ACQ_READ, st, &pp), 0);
		T_EQ(tencache_acquire(c, G, TENCACHE_ACQ_WRITE, st, &gp), 0);
		gpu_busy<<<1, 1, 0, st>>>((long long)clk * 300);
		gpu_fill<<<64, 256, 0, st>>>((uint32_t *)gp, B / 4, 1000 + s);
		CK(cudaGetLastError());
		T_EQ(tencache_release(c, P, st, 0), 0);
		T_EQ(tencache_release(c, G, st, 0), 0);
		/* the AdamW host op, acquired while the stream is still busy */
		T_EQ(tencache_acquire(c, G, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST |
				      TENCACHE_ACQ_NOWAIT, NULL, &hg), 0);
		T_EQ(tencache_acquire(c, P, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				      TENCACHE_ACQ_HOST | TENCACHE_ACQ_NOWAIT, NULL, &hp), 0);
		T_EQ(tencache_op_detach(c, &j.token), 0);
		j.c = c;
		j.words = B / 4;
		j.hg = (uint32_t *)hg;
		j.hp = (uint32_t *)hp;
		j.v = 1000 + s;
		T_EQ(pthread_create(&th, NULL, run_op, &j), 0);
		pthread_join(th, NULL);
		T_EQ(j.wait_ret, 0);
		T_EQ(j.done_ret, 0);
		T_CHECK(j.bad == 0, "step %u: %llu gradient words read before the kernel wrote them",
			s, (unsigned long long)j.bad);
		T_EQ(tencache_release(c, G, NULL, 0), 0);
		T_EQ(tencache_release(c, P, NULL, 0), 0);
		T_EQ(tencache_step_end(c), 0);
	}
	T_EQ(tencache_cache_stats(c, &st1, sizeof(st1)), 0);
	T_CHECK(st1.planned_steps >= STEPS - 1, "%llu of %d steps planned",
		(unsigned long long)st1.planned_steps, STEPS);
	/* planned: the gradient's copy was behind the busy kernel every time */
	T_CHECK(st1.deferred_waits - st0.deferred_waits >= STEPS - 1,
		"%llu acquires deferred their waits in %d planned steps",
		(unsigned long long)(st1.deferred_waits - st0.deferred_waits), STEPS - 1);
	printf("nowait: %llu planned steps, %llu deferred waits\n",
	       (unsigned long long)st1.planned_steps,
	       (unsigned long long)(st1.deferred_waits - st0.deferred_waits));
	tencache_cache_destroy(c);
	CK(cudaStreamDestroy(st));
	tencache_exit(tc);
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}
