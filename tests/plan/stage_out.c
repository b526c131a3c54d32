/* stage_out.c - where the pinned level issues a dirty victim's write to
 * NVMe (tc_plan_cfg.pinned_stage_out, plan.c stage_out_at). On a generated
 * OPT-13B step (8 layers, CPU Adam beside backward) with an NVMe tier, at
 * 50, 70 and 80% pinned and a few victim horizons:
 * - each place's plan passes tc_plan_check, keeps the pinned budget and
 *   records its place;
 * - at the eviction, every stage-out is issued with its value's drop; in
 *   the other two, some go earlier, never inside the host op that last
 *   wrote the value (it would wait for the previous step's instance of
 *   that op: session 35's first try lost values so in cache_trial), and
 *   between an early stage-out and its drop nothing writes the value;
 * - left to the search (< 0), the plan is the shortest modelled of the
 *   three, the first in enum order among equals;
 * - in at least one setting a place other than the eviction models the
 *   shortest step (the choice is not idle);
 * - TC_STAGE_OUT_NR is -EINVAL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "plan/plan.h"
#include "opt13b8.h"

static const char *const so_name[TC_STAGE_OUT_NR] = { "eviction", "written", "halfway" };

static int host_write(const struct tc_trace *tr, uint32_t a, uint32_t t)
{
	return tr->acc[a].tensor == t && (tr->acc[a].flags & TC_ACC_HOST) &&
	       (tr->acc[a].flags & TC_ACC_WRITE);
}

/*
 * Stage-outs issued before their value's drop (in table order, cyclic),
 * or -1 where one of them has a write of its value in between (a host
 * write in accesses [pos, drop pos) or a GPU write-back op), or is issued
 * inside the host op that last wrote the value (before its end access).
 */
static int early_stage_outs(const struct tc_trace *tr, const struct tc_plan *pl)
{
	int early = 0;

	for (uint32_t k = 0; k < pl->nr_ops; k++) {
		const struct tc_op *so = &pl->ops[k];
		uint32_t i, drop = UINT32_MAX;
		int ended = 0;

		if (so->kind != TC_OP_STAGE_OUT)
			continue;
		for (i = 1; i < pl->nr_ops && drop == UINT32_MAX; i++) {
			const struct tc_op *op = &pl->ops[(k + i) % pl->nr_ops];

			if (op->tensor != so->tensor)
				continue;
			if (op->kind == TC_OP_WRITEBACK)
				return -1;
			if (op->kind == TC_OP_PDROP)
				drop = (k + i) % pl->nr_ops;
		}
		if (drop == UINT32_MAX || pl->ops[drop].pos == so->pos)
			continue;	/* kept over the seam, or dropped with it */
		early++;
		for (uint32_t a = so->pos; a != pl->ops[drop].pos; a = (a + 1) % pl->nr_acc)
			if (host_write(tr, a, so->tensor))
				return -1;
		/* the last host op that wrote it has ended before pos: its event
		 * is its end's, and one not yet reached is the previous step's */
		for (i = 1; i <= pl->nr_acc; i++) {
			uint32_t a = (so->pos + pl->nr_acc - i) % pl->nr_acc;

			if (tr->acc[a].flags & TC_ACC_END)
				ended = 1;
			if (host_write(tr, a, so->tensor)) {
				if (!ended)
					return -1;
				break;
			}
		}
	}
	return early;
}

/* A quarter of the fp16 parameters on the GPU, pct% of the state pinned,
 * the disk as an H100 machine's caches measured it; no reserves. */
static void cfg_at(struct tc_plan_cfg *cfg, uint64_t fp16, uint64_t total, unsigned pct,
		   int32_t h)
{
	tc_plan_cfg_default(cfg);
	cfg->flags |= TC_PLAN_HOST_ASYNC;
	cfg->gpu_bytes = fp16 / 4;
	cfg->pinned_bytes = total / 100 * pct;
	cfg->nvme_bytes = total * 2;
	cfg->bw[TC_LINK_NVME_RD] = 1.8e9;
	cfg->bw[TC_LINK_NVME_WR] = 2.6e9;
	cfg->nvme_duplex_bw = 2.0e9;
	cfg->reserve_bytes = 0;
	cfg->pinned_reserve_bytes = 0;
	cfg->pinned_horizon = h;
}

int main(void)
{
	static const unsigned pinned_pct[] = { 50, 70, 80 };
	static const int32_t horizon[] = { 0, 8, 16 };
	struct tc_trace tr;
	uint64_t fp16, total;
	unsigned built = 0, moved = 0, won = 0;

	T_EQ(t_opt13b8_trace(&tr), 0);
	fp16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
	total = tc_trace_bytes(&tr, -1);
	for (size_t p = 0; p < sizeof(pinned_pct) / sizeof(pinned_pct[0]); p++) {
		for (size_t hi = 0; hi < sizeof(horizon) / sizeof(horizon[0]); hi++) {
			uint64_t ns[TC_STAGE_OUT_NR] = { 0 };
			uint32_t best = 0;
			struct tc_plan_cfg cfg;
			struct tc_plan pl;
			int ret;

			for (uint32_t so = 0; so < TC_STAGE_OUT_NR; so++) {
				struct tc_sim_result sr;
				char err[256] = "";
				int early;

				cfg_at(&cfg, fp16, total, pinned_pct[p], horizon[hi]);
				cfg.pinned_stage_out = (int32_t)so;
				ret = tc_plan_build(&tr, &cfg, &pl);
				T_CHECK(ret == 0, "pinned %u%% h %d %s: build %d", pinned_pct[p],
					horizon[hi], so_name[so], ret);
				if (ret)
					continue;
				built++;
				T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == 0,
					"pinned %u%% h %d %s: %s", pinned_pct[p], horizon[hi],
					so_name[so], err);
				T_CHECK(pl.st.pinned_stage_out == so, "%s: recorded %u",
					so_name[so], pl.st.pinned_stage_out);
				T_CHECK(pl.st.pinned_peak <= cfg.pinned_bytes,
					"pinned %u%% h %d %s: peak over the budget", pinned_pct[p],
					horizon[hi], so_name[so]);
				early = early_stage_outs(&tr, &pl);
				T_CHECK(early >= 0, "pinned %u%% h %d %s: a value written between its stage-out and its drop, or staged out inside the op that wrote it",
					pinned_pct[p], horizon[hi], so_name[so]);
				if (so == TC_STAGE_OUT_EVICT)
					T_CHECK(early == 0, "pinned %u%% h %d: %d stage-outs before their drops at the eviction",
						pinned_pct[p], horizon[hi], early);
				else
					moved += early > 0;
				ret = tc_sim_run(&tr, &cfg, &pl, 3, &sr);
				T_CHECK(ret == 0 && sr.pinned_peak <= cfg.pinned_bytes,
					"pinned %u%% h %d %s: model %d", pinned_pct[p], horizon[hi],
					so_name[so], ret);
				ns[so] = sr.step_ns;
				if (ns[so] < ns[best])
					best = so;
				printf("pinned %u%% horizon %2d/64, stage-out at %-8s: step %.1f ms, %d stage-outs before their drops\n",
				       pinned_pct[p], horizon[hi], so_name[so], sr.step_ns / 1e6, early);
				tc_plan_free(&pl);
			}
			won += best != TC_STAGE_OUT_EVICT;
			/* the search: the shortest of the three, the first among equals */
			cfg_at(&cfg, fp16, total, pinned_pct[p], horizon[hi]);
			T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
			T_CHECK(pl.st.pinned_stage_out == best && pl.st.sim_step_ns == ns[best],
				"pinned %u%% h %d: the search took %s at %.1f ms, the shortest is %s at %.1f",
				pinned_pct[p], horizon[hi], so_name[pl.st.pinned_stage_out % TC_STAGE_OUT_NR],
				pl.st.sim_step_ns / 1e6, so_name[best], ns[best] / 1e6);
			tc_plan_free(&pl);
		}
	}
	T_CHECK(built == 27, "%u of 27 plans built", built);
	T_CHECK(moved == 18, "stage-outs went before their drops in %u of 18 plans", moved);
	T_CHECK(won >= 1, "the eviction's stage-outs modelled the shortest step in all 9 settings");
	{
		struct tc_plan_cfg cfg;
		struct tc_plan pl;

		cfg_at(&cfg, fp16, total, 50, 0);
		cfg.pinned_stage_out = TC_STAGE_OUT_NR;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	}
	tc_trace_free(&tr);
	return t_exit();
}
