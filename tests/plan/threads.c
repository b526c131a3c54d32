/* threads.c - the planner's search on several threads (tc_plan_cfg.threads,
 * try_batch in plan.c). On the generated OPT-13B step with NVMe:
 * - at 1, 3 and 16 threads and the default (0), the search gives the same
 *   plan, op for op, with the same reserves, horizon and modelled step;
 *   so does the laid-out plan (TC_PLAN_LAYOUT);
 * - with the reserves fixed, the chosen horizon is the one of MIN and 2/64
 *   to 24/64 whose own plan models the shortest step (the earliest on a
 *   tie), its step that plan's;
 * - more than TC_PLAN_THREADS_MAX threads is -EINVAL. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "plan/plan.h"
#include "opt13b8.h"

static void cfg_at(struct tc_plan_cfg *cfg, uint64_t fp16, uint64_t total)
{
	tc_plan_cfg_default(cfg);
	cfg->flags |= TC_PLAN_HOST_ASYNC | TC_PLAN_HOST_FIFO;
	cfg->gpu_bytes = fp16 / 4;
	cfg->pinned_bytes = total / 100 * 80;
	cfg->nvme_bytes = total * 2;
	cfg->bw[TC_LINK_NVME_RD] = 1.9e9;
	cfg->bw[TC_LINK_NVME_WR] = 2.6e9;
	cfg->nvme_duplex_bw = 2.2e9;
}

static int same_plan(const struct tc_plan *a, const struct tc_plan *b)
{
	return a->nr_ops == b->nr_ops && !memcmp(a->ops, b->ops, a->nr_ops * sizeof(*a->ops)) &&
	       !memcmp(a->placement, b->placement, a->nr_tensors) &&
	       a->st.reserve_bytes == b->st.reserve_bytes &&
	       a->st.pinned_reserve_bytes == b->st.pinned_reserve_bytes &&
	       a->st.pinned_horizon == b->st.pinned_horizon &&
	       a->st.cold_first == b->st.cold_first && a->st.sim_step_ns == b->st.sim_step_ns;
}

/* The search at 1, 3, 16 and the default threads gives one plan. */
static void same_at_any_count(const struct tc_trace *tr, struct tc_plan_cfg *cfg,
			      const char *what)
{
	static const uint32_t nt[] = { 3, 16, 0 };
	struct tc_plan one, pl;

	cfg->threads = 1;
	T_EQ(tc_plan_build(tr, cfg, &one), 0);
	printf("%s: 1 thread: reserve %llu, pinned reserve %llu, horizon %u/64, %.1f ms\n", what,
	       (unsigned long long)one.st.reserve_bytes,
	       (unsigned long long)one.st.pinned_reserve_bytes, one.st.pinned_horizon,
	       one.st.sim_step_ns / 1e6);
	for (size_t i = 0; i < sizeof(nt) / sizeof(nt[0]); i++) {
		cfg->threads = nt[i];
		T_EQ(tc_plan_build(tr, cfg, &pl), 0);
		T_CHECK(same_plan(&one, &pl), "%s: %u threads planned otherwise (%.1f against %.1f ms, horizon %u against %u)",
			what, nt[i], pl.st.sim_step_ns / 1e6, one.st.sim_step_ns / 1e6,
			pl.st.pinned_horizon, one.st.pinned_horizon);
		tc_plan_free(&pl);
	}
	tc_plan_free(&one);
}

int main(void)
{
	struct tc_plan_cfg cfg;
	struct tc_trace tr;
	struct tc_plan pl;
	uint64_t fp16, total, best_ns = UINT64_MAX;
	uint32_t best_h = 0;

	T_EQ(t_opt13b8_trace(&tr), 0);
	fp16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
	total = tc_trace_bytes(&tr, -1);

	cfg_at(&cfg, fp16, total);
	same_at_any_count(&tr, &cfg, "searched");
	cfg_at(&cfg, fp16, total);
	cfg.flags |= TC_PLAN_LAYOUT;
	same_at_any_count(&tr, &cfg, "laid out");

	/* the horizon stage alone, against each horizon's own plan */
	cfg_at(&cfg, fp16, total);
	cfg.reserve_bytes = 0;
	cfg.pinned_reserve_bytes = 0;
	for (int32_t h = 0; h <= (int32_t)TC_PLAN_HORIZON_DIV * 3 / 8; h += h ? 1 : 2) {
		struct tc_sim_result sr;

		cfg.pinned_horizon = h;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
		T_EQ(tc_sim_run(&tr, &cfg, &pl, 3, &sr), 0);
		if (sr.step_ns < best_ns) {
			best_ns = sr.step_ns;
			best_h = (uint32_t)h;
		}
		tc_plan_free(&pl);
	}
	for (uint32_t t = 1; t <= 4; t += 3) {
		cfg.pinned_horizon = -1;
		cfg.threads = t;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
		T_CHECK(pl.st.pinned_horizon == best_h && pl.st.sim_step_ns == best_ns,
			"%u threads chose horizon %u/64 at %.1f ms; the shortest is %u/64 at %.1f ms",
			t, pl.st.pinned_horizon, pl.st.sim_step_ns / 1e6, best_h, best_ns / 1e6);
		tc_plan_free(&pl);
	}
	printf("horizons alone: %u/64 at %.1f ms\n", best_h, best_ns / 1e6);

	cfg.threads = TC_PLAN_THREADS_MAX + 1;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	tc_trace_free(&tr);
	return t_exit();
}
