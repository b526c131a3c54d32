/* pinned_horizon.c - the pinned level's relaxed victim choice (plan.c
 * horizon_victim, tc_plan_cfg.pinned_horizon). On a generated OPT-13B
 * step (8 layers, CPU Adam beside backward) with an NVMe tier:
 * - every horizon's plan passes tc_plan_check, keeps the pinned budget at
 *   every issue point and in the timing model, and records its horizon;
 * - in at least half the horizon plans the NVMe reads are issued further
 *   ahead of their need than MIN's: MIN evicts the value used last, and a
 *   read cannot start before its victim's last use;
 * - at one budget at least (80% pinned), some horizon models a step 5%
 *   shorter than MIN's, and there the default (chosen by the model) takes
 *   one at least that short;
 * - there, with MIN's horizon given and TC_PLAN_HORIZON_SEARCH (the
 *   executor's search again), it takes another horizon and models a step
 *   shorter than MIN's horizon kept (with the reserves searched in both);
 * - a horizon over TC_PLAN_HORIZON_DIV is -EINVAL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "plan/plan.h"
#include "opt13b8.h"

/* Mean issue-to-need distance of the plan's NVMe reads, in accesses. */
static double read_lead(const struct tc_plan *pl)
{
	uint64_t sum = 0, nr = 0;

	for (uint32_t k = 0; k < pl->nr_ops; k++) {
		const struct tc_op *op = &pl->ops[k];

		if (op->kind != TC_OP_STAGE_IN || op->need < 0)
			continue;
		sum += op->need_next ? pl->nr_acc - op->pos + (uint32_t)op->need :
				       (uint32_t)op->need - op->pos;
		nr++;
	}
	return nr ? (double)sum / nr : 0;
}

/* A quarter of the fp16 parameters on the GPU, pct% of the state pinned,
 * the disk as an H100 machine's caches measured it; the rest default. */
static void cfg_at(struct tc_plan_cfg *cfg, uint64_t fp16, uint64_t total, unsigned pct)
{
	tc_plan_cfg_default(cfg);
	cfg->flags |= TC_PLAN_HOST_ASYNC;
	cfg->gpu_bytes = fp16 / 4;
	cfg->pinned_bytes = total / 100 * pct;
	cfg->nvme_bytes = total * 2;
	cfg->bw[TC_LINK_NVME_RD] = 1.9e9;
	cfg->bw[TC_LINK_NVME_WR] = 2.6e9;
	cfg->nvme_duplex_bw = 2.2e9;
}

int main(void)
{
	static const unsigned pinned_pct[] = { 50, 70, 80 };
	struct tc_trace tr;
	uint64_t fp16, total;
	unsigned built = 0, shorter = 0, earlier = 0;

	T_EQ(t_opt13b8_trace(&tr), 0);
	fp16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
	total = tc_trace_bytes(&tr, -1);
	for (size_t p = 0; p < sizeof(pinned_pct) / sizeof(pinned_pct[0]); p++) {
		uint64_t min_ns = 0, best_ns = UINT64_MAX, kept_ns;
		double min_lead = 0;
		struct tc_plan_cfg cfg;
		struct tc_plan pl;

		cfg_at(&cfg, fp16, total, pinned_pct[p]);
		cfg.reserve_bytes = 0;
		cfg.pinned_reserve_bytes = 0;
		for (int32_t h = 0; h <= 24; h += 2) {	/* every 1/32, to 12/32 */
			struct tc_sim_result sr;
			char err[256] = "";
			double lead;
			int ret;

			cfg.pinned_horizon = h;
			ret = tc_plan_build(&tr, &cfg, &pl);
			T_CHECK(ret == 0, "pinned %u%% horizon %d/64: build %d", pinned_pct[p], h, ret);
			if (ret)
				continue;
			built++;
			T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == 0,
				"pinned %u%% horizon %d/64: %s", pinned_pct[p], h, err);
			T_CHECK(pl.st.pinned_horizon == (uint32_t)h, "pinned %u%%: horizon %u recorded for %d",
				pinned_pct[p], pl.st.pinned_horizon, h);
			T_CHECK(pl.st.pinned_peak <= cfg.pinned_bytes,
				"pinned %u%% horizon %d/64: peak %llu over %llu", pinned_pct[p], h,
				(unsigned long long)pl.st.pinned_peak,
				(unsigned long long)cfg.pinned_bytes);
			ret = tc_sim_run(&tr, &cfg, &pl, 3, &sr);
			T_CHECK(ret == 0, "pinned %u%% horizon %d/64: model %d", pinned_pct[p], h, ret);
			T_CHECK(sr.pinned_peak <= cfg.pinned_bytes,
				"pinned %u%% horizon %d/64: modelled peak over the budget", pinned_pct[p], h);
			lead = read_lead(&pl);
			if (h == 0) {
				min_ns = sr.step_ns;
				min_lead = lead;
			} else {
				if (sr.step_ns < best_ns)
					best_ns = sr.step_ns;
				earlier += lead > min_lead;
			}
			printf("pinned %u%% horizon %2d/64: step %.1f ms, NVMe read %.0f MB, reads issued %.0f accesses ahead\n",
			       pinned_pct[p], h, sr.step_ns / 1e6,
			       pl.st.link_bytes[TC_LINK_NVME_RD] / 1e6, lead);
			tc_plan_free(&pl);
		}
		if (best_ns <= min_ns / 100 * 95) {
			shorter++;
			/* the default chooses by the model: at least as short */
			cfg_at(&cfg, fp16, total, pinned_pct[p]);
			T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
			T_CHECK(pl.st.pinned_horizon > 0 && pl.st.sim_step_ns <= min_ns / 100 * 95,
				"pinned %u%%: the default took horizon %u/64 at %.1f ms (MIN %.1f)",
				pinned_pct[p], pl.st.pinned_horizon, pl.st.sim_step_ns / 1e6,
				min_ns / 1e6);
			tc_plan_free(&pl);
			cfg.pinned_horizon = 0;
			T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
			kept_ns = pl.st.sim_step_ns;
			tc_plan_free(&pl);
			cfg.flags |= TC_PLAN_HORIZON_SEARCH;
			T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
			T_CHECK(pl.st.pinned_horizon > 0 && pl.st.sim_step_ns < kept_ns,
				"pinned %u%%: searched again from MIN's, horizon %u/64 at %.1f ms (kept: %.1f)",
				pinned_pct[p], pl.st.pinned_horizon, pl.st.sim_step_ns / 1e6,
				kept_ns / 1e6);
			printf("pinned %u%%: MIN's horizon kept %.1f ms, searched again from it %.1f ms (%u/64)\n",
			       pinned_pct[p], kept_ns / 1e6, pl.st.sim_step_ns / 1e6, pl.st.pinned_horizon);
			tc_plan_free(&pl);
		}
	}
	T_CHECK(built == 39, "%u of 39 plans built", built);
	T_CHECK(earlier >= 18, "the reads went out earlier than MIN's in only %u of 36 plans", earlier);
	T_CHECK(shorter >= 1, "no pinned budget where a horizon modelled a step 5%% shorter");
	{
		struct tc_plan_cfg cfg;
		struct tc_plan pl;

		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = fp16 / 4;
		cfg.pinned_bytes = total / 2;
		cfg.nvme_bytes = total * 2;
		cfg.pinned_horizon = TC_PLAN_HORIZON_DIV + 1;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	}
	tc_trace_free(&tr);
	return t_exit();
}
