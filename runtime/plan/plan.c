/* plan.c - the planner: turns a cyclic step trace, budgets and link speeds
 * into a placement and a schedule table the executor walks in O(1).
 *
 * Two cache levels are planned with one core (cache_run): the GPU over
 * pinned memory, then pinned memory over NVMe, whose requests are the GPU
 * level's copies plus the host ops. Ours evicts by next use (Belady/MIN,
 * dead values first) and issues every copy at the earliest point that is
 * safe: after the victims' last use and where the budget holds at every
 * issue point up to the need (Cao et al.'s "conservative" prefetching: the
 * hit count stays MIN's, the copies overlap as much compute as they can).
 * Baselines (LRU, ZeRO-like, 10Cache window) only change the GPU level.
 * Dependencies are derived afterwards from the op order alone, so every
 * policy gets the same, correct event graph.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "plan/plan.h"

#define NONE_EV INT32_MIN
#define INF_KEY INT64_MAX
#define NO_GROUP UINT32_MAX

/* ---- cache core --------------------------------------------------------- */

#define RQ_NEED	 0x01	/* needs the value resident */
#define RQ_WRITE 0x02	/* leaves it resident and dirty */
#define RQ_RES	 0x04	/* needs the tensor resident (space) */
#define RQ_FLUSH 0x08	/* write back if dirty (the value is read elsewhere) */
#define RQ_KILL	 0x10	/* drop this copy: the value is overwritten elsewhere */

enum { RES_NONE, RES_HIT, RES_MISS, RES_ALLOC, RES_AHIT };

struct creq {
	uint32_t t, group;
	int64_t end;		/* last request of the hold group */
	int64_t cold;		/* victims whose last use ended before this are free now */
	uint8_t f;
};

struct victim {
	uint32_t t;
	uint8_t wb;		/* dirty and live: write back before dropping */
	int64_t last;		/* end of its last use (unrolled, may be < 0) */
	uint64_t off;		/* its GPU offset (layout) */
};

struct cout {
	uint8_t *res, *flush, *kill;	/* per request */
	uint32_t *vfirst;		/* n + 1 */
	struct victim *vic;
	uint32_t nvic, capvic;
	int64_t *evict_at;		/* per request: X's previous eviction */
	int64_t *lastw;			/* per FLUSH request: end of X's last use */
	uint64_t *use;			/* bytes resident after request r */
	uint8_t *start, *end;		/* per tensor: bit0 resident, bit1 dirty */
	uint8_t *slive;			/* per tensor: value live at step start */
	/* layout: per request, a miss / alloc's offset or a kill's freed
	 * one; per tensor, the offsets at the final step's start and end */
	int64_t *goff, *sgoff, *egoff;
	uint32_t iters;
	bool converged;
};

struct cstate {
	uint8_t *resident, *dirty, *live;
	uint32_t *rl, *rpos, nrl;	/* the residents, in no order (set_res) */
	/* MIN alone (no kept tensors, no cold-first class: the pinned
	 * level): the residents in a heap by victim order too */
	const uint64_t *bytes;
	uint32_t *hp, *hpos, *htmp, nh;
	bool heap;
	int64_t horizon;	/* > 0: horizon_victim (the pinned level) */
	bool dead_oldest;	/* MIN with dead values by older_dead (horizon_victim) */
	/* the pinned level: where its capacity drops (cfg->pinned_cap) below
	 * what it holds, victims go there, at a hit too (their own drops) */
	bool evict_down;
	int64_t *key, *last, *evict_at, *lru;
	int64_t *held;		/* held by a group until this request */
	int64_t *goff;		/* layout: resident's offset, else -1 */
};

/*
 * The GPU level laid out (TC_PLAN_LAYOUT): the residents as segments of
 * [0, B) in address order. A miss takes a free hole or evicts the one
 * window of residents that costs least (lay_pick).
 */
struct seg {
	uint64_t off, len;
	uint32_t t;
};

struct lay {
	uint64_t B;
	uint64_t *len;		/* per tensor, TC_PLAN_ALIGN-aligned */
	struct seg *seg;
	uint32_t nseg;
	int64_t *cand;		/* scratch: 4 per segment + 2 */
	/* ops whose misses share one window (contig, per op), the one at
	 * hand and where its next miss goes; the op that found no window */
	uint8_t *contig;
	uint32_t group, failed;
	uint64_t at, left;
	int64_t *tpos;		/* GPU time at each position, from -n to n (index p + n) */
	int64_t n;
	double ns_per_byte;	/* H2D */
};

/* A window's cost: what its victims will miss (n / distance to their next
 * use each) and, weighted LAY_LATE, the share of its copy that cannot
 * overlap the compute since its victims' last use (the copy waits for
 * them). With 4, OPT-1.3B and OPT-6.7B at 10-50% keep Belady's byte hit
 * rate within half a point, and the timing model's step is within 1% of the
 * unlaid plan's (tests/plan/layout.c; results/h200-replay.md, session 12).
 * Without it the laid-out plans ran 1.5-9% slower on the H200. */
#define LAY_LATE	4.0

static void cout_free(struct cout *o)
{
	free(o->res); free(o->flush); free(o->kill); free(o->vfirst);
	free(o->vic); free(o->evict_at); free(o->lastw); free(o->use);
	free(o->start); free(o->end); free(o->slive);
	free(o->goff); free(o->sgoff); free(o->egoff);
	memset(o, 0, sizeof(*o));
}

static int push_victim(struct cout *o, struct victim v)
{
	if (TC_GROW(o->vic, o->capvic, o->nvic, 256))
		return -ENOMEM;
	o->vic[o->nvic++] = v;
	return 0;
}

static bool victim_scan;	/* tc_plan_test_victim_scan */

void tc_plan_test_victim_scan(bool on)
{
	victim_scan = on;
}

/* a goes before b as MIN's victim: dead first, furthest next use, largest,
 * then the lowest id */
static bool hbefore(const struct cstate *s, uint32_t a, uint32_t b)
{
	if (s->live[a] != s->live[b])
		return !s->live[a];
	if (s->key[a] != s->key[b])
		return s->key[a] > s->key[b];
	if (s->bytes[a] != s->bytes[b])
		return s->bytes[a] > s->bytes[b];
	return a < b;
}

static void hswap(struct cstate *s, uint32_t i, uint32_t j)
{
	uint32_t a = s->hp[i], b = s->hp[j];

	s->hp[i] = b;
	s->hp[j] = a;
	s->hpos[b] = i;
	s->hpos[a] = j;
}

static void hdown(struct cstate *s, uint32_t i)
{
	for (;;) {
		uint32_t l = 2 * i + 1, m = i;

		if (l < s->nh && hbefore(s, s->hp[l], s->hp[m]))
			m = l;
		if (l + 1 < s->nh && hbefore(s, s->hp[l + 1], s->hp[m]))
			m = l + 1;
		if (m == i)
			return;
		hswap(s, i, m);
		i = m;
	}
}

/* the entry at i after its key changed (or it came in at the bottom) */
static void hfix(struct cstate *s, uint32_t i)
{
	while (i && hbefore(s, s->hp[i], s->hp[(i - 1) / 2])) {
		hswap(s, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	hdown(s, i);
}

static void hpush(struct cstate *s, uint32_t t)
{
	s->hp[s->nh] = t;
	s->hpos[t] = s->nh++;
	hfix(s, s->nh - 1);
}

static void hdel(struct cstate *s, uint32_t i)
{
	hswap(s, i, --s->nh);
	if (i < s->nh)
		hfix(s, i);
}

/* every resident again, after their keys were reset */
static void hbuild(struct cstate *s)
{
	s->nh = s->nrl;
	for (uint32_t k = 0; k < s->nrl; k++) {
		s->hp[k] = s->rl[k];
		s->hpos[s->rl[k]] = k;
	}
	for (uint32_t i = s->nh / 2; i-- > 0;)
		hdown(s, i);
}

/* The best victim not held at now: the held ones popped on the way are put
 * back. */
static int64_t heap_victim(struct cstate *s, int64_t now)
{
	uint32_t nheld = 0;
	int64_t v = -1;

	while (s->nh) {
		uint32_t t = s->hp[0];

		if (s->held[t] < now) {
			v = t;
			break;
		}
		s->htmp[nheld++] = t;
		hdel(s, 0);
	}
	while (nheld)
		hpush(s, s->htmp[--nheld]);
	return v;
}

/* t in or out of the residents (and their list, which pick_victim scans). */
static void set_res(struct cstate *s, uint32_t t, uint8_t on)
{
	if (s->resident[t] == on)
		return;
	s->resident[t] = on;
	if (on) {
		s->rpos[t] = s->nrl;
		s->rl[s->nrl++] = t;
		if (s->heap)
			hpush(s, t);
	} else {
		uint32_t last = s->rl[--s->nrl];

		s->rl[s->rpos[t]] = last;
		s->rpos[last] = s->rpos[t];
		if (s->heap)
			hdel(s, s->hpos[t]);
	}
}

/*
 * The pinned level over NVMe, relaxed MIN: dead values first (the one used
 * longest ago: older_dead), then among the values whose next use is within
 * s->horizon requests of the furthest one, the one whose last use is
 * oldest (then the furthest next use).
 * MIN's victim in a cyclic step is the value used last, so the read that
 * needs its space cannot start before that use: on OPT-13B at 25%, the
 * optimizer states' reads all waited for the Adam op before, and the disk
 * idled through forward. An older victim lets the read start earlier.
 * It can cost misses: tc_plan_build keeps it only where the model says
 * the step is shorter.
 */
static bool older_victim(const struct cstate *s, uint32_t t, int64_t best)
{
	return best < 0 || s->last[t] < s->last[best] ||
	       (s->last[t] == s->last[best] &&
		(s->key[t] > s->key[best] || (s->key[t] == s->key[best] && t < best)));
}

/* Among dead values (evicting any costs no miss), the one whose last use
 * is oldest: its space is free soonest, so the read taking it can start
 * first. In MIN's order (the largest, then the lowest id) the timing model
 * of OPT-13B (20 layers, 80% pinned) had the step's first NVMe read wait
 * for space an fp16 weight held until its op, the disk idle 317 ms; this
 * order shortened the modelled step 0.4-2.1% at 10-50% (session 25 in
 * results/h200-replay.md). Ours' pinned level uses it with MIN too
 * (cstate.dead_oldest). */
static bool older_dead(const struct cstate *s, uint32_t t, uint32_t best)
{
	if (s->last[t] != s->last[best])
		return s->last[t] < s->last[best];
	return hbefore(s, t, best);
}

static int64_t horizon_victim(const struct cstate *s, int64_t now)
{
	int64_t best = -1, dead = -1, far = INT64_MIN;

	for (uint32_t k = 0; k < s->nrl; k++) {
		uint32_t t = s->rl[k];

		if (s->held[t] >= now)
			continue;
		if (!s->live[t] && (dead < 0 || older_dead(s, t, dead)))
			dead = t;
		if (s->key[t] > far)
			far = s->key[t];
	}
	if (dead >= 0)
		return dead;
	for (uint32_t k = 0; k < s->nrl; k++) {
		uint32_t t = s->rl[k];

		if (s->held[t] < now && s->key[t] >= far - s->horizon && older_victim(s, t, best))
			best = t;
	}
	return best;
}

/*
 * horizon_victim on the heap, walking only its top part. MIN's victim is
 * dead if any unheld value is: then the dead values, first in heap order,
 * are walked for the oldest-used. Else it gives the furthest next use,
 * and the walk goes down to where next uses fall below the horizon (a
 * child's next use is no later than its parent's; the dead values above
 * are held ones).
 */
static int64_t heap_horizon_victim(struct cstate *s, int64_t now)
{
	int64_t v = heap_victim(s, now), best = -1, low;
	uint32_t sp = 0;
	bool dead;

	if (v < 0)
		return v;
	/* a dead victim: the dead values are the heap's top part */
	dead = !s->live[v];
	low = dead ? 0 : s->key[v] - s->horizon;
	s->htmp[sp++] = 0;
	while (sp) {
		uint32_t i = s->htmp[--sp], t = s->hp[i];

		if (s->live[t] && (dead || s->key[t] < low))
			continue;
		if (s->live[t] != dead && s->held[t] < now &&
		    (dead ? best < 0 || older_dead(s, t, best) : older_victim(s, t, best)))
			best = t;
		if (2 * i + 1 < s->nh)
			s->htmp[sp++] = 2 * i + 1;
		if (2 * i + 2 < s->nh)
			s->htmp[sp++] = 2 * i + 2;
	}
	return best;
}

/* Pick the victim: MIN = dead values first, then furthest next use, then
 * the largest (ours' pinned level: horizon_victim); LRU = least recently
 * used. Kept tensors (small ones, see small_keep) go only when nothing
 * else can. O(resident), planning time only; with the heap O(log
 * resident) per held one passed over (OPT-13B with 20 layers and NVMe
 * made 13.9 M picks per run of the replay). */
static int64_t pick_victim(struct cstate *s, const uint64_t *bytes,
			   int64_t now, int64_t cold, enum tc_policy pol, const uint8_t *keep)
{
	int64_t best = -1;

	if (s->horizon > 0 || s->dead_oldest)	/* ours' pinned level */
		return s->heap ? heap_horizon_victim(s, now) : horizon_victim(s, now);
	if (s->heap)
		return heap_victim(s, now);

	/* the list is in no order: among equals the lowest id, as a scan
	 * of every tensor found it */
	for (uint32_t k = 0; k < s->nrl; k++) {
		uint32_t t = s->rl[k];

		if (s->held[t] >= now)
			continue;
		if (best < 0) {
			best = t;
			continue;
		}
		if (keep && keep[t] != keep[best]) {
			if (keep[best])
				best = t;
			continue;
		}
		/* cold-first: a victim whose last use is over lets the copy
		 * overlap the op before; MIN decides within each class */
		if ((s->last[t] < cold) != (s->last[best] < cold)) {
			if (s->last[t] < cold)
				best = t;
			continue;
		}
		if (pol == TC_POLICY_LRU) {
			if (s->lru[t] < s->lru[best] || (s->lru[t] == s->lru[best] && t < best))
				best = t;
			continue;
		}
		if (s->live[t] != s->live[best]) {
			if (!s->live[t])
				best = t;
		} else if (s->key[t] != s->key[best]) {
			if (s->key[t] > s->key[best])
				best = t;
		} else if (bytes[t] != bytes[best]) {
			if (bytes[t] > bytes[best])
				best = t;
		} else if (t < best) {
			best = t;
		}
	}
	return best;
}

/* Next-use keys: after request r, the position of the next request that
 * needs the value (INF if it is overwritten first) and whether the value
 * is live (read anywhere before being overwritten). Cyclic traces scan two
 * laps so the keys of the last requests see the next step. */
static void next_use(const struct creq *rq, uint32_t n, uint32_t nt, bool cyclic,
		     int64_t *st_key, uint8_t *st_live, int64_t *nkey, uint8_t *nlive)
{
	for (uint32_t t = 0; t < nt; t++) {
		st_key[t] = INF_KEY;
		st_live[t] = 0;
	}
	for (int64_t p = (cyclic ? 2 * (int64_t)n : n) - 1; p >= 0; p--) {
		uint32_t r = p % n, t = rq[r].t;
		uint8_t f = rq[r].f;

		if (p < n) {
			nkey[r] = st_key[t];
			nlive[r] = st_live[t];
		}
		if (f & RQ_NEED) {
			st_key[t] = p;
			st_live[t] = 1;
		} else if ((f & (RQ_RES | RQ_WRITE)) == (RQ_RES | RQ_WRITE) ||
			   (f & RQ_KILL)) {
			st_key[t] = INF_KEY;
			st_live[t] = !!(f & RQ_FLUSH);
		} else if (f & RQ_FLUSH) {
			st_live[t] = 1;
		}
	}
}

/* First segment ending after off (segments are disjoint and sorted). */
static uint32_t seg_after(const struct lay *L, uint64_t off)
{
	uint32_t lo = 0, hi = L->nseg;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (L->seg[mid].off + L->seg[mid].len > off)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/*
 * The window [w, w + need) a miss at now takes, and its residents
 * seg[*first .. *end): no held one, then the fewest kept tensors (small
 * ones, see small_keep) still to be read, then the least cost: the sum of
 * n / (next use - now) over those still to be read (a free hole costs 0:
 * MIN's furthest next use, summed over a window) plus the late share of
 * its copy (LAY_LATE), then the least free space left around it (best
 * fit), the fewest residents, the lowest address. -1 when every window
 * holds a tensor in use. O(residents x window) per miss, planning time.
 */
static int64_t lay_pick(const struct cstate *s, const struct lay *L, uint64_t need, int64_t now,
			const uint8_t *keep, uint32_t *first, uint32_t *end)
{
	uint64_t best_slack = 0;
	uint32_t nc = 0, best_nk = 0, best_nv = 0;
	int64_t best = -1;
	double best_inv = 0;

	if (need > L->B)
		return -1;
	L->cand[nc++] = 0;
	L->cand[nc++] = (int64_t)(L->B - need);
	for (uint32_t i = 0; i < L->nseg; i++) {
		int64_t o = L->seg[i].off, e = o + L->seg[i].len;

		L->cand[nc++] = o;
		L->cand[nc++] = e;
		L->cand[nc++] = o - (int64_t)need;
		L->cand[nc++] = e - (int64_t)need;
	}
	for (uint32_t c = 0; c < nc; c++) {
		int64_t w = L->cand[c];
		uint64_t we, lo, hi, slack;
		uint32_t i, j, nk = 0;
		double inv = 0;
		bool ok = true;

		if (w < 0 || (uint64_t)w + need > L->B)
			continue;
		we = w + need;
		i = seg_after(L, w);
		for (j = i; j < L->nseg && L->seg[j].off < we; j++) {
			uint32_t v = L->seg[j].t;

			if (s->held[v] >= now) {
				ok = false;
				break;
			}
			if (s->key[v] != INF_KEY) {
				int64_t d = s->key[v] - now;

				inv += (double)L->n / (double)(d > 0 ? d : 1);
				nk += keep && keep[v];
			}
			/* both only grow: already worse than the best */
			if (best >= 0 && (nk > best_nk || (nk == best_nk && inv > best_inv))) {
				ok = false;
				break;
			}
		}
		if (!ok)
			continue;
		if (need) {	/* the copy starts after its victims' last use */
			int64_t ready = -L->n, lead, copy = (int64_t)(need * L->ns_per_byte);

			for (uint32_t k = i; k < j; k++)
				if (s->last[L->seg[k].t] + 1 > ready)
					ready = s->last[L->seg[k].t] + 1;
			if (ready > now)
				ready = now;
			lead = L->tpos[now + L->n] - L->tpos[ready + L->n];
			if (copy > lead)
				inv += LAY_LATE * (double)(copy - lead) / (double)copy;
		}
		lo = i ? L->seg[i - 1].off + L->seg[i - 1].len : 0;
		hi = j < L->nseg ? L->seg[j].off : L->B;
		slack = hi - lo - need;
		if (best >= 0) {
			if (nk != best_nk) {
				if (nk > best_nk)
					continue;
			} else if (inv != best_inv) {
				if (inv > best_inv)
					continue;
			} else if (slack != best_slack) {
				if (slack > best_slack)
					continue;
			} else if (j - i != best_nv) {
				if (j - i > best_nv)
					continue;
			} else if (w >= best) {
				continue;
			}
		}
		best = w;
		best_nk = nk;
		best_inv = inv;
		best_slack = slack;
		best_nv = j - i;
		*first = i;
		*end = j;
	}
	return best;
}

/* Takes segment k of t out (a kill). */
static void lay_remove(struct lay *L, uint32_t k)
{
	memmove(&L->seg[k], &L->seg[k + 1], (L->nseg - k - 1) * sizeof(*L->seg));
	L->nseg--;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* The segments for the residents of s (a step's start). */
static void lay_load(struct lay *L, const struct cstate *s, uint32_t nt)
{
	L->nseg = 0;
	for (uint32_t t = 0; t < nt; t++)
		if (s->resident[t])
			L->seg[L->nseg++] = (struct seg){ s->goff[t], L->len[t], t };
	qsort(L->seg, L->nseg, sizeof(*L->seg), seg_cmp);
	L->group = NO_GROUP;
}

/* The level's capacity at request r: cap, or lower where capv says so. */
static inline uint64_t cap_at(uint64_t cap, const uint64_t *capv, uint64_t sub, uint32_t r)
{
	uint64_t c;

	if (!capv)
		return cap;
	c = capv[r] > sub ? capv[r] - sub : 0;
	return c < cap ? c : cap;
}

/* Evicts the residents seg[first .. end) at request r (the list itself is
 * left to the caller). */
static int lay_evict(struct lay *L, uint32_t first, uint32_t end, int64_t r,
		     const uint64_t *bytes, struct cstate *s, struct cout *o, uint64_t *used)
{
	for (uint32_t k = first; k < end; k++) {
		uint32_t v = L->seg[k].t;
		int ret = push_victim(o, (struct victim){ .t = v, .wb = s->dirty[v] && s->live[v],
							  .last = s->last[v], .off = L->seg[k].off });

		if (ret)
			return ret;
		set_res(s, v, 0);
		s->dirty[v] = 0;
		s->evict_at[v] = r;
		s->goff[v] = -1;
		*used -= bytes[v];
	}
	return 0;
}

/*
 * An op whose tensors found no window one by one (the ones it holds split
 * the room): at its first request, its residents leave and one window
 * takes all its tensors, so each of them is a miss placed in turn
 * (cache_step). Costs a refetch of what was resident, so only for ops
 * that fail otherwise (L->contig).
 */
/* The window lay_pick found (w), its residents seg[first, end) evicted;
 * -ENOSPC where it found none (the op at hand failed: lay_op_window). */
static int lay_take(struct lay *L, int64_t w, uint32_t group, uint32_t first, uint32_t end,
		    int64_t r, const uint64_t *bytes, struct cstate *s, struct cout *o,
		    uint64_t *used)
{
	if (w < 0) {
		L->failed = group;
		return -ENOSPC;
	}
	return lay_evict(L, first, end, r, bytes, s, o, used);
}

static int lay_op_window(const struct creq *rq, uint32_t r, uint32_t n, const uint64_t *bytes,
			 struct lay *L, struct cstate *s, struct cout *o, uint64_t *used)
{
	const struct creq *q = &rq[r];
	uint64_t need = 0;
	uint32_t first, end;
	int64_t w;
	int ret;

	for (uint32_t k = r; k < n && k <= q->end; k++) {
		uint32_t t = rq[k].t, at;

		if (rq[k].group != q->group || !(rq[k].f & RQ_RES))
			continue;
		need += L->len[t];
		if (!s->resident[t])
			continue;
		at = seg_after(L, s->goff[t]);
		ret = lay_evict(L, at, at + 1, r, bytes, s, o, used);
		if (ret)
			return ret;
		lay_remove(L, at);
	}
	w = lay_pick(s, L, need, r, NULL, &first, &end);
	ret = lay_take(L, w, q->group, first, end, r, bytes, s, o, used);
	if (ret)
		return ret;
	memmove(&L->seg[first], &L->seg[end], (L->nseg - end) * sizeof(*L->seg));
	L->nseg -= end - first;
	L->group = q->group;
	L->at = w;
	L->left = need;
	return 0;
}

/* Victims at request r until need more bytes fit within limit; -ENOSPC:
 * every resident left is held. */
static int evict_to(struct cstate *s, struct cout *o, const uint64_t *bytes, uint64_t limit,
		    uint64_t need, uint32_t r, int64_t cold, enum tc_policy pol,
		    const uint8_t *keep, uint64_t *used)
{
	while (*used + need > limit) {
		int64_t v = pick_victim(s, bytes, r, cold, pol, keep);
		int ret;

		if (v < 0)
			return -ENOSPC;
		ret = push_victim(o, (struct victim){
			.t = v, .wb = s->dirty[v] && s->live[v], .last = s->last[v] });
		if (ret)
			return ret;
		set_res(s, v, 0);
		s->dirty[v] = 0;
		s->evict_at[v] = r;
		*used -= bytes[v];
	}
	return 0;
}

static int cache_step(const struct creq *rq, uint32_t n, const uint64_t *bytes,
		      uint32_t nt, uint64_t cap, const uint64_t *capv, uint64_t sub,
		      enum tc_policy pol, const uint8_t *keep, const int64_t *nkey, const uint8_t *nlive,
		      struct lay *L, struct cstate *s, struct cout *o, uint64_t *used)
{
	uint32_t cur_group = NO_GROUP;
	int ret;

	o->nvic = 0;
	for (uint32_t r = 0; r < n; r++) {
		const struct creq *q = &rq[r];
		uint32_t t = q->t;

		o->vfirst[r] = o->nvic;
		o->res[r] = RES_NONE;
		o->flush[r] = o->kill[r] = 0;
		o->evict_at[r] = s->evict_at[t];
		o->lastw[r] = s->last[t];
		if (L)
			o->goff[r] = -1;
		/* a group's tensors stay put until its end; other requests may
		 * sit between its members (pinned level), hence the scan to end */
		if (q->group != NO_GROUP && q->group != cur_group) {
			cur_group = q->group;
			for (uint32_t k = r; k < n && k <= q->end; k++)
				if (rq[k].group == cur_group && s->held[rq[k].t] < q->end)
					s->held[rq[k].t] = q->end;
			if (L && L->contig[cur_group]) {
				ret = lay_op_window(rq, r, n, bytes, L, s, o, used);
				if (ret)
					return ret;
			}
		}
		if ((q->f & RQ_FLUSH) && s->resident[t] && s->dirty[t]) {
			o->flush[r] = 1;
			s->dirty[t] = 0;
		}
		if ((q->f & RQ_KILL) && s->resident[t]) {
			o->kill[r] = 1;
			set_res(s, t, 0);
			s->dirty[t] = 0;
			*used -= bytes[t];
			if (L) {
				o->goff[r] = s->goff[t];
				lay_remove(L, seg_after(L, s->goff[t]));
				s->goff[t] = -1;
			}
		}
		if (q->f & RQ_KILL)	/* no refetch before the op writing it ends */
			s->evict_at[t] = q->end;
		if (s->evict_down && capv) {	/* all held: the next miss waits */
			ret = evict_to(s, o, bytes, cap_at(cap, capv, sub, r), 0, r, q->cold, pol,
				       keep, used);
			if (ret && ret != -ENOSPC)
				return ret;
		}
		if (q->f & RQ_RES) {
			if (s->resident[t]) {
				o->res[r] = (q->f & RQ_NEED) ? RES_HIT : RES_AHIT;
			} else if (L) {
				uint32_t first = 0, end = 0;
				int64_t w = -1;

				if (q->group != NO_GROUP && q->group == L->group && L->left >= L->len[t]) {
					w = L->at;	/* in the op's window (lay_op_window) */
					first = end = seg_after(L, w);
					L->at += L->len[t];
					L->left -= L->len[t];
				} else {
					w = lay_pick(s, L, L->len[t], r, keep, &first, &end);
				}
				ret = lay_take(L, w, q->group, first, end, r, bytes, s, o, used);
				if (ret)
					return ret;
				/* the window replaces its residents in the list */
				memmove(&L->seg[first + 1], &L->seg[end],
					(L->nseg - end) * sizeof(*L->seg));
				L->nseg = L->nseg - (end - first) + 1;
				L->seg[first] = (struct seg){ w, L->len[t], t };
				s->goff[t] = o->goff[r] = w;
				set_res(s, t, 1);
				*used += bytes[t];
				o->res[r] = (q->f & RQ_NEED) ? RES_MISS : RES_ALLOC;
			} else {
				ret = evict_to(s, o, bytes, cap_at(cap, capv, sub, r), bytes[t], r,
					       q->cold, pol, keep, used);
				if (ret)
					return ret;
				set_res(s, t, 1);
				*used += bytes[t];
				o->res[r] = (q->f & RQ_NEED) ? RES_MISS : RES_ALLOC;
			}
			if (q->f & RQ_WRITE)
				s->dirty[t] = 1;
			/* max: a copy slot can sit inside a host op holding t */
			if (q->end > s->last[t])
				s->last[t] = q->end;
			s->lru[t] = r;
		} else if (q->f & RQ_FLUSH) {
			if (q->end > s->last[t])
				s->last[t] = q->end;
		}
		if (q->f & (RQ_RES | RQ_FLUSH | RQ_KILL)) {
			s->key[t] = nkey[r];
			s->live[t] = nlive[r];
			if (s->heap && s->resident[t])
				hfix(s, s->hpos[t]);
		}
		o->use[r] = *used;
	}
	o->vfirst[n] = o->nvic;
	return 0;
}

/* One step of the level from the state in s: times shifted to this step
 * (it > 0), keys reset; o->start / o->end (and layout offsets) recorded. */
static int cache_lap(const struct creq *rq, uint32_t n, const uint64_t *bytes, uint32_t nt,
		     uint64_t cap, const uint64_t *capv, uint64_t sub, enum tc_policy pol,
		     const uint8_t *keep, const int64_t *nkey, const uint8_t *nlive,
		     const int64_t *st_key, const uint8_t *st_live, struct lay *L,
		     struct cstate *s, struct cout *o, uint64_t *used, uint32_t it)
{
	int ret;

	for (uint32_t t = 0; t < nt; t++) {
		o->start[t] = s->resident[t] | s->dirty[t] << 1;
		if (L)
			o->sgoff[t] = s->goff[t];
		/* keys and times relative to this step */
		s->key[t] = st_key[t];
		s->live[t] = st_live[t];
		if (it) {
			s->last[t] -= n;
			s->evict_at[t] -= n;
			s->lru[t] -= n;
		}
		if (s->last[t] < -(int64_t)n)
			s->last[t] = -(int64_t)n;
		if (s->evict_at[t] < -(int64_t)n)
			s->evict_at[t] = -(int64_t)n;
		s->held[t] = -1;
	}
	if (s->heap)
		hbuild(s);
	if (L)
		lay_load(L, s, nt);
	ret = cache_step(rq, n, bytes, nt, cap, capv, sub, pol, keep, nkey, nlive, L, s, o, used);
	if (ret)
		return ret;
	o->iters = it + 1;
	for (uint32_t t = 0; t < nt; t++) {
		o->end[t] = s->resident[t] | s->dirty[t] << 1;
		if (L)
			o->egoff[t] = s->goff[t];
	}
	return 0;
}

/* The step ended as it began (with a layout: each resident in its place). */
static bool lap_same(const struct cout *o, uint32_t nt, bool layout)
{
	if (memcmp(o->start, o->end, nt))
		return false;
	for (uint32_t t = 0; layout && t < nt; t++)
		if ((o->start[t] & 1) && o->sgoff[t] != o->egoff[t])
			return false;
	return true;
}

/*
 * Laid out, the offsets need not repeat from step to step. The start set
 * is cut to the residents the step ends with in the same place until a
 * step from it ends with all of them there (it may end with more: the seam
 * drops those). Each round drops at least one, so it ends; after 64 rounds
 * it starts empty. Then one more step from the same set (the same choices)
 * makes the carried-over times (last use, eviction) that step's own.
 */
static int lay_close(const struct creq *rq, uint32_t n, const uint64_t *bytes, uint32_t nt,
		     uint64_t cap, enum tc_policy pol, const uint8_t *keep, const int64_t *nkey,
		     const uint8_t *nlive, const int64_t *st_key, const uint8_t *st_live,
		     struct lay *L, struct cstate *s, struct cout *o, uint64_t *used)
{
	uint8_t *S = malloc(nt ? nt : 1);
	int64_t *Soff = malloc((nt ? nt : 1) * sizeof(*Soff));
	int ret = -ENOMEM;

	if (!S || !Soff)
		goto out;
	for (uint32_t round = 0, ok = 0, again = 0;; round++) {
		if (!ok) {
			for (uint32_t t = 0; t < nt; t++) {
				S[t] = o->start[t];
				Soff[t] = o->sgoff[t];
				if ((S[t] & 1) && (round >= 64 || !(o->end[t] & 1) ||
						   o->egoff[t] != o->sgoff[t])) {
					S[t] = 0;
					Soff[t] = -1;
				}
			}
		}
		*used = 0;
		for (uint32_t t = 0; t < nt; t++) {
			/* a resident the seam drops is refetched after it */
			if ((s->resident[t] || (o->end[t] & 1)) && !(S[t] & 1))
				s->evict_at[t] = n - 1;	/* -1 after the shift */
			set_res(s, t, S[t] & 1);
			s->dirty[t] = S[t] >> 1 & 1;
			s->goff[t] = Soff[t];
			if (S[t] & 1)
				*used += bytes[t];
		}
		ret = cache_lap(rq, n, bytes, nt, cap, NULL, 0, pol, keep, nkey, nlive, st_key,
				st_live, L, s, o, used, o->iters);
		if (ret)
			goto out;
		if (again)
			break;
		ok = 1;
		for (uint32_t t = 0; t < nt && ok; t++)
			if ((S[t] & 1) && (!(o->end[t] & 1) || o->egoff[t] != Soff[t]))
				ok = 0;
		again = ok;
	}
	o->converged = lap_same(o, nt, true);
	ret = 0;
out:
	free(S);
	free(Soff);
	return ret;
}

/* Runs the level until the state at step start repeats (cyclic) or once
 * from empty (acyclic). o->start/end hold the final step's states. With a
 * layout (L), a cyclic run ends with a step whose end holds its start
 * set in place (lay_close). */
static int cache_run(const struct creq *rq, uint32_t n, const uint64_t *bytes,
		     uint32_t nt, uint64_t cap, const uint64_t *capv, uint64_t sub,
		     enum tc_policy pol, const uint8_t *keep, bool cyclic, struct lay *L,
		     int64_t horizon, bool dead_oldest, bool evict_down, struct cout *o)
{
	struct cstate s = { 0 };
	int64_t *nkey = malloc(n * sizeof(*nkey)), *st_key = malloc(nt * sizeof(*st_key));
	uint8_t *nlive = malloc(n), *st_live = malloc(nt);
	uint64_t used = 0;
	int ret = -ENOMEM;

	memset(o, 0, sizeof(*o));
	o->res = malloc(n); o->flush = malloc(n); o->kill = malloc(n);
	o->vfirst = malloc((n + 1) * sizeof(*o->vfirst));
	o->evict_at = malloc(n * sizeof(int64_t));
	o->lastw = malloc(n * sizeof(int64_t));
	o->use = malloc(n * sizeof(uint64_t));
	o->start = calloc(nt, 1); o->end = calloc(nt, 1); o->slive = malloc(nt);
	s.resident = calloc(nt, 1); s.dirty = calloc(nt, 1); s.live = calloc(nt, 1);
	s.key = malloc(nt * sizeof(int64_t)); s.last = malloc(nt * sizeof(int64_t));
	s.evict_at = malloc(nt * sizeof(int64_t)); s.lru = malloc(nt * sizeof(int64_t));
	s.held = malloc(nt * sizeof(int64_t));
	s.rl = malloc(nt * sizeof(uint32_t) + 1);
	s.rpos = malloc(nt * sizeof(uint32_t) + 1);
	s.bytes = bytes;
	s.horizon = horizon;
	s.dead_oldest = dead_oldest;
	s.evict_down = evict_down;
	s.heap = pol != TC_POLICY_LRU && !keep && !L && !victim_scan;
	for (uint32_t i = 0; i < n && s.heap; i++)
		s.heap = rq[i].cold == INT64_MAX;
	if (s.heap) {
		s.hp = malloc(nt * sizeof(uint32_t) + 1);
		s.hpos = malloc(nt * sizeof(uint32_t) + 1);
		s.htmp = malloc(nt * sizeof(uint32_t) + 1);
	}
	if (L) {
		o->goff = malloc(n * sizeof(int64_t));
		o->sgoff = malloc(nt * sizeof(int64_t));
		o->egoff = malloc(nt * sizeof(int64_t));
		s.goff = malloc(nt * sizeof(int64_t));
	}
	if (!nkey || !st_key || !nlive || !st_live || !o->res || !o->flush || !o->kill ||
	    !o->vfirst || !o->evict_at || !o->lastw || !o->use || !o->start || !o->end ||
	    !o->slive ||
	    !s.resident || !s.dirty || !s.live || !s.key || !s.last || !s.evict_at ||
	    !s.lru || !s.held || !s.rl || !s.rpos ||
	    (s.heap && (!s.hp || !s.hpos || !s.htmp)) || (L && (!o->goff || !o->sgoff || !o->egoff || !s.goff)))
		goto out;
	next_use(rq, n, nt, cyclic, st_key, st_live, nkey, nlive);
	memcpy(o->slive, st_live, nt);
	for (uint32_t t = 0; t < nt; t++) {
		s.last[t] = s.evict_at[t] = s.lru[t] = -(int64_t)n;
		s.held[t] = -1;
		if (L)
			s.goff[t] = -1;
	}
	for (uint32_t it = 0; it < (cyclic ? 16u : 1u); it++) {
		ret = cache_lap(rq, n, bytes, nt, cap, capv, sub, pol, keep, nkey, nlive, st_key,
				st_live, L, &s, o, &used, it);
		if (ret)
			goto out;
		/* a fixed point is reached when a step ends as it began; one more
		 * lap then makes the carried-over times (last use, eviction)
		 * those of the steady step too */
		if (!cyclic || (o->converged && lap_same(o, nt, L)))
			break;
		o->converged = lap_same(o, nt, L);
	}
	if (cyclic && L && !(o->converged && lap_same(o, nt, true))) {
		ret = lay_close(rq, n, bytes, nt, cap, pol, keep, nkey, nlive, st_key, st_live,
				L, &s, o, &used);
		if (ret)
			goto out;
	}
	/* the table repeats this lap: a value it evicts late in the step is
	 * refetched in the next one after that eviction, which the lap
	 * before (whose times this one started from) may have made earlier */
	for (uint32_t r = 0; cyclic && r < n; r++) {
		int64_t e = s.evict_at[rq[r].t] - (int64_t)n;

		if (o->evict_at[r] < e)
			o->evict_at[r] = e;
	}
	if (!cyclic)
		o->converged = true;
	ret = 0;
out:
	free(nkey); free(st_key); free(nlive); free(st_live);
	free(s.resident); free(s.dirty); free(s.live); free(s.key); free(s.last);
	free(s.rl); free(s.rpos); free(s.hp); free(s.hpos); free(s.htmp);
	free(s.evict_at); free(s.lru); free(s.held); free(s.goff);
	if (ret)
		cout_free(o);
	return ret;
}

/* Earliest issue point p in [lb, r] such that adding delta bytes to every
 * issue point in [p, r) keeps the level within cap; applies it. p == r is
 * always feasible. Positions are unrolled; use[] is indexed mod n. */
static int64_t place_early(uint64_t *use, uint32_t n, int64_t lb, int64_t r,
			   int64_t delta, uint64_t cap, const uint64_t *capv)
{
	int64_t p = r;
	uint32_t k;

	if (lb > r)
		lb = r;
	if (delta <= 0) {
		p = lb;
	} else if (lb < r) {	/* k: p - 1's index, walked down without a division */
		k = (uint32_t)((r - 1 + 2 * (int64_t)n) % n);
		while (p - 1 >= lb && use[k] + delta <= cap_at(cap, capv, 0, k)) {
			p--;
			k = k ? k - 1 : n - 1;
		}
	}
	k = (uint32_t)((p + 2 * (int64_t)n) % n);
	for (int64_t i = p; i < r; i++) {
		use[k] += delta;
		if (++k == n)
			k = 0;
	}
	return p;
}

/* ---- intermediate op list ----------------------------------------------- */

/* order of ops sharing one issue point; seam fix-ups go before all else */
enum { CLS_FIX = 0, CLS_OUT = 3, CLS_DROP, CLS_IN };

struct gop {
	int64_t pos;		/* unrolled issue point (slot index on the pinned level) */
	int32_t need;
	uint32_t t, seq;
	uint8_t kind, cls;
	int64_t off;		/* layout: a FETCH / ALLOC's GPU offset, else -1 */
};

struct gops {
	struct gop *v;
	uint32_t nr, cap;
};

static int gops_add_cls(struct gops *g, int64_t pos, uint8_t kind, uint32_t t,
		       int32_t need, bool fix)
{
	static const uint8_t cls[TC_OP_NR] = {
		[TC_OP_FETCH] = CLS_IN, [TC_OP_ALLOC] = CLS_IN,
		[TC_OP_WRITEBACK] = CLS_OUT, [TC_OP_DROP] = CLS_DROP,
		[TC_OP_STAGE_IN] = CLS_IN, [TC_OP_PALLOC] = CLS_IN,
		[TC_OP_STAGE_OUT] = CLS_OUT, [TC_OP_PDROP] = CLS_DROP,
	};

	if (TC_GROW(g->v, g->cap, g->nr, 256))
		return -ENOMEM;
	g->v[g->nr] = (struct gop){ .pos = pos, .need = need, .t = t, .seq = g->nr,
				    .kind = kind, .cls = cls[kind] - (fix ? CLS_OUT : 0), .off = -1 };
	g->nr++;
	return 0;
}

static int gops_add(struct gops *g, int64_t pos, uint8_t kind, uint32_t t, int32_t need)
{
	return gops_add_cls(g, pos, kind, t, need, false);
}

/* Seam fix-up: moves the level from its end state back to its start state. */
static int gops_fix(struct gops *g, uint8_t kind, uint32_t t)
{
	return gops_add_cls(g, 0, kind, t, -1, true);
}

/* qsort has no context argument; the modulus is per thread */
static __thread uint32_t tl_mod;

static int gop_cmp(const void *a, const void *b)
{
	const struct gop *x = a, *y = b;
	int64_t px = (x->pos % tl_mod + tl_mod) % tl_mod, py = (y->pos % tl_mod + tl_mod) % tl_mod;

	if (px != py)
		return px < py ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void gops_sort(struct gops *g, uint32_t n)
{
	tl_mod = n;
	qsort(g->v, g->nr, sizeof(*g->v), gop_cmp);
}

/* ---- trace helpers ------------------------------------------------------ */

struct tinfo {
	uint32_t n, nt, nops;
	uint32_t *op_of;	/* access -> op index */
	uint32_t *op_end;	/* access -> END access of its op */
	uint64_t *bytes;
};

static int tinfo_init(const struct tc_trace *tr, struct tinfo *ti)
{
	uint32_t op = 0, start = 0;

	ti->n = tr->nr_acc;
	ti->nt = tr->nr_tensors;
	ti->op_of = malloc(ti->n * sizeof(uint32_t));
	ti->op_end = malloc(ti->n * sizeof(uint32_t));
	ti->bytes = malloc(ti->nt * sizeof(uint64_t));
	if (!ti->op_of || !ti->op_end || !ti->bytes)
		return -ENOMEM;
	for (uint32_t t = 0; t < ti->nt; t++)
		ti->bytes[t] = tr->tensors[t].bytes;
	for (uint32_t i = 0; i < ti->n; i++) {
		ti->op_of[i] = op;
		if (tr->acc[i].flags & TC_ACC_END) {
			for (uint32_t k = start; k <= i; k++)
				ti->op_end[k] = i;
			start = i + 1;
			op++;
		}
	}
	ti->nops = op;
	return 0;
}

static void tinfo_free(struct tinfo *ti)
{
	free(ti->op_of); free(ti->op_end); free(ti->bytes);
}

/* GPU-level requests: GPU accesses need residency; host reads flush a dirty
 * GPU copy, host writes kill it. */
static int gpu_requests(const struct tc_trace *tr, const struct tinfo *ti, bool cold_first,
			struct creq **out)
{
	struct creq *rq = malloc(ti->n * sizeof(*rq));
	int64_t prev_start = INT64_MIN, cur_start = 0;

	if (!rq)
		return -ENOMEM;
	for (uint32_t i = 0; i < ti->n; i++) {
		const struct tc_access *a = &tr->acc[i];
		uint8_t f = 0;

		if (a->flags & TC_ACC_HOST) {
			f = (a->flags & TC_ACC_READ ? RQ_FLUSH : 0) |
			    (a->flags & TC_ACC_WRITE ? RQ_KILL : 0);
			rq[i] = (struct creq){ .t = a->tensor, .group = NO_GROUP,
					       .end = ti->op_end[i], .f = f };
		} else {
			f = RQ_RES | (a->flags & TC_ACC_READ ? RQ_NEED : 0) |
			    (a->flags & TC_ACC_WRITE ? RQ_WRITE : 0);
			rq[i] = (struct creq){ .t = a->tensor, .group = ti->op_of[i],
					       .end = ti->op_end[i], .f = f };
		}
		/* cold = start of the previous op: the host issues one op ahead */
		rq[i].cold = cold_first ? prev_start : INT64_MAX;
		if (a->flags & TC_ACC_END) {
			prev_start = cur_start;
			cur_start = i + 1;
		}
	}
	*out = rq;
	return 0;
}

/* ---- GPU level: ours and LRU (from the cache core) ---------------------- */

/*
 * The GPU tensors ours' MIN keeps unless nothing else can go: the smallest,
 * each under 1/1000 of the budget and all together at most 1/32 of it.
 * Evicting one frees next to no room but costs a miss: biases and norms
 * are most of a transformer's GPU reads, and keeping them doubles MIN's hit
 * count at no cost in bytes moved (results/layout-min).
 */
static int small_cmp(const void *a, const void *b, void *arg)
{
	const uint64_t *bytes = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return bytes[x] < bytes[y] ? -1 : bytes[x] > bytes[y] ? 1 : (x > y) - (x < y);
}

static int small_keep(const struct tc_trace *tr, const struct tinfo *ti, uint64_t budget,
		      uint8_t **out)
{
	uint8_t *keep = calloc(ti->nt ? ti->nt : 1, 1), *gpu = calloc(ti->nt ? ti->nt : 1, 1);
	uint32_t *ord = malloc((ti->nt ? ti->nt : 1) * sizeof(*ord)), n = 0;
	uint64_t sum = 0;

	if (!keep || !gpu || !ord) {
		free(keep);
		free(gpu);
		free(ord);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < tr->nr_acc; i++)
		if (!(tr->acc[i].flags & TC_ACC_HOST))
			gpu[tr->acc[i].tensor] = 1;
	for (uint32_t t = 0; t < ti->nt; t++)
		if (gpu[t] && ti->bytes[t] < budget / 1000)
			ord[n++] = t;
	qsort_r(ord, n, sizeof(*ord), small_cmp, (void *)ti->bytes);
	for (uint32_t k = 0; k < n && sum + ti->bytes[ord[k]] <= budget / 32; k++) {
		keep[ord[k]] = 1;
		sum += ti->bytes[ord[k]];
	}
	free(gpu);
	free(ord);
	*out = keep;
	return 0;
}


/* GPU ranges freed (layout): a copy into one is issued after its DROP. */
struct frange {
	uint64_t off, len;
	int64_t at;		/* the DROP's issue point (or a later one) */
};

struct franges {
	struct frange *v;
	uint32_t nr, cap;
};

static int fr_add(struct franges *f, uint64_t off, uint64_t len, int64_t at)
{
	if (TC_GROW(f->v, f->cap, f->nr, 256))
		return -ENOMEM;
	f->v[f->nr++] = (struct frange){ off, len, at };
	return 0;
}

/* The latest DROP of anything that was in [off, off + len) before. */
static int64_t fr_last(const struct franges *f, uint64_t off, uint64_t len)
{
	int64_t at = INT64_MIN;

	for (uint32_t i = 0; i < f->nr; i++)
		if (f->v[i].off < off + len && off < f->v[i].off + f->v[i].len && f->v[i].at > at)
			at = f->v[i].at;
	return at;
}

/*
 * The previous step's frees, for the layout: each victim's and killed
 * copy's range at its request's point less a step (its DROP is issued
 * there or earlier), and what the seam drops at 0.
 */
static int fr_prev(const struct cout *o, const struct creq *rq, uint32_t n, uint32_t nt,
		   const uint64_t *len, struct franges *f)
{
	int ret = 0;

	for (uint32_t r = 0; r < n && !ret; r++) {
		for (uint32_t k = o->vfirst[r]; k < o->vfirst[r + 1] && !ret; k++)
			ret = fr_add(f, o->vic[k].off, len[o->vic[k].t], (int64_t)r - n);
		if (!ret && o->kill[r])
			ret = fr_add(f, o->goff[r], len[rq[r].t], (int64_t)r - n);
	}
	for (uint32_t t = 0; t < nt && !ret; t++)
		if (!o->converged && (o->end[t] & 1) && !(o->start[t] & 1))
			ret = fr_add(f, o->egoff[t], len[t], 0);
	return ret;
}

/* The layout's state for the GPU level of tr (lay_free undoes it). */
static int lay_init(struct lay *L, const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		    const struct tinfo *ti)
{
	uint32_t n = ti->n;

	L->B = cfg->gpu_bytes;
	L->len = malloc((ti->nt ? ti->nt : 1) * sizeof(*L->len));
	L->seg = malloc((ti->nt + 1) * sizeof(*L->seg));
	L->cand = malloc((4 * (size_t)ti->nt + 2) * sizeof(*L->cand));
	L->contig = calloc(ti->nops ? ti->nops : 1, 1);
	L->tpos = malloc((2 * (size_t)n + 1) * sizeof(*L->tpos));
	if (!L->len || !L->seg || !L->cand || !L->contig || !L->tpos)
		return -ENOMEM;
	for (uint32_t t = 0; t < ti->nt; t++)
		L->len[t] = (ti->bytes[t] + TC_PLAN_ALIGN - 1) / TC_PLAN_ALIGN * TC_PLAN_ALIGN;
	L->n = n;
	L->ns_per_byte = 1e9 / cfg->bw[TC_LINK_H2D];
	/* the GPU's time (host ops too, unless they run detached) */
	L->tpos[0] = 0;
	for (uint32_t p = 0; p < 2 * n; p++) {
		const struct tc_access *a = &tr->acc[p % n];
		bool gpu_time = (a->flags & TC_ACC_END) &&
				(!(a->flags & TC_ACC_HOST) || !(cfg->flags & TC_PLAN_HOST_ASYNC));

		L->tpos[p + 1] = L->tpos[p] + (gpu_time ? (int64_t)a->compute_ns : 0);
	}
	return 0;
}

static void lay_free(struct lay *L)
{
	free(L->len);
	free(L->seg);
	free(L->cand);
	free(L->contig);
	free(L->tpos);
}

static int gpu_level_cache(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
			   const struct tinfo *ti, struct gops *g, uint8_t *hit,
			   uint8_t *start, int64_t *start_goff, struct tc_plan_stats *st)
{
	bool cyclic = !(cfg->flags & TC_PLAN_ACYCLIC), early = cfg->policy == TC_POLICY_OURS;
	struct creq *rq;
	struct cout o = { 0 };
	struct lay lay = { 0 }, *L = NULL;
	struct franges fr = { 0 };
	uint32_t n = ti->n;
	int64_t lb0, prev_fetch = INT64_MIN;
	uint8_t *hostw = NULL, *lastw = NULL, *keep = NULL;
	int ret;

	ret = gpu_requests(tr, ti, cfg->policy == TC_POLICY_OURS && st->cold_first, &rq);
	if (ret)
		return ret;
	if (cfg->policy == TC_POLICY_OURS && !(cfg->flags & TC_PLAN_PURE_MIN)) {
		ret = small_keep(tr, ti, cfg->gpu_bytes, &keep);
		if (ret)
			goto out;
	}
	/* per request: its value was last written by a host op (a gated fetch) */
	hostw = calloc(n, 1);
	lastw = calloc(ti->nt ? ti->nt : 1, 1);
	if (!hostw || !lastw) {
		ret = -ENOMEM;
		goto out;
	}
	for (int lap = 0; lap < 2; lap++)
		for (uint32_t i = 0; i < n; i++) {
			const struct tc_access *a = &tr->acc[i];

			hostw[i] = lastw[a->tensor];
			if (a->flags & TC_ACC_WRITE)
				lastw[a->tensor] = !!(a->flags & TC_ACC_HOST);
		}
	if (cfg->flags & TC_PLAN_LAYOUT) {
		L = &lay;
		ret = lay_init(L, tr, cfg, ti);
		if (ret)
			goto out;
	}
	/* laid out, an op whose tensors found no window each (the ones it
	 * holds split the room) takes one window for all its misses, and the
	 * level runs again; one window each hits more where it works */
	for (;;) {
		lay.failed = NO_GROUP;
		ret = cache_run(rq, n, ti->bytes, ti->nt, cfg->gpu_bytes - st->reserve_bytes,
				cfg->gpu_cap, st->reserve_bytes, cfg->policy, keep, cyclic, L, 0, false,
				false, &o);
		if (ret != -ENOSPC || !L || lay.failed == NO_GROUP || lay.contig[lay.failed])
			break;
		lay.contig[lay.failed] = 1;
	}
	if (ret)
		goto out;
	st->steady_iters = o.iters;
	st->reconciled = !o.converged;
	/* no fixed point: the table starts by moving the end state back to the
	 * start state, and no copy may be issued across that seam. Laid out,
	 * the seam only drops (lay_close), and a copy into a range it frees
	 * waits for it (fr_prev) */
	lb0 = (cyclic && (o.converged || L)) ? INT64_MIN : 0;
	memcpy(start, o.converged ? o.start : o.end, ti->nt);
	if (L) {
		memcpy(start_goff, o.converged ? o.sgoff : o.egoff, ti->nt * sizeof(int64_t));
		if (cyclic)
			ret = fr_prev(&o, rq, n, ti->nt, lay.len, &fr);
		if (ret)
			goto out;
	}
	if (!o.converged) {
		for (uint32_t t = 0; t < ti->nt && !ret; t++) {
			bool in_s = o.start[t] & 1, in_e = o.end[t] & 1;

			if (in_e && (!in_s || ((o.end[t] & 2) && !(o.start[t] & 2)))) {
				if ((o.end[t] & 2) && o.slive[t])
					ret = gops_fix(g, TC_OP_WRITEBACK, t);
				if (!ret && !in_s)
					ret = gops_fix(g, TC_OP_DROP, t);
			}
		}
		for (uint32_t t = 0; t < ti->nt && !ret; t++)
			if ((o.start[t] & 1) && !(o.end[t] & 1)) {
				if (L) {	/* lay_close leaves none */
					ret = -EPROTO;
					break;
				}
				ret = gops_fix(g, o.slive[t] ? TC_OP_FETCH : TC_OP_ALLOC, t);
			}
		if (ret)
			goto out;
	}
	for (uint32_t r = 0; r < n; r++) {
		uint32_t t = rq[r].t;
		int64_t lb, p = r;

		hit[r] = o.res[r] == RES_HIT;
		if (rq[r].f & RQ_NEED) {
			st->reads++;
			st->read_bytes += ti->bytes[t];
			if (hit[r]) {
				st->hits++;
				st->hit_bytes += ti->bytes[t];
			}
		}
		if (o.flush[r]) {
			/* the writeback of a value read on the host can start
			 * as soon as its last GPU use is over */
			p = o.lastw[r] + 1;
			if (p < r - (int64_t)n + 1)
				p = r - (int64_t)n + 1;
			if (p < lb0)
				p = lb0;
			if (p > r)
				p = r;
			ret = gops_add(g, p, TC_OP_WRITEBACK, t, r);
		}
		if (!ret && o.kill[r]) {
			ret = gops_add(g, r, TC_OP_DROP, t, r);
			if (!ret && L)
				ret = fr_add(&fr, o.goff[r], lay.len[t], r);
		}
		if (!ret && (o.res[r] == RES_MISS || o.res[r] == RES_ALLOC)) {
			int64_t delta = ti->bytes[t];

			lb = o.evict_at[r] + 1;
			for (uint32_t k = o.vfirst[r]; k < o.vfirst[r + 1]; k++) {
				if (o.vic[k].last + 1 > lb)
					lb = o.vic[k].last + 1;
				delta -= ti->bytes[o.vic[k].t];
			}
			if (cyclic && lb < (int64_t)r - n + 1)
				lb = (int64_t)r - n + 1;
			if (!cyclic && lb < 0)
				lb = 0;
			if (lb < lb0)
				lb = lb0;
			if (L) {	/* after whatever left its range */
				int64_t f = fr_last(&fr, o.goff[r], lay.len[t]);

				if (f > lb)
					lb = f;
			}
			/* H2D is one FIFO stream: copies go in the order they are
			 * needed, so an early one never blocks a more urgent one.
			 * A gated fetch (of a host op's output) joins the stream
			 * only once that op is done: it is out of that order */
			bool fifo = o.res[r] == RES_MISS && !hostw[r];

			if (fifo && lb < prev_fetch)
				lb = prev_fetch;
			p = early ? place_early(o.use, n, lb, r, delta, cfg->gpu_bytes, cfg->gpu_cap) : r;
			if (fifo)
				prev_fetch = p;
			for (uint32_t k = o.vfirst[r]; k < o.vfirst[r + 1] && !ret; k++) {
				if (o.vic[k].wb)
					ret = gops_add(g, p, TC_OP_WRITEBACK, o.vic[k].t, -1);
				if (!ret)
					ret = gops_add(g, p, TC_OP_DROP, o.vic[k].t, -1);
				if (!ret && L)
					ret = fr_add(&fr, o.vic[k].off, lay.len[o.vic[k].t], p);
			}
			if (!ret)
				ret = gops_add(g, p, o.res[r] == RES_MISS ? TC_OP_FETCH : TC_OP_ALLOC,
					       t, r);
			if (!ret && L)
				g->v[g->nr - 1].off = o.goff[r];
		}
		if (ret)
			break;
	}
out:
	cout_free(&o);
	free(rq);
	free(hostw);
	free(lastw);
	free(keep);
	lay_free(&lay);
	free(fr.v);
	return ret;
}

/* ---- GPU level: streaming baselines (ZeRO-like, 10Cache window) --------- */

static int cmp_u64_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x > y ? -1 : x < y;
}

/* A resident set Pm chosen up front (10Cache: the table-order prefix that
 * fits; ZeRO: small tensors below the persistence threshold); everything
 * else is fetched for each op into a FIFO window of W bytes and released
 * (MRU-evicted) right after the op. No copy crosses the step seam: both
 * systems re-seed their window at step start. */
static int gpu_level_stream(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
			    const struct tinfo *ti, struct gops *g, uint8_t *hit,
			    uint8_t *start, struct tc_plan_stats *st)
{
	bool cyclic = !(cfg->flags & TC_PLAN_ACYCLIC);
	uint32_t n = ti->n, nt = ti->nt;
	uint8_t *pm = calloc(nt, 1), *gpu_acc = calloc(nt, 1), *gone = calloc(nt, 1);
	uint64_t *wuse = calloc(n, sizeof(uint64_t)), *sizes = malloc(nt * sizeof(uint64_t));
	int64_t *dropped = malloc(nt * sizeof(int64_t)), *lastend = malloc(nt * sizeof(int64_t));
	uint64_t W, pm_bytes = 0, max_op = tc_trace_max_op_bytes(tr);
	int64_t prev_p = 0;
	uint32_t ns = 0;
	int ret = -ENOMEM;

	if (!pm || !gpu_acc || !gone || !wuse || !sizes || !dropped || !lastend)
		goto out;
	for (uint32_t i = 0; i < n; i++)
		if (!(tr->acc[i].flags & TC_ACC_HOST) && !gpu_acc[tr->acc[i].tensor]) {
			gpu_acc[tr->acc[i].tensor] = 1;
			sizes[ns++] = ti->bytes[tr->acc[i].tensor];
		}
	if (cfg->policy == TC_POLICY_10CACHE) {
		uint32_t w = cfg->tencache_window ? cfg->tencache_window : 30;

		qsort(sizes, ns, sizeof(*sizes), cmp_u64_desc);
		W = 0;
		for (uint32_t k = 0; k < w && k < ns; k++)
			W += sizes[k];
	} else {
		W = cfg->zero_bucket_bytes ? cfg->zero_bucket_bytes : 100000000ull;
	}
	if (W < max_op)
		W = max_op;
	if (W > cfg->gpu_bytes)
		W = cfg->gpu_bytes;
	/* Pm in table (first access) order */
	memset(gpu_acc, 0, nt);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t t = tr->acc[i].tensor;

		if ((tr->acc[i].flags & TC_ACC_HOST) || gpu_acc[t])
			continue;
		gpu_acc[t] = 1;
		if (cfg->policy == TC_POLICY_ZERO &&
		    ti->bytes[t] > (cfg->zero_persist_bytes ? cfg->zero_persist_bytes : 200000))
			continue;
		if (pm_bytes + ti->bytes[t] + W <= cfg->gpu_bytes) {
			pm[t] = 1;
			pm_bytes += ti->bytes[t];
		}
	}
	for (uint32_t t = 0; t < nt; t++) {
		dropped[t] = cyclic ? -(int64_t)n : 0;
		lastend[t] = INT64_MIN;	/* end of the last unflushed GPU write */
	}
	/* a Pm value written late in a step may be read by the host early in
	 * the next: a first lap finds which are dirty at the seam */
	for (uint32_t i = 0; cyclic && i < n; i++) {
		const struct tc_access *a = &tr->acc[i];

		if (!pm[a->tensor])
			continue;
		if (a->flags & TC_ACC_HOST)
			lastend[a->tensor] = INT64_MIN;
		else if (a->flags & TC_ACC_WRITE)
			lastend[a->tensor] = (int64_t)ti->op_end[i] - n;
	}
	ret = 0;
	for (uint32_t i = 0; i < n && !ret; i++) {
		const struct tc_access *a = &tr->acc[i];
		uint32_t t = a->tensor, e = ti->op_end[i];
		int64_t p, d;

		if (a->flags & TC_ACC_HOST) {
			/* no fetch of the value before the host op writing it ends */
			if ((a->flags & TC_ACC_WRITE) && dropped[t] < (int64_t)e + 1)
				dropped[t] = e + 1;
			/* only Pm tensors can be resident across a host op */
			if (!pm[t])
				continue;
			if ((a->flags & TC_ACC_READ) && lastend[t] != INT64_MIN)
				ret = gops_add(g, lastend[t] + 1 > 0 ? lastend[t] + 1 : 0,
					       TC_OP_WRITEBACK, t, i);
			if (!ret && (a->flags & TC_ACC_WRITE)) {
				/* the GPU copy is stale: drop it; the updated value is
				 * fetched back right after the last such host op */
				if (!gone[t])
					ret = gops_add(g, i, TC_OP_DROP, t, i);
				gone[t] = 1;
				dropped[t] = e + 1;
			}
			lastend[t] = INT64_MIN;	/* the GPU copy is clean (or gone) now */
			continue;
		}
		if (a->flags & TC_ACC_READ) {
			st->reads++;
			st->read_bytes += ti->bytes[t];
		}
		if (pm[t]) {
			if (gone[t]) {
				ret = gops_add(g, dropped[t], TC_OP_FETCH, t, i);
				gone[t] = 0;
			}
			/* a hit unless a host write dropped it since the last use:
			 * that refetch is the miss */
			hit[i] = 1;
			for (int64_t k = (int64_t)i - 1; k >= 0; k--) {
				if (tr->acc[k].tensor != t)
					continue;
				if ((tr->acc[k].flags & (TC_ACC_HOST | TC_ACC_WRITE)) ==
				    (TC_ACC_HOST | TC_ACC_WRITE))
					hit[i] = 0;
				if (!(tr->acc[k].flags & TC_ACC_HOST))
					break;
			}
			if ((a->flags & TC_ACC_READ) && hit[i]) {
				st->hits++;
				st->hit_bytes += ti->bytes[t];
			}
			if (a->flags & TC_ACC_WRITE)
				lastend[t] = e;
			continue;
		}
		/* streamed: fetched (or allocated) into the window, released after the op */
		d = e + 1;
		p = prev_p;
		if (p < dropped[t])
			p = dropped[t];
		if (p > i)
			p = i;
		/* first point from p on where the window holds it until d */
		for (;;) {
			int64_t k;

			for (k = p; k < d && k < n; k++)
				if (wuse[k] + ti->bytes[t] > W)
					break;
			if (k >= d || k >= n || p >= i)
				break;
			p = k + 1;
		}
		if (p > i)
			p = i;
		for (int64_t k = p; k < d && k < n; k++)
			wuse[k] += ti->bytes[t];
		prev_p = p;
		ret = gops_add(g, p, (a->flags & TC_ACC_READ) ? TC_OP_FETCH : TC_OP_ALLOC, t, i);
		if (ret)
			break;
		/* release: write back a dirty value that is read again */
		if (a->flags & TC_ACC_WRITE) {
			bool live = false;

			for (uint32_t k = 1; k <= n; k++) {
				const struct tc_access *b = &tr->acc[(i + k) % n];

				if (b->tensor != t)
					continue;
				if (!cyclic && i + k >= n)
					break;
				live = b->flags & TC_ACC_READ;
				break;
			}
			if (live)
				ret = gops_add(g, d % n, TC_OP_WRITEBACK, t, -1);
		}
		if (!ret && (cyclic || d < n))
			ret = gops_add(g, d % n, TC_OP_DROP, t, -1);
		dropped[t] = d;
	}
	for (uint32_t t = 0; t < nt && !ret; t++)
		if (gone[t] && cyclic)	/* refetch for the next step's first use */
			ret = gops_add(g, dropped[t] % n, TC_OP_FETCH, t, -1);
	if (ret)
		goto out;
	/* start state: Pm plus whatever the last op leaves for the seam drops,
	 * found by walking the table once */
	gops_sort(g, n);
	memcpy(start, pm, nt);
	{
		uint8_t *res = calloc(nt, 1);
		uint32_t k = 0;

		if (!res) {
			ret = -ENOMEM;
			goto out;
		}
		memcpy(res, pm, nt);
		for (uint32_t i = 0; i < n; i++) {
			for (; k < g->nr && (uint64_t)((g->v[k].pos % n + n) % n) == i; k++) {
				if (g->v[k].kind == TC_OP_DROP)
					res[g->v[k].t] = 0;
				else if (g->v[k].kind == TC_OP_FETCH || g->v[k].kind == TC_OP_ALLOC)
					res[g->v[k].t] = 1;
				else if (g->v[k].kind == TC_OP_WRITEBACK)
					res[g->v[k].t] &= 1;
			}
			if (!(tr->acc[i].flags & TC_ACC_HOST) && (tr->acc[i].flags & TC_ACC_WRITE))
				res[tr->acc[i].tensor] |= 2;
		}
		if (cyclic)	/* acyclic: the prologue loads Pm only */
			memcpy(start, res, nt);
		free(res);
	}
	st->steady_iters = 1;
out:
	free(pm); free(gpu_acc); free(gone); free(wuse); free(sizes); free(dropped); free(lastend);
	return ret;
}

/* ---- pinned level -------------------------------------------------------- */

struct slot {
	uint32_t pos;		/* access index it belongs to */
	int32_t gop;		/* index into the sorted GPU op list, -1: host access */
	uint32_t acc;
};

/*
 * Issue point of a dirty victim's stage-out, evicted at p: at p, or from
 * the slot after the op of its last write ends (lw[t]) on, no earlier than
 * lb (a step back; 0 without the cycle) or lb0 (no steady start state).
 * With the write at the eviction, the space waits for it; from the last
 * write on, the disk can take it while the value is still read. One more
 * choice for the search, not a rule: on OPT-13B the modelled step went
 * either way (session 35 in results/h200-replay.md).
 */
static int64_t stage_out_at(const int64_t *lw, uint32_t t, uint32_t mode, int64_t p,
			    int64_t lb, int64_t lb0)
{
	int64_t w;

	if (mode == TC_STAGE_OUT_EVICT)
		return p;
	w = lw[t] + 1;
	if (w < lb)
		w = lb;
	if (w < lb0)
		w = lb0;
	if (mode == TC_STAGE_OUT_HALFWAY)
		w += (p - w) / 2;
	return w < p ? w : p;
}

static int pinned_level(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
			const struct tinfo *ti, const struct gops *g,
			const struct slot *sl, uint32_t m, struct gops *pg,
			uint8_t *pstart, struct tc_plan_stats *st)
{
	bool cyclic = !(cfg->flags & TC_PLAN_ACYCLIC), nvme = cfg->nvme_bytes != 0;
	uint64_t cap = nvme ? cfg->pinned_bytes : UINT64_MAX;
	struct creq *rq = malloc((m ? m : 1) * sizeof(*rq));
	uint32_t *slot_of_end = malloc(ti->n * sizeof(uint32_t));
	/* per slot: its access's pinned capacity (cfg->pinned_cap) */
	uint64_t *capv = nvme && cfg->pinned_cap ? malloc((m ? m : 1) * sizeof(*capv)) : NULL;
	struct cout o;
	int64_t lb0, prev_in = INT64_MIN, *lw = NULL;
	int ret;

	if (!rq || !slot_of_end || (nvme && cfg->pinned_cap && !capv)) {
		free(rq); free(slot_of_end); free(capv);
		return -ENOMEM;
	}
	/* a slot's holdings last until the next slot: the least capacity of
	 * the accesses in between (a cut may begin at an access with no
	 * pinned request of its own) */
	for (uint32_t j = 0; capv && j < m; j++) {
		uint32_t end = j + 1 < m ? sl[j + 1].pos : tr->nr_acc + (m ? sl[0].pos : 0);

		capv[j] = cfg->pinned_cap[sl[j].pos];
		for (uint32_t a = sl[j].pos + 1; a < end; a++)
			if (cfg->pinned_cap[a % tr->nr_acc] < capv[j])
				capv[j] = cfg->pinned_cap[a % tr->nr_acc];
	}
	for (uint32_t j = 0; j < m; j++)
		if (sl[j].gop < 0)
			slot_of_end[sl[j].acc] = j;
	for (uint32_t j = 0; j < m; j++) {
		struct creq *q = &rq[j];

		if (sl[j].gop >= 0) {
			const struct gop *o2 = &g->v[sl[j].gop];

			*q = (struct creq){ .t = o2->t, .group = NO_GROUP, .end = j, .cold = INT64_MAX };
			if (o2->kind == TC_OP_FETCH)
				q->f = RQ_RES | RQ_NEED;
			else if (o2->kind == TC_OP_WRITEBACK)
				q->f = RQ_RES | RQ_WRITE;
			if (q->f)
				q->group = ti->nops + j;
		} else {
			const struct tc_access *a = &tr->acc[sl[j].acc];

			*q = (struct creq){ .t = a->tensor, .group = ti->op_of[sl[j].acc],
					    .end = slot_of_end[ti->op_end[sl[j].acc]], .cold = INT64_MAX,
					    .f = RQ_RES | (a->flags & TC_ACC_READ ? RQ_NEED : 0) |
						 (a->flags & TC_ACC_WRITE ? RQ_WRITE : 0) };
		}
	}
	if (!nvme) {
		/* no NVMe: every value that ever leaves the GPU lives in pinned
		 * memory for good; nothing to schedule, only a budget to meet */
		uint64_t need = 0;

		for (uint32_t j = 0; j < m; j++)
			if (rq[j].f && !pstart[rq[j].t]) {
				pstart[rq[j].t] = 1;
				need += ti->bytes[rq[j].t];
			}
		st->pinned_peak = need;
		ret = need > cfg->pinned_bytes ? -ENOSPC : 0;
		free(rq);
		free(slot_of_end);
		return ret;
	}
	/* ours takes the dead values whose space frees first (older_dead);
	 * the other policies' pinned level stays plain MIN */
	ret = cache_run(rq, m, ti->bytes, ti->nt, cap - st->pinned_reserve_bytes, capv,
			st->pinned_reserve_bytes,
			TC_POLICY_OURS, NULL, cyclic, NULL,
			(int64_t)m * st->pinned_horizon / TC_PLAN_HORIZON_DIV,
			cfg->policy == TC_POLICY_OURS, true, &o);
	if (ret)
		goto out;
	if (!o.converged)
		st->reconciled = true;
	lb0 = (cyclic && o.converged) ? INT64_MIN : 0;
	memcpy(pstart, o.converged ? o.start : o.end, ti->nt);
	if (!o.converged) {
		for (uint32_t t = 0; t < ti->nt && !ret; t++) {
			bool in_s = o.start[t] & 1, in_e = o.end[t] & 1;

			/* as on the GPU level: a copy the step ends dirty but
			 * starts clean is staged out, or NVMe keeps an old value */
			if (in_e && (!in_s || ((o.end[t] & 2) && !(o.start[t] & 2)))) {
				if ((o.end[t] & 2) && o.slive[t])
					ret = gops_fix(pg, TC_OP_STAGE_OUT, t);
				if (!ret && !in_s)
					ret = gops_fix(pg, TC_OP_PDROP, t);
			}
		}
		for (uint32_t t = 0; t < ti->nt && !ret; t++)
			if ((o.start[t] & 1) && !(o.end[t] & 1))
				ret = gops_fix(pg, o.slive[t] ? TC_OP_STAGE_IN : TC_OP_PALLOC, t);
		if (ret)
			goto out;
	}
	/* lw[t]: where t's last write before j ends (unrolled): the end of
	 * the op that wrote it (a host op's event is its end's; the executor
	 * would take the previous step's instance before it) */
	if (st->pinned_stage_out != TC_STAGE_OUT_EVICT) {
		ret = -ENOMEM;
		lw = malloc(ti->nt * sizeof(*lw));
		if (!lw)
			goto out;
		for (uint32_t t = 0; t < ti->nt; t++)
			lw[t] = INT64_MIN / 2;
		for (uint32_t j = 0; cyclic && j < m; j++)
			if (rq[j].f & RQ_WRITE)
				lw[rq[j].t] = (int64_t)rq[j].end - m;
		ret = 0;
	}
	for (uint32_t j = 0; j < m && !ret; j++) {
		uint32_t t = rq[j].t;
		/* in: a read or allocation; else only victims, where the
		 * capacity dropped (evict_down) */
		bool in = o.res[j] == RES_MISS || o.res[j] == RES_ALLOC;
		int64_t lb, p, delta = in ? (int64_t)ti->bytes[t] : 0;

		if (lw && j && (rq[j - 1].f & RQ_WRITE))
			lw[rq[j - 1].t] = rq[j - 1].end;
		if (!in && o.vfirst[j] == o.vfirst[j + 1])
			continue;
		lb = in ? o.evict_at[j] + 1 : INT64_MIN;
		for (uint32_t k = o.vfirst[j]; k < o.vfirst[j + 1]; k++) {
			if (o.vic[k].last + 1 > lb)
				lb = o.vic[k].last + 1;
			delta -= ti->bytes[o.vic[k].t];
		}
		if (cyclic && lb < (int64_t)j - m + 1)
			lb = (int64_t)j - m + 1;
		if (!cyclic && lb < 0)
			lb = 0;
		if (lb < lb0)
			lb = lb0;
		if (o.res[j] == RES_MISS && lb < prev_in)
			lb = prev_in;	/* NVMe reads in need order, as for H2D */
		p = place_early(o.use, m, lb, j, delta, cap, capv);
		if (o.res[j] == RES_MISS)
			prev_in = p;
		for (uint32_t k = o.vfirst[j]; k < o.vfirst[j + 1] && !ret; k++) {
			if (o.vic[k].wb)
				ret = gops_add(pg, stage_out_at(lw, o.vic[k].t, st->pinned_stage_out,
								p, cyclic ? (int64_t)j - m + 1 : 0, lb0),
					       TC_OP_STAGE_OUT, o.vic[k].t, -1);
			if (!ret)
				ret = gops_add(pg, p, TC_OP_PDROP, o.vic[k].t, -1);
		}
		/*
		 * A PALLOC moves no data: it takes its space at its own slot
		 * (a host op's output, a gradient's write-back), its victims
		 * still go at p. Issued at p, the executor's caller waited
		 * there until the space was free in fact, not only in the
		 * plan: on OPT-13B with NVMe at 25%, until the Adam ops before
		 * it ended, and the next step's reads went out late.
		 */
		if (!ret && in)
			ret = gops_add(pg, o.res[j] == RES_MISS ? p : (int64_t)j,
				       o.res[j] == RES_MISS ? TC_OP_STAGE_IN : TC_OP_PALLOC, t, sl[j].pos);
	}
	if (ret)
		goto out;
	st->pinned_peak = 0;
	for (uint32_t j = 0; j < m; j++)
		if (o.use[j] > st->pinned_peak)
			st->pinned_peak = o.use[j];
out:
	cout_free(&o);
	free(lw);
	free(rq);
	free(slot_of_end);
	free(capv);
	return ret;
}

/* ---- dependencies and executor tables ------------------------------------ */

enum { GL_H2D, GL_D2H, GL_CMP, GL_NR };
enum { PL_H2D, PL_D2H, PL_NVR, PL_NVW, PL_CMP, PL_NR };

struct track {
	int32_t g_src, g_last[GL_NR];
	int32_t p_src, p_last[PL_NR];
	int32_t n_src, n_last[2];
};

struct dbuf {
	int32_t *v;
	uint32_t nr, cap;
};

static int dappend(struct dbuf *d, int32_t ev)
{
	if (TC_GROW(d->v, d->cap, d->nr, 16))
		return -ENOMEM;
	d->v[d->nr++] = ev;
	return 0;
}

/* Adds an event once (sets are a handful long). */
static int dpush(struct dbuf *d, int32_t ev)
{
	if (ev == NONE_EV)
		return 0;
	for (uint32_t k = 0; k < d->nr; k++)
		if (d->v[k] == ev)
			return 0;
	return dappend(d, ev);
}

/* Walks the table twice in program order; the second lap's dependency
 * sets (which see the first lap's events as the previous step's) are kept. */
static int build_deps(const struct tc_trace *tr, const struct tinfo *ti, struct tc_plan *pl)
{
	struct track *tk = malloc(ti->nt * sizeof(*tk));
	struct dbuf d = { 0 }, all = { 0 }, w = { 0 }, allw = { 0 };
	int ret = -ENOMEM;

	if (!tk)
		return -ENOMEM;
	for (uint32_t t = 0; t < ti->nt; t++) {
		tk[t].g_src = tk[t].p_src = tk[t].n_src = NONE_EV;
		for (int k = 0; k < GL_NR; k++)
			tk[t].g_last[k] = NONE_EV;
		for (int k = 0; k < PL_NR; k++)
			tk[t].p_last[k] = NONE_EV;
		tk[t].n_last[0] = tk[t].n_last[1] = NONE_EV;
	}
	for (int lap = 0; lap < 2; lap++) {
		for (uint32_t i = 0; i < ti->n; i++) {
			const struct tc_access *a = &tr->acc[i];
			struct track *x;

			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
				struct tc_op *op = &pl->ops[k];
				int e = 0;

				x = &tk[op->tensor];
				d.nr = 0;
				switch (op->kind) {
				case TC_OP_FETCH:
					e = dpush(&d, x->p_src);
					x->g_src = x->g_last[GL_H2D] = x->p_last[PL_H2D] = k;
					break;
				case TC_OP_ALLOC:
					x->g_src = x->g_last[GL_H2D] = k;
					break;
				case TC_OP_WRITEBACK:
					e = dpush(&d, x->g_src);
					for (int l = 0; l < PL_NR && !e; l++)
						e = dpush(&d, x->p_last[l]);
					x->p_src = x->p_last[PL_D2H] = x->g_last[GL_D2H] = k;
					break;
				case TC_OP_DROP:
					for (int l = 0; l < GL_NR && !e; l++)
						e = dpush(&d, x->g_last[l]);
					x->g_src = NONE_EV;
					for (int l = 0; l < GL_NR; l++)
						x->g_last[l] = NONE_EV;
					break;
				case TC_OP_STAGE_IN:
					e = dpush(&d, x->n_src);
					for (int l = 0; l < PL_NR && !e; l++)
						e = dpush(&d, x->p_last[l]);
					x->p_src = x->p_last[PL_NVR] = x->n_last[0] = k;
					break;
				case TC_OP_PALLOC:
					for (int l = 0; l < PL_NR && !e; l++)
						e = dpush(&d, x->p_last[l]);
					x->p_src = x->p_last[PL_CMP] = k;
					break;
				case TC_OP_STAGE_OUT:
					e = dpush(&d, x->p_src);
					e = e ?: dpush(&d, x->n_last[0]);
					e = e ?: dpush(&d, x->n_last[1]);
					x->n_src = x->n_last[1] = x->p_last[PL_NVW] = k;
					break;
				case TC_OP_PDROP:
					for (int l = 0; l < PL_NR && !e; l++)
						e = dpush(&d, x->p_last[l]);
					x->p_src = NONE_EV;
					for (int l = 0; l < PL_NR; l++)
						x->p_last[l] = NONE_EV;
					break;
				}
				if (e)
					goto out;
				if (lap == 1) {
					op->dep_first = all.nr;
					op->gated = 0;
					for (uint32_t l = 0; l < d.nr; l++) {
						/* its own previous instance is ordered by its stream */
						if (d.v[l] == (int32_t)k)
							continue;
						if (op->kind == TC_OP_FETCH && d.v[l] < 0 &&
						    (tr->acc[-(d.v[l] + 1)].flags & TC_ACC_HOST))
							op->gated = 1;
						if (dappend(&all, d.v[l]))
							goto out;
					}
					op->nr_deps = all.nr - op->dep_first;
				}
			}
			/* the access: waits on the copies that made its value valid */
			x = &tk[a->tensor];
			w.nr = 0;
			if (a->flags & TC_ACC_HOST) {
				if (x->p_src >= 0 && dpush(&w, x->p_src))
					goto out;
				if (a->flags & TC_ACC_WRITE)
					for (int l = 0; l < PL_NR; l++)
						if (x->p_last[l] >= 0 && dpush(&w, x->p_last[l]))
							goto out;
				x->p_last[PL_CMP] = -(int32_t)i - 1;
				if (a->flags & TC_ACC_WRITE)
					x->p_src = -(int32_t)i - 1;
			} else {
				if (x->g_src >= 0 && dpush(&w, x->g_src))
					goto out;
				if ((a->flags & TC_ACC_WRITE) && x->g_last[GL_D2H] >= 0 &&
				    dpush(&w, x->g_last[GL_D2H]))
					goto out;
				x->g_last[GL_CMP] = -(int32_t)ti->op_end[i] - 1;
				if (a->flags & TC_ACC_WRITE)
					x->g_src = -(int32_t)ti->op_end[i] - 1;
			}
			if (lap == 1) {
				/* waits are recorded per access; the op end uses the union */
				pl->wait_first[i] = allw.nr;
				for (uint32_t l = 0; l < w.nr; l++)
					if (dappend(&allw, w.v[l]))
						goto out;
			}
		}
	}
	pl->wait_first[ti->n] = allw.nr;
	pl->wait_ops = (uint32_t *)allw.v;
	allw.v = NULL;
	pl->deps = all.v;
	pl->nr_deps = all.nr;
	all.v = NULL;
	ret = 0;
out:
	free(tk); free(d.v); free(all.v); free(w.v); free(allw.v);
	return ret;
}

/* ---- build ---------------------------------------------------------------- */

/* The state at the table's seam: the levels' start sets plus the copies
 * issued in the previous step for this one (early placement may wrap).
 * One tolerant lap over the table from the start sets yields it. */
static void seam_state(const struct tc_trace *tr, struct tc_plan *pl)
{
	uint8_t *g = pl->start_gpu, *p = pl->start_pinned;
	int64_t *go = pl->start_goff;

	for (uint32_t i = 0; i < pl->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];

		for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
			uint32_t t = pl->ops[k].tensor;

			switch (pl->ops[k].kind) {
			case TC_OP_FETCH:
			case TC_OP_ALLOC:
				g[t] = 1;
				if (go)
					go[t] = pl->op_goff[k];
				break;
			case TC_OP_WRITEBACK:	g[t] &= 1; p[t] = 3; break;
			case TC_OP_DROP:
				g[t] = 0;
				if (go)
					go[t] = -1;
				break;
			case TC_OP_STAGE_IN:
			case TC_OP_PALLOC:	p[t] = 1; break;
			case TC_OP_STAGE_OUT:	p[t] &= 1; break;
			case TC_OP_PDROP:	p[t] = 0; break;
			}
		}
		if (a->flags & TC_ACC_WRITE) {
			if (a->flags & TC_ACC_HOST)
				p[a->tensor] |= 2;
			else
				g[a->tensor] |= 2;
		}
	}
}

void tc_plan_cfg_default(struct tc_plan_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	/* h200-limits.md: ~54 GB/s H2D/D2H pinned (44 each when both run);
	 * a Gen4/Gen5 NVMe drive ~7 GB/s read, 5 GB/s write */
	cfg->bw[TC_LINK_H2D] = 50e9;
	cfg->bw[TC_LINK_D2H] = 50e9;
	cfg->bw[TC_LINK_NVME_RD] = 7e9;
	cfg->bw[TC_LINK_NVME_WR] = 5e9;
	cfg->duplex_bw = 85e9;	/* 82-90 GB/s measured both ways at once */
	cfg->link_lat_ns = 10000;
	cfg->policy = TC_POLICY_OURS;
	cfg->zero_bucket_bytes = 100000000ull;
	cfg->zero_persist_bytes = 200000ull;
	cfg->tencache_window = 30;
	cfg->reserve_bytes = -1;
	cfg->pinned_reserve_bytes = -1;
	cfg->pinned_horizon = -1;
	cfg->pinned_stage_out = -1;
}

const char *tc_policy_name(enum tc_policy p)
{
	static const char *const n[TC_POLICY_NR] = { "tencache", "lru", "zero-inf", "10cache" };

	return (unsigned)p < TC_POLICY_NR ? n[p] : "?";
}

const char *tc_op_name(enum tc_op_kind k)
{
	static const char *const n[TC_OP_NR] = {
		"fetch", "alloc", "writeback", "drop", "stage-in", "palloc", "stage-out", "pdrop",
	};

	return (unsigned)k < TC_OP_NR ? n[k] : "?";
}

void tc_plan_free(struct tc_plan *pl)
{
	if (!pl)
		return;
	free(pl->ops); free(pl->op_first); free(pl->deps); free(pl->wait_first);
	free(pl->wait_ops); free(pl->hit); free(pl->placement); free(pl->start_gpu);
	free(pl->start_pinned); free(pl->op_goff); free(pl->start_goff);
	memset(pl, 0, sizeof(*pl));
}

static const uint8_t op_link[TC_OP_NR] = {
	[TC_OP_FETCH] = TC_LINK_H2D, [TC_OP_WRITEBACK] = TC_LINK_D2H,
	[TC_OP_STAGE_IN] = TC_LINK_NVME_RD, [TC_OP_STAGE_OUT] = TC_LINK_NVME_WR,
	[TC_OP_ALLOC] = TC_LINK_NR, [TC_OP_DROP] = TC_LINK_NR,
	[TC_OP_PALLOC] = TC_LINK_NR, [TC_OP_PDROP] = TC_LINK_NR,
};

static int cfg_check(const struct tc_plan_cfg *cfg)
{
	if (!cfg || (unsigned)cfg->policy >= TC_POLICY_NR || !cfg->gpu_bytes ||
	    (cfg->flags & ~(TC_PLAN_ACYCLIC | TC_PLAN_HOST_ASYNC | TC_PLAN_HOST_FIFO |
			    TC_PLAN_PURE_MIN | TC_PLAN_LAYOUT | TC_PLAN_HORIZON_SEARCH)))
		return -EINVAL;
	/* the layout is ours' MIN's, over the whole budget */
	if ((cfg->flags & TC_PLAN_LAYOUT) &&
	    (cfg->policy != TC_POLICY_OURS || cfg->gpu_cap || cfg->reserve_bytes > 0))
		return -EINVAL;
	for (int l = 0; l < TC_LINK_NR; l++)
		if (!(cfg->bw[l] > 0) && (cfg->nvme_bytes || l < TC_LINK_NVME_RD))
			return -EINVAL;
	if (!(cfg->duplex_bw >= 0) || !(cfg->nvme_duplex_bw >= 0) ||
	    cfg->pinned_horizon > (int32_t)TC_PLAN_HORIZON_DIV ||
	    cfg->pinned_stage_out >= (int32_t)TC_STAGE_OUT_NR || cfg->threads > TC_PLAN_THREADS_MAX)
		return -EINVAL;
	return 0;
}

static int plan_build(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		      uint64_t reserve, uint64_t preserve, bool cold, uint32_t horizon,
		      uint32_t stage_out, struct tc_plan *pl)
{
	struct gops g = { 0 }, pg = { 0 };
	struct tinfo ti = { 0 };
	struct slot *sl = NULL;
	uint32_t m = 0, n, k;
	int ret;

	if (!pl)
		return -EINVAL;
	memset(pl, 0, sizeof(*pl));
	ret = cfg_check(cfg);
	if (ret)
		return ret;
	ret = tc_trace_validate(tr);
	if (ret)
		return ret;
	if (tc_trace_max_op_bytes(tr) > cfg->gpu_bytes)
		return -ENOSPC;	/* one op's tensors cannot be on the GPU at once */
	ret = tinfo_init(tr, &ti);
	if (ret)
		goto fail;
	n = ti.n;
	pl->nr_acc = n;
	pl->nr_tensors = ti.nt;
	pl->policy = cfg->policy;
	pl->st.reserve_bytes = reserve;
	pl->st.cold_first = cold;
	pl->st.pinned_reserve_bytes = cfg->nvme_bytes ? preserve : 0;
	pl->st.pinned_horizon = cfg->nvme_bytes ? horizon : 0;
	pl->st.pinned_stage_out = cfg->nvme_bytes ? stage_out : TC_STAGE_OUT_EVICT;
	pl->hit = calloc(n, 1);
	pl->start_gpu = calloc(ti.nt, 1);
	pl->start_pinned = calloc(ti.nt, 1);
	pl->placement = calloc(ti.nt, 1);
	pl->op_first = calloc(n + 1, sizeof(uint32_t));
	pl->wait_first = calloc(n + 1, sizeof(uint32_t));
	ret = -ENOMEM;
	if (!pl->hit || !pl->start_gpu || !pl->start_pinned || !pl->placement ||
	    !pl->op_first || !pl->wait_first)
		goto fail;

	if (cfg->flags & TC_PLAN_LAYOUT) {
		pl->start_goff = malloc((ti.nt ? ti.nt : 1) * sizeof(int64_t));
		ret = -ENOMEM;
		if (!pl->start_goff)
			goto fail;
		pl->st.laid_out = true;
	}
	if (cfg->policy == TC_POLICY_OURS || cfg->policy == TC_POLICY_LRU)
		ret = gpu_level_cache(tr, cfg, &ti, &g, pl->hit, pl->start_gpu, pl->start_goff,
				      &pl->st);
	else
		ret = gpu_level_stream(tr, cfg, &ti, &g, pl->hit, pl->start_gpu, &pl->st);
	if (ret)
		goto fail;
	gops_sort(&g, n);

	/* slots: GPU ops in table order, each host access after its point's ops */
	sl = malloc((g.nr + n + 1) * sizeof(*sl));
	ret = -ENOMEM;
	if (!sl)
		goto fail;
	k = 0;
	for (uint32_t i = 0; i < n; i++) {
		for (; k < g.nr && (uint32_t)((g.v[k].pos % n + n) % n) == i; k++)
			sl[m++] = (struct slot){ .pos = i, .gop = k };
		if (tr->acc[i].flags & TC_ACC_HOST)
			sl[m++] = (struct slot){ .pos = i, .gop = -1, .acc = i };
	}
	ret = pinned_level(tr, cfg, &ti, &g, sl, m, &pg, pl->start_pinned, &pl->st);
	if (ret)
		goto fail;
	gops_sort(&pg, m ? m : 1);

	/* merge: at each slot its pinned ops (drop-class first), then its GPU op */
	pl->ops = malloc((g.nr + pg.nr + 1) * sizeof(*pl->ops));
	if (pl->start_goff)
		pl->op_goff = malloc((g.nr + pg.nr + 1) * sizeof(*pl->op_goff));
	ret = -ENOMEM;
	if (!pl->ops || (pl->start_goff && !pl->op_goff))
		goto fail;
	k = 0;
	for (uint32_t j = 0; j < m; j++) {
		uint32_t pos = sl[j].pos;

		for (; k < pg.nr && (uint32_t)((pg.v[k].pos % m + m) % m) == j; k++) {
			const struct gop *o = &pg.v[k];

			if (pl->op_goff)
				pl->op_goff[pl->nr_ops] = -1;
			pl->ops[pl->nr_ops++] = (struct tc_op){
				.tensor = o->t, .kind = o->kind, .pos = pos, .need = o->need,
				.need_next = o->pos < 0,
			};
		}
		if (sl[j].gop >= 0) {
			const struct gop *o = &g.v[sl[j].gop];

			if (pl->op_goff)
				pl->op_goff[pl->nr_ops] = o->off;
			pl->ops[pl->nr_ops++] = (struct tc_op){
				.tensor = o->t, .kind = o->kind, .pos = pos, .need = o->need,
				.need_next = o->pos < 0 || (o->need >= 0 && (uint32_t)o->need < pos),
			};
		}
	}
	for (uint32_t o = 0, i = 0; i <= n; i++) {
		while (o < pl->nr_ops && pl->ops[o].pos < i)
			o++;
		pl->op_first[i] = o;
	}
	pl->op_first[n] = pl->nr_ops;
	ret = build_deps(tr, &ti, pl);
	if (ret)
		goto fail;
	if (!(cfg->flags & TC_PLAN_ACYCLIC))
		seam_state(tr, pl);

	/* placement: GPU if never dropped, else pinned if never pinned-dropped */
	{
		uint8_t *gdrop = calloc(ti.nt, 1), *pdrop = calloc(ti.nt, 1);
		uint64_t gu = 0;

		ret = -ENOMEM;
		if (!gdrop || !pdrop) {
			free(gdrop); free(pdrop);
			goto fail;
		}
		for (uint32_t o = 0; o < pl->nr_ops; o++) {
			const struct tc_op *op = &pl->ops[o];

			if (op->kind == TC_OP_DROP)
				gdrop[op->tensor] = 1;
			if (op->kind == TC_OP_PDROP)
				pdrop[op->tensor] = 1;
			if (op_link[op->kind] < TC_LINK_NR)
				pl->st.link_bytes[op_link[op->kind]] += ti.bytes[op->tensor];
		}
		for (uint32_t t = 0; t < ti.nt; t++) {
			if ((pl->start_gpu[t] & 1) && !gdrop[t]) {
				pl->placement[t] = TC_TIER_GPU;
				pl->st.nr_gpu_resident++;
				pl->st.gpu_resident_bytes += ti.bytes[t];
			} else if (!cfg->nvme_bytes || ((pl->start_pinned[t] & 1) && !pdrop[t])) {
				pl->placement[t] = TC_TIER_PINNED;
				pl->st.nr_pinned_resident++;
				pl->st.pinned_resident_bytes += ti.bytes[t];
			} else {
				pl->placement[t] = TC_TIER_NVME;
				pl->st.nr_nvme++;
				pl->st.nvme_bytes += ti.bytes[t];
			}
		}
		/* GPU peak over issue points, walking from the start state */
		for (uint32_t t = 0; t < ti.nt; t++) {
			if (pl->start_gpu[t] & 1)
				gu += ti.bytes[t];
		}
		pl->st.gpu_peak = gu;
		for (uint32_t o = 0; o < pl->nr_ops; o++) {
			const struct tc_op *op = &pl->ops[o];

			if (op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC)
				gu += ti.bytes[op->tensor];
			else if (op->kind == TC_OP_DROP)
				gu -= ti.bytes[op->tensor];
			if (gu > pl->st.gpu_peak)
				pl->st.gpu_peak = gu;
		}
		free(gdrop);
		free(pdrop);
		ret = 0;
		if (cfg->nvme_bytes && pl->st.nvme_bytes > cfg->nvme_bytes)
			ret = -ENOSPC;
		if (ret)
			goto fail;
	}
	free(g.v); free(pg.v); free(sl);
	tinfo_free(&ti);
	return 0;
fail:
	free(g.v); free(pg.v); free(sl);
	tinfo_free(&ti);
	tc_plan_free(pl);
	return ret;
}

/* One candidate of the search: ours at given reserves, built and simulated. */
struct cand {
	uint64_t r, pr;
	bool cold;
	uint32_t h, so;
	struct tc_plan pl;
	int ret;
};

struct cand_batch {
	const struct tc_trace *tr;
	const struct tc_plan_cfg *cfg;
	struct cand *c;
	uint32_t n;
	atomic_uint next;
};

static void cand_run(const struct tc_trace *tr, const struct tc_plan_cfg *cfg, struct cand *c)
{
	struct tc_sim_result sr;

	c->ret = plan_build(tr, cfg, c->r, c->pr, c->cold, c->h, c->so, &c->pl);
	if (c->ret)
		return;
	c->ret = tc_sim_run(tr, cfg, &c->pl, 3, &sr);
	if (c->ret)
		tc_plan_free(&c->pl);
	else
		c->pl.st.sim_step_ns = sr.step_ns;
}

static void *cand_main(void *arg)
{
	struct cand_batch *b = arg;

	for (uint32_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;)
		cand_run(b->tr, b->cfg, &b->c[i]);
	return NULL;
}

static uint32_t plan_threads(const struct tc_plan_cfg *cfg)
{
	cpu_set_t set;
	int n = 1;

	if (cfg->threads)
		return cfg->threads;
	if (!sched_getaffinity(0, sizeof(set), &set))
		n = CPU_COUNT(&set);
	return n < 1 ? 1 : n > TC_PLAN_THREADS_MAX ? TC_PLAN_THREADS_MAX : (uint32_t)n;
}

/*
 * Builds and simulates the candidates c[0..n) on up to cfg's threads (the
 * caller is one of them; a thread that cannot start leaves its share to
 * the others), then takes them in order as one after the other would: a
 * plan replaces *best when its step is shorter (ties keep the earlier).
 * Returns c[0]'s error (0 for no candidates); the others' failures are
 * only skipped.
 */
static int try_batch(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		     struct cand *c, uint32_t n, struct tc_plan *best, uint64_t *best_ns)
{
	struct cand_batch b = { .tr = tr, .cfg = cfg, .c = c, .n = n };
	pthread_t tid[TC_PLAN_THREADS_MAX];
	uint32_t want = plan_threads(cfg), nt = 0;

	atomic_init(&b.next, 0);
	for (; nt + 1 < want && nt + 1 < n; nt++)	/* want <= TC_PLAN_THREADS_MAX */
		if (pthread_create(&tid[nt], NULL, cand_main, &b))
			break;
	cand_main(&b);
	for (uint32_t i = 0; i < nt; i++)
		pthread_join(tid[i], NULL);
	for (uint32_t i = 0; i < n; i++) {
		if (c[i].ret)
			continue;
		if (c[i].pl.st.sim_step_ns < *best_ns) {
			tc_plan_free(best);
			*best = c[i].pl;
			*best_ns = c[i].pl.st.sim_step_ns;
		} else {
			tc_plan_free(&c[i].pl);
		}
	}
	return n ? c[0].ret : 0;
}

/*
 * Ours with automatic tuning, a coordinate search of at most 39 builds:
 * pure MIN and a few GPU reserves in steps of the largest op, with plain
 * and cold-first victim choice; then (with NVMe) a few pinned reserves;
 * then pinned victim horizons of 2/64 to 24/64 of a step (the modelled
 * step swings by tens of percent from one to the next: in steps of 1/32,
 * OPT-13B at 25% and 80% pinned missed one 2.3% shorter); then the other
 * places for the dirty victims' stage-outs (stage_out_at). Each stage's
 * candidates are built at once (try_batch) and the shortest simulated
 * step wins; the next stage starts from it.
 */
int tc_plan_build(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		  struct tc_plan *pl)
{
	static const unsigned gq[] = { 2, 4, 8, 16 }, pq[] = { 1, 2, 4, 8 };
	struct tc_plan best = { 0 };
	struct cand c[24];	/* the largest stage: 23 horizons */
	uint64_t maxop, best_ns = UINT64_MAX, r, pr;
	bool auto_r, auto_pr, auto_h, auto_so, ours_nvme;
	uint32_t h, so, n = 0;
	int ret;

	if (!pl)
		return -EINVAL;
	memset(pl, 0, sizeof(*pl));
	ret = cfg_check(cfg);
	if (ret)
		return ret;
	ours_nvme = cfg->policy == TC_POLICY_OURS && cfg->nvme_bytes;
	/* laid out, a reserve has no place: the plan is simulated once */
	auto_r = cfg->policy == TC_POLICY_OURS && cfg->reserve_bytes < 0 &&
		 !(cfg->flags & TC_PLAN_LAYOUT);
	auto_pr = ours_nvme && cfg->pinned_reserve_bytes < 0;
	auto_h = ours_nvme && (cfg->pinned_horizon < 0 || (cfg->flags & TC_PLAN_HORIZON_SEARCH));
	auto_so = ours_nvme && (cfg->pinned_stage_out < 0 || (cfg->flags & TC_PLAN_HORIZON_SEARCH));
	r = cfg->policy == TC_POLICY_OURS && cfg->reserve_bytes > 0 ? cfg->reserve_bytes : 0;
	pr = ours_nvme && cfg->pinned_reserve_bytes > 0 ? cfg->pinned_reserve_bytes : 0;
	h = ours_nvme && cfg->pinned_horizon > 0 ? (uint32_t)cfg->pinned_horizon : 0;
	so = ours_nvme && cfg->pinned_stage_out > 0 ? (uint32_t)cfg->pinned_stage_out : 0;
	if (r >= cfg->gpu_bytes || (cfg->nvme_bytes && pr >= cfg->pinned_bytes))
		return -EINVAL;
	if (!auto_r && !auto_pr && !auto_h && !auto_so && !(cfg->flags & TC_PLAN_LAYOUT))
		return plan_build(tr, cfg, r, pr, false, h, so, pl);
	ret = tc_trace_validate(tr);
	if (ret)
		return ret;
	c[n++] = (struct cand){ .r = r, .pr = pr, .h = h, .so = so };
	maxop = tc_trace_max_op_bytes(tr);
	for (int cold = 0; auto_r && cold < 2; cold++) {
		if (cold)
			c[n++] = (struct cand){ .pr = pr, .cold = true, .h = h, .so = so };
		for (size_t i = 0; i < sizeof(gq) / sizeof(gq[0]); i++) {
			uint64_t rc = maxop * gq[i] / 4;

			if (cfg->gpu_bytes < maxop + rc)
				break;
			c[n++] = (struct cand){ .r = rc, .pr = pr, .cold = cold, .h = h, .so = so };
		}
	}
	ret = try_batch(tr, cfg, c, n, &best, &best_ns);
	if (ret) {
		tc_plan_free(&best);	/* another candidate's, if any */
		return ret;
	}
	r = best.st.reserve_bytes;
	n = 0;
	for (size_t i = 0; auto_pr && i < sizeof(pq) / sizeof(pq[0]); i++)
		c[n++] = (struct cand){ .r = r, .pr = cfg->pinned_bytes * pq[i] / 32,
					.cold = best.st.cold_first, .h = h, .so = so };
	try_batch(tr, cfg, c, n, &best, &best_ns);
	pr = best.st.pinned_reserve_bytes;
	n = 0;
	for (uint32_t k = 2; auto_h && k <= TC_PLAN_HORIZON_DIV * 3 / 8; k++)
		c[n++] = (struct cand){ .r = r, .pr = pr, .cold = best.st.cold_first, .h = k,
					.so = so };
	try_batch(tr, cfg, c, n, &best, &best_ns);
	h = best.st.pinned_horizon;
	n = 0;
	for (uint32_t k = 0; auto_so && k < TC_STAGE_OUT_NR; k++)
		if (k != so)
			c[n++] = (struct cand){ .r = r, .pr = pr, .cold = best.st.cold_first,
						.h = h, .so = k };
	try_batch(tr, cfg, c, n, &best, &best_ns);
	*pl = best;
	return 0;
}
