/* plan_offsets.h - tc_plan_hb_check's GPU ranges for a plan laid out by the
 * planner (TC_PLAN_LAYOUT): its own offsets, as the executor takes them. */
#ifndef TENCACHE_TEST_PLAN_OFFSETS_H
#define TENCACHE_TEST_PLAN_OFFSETS_H

#include <errno.h>

#include "plan/plan.h"

/* ctx: the plan; op UINT32_MAX: the start set */
static inline int plan_alloc(void *ctx, uint32_t t, uint32_t op, uint64_t bytes, uint64_t *off)
{
	const struct tc_plan *pl = ctx;
	int64_t o = op == UINT32_MAX ? pl->start_goff[t] : pl->op_goff[op];

	(void)bytes;
	if (o < 0)
		return -EINVAL;
	*off = (uint64_t)o;
	return 0;
}

/* the space is the plan's: nothing to give back */
static inline int plan_free(void *ctx, uint32_t t, uint64_t off)
{
	(void)ctx; (void)t; (void)off;
	return 0;
}

#endif
