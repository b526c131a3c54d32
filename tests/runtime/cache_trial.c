/* cache_trial.c - the timed pick between the planner's laid-out plan and the
 * executor's own (setup.c, trial_pick): each runs for two steps, the second
 * timed, and the faster stays. Host mode, a random step (step_gen.h); the
 * test hook tc_exec_test_trial times them wherever both exist and makes the
 * one it is told the slower by a second, so either outcome is checked:
 *  - plan_trying is 1 while they run and 0 after, plan_trials counts 1;
 *  - both ran (planner_layouts), and the one left running is the faster,
 *    for the steps after too, with no re-plan or re-profile;
 *  - every value read is the one last written, across both switches;
 *  - the hook's bad input is refused;
 *  - with NVMe, where the second re-plans for pinned room (the hook
 *    tc_exec_test_place_fail) and the first wins, the first runs again in
 *    the room it was timed in: the same plan, not one with less room.
 * Without the hook a model within 5% starts the same pick (tools/replay's
 * host-mode runs show it); that margin is the model's, not tested here. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/exec.h"	/* tc_exec_test_trial, laid_out */
#include "step_gen.h"
#include "test.h"

#define NT	24
#define NOPS	40
#define SEC	1000000000ULL

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];

static int step(struct tencache_cache *c)
{
	return t_run_step(c, ops, NOPS, bytes, version, NULL);
}

/* laid_slow: the laid-out plan is timed a second slower, else the own plan. */
static void pick(struct tencache *tc, int laid_slow)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .policy = TENCACHE_POLICY_OURS };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	uint64_t total = 0, trying = 0;
	int ret = 0, s;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (!c)
		return;
	T_EQ(tc_exec_test_trial(c, laid_slow ? 0 : SEC, laid_slow ? SEC : 0), 0);
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	/* profile, then two steps each (a third planning when the first wins) */
	for (s = 0; s < 10 && !ret; s++) {
		ret = step(c);
		T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
		trying += st.plan_trying;
		if (!ret && s > 0 && !st.plan_trying)
			break;
	}
	T_EQ(ret, 0);
	printf("laid-out plan %s: decided after %d steps, %llu of them timing; the %s runs\n",
	       laid_slow ? "slower" : "faster", s + 1, (unsigned long long)trying,
	       c->laid_out ? "laid-out one" : "executor's");
	T_CHECK(trying >= 3, "%llu steps timing the two plans, not 3 or more",
		(unsigned long long)trying);
	T_EQ(st.plan_trials, 1);
	T_CHECK(st.planner_layouts >= 1, "the laid-out plan never ran");
	T_EQ(c->laid_out, !laid_slow);
	for (int k = 0; k < 3 && !ret; k++)	/* and it stays */
		ret = step(c);
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(c->laid_out, !laid_slow);
	T_EQ(st.plan_trying, 0);
	T_EQ(st.plan_trials, 1);
	T_EQ(st.replans, 0);
	T_EQ(st.reprofiles, 0);
	tencache_cache_destroy(c);
}

/*
 * NVMe on, the first candidate made the faster whichever it is; the
 * second's first pinned layout fails, so it plans again with more room.
 */
static void pick_room(struct tencache *tc, const char *swap)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .policy = TENCACHE_POLICY_OURS, .nvme_path = swap };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	uint64_t total = 0, room = 0, ops1 = 0, sim1 = 0;
	int ret = 0, s, first = -1, armed = 0, grew = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	p.pinned_budget = total / 2;
	p.nvme_budget = total * 2;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	if (!c)
		return;
	T_EQ(tc_exec_test_trial(c, 0, 0), 0);
	T_EQ(t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16), 0);
	for (s = 0; s < 12 && !ret; s++) {
		ret = step(c);
		if (c->trial == TC_TRIAL_FIRST && first < 0) {
			first = c->trial_first;
			T_EQ(tc_exec_test_trial(c, first ? SEC : 0, first ? 0 : SEC), 0);
		}
		if (c->trial == TC_TRIAL_FIRST && !armed) {
			/* the first's plan is in; the next layout is the second's */
			room = c->pfrag_slack;
			ops1 = c->plan.nr_ops;
			sim1 = c->plan.st.sim_step_ns;
			T_EQ(tc_exec_test_place_fail(c, 1), 0);
			armed = 1;
		}
		if (c->trial == TC_TRIAL_SECOND && c->pfrag_slack > room)
			grew = 1;
		T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
		if (!ret && c->trial == TC_TRIAL_DONE)
			break;
	}
	T_EQ(ret, 0);
	T_CHECK(first >= 0, "no trial started");
	T_CHECK(grew, "the second candidate did not plan again with more pinned room");
	T_EQ(c->trial, TC_TRIAL_DONE);
	T_EQ(c->laid_out, first);
	printf("NVMe, the %s first: pinned room %llu B timed, %llu B after; plan %llu ops, %.3f ms modelled, then %u ops, %.3f ms\n",
	       first ? "laid-out plan" : "executor's plan", (unsigned long long)room,
	       (unsigned long long)c->pfrag_slack, (unsigned long long)ops1, sim1 / 1e6,
	       c->plan.nr_ops, c->plan.st.sim_step_ns / 1e6);
	T_EQ(c->pfrag_slack, room);
	T_EQ(c->plan.nr_ops, ops1);
	T_EQ(c->plan.st.sim_step_ns, sim1);
	for (int k = 0; k < 2 && !ret; k++)	/* and it runs */
		ret = step(c);
	T_EQ(ret, 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(st.plan_trials, 1);
	T_EQ(st.reprofiles, 0);
	tencache_cache_destroy(c);
}

int main(void)
{
	char dir[] = "/var/tmp/tencache-trial.XXXXXX", swap[256];
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_ERR,
				      .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;

	T_EQ(tc_exec_test_trial(NULL, 0, 0), -EINVAL);
	T_EQ(tc_exec_test_place_fail(NULL, 1), -EINVAL);
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	t_gen_step(7, NT, bytes, 32, NOPS, ops);
	pick(tc, 1);
	memset(version, 0, sizeof(version));
	pick(tc, 0);
	if (mkdtemp(dir)) {
		snprintf(swap, sizeof(swap), "%s/swap", dir);
		if (t_odirect_ok(dir)) {
			memset(version, 0, sizeof(version));
			pick_room(tc, swap);
		} else {
			printf("# %s takes no O_DIRECT: the NVMe case is not run\n", dir);
		}
		unlink(swap);
		rmdir(dir);
	} else {
		perror("mkdtemp");
		t_failures++;
	}
	tencache_exit(tc);
	return t_exit();
}
