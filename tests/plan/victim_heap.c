/* victim_heap.c - the planner's victim choice by a heap (plan.c
 * heap_victim: MIN without kept tensors or a cold-first class, as at the
 * pinned level) picks what a scan of every resident picked, so the plans
 * are the same: OPT-1.3B and OPT-13B (8 layers, CPU Adam beside backward)
 * at GPU budgets of 10-50% of the fp16 parameters, 30-80% of the state
 * pinned and the rest on NVMe, with and without pinned reserves. Every op,
 * hit and statistic must match. A heap left out of order (a bottom-up
 * build that sifted up, found so) picked a later id among equals and
 * changed the plans. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "plan/plan.h"

static int same(const struct tc_plan *a, const struct tc_plan *b)
{
	return a->nr_ops == b->nr_ops && a->nr_deps == b->nr_deps &&
	       !memcmp(a->ops, b->ops, a->nr_ops * sizeof(*a->ops)) &&
	       !memcmp(a->hit, b->hit, a->nr_acc) &&
	       !memcmp(a->placement, b->placement, a->nr_tensors) &&
	       !memcmp(a->start_pinned, b->start_pinned, a->nr_tensors) &&
	       a->st.hits == b->st.hits && a->st.sim_step_ns == b->st.sim_step_ns;
}

int main(void)
{
	static const char *const models[] = { "opt-1.3b", "opt-13b" };
	static const double gpu_share[] = { 0.10, 0.25, 0.50 };
	static const unsigned pinned_pct[] = { 30, 50, 80 };
	unsigned compared = 0;

	for (size_t mi = 0; mi < 2; mi++) {
		struct tc_gen_cfg g;
		struct tc_trace tr;
		struct tc_model m;
		uint64_t fp16, total;

		tc_gen_cfg_default(&g);
		g.batch = 2;
		g.adam_params_per_s = 5e9;
		g.opt_overlap = mi == 1;
		g.opt_split = -1;
		T_EQ(tc_model_builtin(models[mi], &m), 0);
		if (mi == 1)
			m.layers = 8;
		tc_trace_init(&tr);
		T_EQ(tc_model_trace(&m, &g, &tr), 0);
		fp16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
		total = tc_trace_bytes(&tr, -1);
		for (size_t s = 0; s < 3; s++) {
			for (size_t p = 0; p < 3; p++) {
				for (int pr = 0; pr <= 4; pr += 4) {
					struct tc_plan_cfg cfg;
					struct tc_plan a, b;
					int ra, rb;

					tc_plan_cfg_default(&cfg);
					cfg.flags |= TC_PLAN_HOST_ASYNC;
					cfg.gpu_bytes = (uint64_t)(fp16 * gpu_share[s]);
					cfg.pinned_bytes = total / 100 * pinned_pct[p];
					cfg.nvme_bytes = total * 2;
					cfg.pinned_reserve_bytes = (int64_t)(cfg.pinned_bytes / 32 * pr);
					tc_plan_test_victim_scan(false);
					ra = tc_plan_build(&tr, &cfg, &a);
					tc_plan_test_victim_scan(true);
					rb = tc_plan_build(&tr, &cfg, &b);
					T_CHECK(ra == rb, "%s GPU %.0f%% pinned %u%% reserve %d/32: heap %d, scan %d",
						models[mi], gpu_share[s] * 100, pinned_pct[p], pr, ra, rb);
					if (!ra && !rb) {
						compared++;
						T_CHECK(same(&a, &b), "%s GPU %.0f%% pinned %u%% reserve %d/32: the plans differ (%u against %u ops, %u against %u hits)",
							models[mi], gpu_share[s] * 100, pinned_pct[p], pr,
							a.nr_ops, b.nr_ops, a.st.hits, b.st.hits);
					}
					if (!ra)
						tc_plan_free(&a);
					if (!rb)
						tc_plan_free(&b);
				}
			}
		}
		tc_trace_free(&tr);
	}
	tc_plan_test_victim_scan(false);
	printf("%u plan pairs compared\n", compared);
	T_CHECK(compared >= 24, "only %u plan pairs built", compared);
	return t_exit();
}
