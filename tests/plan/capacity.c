/* capacity.c - random cyclic traces (seeded) with host ops, overwrites and
 * mixed sizes, tight and loose budgets, NVMe on and off, every policy: the
 * plan builds (or says -ENOSPC only when one op cannot fit), the checker
 * proves it safe, the budgets hold at every issue point and, in time, in
 * the timing model, and the model's step is never shorter than compute. */
#include <errno.h>
#include <stdio.h>

#include "test.h"
#include "rtrace.h"

int main(void)
{
	unsigned plans = 0, enospc = 0, reconciled = 0;

	for (uint64_t seed = 1; seed <= 1000; seed++) {
		struct rt_opts o = {
			.tensors = 6 + seed % 30, .ops = 10 + seed % 50, .max_per_op = 1 + seed % 5,
			.min_bytes = 1000, .max_bytes = 1000 + (seed % 3) * 50000,
			.write_pct = 40, .wonly_pct = 30, .host_pct = seed % 4 ? 20 : 0,
		};
		struct tc_trace tr;
		uint64_t total, maxop;

		T_CHECK(rt_build(&tr, &o, seed) == 0, "seed %llu", (unsigned long long)seed);
		T_EQ(tc_trace_validate(&tr), 0);
		total = tc_trace_bytes(&tr, -1);
		maxop = tc_trace_max_op_bytes(&tr);
		for (int pol = 0; pol < TC_POLICY_NR; pol++) {
			for (int nv = 0; nv < 2; nv++) {
				struct tc_plan_cfg cfg;
				struct tc_sim_result sr;
				struct tc_plan pl;
				char err[256] = "";
				int ret;

				tc_plan_cfg_default(&cfg);
				cfg.policy = pol;
				/* from "just the largest op" to "everything fits" */
				cfg.gpu_bytes = maxop + (total - maxop) * (seed % 7) / 8;
				if (seed % 11 == 0)
					cfg.gpu_bytes = maxop > 1 ? maxop - 1 : 1;
				cfg.pinned_bytes = nv ? total / 3 + maxop * 2 : total;
				cfg.nvme_bytes = nv ? total * 2 : 0;
				ret = tc_plan_build(&tr, &cfg, &pl);
				if (cfg.gpu_bytes < maxop) {
					T_CHECK(ret == -ENOSPC, "seed %llu: budget below one op gave %d",
						(unsigned long long)seed, ret);
					enospc++;
					continue;
				}
				if (ret == -ENOSPC && nv) {
					/* a host op larger than the pinned pool */
					enospc++;
					continue;
				}
				T_CHECK(ret == 0, "seed %llu %s nvme %d: build %d",
					(unsigned long long)seed, tc_policy_name(pol), nv, ret);
				if (ret)
					continue;
				plans++;
				reconciled += pl.st.reconciled;
				ret = tc_plan_check(&tr, &cfg, &pl, err, sizeof(err));
				T_CHECK(ret == 0, "seed %llu %s nvme %d: %s",
					(unsigned long long)seed, tc_policy_name(pol), nv, err);
				T_CHECK(pl.st.gpu_peak <= cfg.gpu_bytes, "seed %llu: issue-point peak",
					(unsigned long long)seed);
				T_CHECK(pl.st.hits <= pl.st.reads, "hits");
				ret = tc_sim_run(&tr, &cfg, &pl, 3, &sr);
				T_CHECK(ret == 0, "seed %llu %s: sim %d", (unsigned long long)seed,
					tc_policy_name(pol), ret);
				T_CHECK(sr.gpu_peak <= cfg.gpu_bytes, "seed %llu %s: GPU %llu > %llu in time",
					(unsigned long long)seed, tc_policy_name(pol),
					(unsigned long long)sr.gpu_peak, (unsigned long long)cfg.gpu_bytes);
				T_CHECK(!nv || sr.pinned_peak <= cfg.pinned_bytes,
					"seed %llu: pinned over budget in time", (unsigned long long)seed);
				T_CHECK(sr.step_ns >= tc_trace_compute_ns(&tr),
					"seed %llu: step shorter than compute", (unsigned long long)seed);
				tc_plan_free(&pl);
			}
		}
		tc_trace_free(&tr);
	}
	printf("%u plans checked, %u refused with -ENOSPC, %u needed a seam fix-up\n",
	       plans, enospc, reconciled);
	return t_exit();
}
