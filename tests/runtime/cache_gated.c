/* cache_gated.c - a prefetch of a detached host op's output waits for the
 * op inside the cache ("gated copies", cache.c), not in front of the other
 * copies. Host mode. Each step: a GPU op reads Q, one reads P; then a host
 * op rewrites P, detached, and one rewrites Q, inline. The next step's
 * prefetch of P is issued before Q's, while P's op still runs: that op
 * finishes only once the caller has Q (else it times out and the test
 * fails). If P's copy held the H2D stream (or the caller) until its op was
 * done, Q's copy would wait behind it for an op that waits for Q. Every
 * value is checked, and the held copies are counted. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tencache.h"
#include "step_gen.h"	/* t_register_fill */
#include "test.h"

enum { Q, P, X, NT };
#define KiB	1024ULL
#define STEPS	6

static const uint64_t bytes[NT] = { 256 * KiB, 512 * KiB, 128 * KiB };
static uint32_t version[NT];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int q_step = -1;		/* the last step whose Q the caller acquired */

struct job {
	struct tencache_cache *c;
	uint64_t token;
	uint32_t *ptr;
	int step, timed_out, stale, done_ret;
	pthread_t th;
};

/* P's host op: waits until the caller has the next step's Q, then rewrites P. */
static void *p_op(void *arg)
{
	struct job *j = arg;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	pthread_mutex_lock(&lock);
	/* not in the profiled step: entering the plan waits for every op */
	while (j->step > 0 && q_step <= j->step && !j->timed_out)
		j->timed_out = pthread_cond_timedwait(&cond, &lock, &until) == ETIMEDOUT;
	pthread_mutex_unlock(&lock);
	j->stale = !t_tensor_check(j->ptr, bytes[P], P, version[P]);
	version[P]++;
	t_tensor_fill(j->ptr, bytes[P], P, version[P]);
	j->done_ret = tencache_op_done(j->c, j->token);
	return NULL;
}

static int gpu_read(struct tencache_cache *c, int id, int step)
{
	void *p, *x;
	int ret = tencache_acquire(c, id, TENCACHE_ACQ_READ, NULL, &p);

	if (ret)
		return ret;
	if (id == Q) {
		pthread_mutex_lock(&lock);
		q_step = step;
		pthread_cond_broadcast(&cond);
		pthread_mutex_unlock(&lock);
	}
	ret = tencache_acquire(c, X, id == Q ? TENCACHE_ACQ_WRITE : TENCACHE_ACQ_READ, NULL, &x);
	if (ret)
		return ret;
	if (!t_tensor_check(p, bytes[id], id, version[id])) {
		fprintf(stderr, "step %d: the GPU op read a stale %s\n", step, id == Q ? "Q" : "P");
		return -EIO;
	}
	ret = tencache_release(c, id, NULL, 10000);
	return ret ?: tencache_release(c, X, NULL, 0);
}

/* The previous step's P op is done (joined): its tensor is released. */
static int retire(struct tencache_cache *c, struct job *j)
{
	pthread_join(j->th, NULL);
	j->th = 0;
	if (j->timed_out || j->stale || j->done_ret) {
		fprintf(stderr, "P's op of step %d: timed out %d (the caller never got Q), "
			"stale %d, done %d\n", j->step, j->timed_out, j->stale, j->done_ret);
		return -EDEADLK;
	}
	return tencache_release(c, P, NULL, 0);
}

static int step(struct tencache_cache *c, struct job *j, int s)
{
	void *h;
	int ret = tencache_step_begin(c);

	ret = ret ?: gpu_read(c, Q, s);
	if (!ret && j->th)
		ret = retire(c, j);
	ret = ret ?: gpu_read(c, P, s);
	/* P's op, detached */
	ret = ret ?: tencache_acquire(c, P, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				      TENCACHE_ACQ_HOST, NULL, &h);
	ret = ret ?: tencache_op_detach(c, &j->token);
	if (ret)
		return ret;
	*j = (struct job){ .c = c, .token = j->token, .ptr = h, .step = s };
	if (pthread_create(&j->th, NULL, p_op, j)) {
		j->th = 0;
		tencache_op_done(c, j->token);
		return -EAGAIN;
	}
	/* Q's op, inline */
	ret = tencache_acquire(c, Q, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE | TENCACHE_ACQ_HOST,
			       NULL, &h);
	if (ret)
		return ret;
	if (!t_tensor_check(h, bytes[Q], Q, version[Q]))
		return -EIO;
	version[Q]++;
	t_tensor_fill(h, bytes[Q], Q, version[Q]);
	ret = tencache_release(c, Q, NULL, 0);
	return ret ?: tencache_step_end(c);
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN,
				      .pool_backend = TENCACHE_POOL_THP };
	/* one plan throughout: P's op waits for the caller's next step, and
	 * entering a plan (a switch of the timed pick between the laid-out
	 * plan and the executor's own) waits for detached ops */
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE |
						    TENCACHE_CACHE_NO_LAYOUT,
					   .gpu_budget = bytes[Q] + bytes[P] + bytes[X] };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	struct tencache *tc;
	struct job j = { 0 };
	int ret = 0;

	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	for (int s = 0; s < STEPS && !ret; s++) {
		ret = step(c, &j, s);
		if (ret)
			fprintf(stderr, "step %d failed: %d\n", s, ret);
	}
	/* the last P op: let it finish, release P in a step of its own */
	pthread_mutex_lock(&lock);
	q_step = STEPS;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	if (j.th) {
		pthread_join(j.th, NULL);
		T_EQ(j.stale, 0);
	}
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_CHECK(st.planned_steps >= STEPS - 2, "%llu of %d steps planned",
		(unsigned long long)st.planned_steps, STEPS);
	T_EQ(st.reprofiles, 0);
	T_CHECK(st.held_copies >= 1, "no prefetch waited for its host op in the cache");
	printf("%llu/%d steps planned, %llu copies held for their host ops\n",
	       (unsigned long long)st.planned_steps, STEPS, (unsigned long long)st.held_copies);
	tencache_cache_destroy(c);
	tencache_exit(tc);
	return t_exit();
}
