/* cache_order.c - the executor's stream order (cache.c): work on a stream
 * completes in order, so a device event found done proves every one recorded
 * before it on its stream done, and the cache queries only what that does not
 * answer. Host mode, a planned random step (step_gen.h), the device calls
 * counted (tc_exec_test_count):
 *  - after a drain mid-step (every stream synced), an acquire that waits for
 *    copies issued before the drain makes no query, where each such copy
 *    cost one before (its event was never seen done);
 *  - with every copy finished before each acquire (the streams synced
 *    behind the cache's back), the step's event instances the cache knows
 *    done are at least 1.5 times the queries and syncs it made (about 2.2:
 *    83 from 33-42): without the inference each one costs a call of its
 *    own, and without the probe of a newer instance most do (82 from 72);
 *  - what the cache knows done is done (each such event queried, uncounted,
 *    after every call), with slow copies (tc_exec_test_lag) too, where a
 *    wrong inference would skip a wait, and every instance seen done
 *    advances its stream's known-done point; every value read is the one
 *    last written (plain host mode: the caller's thread waits for copies);
 *  - the release that ends an op issues the next access's copies (issue_at),
 *    batched: the copies of one device call share one event record (their
 *    events name no more records than there were calls, and some share). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tencache.h"
#include "exec/dev.h"	/* TC_DC_*, the counted ops */
#include "exec/exec.h"	/* the cache's state, tc_exec_test_count, tc_exec_test_lag */
#include "step_gen.h"
#include "test.h"

#define NT	24
#define NOPS	40
#define STEPS	4

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];
static uint64_t rel_shared;	/* copies whose event is another's record */

/* the backend under the counting wrapper: calls that the counters miss */
static const struct tc_dev_ops *raw(struct tencache_cache *c)
{
	return c->dev->counted ? c->dev->counted : c->dev->ops;
}

/* the device event of e's latest instance: a batch's shared record or its own */
static void *handle(const struct tc_xev *e)
{
	return e->bev ? e->bev->dev : e->dev;
}

static int known_done(struct tencache_cache *c, struct tc_xev *e)
{
	return e->dev && e->gen && (e->done_gen == e->gen ||
		(e->rec_o && e->rec_seq <= c->sorder[e->rec_o - 1].done_seq));
}

/* An instance seen done whose stream's known-done point is short of it. */
static int unshared(struct tencache_cache *c, struct tc_xev *e)
{
	return e->dev && e->gen && e->done_gen == e->gen && e->rec_o &&
	       e->rec_seq > c->sorder[e->rec_o - 1].done_seq;
}

/*
 * Every device event the cache knows done is done, and each one seen done
 * tells its stream (what proves the older instances there done too).
 */
static int check_sound(struct tencache_cache *c, const char *where)
{
	uint32_t n = 0, u = 0;

	for (uint32_t k = 0; c->opev && k < c->plan.nr_ops; k++)
		u += unshared(c, &c->opev[k]);
	for (uint32_t i = 0; c->accev && i < c->nacc_ev; i++)
		u += unshared(c, &c->accev[i]);
	for (uint32_t i = 0; i < c->nr; i++)
		u += unshared(c, &c->t[i].ready);
	T_CHECK(u == 0, "%s: %u events seen done leave their stream's order unknown", where, u);

	for (uint32_t k = 0; c->opev && k < c->plan.nr_ops; k++)
		if (known_done(c, &c->opev[k]) && raw(c)->query(c->dev, handle(&c->opev[k])) != 1)
			n++;
	for (uint32_t i = 0; c->accev && i < c->nacc_ev; i++)
		if (known_done(c, &c->accev[i]) && raw(c)->query(c->dev, handle(&c->accev[i])) != 1)
			n++;
	for (uint32_t i = 0; i < c->nr; i++)
		if (known_done(c, &c->t[i].ready) && raw(c)->query(c->dev, handle(&c->t[i].ready)) != 1)
			n++;
	T_CHECK(n == 0, "%s: %u events taken for done are pending", where, n);
	return n || u ? -EIO : 0;
}

/* Instances recorded since snap_gens that the cache knows done. */
static uint32_t *gens;
static int snap_gens(struct tencache_cache *c)
{
	uint32_t *g = realloc(gens, (c->plan.nr_ops + c->nacc_ev + 1) * sizeof(*gens));

	if (!g)
		return -ENOMEM;
	gens = g;
	for (uint32_t k = 0; k < c->plan.nr_ops; k++)
		gens[k] = c->opev[k].gen;
	for (uint32_t i = 0; i < c->nacc_ev; i++)
		gens[c->plan.nr_ops + i] = c->accev[i].gen;
	return 0;
}

static uint32_t known_since(struct tencache_cache *c)
{
	uint32_t n = 0;

	for (uint32_t k = 0; k < c->plan.nr_ops; k++)
		n += c->opev[k].gen != gens[k] && known_done(c, &c->opev[k]);
	for (uint32_t i = 0; i < c->nacc_ev; i++)
		n += c->accev[i].gen != gens[c->plan.nr_ops + i] && known_done(c, &c->accev[i]);
	return n;
}

/* Whether acquire i suits the drain check; *old: the queries it cost before. */
static int drain_point(struct tencache_cache *c, uint32_t i, uint32_t *old)
{
	const struct tc_plan *pl = &c->plan;

	*old = 0;
	if (c->trace.acc[i].flags & TC_ACC_HOST)
		return 0;
	/* it records nothing new that a poll could query */
	for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++)
		if (pl->ops[k].kind != TC_OP_DROP && pl->ops[k].kind != TC_OP_PDROP)
			return 0;
	for (uint32_t w = pl->wait_first[i]; w < pl->wait_first[i + 1]; w++) {
		uint32_t k = pl->wait_ops[w];
		struct tc_xev *e = &c->opev[k];

		if (pl->ops[k].kind != TC_OP_FETCH && pl->ops[k].kind != TC_OP_WRITEBACK)
			continue;
		/* a copy whose latest instance was never seen done: the
		 * old xev_done queried it */
		if (e->dev && e->gen && e->done_gen != e->gen)
			(*old)++;
	}
	return *old > 0;
}

/*
 * The copies issued at access i went out in ncalls device calls: their
 * events name at most one record per call (a batch's copies share one), one
 * each without batches. Adds the copies sharing another's to rel_shared.
 */
static int shared_records(struct tencache_cache *c, uint32_t i, uint64_t ncalls)
{
	const void *h[64];
	uint32_t n = 0, copies = 0;

	if (!c->planned || i >= c->trace.nr_acc)
		return 0;

	for (uint32_t k = c->plan.op_first[i]; k < c->plan.op_first[i + 1]; k++) {
		const struct tc_xev *e = &c->opev[k];
		uint32_t j;

		if ((c->plan.ops[k].kind != TC_OP_FETCH && c->plan.ops[k].kind != TC_OP_WRITEBACK) ||
		    e->gate)
			continue;	/* not a copy, or held for its host op */
		copies++;
		for (j = 0; j < n && h[j] != handle(e); j++)
			;
		if (j == n && n < 64)
			h[n++] = handle(e);
	}
	T_CHECK(n <= ncalls, "access %u: %u copies in %llu calls name %u event records",
		i, copies, (unsigned long long)ncalls, n);
	rel_shared += copies - n;
	return n <= ncalls ? 0 : -EIO;
}

/* Copies among the plan's ops at access i (none past the step's end). */
static uint32_t plan_copies_at(struct tencache_cache *c, uint32_t i)
{
	uint32_t n = 0;

	if (i >= c->trace.nr_acc)
		return 0;
	for (uint32_t k = c->plan.op_first[i]; k < c->plan.op_first[i + 1]; k++)
		n += c->plan.ops[k].kind == TC_OP_FETCH || c->plan.ops[k].kind == TC_OP_WRITEBACK;
	return n;
}

/*
 * One step. mode 0: plain; 1: drain before the first acquire of an op that
 * suits drain_point and count its queries; 2: sync the copy streams before
 * every acquire (uncounted) and compare known-done instances with calls.
 * sound: check_sound after every call; values: check what is read.
 */
static int no_batch;		/* the caches made: TENCACHE_CACHE_NO_BATCH */
static uint64_t rel_calls;	/* copy calls of the releases counted */

static int step(struct tencache_cache *c, const uint64_t *calls, int mode, int sound,
		int values, int *drained, uint32_t *rel_copies)
{
	uint64_t q0 = calls[TC_DC_QUERY], s0 = calls[TC_DC_SYNC];
	uint32_t acc = 0;
	int ret = tencache_step_begin(c);

	if (!ret && mode == 2 && c->planned)
		ret = snap_gens(c);
	for (int oi = 0; oi < NOPS && !ret; oi++) {
		const struct t_op *op = &ops[oi];
		void *p[3];

		for (int k = 0; k < op->n && !ret; k++, acc++) {
			uint32_t old = 0;
			uint64_t q = calls[TC_DC_QUERY];
			int dp = mode == 1 && !*drained && k == 0 && c->planned &&
				 drain_point(c, acc, &old);

			if (dp) {
				ret = tc_exec_drain(c);
				q = calls[TC_DC_QUERY];
			}
			if (mode == 2 && c->planned) {
				ret = ret ?: raw(c)->stream_sync(c->dev, c->h2d);
				ret = ret ?: raw(c)->stream_sync(c->dev, c->d2h);
			}
			ret = ret ?: tencache_acquire(c, op->a[k].id, op->a[k].flags |
						(op->host ? TENCACHE_ACQ_HOST : 0), NULL, &p[k]);
			if (dp && !ret) {
				printf("acquire %u after a drain: %llu queries (%u before the inference)\n",
				       acc, (unsigned long long)(calls[TC_DC_QUERY] - q), old);
				T_EQ(calls[TC_DC_QUERY] - q, 0);
				*drained = 1;
			}
			if (!ret && sound)
				ret = check_sound(c, "acquire");
		}
		if (!ret && values && t_op_values(op, oi, p, bytes, version))
			return -EIO;
		for (int k = 0; k < op->n && !ret; k++) {
			uint64_t c0 = calls[TC_DC_COPY];
			uint32_t at = c->pos;
			uint32_t want = k == 0 && c->planned ? plan_copies_at(c, c->pos) : 0;

			ret = tencache_release(c, op->a[k].id, NULL, 0);
			/* the op's end issues the next access's copies (issue_at):
			 * one device call each, or batched: at least one call
			 * for any, at most one each */
			if (!ret && k == 0 && c->planned) {
				if (no_batch)
					T_EQ(calls[TC_DC_COPY] - c0, want);
				else
					T_CHECK(calls[TC_DC_COPY] - c0 <= want &&
						(calls[TC_DC_COPY] - c0 > 0) == (want > 0),
						"release: %llu copy calls for %u copies",
						(unsigned long long)(calls[TC_DC_COPY] - c0), want);
				*rel_copies += want;
				rel_calls += calls[TC_DC_COPY] - c0;
				ret = shared_records(c, at, calls[TC_DC_COPY] - c0);
			}
			if (!ret && sound)
				ret = check_sound(c, "release");
		}
	}
	if (!ret && mode == 2 && c->planned) {
		uint64_t q = calls[TC_DC_QUERY] - q0, s = calls[TC_DC_SYNC] - s0;
		uint32_t known = known_since(c);

		printf("copies done before each acquire: %u instances known done, %llu queries + %llu syncs\n",
		       known, (unsigned long long)q, (unsigned long long)s);
		/* without the inference each costs a query or sync of its own;
		 * with it, a probe of a newer instance on a stream settles the
		 * older ones there */
		T_CHECK(2 * known >= 3 * (q + s), "%u instances known done from %llu calls, not 1.5 times as many",
			known, (unsigned long long)(q + s));
	}
	return ret ?: tencache_step_end(c);
}

static struct tencache_cache *make(struct tencache *tc, uint64_t *calls, uint64_t copy_ns)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE |
						    (no_batch ? TENCACHE_CACHE_NO_BATCH : 0),
					   .policy = TENCACHE_POLICY_OURS };
	struct tencache_cache *c = NULL;
	uint64_t total = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;	/* copies in and out each step */
	if (tencache_cache_create(tc, &c, &p))
		return NULL;
	if (copy_ns && tc_exec_test_lag(c, 0, copy_ns))
		goto fail;
	if (t_register_fill(c, NT, bytes, version, TENCACHE_ROLE_PARAM_FP16))
		goto fail;
	if (tc_exec_test_count(c, calls, NULL))
		goto fail;
	return c;
fail:
	tencache_cache_destroy(c);
	return NULL;
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_ERR,
				      .pool_backend = TENCACHE_POOL_THP };
	uint64_t calls[TC_DC_NR] = { 0 };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	struct tencache *tc;
	uint32_t rel_copies = 0;
	int drained = 0;

	T_EQ(tencache_init(&tc, &tp), 0);
	t_gen_step(11, NT, bytes, 32, NOPS, ops);

	c = make(tc, calls, 0);
	T_CHECK(c != NULL, "cache setup");
	if (!c)
		return t_exit();
	/* step 0 profiles; then planned steps */
	for (int s = 0; s < STEPS && !t_failures; s++) {
		int ret = step(c, calls, s < 2 ? 0 : s == 2 ? 1 : 2, 1, 1, &drained, &rel_copies);

		T_EQ(ret, 0);
	}
	T_CHECK(drained, "no acquire after step 0 waits only for older copies");
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(st.planned_steps, STEPS - 1);
	{	/* an older caller's shorter struct, a newer's longer one */
		struct { struct tencache_cache_stats s; uint64_t more[4]; } big;
		uint64_t small[2] = { 0, 0xdeadbeef };

		T_EQ(tencache_cache_stats(c, (struct tencache_cache_stats *)small, 8), 0);
		T_EQ(small[0], st.steps);
		T_EQ(small[1], 0xdeadbeef);	/* nothing past size written */
		memset(&big, 0xff, sizeof(big));
		T_EQ(tencache_cache_stats(c, &big.s, sizeof(big)), 0);
		T_EQ(big.s.planned_steps, st.planned_steps);
		T_EQ(big.more[0] | big.more[3], 0);	/* zeros past the library's */
		T_EQ(tencache_cache_stats(c, &st, 0), -EINVAL);
		T_EQ(tencache_cache_stats(c, NULL, sizeof(st)), -EINVAL);
		T_EQ(tencache_cache_stats(NULL, &st, sizeof(st)), -EINVAL);
	}
	T_CHECK(calls[TC_DC_COPY] > 0, "the plan copies");
	printf("copies issued by the releases that end ops: %u, in %llu device calls (batched)\n",
	       rel_copies, (unsigned long long)rel_calls);
	T_CHECK(rel_copies > 0, "no op's release issued the next access's copies");
	/* batches: some of a release's copies go out as one call */
	T_CHECK(rel_calls < rel_copies, "%llu copy calls for %u copies: not batched",
		(unsigned long long)rel_calls, rel_copies);
	printf("copies that share another's event record: %llu\n", (unsigned long long)rel_shared);
	T_CHECK(rel_shared > 0, "no batch shares an event record");
	tencache_cache_destroy(c);

	/* the same, one device call per copy (TENCACHE_CACHE_NO_BATCH) */
	no_batch = 1;
	rel_copies = 0;
	rel_calls = 0;
	rel_shared = 0;
	drained = 0;
	memset(calls, 0, sizeof(calls));
	c = make(tc, calls, 0);
	T_CHECK(c != NULL, "cache setup (no batches)");
	for (int s = 0; c && s < STEPS && !t_failures; s++) {
		int ret = step(c, calls, s < 2 ? 0 : s == 2 ? 1 : 2, 1, 1, &drained, &rel_copies);

		T_EQ(ret, 0);
	}
	T_EQ(rel_calls, rel_copies);
	T_EQ(rel_shared, 0);
	T_CHECK(rel_copies > 0, "no op's release issued the next access's copies (no batches)");
	if (c)
		tencache_cache_destroy(c);
	no_batch = 0;

	/*
	 * Slow copies: a wrong inference takes pending copies for done. (Not
	 * with the issuer: its query answers what it has seen complete, which
	 * may trail the stream's order, so it cannot judge; cache_lag checks
	 * the values read with it.)
	 */
	memset(calls, 0, sizeof(calls));
	c = make(tc, calls, 2000000);
	T_CHECK(c != NULL, "cache setup (slow copies)");
	if (c) {
		for (int s = 0; s < 3 && !t_failures; s++) {
			int ret = step(c, calls, 0, 1, 0, &drained, &rel_copies);

			T_EQ(ret, 0);
		}
		T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
		T_EQ(st.planned_steps, 2);
		tencache_cache_destroy(c);
	}
	free(gens);
	tencache_exit(tc);
	return t_exit();
}
