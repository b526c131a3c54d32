/* dead_oldest.c - ours' pinned level takes, among dead values (next written
 * before read: evicting one costs no miss), the one whose last use is
 * oldest, so the NVMe read that needs its space starts soonest (plan.c
 * older_dead). A hand-made step: host ops read D1, then D2 (larger), then
 * X, which pinned memory has no room for; D1 and D2 are overwritten after.
 * Plain MIN (the other policies' pinned level) takes the larger D2, so X's
 * read waits for D2's op and stalls the host op on X; ours takes D1, and
 * X's read runs beside the long GPU op in between. Checked at MIN
 * (pinned_horizon 0), at a horizon and at the default search, with the
 * heap and with the scan of every resident. */
#include <stdio.h>

#include "test.h"
#include "plan/plan.h"

#define MiB (1ull << 20)
#define MS 1000000ull

enum { C, D1, D2, X };

static void trace(struct tc_trace *tr)
{
	const unsigned rd = TC_ACC_HOST | TC_ACC_READ | TC_ACC_END;
	const unsigned wr = TC_ACC_HOST | TC_ACC_WRITE | TC_ACC_END;

	T_EQ(tc_trace_init(tr), 0);
	T_EQ(tc_trace_add_tensor(tr, 1 * MiB, TC_ROLE_PARAM_FP16), C);
	T_EQ(tc_trace_add_tensor(tr, 64 * MiB, TC_ROLE_OPT_STATE), D1);
	T_EQ(tc_trace_add_tensor(tr, 80 * MiB, TC_ROLE_OPT_STATE), D2);
	T_EQ(tc_trace_add_tensor(tr, 64 * MiB, TC_ROLE_OPT_STATE), X);
	T_EQ(tc_trace_add_access(tr, D1, TC_PHASE_OPT, rd, 5 * MS), 0);
	T_EQ(tc_trace_add_access(tr, C, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, 100 * MS), 0);
	T_EQ(tc_trace_add_access(tr, D2, TC_PHASE_OPT, rd, 5 * MS), 0);
	T_EQ(tc_trace_add_access(tr, C, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, 10 * MS), 0);
	T_EQ(tc_trace_add_access(tr, X, TC_PHASE_OPT, rd, 5 * MS), 0);
	T_EQ(tc_trace_add_access(tr, D1, TC_PHASE_OPT, wr, 5 * MS), 0);
	T_EQ(tc_trace_add_access(tr, D2, TC_PHASE_OPT, wr, 5 * MS), 0);
}

/* The issue point of X's read, and the modelled step. */
static void plan(const struct tc_trace *tr, enum tc_policy pol, int32_t horizon,
		 uint32_t *pos, uint64_t *step_ns)
{
	struct tc_plan_cfg cfg;
	struct tc_plan pl;
	struct tc_sim_result sr;
	unsigned reads = 0;
	char err[256] = "";

	tc_plan_cfg_default(&cfg);
	cfg.policy = pol;
	cfg.gpu_bytes = 16 * MiB;
	cfg.pinned_bytes = 146 * MiB;	/* C, D1 and D2, not X too */
	cfg.nvme_bytes = 1024 * MiB;
	cfg.bw[TC_LINK_NVME_RD] = 1e9;	/* X in 67 ms: less than the GPU op */
	cfg.pinned_horizon = horizon;
	T_EQ(tc_plan_build(tr, &cfg, &pl), 0);
	T_CHECK(tc_plan_check(tr, &cfg, &pl, err, sizeof(err)) == 0, "plan check: %s", err);
	for (uint32_t k = 0; k < pl.nr_ops; k++)
		if (pl.ops[k].kind == TC_OP_STAGE_IN) {
			T_EQ(pl.ops[k].tensor, X);
			*pos = pl.ops[k].pos;
			reads++;
		}
	T_EQ(reads, 1);
	T_EQ(tc_sim_run(tr, &cfg, &pl, 3, &sr), 0);
	*step_ns = sr.step_ns;
	tc_plan_free(&pl);
}

int main(void)
{
	static const int32_t horizons[] = { 0, 16, -1 };	/* MIN, 1/4 step, chosen */
	struct tc_trace tr;
	uint32_t min_pos, pos;
	uint64_t min_ns, ns;

	trace(&tr);
	plan(&tr, TC_POLICY_ZERO, 0, &min_pos, &min_ns);
	printf("plain MIN (zero-inf's pinned level): X read at access %u, step %.1f ms\n",
	       min_pos, min_ns / 1e6);
	T_CHECK(min_pos > 2, "MIN issued X's read at %u, before D2's op ended", min_pos);
	for (int scan = 0; scan < 2; scan++) {
		tc_plan_test_victim_scan(scan);
		for (size_t h = 0; h < sizeof(horizons) / sizeof(*horizons); h++) {
			plan(&tr, TC_POLICY_OURS, horizons[h], &pos, &ns);
			printf("ours, horizon %d, %s: X read at access %u, step %.1f ms\n",
			       horizons[h], scan ? "scan" : "heap", pos, ns / 1e6);
			T_CHECK(pos <= 2, "ours issued X's read at %u, after D2's op", pos);
			T_CHECK(ns + 50 * MS < min_ns, "ours' step %.1f ms, MIN's %.1f",
				ns / 1e6, min_ns / 1e6);
		}
	}
	tc_plan_test_victim_scan(false);
	tc_trace_free(&tr);
	return t_exit();
}
