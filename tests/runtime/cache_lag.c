/* cache_lag.c - host mode with a lagging compute stream (the test hooks
 * tc_exec_test_lag / tc_exec_test_kernel of exec/exec.h): the "GPU" kernels
 * run late on a stream of their own, as on a GPU, so that a copy not ordered
 * after the compute that wrote its source (compute -> D2H), or a kernel not
 * ordered after the copy that brought its input (H2D -> compute), reads a
 * stale value. In plain host mode the compute runs on the caller's thread
 * and such bugs cannot show. A training-like step: forward reads each
 * parameter and writes an activation, backward reads the activation and
 * writes a gradient, and an optimizer host op right after reads the
 * gradient and rewrites the parameter, which the next step's forward reads
 * on the "GPU". Profiled (on demand) and planned steps, an order change in
 * the middle, with and without the issuer, with slow kernels or slow
 * copies. Every value is checked: on the host at once, and what each kernel
 * read once its stream is done.
 * The same step with offload(overlap=True)'s pattern (python/tencache/
 * overlap.py): each layer's optimizer op is acquired LAG backward releases
 * after its layer's, detached, run on a worker thread (late, then
 * tencache_op_done) and released just before the next forward reads the
 * parameter, across the step's end; also with the NVMe tier, where the ops
 * are released within a window of held bytes and all at the step's end.
 * With nowait, the op is acquired right after its layer's backward with
 * TENCACHE_ACQ_NOWAIT (its gradient's copy still behind the slow kernel):
 * the acquires must not wait (deferred_waits), and the worker's
 * tencache_op_wait must, or it reads a stale gradient or parameter. Also
 * with slow NVMe reads (tc_exec_test_read_lag), the worker running the ops
 * lowest layer first or in order (TENCACHE_CACHE_DETACH_FIFO): a wait given
 * to the worker that waits for an op it has not run yet would hang. With
 * NVMe, the pinned layout puts no range over one whose last users (an
 * optimizer op running on) are still at work in the timing model
 * (tc_exec_test_pinned_clear). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/exec.h"
#include "test.h"

#define NP	6		/* layers: P_k = k, A_k = NP + k, G_k = 2 NP + k */
#define NT	(3 * NP)
#define STEPS	10
#define CHANGE	5		/* from this step on, forward swaps layers 0 and 1 */
#define KiB	1024ULL

static uint64_t bytes[NT];
static uint32_t version[NT];
static uint32_t *src[NT];	/* what a kernel writes: stays until the step ends */
/* what each read of a step read: forward P_k (slot k), backward A_k
 * (NP + k) and P_k (2 NP + k); the tensor and the version it had to read */
#define NSLOT	(3 * NP)
static uint32_t *snap[NSLOT];
static int snap_id[NSLOT];
static uint32_t snap_ver[NSLOT];

struct cfg {
	const char *name;
	unsigned flags;
	uint64_t kernel_ns, copy_ns;
	int overlap;		/* detached optimizer ops on a worker thread */
	int nvme;		/* the NVMe tier, below a pinned budget */
	int nowait;		/* overlap's ops: TENCACHE_ACQ_NOWAIT at lag 0 */
	uint64_t read_ns;	/* each NVMe read starts this late */
	int fifo;		/* TENCACHE_CACHE_DETACH_FIFO: the worker runs ops in order */
};

/*
 * overlap: a layer's optimizer op (G_k read, P_k rewritten) is acquired LAG
 * backward releases after its layer's, detached, and run on the worker
 * thread (the lowest layer queued first, as overlap.py's worker), which
 * sleeps JOB_US, checks what it reads, rewrites P_k and calls
 * tencache_op_done; the main thread releases it (settle) before P_k's next
 * forward read, in the next step: the ops carry over the step's end. With
 * a window (the NVMe tier) the oldest are released once more than window
 * bytes are held, and all before the step ends.
 */
#define LAG	2
#define JOB_US	1500
enum { J_IDLE, J_QUEUED, J_RUNNING, J_DONE };
struct job {
	int state;
	uint64_t token;
	uint32_t *pp, *pg;	/* pinned P_k and G_k */
	uint32_t pver, gver;	/* the versions the op must read */
	int stale_p, stale_g, done_ret, wait_ret;
	int seq;		/* launch order, for the window */
};
static struct job jobs[NP];
static struct tencache_cache *wcache;
static pthread_mutex_t jmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jcond = PTHREAD_COND_INITIALIZER;
static int wstop, seq, carried, nowait, fifo;
static unsigned clear_met;	/* pinned ranges that met ranges still in use */
static uint64_t window, held_bytes;

/*
 * A GPU op: its kernels read tensor in (into snap slot), and tensor in2
 * (slot2) unless it is -1, and write tensor out.
 */
static int gpu_op(struct tencache_cache *c, int in, int slot, int in2, int slot2, int out)
{
	void *pi, *pi2 = NULL, *po;
	int ret = tencache_acquire(c, in, TENCACHE_ACQ_READ, NULL, &pi);

	if (in2 >= 0)
		ret = ret ?: tencache_acquire(c, in2, TENCACHE_ACQ_READ, NULL, &pi2);
	ret = ret ?: tencache_acquire(c, out, TENCACHE_ACQ_WRITE, NULL, &po);
	if (ret)
		return ret;
	snap_id[slot] = in;
	snap_ver[slot] = version[in];
	ret = tc_exec_test_kernel(c, snap[slot], pi, bytes[in]);
	if (in2 >= 0) {
		snap_id[slot2] = in2;
		snap_ver[slot2] = version[in2];
		ret = ret ?: tc_exec_test_kernel(c, snap[slot2], pi2, bytes[in2]);
	}
	version[out]++;
	t_tensor_fill(src[out], bytes[out], out, version[out]);
	ret = ret ?: tc_exec_test_kernel(c, po, src[out], bytes[out]);
	ret = ret ?: tencache_release(c, in, NULL, 20000);
	if (in2 >= 0)
		ret = ret ?: tencache_release(c, in2, NULL, 0);
	return ret ?: tencache_release(c, out, NULL, 0);
}

/*
 * The optimizer: reads G_k, rewrites P_k. Either acquire alone waits for
 * backward's kernel, and so hides the other's missing wait: on even layers
 * the gradient comes first (its D2H must wait for the kernel that wrote it),
 * on odd ones P_k is rewritten first, at once (a decay), and its acquire
 * must wait for the H2D of backward's read of P_k, which may still be
 * reading the pinned copy the host rewrites.
 */
static int host_op(struct tencache_cache *c, int step, int k)
{
	int g = 2 * NP + k;
	void *pg = NULL, *pp;
	int ret = 0;

	if (!(k & 1))
		ret = tencache_acquire(c, g, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &pg);
	ret = ret ?: tencache_acquire(c, k, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				      TENCACHE_ACQ_HOST, NULL, &pp);
	if (ret)
		return ret;
	T_CHECK(t_tensor_check(pp, bytes[k], k, version[k]),
		"step %d: the host read a stale parameter %d", step, k);
	version[k]++;
	t_tensor_fill(pp, bytes[k], k, version[k]);
	if (k & 1)
		ret = tencache_acquire(c, g, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &pg);
	if (ret)
		return ret;
	T_CHECK(t_tensor_check(pg, bytes[g], g, version[g]),
		"step %d: the host read a stale gradient %d (its D2H did not wait for the kernel that wrote it)",
		step, g);
	ret = tencache_release(c, k, NULL, 0);
	return ret ?: tencache_release(c, g, NULL, 0);
}

/* The worker thread: runs the queued optimizer ops, lowest layer first
 * (fifo: in the order they were detached, TENCACHE_CACHE_DETACH_FIFO). */
static void *worker(void *arg)
{
	struct timespec ts = { 0, JOB_US * 1000 };

	pthread_mutex_lock(&jmu);
	for (;;) {
		struct job *j = NULL;
		int k;

		for (k = 0; k < NP && (!j || fifo); k++)
			if (jobs[k].state == J_QUEUED && (!j || jobs[k].seq < j->seq))
				j = &jobs[k];
		k = j ? (int)(j - jobs) : k;
		if (!j) {
			if (wstop)
				break;
			pthread_cond_wait(&jcond, &jmu);
			continue;
		}
		j->state = J_RUNNING;
		pthread_mutex_unlock(&jmu);
		j->wait_ret = tencache_op_wait(wcache, j->token);	/* its tensors in place */
		nanosleep(&ts, NULL);	/* a slow AdamW: the main thread goes on */
		j->stale_g = !t_tensor_check(j->pg, bytes[2 * NP + k], 2 * NP + k, j->gver);
		j->stale_p = !t_tensor_check(j->pp, bytes[k], k, j->pver);
		t_tensor_fill(j->pp, bytes[k], k, j->pver + 1);
		j->done_ret = tencache_op_done(wcache, j->token);
		pthread_mutex_lock(&jmu);
		j->state = J_DONE;
		pthread_cond_broadcast(&jcond);
	}
	pthread_mutex_unlock(&jmu);
	return NULL;
}

/* Acquire layer k's optimizer op (the gradient first on even layers, as
 * host_op), detach it and queue it on the worker. */
static int launch(struct tencache_cache *c, int k)
{
	int g = 2 * NP + k, ret = 0;
	struct job *j = &jobs[k];
	unsigned h = TENCACHE_ACQ_HOST | (nowait ? TENCACHE_ACQ_NOWAIT : 0);
	void *pg = NULL, *pp;

	if (!(k & 1))
		ret = tencache_acquire(c, g, TENCACHE_ACQ_READ | h, NULL, &pg);
	ret = ret ?: tencache_acquire(c, k, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE | h, NULL, &pp);
	if (k & 1)
		ret = ret ?: tencache_acquire(c, g, TENCACHE_ACQ_READ | h, NULL, &pg);
	ret = ret ?: tencache_op_detach(c, &j->token);
	if (ret)
		return ret;
	j->pp = pp;
	j->pg = pg;
	j->pver = version[k];
	j->gver = version[g];
	j->seq = seq++;
	held_bytes += bytes[k] + bytes[g];
	pthread_mutex_lock(&jmu);
	j->state = J_QUEUED;
	pthread_cond_broadcast(&jcond);
	pthread_mutex_unlock(&jmu);
	return 0;
}

/* Wait for layer k's op, check what it read, release its tensors. */
static int settle(struct tencache_cache *c, int s, int k)
{
	struct job *j = &jobs[k];
	int ret;

	pthread_mutex_lock(&jmu);
	while (j->state != J_DONE)
		pthread_cond_wait(&jcond, &jmu);
	j->state = J_IDLE;
	pthread_mutex_unlock(&jmu);
	T_CHECK(!j->stale_g, "step %d: the optimizer read a stale gradient %d", s, 2 * NP + k);
	T_CHECK(!j->stale_p, "step %d: the optimizer read a stale parameter %d", s, k);
	T_EQ(j->done_ret, 0);
	T_EQ(j->wait_ret, 0);
	version[k] = j->pver + 1;
	held_bytes -= bytes[k] + bytes[2 * NP + k];
	ret = tencache_release(c, k, NULL, 0);
	return ret ?: tencache_release(c, 2 * NP + k, NULL, 0);
}

/* Release the oldest ops while more than the window is held (all: 0). */
static int settle_window(struct tencache_cache *c, int s, uint64_t win)
{
	int ret = 0;

	while (!ret && held_bytes > win) {
		int old = -1;

		for (int k = 0; k < NP; k++)
			if (jobs[k].state != J_IDLE && (old < 0 || jobs[k].seq < jobs[old].seq))
				old = k;
		ret = settle(c, s, old);
	}
	return ret;
}

/* Backward with overlap.py's pattern: an op LAG releases after its layer's. */
static int backward_overlap(struct tencache_cache *c, int s)
{
	int ready[NP], rtick[NP], head = 0, tail = 0, tick = 0, ret = 0;

	for (int k = NP - 1; k >= 0 && !ret; k--) {
		ret = gpu_op(c, NP + k, NP + k, k, 2 * NP + k, 2 * NP + k);
		ready[tail] = k;
		rtick[tail++] = ++tick;
		while (!ret && head < tail && tick - rtick[head] >= (nowait ? 0 : LAG)) {
			ret = launch(c, ready[head++]);
			if (window)
				ret = ret ?: settle_window(c, s, window);
		}
	}
	while (!ret && head < tail)	/* optimizer.step(): the rest */
		ret = launch(c, ready[head++]);
	pthread_mutex_lock(&jmu);
	for (int k = 0; k < NP; k++)
		carried += jobs[k].state == J_QUEUED || jobs[k].state == J_RUNNING;
	pthread_mutex_unlock(&jmu);
	if (window)		/* with a window, none carries over */
		ret = ret ?: settle_window(c, s, 0);
	return ret;
}

static int step(struct tencache_cache *c, const struct cfg *f, int s)
{
	int ret = tencache_step_begin(c);

	for (int i = 0; i < NP && !ret; i++) {
		int k = s >= CHANGE && i < 2 ? 1 - i : i;

		/* overlap: the last step's update of P_k, done and released */
		if (jobs[k].state != J_IDLE)
			ret = settle(c, s, k);
		ret = ret ?: gpu_op(c, k, k, -1, 0, NP + k);
	}
	if (f->overlap) {
		ret = ret ?: backward_overlap(c, s);
		/* the last step leaves none held (flush waits for them) */
		if (s == STEPS - 1)
			ret = ret ?: settle_window(c, s, 0);
	}
	for (int k = NP - 1; k >= 0 && !ret && !f->overlap; k--) {
		/* reads P_k too: the host op rewrites it right after, while
		 * its H2D for this kernel may still be reading it */
		ret = gpu_op(c, NP + k, NP + k, k, 2 * NP + k, 2 * NP + k);
		ret = ret ?: host_op(c, s, k);
	}
	ret = ret ?: tencache_step_end(c);
	if (ret)
		return ret;
	/* the step's end waited for the kernels: what did they read? */
	for (int i = 0; i < NSLOT; i++)
		T_CHECK(t_tensor_check(snap[i], bytes[snap_id[i]], snap_id[i], snap_ver[i]),
			"step %d: a kernel read tensor %d not at version %u", s, snap_id[i],
			snap_ver[i]);
	return 0;
}

static int run(struct tencache *tc, const struct cfg *f, const char *dir)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE | f->flags };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	uint64_t total = 0;
	int ret = 0, fails = t_failures;
	pthread_t th;
	char path[512];

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 2;	/* evictions on demand, drops planned */
	window = 0;
	nowait = f->nowait;
	fifo = f->fifo;
	if (f->nvme) {
		/* staged through a pinned budget below the total */
		snprintf(path, sizeof(path), "%s/tencache-lag-test.swap", dir);
		p.pinned_budget = total * 3 / 5;
		p.nvme_budget = total * 2;
		p.nvme_path = path;
		window = total / 5;
	}
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (t_failures > fails)
		return -EINVAL;
	for (int i = 0; i < NT; i++)
		T_EQ(tencache_tensor_register(c, bytes[i], i < NP ? TENCACHE_ROLE_PARAM_BF16 :
					      i < 2 * NP ? TENCACHE_ROLE_ACTIVATION :
					      TENCACHE_ROLE_GRAD), i);
	T_EQ(tc_exec_test_lag(c, f->kernel_ns, f->copy_ns), 0);
	T_EQ(tc_exec_test_read_lag(c, f->read_ns), 0);
	for (int i = 0; i < NT && !ret; i++) {
		void *h;

		version[i] = 0;
		ret = tencache_tensor_host(c, i, &h);
		if (!ret)
			t_tensor_fill(h, bytes[i], i, 0);
	}
	T_EQ(ret, 0);
	T_EQ(tc_exec_test_lag(c, 0, 0), -EBUSY);	/* the cache is set up */
	wcache = c;
	wstop = 0;
	carried = 0;
	held_bytes = 0;
	seq = 0;
	T_EQ(pthread_create(&th, NULL, worker, NULL), 0);
	for (int s = 0; s < STEPS && !ret; s++) {
		ret = step(c, f, s);
		T_CHECK(ret == 0, "%s: step %d failed: %d", f->name, s, ret);
	}
	/* after a failure: let the worker finish what it holds */
	pthread_mutex_lock(&jmu);
	wstop = 1;
	pthread_cond_broadcast(&jcond);
	pthread_mutex_unlock(&jmu);
	pthread_join(th, NULL);
	for (int k = 0; k < NP; k++)
		jobs[k].state = J_IDLE;
	if (ret) {
		tencache_cache_destroy(c);
		return ret;
	}
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	/* profiled, planned, an order change, profiled again, planned */
	T_CHECK(st.planned_steps >= 5, "%s: %llu of %d steps planned", f->name,
		(unsigned long long)st.planned_steps, STEPS);
	T_EQ(st.reprofiles, 1);
	T_EQ(tencache_cache_flush(c), 0);
	for (int i = 0; i < NT; i++) {
		void *h;

		/* an activation is dead after backward's read (forward rewrites
		 * it first): a plan drops it without a writeback */
		if (i >= NP && i < 2 * NP)
			continue;
		/* so is a gradient (backward rewrites it first): with the NVMe
		 * tier its home is not written (tensor_host reads zeros) */
		if (f->nvme && i >= 2 * NP)
			continue;

		T_EQ(tencache_tensor_host(c, i, &h), 0);
		T_CHECK(t_tensor_check(h, bytes[i], i, version[i]), "%s: tensor %d stale after flush",
			f->name, i);
	}
	/* the ops must have run late: some not done when backward ended */
	if (f->overlap)
		T_CHECK(carried > 0, "%s: every optimizer op was done before backward ended",
			f->name);
	/* at lag 0 behind slow kernels, some gradient's copy was in flight */
	if (f->nowait)
		T_CHECK(st.deferred_waits > 0, "%s: no acquire deferred its wait", f->name);
	else
		T_EQ(st.deferred_waits, 0);
	if (f->nvme)
		T_CHECK(st.link_bytes[2] && st.link_bytes[3], "%s: nothing was staged (NVMe %llu/%llu B)",
			f->name, (unsigned long long)st.link_bytes[2],
			(unsigned long long)st.link_bytes[3]);
	if (f->nvme) {	/* the pinned layout kept clear of ranges in use where it could */
		unsigned met, over;

		T_EQ(tc_exec_test_pinned_clear(c, &met, &over), 0);
		clear_met += met;
		printf("%s: pinned layout: %u ranges met ranges still in use, %u of them laid over one\n",
		       f->name, met, over);
		/* the pool has room here: every one fits clear (first fit
		 * alone laid 1-5 of 3-8 over one) */
		T_CHECK(!over, "%s: the pinned layout put %u of the %u ranges that met ranges in use over one",
			f->name, over, met);
	}
	printf("%s: %s, %llu/%d steps planned, %llu reprofile(s), %d op(s) still running at backward's ends, %llu deferred wait(s) (%llu NVMe or pinned), H2D %llu KiB, D2H %llu KiB, NVMe %llu/%llu KiB\n",
	       f->name, t_failures == fails ? "ok" : "FAILED",
	       (unsigned long long)st.planned_steps, STEPS,
	       (unsigned long long)st.reprofiles, carried,
	       (unsigned long long)st.deferred_waits, (unsigned long long)st.deferred_host_waits,
	       (unsigned long long)(st.link_bytes[0] / KiB),
	       (unsigned long long)(st.link_bytes[1] / KiB),
	       (unsigned long long)(st.link_bytes[2] / KiB),
	       (unsigned long long)(st.link_bytes[3] / KiB));
	tencache_cache_destroy(c);
	return ret;
}

static void bad_input(struct tencache *tc)
{
	struct tencache_cache_params p = { .gpu_budget = 1 << 20 };
	struct tencache_cache *c;
	unsigned u;
	void *h;

	T_EQ(tc_exec_test_lag(NULL, 0, 0), -EINVAL);
	T_EQ(tc_exec_test_read_lag(NULL, 0), -EINVAL);
	T_EQ(tc_exec_test_pinned_clear(NULL, &u, &u), -EINVAL);
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	T_EQ(tc_exec_test_lag(c, 0, 0), -EINVAL);		/* not host mode */
	T_EQ(tc_exec_test_pinned_clear(c, NULL, &u), -EINVAL);
	T_EQ(tc_exec_test_pinned_clear(c, &u, NULL), -EINVAL);
	tencache_cache_destroy(c);
	p.flags = TENCACHE_CACHE_HOST_MODE;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_PARAM_BF16), 0);
	T_EQ(tencache_step_begin(c), 0);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_WRITE, NULL, &h), 0);
	T_EQ(tc_exec_test_kernel(c, h, h, 4096), -EINVAL);	/* no lag stream */
	T_EQ(tencache_release(c, 0, NULL, 0), 0);
	T_EQ(tencache_step_end(c), 0);
	tencache_cache_destroy(c);
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN,
				      .pool_backend = TENCACHE_POOL_THP };
	static const struct cfg cfgs[] = {
		{ "slow kernels", 0, 1000000, 0, 0, 0, 0, 0, 0 },
		{ "slow kernels, issuer", TENCACHE_CACHE_ISSUER, 1000000, 0, 0, 0, 0, 0, 0 },
		{ "slow copies", 0, 0, 1000000, 0, 0, 0, 0, 0 },
		{ "slow both, issuer", TENCACHE_CACHE_ISSUER, 500000, 500000, 0, 0, 0, 0, 0 },
		{ "overlap, slow kernels", 0, 1000000, 0, 1, 0, 0, 0, 0 },
		{ "overlap, slow kernels, issuer", TENCACHE_CACHE_ISSUER, 1000000, 0, 1, 0, 0, 0, 0 },
		{ "overlap, slow copies", 0, 0, 1000000, 1, 0, 0, 0, 0 },
		{ "overlap, slow copies, issuer", TENCACHE_CACHE_ISSUER, 0, 1000000, 1, 0, 0, 0, 0 },
		{ "overlap, NVMe, slow kernels", 0, 1000000, 0, 1, 1, 0, 0, 0 },
		{ "overlap, NVMe, slow copies, issuer", TENCACHE_CACHE_ISSUER, 0, 1000000, 1, 1, 0, 0, 0 },
		{ "NVMe, slow both", 0, 500000, 500000, 0, 1, 0, 0, 0 },
		{ "overlap, nowait, slow kernels", 0, 1000000, 0, 1, 0, 1, 0, 0 },
		{ "overlap, nowait, slow kernels, issuer", TENCACHE_CACHE_ISSUER, 1000000, 0, 1, 0, 1, 0, 0 },
		{ "overlap, nowait, slow copies, issuer", TENCACHE_CACHE_ISSUER, 0, 1000000, 1, 0, 1, 0, 0 },
		{ "overlap, nowait, NVMe, slow kernels", 0, 1000000, 0, 1, 1, 1, 0, 0 },
		{ "overlap, nowait, NVMe, slow reads", 0, 0, 0, 1, 1, 1, 20000000, 0 },
		{ "overlap, nowait, NVMe, slow reads, in order", TENCACHE_CACHE_DETACH_FIFO,
		  0, 0, 1, 1, 1, 20000000, 1 },
		/* gated copies on their own stream, with the issuer */
		{ "overlap, nowait, NVMe, slow copies, in order, issuer",
		  TENCACHE_CACHE_DETACH_FIFO | TENCACHE_CACHE_ISSUER, 0, 1000000, 1, 1, 1, 0, 1 },
		{ "overlap, nowait, NVMe, slow reads, in order, issuer",
		  TENCACHE_CACHE_DETACH_FIFO | TENCACHE_CACHE_ISSUER, 0, 0, 1, 1, 1, 20000000, 1 },
	};
	const char *dir = getenv("TEST_DIR") ? getenv("TEST_DIR") : "/var/tmp";
	struct tencache *tc;
	int odirect;

	for (int i = 0; i < NT; i++) {
		bytes[i] = (4 + (i * 5) % 11) * 4 * KiB;
		src[i] = malloc(bytes[i]);
		if (!src[i])
			return T_EXIT_FAIL;
	}
	for (int i = 0; i < NSLOT; i++) {
		snap[i] = malloc(16 * 4 * KiB);	/* the largest tensor */
		if (!snap[i])
			return T_EXIT_FAIL;
	}
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	bad_input(tc);
	odirect = t_odirect_ok(dir);
	for (unsigned i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		if (cfgs[i].nvme && !odirect) {
			printf("%s: not tested: %s refuses O_DIRECT (set TEST_DIR)\n",
			       cfgs[i].name, dir);
			continue;
		}
		run(tc, &cfgs[i], dir);
	}
	/* the overlapped optimizer ops keep ranges in use past their PDROPs */
	if (odirect)
		T_CHECK(clear_met > 0, "no pinned range met a range still in use: nothing tested");
	tencache_exit(tc);
	return t_exit();
}
