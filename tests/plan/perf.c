/* perf.c - planning cost for OPT-13B and the cost of walking the schedule
 * tables per access (what the executor does on each acquire: issue the
 * ops of this access, look up what to wait on). The walk must average well
 * under the 1 us per acquire/release budget, with no per-access search. */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "test.h"
#include "plan/plan.h"

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(void)
{
	struct tc_plan_cfg cfg;
	struct tc_gen_cfg g;
	struct tc_trace tr;
	struct tc_model m;
	struct tc_plan pl;
	uint64_t p16, sink = 0;
	uint32_t max_ops = 0, max_wait = 0;
	double t0, plan_ms, walk_ns;
	int ret;
	const int steps = 200;

	tc_gen_cfg_default(&g);
	tc_trace_init(&tr);
	T_EQ(tc_model_builtin("opt-13b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	p16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = p16 / 4;
	cfg.pinned_bytes = tc_trace_bytes(&tr, -1) / 4;
	cfg.nvme_bytes = 2 * tc_trace_bytes(&tr, -1);
	t0 = now_ns();
	ret = tc_plan_build(&tr, &cfg, &pl);
	plan_ms = (now_ns() - t0) / 1e6;
	T_EQ(ret, 0);
	if (ret)
		return t_exit();
	printf("OPT-13B (%u tensors, %u accesses), GPU 25%%, NVMe on: plan %.0f ms "
	       "(auto-tuned; %u ops, %u deps)\n", tr.nr_tensors, tr.nr_acc, plan_ms,
	       pl.nr_ops, pl.nr_deps);
	T_CHECK(plan_ms < 60000, "planning took %.0f ms", plan_ms);

	for (uint32_t i = 0; i < pl.nr_acc; i++) {
		if (pl.op_first[i + 1] - pl.op_first[i] > max_ops)
			max_ops = pl.op_first[i + 1] - pl.op_first[i];
		if (pl.wait_first[i + 1] - pl.wait_first[i] > max_wait)
			max_wait = pl.wait_first[i + 1] - pl.wait_first[i];
	}
	t0 = now_ns();
	for (int s = 0; s < steps; s++)
		for (uint32_t i = 0; i < pl.nr_acc; i++) {
			for (uint32_t k = pl.op_first[i]; k < pl.op_first[i + 1]; k++) {
				const struct tc_op *op = &pl.ops[k];

				sink += op->tensor + op->kind;
				for (uint32_t d = 0; d < op->nr_deps; d++)
					sink += pl.deps[op->dep_first + d];
			}
			for (uint32_t w = pl.wait_first[i]; w < pl.wait_first[i + 1]; w++)
				sink += pl.wait_ops[w];
			sink += pl.hit[i];
		}
	walk_ns = (now_ns() - t0) / ((double)steps * pl.nr_acc);
	printf("table walk: %.1f ns per access on average; at most %u ops issued and %u waits "
	       "at one access (%llu)\n", walk_ns, max_ops, max_wait, (unsigned long long)(sink & 1));
	T_CHECK(walk_ns < 200, "walk %.1f ns per access", walk_ns);
	tc_plan_free(&pl);
	tc_trace_free(&tr);
	return t_exit();
}
