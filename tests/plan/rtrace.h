/* rtrace.h - seeded random step traces for the planner tests. */
#ifndef TENCACHE_TEST_RTRACE_H
#define TENCACHE_TEST_RTRACE_H

#include <stdint.h>
#include <string.h>

#include "plan/plan.h"

static inline uint32_t rt_next(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)((z ^ (z >> 31)) >> 32);
}

struct rt_opts {
	uint32_t tensors, ops, max_per_op;
	uint64_t min_bytes, max_bytes;	/* equal: uniform sizes */
	unsigned write_pct;		/* share of accesses that write */
	unsigned wonly_pct;		/* of those, share that only write */
	unsigned host_pct;		/* share of ops that run on the host */
};

/* Builds a random trace; every op has 1..max_per_op distinct tensors. */
static inline int rt_build(struct tc_trace *tr, const struct rt_opts *o, uint64_t seed)
{
	uint64_t s = seed;
	int ret = tc_trace_init(tr);

	for (uint32_t t = 0; t < o->tensors && !ret; t++) {
		uint64_t b = o->min_bytes;

		if (o->max_bytes > o->min_bytes)
			b += rt_next(&s) % (o->max_bytes - o->min_bytes + 1);
		ret = tc_trace_add_tensor(tr, b, TC_ROLE_PARAM_FP16);
		ret = ret < 0 ? ret : 0;
	}
	for (uint32_t op = 0; op < o->ops && !ret; op++) {
		uint32_t k = 1 + rt_next(&s) % o->max_per_op, used[16] = { 0 }, nu = 0;
		unsigned host = rt_next(&s) % 100 < o->host_pct ? TC_ACC_HOST : 0;

		if (k > o->tensors)
			k = o->tensors;
		while (nu < k && !ret) {
			uint32_t t = rt_next(&s) % o->tensors, dup = 0;
			unsigned f = TC_ACC_READ;

			for (uint32_t j = 0; j < nu; j++)
				dup |= used[j] == t;
			if (dup)
				continue;
			used[nu++] = t;
			if (rt_next(&s) % 100 < o->write_pct)
				f = rt_next(&s) % 100 < o->wonly_pct ? TC_ACC_WRITE
								     : TC_ACC_READ | TC_ACC_WRITE;
			if (nu == k)
				f |= TC_ACC_END;
			ret = tc_trace_add_access(tr, t, TC_PHASE_FWD, f | host,
						  nu == k ? 1000 + rt_next(&s) % 100000 : 0);
		}
	}
	return ret;
}

#endif
