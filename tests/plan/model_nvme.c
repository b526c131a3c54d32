/* model_nvme.c - regression: a generated OPT-13B step (8 layers, CPU Adam
 * beside backward) with an NVMe tier, as the replay ran it on the GPU
 * machine (25% and 50% of the fp16 parameters on the GPU, half the state
 * pinned). With a pinned reserve the pinned level's last laps evicted a
 * dead activation at different points, and the next step's pinned space
 * for it was placed after the lap before's eviction, not the table's:
 * the table freed it just after, and the GPU's writeback found no pinned
 * copy ("writeback t662 gres 1 gv 1 pres 0"; the executor then ran on
 * demand). Every plan, across pinned reserves, GPU reserves and lowered
 * GPU capacities, must pass tc_plan_check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "test.h"
#include "plan/plan.h"
#include "opt13b8.h"

int main(void)
{
	static const double gpu_share[] = { 0.25, 0.5 };
	struct tc_trace tr;
	uint64_t fp16, total, *cap;
	unsigned built = 0;

	T_EQ(t_opt13b8_trace(&tr), 0);
	fp16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16);
	total = tc_trace_bytes(&tr, -1);
	cap = malloc(tr.nr_acc * sizeof(*cap));
	T_CHECK(cap != NULL, "malloc");
	if (!cap)
		return t_exit();
	for (size_t s = 0; s < sizeof(gpu_share) / sizeof(gpu_share[0]); s++) {
		for (int pr = 0; pr <= 8; pr++) {
			for (int mode = 0; mode < 3; mode++) {
				struct tc_plan_cfg cfg;
				struct tc_plan pl;
				char err[256] = "";
				int ret;

				tc_plan_cfg_default(&cfg);
				cfg.flags |= TC_PLAN_HOST_ASYNC;
				cfg.gpu_bytes = (uint64_t)(fp16 * gpu_share[s]);
				cfg.pinned_bytes = total / 2;
				cfg.nvme_bytes = total * 2;
				/* the disk as the H100 machine measured it */
				cfg.bw[TC_LINK_NVME_RD] = 2.3e9;
				cfg.bw[TC_LINK_NVME_WR] = 3.5e9;
				cfg.nvme_duplex_bw = 2.7e9;
				cfg.pinned_reserve_bytes = (int64_t)(cfg.pinned_bytes / 32 * pr);
				cfg.reserve_bytes = mode == 0 ? -1 : 0;
				if (mode == 2) {	/* a third of the step at 3/4 of the budget */
					for (uint32_t i = 0; i < tr.nr_acc; i++)
						cap[i] = i >= tr.nr_acc / 3 && i < 2 * tr.nr_acc / 3 ?
							 cfg.gpu_bytes / 4 * 3 : cfg.gpu_bytes;
					cfg.gpu_cap = cap;
				}
				ret = tc_plan_build(&tr, &cfg, &pl);
				if (ret == -ENOSPC)	/* an op cannot fit the capacity */
					continue;
				T_CHECK(ret == 0, "GPU %.0f%% pinned reserve %d/32 mode %d: build %d",
					gpu_share[s] * 100, pr, mode, ret);
				if (ret)
					continue;
				built++;
				T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == 0,
					"GPU %.0f%% pinned reserve %d/32 mode %d: %s",
					gpu_share[s] * 100, pr, mode, err);
				tc_plan_free(&pl);
			}
		}
	}
	printf("%u plans built and checked\n", built);
	T_CHECK(built >= 36, "only %u plans built", built);
	free(cap);
	tc_trace_free(&tr);
	return t_exit();
}
