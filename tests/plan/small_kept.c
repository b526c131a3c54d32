/* small_kept.c - ours' MIN keeps tensors under 1/1000 of the GPU budget
 * (biases, norms; at most 1/32 of it in all) unless nothing else can go:
 * on a generated OPT-1.3B step at 25% and 50% of its fp16 parameters, with
 * no reserve, it hits more often than MIN by next use alone
 * (TC_PLAN_PURE_MIN, Belady's rule) and moves no more bytes for it (its
 * byte hit rate within 0.5 points), and its plans pass the checker. */
#include <errno.h>
#include <stdio.h>

#include "test.h"
#include "plan/plan.h"

int main(void)
{
	static const double fracs[] = { 0.25, 0.50 };
	struct tc_gen_cfg g;
	struct tc_trace tr;
	struct tc_model m;
	uint64_t p16;

	tc_gen_cfg_default(&g);
	tc_trace_init(&tr);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	p16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16);
	for (size_t f = 0; f < sizeof(fracs) / sizeof(fracs[0]); f++) {
		struct tc_plan_cfg cfg;
		struct tc_plan kept, pure;
		char err[256] = "";
		double kb, pb;

		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = (uint64_t)(p16 * fracs[f]);
		cfg.pinned_bytes = UINT64_MAX;
		cfg.reserve_bytes = 0;
		T_EQ(tc_plan_build(&tr, &cfg, &kept), 0);
		T_CHECK(tc_plan_check(&tr, &cfg, &kept, err, sizeof(err)) == 0, "%s", err);
		cfg.flags |= TC_PLAN_PURE_MIN;
		T_EQ(tc_plan_build(&tr, &cfg, &pure), 0);
		kb = 100.0 * kept.st.hit_bytes / kept.st.read_bytes;
		pb = 100.0 * pure.st.hit_bytes / pure.st.read_bytes;
		printf("%.0f%%: small kept %u hits of %u (%.2f%% of bytes), next use alone %u (%.2f%%)\n",
		       100 * fracs[f], kept.st.hits, kept.st.reads, kb, pure.st.hits, pb);
		T_CHECK(kept.st.hits > pure.st.hits, "%.0f%%: %u hits, no more than MIN's %u",
			100 * fracs[f], kept.st.hits, pure.st.hits);
		T_CHECK(kb >= pb - 0.5, "%.0f%%: byte hit rate %.2f%% against MIN's %.2f%%",
			100 * fracs[f], kb, pb);
		tc_plan_free(&kept);
		tc_plan_free(&pure);
	}
	/* an unknown flag is still refused */
	{
		struct tc_plan_cfg cfg;
		struct tc_plan pl;

		tc_plan_cfg_default(&cfg);
		cfg.gpu_bytes = p16;
		cfg.flags = 0x80;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	}
	tc_trace_free(&tr);
	return t_exit();
}
