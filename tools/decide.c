/*
 * decide.c - tencache-bench decide: the CPU cost of the tensor cache's
 * acquire / release decisions (the goal: <= 1 us per decision),
 * through the public trainer API, over a realistic trace (the transformer
 * step of tencache-bench replay; default the embedded OPT-1.3B-shaped model,
 * ~2000 tensors, ~3200 accesses per step).
 *
 * The copies are made negligible: every tensor is registered at its size
 * divided by --scale (rounded up to 4 KiB), so the same trace with the same
 * relative sizes and budget runs its evictions, prefetches and write-backs
 * on a few MiB. Each call is timed with the calling thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID): waiting for a copy blocks and costs no CPU, so
 * what is measured is the decision work plus the cost of issuing the copies;
 * the clock's own cost is measured and subtracted. Wall time per call is
 * printed beside it.
 *
 * Side by side, in one run:
 *   ours       the planned path: Belady eviction, timed prefetch (the goal)
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
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "tencache.h"
#include "plan/plan.h"

int bench_decide(int argc, char **argv);

#define GOAL_NS		1000.0	/* the goal per acquire / release */
#define TARGET_STATE	(64ULL << 20)	/* default --scale: all state in ~64 MiB */
#define MAX_STEPS	100

/* The embedded default model: replay's (OPT-1.3B's shape scaled down). */
#define DEF_MODEL	"opt-1.3b"
#define DEF_HIDDEN	512
#define DEF_VOCAB	16384

static FILE *out;

/* A line to stdout and to the -o file. */
static void dsay(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dsay(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (out) {
		va_start(ap, fmt);
		vfprintf(out, fmt, ap);
		va_end(ap);
		fflush(out);
	}
}

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

/* The cost one timed call adds: a pair of CPU-clock reads plus a pair of
 * wall-clock reads, as measured around an empty call (median of many). */
static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void timer_cost(double *cpu, double *wall)
{
	enum { N = 20001 };
	static uint64_t dc[N], dw[N];

	for (int i = 0; i < N; i++) {
		uint64_t w0 = wall_ns(), c0 = cpu_ns();
		uint64_t c1 = cpu_ns(), w1 = wall_ns();

		dc[i] = c1 - c0;
		dw[i] = w1 - w0;
	}
	qsort(dc, N, sizeof(dc[0]), cmp_u64);
	qsort(dw, N, sizeof(dw[0]), cmp_u64);
	*cpu = dc[N / 2];
	*wall = dw[N / 2];
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

enum { V_OURS, V_RESIDENT, V_ONDEMAND, V_NAIVE, V_NR };

static const char *const vnames[V_NR] = { "ours", "resident", "on-demand", "naive" };
static const char *const vdesc[V_NR] = {
	"tencache planned: Belady eviction + timed prefetch, --gpu-budget",
	"tencache planned, GPU budget = all state (fetches only what the CPU optimizer rewrote)",
	"tencache, planning off (profiling on): fetch on demand, LRU",
	"hash map + LRU list + byte budget (bookkeeping only, no copies)",
};

struct vres {
	bool ran;
	uint64_t n_acq, n_rel, n_step;
	double acq_cpu, rel_cpu, step_cpu;	/* mean ns per call */
	double acq_wall, rel_wall, step_wall;
	double acq_p50, acq_p99, rel_p50, rel_p99;	/* CPU ns */
	double dec_cpu, dec_wall;	/* whole pass: per acquire or release */
	double hit;				/* GPU read hit rate, measured steps */
	uint64_t planned;			/* measured steps run from a plan */
	double own_ns;				/* the cache's decision_ns / decisions */
};

struct ctx {
	const struct tc_trace *tr;	/* scaled */
	uint32_t steps, warmup;		/* steps per measured pass, warm-up steps */
	double tcpu, twall;		/* timer cost per timed call */
	uint64_t *acq_c, *rel_c;	/* per-call CPU ns, measured steps */
};

static unsigned acq_flags(const struct tc_access *a)
{
	return ((a->flags & TC_ACC_READ) ? TENCACHE_ACQ_READ : 0) |
	       ((a->flags & TC_ACC_WRITE) ? TENCACHE_ACQ_WRITE : 0) |
	       ((a->flags & TC_ACC_HOST) ? TENCACHE_ACQ_HOST : 0);
}

static double pct(uint64_t *v, uint64_t n, double p)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u64);
	return v[(uint64_t)(p * (n - 1))];
}

static double sub(double x, double cost)
{
	return x > cost ? x - cost : 0;
}

/* Sums and per-call samples of one kind of call. */
struct acc_t {
	uint64_t cpu, wall, n;
};

static void finish(struct ctx *x, struct vres *r, struct acc_t *a, struct acc_t *rl,
		   struct acc_t *st, struct acc_t *wh)
{
	uint64_t na = a->n, nr = rl->n;

	r->dec_cpu = wh->n ? (double)wh->cpu / wh->n : 0;
	r->dec_wall = wh->n ? (double)wh->wall / wh->n : 0;

	r->n_acq = na;
	r->n_rel = nr;
	r->n_step = st->n;
	r->acq_cpu = na ? sub((double)a->cpu / na, x->tcpu) : 0;
	r->rel_cpu = nr ? sub((double)rl->cpu / nr, x->tcpu) : 0;
	r->step_cpu = st->n ? sub((double)st->cpu / st->n, 2 * x->tcpu) : 0;
	r->acq_wall = na ? sub((double)a->wall / na, x->twall) : 0;
	r->rel_wall = nr ? sub((double)rl->wall / nr, x->twall) : 0;
	r->step_wall = st->n ? sub((double)st->wall / st->n, 2 * x->twall) : 0;
	r->acq_p50 = sub(pct(x->acq_c, na, 0.5), x->tcpu);
	r->acq_p99 = sub(pct(x->acq_c, na, 0.99), x->tcpu);
	r->rel_p50 = sub(pct(x->rel_c, nr, 0.5), x->tcpu);
	r->rel_p99 = sub(pct(x->rel_c, nr, 0.99), x->tcpu);
	r->ran = true;
}

/*
 * A variant runs warm-up steps, then two measured passes of --steps each:
 * SPLIT times every call (CPU and wall, summed into a, sampled into v), so
 * acquire and release are apart; WHOLE reads the clocks once per step around
 * all its calls, with no per-call clock in the way.
 */
enum { P_WARMUP, P_SPLIT, P_WHOLE };

static int pass_of(const struct ctx *x, uint32_t k)
{
	return k < x->warmup ? P_WARMUP : k < x->warmup + x->steps ? P_SPLIT : P_WHOLE;
}

#define TIMED(a, v, pass, call) ({					\
	int r_;								\
	if ((pass) == P_SPLIT) {					\
		uint64_t w0_ = wall_ns(), c0_ = cpu_ns();		\
		r_ = (call);						\
		uint64_t c1_ = cpu_ns(), w1_ = wall_ns();		\
		(v)[(a).n] = c1_ - c0_;					\
		(a).cpu += c1_ - c0_;					\
		(a).wall += w1_ - w0_;					\
		(a).n++;						\
	} else {							\
		r_ = (call);						\
	}								\
	r_;								\
})

static int run_naive(struct ctx *x, uint64_t budget, struct vres *r)
{
	const struct tc_trace *tr = x->tr;
	struct acc_t a = { 0 }, rl = { 0 }, st = { 0 }, wh = { 0 };
	struct naive nv;
	uint64_t acq0 = 0, hit0 = 0;
	int ret = nv_create(&nv, tr, budget);

	if (ret)
		return ret;
	for (uint32_t k = 0; k < x->warmup + 2 * x->steps && !ret; k++) {
		int m = pass_of(x, k);
		uint32_t start = 0;
		uint64_t w0 = wall_ns(), c0 = cpu_ns();

		if (k == x->warmup)
			acq0 = nv.acquires, hit0 = nv.hits;
		for (uint32_t i = 0; i < tr->nr_acc && !ret; i++) {
			const struct tc_access *ac = &tr->acc[i];

			ret = TIMED(a, x->acq_c, m, nv_acquire(&nv, nv_key(ac->tensor),
								acq_flags(ac)));
			if (ret || !(ac->flags & TC_ACC_END))
				continue;
			for (uint32_t j = start; j <= i && !ret; j++)
				ret = TIMED(rl, x->rel_c, m,
					    nv_release(&nv, nv_key(tr->acc[j].tensor)));
			start = i + 1;
		}
		if (m == P_WHOLE) {
			wh.cpu += cpu_ns() - c0;
			wh.wall += wall_ns() - w0;
			wh.n += 2 * tr->nr_acc;
		}
		if (m != P_WARMUP)
			st.n++;	/* a step boundary costs the naive cache nothing */
	}
	if (ret) {
		fprintf(stderr, "decide: naive: %s (budget below an op?)\n", strerror(-ret));
	} else {
		r->hit = nv.acquires > acq0 ? (double)(nv.hits - hit0) / (nv.acquires - acq0) : 1;
		r->planned = 0;
		finish(x, r, &a, &rl, &st, &wh);
	}
	nv_destroy(&nv);
	return ret;
}

static int cache_fail(const char *what, uint32_t i, int ret)
{
	fprintf(stderr, "decide: %s (access %u): %s\n", what, i, strerror(-ret));
	return ret;
}

static int run_cache(struct ctx *x, struct tencache *tc, bool host, uint64_t budget,
		     uint32_t warmup_steps, const char *name, struct vres *r)
{
	const struct tc_trace *tr = x->tr;
	struct tencache_cache_params cp = { 0 };
	struct tencache_cache_stats s0, s1;
	struct acc_t a = { 0 }, rl = { 0 }, st = { 0 }, wh = { 0 };
	struct tencache_cache *c;
	int *ids, ret;

	cp.flags = host ? TENCACHE_CACHE_HOST_MODE : 0;
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
	memset(&s0, 0, sizeof(s0));
	for (uint32_t k = 0; k < x->warmup + 2 * x->steps && !ret; k++) {
		int m = pass_of(x, k);
		uint32_t start = 0;
		uint64_t w0, c0;

		if (k == x->warmup && (ret = tencache_cache_stats(c, &s0)))
			break;
		/* a step boundary: begin here, end below (each timed as one) */
		w0 = wall_ns();
		c0 = cpu_ns();
		ret = tencache_step_begin(c);
		if (m != P_WARMUP) {
			st.cpu += cpu_ns() - c0;
			st.wall += wall_ns() - w0;
		}
		if (ret) {
			cache_fail("tencache_step_begin", 0, ret);
			break;
		}
		w0 = wall_ns();
		c0 = cpu_ns();
		for (uint32_t i = 0; i < tr->nr_acc && !ret; i++) {
			const struct tc_access *ac = &tr->acc[i];
			void *ptr;

			ret = TIMED(a, x->acq_c, m, tencache_acquire(c, ids[ac->tensor],
								      acq_flags(ac), NULL, &ptr));
			if (ret) {
				cache_fail("tencache_acquire", i, ret);
				break;
			}
			if (!(ac->flags & TC_ACC_END))
				continue;
			/* compute 0: no host-op sleep, no compute task */
			for (uint32_t j = start; j <= i && !ret; j++) {
				ret = TIMED(rl, x->rel_c, m, tencache_release(c, ids[tr->acc[j].tensor],
									      NULL, 0));
				if (ret)
					cache_fail("tencache_release", j, ret);
			}
			start = i + 1;
		}
		if (ret)
			break;
		if (m == P_WHOLE) {
			wh.cpu += cpu_ns() - c0;
			wh.wall += wall_ns() - w0;
			wh.n += 2 * tr->nr_acc;
		}
		w0 = wall_ns();
		c0 = cpu_ns();
		ret = tencache_step_end(c);
		if (m != P_WARMUP) {
			st.cpu += cpu_ns() - c0;
			st.wall += wall_ns() - w0;
			st.n++;
		}
		if (ret)
			cache_fail("tencache_step_end", tr->nr_acc, ret);
		else
			ret = tencache_cache_sync(c, NULL);
	}
	if (!ret)
		ret = tencache_cache_stats(c, &s1);
	if (!ret) {
		uint64_t acq = s1.acquires - s0.acquires, dec = s1.decisions - s0.decisions;

		r->hit = acq ? (double)(s1.hits - s0.hits) / acq : 1;
		r->planned = s1.planned_steps - s0.planned_steps;
		r->own_ns = dec ? (double)(s1.decision_ns - s0.decision_ns) / dec : 0;
		finish(x, r, &a, &rl, &st, &wh);
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

static void header(int argc, char **argv)
{
	struct utsname u;
	char line[256], model[256] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");
	time_t t = time(NULL);

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "model name : %255[^\n]", model) == 1)
			break;
	if (f)
		fclose(f);
	dsay("# command: tencache-bench");
	for (int i = 0; i < argc; i++)
		dsay(" %s", argv[i]);
	uname(&u);
	strftime(line, sizeof(line), "%Y-%m-%d %H:%M UTC", gmtime(&t));
	dsay("\n# machine: %s %s %s, %ld CPUs (%s); %s\n", u.nodename, u.release, u.machine,
	     sysconf(_SC_NPROCESSORS_ONLN), model[0] ? model : "?", line);
}

int bench_decide(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "model", 1, 0, 'M' }, { "layers", 1, 0, 'L' }, { "hidden", 1, 0, 'H' },
		{ "vocab", 1, 0, 'V' }, { "gpu-budget", 1, 0, 'b' }, { "scale", 1, 0, 's' },
		{ "steps", 1, 0, 'n' }, { "warmup", 1, 0, 'w' }, { "gpu", 0, 0, 'g' },
		{ "out", 1, 0, 'o' }, { "help", 0, 0, 'h' }, { 0 },
	};
	const char *model = NULL;
	uint32_t layers = 0, hidden = 0, vocab = 0, steps = 5, warmup = 2, scale32 = 0;
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
		case 'g': gpu = true; break;
		case 'b':
			errno = 0;
			pct_budget = strtod(optarg, &end);
			if (errno || end == optarg || strcmp(end, "%") || !(pct_budget > 0) ||
			    pct_budget > 100)
				ret = -EINVAL;
			break;
		case 'o':
			out = fopen(optarg, "a");
			if (!out) {
				fprintf(stderr, "decide: %s: %s\n", optarg, strerror(errno));
				return 1;
			}
			break;
		case 'h': usage(); return 0;
		default: return usage();
		}
		if (ret) {
			const char *name = "?";

			for (const struct option *o = lo; o->name; o++)
				if (o->val == c)
					name = o->name;
			fprintf(stderr, "decide: bad value for --%s: %s\n", name, optarg);
			return 2;
		}
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
	x.warmup = warmup;
	x.acq_c = malloc(nacc * steps * sizeof(*x.acq_c));
	x.rel_c = malloc(nacc * steps * sizeof(*x.rel_c));
	if (!x.acq_c || !x.rel_c) {
		ret = -ENOMEM;
		goto out;
	}
	timer_cost(&x.tcpu, &x.twall);

	header(argc, argv);
	dsay("decide: %s (%u layers, hidden %u, vocab %u: %.1fM params): %u tensors, %u "
	     "accesses per step\n", m.name, m.layers, m.hidden, m.vocab,
	     tc_model_params(&m) / 1e6, tr.nr_tensors, tr.nr_acc);
	dsay("  sizes / %llu (4 KiB min): state %.1f MiB, fp16 params %.1f MiB, largest op "
	     "%.1f MiB; GPU budget %.1f MiB (%.0f%% of fp16 params%s)\n",
	     (unsigned long long)scale, all / 1048576.0, p16 / 1048576.0, maxop / 1048576.0,
	     budget / 1048576.0, 100.0 * budget / p16,
	     budget == maxop ? ", raised to the largest op" : "");
	dsay("  %s mode; per variant %u warm-up + 2 x %u measured steps; compute 0 per op; "
	     "timer cost %.0f ns CPU, %.0f ns wall per call, subtracted\n",
	     host ? "host" : "GPU", warmup, steps, x.tcpu, x.twall);

	memset(res, 0, sizeof(res));
	for (int v = 0; v < V_NR; v++) {
		fprintf(stderr, "  %-9s ...\n", vnames[v]);
		switch (v) {
		case V_OURS:
			ret = run_cache(&x, tc, host, budget, 1, vnames[v], &res[v]);
			break;
		case V_RESIDENT:
			ret = run_cache(&x, tc, host, all, 1, vnames[v], &res[v]);
			break;
		case V_ONDEMAND:
			/* the profiler never hands over to a plan */
			ret = run_cache(&x, tc, host, budget, warmup + 2 * steps + 1, vnames[v],
					&res[v]);
			break;
		case V_NAIVE:
			ret = run_naive(&x, budget, &res[v]);
			break;
		}
		if (ret)
			fails++;
		/* the planned variants must have run every measured step from a plan */
		if (!ret && (v == V_OURS || v == V_RESIDENT) && res[v].planned != 2 * steps) {
			fprintf(stderr, "decide: %s: only %llu of %u measured steps ran from a "
				"plan (see the cache's warning above); the figures are not the "
				"planned path's\n", vnames[v], (unsigned long long)res[v].planned,
				2 * steps);
			fails++;
		}
	}

	dsay("\n%-10s %9s %9s | %8s %7s %7s | %8s %7s %7s | %8s %7s %7s %8s\n", "variant",
	     "CPU ns", "wall ns", "acquire", "p50", "p99", "release", "p50", "p99", "step",
	     "hit %", "planned", "own");
	dsay("%-10s %9s %9s | %8s %7s %7s | %8s %7s %7s | %8s %7s %7s %8s\n", "",
	     "/decision", "/decision", "CPU ns", "", "", "CPU ns", "", "", "CPU us", "", "steps",
	     "ns/dec");
	for (int v = 0; v < V_NR; v++) {
		const struct vres *r = &res[v];

		if (!r->ran) {
			dsay("%-10s %9s\n", vnames[v], "error");
			continue;
		}
		dsay("%-10s %9.0f %9.0f | %8.0f %7.0f %7.0f | %8.0f %7.0f %7.0f | %8.1f %7.2f %7llu ",
		     vnames[v], r->dec_cpu, r->dec_wall, r->acq_cpu, r->acq_p50, r->acq_p99,
		     r->rel_cpu, r->rel_p50, r->rel_p99, r->step_cpu / 1e3, 100 * r->hit,
		     (unsigned long long)r->planned);
		if (v == V_NAIVE)
			dsay("%8s\n", "-");
		else
			dsay("%8.0f\n", r->own_ns);
	}
	dsay("\n");
	for (int v = 0; v < V_NR; v++)
		dsay("  %-10s %s\n", vnames[v], vdesc[v]);
	dsay("  /decision: one pass of %u steps, the clocks read once per step around all its\n"
	     "    acquires and releases: the caller thread's CPU time (waits for copies block and\n"
	     "    cost none) and wall time (waits included) per call\n"
	     "  acquire, release: another pass of %u steps with each call timed by the thread's CPU\n"
	     "    clock (its cost subtracted; the clock's system call adds some noise): mean, p50, p99\n"
	     "  step: CPU per step_end + step_begin; hit: GPU reads found resident and ready;\n"
	     "    own: the cache's own decision_ns counter (wall, waits excluded)\n", steps, steps);
	if (res[V_OURS].ran) {
		const struct vres *o = &res[V_OURS];
		bool pass = o->dec_cpu <= GOAL_NS && o->acq_cpu <= GOAL_NS && o->rel_cpu <= GOAL_NS;

		for (int v = V_RESIDENT; v < V_NR; v++) {
			const struct vres *b = &res[v];
			char ra[32] = "-", rr[32] = "-";

			if (!b->ran || !(b->dec_cpu >= 1))
				continue;
			/* a figure under 1 ns is below the clock's noise: no ratio */
			if (b->acq_cpu >= 1)
				snprintf(ra, sizeof(ra), "x%.2f", o->acq_cpu / b->acq_cpu);
			if (b->rel_cpu >= 1)
				snprintf(rr, sizeof(rr), "x%.2f", o->rel_cpu / b->rel_cpu);
			dsay("  ours / %-9s per decision x%.2f (acquire %s, release %s)\n",
			     vnames[v], o->dec_cpu / b->dec_cpu, ra, rr);
		}
		dsay("goal: <= %.0f ns of CPU per acquire / release decision: ours %.0f ns per "
		     "decision, acquire %.0f, release %.0f: %s\n", GOAL_NS, o->dec_cpu, o->acq_cpu,
		     o->rel_cpu, pass ? "PASS" : "FAIL");
	}
	ret = fails ? 1 : 0;
out:
	free(x.acq_c);
	free(x.rel_c);
	if (tc)
		tencache_exit(tc);
	tc_trace_free(&full);
	tc_trace_free(&tr);
	if (out)
		fclose(out);
	out = NULL;
	return ret < 0 ? 1 : ret;
}
