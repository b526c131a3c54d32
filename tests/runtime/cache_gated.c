/* cache_gated.c - a prefetch of a detached host op's output waits for the
 * op inside the cache ("gated copies", cache.c), not in front of the other
 * copies. Host mode. Each step: a GPU op reads Q, one reads P; then a host
 * op rewrites P, detached, and one rewrites Q, inline. The next step's
 * prefetch of P is issued before Q's, while P's op still runs: that op
 * finishes only once the caller has Q (else it times out and the test
 * fails). If P's copy held the H2D stream (or the caller) until its op was
 * done, Q's copy would wait behind it for an op that waits for Q. Every
 * value is checked, and the held copies are counted.
 * Again with the ops run in order (TENCACHE_CACHE_DETACH_FIFO), where the
 * copy of a running op's output waits on a stream of its own (gstream), and
 * within one step: P's op is detached, Q's runs inline, then the GPU reads
 * Q and P; P's op finishes only once the caller has Q. Q's copy, whose op
 * is done, must not queue on that stream behind P's. */
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
	int step, wait_q, timed_out, stale, done_ret;	/* runs once q_step >= wait_q */
	pthread_t th;
};

/* P's host op: waits until the caller has Q of step wait_q, then rewrites P. */
static void *p_op(void *arg)
{
	struct job *j = arg;
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 3;
	pthread_mutex_lock(&lock);
	/* not in the profiled step: entering the plan waits for every op */
	while (j->step > 0 && q_step < j->wait_q && !j->timed_out)
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

/* P's op of step s, detached (h: pinned P), on a thread of its own. */
static int p_start(struct tencache_cache *c, struct job *j, void *h, int s, int wait_q)
{
	*j = (struct job){ .c = c, .token = j->token, .ptr = h, .step = s, .wait_q = wait_q };
	if (pthread_create(&j->th, NULL, p_op, j)) {
		j->th = 0;
		tencache_op_done(c, j->token);
		return -EAGAIN;
	}
	return 0;
}

/* Q's op, inline: rewrites Q on the host. */
static int q_op(struct tencache_cache *c)
{
	void *h;
	int ret = tencache_acquire(c, Q, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				   TENCACHE_ACQ_HOST, NULL, &h);

	if (ret)
		return ret;
	if (!t_tensor_check(h, bytes[Q], Q, version[Q]))
		return -EIO;
	version[Q]++;
	t_tensor_fill(h, bytes[Q], Q, version[Q]);
	return tencache_release(c, Q, NULL, 0);
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
	ret = ret ?: p_start(c, j, h, s, s + 1);
	ret = ret ?: q_op(c);
	return ret ?: tencache_step_end(c);
}

/* In order, one step: P's op detached, Q's inline, then the GPU reads Q and P. */
static int step_in_order(struct tencache_cache *c, struct job *j, int s)
{
	void *h;
	int ret = tencache_step_begin(c);

	ret = ret ?: tencache_acquire(c, P, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				      TENCACHE_ACQ_HOST, NULL, &h);
	ret = ret ?: tencache_op_detach(c, &j->token);
	ret = ret ?: p_start(c, j, h, s, s);
	ret = ret ?: q_op(c);
	ret = ret ?: gpu_read(c, Q, s);
	if (!ret && j->th)
		ret = retire(c, j);
	ret = ret ?: gpu_read(c, P, s);
	return ret ?: tencache_step_end(c);
}

static void run(unsigned flags)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN,
				      .pool_backend = TENCACHE_POOL_THP };
	/* one plan throughout: P's op waits for the caller's next step, and
	 * entering a plan (a switch of the timed pick between the laid-out
	 * plan and the executor's own) waits for detached ops */
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE |
						    TENCACHE_CACHE_NO_LAYOUT | flags,
					   .gpu_budget = bytes[Q] + bytes[P] + bytes[X] };
	int in_order = flags & TENCACHE_CACHE_DETACH_FIFO;
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	struct tencache *tc;
	struct job j = { 0 };
	int ret = 0;

	q_step = -1;
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (t_failures) {
		tencache_exit(tc);
		return;
	}
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	for (int s = 0; s < STEPS && !ret; s++) {
		ret = in_order ? step_in_order(c, &j, s) : step(c, &j, s);
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
	/* in order, the copy waits on its stream, not in the cache */
	if (!in_order)
		T_CHECK(st.held_copies >= 1, "no prefetch waited for its host op in the cache");
	printf("%s: %llu/%d steps planned, %llu copies held for their host ops\n",
	       in_order ? "in order" : "any order", (unsigned long long)st.planned_steps, STEPS,
	       (unsigned long long)st.held_copies);
	tencache_cache_destroy(c);
	tencache_exit(tc);
}

int main(void)
{
	run(0);
	if (!t_failures)
		run(TENCACHE_CACHE_DETACH_FIFO);
	return t_exit();
}
