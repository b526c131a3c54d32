/* check_mutate.c - the plan checker (tc_plan_check, which the executor runs
 * on every plan before using it) catches planner bugs: on seeded random
 * traces, with and without NVMe, each valid plan loses one copy op at a
 * time. Removing a FETCH or a STAGE_IN always leaves a read or a copy
 * without its value, so the checker must refuse every such plan; removed
 * write-backs and stage-outs are refused when a later read needs them
 * (counted). A shrunk GPU budget must be refused too, and so must a
 * pinned-level op (a DROP made a PDROP) in a plan without NVMe. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "rtrace.h"

/* pl without op k: a shallow copy with its own ops and op_first. */
static int drop_op(const struct tc_plan *pl, uint32_t k, struct tc_plan *out)
{
	uint32_t n = pl->nr_acc;

	*out = *pl;
	out->ops = malloc((pl->nr_ops ? pl->nr_ops : 1) * sizeof(*out->ops));
	out->op_first = malloc((n + 1) * sizeof(*out->op_first));
	if (!out->ops || !out->op_first) {
		free(out->ops);
		free(out->op_first);
		return -ENOMEM;
	}
	memcpy(out->ops, pl->ops, k * sizeof(*out->ops));
	memcpy(out->ops + k, pl->ops + k + 1, (pl->nr_ops - k - 1) * sizeof(*out->ops));
	out->nr_ops = pl->nr_ops - 1;
	for (uint32_t i = 0; i <= n; i++)
		out->op_first[i] = pl->op_first[i] - (pl->op_first[i] > k);
	return 0;
}

int main(void)
{
	unsigned must = 0, must_caught = 0, may = 0, may_caught = 0, plans = 0, nvme_less = 0;

	for (uint64_t seed = 1; seed <= 200; seed++) {
		struct rt_opts o = {
			.tensors = 6 + seed % 20, .ops = 10 + seed % 30, .max_per_op = 1 + seed % 4,
			.min_bytes = 1000, .max_bytes = 1000 + (seed % 3) * 20000,
			.write_pct = 40, .wonly_pct = 30, .host_pct = seed % 4 ? 20 : 0,
		};
		struct tc_trace tr;
		uint64_t total, maxop;

		T_CHECK(rt_build(&tr, &o, seed) == 0, "seed %llu", (unsigned long long)seed);
		total = tc_trace_bytes(&tr, -1);
		maxop = tc_trace_max_op_bytes(&tr);
		for (int nv = 0; nv < 2; nv++) {
			struct tc_plan_cfg cfg;
			struct tc_plan pl;

			tc_plan_cfg_default(&cfg);
			cfg.gpu_bytes = maxop + (total - maxop) * (seed % 5) / 8;
			cfg.pinned_bytes = nv ? total / 3 + maxop * 2 : total;
			cfg.nvme_bytes = nv ? total * 2 : 0;
			if (tc_plan_build(&tr, &cfg, &pl))
				continue;	/* capacity.c covers building */
			T_EQ(tc_plan_check(&tr, &cfg, &pl, NULL, 0), 0);
			plans++;
			for (uint32_t k = 0; k < pl.nr_ops; k++) {
				unsigned kind = pl.ops[k].kind;
				int hard = kind == TC_OP_FETCH || kind == TC_OP_STAGE_IN;
				int soft = kind == TC_OP_WRITEBACK || kind == TC_OP_STAGE_OUT;
				struct tc_plan m;
				char err[256] = "";
				int ret;

				if (!hard && !soft)
					continue;
				T_EQ(drop_op(&pl, k, &m), 0);
				ret = tc_plan_check(&tr, &cfg, &m, err, sizeof(err));
				if (hard) {
					must++;
					must_caught += ret == -EINVAL;
					T_CHECK(ret == -EINVAL, "seed %llu nvme %d: plan without op %u (%s t%u) "
						"passed the check", (unsigned long long)seed, nv, k,
						tc_op_name(kind), pl.ops[k].tensor);
				} else {
					may++;
					may_caught += ret == -EINVAL;
				}
				free(m.ops);
				free(m.op_first);
			}
			/* without NVMe, a pinned-level op (a DROP made a PDROP) is refused as such */
			for (uint32_t k = 0; !nv && k < pl.nr_ops; k++) {
				char err[256] = "";

				if (pl.ops[k].kind != TC_OP_DROP)
					continue;
				pl.ops[k].kind = TC_OP_PDROP;
				T_CHECK(tc_plan_check(&tr, &cfg, &pl, err, sizeof(err)) == -EINVAL &&
					strstr(err, "without an NVMe tier"),
					"seed %llu: a PDROP without NVMe: %s", (unsigned long long)seed, err);
				pl.ops[k].kind = TC_OP_DROP;
				nvme_less++;
				break;
			}
			if (pl.st.gpu_peak > 1) {
				struct tc_plan_cfg small = cfg;

				small.gpu_bytes = pl.st.gpu_peak - 1;
				T_CHECK(tc_plan_check(&tr, &small, &pl, NULL, 0) == -EINVAL,
					"seed %llu nvme %d: GPU budget below the plan's peak passed",
					(unsigned long long)seed, nv);
			}
			tc_plan_free(&pl);
		}
		tc_trace_free(&tr);
	}
	printf("%u plans; removed fetches and stage-ins refused: %u of %u; removed "
	       "write-backs and stage-outs refused: %u of %u; a PDROP without NVMe refused "
	       "in %u\n", plans, must_caught, must, may_caught, may, nvme_less);
	T_CHECK(plans > 100 && must > 100, "too few cases: %u plans, %u ops", plans, must);
	T_CHECK(nvme_less > 20, "only %u plans without NVMe had a DROP to make a PDROP", nvme_less);
	return t_exit();
}
