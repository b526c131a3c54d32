/* steady.c - the cyclic plan is MIN's steady state: over R repetitions of
 * a uniform-size step its misses stay within one cache fill of the
 * optimum for R steps from cold (R * steady <= OPT_R + k), and the table
 * it yields is periodic (checked over three replays by tc_plan_check). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "test.h"
#include "rtrace.h"

#define R 4

static int plan_misses(const struct tc_trace *tr, uint64_t cap, unsigned flags,
		       struct tc_plan_stats *st)
{
	struct tc_plan_cfg cfg;
	struct tc_plan pl;
	char err[256] = "";
	int ret;

	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = cap;
	cfg.pinned_bytes = 1ull << 40;
	cfg.reserve_bytes = 0;
	cfg.flags = flags;
	ret = tc_plan_build(tr, &cfg, &pl);
	if (ret)
		return ret;
	ret = tc_plan_check(tr, &cfg, &pl, err, sizeof(err));
	T_CHECK(ret == 0, "%s", err);
	*st = pl.st;
	tc_plan_free(&pl);
	return st->reads - st->hits;
}

int main(void)
{
	unsigned fixups = 0, n = 0, max_iters = 0;

	for (uint64_t seed = 1; seed <= 300; seed++) {
		struct rt_opts o = {
			.tensors = 4 + seed % 10, .ops = 4 + seed % 12, .max_per_op = 1 + seed % 3,
			.min_bytes = 1, .max_bytes = 1, .write_pct = 30, .wonly_pct = 30,
		};
		struct tc_trace one, rep;
		struct tc_plan_stats st;
		uint64_t cap;
		int steady, opt_r;
		bool fixed;

		T_EQ(rt_build(&one, &o, seed), 0);
		cap = o.max_per_op + seed % 4;
		/* the same step R times, as one acyclic trace */
		tc_trace_init(&rep);
		for (uint32_t t = 0; t < one.nr_tensors; t++)
			tc_trace_add_tensor(&rep, one.tensors[t].bytes, one.tensors[t].role);
		for (int r = 0; r < R; r++)
			for (uint32_t i = 0; i < one.nr_acc; i++)
				tc_trace_add_access(&rep, one.acc[i].tensor, one.acc[i].phase,
						    one.acc[i].flags, one.acc[i].compute_ns);
		steady = plan_misses(&one, cap, 0, &st);
		fixups += st.reconciled;
		fixed = st.reconciled;
		if (st.steady_iters > max_iters)
			max_iters = st.steady_iters;
		opt_r = plan_misses(&rep, cap, TC_PLAN_ACYCLIC, &st);	/* = optimum (belady.c) */
		T_CHECK(steady >= 0 && opt_r >= 0, "seed %llu", (unsigned long long)seed);
		/* with seam fix-ups the table pays extra copies at the seam */
		if (!fixed)
			T_CHECK(R * steady <= opt_r + (int)cap, "seed %llu: %d x %d steady > optimum %d + %d",
				(unsigned long long)seed, R, steady, opt_r, (int)cap);
		n++;
		tc_trace_free(&one);
		tc_trace_free(&rep);
	}
	printf("%u traces; steady state reached in at most %u laps; %u needed a seam fix-up\n",
	       n, max_iters, fixups);
	return t_exit();
}
