/* pinned_cap.c - the planner's per-access pinned capacity (cfg.pinned_cap),
 * which the executor lowers where a plan's pinned ranges do not lay out in
 * the pool. On the generated OPT-13B step (8 layers, NVMe tier, 80% of the
 * state pinned), with the capacity cut by 1/64 of the budget over the
 * middle third of the step, ours' plan passes the checker, keeps its pinned
 * bytes within the cut capacity there at every issue point (the pinned
 * peak the planner sees), and moves no more bytes to and from the disk
 * than the plan made for the cut budget throughout. A deeper cut inside
 * it, from several points, binds too (the level evicts where its capacity
 * drops, at a hit as well). A cut of the whole step plans as that budget
 * does. */
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "plan/plan.h"
#include "opt13b8.h"

/* Peak pinned bytes over accesses [a, b) of the steady step (the third lap). */
static uint64_t peak_in(const struct tc_trace *tr, const struct tc_plan *pl, uint32_t a, uint32_t b)
{
	uint64_t used = 0, peak = 0;
	uint8_t *res = calloc(tr->nr_tensors, 1);

	for (uint32_t t = 0; t < tr->nr_tensors; t++)
		if ((res[t] = pl->start_pinned[t] & 1))
			used += tr->tensors[t].bytes;
	for (int lap = 0; lap < 3; lap++)
		for (uint32_t i = 0; i < tr->nr_acc; i++) {
			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
				const struct tc_op *op = &pl->ops[k];

				if ((op->kind == TC_OP_STAGE_IN || op->kind == TC_OP_PALLOC) &&
				    !res[op->tensor]) {
					res[op->tensor] = 1;
					used += tr->tensors[op->tensor].bytes;
				} else if (op->kind == TC_OP_PDROP && res[op->tensor]) {
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

static uint64_t disk_bytes(const struct tc_plan *pl)
{
	return pl->st.link_bytes[TC_LINK_NVME_RD] + pl->st.link_bytes[TC_LINK_NVME_WR];
}

int main(void)
{
	struct tc_plan_cfg cfg;
	struct tc_plan pl, full, cut, whole;
	struct tc_trace tr;
	uint64_t budget, c, *cap, pk, pk_full;
	uint32_t n, a, b;
	char err[256] = "";

	T_EQ(t_opt13b8_trace(&tr), 0);
	tc_plan_cfg_default(&cfg);
	cfg.flags |= TC_PLAN_HOST_ASYNC;
	cfg.gpu_bytes = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) / 4;
	budget = tc_trace_bytes(&tr, -1) / 100 * 80;
	cfg.nvme_bytes = tc_trace_bytes(&tr, -1) * 2;
	cfg.bw[TC_LINK_NVME_RD] = 1.9e9;
	cfg.bw[TC_LINK_NVME_WR] = 2.6e9;
	cfg.nvme_duplex_bw = 2.2e9;
	n = tr.nr_acc;
	a = n / 3;
	b = 2 * n / 3;
	c = budget - budget / 64;
	cap = malloc(n * sizeof(*cap));
	T_CHECK(cap != NULL, "malloc");
	for (uint32_t i = 0; i < n; i++)
		cap[i] = i >= a && i < b ? c : budget;

	cfg.pinned_bytes = budget;
	T_EQ(tc_plan_build(&tr, &cfg, &full), 0);
	cfg.pinned_bytes = c;
	T_EQ(tc_plan_build(&tr, &cfg, &cut), 0);
	cfg.pinned_bytes = budget;
	cfg.pinned_cap = cap;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
	T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == 0, "%s", err);
	pk = peak_in(&tr, &pl, a, b);
	pk_full = peak_in(&tr, &full, a, b);
	printf("middle third: pinned peak %.3f GB (capacity %.3f, without the cut %.3f); disk %.2f GB a step, full budget %.2f, cut throughout %.2f; model %.1f / %.1f / %.1f ms\n",
	       pk / 1e9, c / 1e9, pk_full / 1e9, disk_bytes(&pl) / 1e9, disk_bytes(&full) / 1e9,
	       disk_bytes(&cut) / 1e9, pl.st.sim_step_ns / 1e6, full.st.sim_step_ns / 1e6,
	       cut.st.sim_step_ns / 1e6);
	T_CHECK(pk_full > c, "the cut does not bind: peak %llu", (unsigned long long)pk_full);
	T_CHECK(pk <= c, "%llu pinned bytes in the window, over %llu", (unsigned long long)pk,
		(unsigned long long)c);
	T_CHECK(disk_bytes(&pl) <= disk_bytes(&cut), "the window's cut moves more (%llu) than a cut throughout (%llu)",
		(unsigned long long)disk_bytes(&pl), (unsigned long long)disk_bytes(&cut));

	/* a deeper cut inside it, from several points: the capacity drops
	 * where the plan may only hit (no read to evict for), and the level
	 * evicts there all the same (evict_down) */
	for (uint32_t k = 0; k < 8; k++) {
		uint32_t a2 = a + (b - a) * k / 16, b2 = a2 + (b - a) / 4;
		uint64_t c2 = budget - budget / 32;
		struct tc_plan st;

		for (uint32_t i = 0; i < n; i++)
			cap[i] = i >= a2 && i < b2 ? c2 : i >= a && i < b ? c : budget;
		T_EQ(tc_plan_build(&tr, &cfg, &st), 0);
		T_CHECK(tc_plan_check(&tr, &cfg, &st, err, sizeof(err)) == 0, "%s", err);
		pk = peak_in(&tr, &st, a2, b2);
		T_CHECK(pk <= c2, "cut from access %u: %llu pinned bytes in it, over %llu", a2,
			(unsigned long long)pk, (unsigned long long)c2);
		T_CHECK(peak_in(&tr, &st, a, a2) <= c && peak_in(&tr, &st, b2, b) <= c,
			"cut from access %u: over the outer cut around it", a2);
		tc_plan_free(&st);
	}

	/* cut everywhere: the plan for that budget */
	for (uint32_t i = 0; i < n; i++)
		cap[i] = c;
	T_EQ(tc_plan_build(&tr, &cfg, &whole), 0);
	T_CHECK(disk_bytes(&whole) == disk_bytes(&cut) && whole.nr_ops == cut.nr_ops,
		"capacity %llu throughout: %llu bytes, %u ops; the budget: %llu, %u",
		(unsigned long long)c, (unsigned long long)disk_bytes(&whole), whole.nr_ops,
		(unsigned long long)disk_bytes(&cut), cut.nr_ops);
	tc_plan_free(&whole);
	tc_plan_free(&pl);
	tc_plan_free(&cut);
	tc_plan_free(&full);
	free(cap);
	tc_trace_free(&tr);
	return t_exit();
}
