/* cache_replan.c - a plan that meets a fragmented arena mid-step (made to
 * happen with the test hook tc_exec_test_fail, in host mode): the rest of the
 * step runs on demand, the next step plans again with more room and no
 * re-profile (stats: replans, not reprofiles), for the GPU arena and for the
 * pinned pool with NVMe on; once the room would pass half the budget the
 * cache profiles again instead, and that unplanned step gets a plain GPU
 * arena, not the plan's layout. Every value read is checked against what
 * was last written, and the bad inputs of the test hooks (this one and
 * tc_exec_test_count) are refused. A laid-out pinned range found taken
 * (tc_exec_test_taken) stops the plan the same way, and best fit places
 * pinned values from then on. A plan whose NVMe-homed values find no swap
 * space (tc_exec_test_swap_full) is dropped: on demand runs. Each case runs with the executor's own
 * layout and with the planner's (TENCACHE_CACHE_LAYOUT: its residents are
 * cleared for on demand; with either the arena shaped for the plan's size
 * classes makes way for a plain one), then flushes and runs one more step. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/dev.h"	/* TC_DC_NR */
#include "exec/exec.h"	/* tc_exec_test_fail, tc_exec_test_count */
#include "step_gen.h"
#include "test.h"

#define NT	24
#define NOPS	40
#define KiB	1024ULL

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];
/* ops run on demand after a plan stopped, and those of them in the arena
 * shaped for the plan's size classes */
static unsigned od_ops, od_shaped;

/* after each op: count those run on demand after a stop, and in what arena */
static void count_od(struct tencache_cache *c)
{
	if (!c->planned && c->skip_learn) {
		od_ops++;
		od_shaped += !!c->garena_shaped;
	}
}

static int step(struct tencache_cache *c)
{
	return t_run_step(c, ops, NOPS, bytes, version, count_od);
}

static struct tencache_cache *make(struct tencache *tc, int nvme, const char *swap,
				   unsigned flags)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE | flags,
					   .policy = TENCACHE_POLICY_OURS };
	struct tencache_cache *c = NULL;
	uint64_t total = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total;	/* half of it still holds the largest op */
	if (nvme) {	/* a third on the GPU, half pinned: the plan stages */
		p.gpu_budget = total / 3;
		p.pinned_budget = total / 2;
		p.nvme_budget = total * 2;
		p.nvme_path = swap;
	}
	if (tencache_cache_create(tc, &c, &p))
		return NULL;
	if (t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16)) {
		tencache_cache_destroy(c);
		return NULL;
	}
	return c;
}

/*
 * gpu: which arena fails. fails: how many planned steps in a row meet it.
 * The first 8 re-plan (1/16 more room each, up to half the budget); a
 * ninth would pass half, and profiles again.
 */
static void run(struct tencache *tc, int gpu, int nvme, unsigned fails, const char *swap,
		unsigned flags)
{
	struct tencache_cache_stats st;
	struct tencache_cache *c = make(tc, nvme, swap, flags);
	unsigned replans = fails < 8 ? fails : 8, reprofiles = fails > 8;
	unsigned s = 0;

	T_CHECK(c != NULL, "cache setup (gpu %d nvme %d)", gpu, nvme);
	if (!c)
		return;
	/* step 0 profiles, step 1 is planned (its GPU arena laid out for it) */
	for (; s < 2; s++)
		T_EQ(step(c), 0);
	T_EQ(c->garena_shaped, 1);
	for (unsigned f = 0; f < fails; f++, s++) {
		T_EQ(tc_exec_test_fail(c, gpu, 2), 0);
		od_ops = od_shaped = 0;
		T_EQ(step(c), 0);
		/* the rest of it ran on demand in a plain arena, not in the
		 * plan's size classes: all but the op the plan stopped in,
		 * which may hold a tensor there */
		T_CHECK(od_ops > 1 && od_shaped <= 1, "%u ops on demand after the plan "
			"stopped, %u of them in its shaped arena", od_ops, od_shaped);
	}
	/* after a re-profile: one step profiles, in a plain arena (setup.c
	 * tc_exec_plain_gpu), then the next plans again */
	for (unsigned k = 0; k < 2u + reprofiles; k++, s++) {
		T_EQ(step(c), 0);
		if (reprofiles && k == 0)
			T_EQ(c->garena_shaped, 0);
	}
	/* every value home again, the plan loaded (pinned room from any value) */
	T_EQ(tencache_cache_flush(c), 0);
	T_EQ(step(c), 0);
	s++;
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	if (flags & TENCACHE_CACHE_LAYOUT)
		T_CHECK(st.planner_layouts > 0, "the laid-out plan never ran");
	T_EQ(st.replans, replans);
	T_EQ(st.reprofiles, reprofiles);
	/* the failing steps end unplanned, and so does the re-profiled one */
	T_EQ(st.planned_steps, s - 1 - fails - reprofiles);
	printf("gpu %d nvme %d fails %u%s: %llu steps, %llu planned, %llu re-plans, %llu re-profiles\n",
	       gpu, nvme, fails, (flags & TENCACHE_CACHE_LAYOUT) ? " laid out" : "", (unsigned long long)st.steps,
	       (unsigned long long)st.planned_steps, (unsigned long long)st.replans,
	       (unsigned long long)st.reprofiles);
	tencache_cache_destroy(c);
}

/*
 * A laid-out pinned range found taken with no free pending (a faulty
 * layout; tc_exec_test_taken): the plan stops, the step ends on demand with
 * every value intact, and the next plans place pinned values by best fit:
 * no pinned layout after it.
 */
static void run_taken(struct tencache *tc, const char *swap, unsigned flags)
{
	struct tencache_cache_stats st;
	struct tencache_cache *c = make(tc, 1, swap, flags);
	uint64_t layouts;

	T_CHECK(c != NULL, "cache setup (taken)");
	if (!c)
		return;
	for (int s = 0; s < 2; s++)	/* a profiled step, a planned one */
		T_EQ(step(c), 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_CHECK(st.pinned_layouts > 0 && st.planned_steps == 1, "no planned step with "
		"laid-out pinned ranges (%llu layouts, %llu planned)",
		(unsigned long long)st.pinned_layouts, (unsigned long long)st.planned_steps);
	layouts = st.pinned_layouts;
	T_EQ(tc_exec_test_taken(c, 1), 0);
	od_ops = 0;
	T_EQ(step(c), 0);
	T_CHECK(od_ops > 0 && c->playout_failed, "the plan went on past a taken range "
		"(%u ops on demand, playout_failed %d)", od_ops, c->playout_failed);
	for (int s = 0; s < 3; s++)
		T_EQ(step(c), 0);
	T_EQ(tencache_cache_flush(c), 0);
	T_EQ(step(c), 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(st.replans, 1);
	T_EQ(st.reprofiles, 0);
	T_EQ(st.planned_steps, 5);
	T_EQ(st.pinned_layouts, layouts);
	printf("taken pinned range%s: %llu steps, %llu planned, %llu re-plans, pinned layouts %llu\n",
	       (flags & TENCACHE_CACHE_LAYOUT) ? " laid out" : "", (unsigned long long)st.steps,
	       (unsigned long long)st.planned_steps, (unsigned long long)st.replans,
	       (unsigned long long)st.pinned_layouts);
	tencache_cache_destroy(c);
}

/*
 * A new plan whose NVMe-homed values find no swap space for good (the swap
 * left full by on demand; tc_exec_test_swap_full): the plan is dropped with
 * a warning, every step runs on demand with every value intact, and none
 * fails.
 */
static void run_swap_full(struct tencache *tc, const char *swap, unsigned flags)
{
	struct tencache_cache_stats st;
	struct tencache_cache *c = make(tc, 1, swap, flags);

	T_CHECK(c != NULL, "cache setup (swap full)");
	if (!c)
		return;
	T_EQ(step(c), 0);	/* profiled */
	T_EQ(tc_exec_test_swap_full(c, 1), 0);
	od_ops = 0;
	for (int s = 0; s < 3; s++)
		T_EQ(step(c), 0);
	T_CHECK(c->no_plan && !c->planned, "the plan ran without swap space (no_plan %d, planned %d)",
		c->no_plan, c->planned);
	T_EQ(tencache_cache_flush(c), 0);
	T_EQ(step(c), 0);
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(st.planned_steps, 0);
	T_EQ(st.steps, 5);
	printf("swap full for the plan%s: %llu steps, %llu planned\n",
	       (flags & TENCACHE_CACHE_LAYOUT) ? " laid out" : "", (unsigned long long)st.steps,
	       (unsigned long long)st.planned_steps);
	tencache_cache_destroy(c);
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_ERR,
				      .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;
	struct tencache_cache *c;
	char dir[] = "/var/tmp/tencache-replan.XXXXXX", swap[256];

	T_EQ(tencache_init(&tc, &tp), 0);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(swap, sizeof(swap), "%s/swap", dir);
	t_gen_step(7, NT, bytes, 32, NOPS, ops);
	/* the test hooks' bad inputs: no cache; no GPU arena or device yet
	 * (made at freeze); no counters; counted twice */
	T_EQ(tc_exec_test_fail(NULL, 1, 1), -EINVAL);
	T_EQ(tc_exec_test_taken(NULL, 1), -EINVAL);
	T_EQ(tc_exec_test_swap_full(NULL, 1), -EINVAL);
	T_EQ(tc_exec_test_count(NULL, NULL, NULL), -EINVAL);
	{
		struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
						   .gpu_budget = 1 << 20 };
		uint64_t calls[TC_DC_NR] = { 0 };
		void *h;

		T_EQ(tencache_cache_create(tc, &c, &p), 0);
		T_EQ(tc_exec_test_fail(c, 1, 1), -EINVAL);
		T_EQ(tc_exec_test_count(c, calls, NULL), -EBUSY);
		T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_PARAM_FP16), 0);
		T_EQ(tencache_tensor_host(c, 0, &h), 0);	/* freezes */
		T_EQ(tc_exec_test_count(c, NULL, NULL), -EINVAL);
		T_EQ(tc_exec_test_count(c, calls, NULL), 0);
		T_EQ(tc_exec_test_count(c, calls, NULL), -EBUSY);
		tencache_cache_destroy(c);	/* unwraps the counted device */
	}
	for (unsigned lay = 0; lay < 2; lay++) {
		/* the planner's layout, or the executor's own */
		unsigned f = lay ? TENCACHE_CACHE_LAYOUT : TENCACHE_CACHE_NO_LAYOUT;

		run(tc, 1, 0, 1, swap, f);	/* GPU arena: one re-plan */
		if (t_odirect_ok(dir)) {	/* pinned pool with NVMe: two */
			run(tc, 0, 1, 2, swap, f);
			run_taken(tc, swap, f);
			run_swap_full(tc, swap, f);
		} else {
			printf("# %s takes no O_DIRECT: the NVMe case is not run\n", dir);
		}
		run(tc, 1, 0, 9, swap, f);	/* past half the budget: profiles again */
	}
	unlink(swap);
	rmdir(dir);
	tencache_exit(tc);
	return t_exit();
}
