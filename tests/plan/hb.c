/* hb.c - every conflicting pair of memory accesses of a plan is ordered under
 * the executor's semantics, whatever the streams' timing (tc_plan_hb_check):
 * traces shaped like offload(overlap=True) (each module's AdamW a host op
 * LAG module releases after its backward, detached) and the serial shape
 * (every host op at the end, inline), with GPU budgets below the
 * parameters' total, varied compute and link speeds, GPU ranges placed by
 * the executor's arena (ours laid out by the planner: at its own offsets);
 * the OPT-1.3B generator's step; random traces. The
 * checker itself is tested first on plans with an edge removed, then on
 * plans with gated fetches (a detached host op's output, held until the op
 * is done) with their host deps and the waits for them removed
 * (HB_VERBOSE=1 lists each removed edge and what it found). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "tencache.h"
#include "test.h"
#include "rtrace.h"
#include "plan_offsets.h"

#define LAG 8

/* ---- traces ---------------------------------------------------------- */

struct shape {
	uint32_t modules;
	uint64_t seed;
	bool overlap;		/* host ops LAG releases after backward, else at the end */
	double fwd_ns;		/* mean forward compute per module */
	double adam_ns;		/* host op compute */
};

static int host_op(struct tc_trace *tr, uint32_t base, double ns)
{
	/* grad READ, master RW, param WRITE, m RW, v RW: offload.py's order */
	int ret = tc_trace_add_access(tr, base + 1, TC_PHASE_OPT, TC_ACC_READ | TC_ACC_HOST, 0);
	const unsigned rw = TC_ACC_READ | TC_ACC_WRITE | TC_ACC_HOST;

	ret = ret ?: tc_trace_add_access(tr, base + 2, TC_PHASE_OPT, rw, 0);
	ret = ret ?: tc_trace_add_access(tr, base + 0, TC_PHASE_OPT, TC_ACC_WRITE | TC_ACC_HOST, 0);
	ret = ret ?: tc_trace_add_access(tr, base + 3, TC_PHASE_OPT, rw, 0);
	ret = ret ?: tc_trace_add_access(tr, base + 4, TC_PHASE_OPT, rw | TC_ACC_END,
					 (uint64_t)ns);
	return ret;
}

/* Per module: param, grad, master, m, v (tensor ids 5l .. 5l+4). */
static int overlap_trace(struct tc_trace *tr, const struct shape *s)
{
	uint64_t r = s->seed;
	uint32_t ready[256], nready = 0, head = 0, tick = 0, rel[256];
	int ret = tc_trace_init(tr);

	for (uint32_t l = 0; l < s->modules && !ret; l++) {
		uint64_t b = (1 + rt_next(&r) % 8) << 20;

		ret = tc_trace_add_tensor(tr, b, TC_ROLE_PARAM_BF16);
		ret = ret < 0 ? ret : tc_trace_add_tensor(tr, b, TC_ROLE_GRAD);
		ret = ret < 0 ? ret : tc_trace_add_tensor(tr, 2 * b, TC_ROLE_MASTER_FP32);
		ret = ret < 0 ? ret : tc_trace_add_tensor(tr, 2 * b, TC_ROLE_OPT_STATE);
		ret = ret < 0 ? ret : tc_trace_add_tensor(tr, 2 * b, TC_ROLE_OPT_STATE);
		ret = ret < 0 ? ret : 0;
	}
	for (uint32_t l = 0; l < s->modules && !ret; l++)
		ret = tc_trace_add_access(tr, 5 * l, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END,
					  (uint64_t)(s->fwd_ns * (0.5 + rt_next(&r) % 100 / 100.0)));
	for (uint32_t l = s->modules; l-- > 0 && !ret;) {
		ret = tc_trace_add_access(tr, 5 * l, TC_PHASE_BWD, TC_ACC_READ, 0);
		ret = ret ?: tc_trace_add_access(tr, 5 * l + 1, TC_PHASE_BWD,
						 TC_ACC_WRITE | TC_ACC_END,
			(uint64_t)(2 * s->fwd_ns * (0.5 + rt_next(&r) % 100 / 100.0)));
		/* released: the updates LAG releases old start (overlap.py _pump) */
		ready[nready] = l;
		rel[nready++] = ++tick;
		while (s->overlap && head < nready && tick - rel[head] >= LAG && !ret)
			ret = host_op(tr, 5 * ready[head++], s->adam_ns);
	}
	while (head < nready && !ret)	/* optimizer.step(): the rest */
		ret = host_op(tr, 5 * ready[head++], s->adam_ns);
	return ret;
}

/* ---- GPU placement: the executor's arena, as setup.c's gpu_fits ------- */

struct arena_ctx {
	struct tencache_arena *a;
	uint64_t budget;
};

static int arena_alloc(void *ctx, uint32_t t, uint32_t op, uint64_t bytes, uint64_t *off)
{
	return tencache_arena_alloc(((struct arena_ctx *)ctx)->a, bytes, off);
}

static int arena_free(void *ctx, uint32_t t, uint64_t off)
{
	return tencache_arena_free(((struct arena_ctx *)ctx)->a, off);
}

/* 0 proven, 1 unordered pair, -errno (-ENOMEM: the arena fragments) */
static int hb(const struct tc_trace *tr, const struct tc_plan *pl, uint64_t budget,
	      bool detach, bool arena, char *err, size_t len)
{
	struct arena_ctx ac = { NULL, budget };
	struct tc_hb_cfg hc = { .steps = 3, .detach = detach };
	int ret;

	/* the executor plans below its budget when the arena fragments */
	for (int slack = 4; slack >= 1; slack /= 2) {
		if (arena) {
			if (tencache_arena_create(&ac.a, budget + budget / slack, 256, NULL, 0))
				return -ENOSPC;
			tencache_arena_set_high(ac.a, budget / 16);
			hc.alloc = arena_alloc;
			hc.free = arena_free;
			hc.ctx = &ac;
		}
		ret = tc_plan_hb_check(tr, pl, &hc, err, len);
		if (ac.a)
			tencache_arena_destroy(ac.a);
		ac.a = NULL;
		if (!arena || ret != -ENOMEM)
			break;
	}
	return ret == -EDEADLK ? 1 : ret;
}

static unsigned nr_checked, nr_frag, nr_laid;

/* plans tr for cfg, checks it, then proves it ordered (own ranges, arena) */
static void plan_and_check(const struct tc_trace *tr, struct tc_plan_cfg *cfg, bool detach,
			   const char *what)
{
	struct tc_plan pl;
	char err[512] = "";
	int ret = tc_plan_build(tr, cfg, &pl);

	if (ret == -ENOSPC)
		return;
	T_CHECK(ret == 0, "%s: build %d", what, ret);
	if (ret)
		return;
	ret = tc_plan_check(tr, cfg, &pl, err, sizeof(err));
	T_CHECK(ret == 0, "%s: check: %s", what, err);
	ret = hb(tr, &pl, cfg->gpu_bytes, detach, false, err, sizeof(err));
	T_CHECK(ret == 0, "%s (%s, own ranges): %s", what, tc_policy_name(cfg->policy), err);
	if (pl.op_goff) {	/* laid out: at the plan's offsets */
		struct tc_hb_cfg hc = { .steps = 3, .detach = detach, .alloc = plan_alloc,
					.free = plan_free, .ctx = &pl };

		ret = tc_plan_hb_check(tr, &pl, &hc, err, sizeof(err));
		T_CHECK(ret == 0, "%s (laid out): %s", what, err);
		nr_laid++;
		nr_checked++;
		tc_plan_free(&pl);
		return;
	}
	ret = hb(tr, &pl, cfg->gpu_bytes, detach, true, err, sizeof(err));
	if (ret == -ENOMEM || ret == -ENOSPC)
		nr_frag++;	/* the executor lays it out ahead instead */
	else
		T_CHECK(ret == 0, "%s (%s, arena): %s", what, tc_policy_name(cfg->policy), err);
	nr_checked++;
	tc_plan_free(&pl);
}

/* ---- the checker finds a removed edge -------------------------------- */

static void mutants(void)
{
	struct shape s = { .modules = 16, .seed = 7, .overlap = true, .fwd_ns = 2e6,
			   .adam_ns = 3e6 };
	struct tc_plan_cfg cfg;
	struct tc_trace tr;
	struct tc_plan pl;
	unsigned found = 0, tried = 0;
	uint32_t drop;
	char err[512];

	T_EQ(overlap_trace(&tr, &s), 0);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16) / 2;
	cfg.pinned_bytes = 1ull << 40;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
	T_EQ(hb(&tr, &pl, cfg.gpu_bytes, true, true, err, sizeof(err)), 0);
	/* each op dependency, and each access wait, removed in turn: pointed
	 * at a DROP, whose event is signalled at issue (no wait) */
	for (drop = 0; drop < pl.nr_ops && pl.ops[drop].kind != TC_OP_DROP; drop++)
		;
	T_CHECK(drop < pl.nr_ops, "no DROP in the plan");
	for (uint32_t k = 0; k < pl.nr_ops && drop < pl.nr_ops; k++) {
		const struct tc_op *op = &pl.ops[k];

		for (uint32_t d = 0; d < op->nr_deps; d++) {
			int32_t save = pl.deps[op->dep_first + d];

			pl.deps[op->dep_first + d] = (int32_t)drop;
			tried++;
			{
				int r = hb(&tr, &pl, cfg.gpu_bytes, true, true, err, sizeof(err));
				found += r == 1;
				if (getenv("HB_VERBOSE"))
					printf("dep %s k%u t%u pos %u on %d: %d %s\n", tc_op_name(op->kind), k, op->tensor, op->pos, save, r, r ? err : "");
			}
			pl.deps[op->dep_first + d] = save;
		}
	}
	for (uint32_t w = 0; w < pl.wait_first[pl.nr_acc] && drop < pl.nr_ops; w++) {
		uint32_t save = pl.wait_ops[w];

		pl.wait_ops[w] = drop;
		tried++;
		{
			int r = hb(&tr, &pl, cfg.gpu_bytes, true, true, err, sizeof(err));
			found += r == 1;
			if (getenv("HB_VERBOSE"))
				printf("wait %u on op %u %s t%u: %d %s\n", w, save, tc_op_name(pl.ops[save].kind), pl.ops[save].tensor, r, r ? err : "");
		}
		pl.wait_ops[w] = save;
	}
	printf("# mutants: %u of %u removed edges found\n", found, tried);
	/* many are also implied (stream order, a later sync, the step's end);
	 * the seam's FETCH after the host op that wrote its source is not */
	T_CHECK(tried && found * 4 >= tried, "found %u of %u", found, tried);
	tc_plan_free(&pl);
	tc_trace_free(&tr);
}

/* ---- gated fetches: held for their host op, sent once it is done ------ */

struct gcount {
	unsigned gated, hdep, hdep_found, wait, wait_found, odep, odep_found;
	/* the first fetch of a value after its host op: held unless the
	 * CPU saw the op done; its host dep, its first reader's wait */
	unsigned first, fhdep, fhdep_found, fwait, fwait_found;
};

/* op k is the first FETCH of its tensor after the host access it depends on */
static bool first_after_host(const struct tc_trace *tr, const struct tc_plan *pl, uint32_t k)
{
	const struct tc_op *op = &pl->ops[k];
	uint32_t n = tr->nr_acc, a = UINT32_MAX;

	for (uint32_t d = 0; d < op->nr_deps; d++)
		if (pl->deps[op->dep_first + d] < 0)
			a = -(pl->deps[op->dep_first + d] + 1);
	if (a == UINT32_MAX)
		return false;
	for (uint32_t j = 0; j < pl->nr_ops; j++)	/* cyclic distance from a */
		if (j != k && pl->ops[j].kind == TC_OP_FETCH && pl->ops[j].tensor == op->tensor &&
		    (pl->ops[j].pos + n - a - 1) % n < (op->pos + n - a - 1) % n)
			return false;
	return true;
}

/* *slot pointed at DROP drop (no wait): 1 when the checker finds it */
static int gmutant(const struct tc_trace *tr, struct tc_plan *pl, uint64_t budget, int32_t *slot,
		   int32_t drop, const char *what, uint32_t k)
{
	int32_t save = *slot;
	char err[512];
	int r;

	*slot = drop;
	r = hb(tr, pl, budget, true, true, err, sizeof(err));
	*slot = save;
	if (getenv("HB_VERBOSE"))
		printf("gated %s: op %u (t%u) on %d: %d %s\n", what, k, pl->ops[k].tensor, save, r,
		       r ? err : "");
	T_CHECK(r == 0 || r == 1, "gated %s op %u: %d", what, k, r);
	return r == 1;
}

/* plans tr, proves it ordered, then removes the edges of its gated fetches */
static void gated_plan(const struct tc_trace *tr, struct tc_plan_cfg *cfg, const char *what,
		       struct gcount *n)
{
	struct tc_plan pl;
	char err[512];
	uint32_t drop;
	int ret;

	ret = tc_plan_build(tr, cfg, &pl);
	T_CHECK(ret == 0, "%s: build %d", what, ret);
	if (ret)
		return;
	ret = hb(tr, &pl, cfg->gpu_bytes, true, true, err, sizeof(err));
	T_CHECK(ret == 0, "%s: %s", what, err);
	for (drop = 0; drop < pl.nr_ops && pl.ops[drop].kind != TC_OP_DROP; drop++)
		;
	T_CHECK(drop < pl.nr_ops, "%s: no DROP in the plan", what);
	for (uint32_t k = 0; k < pl.nr_ops && drop < pl.nr_ops && !ret; k++) {
		const struct tc_op *op = &pl.ops[k];
		bool first = op->gated && first_after_host(tr, &pl, k);

		n->gated += op->gated;
		n->first += first;
		for (uint32_t d = 0; d < op->nr_deps; d++) {
			int32_t *dep = &pl.deps[op->dep_first + d];

			if (op->gated && *dep < 0 && (tr->acc[-(*dep + 1)].flags & TC_ACC_HOST)) {
				/* the host op that wrote its source */
				int found = gmutant(tr, &pl, cfg->gpu_bytes, dep, drop, "host dep", k);

				n->hdep++;
				n->hdep_found += found;
				n->fhdep += first;
				n->fhdep_found += first && found;
			} else if (*dep >= 0 && pl.ops[*dep].gated) {
				n->odep++;	/* an op after a gated copy */
				n->odep_found += gmutant(tr, &pl, cfg->gpu_bytes, dep, drop,
							 "dep on it", k);
			}
		}
	}
	for (uint32_t i = 0; i < pl.nr_acc && drop < pl.nr_ops && !ret; i++) {
		for (uint32_t w = pl.wait_first[i]; w < pl.wait_first[i + 1]; w++) {
			uint32_t k = pl.wait_ops[w];
			int found;

			if (!pl.ops[k].gated)
				continue;
			/* an access's wait for a gated copy */
			found = gmutant(tr, &pl, cfg->gpu_bytes, (int32_t *)&pl.wait_ops[w], drop,
					"wait", k);
			n->wait++;
			n->wait_found += found;
			if (pl.ops[k].need == (int32_t)i && first_after_host(tr, &pl, k)) {
				n->fwait++;
				n->fwait_found += found;
			}
		}
	}
	if (getenv("HB_VERBOSE"))
		printf("%s: %u gated fetches so far\n", what, n->gated);
	tc_plan_free(&pl);
}

/*
 * A FETCH of a detached host op's output is held at its issue point and
 * sent when the op is done (cache.c gated copies): the checker models it
 * off the H2D order, so its host dependency and the waits for it are what
 * order it, and removing them is found.
 */
static void gated_mutants(void)
{
	static const double fracs[] = { 0.5, 0.3 };
	struct gcount n = { 0 };

	for (uint64_t seed = 7; seed <= 9; seed++) {
		struct shape s = { .modules = 16, .seed = seed, .overlap = true, .fwd_ns = 2e6,
				   .adam_ns = 3e6 };
		struct tc_trace tr;

		T_EQ(overlap_trace(&tr, &s), 0);
		for (size_t f = 0; f < sizeof(fracs) / sizeof(fracs[0]); f++) {
			struct tc_plan_cfg cfg;
			char what[64];

			tc_plan_cfg_default(&cfg);
			cfg.gpu_bytes = tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16) * fracs[f];
			cfg.pinned_bytes = 1ull << 40;
			cfg.flags |= TC_PLAN_HOST_ASYNC;
			snprintf(what, sizeof(what), "gated: seed %llu budget %.2f",
				 (unsigned long long)seed, fracs[f]);
			gated_plan(&tr, &cfg, what, &n);
		}
		tc_trace_free(&tr);
	}
	/* the generator's OPT-1.3B shape, CPU Adam beside backward: the last
	 * layers' Adam inside backward, then in the worker's order */
	for (int k = 0; k < 2; k++) {
		struct tc_gen_cfg g;
		struct tc_plan_cfg cfg;
		struct tc_model m;
		struct tc_trace tr;

		tc_gen_cfg_default(&g);
		g.batch = 2;
		g.opt_overlap = true;
		g.opt_pace_ns = k ? 20000000 : 0;
		T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
		m.layers = 4;	/* a few layers: mutants cost a check each */
		T_EQ(tc_trace_init(&tr), 0);
		T_EQ(tc_model_trace(&m, &g, &tr), 0);
		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = tc_trace_max_op_bytes(&tr) + tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) / 4;
		cfg.pinned_bytes = 1ull << 40;
		cfg.flags |= TC_PLAN_HOST_ASYNC;
		gated_plan(&tr, &cfg, k ? "gated: opt-1.3b overlap, the worker's order" :
			   "gated: opt-1.3b overlap", &n);
		tc_trace_free(&tr);
	}
	printf("# gated mutants: %u gated fetches; host deps %u of %u, waits %u of %u found "
	       "(other ops' deps on them %u of %u)\n", n.gated, n.hdep_found, n.hdep,
	       n.wait_found, n.wait, n.odep_found, n.odep);
	printf("# gated mutants: %u first after their host op; host deps %u of %u, "
	       "first readers' waits %u of %u found\n", n.first, n.fhdep_found, n.fhdep,
	       n.fwait_found, n.fwait);
	T_CHECK(n.gated && n.first && n.fhdep && n.fwait, "no gated fetch to test (%u, %u)",
		n.gated, n.first);
	/* Held, the first fetch after a host op is ordered after the op by
	 * that dep alone, and its first reader after it by the reader's wait
	 * alone: not by the H2D order. Re-fetches (the CPU has seen the op
	 * done) and later readers' waits are mostly implied. */
	T_CHECK(n.fhdep_found * 10 >= n.fhdep * 9, "host deps: found %u of %u", n.fhdep_found,
		n.fhdep);
	T_CHECK(n.fwait_found * 10 >= n.fwait * 9, "first readers' waits: found %u of %u",
		n.fwait_found, n.fwait);
	T_CHECK(n.hdep_found && n.wait_found, "none found");
}

/* ---- main -------------------------------------------------------------- */

int main(void)
{
	static const enum tc_policy pols[] = {
		TC_POLICY_OURS, TC_POLICY_LRU, TC_POLICY_ZERO, TC_POLICY_10CACHE,
	};
	static const double fracs[] = { 0.3, 0.45, 0.6, 0.8, 1.1 };

	mutants();
	gated_mutants();
	/* the overlap and serial shapes */
	for (uint64_t seed = 1; seed <= 24; seed++) {
		for (int ov = 0; ov < 2; ov++) {
			struct shape s = { .modules = 12 + seed % 20, .seed = seed, .overlap = ov,
					   .fwd_ns = 2e5 * (1 + seed % 7),
					   .adam_ns = 1e5 * (1 + seed * 13 % 40) };
			struct tc_trace tr;
			uint64_t params;

			T_EQ(overlap_trace(&tr, &s), 0);
			params = tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16);
			for (size_t f = 0; f < sizeof(fracs) / sizeof(fracs[0]); f++) {
				for (size_t p = 0; p < sizeof(pols) / sizeof(pols[0]); p++) {
					struct tc_plan_cfg cfg;
					char what[64];

					if (p && (seed % 3))
						continue;	/* baselines on a third */
					tc_plan_cfg_default(&cfg);
					cfg.policy = pols[p];
					cfg.gpu_bytes = (uint64_t)(params * fracs[f]);
					cfg.pinned_bytes = 1ull << 40;
					cfg.bw[TC_LINK_H2D] = 5e9 * (1 + seed % 10);
					cfg.bw[TC_LINK_D2H] = 4e9 * (1 + seed * 7 % 10);
					snprintf(what, sizeof(what), "seed %llu %s budget %.2f",
						 (unsigned long long)seed, ov ? "overlap" : "serial",
						 fracs[f]);
					plan_and_check(&tr, &cfg, ov, what);
					if (cfg.policy != TC_POLICY_OURS)
						continue;
					cfg.flags |= TC_PLAN_LAYOUT;
					plan_and_check(&tr, &cfg, ov, what);
				}
			}
			tc_trace_free(&tr);
		}
	}
	/* the generator's OPT-1.3B step (CPU Adam at the end) */
	{
		struct tc_gen_cfg g;
		struct tc_model m;
		struct tc_trace tr;

		tc_gen_cfg_default(&g);
		g.batch = 32;
		T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
		T_EQ(tc_trace_init(&tr), 0);
		T_EQ(tc_model_trace(&m, &g, &tr), 0);
		for (int f = 0; f < 3; f++) {
			struct tc_plan_cfg cfg;

			tc_plan_cfg_default(&cfg);
			cfg.gpu_bytes = tc_trace_max_op_bytes(&tr) +
					tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) * (f + 1) / 5;
			cfg.pinned_bytes = 1ull << 40;
			plan_and_check(&tr, &cfg, f & 1, "opt-1.3b");
			cfg.flags |= TC_PLAN_LAYOUT;
			plan_and_check(&tr, &cfg, f & 1, "opt-1.3b laid out");
		}
		tc_trace_free(&tr);
	}
	/* random traces, host ops detached or inline */
	for (uint64_t seed = 1; seed <= 400; seed++) {
		struct rt_opts o = {
			.tensors = 4 + seed % 14, .ops = 6 + seed % 30, .max_per_op = 1 + seed % 4,
			.min_bytes = 1 << 10, .max_bytes = (1 + seed % 5) << 12,
			.write_pct = 40, .wonly_pct = 40, .host_pct = seed % 40,
		};
		struct tc_plan_cfg cfg;
		struct tc_trace tr;
		char what[48];

		T_EQ(rt_build(&tr, &o, seed), 0);
		tc_plan_cfg_default(&cfg);
		cfg.policy = pols[seed % 4];
		cfg.gpu_bytes = tc_trace_max_op_bytes(&tr) + (seed % 7) * o.max_bytes / 2;
		cfg.pinned_bytes = 1ull << 40;
		cfg.bw[TC_LINK_H2D] = 1e8 * (1 + seed % 9);
		cfg.bw[TC_LINK_D2H] = 1e8 * (1 + seed * 5 % 9);
		snprintf(what, sizeof(what), "random seed %llu", (unsigned long long)seed);
		plan_and_check(&tr, &cfg, seed & 1, what);
		if (cfg.policy == TC_POLICY_OURS || seed % 4 == 1) {
			cfg.policy = TC_POLICY_OURS;
			cfg.flags |= TC_PLAN_LAYOUT;
			plan_and_check(&tr, &cfg, seed & 1, what);
		}
		tc_trace_free(&tr);
	}
	printf("# %u plans proven ordered (%u fragmented the arena: own ranges only; "
	       "%u laid out by the planner, at its offsets)\n", nr_checked, nr_frag, nr_laid);
	T_CHECK(nr_laid > 150, "only %u laid-out plans checked", nr_laid);
	T_CHECK(nr_checked > 300, "only %u plans checked", nr_checked);
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}
