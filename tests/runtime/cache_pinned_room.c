/* cache_pinned_room.c - where a plan's pinned ranges do not lay out in the
 * pool (the pool made to look short with the test hook
 * tc_exec_test_pinned_pad, in host mode with NVMe on), the next plan keeps
 * room out only where the layout reached past it (tencache_cache_stats:
 * plan_pinned_cuts), not over the whole step:
 * - a plan runs laid out in the short pool, with no re-plan mid-step and
 *   every value read the one last written;
 * - it was made with room kept out over part of the step (cuts), and no
 *   room kept out of the whole step where a few cuts do;
 * - at each access its pinned bytes keep within the capacity the planner
 *   was given there (the cache's per-access capacity), and at some access
 *   that is the whole budget: the room is where it was needed;
 * - the hook's bad input is refused. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/exec.h"	/* tc_exec_test_pinned_pad, pcapv */
#include "step_gen.h"
#include "test.h"

#define NT	48
#define NOPS	80

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];

/* The running plan's pinned bytes after each access's ops (its steady
 * step) against the capacity it was planned with there: the accesses over
 * it (0 wanted), and *full those where that capacity is the budget. */
static uint32_t over_cap(const struct tencache_cache *c, uint32_t *full)
{
	const struct tc_plan *pl = &c->plan;
	uint8_t *in = calloc(c->nr, 1);
	uint64_t used = 0;
	uint32_t over = 0;

	*full = 0;
	if (!in)
		return UINT32_MAX;
	for (uint32_t t = 0; t < c->nr; t++)
		if ((in[t] = pl->start_pinned[t] & 1))
			used += c->t[t].bytes;
	for (uint32_t i = 0; i < c->trace.nr_acc; i++) {
		uint64_t cap = c->pcfg.pinned_cap ? c->pcfg.pinned_cap[i] : c->pcfg.pinned_bytes;

		for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
			const struct tc_op *op = &pl->ops[k];

			if ((op->kind == TC_OP_STAGE_IN || op->kind == TC_OP_PALLOC) && !in[op->tensor]) {
				in[op->tensor] = 1;
				used += c->t[op->tensor].bytes;
			} else if (op->kind == TC_OP_PDROP && in[op->tensor]) {
				in[op->tensor] = 0;
				used -= c->t[op->tensor].bytes;
			}
		}
		over += used > cap;
		*full += cap == c->p.pinned_budget;
	}
	free(in);
	return over;
}

/* One cache with each staged range laid out pad bytes larger; 1: its plan
 * kept pinned room out of some stretch of the step (checked), 0: the
 * layout fit without (nothing to check), -1: it failed (counted). */
static int room(struct tencache *tc, const char *swap, uint64_t pad)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE | TENCACHE_CACHE_NO_LAYOUT,
					   .policy = TENCACHE_POLICY_OURS, .nvme_path = swap };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	uint64_t total = 0;
	uint32_t over, full = 0;
	int ret = 0, fails = t_failures;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	p.pinned_budget = total / 2;
	p.nvme_budget = total * 2;
	memset(version, 0, sizeof(version));
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (!c)
		return -1;
	T_EQ(tc_exec_test_pinned_pad(c, 4096 + 1), -EINVAL);	/* not whole pages */
	T_EQ(tc_exec_test_pinned_pad(c, pad), 0);
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	for (int s = 0; s < 6 && !ret; s++)	/* values checked as read */
		ret = t_run_step(c, ops, NOPS, bytes, version, NULL);
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	over = over_cap(c, &full);
	printf("ranges %llu KiB larger: %llu cuts, %llu B kept out of the whole step; plan made for %.1f%% of the pinned budget on average, the whole of it at %u of %u accesses, over its capacity at %u (%s); pinned layouts %llu, replans %llu\n",
	       (unsigned long long)pad >> 10, (unsigned long long)st.plan_pinned_cuts,
	       (unsigned long long)c->pfrag_slack, 100.0 * st.plan_pinned_bytes / p.pinned_budget,
	       full, c->trace.nr_acc, over, c->plan.st.reconciled ? "no fixed point" : "cyclic",
	       (unsigned long long)st.pinned_layouts, (unsigned long long)st.replans);
	T_CHECK(c->have_plan && c->op_poff, "no plan laid out in the pool");
	T_EQ(st.replans, 0);
	T_EQ(st.reprofiles, 0);
	if (!st.plan_pinned_cuts || t_failures > fails) {
		tencache_cache_destroy(c);
		return t_failures > fails ? -1 : 0;
	}
	T_EQ(c->pfrag_slack, 0);
	/* a plan without a fixed point starts with fix-ups the capacity
	 * does not bound (the budget, checked by tc_plan_check, does) */
	if (!c->plan.st.reconciled)
		T_EQ(over, 0);
	T_CHECK(full > 0 && full < c->trace.nr_acc, "the whole budget at %u of %u accesses", full,
		c->trace.nr_acc);
	T_CHECK(st.plan_pinned_bytes < p.pinned_budget, "made for %llu B on average, the budget",
		(unsigned long long)st.plan_pinned_bytes);
	tencache_cache_destroy(c);
	return 1;
}

int main(void)
{
	char dir[] = "/var/tmp/tencache-proom.XXXXXX", swap[256];
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_ERR,
				      .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;
	int r = 0;

	T_EQ(tc_exec_test_pinned_pad(NULL, 4096), -EINVAL);
	if ((r = t_swap_dir(dir, swap, sizeof(swap))))
		return r;
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	t_gen_step(11, NT, bytes, 64, NOPS, ops);
	/* larger pads until the layout needs room (the profiled step's
	 * timing, and with it the plan, varies from run to run) */
	for (uint64_t pad = 64 << 10; pad <= 256 << 10 && !r; pad += 16 << 10)
		r = room(tc, swap, pad);
	T_CHECK(r == 1, "no pad up to 256 KiB made the layout keep room out of a stretch");
	T_EQ(tc_exec_test_pinned_pad(NULL, 4096), -EINVAL);
	unlink(swap);
	tencache_exit(tc);
	rmdir(dir);
	return t_exit();
}
