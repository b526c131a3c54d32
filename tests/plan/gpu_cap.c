/* gpu_cap.c - the planner's per-access GPU capacity (cfg.gpu_cap), which the
 * executor lowers where a plan's allocations do not lay out: on a generated
 * OPT-1.3B step at 50% of its fp16 parameters, with the capacity halved over
 * the middle third of the step, ours and LRU keep their GPU bytes there
 * within half the budget plus one tensor (a prefetch issued at the window's
 * edge), the plan passes the checker, and the rest of the step keeps what
 * it had: the plan hits at least as often as one made for half the budget
 * throughout. */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "plan/plan.h"

/* Peak GPU bytes over accesses [a, b) of the steady step (the third lap). */
static uint64_t peak_in(const struct tc_trace *tr, const struct tc_plan *pl, uint32_t a, uint32_t b)
{
	uint64_t used = 0, peak = 0;
	uint8_t *res = calloc(tr->nr_tensors, 1);

	for (uint32_t t = 0; t < tr->nr_tensors; t++)
		if ((res[t] = pl->start_gpu[t] & 1))
			used += tr->tensors[t].bytes;
	for (int lap = 0; lap < 3; lap++)
		for (uint32_t i = 0; i < tr->nr_acc; i++) {
			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
				const struct tc_op *op = &pl->ops[k];

				if ((op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC) && !res[op->tensor]) {
					res[op->tensor] = 1;
					used += tr->tensors[op->tensor].bytes;
				} else if (op->kind == TC_OP_DROP && res[op->tensor]) {
					res[op->tensor] = 0;
					used -= tr->tensors[op->tensor].bytes;
				}
			}
			if (lap == 2 && i >= a && i < b && used > peak)
				peak = used;
		}
	free(res);
	return peak;
}

int main(void)
{
	static const enum tc_policy pols[] = { TC_POLICY_OURS, TC_POLICY_LRU };
	struct tc_gen_cfg g;
	struct tc_trace tr;
	struct tc_model m;
	uint64_t budget, maxt = 0, *cap;
	uint32_t n, a, b;

	tc_gen_cfg_default(&g);
	tc_trace_init(&tr);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	budget = (tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16)) / 2;
	for (uint32_t t = 0; t < tr.nr_tensors; t++)
		if (tr.tensors[t].bytes > maxt)
			maxt = tr.tensors[t].bytes;
	n = tr.nr_acc;
	a = n / 3;
	b = 2 * n / 3;
	cap = malloc(n * sizeof(*cap));
	for (uint32_t i = 0; i < n; i++)
		cap[i] = i >= a && i < b ? budget / 2 : budget;
	for (size_t p = 0; p < sizeof(pols) / sizeof(pols[0]); p++) {
		struct tc_plan_cfg cfg;
		struct tc_plan pl, full, half;
		char err[256] = "";
		uint64_t pk, pk_full;

		tc_plan_cfg_default(&cfg);
		cfg.policy = pols[p];
		cfg.gpu_bytes = budget;
		cfg.pinned_bytes = UINT64_MAX;
		cfg.reserve_bytes = 0;
		T_EQ(tc_plan_build(&tr, &cfg, &full), 0);
		cfg.gpu_bytes = budget / 2;
		T_EQ(tc_plan_build(&tr, &cfg, &half), 0);
		cfg.gpu_bytes = budget;
		cfg.gpu_cap = cap;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
		T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == 0, "%s: %s",
			tc_policy_name(cfg.policy), err);
		pk = peak_in(&tr, &pl, a, b);
		pk_full = peak_in(&tr, &full, a, b);
		printf("%-8s middle third: peak %.2f GB (capacity %.2f, without it %.2f); hits %u, full budget %u, half %u\n",
		       tc_policy_name(cfg.policy), pk / 1e9, budget / 2e9, pk_full / 1e9,
		       pl.st.hits, full.st.hits, half.st.hits);
		T_CHECK(pk_full > budget / 2 + maxt, "the window does not bind: %llu",
			(unsigned long long)pk_full);
		T_CHECK(pk <= budget / 2 + maxt, "%s: %llu bytes in the window over %llu + %llu",
			tc_policy_name(cfg.policy), (unsigned long long)pk,
			(unsigned long long)budget / 2, (unsigned long long)maxt);
		T_CHECK(pl.st.hits >= half.st.hits, "%s: %u hits, fewer than at half the budget (%u)",
			tc_policy_name(cfg.policy), pl.st.hits, half.st.hits);
		tc_plan_free(&pl);
		tc_plan_free(&full);
		tc_plan_free(&half);
	}
	free(cap);
	tc_trace_free(&tr);
	return t_exit();
}
