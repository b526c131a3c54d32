/* belady.c - ours (MIN, no reserve) reaches the optimal hit count on small
 * uniform-size traces, found by brute force over every eviction choice;
 * LRU never beats it. Variable sizes: MIN is a heuristic there; the gap to
 * the brute-force optimum is printed and the optimum must not be beaten. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "rtrace.h"

#define MAXT 10

/* Fewest misses (reads of absent tensors) over all eviction choices; any
 * subset of non-held tensors may be evicted at a miss (covers sizes). */
static int brute(const struct tc_trace *tr, uint64_t cap)
{
	uint32_t n = tr->nr_acc, S = 1u << tr->nr_tensors;
	int *cur = malloc(S * sizeof(int)), *nxt = malloc(S * sizeof(int)), best = -1;
	uint32_t start = 0;

	for (uint32_t m = 0; m < S; m++)
		cur[m] = m ? -1 : 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct tc_access *a = &tr->acc[i];
		uint32_t held = 0, e = i, bit = 1u << a->tensor;

		if (i == 0 || (tr->acc[i - 1].flags & TC_ACC_END))
			start = i;
		while (!(tr->acc[e].flags & TC_ACC_END))
			e++;
		for (uint32_t k = start; k <= e; k++)
			held |= 1u << tr->acc[k].tensor;
		for (uint32_t m = 0; m < S; m++)
			nxt[m] = -1;
		for (uint32_t m = 0; m < S; m++) {
			int c = cur[m];

			if (c < 0)
				continue;
			if (m & bit) {
				if (nxt[m] < 0 || c < nxt[m])
					nxt[m] = c;
				continue;
			}
			c += !!(a->flags & TC_ACC_READ);
			/* evict any subset of the evictable residents, then load */
			for (uint32_t ev = m & ~held;; ev = (ev - 1) & (m & ~held)) {
				uint32_t nm = (m & ~ev) | bit;
				uint64_t b = 0;

				for (uint32_t t = 0; t < tr->nr_tensors; t++)
					if (nm & (1u << t))
						b += tr->tensors[t].bytes;
				if (b <= cap && (nxt[nm] < 0 || c < nxt[nm]))
					nxt[nm] = c;
				if (!ev)
					break;
			}
		}
		memcpy(cur, nxt, S * sizeof(int));
	}
	for (uint32_t m = 0; m < S; m++)
		if (cur[m] >= 0 && (best < 0 || cur[m] < best))
			best = cur[m];
	free(cur);
	free(nxt);
	return best;
}

static int misses(const struct tc_trace *tr, uint64_t cap, enum tc_policy pol)
{
	struct tc_plan_cfg cfg;
	struct tc_plan pl;
	char err[256];
	int ret;

	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = cap;
	cfg.pinned_bytes = 1ull << 40;
	cfg.policy = pol;
	cfg.reserve_bytes = 0;
	cfg.flags = TC_PLAN_ACYCLIC;
	ret = tc_plan_build(tr, &cfg, &pl);
	if (ret)
		return ret;
	ret = tc_plan_check(tr, &cfg, &pl, err, sizeof(err));
	T_CHECK(ret == 0, "%s: %s", tc_policy_name(pol), err);
	ret = pl.st.reads - pl.st.hits;
	tc_plan_free(&pl);
	return ret;
}

int main(void)
{
	int uniform = 0, sized = 0, gap = 0, lru_worse = 0;

	for (uint64_t seed = 1; seed <= 400; seed++) {
		struct rt_opts o = {
			.tensors = 4 + seed % 5, .ops = 6 + seed % 14, .max_per_op = 1 + seed % 3,
			.min_bytes = 1, .max_bytes = seed % 2 ? 1 : 4,
			.write_pct = 30, .wonly_pct = 40,
		};
		struct tc_trace tr;
		uint64_t cap = (o.max_per_op + 1 + seed % 3) * o.max_bytes;
		int opt, ours, lru;

		T_CHECK(rt_build(&tr, &o, seed) == 0, "seed %llu", (unsigned long long)seed);
		if (tc_trace_max_op_bytes(&tr) > cap)
			cap = tc_trace_max_op_bytes(&tr);
		opt = brute(&tr, cap);
		ours = misses(&tr, cap, TC_POLICY_OURS);
		lru = misses(&tr, cap, TC_POLICY_LRU);
		T_CHECK(opt >= 0 && ours >= 0 && lru >= 0, "seed %llu: %d %d %d",
			(unsigned long long)seed, opt, ours, lru);
		T_CHECK(ours >= opt, "seed %llu: ours %d beats brute force %d",
			(unsigned long long)seed, ours, opt);
		if (o.max_bytes == 1) {
			uniform++;
			T_CHECK(ours == opt, "seed %llu: ours %d misses, optimum %d",
				(unsigned long long)seed, ours, opt);
			T_CHECK(lru >= opt, "seed %llu: LRU %d < optimum %d",
				(unsigned long long)seed, lru, opt);
			lru_worse += lru > opt;
		} else {
			sized++;
			gap += ours - opt;
		}
		tc_trace_free(&tr);
	}
	printf("uniform: %d traces, MIN == brute force in all; LRU worse in %d\n",
	       uniform, lru_worse);
	printf("variable sizes: %d traces, MIN misses %d more than the optimum in total\n",
	       sized, gap);
	return t_exit();
}
