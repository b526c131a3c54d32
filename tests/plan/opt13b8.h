/* opt13b8.h - the generated OPT-13B step the NVMe planner tests share: 8
 * of its layers at full size, batch 2, the CPU Adam (5e9 params/s) beside
 * backward at the H100 run's backward pace of 32.9 ms per layer. */
#ifndef TENCACHE_TEST_OPT13B8_H
#define TENCACHE_TEST_OPT13B8_H

#include "plan/plan.h"

static inline int t_opt13b8_trace(struct tc_trace *tr)
{
	struct tc_gen_cfg g;
	struct tc_model m;
	int ret;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	g.adam_params_per_s = 5e9;
	g.opt_overlap = true;
	g.opt_split = -1;
	g.opt_pace_ns = 32900000;
	ret = tc_model_builtin("opt-13b", &m);
	if (ret)
		return ret;
	m.layers = 8;
	ret = tc_trace_init(tr);
	return ret ?: tc_model_trace(&m, &g, tr);
}

#endif
