/* cache_reject.c - a plan that fails its schedule check (a planner bug) is
 * never run (setup.c plan_fit, plan_laid_out): with one of ours' two plans
 * refused the other runs, with both the cache runs on demand, and each
 * refusal is counted (plan_rejects). The laid-out plan is checked both on
 * its own thread and on the caller's, as where no thread starts: built
 * there, its refusal once went uncounted. Host mode, a random step
 * (step_gen.h); the hook tc_exec_test_reject makes the checks fail. Every
 * value read must be the one last written, planned or not. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tencache.h"
#include "exec/exec.h"	/* tc_exec_test_reject, laid_out, no_plan */
#include "step_gen.h"
#include "test.h"

#define NT	24
#define NOPS	40
#define STEPS	6

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];

static void run(struct tencache *tc, unsigned flags)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .policy = TENCACHE_POLICY_OURS };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	unsigned own = !!(flags & TC_TEST_REJECT_OWN), laid = !!(flags & TC_TEST_REJECT_LAID);
	uint64_t total = 0;
	int ret = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	memset(version, 0, sizeof(version));
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (!c)
		return;
	T_EQ(tc_exec_test_reject(c, flags), 0);
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	for (int s = 0; s < STEPS && !ret; s++)
		ret = t_run_step(c, ops, NOPS, bytes, version, NULL);
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	printf("refused:%s%s%s: %llu refusals, %llu planned steps, %s\n",
	       own ? " own" : "", laid ? " laid-out" : "",
	       (flags & TC_TEST_LAID_INLINE) ? " (laid-out on the caller's thread)" : "",
	       (unsigned long long)st.plan_rejects, (unsigned long long)st.planned_steps,
	       c->no_plan ? "on demand" : c->laid_out ? "the laid-out plan runs" :
	       "the executor's plan runs");
	T_CHECK(st.plan_rejects >= own + laid, "%llu refusals counted, not %u",
		(unsigned long long)st.plan_rejects, own + laid);
	if (own && laid) {
		T_CHECK(c->no_plan && !st.planned_steps, "a refused plan ran (%llu planned steps)",
			(unsigned long long)st.planned_steps);
	} else {
		T_CHECK(st.planned_steps >= 2, "%llu planned steps with one plan left",
			(unsigned long long)st.planned_steps);
		T_EQ(c->laid_out, own);
	}
	tencache_cache_destroy(c);
}

int main(void)
{
	static const unsigned cases[] = {
		TC_TEST_REJECT_OWN,
		TC_TEST_REJECT_LAID,
		TC_TEST_REJECT_LAID | TC_TEST_LAID_INLINE,
		TC_TEST_REJECT_OWN | TC_TEST_REJECT_LAID,
		TC_TEST_REJECT_OWN | TC_TEST_REJECT_LAID | TC_TEST_LAID_INLINE,
	};
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_ERR,
				      .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;

	T_EQ(tc_exec_test_reject(NULL, 0), -EINVAL);
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	{
		struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
						   .gpu_budget = 1 << 20 };
		struct tencache_cache *c = NULL;

		T_EQ(tencache_cache_create(tc, &c, &p), 0);
		T_EQ(tc_exec_test_reject(c, 0x8), -EINVAL);	/* an unknown bit */
		tencache_cache_destroy(c);
	}
	t_gen_step(11, NT, bytes, 32, NOPS, ops);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++)
		run(tc, cases[i]);
	tencache_exit(tc);
	return t_exit();
}
