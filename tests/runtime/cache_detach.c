/* cache_detach.c - detached host ops (tencache_op_detach / tencache_op_done)
 * in host mode, with and without the NVMe tier: a host op rewrites its
 * tensor on another thread, slowly, while the step goes on; the tensor is
 * released after the op is done and read by a later GPU op. Every value is
 * checked, so a copy that did not wait for the op (a planned prefetch or
 * stage-out issued before tencache_op_done) reads a stale value and fails.
 * Gradients held by detached host ops give up their GPU room (held_room).
 * With NVMe, detached ops that hold more than the pinned pool are pushed out
 * when done or waited for, and tensor_host makes room from any value
 * between planned steps (held_pinned).
 * The learnt step gives each detached op the run time measured (3 ms and
 * more for the first, the ops one at a time after it), which the caller's
 * release did not (learnt_host_ns).
 * Also the error paths: no host op open, a GPU op, bad tokens, done twice,
 * release before done; and an op that outlives its step; TENCACHE_ACQ_NOWAIT
 * outside a host op, tencache_op_wait's bad tokens, and a NOWAIT op released
 * without a detach. */
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
#include "exec/exec.h"	/* tc_exec_test_fail */
#include "step_gen.h"	/* t_register_fill */
#include "test.h"

#define NP	8		/* GPU tensors p_k */
#define NT	(2 * NP)	/* and host-op tensors h_k = NP + k */
#define KiB	1024ULL

static uint64_t bytes[NT];
static uint32_t version[NT];

static void fill(uint32_t *p, int id)
{
	t_tensor_fill(p, bytes[id], id, version[id]);
}

static int check(const uint32_t *p, int id)
{
	return t_tensor_check(p, bytes[id], id, version[id]);
}

struct job {
	struct tencache_cache *c;
	uint64_t token;
	uint32_t *ptr;
	int id, stale, done_ret, running;
	uint64_t seq;
	pthread_t th;
};

/*
 * The ops run one at a time in the order they were detached, as a trainer's
 * optimizer worker runs them (and as the cache learns them: an op's time
 * starts at the previous one's end). Threads of their own would finish out
 * of order on a loaded machine, and the first learnt time fall under its
 * sleep.
 */
static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond = PTHREAD_COND_INITIALIZER;
static uint64_t turn, turn_next;

static void turn_end(void)
{
	pthread_mutex_lock(&turn_lock);
	turn++;
	pthread_cond_broadcast(&turn_cond);
	pthread_mutex_unlock(&turn_lock);
}

/* The host op, on its own thread: late on purpose, then rewrite and done. */
static void *host_op(void *arg)
{
	struct job *j = arg;
	struct timespec ts = { 0, 3 * 1000 * 1000 };

	pthread_mutex_lock(&turn_lock);
	while (turn != j->seq)
		pthread_cond_wait(&turn_cond, &turn_lock);
	pthread_mutex_unlock(&turn_lock);
	nanosleep(&ts, NULL);
	j->stale = !check(j->ptr, j->id);
	version[j->id]++;
	fill(j->ptr, j->id);
	j->done_ret = tencache_op_done(j->c, j->token);
	turn_end();
	return NULL;
}

/* tencache_op_done from another thread, after the caller blocked on it. */
static void *done_later(void *arg)
{
	struct job *j = arg;
	struct timespec ts = { 0, 50 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	j->done_ret = tencache_op_done(j->c, j->token);
	return NULL;
}

static int gpu_op(struct tencache_cache *c, int id, int write)
{
	void *p;
	int ret = tencache_acquire(c, id, TENCACHE_ACQ_READ |
				   (write ? TENCACHE_ACQ_WRITE : 0), NULL, &p);

	if (ret)
		return ret;
	if (!check(p, id)) {
		fprintf(stderr, "GPU op on tensor %d: stale value\n", id);
		return -EIO;
	}
	if (write) {
		version[id]++;
		fill(p, id);
	}
	return tencache_release(c, id, NULL, 20000);
}

/* Waits for job j's op if it runs: 1, or -EIO when it read a stale value
 * or tencache_op_done failed; 0 when it did not run. */
static int join_job(struct job *j)
{
	if (!j->running)
		return 0;
	pthread_join(j->th, NULL);
	j->running = 0;
	if (j->stale || j->done_ret) {
		fprintf(stderr, "host op on %d: stale %d, done %d\n", j->id, j->stale, j->done_ret);
		return -EIO;
	}
	return 1;
}

/* Wait for job k's op, release its tensor, read it on the "GPU". */
static int retire(struct tencache_cache *c, struct job *j)
{
	int ret = join_job(j);

	if (ret <= 0)
		return ret ?: -EIO;
	ret = tencache_release(c, j->id, NULL, 0);
	return ret ?: gpu_op(c, j->id, 0);
}

/* Host op on tensor id (read-write), detached to its own thread. */
static int start_job(struct tencache_cache *c, struct job *j, int id)
{
	void *h;
	int ret;

	j->c = c;
	j->id = id;
	ret = tencache_acquire(c, id, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE | TENCACHE_ACQ_HOST,
			       NULL, &h);
	ret = ret ?: tencache_op_detach(c, &j->token);
	if (ret)
		return ret;
	j->ptr = h;
	j->seq = turn_next++;
	j->running = !pthread_create(&j->th, NULL, host_op, j);
	if (!j->running) {
		tencache_op_done(c, j->token);
		turn_end();
		return -EAGAIN;
	}
	return 0;
}

/*
 * A step: GPU op on p_k (read-write), host op on h_k detached, GPU op on
 * p_k+1; two ops later h_k is released and read by a GPU op.
 */
static int step(struct tencache_cache *c)
{
	struct job jobs[NP] = { 0 };
	int ret = tencache_step_begin(c);

	for (int k = 0; k < NP && !ret; k++) {
		ret = gpu_op(c, k, 1);
		ret = ret ?: start_job(c, &jobs[k], NP + k);
		if (ret)
			break;
		ret = gpu_op(c, (k + 1) % NP, 0);
		if (k >= 2)
			ret = ret ?: retire(c, &jobs[k - 2]);
	}
	for (int k = NP - 2; k < NP && !ret; k++)
		ret = retire(c, &jobs[k]);
	for (int k = 0; k < NP; k++)	/* after a failure */
		if (jobs[k].running)
			pthread_join(jobs[k].th, NULL);
	return ret ?: tencache_step_end(c);
}

/* The learnt step's detached ops: each timed, the first at least its sleep. */
static void learnt_host_ns(struct tencache_cache *c, int nvme)
{
	uint64_t sum = 0, first = 0;
	uint32_t n = 0, timed = 0;

	for (uint32_t i = 0; i < c->trace.nr_acc; i++) {
		const struct tc_access *a = &c->trace.acc[i];

		if (!(a->flags & TC_ACC_HOST) || !(a->flags & TC_ACC_END))
			continue;
		if (!n++)
			first = a->compute_ns;
		timed += a->compute_ns > 0;
		sum += a->compute_ns;
	}
	printf("nvme %d: learnt %u detached host ops, %u timed, %.1f ms in all (first %.1f ms)\n",
	       nvme, n, timed, sum / 1e6, first / 1e6);
	T_EQ(n, NP);
	T_EQ(timed, n);
	T_CHECK(first >= 3000000, "nvme %d: the first host op learnt at %llu ns, under its 3 ms sleep",
		nvme, (unsigned long long)first);
}

static int run(struct tencache *tc, int nvme, const char *dir)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	uint64_t total = 0;
	char path[512];
	int ret = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	if (nvme) {
		snprintf(path, sizeof(path), "%s/tencache-detach-test.swap", dir);
		p.pinned_budget = total / 2;
		p.nvme_budget = total * 2;
		p.nvme_path = path;
	}
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	ret = t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_OPT_STATE);
	for (int s = 0; s < 6 && !ret; s++) {
		ret = step(c);
		if (ret)
			fprintf(stderr, "nvme %d: step %d failed: %d\n", nvme, s, ret);
	}
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_CHECK(st.planned_steps >= 4, "nvme %d: %llu of 6 steps planned", nvme,
		(unsigned long long)st.planned_steps);
	T_EQ(st.reprofiles, 0);
	learnt_host_ns(c, nvme);
	/* the newest values, also after a flush to the homes */
	T_EQ(tencache_cache_flush(c), 0);
	for (int i = 0; i < NT; i++) {
		void *h;

		T_EQ(tencache_tensor_host(c, i, &h), 0);
		T_CHECK(check(h, i), "nvme %d: tensor %d stale after flush", nvme, i);
	}
	printf("nvme %d: %llu/6 steps planned, H2D %llu KiB, NVMe write %llu KiB\n", nvme,
	       (unsigned long long)st.planned_steps,
	       (unsigned long long)(st.link_bytes[0] / KiB),
	       (unsigned long long)(st.link_bytes[3] / KiB));
	tencache_cache_destroy(c);
	return 0;
}

/*
 * Six GPU ops each write a gradient of a third of the GPU budget; a host op
 * reading it is detached after each and all are released at the end, as
 * offload(overlap=True) does. The held gradients' GPU copies must make room
 * for the next ones, profiled (on demand) and planned alike.
 */
static void held_room(struct tencache *tc)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .gpu_budget = 3 * 64 * KiB };
	struct tencache_cache *c;
	uint64_t tok[6];
	int ret = 0;

	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	for (int i = 0; i < 6; i++)
		T_EQ(tencache_tensor_register(c, 64 * KiB, TENCACHE_ROLE_GRAD), i);
	for (int s = 0; s < 3 && !ret; s++) {
		ret = tencache_step_begin(c);
		for (int i = 0; i < 6 && !ret; i++) {
			void *g, *h;

			ret = tencache_acquire(c, i, TENCACHE_ACQ_WRITE, NULL, &g);
			if (!ret)
				memset(g, i + s, 64 * KiB);
			ret = ret ?: tencache_release(c, i, NULL, 1000);
			ret = ret ?: tencache_acquire(c, i, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST,
						      NULL, &h);
			ret = ret ?: tencache_op_detach(c, &tok[i]);
			if (!ret && ((unsigned char *)h)[100] != i + s)
				ret = -EIO;
			ret = ret ?: tencache_op_done(c, tok[i]);
		}
		for (int i = 0; i < 6 && !ret; i++)
			ret = tencache_release(c, i, NULL, 0);
		ret = ret ?: tencache_step_end(c);
		T_CHECK(ret == 0, "held_room: step %d: %d", s, ret);
	}
	tencache_cache_destroy(c);
}

/*
 * Pinned memory held by detached host ops, NVMe on: each op's tensor takes
 * a third of the pinned budget, and the caller releases the ops only after
 * all are detached, as a trainer settles an op when it next needs a tensor.
 * On demand (profiling, and the rest of a planned step that met a full
 * pinned pool: tc_exec_test_fail), the cache must push finished ops' values
 * out to NVMe and wait for running ones (3 ms late here) rather than fail.
 * Every value is checked, on the "GPU" and, one tensor_host at a time,
 * after a flush (more than the pool holds).
 */
#define NH	8
#define HB	(1024 * KiB)

static int held_step(struct tencache_cache *c)
{
	struct job jobs[NH] = { 0 };
	int ret = tencache_step_begin(c);

	for (int k = 0; k < NH && !ret; k++)
		ret = start_job(c, &jobs[k], k);
	for (int k = 0; k < NH; k++) {	/* settle: wait, then release */
		int r = join_job(&jobs[k]);

		if (!r)
			continue;
		if (!ret && r < 0)
			ret = r;
		ret = ret ?: tencache_release(c, k, NULL, 0);
	}
	for (int k = 0; k < NH && !ret; k++)
		ret = gpu_op(c, k, 0);
	return ret ?: tencache_step_end(c);
}

static void held_pinned(struct tencache *tc, const char *dir)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .gpu_budget = 2 * HB, .pinned_budget = 2 * HB,
					   .nvme_budget = 2 * NH * HB };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	char path[512];
	int ret = 0;

	snprintf(path, sizeof(path), "%s/tencache-held-pinned.swap", dir);
	p.nvme_path = path;
	for (int i = 0; i < NH; i++)
		bytes[i] = HB;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	ret = t_register_fill(c, NH, bytes, version, TENCACHE_ROLE_OPT_STATE);
	T_EQ(ret, 0);
	for (int s = 0; s < 6 && !ret; s++) {
		if (s == 3)	/* the planned step meets a full pinned pool */
			T_EQ(tc_exec_test_fail(c, 0, 2), 0);
		ret = held_step(c);
		T_CHECK(ret == 0, "held_pinned: step %d: %d", s, ret);
	}
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(tencache_cache_flush(c), 0);
	for (int i = 0; i < NH; i++) {
		void *h;

		T_EQ(tencache_tensor_host(c, i, &h), 0);
		T_CHECK(check(h, i), "held_pinned: tensor %d stale after flush", i);
	}
	printf("held_pinned: %llu/6 steps planned, %llu re-plans, NVMe write %llu KiB\n",
	       (unsigned long long)st.planned_steps, (unsigned long long)st.replans,
	       (unsigned long long)(st.link_bytes[3] / KiB));
	tencache_cache_destroy(c);
}

/*
 * Host ops of three tensors each (two read only), detached after the
 * step's GPU ops; in step 3 the plan stops after the fourth op
 * (tc_exec_replan, as for a fragmented arena) and the rest runs on demand. The ops detached then are
 * not a profile's: the next plan keeps the learnt times (before the fix, the
 * on-demand remainder's access numbers gave a time to the first access of
 * an op, and planning failed with -EINVAL).
 */
#define RH	4
static int replan_step(struct tencache_cache *c, int stop)
{
	struct job jobs[RH] = { 0 };
	int ret = tencache_step_begin(c);

	for (int k = 0; k < NT && !ret; k++) {
		ret = gpu_op(c, k, 0);
		if (!ret && stop && k == 3)	/* as a fragmented arena would */
			ret = tc_exec_replan(c, "the test stops the plan", 1);
	}
	for (int k = 0; k < RH && !ret; k++) {
		void *h;

		ret = tencache_acquire(c, NP + k + RH, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST,
				       NULL, &h);
		ret = ret ?: tencache_acquire(c, k, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &h);
		ret = ret ?: start_job(c, &jobs[k], NP + k);
	}
	for (int k = 0; k < RH; k++) {
		int r = join_job(&jobs[k]);

		if (!r)
			continue;
		if (!ret && r < 0)
			ret = r;
		ret = ret ?: tencache_release(c, NP + k, NULL, 0);
		ret = ret ?: tencache_release(c, NP + k + RH, NULL, 0);
		ret = ret ?: tencache_release(c, k, NULL, 0);
	}
	return ret ?: tencache_step_end(c);
}

static void detach_replan(struct tencache *tc)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	uint64_t total = 0, *learnt = NULL;
	int ret = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 2;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	ret = t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_OPT_STATE);
	for (int s = 0; s < 6 && !ret; s++) {
		ret = replan_step(c, s == 3);
		T_CHECK(ret == 0, "detach_replan: step %d: %d", s, ret);
		if (s == 1 && c->have_plan) {	/* the first plan's learnt times */
			learnt = calloc(c->trace.nr_acc, sizeof(*learnt));
			for (uint32_t i = 0; learnt && i < c->trace.nr_acc; i++)
				learnt[i] = c->trace.acc[i].compute_ns;
		}
	}
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_CHECK(st.replans >= 1, "detach_replan: the plan never stopped");
	T_CHECK(st.planned_steps >= 3, "detach_replan: %llu of 6 steps planned",
		(unsigned long long)st.planned_steps);
	T_CHECK(learnt != NULL, "detach_replan: no plan after the profile");
	for (uint32_t i = 0; learnt && i < c->trace.nr_acc; i++)
		T_CHECK(c->trace.acc[i].compute_ns == learnt[i],
			"detach_replan: access %u's time changed from %llu to %llu ns", i,
			(unsigned long long)learnt[i], (unsigned long long)c->trace.acc[i].compute_ns);
	printf("detach_replan: %llu/6 steps planned, %llu re-plans\n",
	       (unsigned long long)st.planned_steps, (unsigned long long)st.replans);
	free(learnt);
	tencache_cache_destroy(c);
}

static void bad_input(struct tencache *tc)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .gpu_budget = 1 << 20 };
	struct tencache_cache *c;
	struct job late = { 0 };
	uint64_t tok, tok2;
	pthread_t th;
	void *h;

	T_EQ(tencache_op_detach(NULL, &tok), -EINVAL);
	T_EQ(tencache_op_done(NULL, 1), -EINVAL);
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_OPT_STATE), 0);
	T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_OPT_STATE), 1);
	T_EQ(tencache_op_detach(c, &tok), -EINVAL);		/* outside a step */
	T_EQ(tencache_step_begin(c), 0);
	T_EQ(tencache_op_detach(c, &tok), -EINVAL);		/* no op open */
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &h), 0);
	T_EQ(tencache_op_detach(c, &tok), -EINVAL);		/* a GPU op */
	T_EQ(tencache_release(c, 0, NULL, 0), 0);
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &h), 0);
	T_EQ(tencache_op_detach(c, NULL), -EINVAL);
	T_EQ(tencache_op_detach(c, &tok), 0);
	T_EQ(tencache_op_detach(c, &tok2), -EINVAL);		/* detached already */
	T_EQ(tencache_release(c, 1, NULL, 0), -EBUSY);		/* not done */
	/*
	 * The step may end with the op running: it carries over. The next
	 * step's begin enters a plan, which waits for the op: another thread
	 * finishes it.
	 */
	T_EQ(tencache_step_end(c), 0);
	late.c = c;
	late.token = tok;
	T_EQ(pthread_create(&th, NULL, done_later, &late), 0);
	T_EQ(tencache_step_begin(c), 0);
	pthread_join(th, NULL);
	T_EQ(late.done_ret, 0);
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &h), -EBUSY);
	T_EQ(tencache_op_done(c, 0), -EINVAL);
	T_EQ(tencache_op_done(c, tok + 1), -EINVAL);
	T_EQ(tencache_op_done(c, tok), -EINVAL);		/* done twice */
	T_EQ(tencache_release(c, 1, NULL, 0), 0);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &h), 0);
	T_EQ(tencache_release(c, 0, NULL, 0), 0);
	T_EQ(tencache_step_end(c), 0);
	T_EQ(tencache_step_begin(c), 0);			/* forgets done ops */
	T_EQ(tencache_op_done(c, tok), -EINVAL);		/* a past step's */
	/* TENCACHE_ACQ_NOWAIT and tencache_op_wait */
	T_EQ(tencache_op_wait(NULL, 1), -EINVAL);
	T_EQ(tencache_op_wait(c, 0), -EINVAL);
	T_EQ(tencache_op_wait(c, tok), -EINVAL);		/* a past step's */
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_NOWAIT, NULL, &h),
	     -EINVAL);						/* not a host op */
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST | TENCACHE_ACQ_NOWAIT,
			      NULL, &h), 0);
	T_EQ(tencache_release(c, 1, NULL, 0), 0);		/* not detached: waits here */
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST | TENCACHE_ACQ_NOWAIT,
			      NULL, &h), 0);
	T_EQ(tencache_op_detach(c, &tok2), 0);
	T_EQ(tencache_op_wait(c, tok2 + 1), -EINVAL);
	T_EQ(tencache_op_wait(c, tok2), 0);
	T_EQ(tencache_op_wait(c, tok2), 0);			/* again, until done */
	T_EQ(tencache_op_done(c, tok2), 0);
	T_EQ(tencache_op_wait(c, tok2), -EINVAL);		/* done */
	T_EQ(tencache_release(c, 1, NULL, 0), 0);
	T_EQ(tencache_step_end(c), 0);
	tencache_cache_destroy(c);
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN,
				      .pool_backend = TENCACHE_POOL_THP };
	const char *dir = getenv("TEST_DIR") ? getenv("TEST_DIR") : "/var/tmp";
	struct tencache *tc;

	for (int i = 0; i < NT; i++)
		bytes[i] = (4 + (i * 5) % 11) * 4 * KiB;
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	bad_input(tc);
	held_room(tc);
	detach_replan(tc);
	T_EQ(run(tc, 0, dir), 0);
	if (t_odirect_ok(dir)) {
		T_EQ(run(tc, 1, dir), 0);
		held_pinned(tc, dir);
		for (int i = 0; i < NT; i++)	/* held_pinned's sizes */
			bytes[i] = (4 + (i * 5) % 11) * 4 * KiB;
	} else {
		printf("NVMe tier not tested: %s refuses O_DIRECT\n", dir);
	}
	tencache_exit(tc);
	return t_exit();
}
