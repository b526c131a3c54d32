/* layout.c - ours laid out by the planner (TC_PLAN_LAYOUT): every GPU
 * residency at an offset in [0, budget), a miss evicting one window. On a
 * generated OPT-1.3B step (CPU Adam beside backward, as the replay runs
 * it) at 10%, 25% and 50% of its fp16 parameters, the plan passes the
 * checker (no two residents' ranges overlap, in the budget) and the
 * happens-before check at its own offsets (at 10% some ops take one window
 * for all their tensors, lay_op_window), its byte hit
 * rate is within a point of Belady's MIN over the full budget with no
 * layout at all (results/layout-min), and above that of MIN planned for
 * 80% of the budget (what the executor's own layout pass needed), and its
 * modelled step is within 2% of the unlaid plan's with its tuned prefetch
 * reserve (it was up to 6% slower before windows weighed their copies' lateness:
 * LAY_LATE). */
#include <errno.h>
#include <stdio.h>

#include "test.h"
#include "plan/plan.h"
#include "plan_offsets.h"

static double byte_rate(const struct tc_plan *pl)
{
	return 100.0 * pl->st.hit_bytes / pl->st.read_bytes;
}

int main(void)
{
	struct tc_hb_cfg hc = { .steps = 3, .detach = true, .alloc = plan_alloc,
				.free = plan_free };
	static const double fracs[] = { 0.10, 0.25, 0.50 };
	struct tc_gen_cfg g;
	struct tc_trace tr;
	struct tc_model m;
	uint64_t p16;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	g.opt_overlap = true;
	tc_trace_init(&tr);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	p16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16);
	for (size_t f = 0; f < sizeof(fracs) / sizeof(fracs[0]); f++) {
		struct tc_plan_cfg cfg;
		struct tc_plan lay, min, min80, own;
		char err[256] = "";
		int ret;

		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = (uint64_t)(p16 * fracs[f]);
		if (cfg.gpu_bytes < tc_trace_max_op_bytes(&tr))
			continue;
		cfg.pinned_bytes = UINT64_MAX;
		cfg.flags = TC_PLAN_HOST_ASYNC | TC_PLAN_LAYOUT;
		ret = tc_plan_build(&tr, &cfg, &lay);
		T_CHECK(ret == 0, "%.0f%%: build %d", 100 * fracs[f], ret);
		if (ret)
			continue;
		T_CHECK(lay.st.laid_out && lay.op_goff && lay.start_goff, "no layout");
		T_CHECK(tc_plan_check(&tr, &cfg, &lay, err, sizeof(err)) == 0, "%s", err);
		cfg.flags = TC_PLAN_HOST_ASYNC;
		cfg.reserve_bytes = 0;
		T_EQ(tc_plan_build(&tr, &cfg, &min), 0);
		T_CHECK(!min.op_goff, "a layout unasked");
		/* timely: the unlaid plan with its tuned prefetch reserve */
		cfg.reserve_bytes = -1;
		T_EQ(tc_plan_build(&tr, &cfg, &own), 0);
		cfg.reserve_bytes = 0;
		printf("%.0f%%: the unlaid plan's model %.1f ms/step\n", 100 * fracs[f],
		       own.st.sim_step_ns / 1e6);
		T_CHECK(lay.st.sim_step_ns <= own.st.sim_step_ns * 1.02,
			"%.0f%%: laid out %.1f ms/step in the model, unlaid %.1f", 100 * fracs[f],
			lay.st.sim_step_ns / 1e6, own.st.sim_step_ns / 1e6);
		tc_plan_free(&own);
		hc.ctx = &lay;
		ret = tc_plan_hb_check(&tr, &lay, &hc, err, sizeof(err));
		T_CHECK(ret == 0, "%.0f%%: happens-before at its offsets: %s", 100 * fracs[f], err);
		cfg.gpu_bytes = cfg.gpu_bytes * 4 / 5;
		/* at 10% the largest op does not fit 80% of the budget */
		ret = tc_plan_build(&tr, &cfg, &min80);
		T_CHECK(ret == 0 || ret == -ENOSPC, "%.0f%%: MIN at 80%%: %d", 100 * fracs[f], ret);
		printf("%.0f%%: laid out %u of %u hits, %.2f%% of bytes (sim %.1f ms); MIN %.2f%%; MIN at 80%% %.2f%%; %u steps to converge%s\n",
		       100 * fracs[f], lay.st.hits, lay.st.reads, byte_rate(&lay),
		       lay.st.sim_step_ns / 1e6, byte_rate(&min), ret ? 0.0 : byte_rate(&min80),
		       lay.st.steady_iters, lay.st.reconciled ? " (the seam drops some)" : "");
		T_CHECK(byte_rate(&lay) >= byte_rate(&min) - 1.0, "%.0f%%: %.2f%% of bytes, MIN %.2f%%",
			100 * fracs[f], byte_rate(&lay), byte_rate(&min));
		T_CHECK(ret || byte_rate(&lay) > byte_rate(&min80),
			"%.0f%%: %.2f%% of bytes, MIN at 80%% %.2f%%",
			100 * fracs[f], byte_rate(&lay), byte_rate(&min80));
		tc_plan_free(&lay);
		tc_plan_free(&min);
		if (!ret)
			tc_plan_free(&min80);
	}
	/* only ours lays out, over the whole budget */
	{
		struct tc_plan_cfg cfg;
		struct tc_plan pl;
		uint64_t cap[1] = { 0 };

		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = p16;
		cfg.flags = TC_PLAN_LAYOUT;
		cfg.policy = TC_POLICY_LRU;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
		cfg.policy = TC_POLICY_OURS;
		cfg.reserve_bytes = p16 / 8;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
		cfg.reserve_bytes = -1;
		cfg.gpu_cap = cap;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	}
	tc_trace_free(&tr);
	return t_exit();
}
