/*
 * decide.c - tencache-bench decide: the CPU cost of the tensor cache's
 * acquire / release decisions (the issue's goal: <= 1 us per decision),
 * through the public trainer API, over a realistic trace (the transformer
 * step of tencache-bench replay; default the embedded OPT-1.3B-shaped model,
 * ~2000 tensors, ~3200 accesses per step).
 *
 * The copies are made negligible: every tensor is registered at its size
 * divided by --scale (rounded up to 4 KiB), so the same trace with the same
 * relative sizes and budget runs its evictions, prefetches and write-backs
 * on a few MiB.
 *
 * Two measured passes per variant (after warm-up steps):
 *   whole  the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) is read
 *          once per step around all its acquires and releases: CPU per
 *          decision, everything included (issuing copies; in host mode an
 *          acquire that waits for a copy blocks, and blocking costs the
 *          futex calls and context switches, not the wait itself)
 *   split  every call is timed by the wall clock (vDSO, ~20 ns, subtracted),
 *          with getrusage(RUSAGE_THREAD) around it, untimed: a call during
 *          which the thread switched out (blocked on a copy, or preempted)
 *          is counted apart; the others' wall time is their CPU time. The
 *          thread CPU clock is a system call here (~0.5 us), too coarse to
 *          time one call.
 *
 * Side by side, in one run:
 *   ours       the planned path: Belady eviction, timed prefetch (the goal)
 *   nobatch    the same, one device call per copy (TENCACHE_CACHE_NO_BATCH):
 *              what batching the copies planned together saves
 *   issuer     the same, with the copy streams' device calls made by a
 *              thread of the cache (TENCACHE_CACHE_ISSUER): what that
 *              thread saves (or costs) the caller
 *   resident   the planned path with a GPU budget of all the state (fetches
 *              only what the CPU optimizer rewrote)
 *   on-demand  the same API with planning off (the profiler never stops):
 *              fetch on demand, evict LRU
 *   naive      what a trainer would write: a hash map keyed by the tensor's
 *              address plus an LRU list and a byte budget, in this file; it
 *              only does the bookkeeping (no allocator, no copies), so it is
 *              a lower bound for a hand-written cache
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"	/* tc_exec_test_count: device calls per decision */
#include "tencache.h"
#include "plan/plan.h"
#include "bench.h"

#define GOAL_NS		1000.0	/* the issue's goal per acquire / release */
#define TARGET_STATE	(64ULL << 20)	/* default --scale: all state in ~64 MiB */
#define MAX_STEPS	100

/* The embedded default model: replay's (OPT-1.3B's shape scaled down). */
#define DEF_MODEL	"opt-1.3b"
#define DEF_HIDDEN	512
#define DEF_VOCAB	16384

static inline uint64_t clk(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static inline uint64_t cpu_ns(void)
{
	return clk(CLOCK_THREAD_CPUTIME_ID);
}

static inline uint64_t wall_ns(void)
{
	return clk(CLOCK_MONOTONIC);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* What a pair of wall-clock reads adds to a timed call (median of many). */
static double timer_cost(void)
{
	enum { N = 20001 };
	static uint64_t d[N];

	for (int i = 0; i < N; i++) {
		uint64_t w0 = wall_ns(), w1 = wall_ns();

		d[i] = w1 - w0;
	}
	qsort(d, N, sizeof(d[0]), cmp_u64);
	return d[N / 2];
}

/* ---- the naive baseline: hash map + LRU list + byte budget ---------------- */

struct nv_ent {
	uint64_t key, bytes;
	int32_t prev, next;	/* LRU list, -1 ends; head = most recent */
	uint8_t resident, held, dirty;
};

struct naive {
	struct nv_ent *e;
	int32_t *slot;		/* open addressing, -1 empty */
	uint32_t n, mask;
	int32_t head, tail;
	uint64_t budget, used;
	uint64_t acquires, hits, h2d, d2h;
};

static uint64_t mix(uint64_t x)	/* splitmix64's finalizer */
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* A trainer keys its cache by the tensor's address (data_ptr). */
static uint64_t nv_key(uint32_t id)
{
	return 0x7f3a00000000ULL + (uint64_t)id * 4096 * 37;
}

static int32_t nv_find(struct naive *nv, uint64_t key)
{
	for (uint32_t h = mix(key) & nv->mask;; h = (h + 1) & nv->mask) {
		int32_t i = nv->slot[h];

		if (i < 0 || nv->e[i].key == key)
			return i;
	}
}

static void nv_unlink(struct naive *nv, int32_t i)
{
	struct nv_ent *e = &nv->e[i];

	if (e->prev >= 0)
		nv->e[e->prev].next = e->next;
	else
		nv->head = e->next;
	if (e->next >= 0)
		nv->e[e->next].prev = e->prev;
	else
		nv->tail = e->prev;
	e->prev = e->next = -1;
}

static void nv_push(struct naive *nv, int32_t i)
{
	struct nv_ent *e = &nv->e[i];

	e->prev = -1;
	e->next = nv->head;
	if (nv->head >= 0)
		nv->e[nv->head].prev = i;
	nv->head = i;
	if (nv->tail < 0)
		nv->tail = i;
}

static int nv_create(struct naive *nv, const struct tc_trace *tr, uint64_t budget)
{
	uint32_t size = 1;

	memset(nv, 0, sizeof(*nv));
	while (size < 2 * tr->nr_tensors)
		size <<= 1;
	nv->e = calloc(tr->nr_tensors, sizeof(*nv->e));
	nv->slot = malloc(size * sizeof(*nv->slot));
	if (!nv->e || !nv->slot) {
		free(nv->e);
		free(nv->slot);
		return -ENOMEM;
	}
	memset(nv->slot, 0xff, size * sizeof(*nv->slot));
	nv->mask = size - 1;
	nv->n = tr->nr_tensors;
	nv->head = nv->tail = -1;
	nv->budget = budget;
	for (uint32_t i = 0; i < tr->nr_tensors; i++) {
		uint64_t key = nv_key(i);
		uint32_t h = mix(key) & nv->mask;

		while (nv->slot[h] >= 0)
			h = (h + 1) & nv->mask;
		nv->slot[h] = i;
		nv->e[i] = (struct nv_ent){ .key = key, .bytes = tr->tensors[i].bytes,
					    .prev = -1, .next = -1 };
	}
	return 0;
}

static void nv_destroy(struct naive *nv)
{
	free(nv->e);
	free(nv->slot);
}

static void nv_drop(struct naive *nv, int32_t i)
{
	struct nv_ent *e = &nv->e[i];

	if (e->dirty)
		nv->d2h += e->bytes;	/* write back */
	e->dirty = 0;
	e->resident = 0;
	nv->used -= e->bytes;
	nv_unlink(nv, i);
}

static int nv_acquire(struct naive *nv, uint64_t key, unsigned flags)
{
	int32_t i = nv_find(nv, key);
	struct nv_ent *e;

	if (i < 0)
		return -ENOENT;
	e = &nv->e[i];
	if (flags & TENCACHE_ACQ_HOST) {
		/* the host copy must be current; a host write makes the GPU copy stale */
		if (e->resident && (e->dirty || (flags & TENCACHE_ACQ_WRITE)))
			nv_drop(nv, i);
		e->held = 1;
		return 0;
	}
	if (flags & TENCACHE_ACQ_READ)
		nv->acquires++;
	if (e->resident) {
		nv->hits += !!(flags & TENCACHE_ACQ_READ);
		nv_unlink(nv, i);
	} else {
		while (nv->used + e->bytes > nv->budget) {
			int32_t v = nv->tail;

			while (v >= 0 && nv->e[v].held)
				v = nv->e[v].prev;
			if (v < 0)
				return -ENOMEM;
			nv_drop(nv, v);
		}
		e->resident = 1;
		nv->used += e->bytes;
		if (flags & TENCACHE_ACQ_READ)
			nv->h2d += e->bytes;	/* fetch */
	}
	nv_push(nv, i);
	e->held = 1;
	if (flags & TENCACHE_ACQ_WRITE)
		e->dirty = 1;
	return 0;
}

static int nv_release(struct naive *nv, uint64_t key)
{
	int32_t i = nv_find(nv, key);

	if (i < 0 || !nv->e[i].held)
		return -ENOENT;
	nv->e[i].held = 0;
	return 0;
}

/* ---- one variant's run ---------------------------------------------------- */

enum { V_OURS, V_NOBATCH, V_ISS, V_RESIDENT, V_ONDEMAND, V_NAIVE, V_NR };

static const char *const vnames[V_NR] = { "ours", "nobatch", "issuer", "resident",
					  "on-demand", "naive" };
static const char *const vdesc[V_NR] = {
	"tencache planned: Belady eviction + timed prefetch, --gpu-budget",
	"ours with TENCACHE_CACHE_NO_BATCH: one device call per copy",
	"ours with TENCACHE_CACHE_ISSUER: copies and their events made by a thread of the cache",
	"tencache planned, GPU budget = all state (fetches only what the CPU optimizer rewrote)",
	"tencache, planning off (profiling on): fetch on demand, LRU",
	"hash map + LRU list + byte budget (bookkeeping only, no copies)",
};

/* One kind of call in the split pass. */
struct calls {
	uint64_t *ns;		/* wall ns of the calls that did not switch out */
	uint64_t n, sum;
	uint64_t calls, switched;
};

struct vres {
	bool ran;
	double dec_cpu, dec_wall;	/* whole pass: per acquire or release */
	double dec_proc;		/* the same, every thread's CPU */
	double acq, acq_p50, acq_p99, acq_sw;	/* split: ns; share switched out */
	double rel, rel_p50, rel_p99, rel_sw;
	double step_cpu;		/* step_end + step_begin, CPU ns */
	double hit;			/* GPU read hit rate, measured steps */
	uint64_t planned;		/* measured steps run from a plan */
	double own_ns;			/* the cache's decision_ns / decisions */
	double dcalls[TC_DC_NR];	/* device calls per decision, measured steps */
	double dns[TC_DC_NR];		/* --call-ns: wall ns inside them per decision */
};

struct ctx {
	const struct tc_trace *tr;	/* scaled */
	uint32_t steps, warmup;		/* steps per measured pass, warm-up steps */
	uint64_t gap_ns;		/* --gap-us: the trainer's own work after an op */
	bool call_ns;			/* --call-ns: time the device calls too */
	uint64_t gap_spent;		/* in this step's whole pass: taken out again */
	double tcost;			/* wall-clock pair, ns */
	struct calls acq, rel;
	uint64_t whole_cpu, whole_wall, whole_proc, whole_n;
	uint64_t step_cpu, step_n;
};

static unsigned acq_flags(const struct tc_access *a)
{
	return ((a->flags & TC_ACC_READ) ? TENCACHE_ACQ_READ : 0) |
	       ((a->flags & TC_ACC_WRITE) ? TENCACHE_ACQ_WRITE : 0) |
	       ((a->flags & TC_ACC_HOST) ? TENCACHE_ACQ_HOST : 0);
}

/* Passes: warm-up steps, then --steps SPLIT steps, then --steps WHOLE. */
enum { P_WARMUP, P_SPLIT, P_WHOLE };

static int pass_of(const struct ctx *x, uint32_t k)
{
	return k < x->warmup ? P_WARMUP : k < x->warmup + x->steps ? P_SPLIT : P_WHOLE;
}

static void reset(struct ctx *x)
{
	uint64_t *a = x->acq.ns, *r = x->rel.ns;

	memset(&x->acq, 0, sizeof(x->acq));
	memset(&x->rel, 0, sizeof(x->rel));
	x->acq.ns = a;
	x->rel.ns = r;
	x->whole_cpu = x->whole_wall = x->whole_proc = x->whole_n = 0;
	x->step_cpu = x->step_n = 0;
}

static uint64_t switches(void)
{
	struct rusage u;

	getrusage(RUSAGE_THREAD, &u);
	return u.ru_nvcsw + u.ru_nivcsw;
}

/* In the split pass, time one call into k; otherwise just make it. */
/*
 * The trainer's own CPU work between ops (launching kernels: tens of us a
 * layer in PyTorch): a busy wait, outside every timed call, taken out of the
 * whole pass's clocks. Threads of the cache may work meanwhile.
 */
static void gap(struct ctx *x)
{
	uint64_t t0, t;

	if (!x->gap_ns)
		return;
	t0 = wall_ns();
	do
		t = wall_ns();
	while (t - t0 < x->gap_ns);
	x->gap_spent += t - t0;
}

#define CALL(x, k, pass, call) ({					\
	int r_;								\
	if ((pass) == P_SPLIT) {					\
		uint64_t s0_ = switches(), w0_ = wall_ns();		\
		r_ = (call);						\
		uint64_t w1_ = wall_ns(), s1_ = switches();		\
		(k)->calls++;						\
		if (s1_ != s0_) {					\
			(k)->switched++;				\
		} else {						\
			(k)->ns[(k)->n++] = w1_ - w0_;			\
			(k)->sum += w1_ - w0_;				\
		}							\
	} else {							\
		r_ = (call);						\
	}								\
	r_;								\
})

static double sub(double v, double cost)
{
	return v > cost ? v - cost : 0;
}

static void summarize(const struct ctx *x, struct calls *k, double *mean, double *p50,
		      double *p99, double *sw)
{
	*mean = k->n ? sub((double)k->sum / k->n, x->tcost) : 0;
	qsort(k->ns, k->n, sizeof(*k->ns), cmp_u64);
	*p50 = k->n ? sub(k->ns[k->n / 2], x->tcost) : 0;
	*p99 = k->n ? sub(k->ns[(k->n - 1) * 99 / 100], x->tcost) : 0;
	*sw = k->calls ? (double)k->switched / k->calls : 0;
}

static void finish(struct ctx *x, struct vres *r)
{
	r->dec_cpu = x->whole_n ? (double)x->whole_cpu / x->whole_n : 0;
	r->dec_wall = x->whole_n ? (double)x->whole_wall / x->whole_n : 0;
	r->dec_proc = x->whole_n ? (double)x->whole_proc / x->whole_n : 0;
	r->step_cpu = x->step_n ? (double)x->step_cpu / x->step_n : 0;
	summarize(x, &x->acq, &r->acq, &r->acq_p50, &r->acq_p99, &r->acq_sw);
	summarize(x, &x->rel, &r->rel, &r->rel_p50, &r->rel_p99, &r->rel_sw);
	r->ran = true;
}

static int run_naive(struct ctx *x, uint64_t budget, struct vres *r)
{
	const struct tc_trace *tr = x->tr;
	struct naive nv;
	uint64_t acq0 = 0, hit0 = 0;
	int ret = nv_create(&nv, tr, budget);

	if (ret)
		return ret;
	reset(x);
	for (uint32_t k = 0; k < x->warmup + 2 * x->steps && !ret; k++) {
		int m = pass_of(x, k);
		uint32_t start = 0;
		uint64_t w0 = wall_ns(), c0 = cpu_ns(), p0 = clk(CLOCK_PROCESS_CPUTIME_ID);

		x->gap_spent = 0;
		if (k == x->warmup)
			acq0 = nv.acquires, hit0 = nv.hits;
		for (uint32_t i = 0; i < tr->nr_acc && !ret; i++) {
			const struct tc_access *ac = &tr->acc[i];

			ret = CALL(x, &x->acq, m, nv_acquire(&nv, nv_key(ac->tensor),
							      acq_flags(ac)));
			if (ret || !(ac->flags & TC_ACC_END))
				continue;
			for (uint32_t j = start; j <= i && !ret; j++)
				ret = CALL(x, &x->rel, m,
					   nv_release(&nv, nv_key(tr->acc[j].tensor)));
			start = i + 1;
			gap(x);
		}
		if (m == P_WHOLE) {
			x->whole_cpu += sub(cpu_ns() - c0, x->gap_spent);
			x->whole_wall += sub(wall_ns() - w0, x->gap_spent);
			x->whole_proc += sub(clk(CLOCK_PROCESS_CPUTIME_ID) - p0, x->gap_spent);
			x->whole_n += 2 * tr->nr_acc;
		}
		x->step_n += m != P_WARMUP;	/* a step boundary costs it nothing */
	}
	if (ret) {
		fprintf(stderr, "decide: naive: %s (budget below an op?)\n", strerror(-ret));
	} else {
		r->hit = nv.acquires > acq0 ? (double)(nv.hits - hit0) / (nv.acquires - acq0) : 1;
		finish(x, r);
	}
	nv_destroy(&nv);
	return ret;
}

static int cache_fail(const char *what, uint32_t i, int ret)
{
	fprintf(stderr, "decide: %s (access %u): %s\n", what, i, strerror(-ret));
	return ret;
}

static int run_cache(struct ctx *x, struct tencache *tc, bool host, unsigned flags,
		     uint64_t budget, uint32_t warmup_steps, const char *name, struct vres *r)
{
	const struct tc_trace *tr = x->tr;
	struct tencache_cache_params cp = { 0 };
	struct tencache_cache_stats s0, s1;
	struct tencache_cache *c;
	uint64_t dc[TC_DC_NR] = { 0 }, dns[TC_DC_NR] = { 0 };
	int *ids, ret;

	cp.flags = (host ? TENCACHE_CACHE_HOST_MODE : 0) | flags;
	cp.policy = TENCACHE_POLICY_OURS;
	cp.gpu_budget = budget;
	cp.warmup_steps = warmup_steps;
	ids = malloc(tr->nr_tensors * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	ret = tencache_cache_create(tc, &c, &cp);
	if (ret) {
		free(ids);
		return cache_fail("tencache_cache_create", 0, ret);
	}
	for (uint32_t t = 0; t < tr->nr_tensors && !ret; t++) {
		ret = tencache_tensor_register(c, tr->tensors[t].bytes, tr->tensors[t].role);
		ids[t] = ret;
		ret = ret < 0 ? cache_fail("tencache_tensor_register", 0, ret) : 0;
	}
	reset(x);
	memset(&s0, 0, sizeof(s0));
	/* warm-up goes on while the cache times its plans (plan_trying) */
	for (uint32_t k = 0, warm = x->warmup; k < warm + 2 * x->steps && !ret; k++) {
		int m = k < warm ? P_WARMUP : k < warm + x->steps ? P_SPLIT : P_WHOLE;
		uint32_t start = 0;
		uint64_t w0, c0, p0, cb;

		if (k == warm && ((ret = tencache_cache_stats(c, &s0, sizeof(s0))) ||
				       (ret = tc_exec_test_count(c, dc, x->call_ns ? dns : NULL))))
			break;
		/* a step boundary: step_begin here and step_end below, timed as one */
		cb = cpu_ns();
		ret = tencache_step_begin(c);
		cb = cpu_ns() - cb;
		if (ret) {
			cache_fail("tencache_step_begin", 0, ret);
			break;
		}
		x->gap_spent = 0;
		w0 = wall_ns();
		c0 = cpu_ns();
		p0 = clk(CLOCK_PROCESS_CPUTIME_ID);
		for (uint32_t i = 0; i < tr->nr_acc && !ret; i++) {
			const struct tc_access *ac = &tr->acc[i];
			void *ptr;

			ret = CALL(x, &x->acq, m, tencache_acquire(c, ids[ac->tensor],
								    acq_flags(ac), NULL, &ptr));
			if (ret) {
				cache_fail("tencache_acquire", i, ret);
				break;
			}
			if (!(ac->flags & TC_ACC_END))
				continue;
			/* compute 0: no host-op sleep, no compute task */
			for (uint32_t j = start; j <= i && !ret; j++) {
				ret = CALL(x, &x->rel, m, tencache_release(c, ids[tr->acc[j].tensor],
									   NULL, 0));
				if (ret)
					cache_fail("tencache_release", j, ret);
			}
			start = i + 1;
			gap(x);
		}
		if (ret)
			break;
		if (m == P_WHOLE) {
			x->whole_cpu += sub(cpu_ns() - c0, x->gap_spent);
			x->whole_wall += sub(wall_ns() - w0, x->gap_spent);
			x->whole_proc += sub(clk(CLOCK_PROCESS_CPUTIME_ID) - p0, x->gap_spent);
			x->whole_n += 2 * tr->nr_acc;
		}
		c0 = cpu_ns();
		ret = tencache_step_end(c);
		if (m != P_WARMUP) {
			x->step_cpu += cpu_ns() - c0 + cb;
			x->step_n++;
		}
		if (ret)
			cache_fail("tencache_step_end", tr->nr_acc, ret);
		else
			ret = tencache_cache_sync(c, NULL);
		if (!ret && m == P_WARMUP && k + 1 == warm && warm < x->warmup + 8) {
			struct tencache_cache_stats st;

			ret = tencache_cache_stats(c, &st, sizeof(st));
			warm += !ret && st.plan_trying;
		}
	}
	if (!ret)
		ret = tencache_cache_stats(c, &s1, sizeof(s1));
	if (!ret) {
		uint64_t acq = s1.acquires - s0.acquires, dec = s1.decisions - s0.decisions;

		r->hit = acq ? (double)(s1.hits - s0.hits) / acq : 1;
		r->planned = s1.planned_steps - s0.planned_steps;
		r->own_ns = dec ? (double)(s1.decision_ns - s0.decision_ns) / dec : 0;
		for (int d = 0; d < TC_DC_NR; d++) {
			r->dcalls[d] = dec ? (double)__atomic_load_n(&dc[d], __ATOMIC_RELAXED) / dec : 0;
			r->dns[d] = dec ? (double)__atomic_load_n(&dns[d], __ATOMIC_RELAXED) / dec : 0;
		}
		finish(x, r);
	}
	tencache_cache_destroy(c);
	free(ids);
	if (ret)
		fprintf(stderr, "decide: %s failed\n", name);
	return ret;
}

/* ---- setup and output ----------------------------------------------------- */

static int usage(void)
{
	fprintf(stderr,
"usage: tencache-bench decide [options]\n"
"  CPU time per acquire / release decision of the tensor cache (goal <= 1 us)\n"
"  over a model's training-step trace, beside on-demand and a naive hash+LRU\n"
"  cache, in one run. Tensor sizes are divided by --scale so copies cost\n"
"  next to nothing and the decision path is what is timed.\n"
"  --model NAME|PATH   as replay (default: replay's embedded OPT-1.3B shape,\n"
"                      --hidden %d --vocab %d)\n"
"  --layers N --hidden N --vocab N   override the shape\n"
"  --gpu-budget P%%     GPU budget, %% of the (scaled) fp16 params (default 50%%;\n"
"                      raised to the largest op if below it)\n"
"  --scale N           divide every tensor's bytes by N (rounded up to 4 KiB;\n"
"                      default: all state in about 64 MiB)\n"
"  --steps N           steps per measured pass, two passes per variant (default 5)\n"
"  --warmup N          steps before them, >= 1 (default 2: profile + first plan)\n"
"  --gap-us N          the trainer's own CPU work after each op, a busy wait of\n"
"                      N us outside the timed calls (default 0); threads of the\n"
"                      cache (the issuer) may work meanwhile\n"
"  --call-ns           also time each device call (wall ns inside it, every\n"
"                      thread's) and print them per decision; the clock reads\n"
"                      add to the CPU figures, so the goal is judged without it\n"
"  --gpu               use the GPU when there is one (default: host mode,\n"
"                      copies are memcpy on worker threads)\n"
"  -o PATH             append the results block to PATH\n",
		DEF_HIDDEN, DEF_VOCAB);
	return 2;
}

static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *v)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || x < lo || x > hi)
		return -EINVAL;
	*v = x;
	return 0;
}

static int load_model(const char *name, uint32_t layers, uint32_t hidden, uint32_t vocab,
		      struct tc_model *m)
{
	int ret = tc_model_builtin(name, m);

	if (ret == -ENOENT)
		ret = tc_model_from_hf_file(name, m);
	if (ret) {
		fprintf(stderr, "decide: model %s: %s (built-in:", name, strerror(-ret));
		for (const char *const *n = tc_model_builtin_names(); *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, ", or an HF config.json)\n");
		return ret;
	}
	if (hidden && hidden != m->hidden) {
		uint32_t hd = m->hidden / m->heads, kvr = m->heads / m->kv_heads;

		if (hidden % hd || (hidden / hd) % kvr) {
			fprintf(stderr, "decide: --hidden %u is not a multiple of the head size %u\n",
				hidden, hd);
			return -EINVAL;
		}
		m->ffn = (uint32_t)((uint64_t)m->ffn * hidden / m->hidden);
		m->heads = hidden / hd;
		m->kv_heads = m->heads / kvr;
		m->hidden = hidden;
	}
	if (layers)
		m->layers = layers;
	if (vocab)
		m->vocab = vocab;
	return 0;
}

/* The trace with every tensor's bytes divided by scale, rounded up to 4 KiB. */
static int scale_trace(const struct tc_trace *in, uint64_t scale, struct tc_trace *o)
{
	int ret;

	tc_trace_init(o);
	for (uint32_t t = 0; t < in->nr_tensors; t++) {
		uint64_t b = (in->tensors[t].bytes + scale - 1) / scale;

		ret = tc_trace_add_tensor(o, (b + 4095) & ~4095ULL, in->tensors[t].role);
		if (ret < 0)
			return ret;
	}
	for (uint32_t i = 0; i < in->nr_acc; i++) {
		const struct tc_access *a = &in->acc[i];

		ret = tc_trace_add_access(o, a->tensor, a->phase, a->flags, a->compute_ns);
		if (ret)
			return ret;
	}
	return 0;
}

static const char *const dn[TC_DC_NR] = { "copy", "spin", "record", "wait",
	"waithost", "query", "sync", "ssync", "event", "enter" };

/* Per variant and kind of device call: calls, or (ns) wall ns, per decision. */
static void dev_table(const struct vres *res, const char *title, bool ns)
{
	say("%s\n%-10s", title, "variant");
	for (int d = 0; d < TC_DC_NR; d++)
		say(" %8s", dn[d]);
	say(" %8s\n", "all");
	for (int v = 0; v < V_NR; v++) {
		const double *x = ns ? res[v].dns : res[v].dcalls;
		double all = 0;

		if (!res[v].ran || v == V_NAIVE)
			continue;
		say("%-10s", vnames[v]);
		for (int d = 0; d < TC_DC_NR; d++) {
			say(ns ? " %8.0f" : " %8.3f", x[d]);
			all += x[d];
		}
		say(ns ? " %8.0f\n" : " %8.3f\n", all);
	}
}

int bench_decide(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'M' }, { "layers", 1, 0, 'L' }, { "hidden", 1, 0, 'H' },
		{ "vocab", 1, 0, 'V' }, { "gpu-budget", 1, 0, 'b' }, { "scale", 1, 0, 's' },
		{ "steps", 1, 0, 'n' }, { "warmup", 1, 0, 'w' }, { "gpu", 0, 0, 'g' },
		{ "gap-us", 1, 0, 'G' }, { "call-ns", 0, 0, 'C' }, { "out", 1, 0, 'o' }, { "help", 0, 0, 'h' }, { 0 },
	};
	const char *model = NULL;
	uint32_t layers = 0, hidden = 0, vocab = 0, steps = 5, warmup = 2, scale32 = 0, gap_us = 0;
	double pct_budget = 50;
	bool gpu = false, host;
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN };
	struct tencache *tc = NULL;
	struct tc_trace full, tr;
	struct tc_gen_cfg gen;
	struct tc_model m;
	struct ctx x = { 0 };
	struct vres res[V_NR];
	uint64_t scale, all, p16, maxop, budget, nacc;
	char *end;
	int c, ret, fails = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		ret = 0;
		switch (c) {
		case 'M': model = optarg; break;
		case 'L': ret = parse_u32(optarg, 1, 100000, &layers); break;
		case 'H': ret = parse_u32(optarg, 1, 1u << 20, &hidden); break;
		case 'V': ret = parse_u32(optarg, 1, 1u << 24, &vocab); break;
		case 's': ret = parse_u32(optarg, 1, UINT32_MAX, &scale32); break;
		case 'n': ret = parse_u32(optarg, 1, MAX_STEPS, &steps); break;
		case 'w': ret = parse_u32(optarg, 1, 100, &warmup); break;
		case 'G': ret = parse_u32(optarg, 0, 100000, &gap_us); break;
		case 'g': gpu = true; break;
		case 'C': x.call_ns = true; break;
		case 'b':
			errno = 0;
			pct_budget = strtod(optarg, &end);
			if (errno || end == optarg || strcmp(end, "%") || !(pct_budget > 0) ||
			    pct_budget > 100)
				ret = -EINVAL;
			break;
		case 'o':
			if (bench_set_out(optarg)) {
				fprintf(stderr, "decide: %s: %s\n", optarg, strerror(errno));
				return 1;
			}
			break;
		case 'h': usage(); return 0;
		default: return usage();
		}
		if (ret)
			return bench_bad_value("decide", lo, c, optarg);
	}
	if (optind < argc)
		return usage();
	if (!model) {
		model = DEF_MODEL;
		hidden = hidden ? hidden : DEF_HIDDEN;
		vocab = vocab ? vocab : DEF_VOCAB;
	}
	if (load_model(model, layers, hidden, vocab, &m))
		return 1;
	tc_trace_init(&full);
	tc_trace_init(&tr);
	tc_gen_cfg_default(&gen);
	ret = tc_model_trace(&m, &gen, &full);
	all = tc_trace_bytes(&full, -1);
	scale = scale32 ? scale32 : (all + TARGET_STATE - 1) / TARGET_STATE;
	ret = ret ?: scale_trace(&full, scale ? scale : 1, &tr);
	if (ret) {
		fprintf(stderr, "decide: generating the trace: %s\n", strerror(-ret));
		goto out;
	}
	all = tc_trace_bytes(&tr, -1);
	p16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16);
	maxop = tc_trace_max_op_bytes(&tr);
	budget = (uint64_t)(p16 * pct_budget / 100) & ~4095ULL;
	if (budget < maxop)
		budget = maxop;
	nacc = tr.nr_acc;

	if (gpu)
		tp.flags = 0;
	ret = tencache_init(&tc, &tp);
	if (ret) {
		fprintf(stderr, "decide: tencache_init: %s\n", strerror(-ret));
		goto out;
	}
	host = !gpu || tencache_cuda_available(tc);
	x.tr = &tr;
	x.steps = steps;
	x.gap_ns = (uint64_t)gap_us * 1000;
	x.warmup = warmup;
	x.acq.ns = malloc(nacc * steps * sizeof(*x.acq.ns));
	x.rel.ns = malloc(nacc * steps * sizeof(*x.rel.ns));
	if (!x.acq.ns || !x.rel.ns) {
		ret = -ENOMEM;
		goto out;
	}
	x.tcost = timer_cost();

	bench_header(argc, argv);
	say("decide: %s (%u layers, hidden %u, vocab %u: %.1fM params): %u tensors, %u "
	     "accesses per step\n", m.name, m.layers, m.hidden, m.vocab,
	     tc_model_params(&m) / 1e6, tr.nr_tensors, tr.nr_acc);
	say("  sizes / %llu (4 KiB min): state %.1f MiB, fp16 params %.1f MiB, largest op "
	     "%.1f MiB; GPU budget %.1f MiB (%.0f%% of fp16 params%s)\n",
	     (unsigned long long)scale, all / 1048576.0, p16 / 1048576.0, maxop / 1048576.0,
	     budget / 1048576.0, 100.0 * budget / p16,
	     budget == maxop ? ", raised to the largest op" : "");
	say("  %s mode; per variant %u warm-up steps, then a split and a whole pass of %u "
	     "steps; compute 0 per op, the caller's own work %u us after each op;\n"
	     "  wall clock cost per timed call %.0f ns, subtracted\n",
	     host ? "host" : "GPU", warmup, steps, gap_us, x.tcost);

	memset(res, 0, sizeof(res));
	for (int v = 0; v < V_NR; v++) {
		fprintf(stderr, "  %-9s ...\n", vnames[v]);
		switch (v) {
		case V_OURS:
			ret = run_cache(&x, tc, host, 0, budget, 1, vnames[v], &res[v]);
			break;
		case V_NOBATCH:
			ret = run_cache(&x, tc, host, TENCACHE_CACHE_NO_BATCH, budget, 1,
					vnames[v], &res[v]);
			break;
		case V_ISS:
			ret = run_cache(&x, tc, host, TENCACHE_CACHE_ISSUER, budget, 1,
					vnames[v], &res[v]);
			break;
		case V_RESIDENT:
			ret = run_cache(&x, tc, host, 0, all, 1, vnames[v], &res[v]);
			break;
		case V_ONDEMAND:
			/* the profiler never hands over to a plan */
			ret = run_cache(&x, tc, host, 0, budget, warmup + 2 * steps + 1,
					vnames[v], &res[v]);
			break;
		case V_NAIVE:
			ret = run_naive(&x, budget, &res[v]);
			break;
		}
		if (ret)
			fails++;
		/* the planned variants must have run every measured step from a plan */
		if (!ret && (v == V_OURS || v == V_NOBATCH || v == V_ISS || v == V_RESIDENT) &&
		    res[v].planned != 2 * steps) {
			fprintf(stderr, "decide: %s: only %llu of %u measured steps ran from a "
				"plan (see the cache's warning above); the figures are not the "
				"planned path's\n", vnames[v], (unsigned long long)res[v].planned,
				2 * steps);
			fails++;
		}
	}

	say("\n%-10s %9s %9s %9s %8s | %8s %7s %7s %6s | %8s %7s %7s %6s | %8s %7s %7s %6s\n",
	     "variant", "CPU ns", "wall ns", "all thr", "acquire", "acquire", "p50", "p99", "switch",
	     "release", "p50", "p99", "switch", "step", "hit %", "planned", "own");
	say("%-10s %9s %9s %9s %8s | %8s %7s %7s %6s | %8s %7s %7s %6s | %8s %7s %7s %6s\n", "",
	     "/decision", "/decision", "CPU ns", "CPU ns", "ns", "", "", "%", "ns", "", "", "%", "CPU us",
	     "", "steps", "ns");
	for (int v = 0; v < V_NR; v++) {
		const struct vres *r = &res[v];

		if (!r->ran) {
			say("%-10s %9s\n", vnames[v], "error");
			continue;
		}
		say("%-10s %9.0f %9.0f %9.0f %8.0f | %8.0f %7.0f %7.0f %6.2f | %8.0f %7.0f %7.0f %6.2f | "
		     "%8.1f %7.2f %7llu ", vnames[v], r->dec_cpu, r->dec_wall, r->dec_proc,
		     sub(2 * r->dec_cpu, r->rel), r->acq, r->acq_p50, r->acq_p99, 100 * r->acq_sw,
		     r->rel, r->rel_p50, r->rel_p99, 100 * r->rel_sw, r->step_cpu / 1e3,
		     100 * r->hit, (unsigned long long)r->planned);
		if (v == V_NAIVE)
			say("%6s\n", "-");
		else
			say("%6.0f\n", r->own_ns);
	}
	dev_table(res, "\ndevice calls per decision (measured steps, their boundaries included; the\n"
		  "issuer's and the staging threads' calls too):", false);
	if (x.call_ns)
		dev_table(res, "\ndevice ns per decision (--call-ns: wall time inside the calls above, every\n"
			  "thread's; blocking syncs and queries included):", true);
	say("\n");
	for (int v = 0; v < V_NR; v++)
		say("  %-10s %s\n", vnames[v], vdesc[v]);
	say("  CPU, wall ns/decision: a pass of %u steps with the clocks read once per step\n"
	     "    around its acquires and releases (the caller thread's CPU time: waits block; the\n"
	     "    futex calls and context switches of blocking are in it); acquire CPU ns: the\n"
	     "    same less the releases (2 x decision - release); all thr: the process's CPU\n"
	     "    in that pass per decision, every thread (the issuer's, host mode's copies)\n"
	     "  acquire, release ns: another pass of %u steps, each call timed by the wall clock:\n"
	     "    mean, p50, p99 of the calls during which the thread did not switch out (their\n"
	     "    wall time is CPU time); switch: the share that did (blocked on a copy in host\n"
	     "    mode, or preempted)\n"
	     "  step: CPU per step_end + step_begin; hit: GPU reads found resident and ready;\n"
	     "    own: the cache's decision_ns counter per call (wall, its waits excluded)\n",
	     steps, steps);
	if (res[V_OURS].ran) {
		const struct vres *o = &res[V_OURS];
		double acq_all = sub(2 * o->dec_cpu, o->rel);
		/* a decision is what the caller pays apart from blocking on data: the
		 * acquires that did not switch out; the whole figure is shown beside */
		bool pass = o->dec_cpu <= GOAL_NS && o->acq <= GOAL_NS && o->rel <= GOAL_NS;

		for (int v = V_NOBATCH; v < V_NR; v++) {
			const struct vres *b = &res[v];
			char ra[32] = "-", rr[32] = "-";

			if (!b->ran || !(b->dec_cpu >= 1))
				continue;
			/* under 1 ns is below the clock's resolution: no ratio */
			if (b->acq >= 1)
				snprintf(ra, sizeof(ra), "x%.2f", o->acq / b->acq);
			if (b->rel >= 1)
				snprintf(rr, sizeof(rr), "x%.2f", o->rel / b->rel);
			say("  ours / %-9s CPU per decision x%.2f (acquire %s, release %s)\n",
			     vnames[v], o->dec_cpu / b->dec_cpu, ra, rr);
		}
		say("goal: <= %.0f ns of CPU per acquire / release decision: ours %.0f ns per "
		     "decision (acquire %.0f with blocking), acquire %.0f and release %.0f per call "
		     "that did not block: %s\n", GOAL_NS, o->dec_cpu, acq_all, o->acq, o->rel,
		     pass ? "PASS" : "FAIL");
	}
	ret = fails ? 1 : 0;
out:
	free(x.acq.ns);
	free(x.rel.ns);
	if (tc)
		tencache_exit(tc);
	tc_trace_free(&full);
	tc_trace_free(&tr);
	return ret < 0 ? 1 : ret;
}
