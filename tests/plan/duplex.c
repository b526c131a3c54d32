/* duplex.c - the timing model's duplex links: where H2D and D2H copies run
 * at once they move cfg.duplex_bw together (NVMe reads and writes, one
 * disk, cfg.nvme_duplex_bw: the same rules, checked with an NVMe tier).
 * On a generated OPT-1.3B step at 25% (backward moves parameters in and gradients out at once): a duplex
 * figure at or above the two links' sum changes nothing, a lower one never
 * speeds a step up, and each pair of overlapping copies costs at most the
 * time a half-duplex link (one direction at a time) would add. A disk
 * that moves both ways at once no faster than by taking turns is one
 * queue: a step takes at least its reads alone plus its writes alone. */
#include <errno.h>
#include <stdio.h>

#include "test.h"
#include "plan/plan.h"

static uint64_t step_ns(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
			const struct tc_plan *pl, double duplex, struct tc_sim_result *sr)
{
	struct tc_plan_cfg c = *cfg;

	if (c.nvme_bytes)
		c.nvme_duplex_bw = duplex;
	else
		c.duplex_bw = duplex;
	T_EQ(tc_sim_run(tr, &c, pl, 3, sr), 0);
	return sr->step_ns;
}

/* NVMe read + write: a quarter of the state pinned, the rest staged */
static void nvme_pair(const struct tc_trace *tr)
{
	static const double dup[] = { 12e9, 7e9, 5e9 };
	struct tc_sim_result sr, s0;
	struct tc_plan_cfg cfg;
	struct tc_plan pl;
	uint64_t base, prev;

	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = (tc_trace_bytes(tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(tr, TC_ROLE_PARAM_BF16)) / 4;
	cfg.pinned_bytes = tc_trace_bytes(tr, -1) / 4;
	cfg.nvme_bytes = 2 * tc_trace_bytes(tr, -1);
	T_EQ(tc_plan_build(tr, &cfg, &pl), 0);
	base = prev = step_ns(tr, &cfg, &pl, 0, &s0);
	printf("NVMe independent: %.1f ms (read %.2f GB, write %.2f GB)\n", base / 1e6,
	       s0.link_bytes[TC_LINK_NVME_RD] / 1e9, s0.link_bytes[TC_LINK_NVME_WR] / 1e9);
	T_CHECK(s0.link_bytes[TC_LINK_NVME_RD] && s0.link_bytes[TC_LINK_NVME_WR], "nothing staged");
	for (size_t k = 0; k < sizeof(dup) / sizeof(dup[0]); k++) {
		uint64_t s = step_ns(tr, &cfg, &pl, dup[k], &sr);

		printf("NVMe both at once %4.1f GB/s: %.1f ms\n", dup[k] / 1e9, s / 1e6);
		if (dup[k] >= cfg.bw[TC_LINK_NVME_RD] + cfg.bw[TC_LINK_NVME_WR])
			T_CHECK(s == base, "NVMe duplex at the sum changed the step");
		T_CHECK(s >= prev, "less NVMe duplex bandwidth made the step faster");
		prev = s;
	}
	T_CHECK(prev > base, "no overlap of NVMe reads and writes in the model");
	/* 5 GB/s both at once is no more than taking turns (7 read, 5 write:
	 * 5.83 at equal bytes): one queue, which a lower figure leaves as is */
	T_CHECK(step_ns(tr, &cfg, &pl, 4e9, &sr) == prev,
		"a disk taking turns got slower with a lower both-at-once figure");
	/* a virtual disk's rates (1.8 read, 2.7 write, 2.1 both at once): a
	 * step takes at least its reads alone plus its writes alone */
	cfg.bw[TC_LINK_NVME_RD] = 1.8e9;
	cfg.bw[TC_LINK_NVME_WR] = 2.7e9;
	{
		uint64_t s = step_ns(tr, &cfg, &pl, 2.1e9, &sr);
		double turns = (sr.link_bytes[TC_LINK_NVME_RD] / 1.8e9 +
				sr.link_bytes[TC_LINK_NVME_WR] / 2.7e9) * 1e9;

		printf("NVMe 1.8 read, 2.7 write, 2.1 at once: %.1f ms, reads then writes alone "
		       "%.1f ms\n", s / 1e6, turns / 1e6);
		T_CHECK(s >= turns, "the disk moved more than it can taking turns");
	}
	cfg.nvme_duplex_bw = -1;
	{
		struct tc_plan p2;

		T_EQ(tc_plan_build(tr, &cfg, &p2), -EINVAL);
	}
	tc_plan_free(&pl);
}

int main(void)
{
	static const double dup[] = { 100e9, 85e9, 70e9, 55e9, 50e9 };
	struct tc_sim_result sr, s0;
	struct tc_plan_cfg cfg;
	struct tc_gen_cfg g;
	struct tc_trace tr;
	struct tc_model m;
	struct tc_plan pl;
	uint64_t prev, base, serial;

	tc_gen_cfg_default(&g);
	tc_trace_init(&tr);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	T_EQ(tc_model_trace(&m, &g, &tr), 0);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = (tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16)) / 4;
	cfg.pinned_bytes = UINT64_MAX;
	cfg.duplex_bw = 0;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);

	base = step_ns(&tr, &cfg, &pl, 0, &s0);
	/* the time the copies would take one direction at a time, at most */
	serial = base + (uint64_t)((s0.link_bytes[TC_LINK_H2D] / cfg.bw[TC_LINK_H2D] +
				    s0.link_bytes[TC_LINK_D2H] / cfg.bw[TC_LINK_D2H]) * 1e9);
	printf("independent links: %.1f ms (H2D %.2f GB, D2H %.2f GB)\n", base / 1e6,
	       s0.link_bytes[TC_LINK_H2D] / 1e9, s0.link_bytes[TC_LINK_D2H] / 1e9);
	prev = base;
	for (size_t k = 0; k < sizeof(dup) / sizeof(dup[0]); k++) {
		uint64_t s = step_ns(&tr, &cfg, &pl, dup[k], &sr);

		printf("duplex %5.1f GB/s: %.1f ms\n", dup[k] / 1e9, s / 1e6);
		if (dup[k] >= cfg.bw[TC_LINK_H2D] + cfg.bw[TC_LINK_D2H])
			T_CHECK(s == base, "duplex %.0f GB/s at or above the sum changed the step: %llu ns, not %llu",
				dup[k] / 1e9, (unsigned long long)s, (unsigned long long)base);
		T_CHECK(s >= prev, "less duplex bandwidth made the step faster: %llu < %llu ns",
			(unsigned long long)s, (unsigned long long)prev);
		T_CHECK(s <= serial, "duplex %.0f GB/s slower than one direction at a time", dup[k] / 1e9);
		T_CHECK(sr.link_bytes[TC_LINK_H2D] == s0.link_bytes[TC_LINK_H2D] &&
			sr.link_bytes[TC_LINK_D2H] == s0.link_bytes[TC_LINK_D2H], "bytes moved changed");
		prev = s;
	}
	/* backward's copies do overlap here: 55 GB/s together must cost time */
	T_CHECK(step_ns(&tr, &cfg, &pl, 55e9, &sr) > base, "no overlap of H2D and D2H in the model");
	/* a negative figure is refused */
	cfg.duplex_bw = -1;
	{
		struct tc_plan p2;

		T_EQ(tc_plan_build(&tr, &cfg, &p2), -EINVAL);
	}
	tc_plan_free(&pl);
	nvme_pair(&tr);
	tc_trace_free(&tr);
	return t_exit();
}
