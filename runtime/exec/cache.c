/*
 * cache.c - the tensor cache: the trainer API of tencache.h over the
 * profiler (warm-up steps run on demand while the order is recorded), the
 * planner (runtime/plan) and the executor that walks the plan's tables.
 *
 * Tiers: "GPU" (the device region, an arena over it), pinned (a pool) and
 * NVMe (a swap file, with the staging backend). Each tensor keeps the set of
 * tiers that hold its newest value (valid) and where its space is.
 *
 * Planned mode: at acquire i the ops of access i are issued. Copies go on
 * the H2D / D2H streams after waiting for their dependencies; NVMe staging
 * runs on worker threads; frees (DROP/PDROP) are made at once, and what
 * takes the space next waits for its last users. An acquire makes the
 * caller's stream wait for the copies that made the value valid (the
 * plan's wait lists). An access that does not match the learnt order ends
 * planned mode for the step: the cache quiesces, counts a re-profile, and
 * the next steps are profiled again. A
 * plan that meets a fragmented arena also ends for the step, and the next
 * step plans again with more room (a re-plan: the order is still known).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/dev.h"
#include "exec/exec.h"

static int ev_is_dev(const struct tc_xev *e)
{
	return e->dev != NULL;
}

/* The device event that holds e's latest instance. */
static void *xev_h(const struct tc_xev *e)
{
	return e->bev ? e->bev->dev : e->dev;
}

/* ---- memory: GPU arena, pinned pool, NVMe swap ------------------------- */

static void *gptr(struct tencache_cache *c, int64_t off)
{
	return (char *)c->dev->base + off;
}

static void *pptr(struct tencache_cache *c, int64_t off)
{
	return (char *)c->pbase + off;
}


static int galloc(struct tencache_cache *c, struct tc_tstate *t);
static int galloc_at(struct tencache_cache *c, struct tc_tstate *t, int64_t off);

int tc_exec_galloc(struct tencache_cache *c, uint32_t id)
{
	if (c->start_goff)	/* a static layout's start set */
		return galloc_at(c, &c->t[id], c->start_goff[id]);
	return galloc(c, &c->t[id]);
}

static int palloc(struct tencache_cache *c, struct tc_tstate *t);
static int palloc_at(struct tencache_cache *c, struct tc_tstate *t, int64_t off);

int tc_exec_palloc(struct tencache_cache *c, uint32_t id)
{
	return palloc(c, &c->t[id]);
}

int tc_exec_palloc_start(struct tencache_cache *c, uint32_t id)
{
	return c->start_poff ? palloc_at(c, &c->t[id], c->start_poff[id]) : 0;
}

/*
 * Space in the GPU arena. Planned mode never waits here: the plan's
 * allocation sequence was replayed on this arena before it was accepted
 * (setup.c), and space freed by DROP is reused in the same order.
 */
static int galloc(struct tencache_cache *c, struct tc_tstate *t)
{
	uint64_t off;
	int ret;

	if (t->goff >= 0)
		return 0;
	ret = tencache_arena_alloc(c->garena, t->bytes, &off);
	if (ret) {
		struct tencache_arena_stats as = { 0 };

		tencache_arena_stats(c->garena, &as);
		tc_err(c->tc, "cache: no GPU space for %llu bytes at access %u (budget %llu, in use %llu, largest free %llu)",
		       (unsigned long long)t->bytes, c->pos, (unsigned long long)c->p.gpu_budget,
		       (unsigned long long)as.used, (unsigned long long)as.largest_free);
		return ret;
	}
	t->goff = off;
	return 0;
}

/* At the plan's static offset (setup.c plan_place). */
static int galloc_at(struct tencache_cache *c, struct tc_tstate *t, int64_t off)
{
	int ret;

	if (t->goff >= 0)
		return 0;
	if (off < 0)
		return galloc(c, t);
	ret = tencache_arena_alloc_at(c->garena, t->bytes, (uint64_t)off);
	if (ret) {
		tc_err(c->tc, "cache: the plan's GPU range at %lld (%llu bytes) is not free at access %u",
		       (long long)off, (unsigned long long)t->bytes, c->pos);
		return -ENOMEM;	/* leave the plan, as for fragmentation */
	}
	t->goff = off;
	return 0;
}

/*
 * Freed ranges. DROP frees its GPU range at issue, and PDROP its pinned one,
 * so the caller never waits for space: what takes a range next waits for
 * its last users instead, on its own stream or worker (a copy into GPU
 * space on H2D; an NVMe read or a PALLOC into pinned space on a staging
 * worker).
 */
static int freed_push(struct tencache_cache *c, struct tc_freed *l, uint64_t off,
		      uint64_t len, const int32_t *deps, uint32_t nr_deps)
{
	uint64_t at = c->rec_clock;

	if (!nr_deps)
		return 0;
	if (TC_GROW(l->v, l->cap, l->nr, 256))
		return -ENOMEM;
	/* a copy issued, its record still to come (a batch, a held gated
	 * copy): the instance meant is not the latest yet, skip nothing */
	for (uint32_t k = 0; k < nr_deps; k++)
		if (deps[k] >= 0 && (c->opev[deps[k]].cb || c->opev[deps[k]].gate))
			at = UINT64_MAX;
	l->v[l->nr++] = (struct tc_freed_range){ off, len, deps, nr_deps, at };
	return 0;
}

static struct tc_xev *dep_ev(struct tencache_cache *c, int32_t d);
static int xev_stream_wait(struct tencache_cache *c, void *s, struct tc_xev *e);
static int xev_done(struct tencache_cache *c, struct tc_xev *e);
static int gate_send(struct tencache_cache *c, struct tc_xev *e, int block);

/*
 * The last users of a freed GPU range: a held gated copy (tc_gated) is not
 * one (it fills a range taken after the free), its recorded instance is.
 * So its host op is not waited for here. A pinned range's gated copy reads
 * it: that one is a user (l->pinned).
 */
static struct tc_xev *freed_ev(struct tencache_cache *c, const struct tc_freed *l,
			       int32_t d, uint8_t *gate)
{
	struct tc_xev *e = dep_ev(c, d);

	*gate = e->gate;
	if (!l->pinned)
		e->gate = 0;
	return e;
}

/* After freed_ev: a GPU range's gated copy is held again (a pinned one's
 * may have gone out meanwhile). */
static void freed_ev_put(const struct tc_freed *l, struct tc_xev *e, uint8_t gate)
{
	if (!l->pinned)
		e->gate = gate;
}

/*
 * Whether the instance of op d's event that was latest at rec_clock at (the
 * one a free then meant: an op issued earlier in the step, or not yet, so
 * the last step's) is known done, while the event has been recorded again
 * since: a wait on it would wait for the newer one. That one may be a gated
 * copy on gstream, behind a host op still running (a FETCH of the range's
 * last tensor, issued again). Not for an access's compute: the free may
 * mean its instance still to come (recorded at the release).
 */
static int freed_older_done(const struct tencache_cache *c, int32_t d, uint64_t at)
{
	const struct tc_xev *e = d >= 0 ? &c->opev[d] : NULL;

	return e && e->rec_at > at && e->prev_at <= at && e->prev_done;
}

/* Stream s waits for the last users of every freed GPU range [off, off+len) overlaps. */
static int gfreed_wait(struct tencache_cache *c, void *s, uint64_t off, uint64_t len)
{
	const struct tc_freed *l = &c->gfreed;

	for (uint32_t i = 0; i < l->nr; i++) {
		const struct tc_freed_range *g = &l->v[i];

		if (g->off >= off + len || off >= g->off + g->len)
			continue;
		for (uint32_t k = 0; k < g->nr_deps; k++) {
			uint8_t gate;
			struct tc_xev *e;
			int ret;

			if (freed_older_done(c, g->deps[k], g->at))
				continue;
			e = freed_ev(c, l, g->deps[k], &gate);
			ret = xev_stream_wait(c, s, e);

			freed_ev_put(l, e, gate);

			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Append the last users of the freed pinned ranges [off, off+len) overlaps to c->sdeps. */
static int pfreed_deps(struct tencache_cache *c, uint64_t off, uint64_t len)
{
	const struct tc_freed *l = &c->pfreed;

	for (uint32_t i = 0; i < l->nr; i++) {
		const struct tc_freed_range *g = &l->v[i];

		if (g->off >= off + len || off >= g->off + g->len)
			continue;
		for (uint32_t k = 0; k < g->nr_deps; k++) {
			if (freed_older_done(c, g->deps[k], g->at))
				continue;
			if (TC_GROW(c->sdeps, c->cap_sdeps, c->nr_sdeps, 64))
				return -ENOMEM;
			c->sdeps[c->nr_sdeps++] = g->deps[k];
		}
	}
	return 0;
}

/*
 * Forget freed ranges whose last users are done, oldest first, stopping at
 * the first that is not (ranges are freed in the order their users run).
 * Queries cost a driver call each (1-2 us on a GPU), so the list is polled
 * only once it has doubled since the last poll (and past FREED_POLL_MIN):
 * amortized O(1) queries per freed range, and the scans stay short.
 */
#define FREED_POLL_MIN	16
static void freed_poll(struct tencache_cache *c, struct tc_freed *l)
{
	uint32_t i;

	if (l->nr <= l->poll_at || l->nr <= FREED_POLL_MIN)
		return;
	for (i = 0; i < l->nr; i++) {
		struct tc_freed_range *g = &l->v[i];
		uint32_t k;

		for (k = 0; k < g->nr_deps; k++) {
			uint8_t gate;
			struct tc_xev *e = freed_ev(c, l, g->deps[k], &gate);
			int done = l->pinned && gate ? 0 : xev_done(c, e) == 1;

			freed_ev_put(l, e, gate);
			if (!done)
				break;
		}
		if (k < g->nr_deps)
			break;
	}
	memmove(l->v, l->v + i, (l->nr - i) * sizeof(*l->v));
	l->nr -= i;
	l->poll_at = 2 * l->nr;
}

static int xev_sync(struct tencache_cache *c, struct tc_xev *e);

/* Every last user of a freed range done (the streams are synced): forget them. */
static int freed_sync(struct tencache_cache *c, struct tc_freed *l)
{
	int ret = 0;

	for (uint32_t i = 0; i < l->nr && !ret; i++)
		for (uint32_t k = 0; k < l->v[i].nr_deps && !ret; k++) {
			uint8_t gate;
			struct tc_xev *e = freed_ev(c, l, l->v[i].deps[k], &gate);

			ret = xev_sync(c, e);
			freed_ev_put(l, e, gate);
		}
	if (!ret)
		l->nr = l->poll_at = 0;
	return ret;
}

static int od_make_room_pinned(struct tencache_cache *c, uint64_t bytes);

/* On demand, nothing left to push out: what holds the pinned budget. */
static void pinned_full_err(struct tencache_cache *c, uint64_t bytes)
{
	char b1[32], b2[32], b3[32];
	uint64_t held = 0;

	for (uint32_t i = 0; i < c->nr; i++)
		if (c->t[i].poff >= 0 && c->t[i].held)
			held += c->t[i].bytes;
	tc_fmt_bytes(b1, sizeof(b1), bytes);
	tc_fmt_bytes(b2, sizeof(b2), held);
	tc_fmt_bytes(b3, sizeof(b3), c->p.pinned_budget);
	tc_err(c->tc, "cache: no pinned space for %s: tensors held now take %s of the %s pinned budget (a CPU optimizer op holds all its tensors there at once); raise pinned_budget",
	       b1, b2, b3);
}

static int palloc(struct tencache_cache *c, struct tc_tstate *t)
{
	void *ptr;
	int ret;

	if (t->poff >= 0)
		return 0;
	for (;;) {
		ret = tencache_pool_alloc(c->pool, t->bytes, &ptr);
		if (ret != -ENOMEM)
			break;
		ret = -ENOENT;
		if ((!c->planned || c->any_room) && c->swap)
			ret = od_make_room_pinned(c, t->bytes);
		if (ret == -ENOENT) {
			ret = -ENOMEM;
			break;
		}
		if (ret)
			return ret;
	}
	if (ret) {
		c->pinned_enomem = ret == -ENOMEM;
		if (c->planned)	/* fragmented: the caller re-plans with room */
			tc_dbg(c->tc, "cache: no pinned space for %llu bytes",
			       (unsigned long long)t->bytes);
		else
			pinned_full_err(c, t->bytes);
		return ret;
	}
	t->poff = (char *)ptr - c->pbase;
	return 0;
}

/*
 * At the plan's pinned offset (setup.c pinned_place): its last occupant
 * was freed at its PDROP (its users may still run: pfreed). A range still
 * taken is a fault of the layout: the plan stops as for fragmentation and
 * best fit places from then on.
 */
static int palloc_at(struct tencache_cache *c, struct tc_tstate *t, int64_t off)
{
	int ret;

	if (off < 0)	/* not laid out: best fit */
		return palloc(c, t);
	if (t->poff >= 0)
		return 0;
	/* tc_exec_test_taken: as if a range were taken */
	ret = c->test_taken && !--c->test_taken ? -EBUSY : 0;
	ret = ret ?: tencache_arena_alloc_at(tencache_pool_arena(c->pool), t->bytes,
					     (uint64_t)off);
	if (ret) {
		tc_err(c->tc, "cache: the plan's pinned range at %lld (%llu bytes) is not free at access %u (%s); placing by best fit from now on",
		       (long long)off, (unsigned long long)t->bytes, c->pos, strerror(-ret));
		c->playout_failed = 1;
		c->pinned_enomem = 1;
		return -ENOMEM;
	}
	t->poff = off;
	return 0;
}

static int pfree(struct tencache_cache *c, int64_t off)
{
	return tencache_pool_free(c->pool, c->pbase + off);
}

/* ---- events ---------------------------------------------------------- */

/*
 * Stream order. Work on a stream completes in the order it was queued, so
 * once one device-event instance recorded on stream s is seen done, every
 * instance recorded on s before it is done as well. Each tracked stream
 * counts its records (tc_xev.rec_seq) and the newest known done: queries
 * (1-2 us each on a GPU) are made only for what that does not answer.
 * Streams are the cache's copy streams and the callers' compute streams, a
 * few: one past TC_SORDER_NR is not tracked and its events are queried as
 * before. A stream is known by its handle, as xev_dev_needs_wait does.
 */
#define SORDER_LAG0	1	/* records a new stream is taken to run behind */
static uint8_t sorder_note(struct tencache_cache *c, void *s, struct tc_xev *e)
{
	struct tc_sorder *o;
	uint32_t i;

	for (i = 0; i < c->nr_sorder && c->sorder[i].s != s; i++)
		;
	if (i == c->nr_sorder) {
		if (i == TC_SORDER_NR)
			return 0;
		c->sorder[i].s = s;
		c->sorder[i].lag = SORDER_LAG0;
		c->nr_sorder++;
	}
	o = &c->sorder[i];
	e->rec_seq = ++o->seq;
	o->ring[o->seq % TC_SORDER_RING] = (struct tc_srec){ e, e->gen, c->sclock };
	return i + 1;
}

/* The latest instance of device event e is done: so are those before it. */
static void sorder_done(struct tencache_cache *c, struct tc_xev *e)
{
	struct tc_sorder *o;

	e->done_gen = e->gen;
	if (!e->rec_o)
		return;
	o = &c->sorder[e->rec_o - 1];
	if (o->done_seq < e->rec_seq)
		o->done_seq = e->rec_seq;
}

/* Stream s ran dry (a stream sync): everything recorded on it is done. */
static void sorder_synced(struct tencache_cache *c, void *s)
{
	for (uint32_t i = 0; i < c->nr_sorder; i++)
		if (c->sorder[i].s == s)
			c->sorder[i].done_seq = c->sorder[i].seq;
}

/* Plan events are freed (setup.c): the rings must not name them. */
void tc_exec_sorder_forget(struct tencache_cache *c)
{
	for (uint32_t i = 0; i < c->nr_sorder; i++)
		for (uint32_t k = 0; k < TC_SORDER_RING; k++)
			c->sorder[i].ring[k].e = NULL;
}

static int cb_flush_all(struct tencache_cache *c);
static int cb_flush_s(struct tencache_cache *c, void *s);

/* Whether copies wait in a batch for stream s. */
static int cb_pending(const struct tencache_cache *c, const void *s)
{
	return (c->cb[0].n && c->cb[0].s == s) || (c->cb[1].n && c->cb[1].s == s);
}

/* Whether device event e's latest instance is known done (no driver call). */
static int xev_known_done(struct tencache_cache *c, struct tc_xev *e)
{
	if (e->gate) {	/* its copy waits for a host op: out with it if it can */
		int ret = gate_send(c, e, 0);

		if (ret && !c->cb_err)
			c->cb_err = ret;
		if (e->gate)
			return 0;
	}
	if (e->cb) {	/* its copy still waits in a batch: out with it */
		int ret = cb_flush_all(c);

		if (ret && !c->cb_err)
			c->cb_err = ret;
	}
	if (e->done_gen == e->gen)
		return 1;
	if (e->rec_o && e->rec_seq <= c->sorder[e->rec_o - 1].done_seq) {
		e->done_gen = e->gen;
		return 1;
	}
	return 0;
}

/* e is recorded again: note whether its latest instance was known done. */
static void xev_new_instance(struct tencache_cache *c, struct tc_xev *e)
{
	e->prev_done = e->done_gen == e->gen ||
		       (e->rec_o && e->rec_seq <= c->sorder[e->rec_o - 1].done_seq);
	e->prev_at = e->rec_at;
	e->rec_at = ++c->rec_clock;
	e->gen++;
}

/* A query of instance x of o found it done or not: how far o runs behind. */
static void sorder_lag(struct tc_sorder *o, uint64_t x, int done)
{
	uint64_t d = o->seq - x;

	if (done && o->lag > d)
		o->lag = d;
	else if (!done && o->lag <= d)
		o->lag = d + 1 < TC_SORDER_RING ? d + 1 : TC_SORDER_RING - 1;
}

/*
 * Before querying instance q of stream o, query a newer one instead, where
 * the stream has likely got to: at least lag records behind the newest (how
 * far o runs behind, estimated from every answer) and made SORDER_AGE
 * acquires ago or more. Found done, it proves q and all before it in one
 * call, and the next probe aims closer (lag shrinks by a quarter); found
 * pending, it costs a second query (q's own), lag doubles, and the stream
 * is not probed for SORDER_BACKOFF acquires (a stream far behind: q is
 * likely pending too). 1: q is done; 0: unknown; -errno.
 */
#define SORDER_AGE	2
#define SORDER_BACKOFF	4
static int sorder_probe(struct tencache_cache *c, struct tc_sorder *o, uint64_t q)
{
	uint64_t lo = o->done_seq > q ? o->done_seq : q;
	int ret;

	if (c->sclock < o->probe_at || o->seq <= lo + o->lag)
		return 0;
	for (uint64_t x = o->seq - o->lag; x > lo && o->seq - x < TC_SORDER_RING; x--) {
		struct tc_srec *r = &o->ring[x % TC_SORDER_RING];

		/* too recent, or re-recorded since (a newer instance) */
		if (r->clock + SORDER_AGE > c->sclock || !r->e || r->e->gen != r->gen)
			continue;
		ret = c->dev->ops->query(c->dev, xev_h(r->e));
		if (ret < 0)
			return ret;
		if (ret == 0) {
			o->lag = 2 * o->lag + 1 < TC_SORDER_RING ? 2 * o->lag + 1 : TC_SORDER_RING - 1;
			o->probe_at = c->sclock + SORDER_BACKOFF;
			return 0;
		}
		r->e->done_gen = r->gen;
		o->done_seq = x;
		o->lag -= (o->lag + 3) / 4;
		return 1;
	}
	return 0;
}

/* Host waits for the latest instance of e. */
static int xev_sync(struct tencache_cache *c, struct tc_xev *e)
{
	int ret;

	if (e->gate) {
		ret = gate_send(c, e, 1);
		if (ret)
			return ret;
	}
	if (ev_is_dev(e)) {
		if (xev_known_done(c, e))
			return 0;
		ret = c->dev->ops->sync(c->dev, xev_h(e));
		if (!ret)
			sorder_done(c, e);
		return ret;
	}
	tc_hev_wait(c->dev, &e->h, tc_hev_latest(c->dev, &e->h));
	return 0;
}

/*
 * Whether stream s must wait for device event e's latest instance: not when
 * it is known done, was recorded on s (in order), or s waited for it already.
 */
static int xev_dev_needs_wait(const struct tc_xev *e, void *s)
{
	if (e->done_gen == e->gen || e->rec_s == s)
		return 0;
	if (e->bev && (e->bev->wait_s[0] == s || e->bev->wait_s[1] == s))
		return 0;	/* waited for through another copy of its batch */
	return !((e->wait_s[0] == s && e->wait_gen[0] == e->gen) ||
		 (e->wait_s[1] == s && e->wait_gen[1] == e->gen));
}

static int xev_dev_wait(struct tencache_cache *c, void *s, struct tc_xev *e)
{
	int ret;

	if (e->gate) {
		ret = gate_send(c, e, 1);
		if (ret)
			return ret;
	}
	if (xev_known_done(c, e) || !xev_dev_needs_wait(e, s))
		return 0;
	ret = cb_flush_s(c, s);	/* a batch before the wait goes out first */
	ret = ret ?: c->dev->ops->stream_wait(c->dev, s, xev_h(e));
	if (!ret) {
		e->wait_s[1] = e->wait_s[0];
		e->wait_gen[1] = e->wait_gen[0];
		e->wait_s[0] = s;
		e->wait_gen[0] = e->gen;
		if (e->bev) {
			e->bev->wait_s[1] = e->bev->wait_s[0];
			e->bev->wait_s[0] = s;
		}
	}
	return ret;
}

/*
 * Detached host ops run in whatever order their runner picks (overlap.py:
 * the lowest layer first), so nothing a runner waits for may wait for a
 * detached op that is not done: the runner could be the thread that is to
 * run it. A host event whose latest instance may (an op's end, a staging job
 * after one: det_dep) is waited for by the caller instead, as a stream
 * wait on it would hold the stream's later copies behind the op. A runner
 * that runs them in order (TENCACHE_CACHE_DETACH_FIFO) has run the earlier
 * ops by then: nothing is waited for here.
 */
static int det_pending(struct tencache_cache *c, uint64_t token)
{
	uint64_t to;

	if (token <= c->det_base)
		return 0;
	pthread_mutex_lock(&c->dlock);
	/* ops only become done: the done prefix is scanned once, not per wait */
	to = c->det_done_to > c->det_base ? c->det_done_to : c->det_base;
	while (to < token && to - c->det_base < c->nr_det &&
	       __atomic_load_n(&c->det[to - c->det_base].done, __ATOMIC_ACQUIRE))
		to++;
	c->det_done_to = to;
	pthread_mutex_unlock(&c->dlock);
	return to < token && to - c->det_base < c->nr_det;
}

/* Stream s waits for the latest instance of e. */
static int xev_stream_wait(struct tencache_cache *c, void *s, struct tc_xev *e)
{
	int ret = 0;

	if (ev_is_dev(e))
		return xev_dev_wait(c, s, e);
	if (!(c->p.flags & TENCACHE_CACHE_DETACH_FIFO) && det_pending(c, e->det_dep))
		tc_hev_wait(c->dev, &e->h, tc_hev_latest(c->dev, &e->h));
	/* a batch goes out before a wait that may hold the stream; one for a
	 * host event already signalled holds nothing (in host mode the
	 * ends of the caller's ops: most waits of the copies there) */
	if (cb_pending(c, s) && !tc_hev_done(c->dev, &e->h))
		ret = cb_flush_s(c, s);
	ret = ret ?: c->dev->ops->stream_wait_host(c->dev, s, &e->h,
						   tc_hev_latest(c->dev, &e->h));
	if (ret > 0) {
		c->st.queued_host_waits++;
		ret = 0;
	}
	return ret;
}

static int xev_done(struct tencache_cache *c, struct tc_xev *e)
{
	int ret;

	if (ev_is_dev(e)) {
		if (xev_known_done(c, e))
			return 1;
		if (e->rec_o) {
			ret = sorder_probe(c, &c->sorder[e->rec_o - 1], e->rec_seq);
			if (ret)
				return ret < 0 ? ret : xev_known_done(c, e);
		}
		ret = c->dev->ops->query(c->dev, xev_h(e));
		if (e->rec_o && ret >= 0)
			sorder_lag(&c->sorder[e->rec_o - 1], e->rec_seq, ret);
		if (ret == 1)
			sorder_done(c, e);
		return ret;
	}
	return tc_hev_done(c->dev, &e->h);
}

/* Record a device event on s: a new instance (of the pair's other half). */
static int xev_record(struct tencache_cache *c, struct tc_xev *e, void *s)
{
	int ret = cb_flush_s(c, s);	/* the record follows a pending batch */

	if (ret)
		return ret;
	tc_exec_bev_put(c, e->bev);
	e->bev = NULL;
	if (e->alt) {
		void *x = e->dev;

		e->dev = e->alt;
		e->alt = x;
	}
	ret = c->dev->ops->record(c->dev, e->dev, s);
	xev_new_instance(c, e);
	e->rec_s = ret ? (void *)e : s;	/* failed: no stream is in order with it */
	e->rec_o = ret ? 0 : sorder_note(c, s, e);
	return ret;
}

/* Signal a host event now (an op with nothing to wait for). */
static void xev_signal_now(struct tencache_cache *c, struct tc_xev *e)
{
	tc_hev_signal(c->dev, &e->h, tc_hev_arm(c->dev, &e->h));
}

/* The event of a dependency: op index >= 0, or the compute of access -(d+1). */
static struct tc_xev *dep_ev(struct tencache_cache *c, int32_t d)
{
	return d >= 0 ? &c->opev[d] : &c->accev[-(d + 1)];
}

/* ---- staging worker (NVMe) -------------------------------------------- */

struct tc_sjob {
	struct tc_xev *ev;
	uint64_t inst;
	int kind;		/* TC_SJ_* */
	void *buf;
	uint64_t len, off;
	struct tc_sjob *next;
	uint64_t t0, t1;	/* timeline */
	uint32_t tensor;
	bool done;		/* its transfer ended (in flight until then) */
	uint8_t lane;		/* its slot among the worker's in flight (timeline) */
	void *dev_ev;		/* device deps, as they were at push (sstream) */
	/* host deps: the instance that was latest at push. Taken when the
	 * worker runs, a later op of this step (queued behind this job)
	 * could be the latest, and the worker would wait for it forever. */
	uint32_t nr_hdeps;
	struct tc_sdep hdep[];
};

/*
 * The staging workers: each runs its queue's jobs in order, each after its
 * dependencies. Reads and writes have a worker each: a write-back waits for
 * the op that last wrote the value (a detached CPU Adam's, on the optimizer
 * states), and one queue held the next ops' reads behind it, so NVMe reads
 * and writes never overlapped. The third settles PALLOCs: pinned space is
 * ready once its last users (and the last users of what was freed there)
 * are done, which no caller waits for. Jobs depend only on ops issued
 * before them (the latest instance at push), so workers cannot wait for
 * each other in a circle.
 *
 * The disk's queue stays full from one tensor to the next: a reader or
 * writer starts the next job while earlier ones are in flight once its
 * dependencies are met (up to SJ_FLY jobs), and signals the jobs in queue
 * order as they complete (an event's instances are done in order).
 */
enum { SJ_FLY = 4 };
#define SJ_BLOCKED_NS	2000	/* a dependency that took longer blocked the worker */

/*
 * A job's device event, from the pool. Workers never make or destroy one:
 * on the GPU test machine a staging worker's cuEventDestroy blocked for
 * good on a driver lock (a rwlock taken for writing) while the reader spun
 * in cuEventSynchronize and the caller sat in cuLaunchHostFunc on a full
 * stream, all behind streams that waited for jobs yet to run, and the step
 * hung (results/h200-replay-raw/s28). Workers only query, sync and hand
 * events back (sev_put); the caller makes them here and destroys them at
 * the end.
 */
static int sev_get(struct tencache_cache *c, void **ev)
{
	int ret = 0;

	pthread_mutex_lock(&c->slock);
	if (c->sev_nr) {
		*ev = c->sev[--c->sev_nr];
		pthread_mutex_unlock(&c->slock);
		return 0;
	}
	/* room for every event made, so that sev_put never grows it */
	if (c->sev_made == c->sev_cap)
		ret = TC_GROW(c->sev, c->sev_cap, c->sev_made, 16);
	pthread_mutex_unlock(&c->slock);
	ret = ret ?: c->dev->ops->event_create(c->dev, 0, ev);
	if (!ret) {
		pthread_mutex_lock(&c->slock);
		c->sev_made++;
		pthread_mutex_unlock(&c->slock);
	}
	return ret;
}

/* ev is synced (or was never recorded): back to the pool, any thread */
static void sev_put(struct tencache_cache *c, void *ev)
{
	pthread_mutex_lock(&c->slock);
	c->sev[c->sev_nr++] = ev;
	pthread_mutex_unlock(&c->slock);
}

/* the job's dependencies are met: it would not wait */
static bool sjob_ready(struct tencache_cache *c, const struct tc_sjob *j)
{
	for (uint32_t k = 0; k < j->nr_hdeps; k++)
		if (!tc_hev_reached(c->dev, j->hdep[k].h, j->hdep[k].inst))
			return false;
	return !j->dev_ev || c->dev->ops->query(c->dev, j->dev_ev) != 0;
}

/* A host dependency a worker blocked on, for the timeline: a plan op's
 * event (its kind and tensor) or an op's end (its access). */
static void sdep_why(struct tencache_cache *c, const struct tc_hev *h, uint32_t *why,
		     uint32_t *id)
{
	const struct tc_xev *e = (const struct tc_xev *)((const char *)h -
							   offsetof(struct tc_xev, h));

	if (e >= c->opev && e < c->opev + c->plan.nr_ops) {
		*why = TC_TL_WHY_OP + c->plan.ops[e - c->opev].kind;
		*id = c->plan.ops[e - c->opev].tensor;
	} else if (e >= c->accev && e < c->accev + c->nacc_ev && e - c->accev < c->trace.nr_acc) {
		uint32_t a = (uint32_t)(e - c->accev);

		/* any access of an op ends with it: named by its END access,
		 * as the timeline names ops */
		while (!(c->trace.acc[a].flags & TC_ACC_END) && a + 1 < c->trace.nr_acc)
			a++;
		*id = a;
		*why = c->trace.acc[a].flags & TC_ACC_HOST ? TC_TL_WHY_HOSTOP : TC_TL_WHY_COMPUTE;
	}
}

/*
 * A disk that takes turns (c->disk_turns): worker w, with nothing in
 * flight and a job ready, waits until the other's jobs are done; the
 * other adds none meanwhile (sjob_next), so with both queues busy they
 * alternate, up to SJ_FLY jobs a turn. On a disk that moved 1.8 GB/s
 * reading, 2.6 writing and 2.0 both at once (an H100 machine, session
 * 32), equal bytes take 6% less time in turn; the timing model already
 * had them so (sim.c), and the executor's disk ran both at once.
 */
static void disk_turn(struct tencache_cache *c, int w)
{
	pthread_mutex_lock(&c->slock);
	c->disk_want[w] = 1;
	/* free, and both wait: the one that did not go last goes */
	while (c->disk_dir == !w || (c->disk_dir < 0 && c->disk_want[!w] && c->disk_last == w))
		pthread_cond_wait(&c->scond, &c->slock);
	c->disk_want[w] = 0;
	c->disk_dir = c->disk_last = w;
	pthread_mutex_unlock(&c->slock);
}

/* w's jobs are all done: the disk is free for the other */
static void disk_turn_end(struct tencache_cache *c, int w)
{
	pthread_mutex_lock(&c->slock);
	if (c->disk_dir == w) {
		c->disk_dir = -1;
		pthread_cond_broadcast(&c->scond);
	}
	pthread_mutex_unlock(&c->slock);
}

/* a transfer of direction w (0: NVMe read, 1: write) begins (on) or one
 * ends: a worker's first in flight and its last, or a synchronous one. The
 * disk's busy time per direction, and both at once, in st. */
static void disk_busy(struct tencache_cache *c, int w, bool on)
{
	uint64_t now;

	pthread_mutex_lock(&c->slock);
	now = tc_now_ns();
	if (on && !c->disk_on[w]++) {
		c->disk_t0[w] = now;
		if (c->disk_on[!w])
			c->disk_both_t0 = now;
	} else if (!on && !--c->disk_on[w]) {
		c->st.disk_busy_ns[w] += now - c->disk_t0[w];
		if (c->disk_on[!w])
			c->st.disk_both_ns += now - c->disk_both_t0;
	}
	pthread_mutex_unlock(&c->slock);
}

/* the next job, once its dependencies are met (in flight: only if it need
 * not wait, so that the jobs before it are reaped in time) */
static struct tc_sjob *sjob_next(struct tencache_cache *c, int w, unsigned nfly)
{
	unsigned most = c->tc->p.queue_depth < SJ_FLY ? c->tc->p.queue_depth : SJ_FLY;
	uint32_t why = TC_TL_WHY_NONE, why_id = 0;
	struct tc_sjob *j;
	uint64_t waited;

	pthread_mutex_lock(&c->slock);
	while (!nfly && !c->shead[w] && !c->sexit)
		pthread_cond_wait(&c->scond, &c->slock);
	j = c->shead[w];	/* only this worker takes from its queue */
	pthread_mutex_unlock(&c->slock);
	if (!j || (nfly && (nfly >= most || !sjob_ready(c, j))))	/* settling: never nfly */
		return NULL;
	pthread_mutex_lock(&c->slock);
	if (nfly && c->disk_turns && c->disk_want[!w]) {
		pthread_mutex_unlock(&c->slock);
		return NULL;	/* the other's turn once these are done */
	}
	c->shead[w] = j->next;
	if (!c->shead[w])
		c->stail[w] = NULL;
	c->sbusy[w]++;
	pthread_mutex_unlock(&c->slock);
	/* dependencies: device events are waited for here, host ones too
	 * (in the timeline where the disk may idle for them: nothing of this
	 * worker's in flight) */
	waited = w != TC_SJ_SETTLE && c->timeline_on && !sjob_ready(c, j) ? tc_now_ns() : 0;
	for (uint32_t k = 0; k < j->nr_hdeps; k++) {
		uint64_t t = waited ? tc_now_ns() : 0;

		tc_hev_wait(c->dev, j->hdep[k].h, j->hdep[k].inst);
		if (waited && tc_now_ns() - t > SJ_BLOCKED_NS)
			sdep_why(c, j->hdep[k].h, &why, &why_id);
	}
	if (j->dev_ev) {
		uint64_t t = waited ? tc_now_ns() : 0;

		c->dev->ops->sync(c->dev, j->dev_ev);
		sev_put(c, j->dev_ev);
		j->dev_ev = NULL;
		if (waited && tc_now_ns() - t > SJ_BLOCKED_NS)
			why = TC_TL_WHY_COPIES;
	}
	if (!nfly && w != TC_SJ_SETTLE && c->disk_turns) {
		uint64_t t = c->timeline_on ? tc_now_ns() : 0;

		disk_turn(c, w);
		if (t && tc_now_ns() - t > SJ_BLOCKED_NS) {
			why = TC_TL_WHY_TURN;
			if (!waited)
				waited = t;
		}
	}
	if (waited)
		tc_exec_timeline_wait(c, w == TC_SJ_WRITE ? TC_TL_NVME_WR_WAIT : TC_TL_NVME_RD_WAIT,
				      j->tensor, why, why_id, waited, tc_now_ns());
	if (w == TC_SJ_READ && c->read_lag_ns) {	/* test: a slow disk */
		struct timespec ts = { c->read_lag_ns / 1000000000ULL,
				       c->read_lag_ns % 1000000000ULL };

		while (nanosleep(&ts, &ts))
			;
	}
	return j;
}

/* a transfer ended (res: bytes or -errno): counted, in the timeline, and
 * its lane free */
static void sjob_end(struct tencache_cache *c, int w, struct tc_sjob *j, int64_t res,
		     unsigned *lanes)
{
	j->t1 = tc_now_ns();
	j->done = true;
	*lanes &= ~(1u << j->lane);
	__atomic_sub_fetch(&c->disk_fly[w], 1, __ATOMIC_SEQ_CST);
	if (res < 0) {
		tc_err(c->tc, "cache: NVMe %s of %llu bytes at %llu failed: %s",
		       w == TC_SJ_WRITE ? "write" : "read", (unsigned long long)j->len,
		       (unsigned long long)j->off, strerror((int)-res));
		__atomic_store_n(&c->stage_err, (int)res, __ATOMIC_RELEASE);
	}
	__atomic_add_fetch(&c->st.link_bytes[w == TC_SJ_WRITE ? 3 : 2], j->len, __ATOMIC_RELAXED);
	tc_exec_timeline_add(c, w == TC_SJ_WRITE ? TC_TL_NVME_WR : TC_TL_NVME_RD, j->lane,
			     j->tensor, j->t0, j->t1);
}

/* j's event is signalled: one job fewer taken and not done (drain waits) */
static void sjob_signal(struct tencache_cache *c, int w, struct tc_sjob *j)
{
	tc_hev_signal(c->dev, &j->ev->h, j->inst);
	free(j);
	pthread_mutex_lock(&c->slock);
	if (!--c->sbusy[w] && !c->shead[w])
		pthread_cond_broadcast(&c->scond);
	pthread_mutex_unlock(&c->slock);
}

static void *stage_main(struct tencache_cache *c, int w)
{
	struct tencache_stage *stage = w == TC_SJ_WRITE ? c->wstage : c->stage;
	struct tc_sjob *head = NULL, **tail = &head, *j;
	unsigned nfly = 0, lanes = 0;	/* lanes: bits of the slots in use */

	tc_dev_on_worker = 1;

	for (;;) {
		j = sjob_next(c, w, nfly);
		if (j && w == TC_SJ_SETTLE) {
			sjob_signal(c, w, j);
			continue;
		}
		if (j) {
			int ret;

			j->t0 = tc_now_ns();
			j->lane = __builtin_ctz(~lanes);	/* nfly < SJ_FLY: one is free */
			lanes |= 1u << j->lane;
			if (!nfly)
				disk_busy(c, w, true);
			ret = w == TC_SJ_WRITE ?
				tencache_stage_write(stage, c->nvme_fd, j->buf, j->len, j->off,
						     (uintptr_t)j, 0) :
				tencache_stage_read(stage, c->nvme_fd, j->buf, j->len, j->off,
						    (uintptr_t)j, 0);
			__atomic_add_fetch(&c->disk_fly[w], 1, __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&c->disk_fly[!w], __ATOMIC_SEQ_CST))
				__atomic_add_fetch(&c->disk_both, 1, __ATOMIC_RELAXED);
			if (ret)
				sjob_end(c, w, j, ret, &lanes);
			else	/* a failure here is the wait's below, which submits again */
				tencache_stage_submit(stage);
			*tail = j;
			tail = &j->next;
			j->next = NULL;
			if (++nfly > c->sj_fly_max[w])
				__atomic_store_n(&c->sj_fly_max[w], nfly, __ATOMIC_RELAXED);
		} else if (!nfly) {
			return NULL;	/* nothing queued, and told to exit */
		} else {
			struct tencache_stage_cqe cqe;
			int ret = tencache_stage_wait(stage, 1, &cqe, 1, 0);

			if (ret == 1)
				sjob_end(c, w, (struct tc_sjob *)(uintptr_t)cqe.user_data, cqe.res,
					 &lanes);
			else	/* the ring failed: none of those in flight will end */
				for (struct tc_sjob *k = head; k; k = k->next)
					if (!k->done)
						sjob_end(c, w, k, ret < 0 ? ret : -EIO, &lanes);
		}
		/* signalled in queue order */
		while (head && head->done) {
			j = head;
			head = j->next;
			if (!head)
				tail = &head;
			nfly--;
			sjob_signal(c, w, j);
		}
		if (!nfly && w != TC_SJ_SETTLE) {
			disk_busy(c, w, false);	/* before the other may go */
			if (c->disk_turns)
				disk_turn_end(c, w);
		}
	}
}

void *tc_exec_stage_reader(void *arg)
{
	return stage_main(arg, TC_SJ_READ);
}

void *tc_exec_stage_writer(void *arg)
{
	return stage_main(arg, TC_SJ_WRITE);
}

void *tc_exec_settler(void *arg)
{
	return stage_main(arg, TC_SJ_SETTLE);
}

/*
 * Queue a job of kind on t's pinned space, after deps (plan op indices or
 * accesses, dep_ev): host ones at their latest instance now, device ones
 * through a snapshot on sstream.
 */
static int stage_push(struct tencache_cache *c, struct tc_xev *e, int kind,
		      struct tc_tstate *t, uint32_t tensor, const int32_t *deps,
		      uint32_t nr_deps)
{
	struct tc_sjob *j = calloc(1, sizeof(*j) + nr_deps * sizeof(j->hdep[0]));
	uint64_t det_dep = 0;
	int ret = 0;

	if (!j)
		return -ENOMEM;
	*j = (struct tc_sjob){ .ev = e, .kind = kind, .buf = pptr(c, t->poff),
			       .len = t->bytes, .off = t->noff, .tensor = tensor };
	for (uint32_t k = 0; k < nr_deps && !ret; k++) {
		struct tc_xev *d = dep_ev(c, deps[k]);

		if (!ev_is_dev(d)) {
			if (!tc_hev_done(c->dev, &d->h)) {
				j->hdep[j->nr_hdeps++] = (struct tc_sdep){ &d->h,
					tc_hev_latest(c->dev, &d->h) };
				if (d->det_dep > det_dep)
					det_dep = d->det_dep;
			}
			continue;
		}
		/* a stream wait takes the event's current recording: the
		 * job's own event on sstream is then the snapshot (none
		 * when every device dependency is known done) */
		if (xev_known_done(c, d))
			continue;
		if (!j->dev_ev)
			ret = sev_get(c, &j->dev_ev);
		ret = ret ?: xev_dev_wait(c, c->sstream, d);
	}
	if (!ret && j->dev_ev)
		ret = c->dev->ops->record(c->dev, j->dev_ev, c->sstream);
	if (ret) {
		if (j->dev_ev)
			sev_put(c, j->dev_ev);
		free(j);
		return ret;
	}
	j->inst = tc_hev_arm(c->dev, &e->h);
	/* a job runs after the jobs queued before it: it waits for what they wait for */
	if (c->sq_det_dep[kind] > det_dep)
		det_dep = c->sq_det_dep[kind];
	e->det_dep = c->sq_det_dep[kind] = det_dep;
	pthread_mutex_lock(&c->slock);
	if (c->stail[kind])
		c->stail[kind]->next = j;
	else
		c->shead[kind] = j;
	c->stail[kind] = j;
	pthread_cond_broadcast(&c->scond);
	pthread_mutex_unlock(&c->slock);
	return 0;
}

/*
 * An op that fills t's pinned space (STAGE_IN, PALLOC): a job after the
 * op's dependencies and the last users of what was freed in that space.
 */
static int stage_fill(struct tencache_cache *c, uint32_t k, int kind, struct tc_tstate *t)
{
	const struct tc_op *op = &c->plan.ops[k];
	int ret;

	c->nr_sdeps = 0;
	do
		ret = TC_GROW(c->sdeps, c->cap_sdeps, op->nr_deps, 64);
	while (!ret && c->cap_sdeps <= op->nr_deps);
	if (ret)
		return ret;
	memcpy(c->sdeps, c->plan.deps + op->dep_first, op->nr_deps * sizeof(*c->sdeps));
	c->nr_sdeps = op->nr_deps;
	/* the workers run with the NVMe tier, and only a plan with it has
	 * pinned-level ops (tc_plan_check) */
	if (!c->sthread_on)
		return -EINVAL;
	ret = pfreed_deps(c, t->poff, t->bytes);
	return ret ?: stage_push(c, &c->opev[k], kind, t, op->tensor, c->sdeps, c->nr_sdeps);
}

/* ---- copies ------------------------------------------------------------ */

/*
 * Copy batches: inside issue_at (c->cb_on), a copy joins its stream's
 * batch instead of going out, and its op's event is recorded when the batch
 * does: at the end of issue_at, or before anything else is queued on that
 * stream (a wait, a record), or once anything looks at one of the batch's
 * events (xev_known_done). So the stream sees the same order as copy by
 * copy, with one event record per run of copies (bev_record), and the run
 * goes out in one device call or one call per copy, whichever has cost the
 * caller less lately (cb_copy).
 */
static int cb_add(struct tencache_cache *c, struct tc_cbatch *b, void *s, int dir,
		  void *dst, const void *src, uint64_t len, struct tc_xev *done, uint32_t id)
{
	if (b->n == b->cap) {
		uint32_t nc = b->cap ? 2 * b->cap : 32;
		void **d = realloc(b->dst, nc * sizeof(*d));
		const void **sr = d ? realloc(b->src, nc * sizeof(*sr)) : NULL;
		uint64_t *l = sr ? realloc(b->len, nc * sizeof(*l)) : NULL;
		struct tc_xev **ev = l ? realloc(b->ev, nc * sizeof(*ev)) : NULL;
		uint32_t *ids = ev ? realloc(b->id, nc * sizeof(*ids)) : NULL;

		/* each grown array is kept: a failure leaves b consistent */
		if (d)
			b->dst = d;
		if (sr)
			b->src = sr;
		if (l)
			b->len = l;
		if (ev)
			b->ev = ev;
		if (!ids)
			return -ENOMEM;
		b->id = ids;
		b->cap = nc;
	}
	b->s = s;
	b->dir = dir;
	b->dst[b->n] = dst;
	b->src[b->n] = src;
	b->len[b->n] = len;
	b->ev[b->n] = done;
	b->id[b->n++] = id;
	done->cb = 1;
	return 0;
}

void tc_exec_bev_put(struct tencache_cache *c, struct tc_bev *b)
{
	if (b && !--b->refs) {
		b->next = c->bev_free;
		c->bev_free = b;
	}
}

/*
 * The n copies just queued on s end at one record, made once: each event
 * of ev takes it as its new instance (in stream order, as xev_record).
 */
static int bev_record(struct tencache_cache *c, void *s, struct tc_xev *const *ev, uint32_t n)
{
	struct tc_bev *b = c->bev_free;
	int ret;

	if (b) {
		c->bev_free = b->next;
	} else {
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		ret = c->dev->ops->event_create(c->dev, 1, &b->dev);	/* timed: gprobe */
		if (ret) {
			free(b);
			return ret;
		}
		b->all = c->bev_all;
		c->bev_all = b;
	}
	ret = c->dev->ops->record(c->dev, b->dev, s);
	if (ret) {
		b->next = c->bev_free;
		c->bev_free = b;
		return ret;
	}
	b->wait_s[0] = b->wait_s[1] = b;	/* none: no stream is b (NULL is one) */
	for (uint32_t i = n; i--;) {
		struct tc_xev *e = ev[i];

		tc_exec_bev_put(c, e->bev);
		e->bev = b;
		b->refs++;
		xev_new_instance(c, e);
		e->rec_s = s;
		/* one place on the stream for all: one found done proves all */
		e->rec_o = i == n - 1 ? sorder_note(c, s, e) : ev[n - 1]->rec_o;
		e->rec_seq = ev[n - 1]->rec_seq;
	}
	return 0;
}

/*
 * The copies of a run, batched (one device call: cuMemcpyBatchAsync_v2) or
 * one by one: drivers differ, and one batched call has cost more CPU than
 * its copies one by one (session 14, an H200: 2.4 against 1.7 us a copy).
 * Each way's CPU per copy is a moving average of the runs it made; the
 * cheaper goes, and the other is tried again every CB_RETRY runs. Host
 * mode batches (its batch is the same queue pushes: nothing to weigh).
 */
#define CB_RETRY	16
static int cb_copy(struct tencache_cache *c, struct tc_cbatch *b, uint32_t n)
{
	uint64_t t0, ns;
	int ret = 0, one;

	if (n == 1)
		return c->dev->ops->copy(c->dev, b->s, b->dir, b->dst[0], b->src[0], b->len[0]);
	one = !c->cb_ns[0] ? 0 : !c->cb_ns[1] ? 1 : c->cb_ns[1] < c->cb_ns[0];
	if (!(++c->cb_runs % CB_RETRY))
		one = !one;
	if (c->host_mode || !c->dev->ops->copy_batch)
		one = !c->dev->ops->copy_batch;
	t0 = tc_now_ns();
	if (one)
		for (uint32_t i = 0; i < n && !ret; i++)
			ret = c->dev->ops->copy(c->dev, b->s, b->dir, b->dst[i], b->src[i], b->len[i]);
	else
		ret = c->dev->ops->copy_batch(c->dev, b->s, b->dir, b->dst, b->src, b->len, n);
	ns = (tc_now_ns() - t0) / n;
	c->cb_ns[one] = c->cb_ns[one] ? (3 * c->cb_ns[one] + ns) / 4 : ns ?: 1;
	return ret;
}

static int cb_flush(struct tencache_cache *c, struct tc_cbatch *b)
{
	uint32_t n = b->n;
	int ret = 0;

	if (!n)
		return 0;
	b->n = 0;	/* before the records: xev_record flushes its stream */
	if (c->copy_lag_ns)	/* test: a slow link (tc_exec_test_lag) */
		ret = c->dev->ops->spin(c->dev, b->s, n * c->copy_lag_ns);
	ret = ret ?: cb_copy(c, b, n);
	if (!ret && n > 1)
		ret = bev_record(c, b->s, b->ev, n);
	for (uint32_t i = 0; i < n; i++) {
		b->ev[i]->cb = 0;
		if (!ret && n == 1)
			ret = xev_record(c, b->ev[i], b->s);
		if (ret)	/* not there after all: no lies */
			c->t[b->id[i]].valid &= b->dir == TENCACHE_COPY_H2D ? ~TC_V_GPU : ~TC_V_PINNED;
	}
	return ret;
}

static int cb_flush_s(struct tencache_cache *c, void *s)
{
	for (int i = 0; i < 2; i++)
		if (c->cb[i].n && c->cb[i].s == s)
			return cb_flush(c, &c->cb[i]);
	return 0;
}

static int cb_flush_all(struct tencache_cache *c)
{
	int r0 = cb_flush(c, &c->cb[0]), r1 = cb_flush(c, &c->cb[1]);

	return r0 ?: r1;
}

/* len bytes of tensor id on stream s (NULL: its direction's copy stream,
 * where copies may batch); done recorded after. */
static int copy_raw(struct tencache_cache *c, void *s, int dir, void *dst, const void *src,
		    uint64_t len, uint32_t id, struct tc_xev *done)
{
	int h2d = dir == TENCACHE_COPY_H2D, kind = h2d ? TC_TL_H2D : TC_TL_D2H;
	int ret;

	c->st.link_bytes[!h2d] += len;
	if (!s && c->cb_on)
		return cb_add(c, &c->cb[!h2d], h2d ? c->h2d : c->d2h, dir, dst, src, len, done, id);
	if (!s)
		s = h2d ? c->h2d : c->d2h;
	ret = tc_exec_timeline_mark(c, s, kind, id, 0);
	if (!ret && c->copy_lag_ns)	/* test: a slow link (tc_exec_test_lag) */
		ret = c->dev->ops->spin(c->dev, s, c->copy_lag_ns);
	ret = ret ?: c->dev->ops->copy(c->dev, s, dir, dst, src, len);
	ret = ret ?: tc_exec_timeline_mark(c, s, kind, id, 1);
	return ret ?: xev_record(c, done, s);
}

/* Tensor t between pinned memory and the GPU arena (dir: TENCACHE_COPY_*). */
static int copy_tensor(struct tencache_cache *c, int dir, struct tc_tstate *t, uint32_t id,
		       struct tc_xev *done)
{
	void *gpu = gptr(c, t->goff), *pin = pptr(c, t->poff);

	return dir == TENCACHE_COPY_H2D ? copy_raw(c, NULL, dir, gpu, pin, t->bytes, id, done)
					: copy_raw(c, NULL, dir, pin, gpu, t->bytes, id, done);
}

/* ---- gated copies ------------------------------------------------------- */

/*
 * A gated FETCH (plan.h: the value is a host op's output) must not hold the
 * H2D stream's later copies behind its host op. Where the ops run in order
 * (TENCACHE_CACHE_DETACH_FIFO) and a stream can wait for a host event
 * without its caller (a GPU with mapped words, or host mode), a copy whose
 * op still runs goes on a stream of its own, c->gstream, behind its waits,
 * and nothing waits on the CPU (fetch_stream). Otherwise its space and stream waits are taken
 * at the issue point and the copy waits in c->gq until the op is done. The
 * queue is polled at each issue point once a host op has finished since the
 * last poll; anything that looks at the copy's event first sends it out,
 * waiting for the host op if it must (xev_*): the caller then issues nothing
 * until that op ends (OPT-13B on an H100: the caller spent 58% of its time
 * there, in staging jobs on pinned space such a copy read, and the disk
 * went without jobs). So copies of host ops' outputs go in the order the
 * ops finish, and the others go past them.
 */
static int gate_issue(struct tencache_cache *c, uint32_t i)
{
	struct tc_gated g = c->gq[i];
	struct tc_xev *e = &c->opev[g.k];
	int ret;

	memmove(c->gq + i, c->gq + i + 1, (c->gq_nr - i - 1) * sizeof(*c->gq));
	c->gq_nr--;
	e->gate = 0;
	ret = copy_raw(c, NULL, TENCACHE_COPY_H2D, g.dst, g.src, g.len, g.id, e);
	if (ret)	/* not there after all: no lies */
		c->t[g.id].valid &= ~TC_V_GPU;
	return ret;
}

static uint32_t gate_find(const struct tencache_cache *c, const struct tc_xev *e)
{
	uint32_t i = 0;

	while (i < c->gq_nr && &c->opev[c->gq[i].k] != e)
		i++;
	return i;
}

/* e's copy goes out now, after its host op (block: wait for the op). */
static int gate_send(struct tencache_cache *c, struct tc_xev *e, int block)
{
	uint32_t i = gate_find(c, e);

	if (i == c->gq_nr) {
		e->gate = 0;
		return -EINVAL;	/* not queued: a bug */
	}
	if (!tc_hev_reached(c->dev, c->gq[i].h, c->gq[i].inst)) {
		if (!block)
			return 0;
		tc_hev_wait(c->dev, c->gq[i].h, c->gq[i].inst);
	}
	return gate_issue(c, i);
}

/* The copies whose host ops are done go out (cheap when none finished). */
static int gate_poll(struct tencache_cache *c)
{
	uint64_t n = __atomic_load_n(&c->det_done_n, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (!c->gq_nr || n == c->gq_seen)
		return 0;
	c->gq_seen = n;
	for (uint32_t i = 0; i < c->gq_nr && !ret;)
		if (tc_hev_reached(c->dev, c->gq[i].h, c->gq[i].inst))
			ret = gate_issue(c, i);
		else
			i++;
	return ret;
}

/* Every queued copy goes out, waiting for the host ops (leaving a plan). */
int tc_exec_gate_flush(struct tencache_cache *c)
{
	int ret = 0;

	while (c->gq_nr && !ret) {
		tc_hev_wait(c->dev, c->gq[0].h, c->gq[0].inst);
		ret = gate_issue(c, 0);
	}
	return ret;
}

/* ---- GPU-timeline hits and stalls -------------------------------------- */

/*
 * Stream s is about to wait for copy event copy, which the CPU saw pending:
 * a timing event on s before the acquire's first such wait (its *probe)
 * marks when the stream reached the acquire; tc_exec_gpu_resolve compares.
 */
static int gprobe(struct tencache_cache *c, void *s, void **probe, void *copy,
		  struct tc_bev *bev, int fetch)
{
	int ret;

	if (TC_GROW(c->gp, c->gp_cap, c->gp_nr, 256))
		return -ENOMEM;
	if (!*probe) {
		ret = tc_exec_timing_event(c, probe);
		ret = ret ?: c->dev->ops->record(c->dev, *probe, s);
		if (ret)
			return ret;
	}
	if (bev)	/* its record is not reused until resolved */
		bev->refs++;
	c->gp[c->gp_nr++] = (struct tc_gprobe){ .probe = *probe, .copy = copy, .bev = bev,
						.acq = c->gp_acq, .fetch = fetch };
	return 0;
}

/* The acquire's probes are in; cand: a hit unless one of its FETCHes was late. */
static void gprobe_close(struct tencache_cache *c, uint32_t first, int cand)
{
	for (uint32_t k = first; k < c->gp_nr; k++)
		c->gp[k].cand = cand;
	c->gp_acq++;
}

/* Once the probes' events are done: each acquire's hit and stall, into stats. */
int tc_exec_gpu_resolve(struct tencache_cache *c)
{
	uint32_t k = 0;
	int ret = 0;

	while (k < c->gp_nr) {
		uint32_t acq = c->gp[k].acq;
		uint64_t stall = 0, ns;
		int late = 0;

		for (; k < c->gp_nr && c->gp[k].acq == acq; k++) {
			struct tc_gprobe *g = &c->gp[k];

			ret = ret ?: c->dev->ops->sync(c->dev, g->probe);
			ret = ret ?: c->dev->ops->sync(c->dev, g->copy);
			/* copy end - probe, 0 when the copy ended first */
			if (ret || c->dev->ops->elapsed(c->dev, g->probe, g->copy, &ns))
				continue;
			if (ns > stall)
				stall = ns;
			if (ns && g->fetch)
				late = 1;
		}
		for (uint32_t j = k; j-- && c->gp[j].acq == acq;) {
			tc_exec_bev_put(c, c->gp[j].bev);
			c->gp[j].bev = NULL;
		}
		c->st.gpu_stall_ns += stall;
		c->last_gpu_stall += stall;
		if (c->gp[k - 1].cand && !late) {
			c->st.gpu_hits++;
			c->last_gpu_hits++;
		}
	}
	c->gp_nr = 0;
	return ret;
}

/* ---- planned mode: issue the ops of access i -------------------------- */

static int wait_deps(struct tencache_cache *c, void *s, const struct tc_op *op)
{
	for (uint32_t d = 0; d < op->nr_deps; d++) {
		int ret = xev_stream_wait(c, s, dep_ev(c, c->plan.deps[op->dep_first + d]));

		if (ret)
			return ret;
	}
	return 0;
}

/*
 * A gated FETCH's host dependency, if still running: *h and the instance.
 * Its other dependencies (none from the planner) are waited for here.
 */
static int gate_hold(struct tencache_cache *c, uint32_t k, struct tc_tstate *t)
{
	const struct tc_op *op = &c->plan.ops[k];
	struct tc_hev *h = NULL;

	for (uint32_t d = 0; d < op->nr_deps; d++) {
		struct tc_xev *x = dep_ev(c, c->plan.deps[op->dep_first + d]);

		if (ev_is_dev(x))
			continue;
		if (h)
			return 0;	/* two host ops: the caller waits, as before */
		h = &x->h;
	}
	return h && !tc_hev_done(c->dev, h);
}

static int gate_queue(struct tencache_cache *c, uint32_t k, struct tc_tstate *t)
{
	const struct tc_op *op = &c->plan.ops[k];
	struct tc_gated *g;
	int ret = 0;

	for (uint32_t d = 0; d < op->nr_deps && !ret; d++) {
		struct tc_xev *x = dep_ev(c, c->plan.deps[op->dep_first + d]);

		if (ev_is_dev(x))
			ret = xev_stream_wait(c, c->h2d, x);
	}
	if (ret || (ret = TC_GROW(c->gq, c->gq_cap, c->gq_nr, 64)))
		return ret;
	g = &c->gq[c->gq_nr++];
	*g = (struct tc_gated){ .k = k, .id = op->tensor, .dst = gptr(c, t->goff),
				.src = pptr(c, t->poff), .len = t->bytes };
	for (uint32_t d = 0; d < op->nr_deps; d++) {
		struct tc_xev *x = dep_ev(c, c->plan.deps[op->dep_first + d]);

		if (!ev_is_dev(x)) {
			g->h = &x->h;
			g->inst = tc_hev_latest(c->dev, &x->h);
		}
	}
	c->opev[k].gate = 1;
	c->st.held_copies++;
	return 0;
}

/*
 * The stream of FETCH op's copy and waits: see "gated copies". Only a copy
 * whose host op still runs goes on gstream. The ops end in order, but the
 * copies are issued in the plan's order: one whose op is done, queued
 * behind a copy waiting for a later op, waited for that op too, and hung
 * where that op waited for the caller to get the copy (cache_gated).
 */
static void *fetch_stream(struct tencache_cache *c, const struct tc_op *op)
{
	if (!op->gated || !c->gstream || !(c->p.flags & TENCACHE_CACHE_DETACH_FIFO) ||
	    (!c->host_mode && !c->hev_words))
		return c->h2d;
	for (uint32_t d = 0; d < op->nr_deps; d++) {
		struct tc_xev *x = dep_ev(c, c->plan.deps[op->dep_first + d]);

		if (!ev_is_dev(x) && !tc_hev_done(c->dev, &x->h))
			return c->gstream;
	}
	return c->h2d;
}

static int issue_op(struct tencache_cache *c, uint32_t k)
{
	const struct tc_op *op = &c->plan.ops[k];
	struct tc_tstate *t = &c->t[op->tensor];
	struct tc_xev *e = &c->opev[k];
	const int32_t *deps = c->plan.deps + op->dep_first;
	void *s;
	int ret = 0;

	/* tc_exec_test_fail: this allocation meets a "fragmented" arena */
	if (c->test_fail[0] && (op->kind == TC_OP_STAGE_IN || op->kind == TC_OP_PALLOC) &&
	    !--c->test_fail[0]) {
		c->pinned_enomem = 1;
		return -ENOMEM;
	}
	if (c->test_fail[1] && (op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC) &&
	    !--c->test_fail[1])
		return -ENOMEM;
	switch (op->kind) {
	case TC_OP_FETCH:
		s = fetch_stream(c, op);
		ret = c->op_goff ? galloc_at(c, t, c->op_goff[k]) : galloc(c, t);
		ret = ret ?: gfreed_wait(c, s, t->goff, t->bytes);
		if (!ret && op->gated && s == c->h2d && gate_hold(c, k, t))
			ret = gate_queue(c, k, t);
		else
			ret = ret ?: wait_deps(c, s, op);
		if (!ret && !e->gate)	/* on h2d in its batch (NULL), else on s */
			ret = copy_raw(c, s == c->h2d ? NULL : s, TENCACHE_COPY_H2D,
				       gptr(c, t->goff), pptr(c, t->poff), t->bytes, op->tensor, e);
		if (!ret)	/* on failure the on-demand path takes over: no lies */
			t->valid |= TC_V_GPU;
		break;
	case TC_OP_ALLOC:
		/* the op that overwrites it waits for this event */
		ret = c->op_goff ? galloc_at(c, t, c->op_goff[k]) : galloc(c, t);
		ret = ret ?: gfreed_wait(c, c->h2d, t->goff, t->bytes);
		ret = ret ?: xev_record(c, e, c->h2d);
		break;
	case TC_OP_WRITEBACK:
		ret = wait_deps(c, c->d2h, op);
		ret = ret ?: copy_tensor(c, TENCACHE_COPY_D2H, t, op->tensor, e);
		if (!ret)
			t->valid |= TC_V_PINNED;
		break;
	case TC_OP_DROP:
		if (t->goff >= 0) {
			ret = tencache_arena_free(c->garena, t->goff);
			ret = ret ?: freed_push(c, &c->gfreed, t->goff, t->bytes, deps, op->nr_deps);
		}
		xev_signal_now(c, e);
		t->goff = -1;
		t->valid &= ~TC_V_GPU;
		break;
	case TC_OP_STAGE_IN:
		ret = palloc_at(c, t, c->op_poff ? c->op_poff[k] : -1);
		ret = ret ?: stage_fill(c, k, TC_SJ_READ, t);
		if (!ret)
			t->valid |= TC_V_PINNED;
		break;
	case TC_OP_PALLOC:
		/* ready when its last users and its space's are done: the
		 * settler signals it, and later ops wait for it in their place */
		ret = palloc_at(c, t, c->op_poff ? c->op_poff[k] : -1);
		ret = ret ?: stage_fill(c, k, TC_SJ_SETTLE, t);
		break;
	case TC_OP_STAGE_OUT:
		ret = stage_push(c, e, TC_SJ_WRITE, t, op->tensor, deps, op->nr_deps);
		if (!ret)
			t->valid |= TC_V_NVME;
		break;
	case TC_OP_PDROP:
		/* the space is free now: what fills it next waits for its users */
		if (t->poff >= 0 && !t->pinned_home) {
			ret = pfree(c, t->poff);
			ret = ret ?: freed_push(c, &c->pfreed, t->poff, t->bytes, deps, op->nr_deps);
		}
		xev_signal_now(c, e);
		if (!t->pinned_home) {
			t->poff = -1;
			t->valid &= ~TC_V_PINNED;
		}
		break;
	default:
		ret = -EINVAL;
	}
	return ret;
}

/* ---- on-demand mode (profiling, and after an order change) ------------ */

static int od_make_room_gpu(struct tencache_cache *c, uint64_t bytes);

/* Bring t's newest value into pinned memory, synchronously. */
static int od_to_pinned(struct tencache_cache *c, uint32_t id)
{
	struct tc_tstate *t = &c->t[id];
	int ret;

	if (t->valid & TC_V_PINNED)
		return 0;
	if (t->valid & TC_V_GPU) {
		ret = palloc(c, t);
		if (ret)
			return ret;
		/* after the kernels that wrote it: ready is its last GPU use, on
		 * the compute stream, which may lag far behind this thread */
		ret = xev_stream_wait(c, c->d2h, &t->ready);
		ret = ret ?: copy_tensor(c, TENCACHE_COPY_D2H, t, id, &t->ready);
		ret = ret ?: xev_sync(c, &t->ready);
		t->valid |= TC_V_PINNED;
		return ret;
	}
	if (t->valid & TC_V_NVME) {
		ret = palloc(c, t);
		ret = ret ?: tc_exec_stage_sync(c, id, 0);
		if (!ret)
			t->valid |= TC_V_PINNED;
		return ret;
	}
	/* never written: zero-filled */
	ret = palloc(c, t);
	if (!ret) {
		memset(pptr(c, t->poff), 0, t->bytes);
		t->valid |= TC_V_PINNED;
	}
	return ret;
}

/* t's GPU copy goes, written back first where it is the only one. */
static int od_evict_gpu(struct tencache_cache *c, uint32_t id)
{
	struct tc_tstate *t = &c->t[id];
	int ret;

	if (t->valid == TC_V_GPU) {
		ret = od_to_pinned(c, id);
		if (ret)
			return ret;
	}
	/* the copy or kernels that used it must be done */
	ret = xev_sync(c, &t->ready);
	ret = ret ?: tencache_arena_free(c->garena, t->goff);
	if (ret)
		return ret;
	t->goff = -1;
	t->valid &= ~TC_V_GPU;
	return 0;
}

/*
 * Evict least recently used GPU tensors not held until bytes fit. A host
 * op's tensors (held on the host, pinned valid) may lose their GPU copy:
 * detached optimizer steps hold gradients while backward goes on.
 */
static int od_make_room_gpu(struct tencache_cache *c, uint64_t bytes)
{
	struct tencache_arena_stats st;

	for (;;) {
		uint32_t victim = UINT32_MAX;
		uint64_t best = UINT64_MAX;
		int ret;

		if (tencache_arena_stats(c->garena, &st))
			return -EIO;
		if (st.largest_free >= bytes && st.used + bytes <= c->p.gpu_budget)
			return 0;
		for (uint32_t i = 0; i < c->nr; i++)
			if (c->t[i].goff >= 0 && (!c->t[i].held || c->t[i].held_host) &&
			    c->t[i].lru < best) {
				best = c->t[i].lru;
				victim = i;
			}
		if (victim == UINT32_MAX)
			return 0;	/* let galloc report it */
		ret = od_evict_gpu(c, victim);
		if (ret)
			return ret;
	}
}

/*
 * On-demand GPU placement. An op's tensors stay where they were handed out,
 * so where each goes decides whether the op's next one fits. A tensor's
 * window is free of held tensors and is chosen by what it evicts: the least
 * recently used (empty space first), then the fewest bytes, then big sizes
 * high and small ones low. Only windows that keep the held-free space whole
 * enough qualify: frag, the held-free bytes outside its largest run, stays
 * within the arena less the largest op. A window at an end of the largest
 * run leaves frag as it was, so every op up to that size fits; a hit that
 * would break the rule (a resident held where it lies) is moved instead.
 * The largest op is the learnt step's; before a step is learnt it is the
 * whole arena (frag 0: the held tensors gather at the two ends).
 */
struct od_ext {
	uint64_t off, end, lru;
	uint32_t id;
	uint8_t fixed;		/* held on the GPU: cannot go */
};

struct od_win {
	uint64_t x, frag, lru, evict;
	int ok;
};

struct od_scan {
	struct od_ext *e;	/* GPU residents by offset */
	uint64_t *xs;		/* scratch: a gap's candidate windows */
	uint32_t *dq;		/* scratch: the sweep's lru maxima */
	uint32_t n;
	uint64_t cap, align, held, allowed;
	uint64_t p1, p2;	/* the two largest held-free runs */
	uint32_t p1_at;		/* the fixed extent that ends the largest (n: cap) */
};

static int od_ext_cmp(const void *a, const void *b)
{
	const struct od_ext *p = a, *q = b;

	return p->off < q->off ? -1 : p->off > q->off;
}

static int u64_cmp(const void *a, const void *b)
{
	const uint64_t *p = a, *q = b;

	return *p < *q ? -1 : *p > *q;
}

static void od_scan_free(struct od_scan *s)
{
	free(s->e);
	free(s->xs);
	free(s->dq);
}

/* The residents and held-free runs, for a tensor of len bytes. */
static int od_scan(struct tencache_cache *c, struct od_scan *s, uint64_t len)
{
	struct tencache_arena_stats st;
	uint64_t maxop, g0 = 0;
	uint32_t n = 0;

	memset(s, 0, sizeof(*s));
	if (tencache_arena_stats(c->garena, &st))
		return -EIO;
	for (uint32_t i = 0; i < c->nr; i++)
		n += c->t[i].goff >= 0;
	s->e = malloc(n * sizeof(*s->e) + 1);
	s->xs = malloc((4 * (uint64_t)n + 2) * sizeof(*s->xs));
	s->dq = malloc(n * sizeof(*s->dq) + 1);
	if (!s->e || !s->xs || !s->dq) {
		od_scan_free(s);
		return -ENOMEM;
	}
	s->cap = st.capacity;
	s->align = st.alignment;
	for (uint32_t i = 0; i < c->nr; i++) {
		const struct tc_tstate *r = &c->t[i];

		if (r->goff < 0)
			continue;
		s->e[s->n] = (struct od_ext){ .off = r->goff, .lru = r->lru, .id = i,
					      .end = r->goff + TC_ALIGN_UP(r->bytes, s->align),
					      .fixed = r->held && !r->held_host };
		if (s->e[s->n].fixed)
			s->held += s->e[s->n].end - s->e[s->n].off;
		s->n++;
	}
	qsort(s->e, s->n, sizeof(*s->e), od_ext_cmp);
	maxop = c->od_max_op > s->held + len ? c->od_max_op : s->held + len;
	if (!c->od_max_op)
		maxop = s->cap;		/* no step learnt yet */
	s->allowed = maxop < s->cap ? s->cap - maxop : 0;
	for (uint32_t k = 0; k <= s->n; k++) {
		uint64_t g1 = k < s->n ? s->e[k].off : s->cap;

		if (k < s->n && !s->e[k].fixed)
			continue;
		if (g1 - g0 > s->p1) {
			s->p2 = s->p1;
			s->p1 = g1 - g0;
			s->p1_at = k;
		} else if (g1 - g0 > s->p2) {
			s->p2 = g1 - g0;
		}
		if (k < s->n)
			g0 = s->e[k].end;
	}
	return 0;
}

/* w better than b */
static int od_win_better(const struct od_win *w, const struct od_win *b, int high)
{
	if (w->ok != b->ok)
		return w->ok;
	if (!w->ok && w->frag != b->frag)
		return w->frag < b->frag;
	if (w->lru != b->lru)
		return w->lru < b->lru;
	if (w->evict != b->evict)
		return w->evict < b->evict;
	return high ? w->x > b->x : w->x < b->x;
}

/* frag after a held tensor takes [x, x+len) of the run [g0, g1) ending at fixed extent k */
static uint64_t od_frag(const struct od_scan *s, uint32_t k, uint64_t g0, uint64_t g1,
			uint64_t x, uint64_t len)
{
	uint64_t a = x - g0, b = g1 - x - len, p = k == s->p1_at ? s->p2 : s->p1;

	if (a > p)
		p = a;
	if (b > p)
		p = b;
	return s->cap - s->held - len - p;
}

/*
 * Best window of len in the run [g0, g1) over its evictable extents
 * e[i0, k): candidates start or end at the run's ends or an extent's. A
 * sweep keeps the extents overlapping [x, x+len) (e[lo, hi)) and, in dq,
 * the indices of their decreasing lru maxima.
 */
static void od_run_best(const struct od_scan *s, uint32_t i0, uint32_t k, uint64_t g0,
			uint64_t g1, uint64_t len, int high, struct od_win *best)
{
	const struct od_ext *e = s->e;
	uint32_t nx = 0, lo = i0, hi = i0, qh = 0, qt = 0;
	uint64_t *xs = s->xs, evict = 0;

	xs[nx++] = g0;
	xs[nx++] = g1 - len;
	for (uint32_t i = i0; i < k; i++) {
		if (e[i].off + len <= g1)
			xs[nx++] = e[i].off;
		if (e[i].end + len <= g1)
			xs[nx++] = e[i].end;
		if (e[i].end >= g0 + len)
			xs[nx++] = e[i].end - len;
		if (e[i].off >= g0 + len)
			xs[nx++] = e[i].off - len;
	}
	qsort(xs, nx, sizeof(*xs), u64_cmp);
	for (uint32_t j = 0; j < nx; j++) {
		uint64_t x = xs[j];
		struct od_win w;

		if (j && x == xs[j - 1])
			continue;
		for (; hi < k && e[hi].off < x + len; hi++) {
			while (qt > qh && e[s->dq[qt - 1]].lru <= e[hi].lru)
				qt--;
			s->dq[qt++] = hi;
			evict += e[hi].end - e[hi].off;
		}
		for (; lo < hi && e[lo].end <= x; lo++)
			evict -= e[lo].end - e[lo].off;
		while (qt > qh && s->dq[qh] < lo)
			qh++;
		w.x = x;
		w.frag = od_frag(s, k, g0, g1, x, len);
		w.ok = w.frag <= s->allowed;
		w.lru = qt > qh ? e[s->dq[qh]].lru : 0;
		w.evict = evict;
		if (best->frag == UINT64_MAX || od_win_better(&w, best, high))
			*best = w;
	}
}

/* The best window of len over every held-free run (frag UINT64_MAX: none fits). */
static void od_best(struct od_scan *s, uint64_t len, struct od_win *best)
{
	uint64_t g0 = 0;
	uint32_t i0 = 0;

	*best = (struct od_win){ .frag = UINT64_MAX };
	for (uint32_t k = 0; k <= s->n; k++) {
		uint64_t g1 = k < s->n ? s->e[k].off : s->cap;

		if (k < s->n && !s->e[k].fixed)
			continue;
		if (g1 - g0 >= len)
			od_run_best(s, i0, k, g0, g1, len, len >= s->cap / 16, best);
		if (k < s->n) {
			g0 = s->e[k].end;
			i0 = k + 1;
		}
	}
}

/* GPU space for t (not resident), evicting what its window holds. */
static int od_galloc(struct tencache_cache *c, struct tc_tstate *t)
{
	struct od_scan s;
	struct od_win best;
	uint64_t len;
	int ret;

	if (t->goff >= 0)
		return 0;
	if (c->garena_shaped) {	/* a plan's arena, kept (tc_exec_od_plain_gpu) */
		ret = od_make_room_gpu(c, t->bytes);
		return ret ?: galloc(c, t);
	}
	ret = od_scan(c, &s, t->bytes);
	if (ret)
		return ret;
	len = TC_ALIGN_UP(t->bytes, s.align);
	od_best(&s, len, &best);
	if (best.frag == UINT64_MAX) {
		tc_err(c->tc, "cache: no GPU space for %llu bytes at access %u (budget %llu, held by the open op %llu, largest run free of them %llu)%s",
		       (unsigned long long)t->bytes, c->pos, (unsigned long long)c->p.gpu_budget,
		       (unsigned long long)s.held, (unsigned long long)s.p1,
		       s.held + len > s.cap ? ": the op needs more than the budget; raise gpu_budget" : "");
		ret = -ENOMEM;
	}
	for (uint32_t k = 0; k < s.n && !ret; k++)
		if (!s.e[k].fixed && s.e[k].off < best.x + len && s.e[k].end > best.x)
			ret = od_evict_gpu(c, s.e[k].id);
	ret = ret ?: tencache_arena_alloc_at(c->garena, t->bytes, best.x);
	if (!ret)
		t->goff = best.x;
	od_scan_free(&s);
	return ret;
}

/*
 * A hit: 1 when t, held where it lies, would break the placement rule and
 * a window elsewhere keeps it (then its GPU copy has gone, to come back in
 * that window); 0 when it stays.
 */
static int od_move_hit(struct tencache_cache *c, uint32_t id)
{
	struct tc_tstate *t = &c->t[id];
	struct od_scan s;
	struct od_win best;
	uint64_t g0 = 0, len, frag = UINT64_MAX;
	int ret;

	if (c->garena_shaped)
		return 0;
	ret = od_scan(c, &s, t->bytes);
	if (ret)
		return ret;
	len = TC_ALIGN_UP(t->bytes, s.align);
	for (uint32_t k = 0; k <= s.n; k++) {	/* t's own run */
		uint64_t g1 = k < s.n ? s.e[k].off : s.cap;

		if (k < s.n && !s.e[k].fixed)
			continue;
		if (g0 <= (uint64_t)t->goff && (uint64_t)t->goff < g1) {
			frag = od_frag(&s, k, g0, g1, t->goff, len);
			break;
		}
		if (k < s.n)
			g0 = s.e[k].end;
	}
	ret = 0;
	if (frag > s.allowed) {
		od_best(&s, len, &best);
		if (best.frag < frag)
			ret = od_evict_gpu(c, id) ?: 1;
	}
	od_scan_free(&s);
	return ret;
}

/*
 * Swap space for a tensor, kept once staged. A full swap first gives back
 * the slots of values whose NVMe copy is stale (written since) or not the
 * only one (pinned holds it too): staged out again, a value takes a slot
 * anew. With keep_homed, the plan's NVMe-homed values keep theirs (slots
 * for good, used by its staging). On demand
 * stages out values the plan may not, so without this a swap smaller than
 * all tensors filled up on demand (OPT-13B at 10%, a scaled-down host run).
 * -ENOMEM when full (the caller reports it: tc_exec_swap_full_err).
 */
int tc_exec_swap_slot(struct tencache_cache *c, uint32_t id, int keep_homed)
{
	struct tc_tstate *t = &c->t[id];
	uint64_t off;
	int ret;

	if (t->noff >= 0)
		return 0;
	ret = tencache_swap_alloc(c->swap, t->bytes, &off);
	for (uint32_t i = 0; ret && i < c->nr; i++) {
		struct tc_tstate *r = &c->t[i];

		if (r->noff < 0 || (r->valid & (TC_V_NVME | TC_V_PINNED)) == TC_V_NVME ||
		    (keep_homed && !r->pinned_home))
			continue;
		if (!tencache_swap_free(c->swap, r->noff)) {
			r->noff = -1;
			r->valid &= ~TC_V_NVME;
			ret = tencache_swap_alloc(c->swap, t->bytes, &off);
		}
	}
	if (!ret)
		t->noff = off;
	return ret;
}

void tc_exec_swap_full_err(struct tencache_cache *c, uint32_t id)
{
	tc_err(c->tc, "cache: NVMe swap full (%llu bytes wanted, no stale slot left to give back); raise nvme_budget (at most the tensors' total, each rounded up to 4 KiB)",
	       (unsigned long long)c->t[id].bytes);
}

/* Synchronous NVMe transfer of a tensor between its pinned space and swap. */
int tc_exec_stage_sync(struct tencache_cache *c, uint32_t id, int write)
{
	struct tc_tstate *t = &c->t[id];
	struct tencache_stage_cqe cqe;
	int ret;

	ret = tc_exec_swap_slot(c, id, c->have_plan);
	if (ret) {
		tc_exec_swap_full_err(c, id);
		return ret;
	}
	ret = write ? tencache_stage_write(c->stage, c->nvme_fd, pptr(c, t->poff), t->bytes,
					   t->noff, 0, 0)
		    : tencache_stage_read(c->stage, c->nvme_fd, pptr(c, t->poff), t->bytes,
					  t->noff, 0, 0);
	ret = ret ?: tencache_stage_submit(c->stage);
	if (ret < 0)
		return ret;
	disk_busy(c, write, true);
	ret = tencache_stage_wait(c->stage, 1, &cqe, 1, 0);
	disk_busy(c, write, false);
	if (ret != 1)
		return ret < 0 ? ret : -EIO;
	if (cqe.res < 0)
		return (int)cqe.res;
	c->st.link_bytes[write ? 3 : 2] += t->bytes;
	return 0;
}

/* Synchronous copy of a tensor between its GPU and pinned spaces. */
int tc_exec_copy_sync(struct tencache_cache *c, uint32_t id, int dir)
{
	struct tc_tstate *t = &c->t[id];
	int ret = copy_tensor(c, dir == TENCACHE_COPY_H2D ? TENCACHE_COPY_H2D : TENCACHE_COPY_D2H,
			      t, id, &t->ready);

	return ret ?: xev_sync(c, &t->ready);
}

/* Every GPU resident not held goes (written back first where it is the
 * only copy): on demand after a laid-out plan, whose residents sit where
 * the planner put them, allocations start from a compact arena. */
int tc_exec_od_clear_gpu(struct tencache_cache *c)
{
	return od_make_room_gpu(c, UINT64_MAX);
}

int tc_exec_od_to_pinned(struct tencache_cache *c, uint32_t id)
{
	return od_to_pinned(c, id);
}

/* Held by a detached op that is done: only the caller's release is left. */
static int held_by_done_op(const struct tencache_cache *c, const struct tc_tstate *t)
{
	return t->det && (t->det <= c->det_base ||
			  __atomic_load_n(&c->det[t->det - c->det_base - 1].done, __ATOMIC_ACQUIRE));
}

/* Not held, or held only by a detached op that is done: its space may move. */
int tc_exec_movable(const struct tencache_cache *c, uint32_t id)
{
	return !c->t[id].held || held_by_done_op(c, &c->t[id]);
}

/*
 * Wait until one more detached op is done (its tensors may then go out);
 * -ENOENT when none is running. Only host work on other threads is waited
 * for: it needs nothing from this thread.
 */
static int wait_one_detached(struct tencache_cache *c)
{
	uint32_t live;

	pthread_mutex_lock(&c->dlock);
	live = c->det_live;
	while (live && c->det_live == live)
		pthread_cond_wait(&c->dcond, &c->dlock);
	pthread_mutex_unlock(&c->dlock);
	return live ? 0 : -ENOENT;
}

/*
 * On demand with an NVMe tier: push least recently used pinned tensors out.
 * The tensors of a finished detached op count too, though the caller has
 * not released them yet (a trainer settles such an op only when it next
 * needs one of them); with none to push out, wait for a running one. Values
 * a plan keeps pinned go last (after a plan ended mid-step): the next plan's
 * start brings them back.
 */
static int od_make_room_pinned(struct tencache_cache *c, uint64_t bytes)
{
	uint32_t victim = UINT32_MAX;
	uint64_t best = UINT64_MAX;
	int ret;

	for (uint32_t i = 0; i < c->nr; i++) {
		struct tc_tstate *t = &c->t[i];
		uint64_t key = t->lru | (uint64_t)t->pinned_home << 63;

		if (t->poff >= 0 && (!t->held || held_by_done_op(c, t)) && key < best) {
			best = key;
			victim = i;
		}
	}
	if (victim == UINT32_MAX)
		return wait_one_detached(c);
	if (c->t[victim].valid == TC_V_PINNED) {
		ret = tc_exec_stage_sync(c, victim, 1);
		if (ret)
			return ret;
		c->t[victim].valid |= TC_V_NVME;
	}
	/* a pending H2D from it must be done before its space is reused */
	ret = xev_sync(c, &c->t[victim].ready);
	ret = ret ?: pfree(c, c->t[victim].poff);
	c->t[victim].poff = -1;
	c->t[victim].valid &= ~TC_V_PINNED;
	return ret;
}

static int od_acquire(struct tencache_cache *c, uint32_t id, unsigned flags, void *s,
		      int *hit)
{
	struct tc_tstate *t = &c->t[id];
	int ret;

	*hit = 0;
	ret = tc_exec_od_plain_gpu(c);	/* after a plan stopped mid-step */
	if (ret)
		return ret;
	if (flags & TENCACHE_ACQ_HOST) {
		ret = od_to_pinned(c, id);
		/* the host rewrites the pinned copy: an H2D copy still reading it
		 * must be done (ready: that copy, or a use ordered after it) */
		if (!ret && (flags & TENCACHE_ACQ_WRITE))
			ret = xev_sync(c, &t->ready);
		if (ret)
			return ret;
		if (flags & TENCACHE_ACQ_WRITE)
			t->valid = TC_V_PINNED;	/* the host rewrites it */
		return 0;
	}
	if (t->valid & TC_V_GPU) {	/* stays where it lies, or moves (od_move_hit) */
		ret = od_move_hit(c, id);
		if (ret < 0)
			return ret;
		*hit = !ret;
	}
	if (*hit) {
		/* resident */
	} else if (!t->valid && (flags & TENCACHE_ACQ_WRITE) && !(flags & TENCACHE_ACQ_READ)) {
		ret = od_galloc(c, t);
		if (ret)
			return ret;
	} else {
		ret = od_to_pinned(c, id);
		/* held: making GPU room writes victims back, and making pinned
		 * room for them must not push this tensor out to NVMe */
		t->held = 1;
		ret = ret ?: od_galloc(c, t);
		t->held = 0;
		/* space kept from an older, now stale copy: after its last use */
		ret = ret ?: xev_stream_wait(c, c->h2d, &t->ready);
		ret = ret ?: copy_tensor(c, TENCACHE_COPY_H2D, t, id, &t->ready);
		if (!ret && !c->host_mode) {
			/* GPU timeline: the copy's end against the stream's arrival
			 * (ready is re-recorded by the op, so a pool event) */
			void *end = NULL, *probe = NULL;

			ret = tc_exec_timing_event(c, &end);
			ret = ret ?: c->dev->ops->record(c->dev, end, c->h2d);
			ret = ret ?: gprobe(c, s, &probe, end, NULL, 1);
		}
		if (ret)
			return ret;
	}
	ret = xev_stream_wait(c, s, &t->ready);
	if (ret)
		return ret;
	if (flags & TENCACHE_ACQ_WRITE)
		t->valid = TC_V_GPU;
	else
		t->valid |= TC_V_GPU;
	return 0;
}

/* ---- quiesce: every copy, staging job and freed range's user done ------- */

/* Detached host ops write their tensors until they are done. */
void tc_exec_wait_detached(struct tencache_cache *c)
{
	pthread_mutex_lock(&c->dlock);
	while (c->det_live)
		pthread_cond_wait(&c->dcond, &c->dlock);
	pthread_mutex_unlock(&c->dlock);
}

int tc_exec_quiesce(struct tencache_cache *c)
{
	int ret;

	tc_exec_wait_detached(c);
	ret = tc_exec_gate_flush(c);	/* their host ops are done now */
	return ret ?: tc_exec_drain(c);
}

/* Every copy and staging job done; detached host ops may go on. */
int tc_exec_drain(struct tencache_cache *c)
{
	int ret = 0;

	if (c->cstream_used && (!c->host_mode || c->lag_s))
		ret = c->dev->ops->stream_sync(c->dev, c->cstream_last);
	if (!ret && c->cstream_used && (!c->host_mode || c->lag_s))
		sorder_synced(c, c->cstream_last);
	ret = ret ?: c->dev->ops->stream_sync(c->dev, c->h2d);
	if (!ret)
		sorder_synced(c, c->h2d);
	ret = ret ?: c->dev->ops->stream_sync(c->dev, c->d2h);
	if (!ret)
		sorder_synced(c, c->d2h);
	/* gated copies: after their host ops, which are done or run on */
	if (c->gstream) {
		ret = ret ?: c->dev->ops->stream_sync(c->dev, c->gstream);
		if (!ret)
			sorder_synced(c, c->gstream);
	}
	/* deferred waits of host ops: of the copies above */
	ret = ret ?: c->dev->ops->stream_sync(c->dev, c->rstream);
	/* every staging job signalled, planned or not (a plan given up waits
	 * for its jobs here before on demand takes the stage) */
	pthread_mutex_lock(&c->slock);
	for (int w = 0; w < TC_SJ_NR; w++)
		while (c->shead[w] || c->sbusy[w])
			pthread_cond_wait(&c->scond, &c->slock);
	pthread_mutex_unlock(&c->slock);
	/* and every other host event of the plan's ops */
	for (uint32_t k = 0; k < c->plan.nr_ops && c->planned; k++)
		if (!ev_is_dev(&c->opev[k]))
			tc_hev_wait(c->dev, &c->opev[k].h, tc_hev_latest(c->dev, &c->opev[k].h));
	/* every user of freed GPU space is done once the streams are; a
	 * freed pinned range's may be a detached host op */
	ret = ret ?: freed_sync(c, &c->gfreed);
	ret = ret ?: freed_sync(c, &c->pfreed);
	if (!ret)
		ret = __atomic_load_n(&c->stage_err, __ATOMIC_ACQUIRE);
	return ret ?: tc_exec_gpu_resolve(c);
}

/* ---- the public API ------------------------------------------------------- */

int tencache_cache_create(struct tencache *tc, struct tencache_cache **cp,
			  const struct tencache_cache_params *p)
{
	struct tencache_cache *c;

	if (!tc || !cp || !p)
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(p->__reserved) / sizeof(p->__reserved[0]); i++)
		if (p->__reserved[i])
			return -EINVAL;
	if (p->__pad || (p->flags & ~(TENCACHE_CACHE_HOST_MODE | TENCACHE_CACHE_TIMELINE |
				 TENCACHE_CACHE_ISSUER | TENCACHE_CACHE_NO_BATCH |
				 TENCACHE_CACHE_NO_LAYOUT | TENCACHE_CACHE_LAYOUT |
				 TENCACHE_CACHE_DETACH_FIFO)) ||
	    ((p->flags & TENCACHE_CACHE_LAYOUT) && (p->flags & TENCACHE_CACHE_NO_LAYOUT)) ||
	    p->policy > TENCACHE_POLICY_10CACHE || !p->gpu_budget ||
	    (p->nvme_budget && !p->nvme_path) || (p->nvme_budget && !p->pinned_budget))
		return -EINVAL;
	for (unsigned i = 0; i < 6; i++) {
		double v = i < 4 ? p->bw[i] : p->duplex_bw[i - 4];

		if (!(v >= 0) || isinf(v))
			return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->tc = tc;
	c->p = *p;
	if (!c->p.warmup_steps)
		c->p.warmup_steps = 1;
	c->nvme_fd = -1;
	pthread_mutex_init(&c->slock, NULL);
	pthread_cond_init(&c->scond, NULL);
	pthread_mutex_init(&c->dlock, NULL);
	pthread_cond_init(&c->dcond, NULL);
	*cp = c;
	return 0;
}

int tencache_tensor_register(struct tencache_cache *c, uint64_t bytes, unsigned role)
{
	if (!c || !bytes || role > TENCACHE_ROLE_ACTIVATION)
		return -EINVAL;
	if (c->frozen)
		return -EBUSY;
	if (c->nr == INT32_MAX)
		return -ENOSPC;
	if (TC_GROW(c->t, c->cap, c->nr, 256))
		return -ENOMEM;
	c->t[c->nr] = (struct tc_tstate){ .bytes = bytes, .role = role, .goff = -1,
					  .poff = -1, .noff = -1 };
	return c->nr++;
}

int tencache_tensor_host(struct tencache_cache *c, int id, void **ptr)
{
	int ret;

	if (!c || id < 0 || (uint32_t)id >= c->nr || !ptr || c->in_step)
		return -EINVAL;
	ret = tc_exec_freeze(c);
	ret = ret ?: tc_exec_quiesce(c);
	if (ret)
		return ret;
	/*
	 * Between steps nothing runs: room is made as on demand, from any
	 * value, and the next step loads the plan's start state again.
	 */
	c->reload = 1;
	c->any_room = 1;
	ret = od_to_pinned(c, id);
	c->any_room = 0;
	if (ret)
		return ret;
	/* the caller may write it: pinned is now the only valid copy */
	if (c->t[id].goff >= 0) {
		tencache_arena_free(c->garena, c->t[id].goff);
		c->t[id].goff = -1;
	}
	c->t[id].valid = TC_V_PINNED;
	*ptr = pptr(c, c->t[id].poff);
	return 0;
}

int tencache_step_begin(struct tencache_cache *c)
{
	int ret;

	if (!c || c->in_step)
		return -EINVAL;
	ret = tc_exec_freeze(c);
	ret = ret ?: tc_exec_trial_tick(c);
	if (ret)
		return ret;
	if (c->want_plan && !c->planned && !c->no_plan) {
		ret = tc_exec_enter_plan(c);
		if (ret)
			return ret;
	} else if (c->planned && c->reload) {
		ret = tc_exec_load_start(c);
		if (ret)
			return ret;
	}
	if (!c->planned && c->garena_shaped) {
		ret = tc_exec_plain_gpu(c);
		if (ret)
			return ret;
	}
	c->reload = 0;
	c->in_step = 1;
	c->pos = 0;
	c->issued_to = 0;
	c->op_open = 0;
	c->op_first_acc = 0;
	c->nr_op_ids = 0;
	/* done detached ops are forgotten; ones still running carry over */
	pthread_mutex_lock(&c->dlock);
	{
		uint32_t n = 0;

		while (n < c->nr_det && __atomic_load_n(&c->det[n].done, __ATOMIC_ACQUIRE))
			free(c->det[n++].hw);
		memmove(c->det, c->det + n, (c->nr_det - n) * sizeof(*c->det));
		c->nr_det -= n;
		c->det_base += n;
	}
	pthread_mutex_unlock(&c->dlock);
	c->step_t0 = tc_now_ns();
	c->last_stall = 0;
	c->last_acq = c->last_hits = 0;
	c->last_gpu_stall = c->last_gpu_hits = 0;
	c->skip_learn = 0;
	c->nprof = 0;
	tc_exec_timeline_step(c);
	if (!c->planned) {
		pthread_mutex_lock(&c->dlock);	/* a new profile: its own host ops */
		c->prof_gen++;
		c->det_ns_n = 0;
		if (c->det_ns)
			memset(c->det_ns, 0, c->det_ns_cap * sizeof(*c->det_ns));
		pthread_mutex_unlock(&c->dlock);
		tc_trace_free(&c->rec);
		tc_trace_init(&c->rec);
		for (uint32_t i = 0; i < c->nr; i++) {
			ret = tc_trace_add_tensor(&c->rec, c->t[i].bytes, c->t[i].role);
			if (ret < 0)
				return ret;
		}
	}
	return c->dev->ops->record(c->dev, c->step_ev, c->h2d);
}

static int op_close(struct tencache_cache *c, void *s, uint64_t compute_ns, int detach);

/*
 * Profiling measures each GPU op's compute: an event after its last acquire
 * (its inputs are ready) and one after its kernels (at the first release).
 */
static int prof_mark_start(struct tencache_cache *c, void *s)
{
	struct tc_prof *pf;
	int ret;

	if (c->pos == c->op_first_acc) {	/* the op's first acquire */
		if (TC_GROW(c->prof, c->cap_prof, c->nprof, 256))
			return -ENOMEM;
		pf = &c->prof[c->nprof++];
		if (!pf->a) {
			ret = c->dev->ops->event_create(c->dev, 1, &pf->a);
			ret = ret ?: c->dev->ops->event_create(c->dev, 1, &pf->b);
			if (ret)
				return ret;
		}
	}
	pf = &c->prof[c->nprof - 1];
	c->last_acq_t = tc_now_ns();
	return c->host_mode ? 0 : c->dev->ops->record(c->dev, pf->a, s);
}

/* At the end of a profiled step: measured compute into the record. */
int tc_exec_prof_resolve(struct tencache_cache *c)
{
	for (uint32_t i = 0; i < c->nprof; i++) {
		struct tc_prof *pf = &c->prof[i];
		uint64_t ns = pf->host_ns;

		if (!c->host_mode && c->dev->ops->elapsed(c->dev, pf->a, pf->b, &ns))
			continue;
		if (pf->acc < c->rec.nr_acc && ns > c->rec.acc[pf->acc].compute_ns)
			c->rec.acc[pf->acc].compute_ns = ns;
	}
	c->nprof = 0;
	return 0;
}

/*
 * The stream an op's compute is ordered on: the caller's on a GPU; in host
 * mode the caller's thread (NULL: queued work runs at once), or the test's
 * lagging stream (tc_exec_test_lag).
 */
static void *compute_stream(struct tencache_cache *c, void *stream)
{
	if (c->lag_s)
		return c->lag_s;
	return c->host_mode ? NULL : stream;
}

/*
 * The plan's ops at access i (prefetches, write-backs, frees), once: at the
 * release that ends the op before i (its kernels are queued, so the copies
 * start as early, and the acquire of i, which the caller's kernels wait
 * for, does not pay for them), else at that acquire. A fragmented arena
 * ends the plan for the rest of the step and plans again with room.
 */
static int issue_ops_at(struct tencache_cache *c, uint32_t i)
{
	int ret;

	for (uint32_t k = c->plan.op_first[i]; k < c->plan.op_first[i + 1]; k++) {
		c->pinned_enomem = 0;
		ret = issue_op(c, k);
		ret = ret ?: c->cb_err;
		if (ret)
			return ret;
	}
	return 0;
}

/* The ops planned at access i, their copies batched per stream. */
static int issue_at(struct tencache_cache *c, uint32_t i)
{
	int ret, fret;

	c->issued_to = i + 1;
	c->cb_on = !c->timeline_on && !(c->p.flags & TENCACHE_CACHE_NO_BATCH);
	c->cb_err = 0;
	ret = gate_poll(c);
	ret = ret ?: issue_ops_at(c, i);
	c->cb_on = 0;
	fret = cb_flush_all(c);	/* also before a re-plan frees the events */
	if (ret == -ENOMEM && c->pinned_enomem && !fret)
		return tc_exec_replan(c, "pinned memory fragmented", 0);
	if (ret == -ENOMEM && c->garena && !fret) {
		/* fragmented beyond what was checked: re-plan with room */
		return tc_exec_replan(c, "GPU memory fragmented", 1);
	}
	return ret ?: fret ?: c->cb_err;
}

/*
 * The open host op's runner waits for e's latest instance (none if done),
 * or the caller here where that may wait for a detached op (det_pending).
 */
static int op_host_wait(struct tencache_cache *c, struct tc_xev *e)
{
	struct tc_hev *h = &e->h;
	uint64_t inst = tc_hev_latest(c->dev, h);

	if (tc_hev_reached(c->dev, h, inst))
		return 0;
	if (!(c->p.flags & TENCACHE_CACHE_DETACH_FIFO) && det_pending(c, e->det_dep)) {
		tc_hev_wait(c->dev, h, inst);
		return 0;
	}
	if (TC_GROW(c->op_hw, c->cap_op_hw, c->nr_op_hw, 16))
		return -ENOMEM;
	c->op_hw[c->nr_op_hw++] = (struct tc_sdep){ h, inst };
	c->st.deferred_waits++;
	c->st.deferred_host_waits++;
	return 0;
}

/* A call that kept the caller TC_TL_CALL_NS or more (t0..t1, its waits
 * left out): on the timeline's "tencache call" track, named for tensor id. */
static void call_note(struct tencache_cache *c, uint32_t id, uint64_t t0, uint64_t t1)
{
	if (t1 - t0 >= TC_TL_CALL_NS)
		tc_exec_timeline_add(c, TC_TL_CALL, 0, id, t0, t1);
}

static int acquire(struct tencache_cache *c, int id, unsigned flags, void *stream,
		   void **ptr)
{
	uint64_t t0 = tc_now_ns(), t1, waited = 0;
	struct tc_tstate *t;
	int ret, hit = 0, ghit = 0, gpu;
	uint32_t gfirst;
	int deferred = 0;
	void *s, *probe = NULL;

	if (!c || !c->in_step || id < 0 || (uint32_t)id >= c->nr || !ptr ||
	    (flags & ~(TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE | TENCACHE_ACQ_HOST |
		       TENCACHE_ACQ_NOWAIT)) ||
	    !(flags & (TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE)) ||
	    ((flags & TENCACHE_ACQ_NOWAIT) && !(flags & TENCACHE_ACQ_HOST)))
		return -EINVAL;
	t = &c->t[id];
	if (t->held)
		return -EBUSY;
	/* host-only tensors (fp32 masters, optimizer states) may exceed it */
	if (!(flags & TENCACHE_ACQ_HOST) && t->bytes > c->p.gpu_budget) {
		char b1[32], b2[32];

		tc_fmt_bytes(b1, sizeof(b1), t->bytes);
		tc_fmt_bytes(b2, sizeof(b2), c->p.gpu_budget);
		tc_err(c->tc, "cache: tensor %d (%s) is larger than the whole GPU budget (%s): raise gpu_budget",
		       id, b1, b2);
		return -ENOSPC;
	}
	s = compute_stream(c, stream);
	c->sclock++;
	/* the GPU timeline differs from the CPU's: GPU acquires on a GPU */
	gpu = !c->host_mode && !(flags & TENCACHE_ACQ_HOST);
	gfirst = c->gp_nr;
	if (c->op_open == 2) {	/* the previous op was released: a new op */
		c->op_open = 0;
	}
	if (!c->op_open) {
		c->op_open = 1;
		c->op_first_acc = c->pos;
		c->op_host = !!(flags & TENCACHE_ACQ_HOST);
		c->op_deferred = 0;
		c->nr_op_ids = 0;
		c->nr_op_hw = 0;
	} else if (c->op_host != !!(flags & TENCACHE_ACQ_HOST)) {
		return -EINVAL;	/* one op is all host or all GPU */
	}
	/* a host op's tensors, for a detach */
	if (c->op_host && TC_GROW(c->op_ids, c->cap_op_ids, c->nr_op_ids, 16))
		return -ENOMEM;
	c->cstream_last = s;
	c->cstream_used = 1;

	if (c->planned) {
		const struct tc_access *a = c->pos < c->trace.nr_acc ? &c->trace.acc[c->pos] : NULL;
		unsigned want = a ? ((a->flags & TC_ACC_READ) ? TENCACHE_ACQ_READ : 0) |
				    ((a->flags & TC_ACC_WRITE) ? TENCACHE_ACQ_WRITE : 0) |
				    ((a->flags & TC_ACC_HOST) ? TENCACHE_ACQ_HOST : 0) : 0;

		if (!a || a->tensor != (uint32_t)id || want != (flags & ~TENCACHE_ACQ_NOWAIT)) {
			ret = tc_exec_leave_plan(c, "order changed");
			if (ret)
				return ret;
		}
	}
	if (c->planned && c->issued_to <= c->pos) {
		ret = issue_at(c, c->pos);
		if (ret)
			return ret;
	}
	if (c->planned) {
		uint32_t i = c->pos;

		freed_poll(c, &c->gfreed);
		freed_poll(c, &c->pfreed);
		/* a hit: the value was resident and its copy done before we asked */
		hit = 1;
		gfirst = c->gp_nr;
		for (uint32_t w = c->plan.wait_first[i]; w < c->plan.wait_first[i + 1]; w++) {
			struct tc_xev *e = &c->opev[c->plan.wait_ops[w]];
			const struct tc_op *op = &c->plan.ops[c->plan.wait_ops[w]];
			int copy = op->kind == TC_OP_FETCH || op->kind == TC_OP_WRITEBACK;
			uint64_t w0;

			/* a copy still held for its host op is late: out with it */
			if (e->gate) {
				w0 = tc_now_ns();
				ret = gate_send(c, e, 1);
				waited += tc_now_ns() - w0;
				if (ret)
					return ret;
				hit = 0;
			}
			/* the one query also spares the wait of a copy found done */
			if (copy && xev_done(c, e) != 1) {
				if (op->kind == TC_OP_FETCH) {
					hit = 0;
					c->st.late_prefetches++;
				}
				/* pending on the CPU's clock: when on the stream's? */
				if (gpu && ev_is_dev(e) && xev_dev_needs_wait(e, s)) {
					ret = gprobe(c, s, &probe, xev_h(e), e->bev,
						     op->kind == TC_OP_FETCH);
					if (ret)
						return ret;
				}
			}
			w0 = tc_now_ns();
			if ((flags & TENCACHE_ACQ_NOWAIT) && ev_is_dev(e)) {
				/* the op's runner waits (tencache_op_wait) */
				ret = xev_done(c, e);
				if (ret == 0) {
					ret = xev_dev_wait(c, c->rstream, e);
					deferred = 1;
				}
				ret = ret < 0 ? ret : 0;
			} else if (flags & TENCACHE_ACQ_NOWAIT) {
				/* an NVMe read, a PALLOC, a host op: the runner
				 * waits for it too, on its worker's signal */
				ret = op_host_wait(c, e);
			} else if (flags & TENCACHE_ACQ_HOST)
				ret = xev_sync(c, e);
			else
				ret = xev_stream_wait(c, s, e);
			/* host mode waits here; on a GPU the stream does */
			if ((flags & TENCACHE_ACQ_HOST) || c->host_mode)
				waited += tc_now_ns() - w0;
			if (ret)
				return ret;
		}
		if (!(flags & TENCACHE_ACQ_HOST) && !c->plan.hit[i])
			hit = 0;
		ghit = !(flags & TENCACHE_ACQ_HOST) && c->plan.hit[i];
		if (flags & TENCACHE_ACQ_WRITE)
			t->valid = (flags & TENCACHE_ACQ_HOST) ? TC_V_PINNED : TC_V_GPU;
	} else {
		uint64_t w0 = tc_now_ns();

		gfirst = c->gp_nr;
		ret = od_acquire(c, id, flags, s, &hit);
		if (ret)
			return ret;
		ghit = hit;
		waited += (flags & TENCACHE_ACQ_HOST) || c->host_mode || !hit ?
			  tc_now_ns() - w0 : 0;
		ret = tc_trace_add_access(&c->rec, id, TC_PHASE_FWD,
			((flags & TENCACHE_ACQ_READ) ? TC_ACC_READ : 0) |
			((flags & TENCACHE_ACQ_WRITE) ? TC_ACC_WRITE : 0) |
			((flags & TENCACHE_ACQ_HOST) ? TC_ACC_HOST : 0), 0);
		if (ret)
			return ret;
	}
	if (!c->planned && !(flags & TENCACHE_ACQ_HOST)) {
		ret = prof_mark_start(c, s);
		if (ret)
			return ret;
	}
	if (deferred) {
		c->op_deferred++;
		c->st.deferred_waits++;
	}
	t->held = 1;
	t->held_host = !!(flags & TENCACHE_ACQ_HOST);
	t->lru = ++c->tick;
	if (c->op_host)
		c->op_ids[c->nr_op_ids++] = id;
	c->pos++;
	if (!(flags & TENCACHE_ACQ_HOST) && (flags & TENCACHE_ACQ_READ)) {
		c->st.acquires++;
		c->last_acq++;
		if (hit) {
			c->st.hits++;
			c->last_hits++;
		}
		/* on a GPU, an acquire with probes is judged at step end */
		if (gpu ? ghit && c->gp_nr == gfirst : hit) {
			c->st.gpu_hits++;
			c->last_gpu_hits++;
		}
	}
	if (c->gp_nr > gfirst)
		gprobe_close(c, gfirst, (flags & TENCACHE_ACQ_READ) && ghit);
	if (!gpu) {	/* the compute's own clock is the host's */
		c->st.gpu_stall_ns += waited;
		c->last_gpu_stall += waited;
	}
	if (waited) {
		c->st.stall_ns += waited;
		c->last_stall += waited;
		tc_exec_timeline_add(c, TC_TL_STALL, 0, id, tc_now_ns() - waited, tc_now_ns());
	}
	*ptr = (flags & TENCACHE_ACQ_HOST) ? pptr(c, t->poff) : gptr(c, t->goff);
	t1 = tc_now_ns();
	c->st.decision_ns += t1 - t0 - waited;
	c->st.decisions++;
	call_note(c, id, t0 + waited, t1);	/* its waits are stall spans */
	return 0;
}

/*
 * The open host op's deferred waits (TENCACHE_ACQ_NOWAIT) are queued on
 * rstream: queue the signal of ready_h's next instance, *inst, after them.
 */
static int ready_signal(struct tencache_cache *c, uint64_t *inst)
{
	c->op_deferred = 0;
	*inst = tc_hev_arm(c->dev, &c->ready_h);
	return c->dev->ops->signal_host(c->dev, c->rstream, &c->ready_h, *inst);
}

/*
 * The op's compute is queued: record its end for every access of the op. A
 * detached host op's end is armed here and signalled by tencache_op_done.
 */
static int op_close(struct tencache_cache *c, void *s, uint64_t compute_ns, int detach)
{
	uint32_t end = c->pos - 1;
	int ret = 0;

	/* the learnt op must end here too, or its events would be wrong */
	if (c->planned && !(c->trace.acc[end].flags & TC_ACC_END)) {
		ret = tc_exec_leave_plan(c, "an op ended elsewhere");
		if (ret)
			return ret;
	}
	if (c->op_host) {
		if (!detach && c->op_deferred) {	/* released, not detached */
			uint64_t inst;

			ret = ready_signal(c, &inst);
			if (ret)
				return ret;
			tc_hev_wait(c->dev, &c->ready_h, inst);
		}
		for (uint32_t k = 0; k < c->nr_op_hw && !detach; k++)
			tc_hev_wait(c->dev, c->op_hw[k].h, c->op_hw[k].inst);
		if (compute_ns && c->host_mode) {
			struct timespec ts = { compute_ns / 1000000000ULL,
					       compute_ns % 1000000000ULL };
			uint64_t t0 = tc_now_ns();

			while (nanosleep(&ts, &ts))
				;
			tc_exec_timeline_add(c, TC_TL_HOSTOP, 0, end, t0, tc_now_ns());
		}
		for (uint32_t i = c->op_first_acc; i <= end; i++)
			if (i < c->nacc_ev) {
				if (detach) {
					tc_hev_arm(c->dev, &c->accev[i].h);
				} else {
					c->accev[i].det_dep = 0;
					xev_signal_now(c, &c->accev[i]);
				}
			}
	} else {
		ret = tc_exec_timeline_mark(c, s, TC_TL_COMPUTE, end, 0);
		ret = ret ?: c->dev->ops->spin(c->dev, s, compute_ns);
		ret = ret ?: tc_exec_timeline_mark(c, s, TC_TL_COMPUTE, end, 1);
		if (!ret && end < c->nacc_ev && c->planned)
			ret = xev_record(c, &c->accev[end], s);
	}
	if (!c->planned) {
		/* profile: the op's compute follows its last access */
		if (c->rec.nr_acc) {
			c->rec.acc[c->rec.nr_acc - 1].flags |= TC_ACC_END;
			c->rec.acc[c->rec.nr_acc - 1].compute_ns = compute_ns;
		}
		if (!c->op_host && c->nprof && c->rec.nr_acc) {
			struct tc_prof *pf = &c->prof[c->nprof - 1];

			pf->acc = c->rec.nr_acc - 1;
			pf->host_ns = tc_now_ns() - c->last_acq_t;
			if (!c->host_mode)
				ret = ret ?: c->dev->ops->record(c->dev, pf->b, s);
		}
		for (uint32_t i = c->op_first_acc; i <= end; i++) {
			uint32_t id = i < c->rec.nr_acc ? c->rec.acc[i].tensor : 0;

			if (!c->op_host && id < c->nr)
				ret = ret ?: xev_record(c, &c->t[id].ready, s);
		}
	}
	return ret;
}

static int release(struct tencache_cache *c, int id, void *stream, uint64_t compute_ns)
{
	uint64_t t0 = tc_now_ns(), t1;
	int ret = 0, closed = 0;
	void *s;

	if (!c || !c->in_step || id < 0 || (uint32_t)id >= c->nr)
		return -EINVAL;
	if (!c->t[id].held)
		return -ENOENT;
	if (c->t[id].det > c->det_base &&
	    !__atomic_load_n(&c->det[c->t[id].det - c->det_base - 1].done, __ATOMIC_ACQUIRE))
		return -EBUSY;	/* its detached op is still running */
	s = compute_stream(c, stream);
	t1 = tc_now_ns();
	if (c->t[id].det) {	/* its op ended at detach, maybe a step ago */
		c->t[id].det = 0;
	} else if (c->op_open == 1) {	/* the first release ends the op's acquires */
		ret = op_close(c, s, compute_ns, 0);
		c->op_open = 2;
		closed = 1;
	} else if (compute_ns) {
		ret = c->dev->ops->spin(c->dev, s, compute_ns);
	}
	if (c->host_mode && !c->lag_s)	/* the compute ran in this thread: not a decision */
		t0 += tc_now_ns() - t1;
	/* the next op's: issue_at */
	if (!ret && closed && c->planned && c->pos < c->trace.nr_acc && c->issued_to <= c->pos)
		ret = issue_at(c, c->pos);
	c->t[id].held = 0;
	c->t[id].held_host = 0;
	t1 = tc_now_ns();
	c->st.decision_ns += t1 - t0;
	c->st.decisions++;
	call_note(c, id, t0, t1);	/* host mode: after the op's compute */
	return ret;
}

/* The hot calls check the device context once per call, here. */
#define IN_DEV(c, call) ({						\
	const struct tc_dev_ops *in_dev_ops = (c)->dev->ops;		\
	int in_dev_ret;							\
	if (in_dev_ops->enter)						\
		in_dev_ops->enter((c)->dev);				\
	in_dev_ret = (call);						\
	if (in_dev_ops->leave)						\
		in_dev_ops->leave((c)->dev);				\
	in_dev_ret;							\
})

int tencache_acquire(struct tencache_cache *c, int id, unsigned flags, void *stream,
		     void **ptr)
{
	if (!c || !c->in_step)
		return -EINVAL;
	return IN_DEV(c, acquire(c, id, flags, stream, ptr));
}

int tencache_release(struct tencache_cache *c, int id, void *stream, uint64_t compute_ns)
{
	if (!c || !c->in_step)
		return -EINVAL;
	return IN_DEV(c, release(c, id, stream, compute_ns));
}

static int op_detach(struct tencache_cache *c, uint64_t *token)
{
	struct tc_detached *d;
	struct tc_sdep *hw = NULL;
	uint64_t ready = 0;
	int ret;

	if (!token || c->op_open != 1 || !c->op_host)
		return -EINVAL;
	pthread_mutex_lock(&c->dlock);	/* tencache_op_done reads det */
	ret = TC_GROW(c->det, c->cap_det, c->nr_det, 64);
	pthread_mutex_unlock(&c->dlock);
	if (ret)
		return ret;
	if (c->nr_op_hw) {	/* its runner waits for these host events too */
		hw = malloc(c->nr_op_hw * sizeof(*hw));
		if (!hw)
			return -ENOMEM;
		memcpy(hw, c->op_hw, c->nr_op_hw * sizeof(*hw));
	}
	ret = op_close(c, NULL, 0, 1);
	if (!ret && c->op_deferred)	/* its runner waits for this one */
		ret = ready_signal(c, &ready);
	if (ret) {
		free(hw);
		return ret;
	}
	c->op_open = 2;
	pthread_mutex_lock(&c->dlock);
	d = &c->det[c->nr_det++];
	d->first = c->op_first_acc;
	d->end = c->pos - 1;
	d->done = 0;
	d->in_tl = 0;
	d->ready = ready;
	d->hw = hw;
	d->nr_hw = c->nr_op_hw;
	d->t0 = d->t1 = d->t_run = tc_now_ns();
	d->prof_end = UINT32_MAX;
	/* profiling (not on demand after a plan stopped: skip_learn): its run
	 * time is learnt, at the op's end in the recorded step */
	if (!c->planned && !c->skip_learn && c->rec.nr_acc) {
		uint32_t e = c->rec.nr_acc - 1;

		ret = 0;
		while (!ret && e >= c->det_ns_cap)
			ret = TC_GROW(c->det_ns, c->det_ns_cap, e, 1024);
		if (!ret) {
			d->prof_end = e;
			d->prof_gen = c->prof_gen;
			c->det_ns[e] = TC_DET_RUNNING;
			c->det_prof = c->prof_gen;
			if (e >= c->det_ns_n)
				c->det_ns_n = e + 1;
		}
	}
	c->det_live++;
	pthread_mutex_unlock(&c->dlock);
	for (uint32_t k = 0; k < c->nr_op_ids; k++)
		c->t[c->op_ids[k]].det = c->det_base + c->nr_det;
	*token = c->det_base + c->nr_det;
	for (uint32_t i = c->op_first_acc; i < c->pos && i < c->nacc_ev; i++)
		c->accev[i].det_dep = *token;	/* its end: det_pending */
	return 0;
}

int tencache_op_detach(struct tencache_cache *c, uint64_t *token)
{
	uint64_t t0 = tc_now_ns();
	uint32_t id;
	int ret;

	if (!c || !c->in_step)
		return -EINVAL;
	id = c->nr_op_ids ? c->op_ids[0] : 0;	/* the op's first tensor names the span */
	ret = IN_DEV(c, op_detach(c, token));
	call_note(c, id, t0, tc_now_ns());
	return ret;
}

/* The detached op of token, not done yet; NULL. Under dlock. */
static struct tc_detached *det_live_op(struct tencache_cache *c, uint64_t token)
{
	struct tc_detached *d;

	if (token <= c->det_base || token - c->det_base > c->nr_det)
		return NULL;
	d = &c->det[token - c->det_base - 1];
	return d->done ? NULL : d;
}

/* Any thread: only host events, no device call. */
int tencache_op_wait(struct tencache_cache *c, uint64_t token)
{
	struct tc_detached *d;
	struct tc_sdep *hw;
	uint64_t ready;
	uint32_t nr_hw;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->dlock);
	d = det_live_op(c, token);
	ready = d ? d->ready : 0;
	hw = d ? d->hw : NULL;	/* freed only once the op is done */
	nr_hw = d ? d->nr_hw : 0;
	pthread_mutex_unlock(&c->dlock);
	if (!d)
		return -EINVAL;
	if (!ready && !nr_hw)
		return 0;
	if (ready)
		tc_hev_wait(c->dev, &c->ready_h, ready);
	for (uint32_t k = 0; k < nr_hw; k++)
		tc_hev_wait(c->dev, hw[k].h, hw[k].inst);
	pthread_mutex_lock(&c->dlock);	/* det may have moved meanwhile */
	d = det_live_op(c, token);
	if (d)
		d->t_run = tc_now_ns();
	pthread_mutex_unlock(&c->dlock);
	return 0;
}

/* Any thread: only host events, no device call. */
int tencache_op_done(struct tencache_cache *c, uint64_t token)
{
	struct tc_detached *d;

	if (!c)
		return -EINVAL;
	pthread_mutex_lock(&c->dlock);
	d = det_live_op(c, token);
	if (!d) {
		pthread_mutex_unlock(&c->dlock);
		return -EINVAL;
	}
	for (uint32_t i = d->first; i <= d->end; i++)
		if (i < c->nacc_ev)
			tc_hev_signal(c->dev, &c->accev[i].h, tc_hev_latest(c->dev, &c->accev[i].h));
	d->t1 = tc_now_ns();
	/* its run: ops run one at a time (the model's assumption) */
	if (d->prof_end != UINT32_MAX && d->prof_gen == c->prof_gen && d->prof_end < c->det_ns_n) {
		uint64_t from = d->t_run > c->det_prev_t1 ? d->t_run : c->det_prev_t1;

		c->det_ns[d->prof_end] = d->t1 > from ? d->t1 - from : 1;
	}
	c->det_prev_t1 = d->t1;
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
	__atomic_add_fetch(&c->det_done_n, 1, __ATOMIC_RELEASE);
	c->det_live--;
	pthread_cond_broadcast(&c->dcond);
	pthread_mutex_unlock(&c->dlock);
	return 0;
}

/*
 * A planned step's NVMe reads and writes, each over the time the disk had
 * them in flight, against the rates the plan used: a disk more than 1.25
 * times slower than planned makes the steps longer than planned (a short
 * calibration can see a cache's speed, not the disk's), which the user
 * can mend by giving the sustained rates. Judged where the disk had the
 * two at once in under a tenth of its busy time (each's rate is then its
 * own), on at least 20 ms of each.
 */
#define SLOW_DISK	1.25
static void slow_disk_check(struct tencache_cache *c)
{
	uint64_t now[5], d[5], busy;
	double rate[2];
	bool slow = false;

	pthread_mutex_lock(&c->slock);
	now[0] = c->st.disk_busy_ns[0];
	now[1] = c->st.disk_busy_ns[1];
	now[2] = c->st.disk_both_ns;
	pthread_mutex_unlock(&c->slock);
	now[3] = __atomic_load_n(&c->st.link_bytes[2], __ATOMIC_RELAXED);
	now[4] = __atomic_load_n(&c->st.link_bytes[3], __ATOMIC_RELAXED);
	for (int i = 0; i < 5; i++) {
		d[i] = now[i] - c->disk_prev[i];
		c->disk_prev[i] = now[i];
	}
	busy = d[0] + d[1] - d[2];
	if (!c->planned || !busy || d[2] * 10 > busy)
		return;
	for (int w = 0; w < 2; w++) {
		rate[w] = d[w] ? d[3 + w] * 1e9 / d[w] : 0;
		if (d[w] >= 20000000 && c->bw[2 + w] > 0 && rate[w] * SLOW_DISK < c->bw[2 + w])
			slow = true;
	}
	if (!slow)
		return;
	if (!c->st.disk_slow_steps++)
		tc_warn(c->tc, "cache: the disk read at %.2f GB/s and wrote at %.2f in a planned step, where the plan used %.2f and %.2f (%s): steps will run longer than planned; give the disk's sustained rates (tencache_cache_params.bw; tencache-bench io -f FILE measures them)",
			rate[0] / 1e9, rate[1] / 1e9, c->bw[2] / 1e9, c->bw[3] / 1e9,
			c->p.bw[2] > 0 ? "given" : "measured at start");
}

int tencache_step_end(struct tencache_cache *c)
{
	int ret;

	if (!c || !c->in_step)
		return -EINVAL;
	/* a detached op's tensors may stay held into the next step */
	for (uint32_t i = 0; i < c->nr; i++)
		if (c->t[i].held && !c->t[i].det)
			return -EBUSY;
	if (c->planned && c->pos != c->trace.nr_acc) {
		ret = tc_exec_leave_plan(c, "step ended early");
		if (ret)
			return ret;
	}
	ret = tc_exec_step_sync(c);
	if (ret)
		return ret;
	pthread_mutex_lock(&c->dlock);
	for (uint32_t k = 0; k < c->nr_det; k++) {
		struct tc_detached *d = &c->det[k];

		if (d->done && !d->in_tl) {
			tc_exec_timeline_add(c, TC_TL_HOSTOP, 0, d->end, d->t_run, d->t1);
			d->in_tl = 1;
		}
	}
	pthread_mutex_unlock(&c->dlock);
	c->in_step = 0;
	if (c->swap)
		slow_disk_check(c);
	c->st.steps++;
	c->st.last_step_ns = tc_now_ns() - c->step_t0;
	c->st.last_stall_ns = c->last_stall;
	c->st.last_acquires = c->last_acq;
	c->st.last_hits = c->last_hits;
	c->st.last_gpu_stall_ns = c->last_gpu_stall;
	c->st.last_gpu_hits = c->last_gpu_hits;
	if (!c->planned)
		tc_exec_prof_resolve(c);
	if (c->planned) {
		c->st.planned_steps++;
	} else if (++c->profiled >= c->p.warmup_steps) {
		ret = tc_exec_learn(c);
		if (ret)
			return ret;
	}
	return 0;
}

int tencache_cache_flush(struct tencache_cache *c)
{
	if (!c || c->in_step)
		return -EINVAL;
	if (!c->frozen)
		return 0;
	return tc_exec_flush(c);
}

int tencache_cache_sync(struct tencache_cache *c, void *stream)
{
	if (!c || !c->dev)
		return -EINVAL;
	/* host mode runs compute inline: nothing is queued on the caller's stream */
	if (c->lag_s)
		return c->dev->ops->stream_sync(c->dev, c->lag_s);
	return c->host_mode ? 0 : c->dev->ops->stream_sync(c->dev, stream);
}

/* ---- test hooks (exec.h) ------------------------------------------------- */

int tc_exec_test_count(struct tencache_cache *c, uint64_t *calls, uint64_t *ns)
{
	if (!c)
		return -EINVAL;
	return c->dev ? tc_dev_count(c->dev, calls, ns) : -EBUSY;	/* made at freeze */
}

int tc_exec_test_fail(struct tencache_cache *c, int gpu, uint32_t n)
{
	if (!c || (gpu && !c->garena))
		return -EINVAL;
	c->test_fail[!!gpu] = n;
	return 0;
}

int tc_exec_test_taken(struct tencache_cache *c, uint32_t n)
{
	if (!c)
		return -EINVAL;
	c->test_taken = n;
	return 0;
}

int tc_exec_test_swap_full(struct tencache_cache *c, uint32_t n)
{
	if (!c)
		return -EINVAL;
	c->test_swap_full = n;
	return 0;
}

int tc_exec_test_place_fail(struct tencache_cache *c, uint32_t n)
{
	if (!c)
		return -EINVAL;
	c->test_place_fail = n;
	return 0;
}

int tc_exec_test_reject(struct tencache_cache *c, unsigned flags)
{
	if (!c || (flags & ~(TC_TEST_REJECT_OWN | TC_TEST_REJECT_LAID | TC_TEST_LAID_INLINE)))
		return -EINVAL;
	c->test_reject = flags;
	return 0;
}

int tc_exec_test_fly_max(struct tencache_cache *c, unsigned *rd, unsigned *wr)
{
	if (!c || !rd || !wr)
		return -EINVAL;
	*rd = __atomic_load_n(&c->sj_fly_max[TC_SJ_READ], __ATOMIC_RELAXED);
	*wr = __atomic_load_n(&c->sj_fly_max[TC_SJ_WRITE], __ATOMIC_RELAXED);
	return 0;
}

int tc_exec_test_worker_lifecycle(struct tencache_cache *c, uint64_t *n)
{
	if (!c || !n)
		return -EINVAL;
	*n = __atomic_load_n(&c->dev->worker_lifecycle, __ATOMIC_RELAXED);
	return 0;
}

int tc_exec_test_pinned_pad(struct tencache_cache *c, uint64_t bytes)
{
	if (!c || bytes % 4096)
		return -EINVAL;
	c->test_pinned_pad = bytes;
	return 0;
}

int tc_exec_test_pinned_clear(struct tencache_cache *c, unsigned *met, unsigned *over)
{
	if (!c || !met || !over)
		return -EINVAL;
	*met = c->pin_soft[0];
	*over = c->pin_soft[1];
	return 0;
}

int tc_exec_test_lag(struct tencache_cache *c, uint64_t kernel_ns, uint64_t copy_ns)
{
	if (!c || !(c->p.flags & TENCACHE_CACHE_HOST_MODE))
		return -EINVAL;
	if (c->frozen)
		return -EBUSY;	/* the stream is made with the others, at freeze */
	c->lag_on = 1;
	c->kernel_lag_ns = kernel_ns;
	c->copy_lag_ns = copy_ns;
	return 0;
}

int tc_exec_test_read_lag(struct tencache_cache *c, uint64_t ns)
{
	if (!c)
		return -EINVAL;
	c->read_lag_ns = ns;
	return 0;
}

int tc_exec_test_trial(struct tencache_cache *c, uint64_t own_extra_ns, uint64_t laid_extra_ns)
{
	if (!c)
		return -EINVAL;
	c->trial_test = 1;
	c->trial_extra[0] = own_extra_ns;
	c->trial_extra[1] = laid_extra_ns;
	return 0;
}

int tc_exec_test_kernel(struct tencache_cache *c, void *dst, const void *src, uint64_t len)
{
	int ret;

	if (!c || !c->lag_s || !c->in_step || !dst || !src)
		return -EINVAL;
	ret = c->dev->ops->spin(c->dev, c->lag_s, c->kernel_lag_ns);
	/* H2D: dev.h's copies are plain memcpy in host mode, either way */
	return ret ?: c->dev->ops->copy(c->dev, c->lag_s, TENCACHE_COPY_H2D, dst, src, len);
}

int tencache_cache_stats(struct tencache_cache *c, struct tencache_cache_stats *out, size_t size)
{
	struct tencache_cache_stats s, *st = &s;
	struct tencache_arena_stats as;

	if (!c || !out || !size)
		return -EINVAL;
	*st = c->st;
	for (int l = 0; l < 4; l++)
		st->link_bw[l] = c->bw[l];
	{
		struct tc_plan_cfg d;	/* where not measured, the planner's figure */

		tc_plan_cfg_default(&d);
		st->duplex_bw[0] = c->duplex_bw > 0 ? c->duplex_bw : d.duplex_bw;
		st->duplex_bw[1] = c->swap ? c->nvme_duplex_bw : 0;
	}
	if (c->garena && !tencache_arena_stats(c->garena, &as))
		st->gpu_bytes_peak = as.high_water;
	if (c->have_plan) {
		st->plan_gpu_bytes = c->plan_gpu_bytes;
		st->plan_reads = c->plan.st.reads;
		st->plan_hits = c->plan.st.hits;
		st->plan_read_bytes = c->plan.st.read_bytes;
		st->plan_hit_bytes = c->plan.st.hit_bytes;
		st->plan_laid_out = c->laid_out;
		st->plan_pinned_bytes = c->swap ? c->plan_pinned_bytes : 0;
		st->plan_pinned_cuts = c->swap && c->pcfg.pinned_cap ? c->nr_pcut : 0;
	}
	st->plan_trying = c->trial == TC_TRIAL_FIRST || c->trial == TC_TRIAL_SECOND;
	/* the caller's struct may be shorter (older) or longer (newer) */
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	if (size > sizeof(s))
		memset((char *)out + sizeof(s), 0, size - sizeof(s));
	return 0;
}
