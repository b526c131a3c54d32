/* sim.c - the CPU-only timing model: replays a plan's table over several
 * steps with one compute timeline, FIFO links (H2D, D2H, NVMe read/write)
 * and event-gated memory reuse, and reports the last (steady) step. A
 * gated fetch (of a host op's output) joins the H2D link when that op is
 * done, out of the FIFO order: it takes the link's first idle time then.
 * Where H2D and D2H overlap, together they move cfg->duplex_bw: the copy
 * placed later runs at what is left of the other direction's rate (NVMe
 * reads and writes the same, with cfg->nvme_duplex_bw, unless that is no
 * more than taking turns: then the disk serves both queues in turn). The
 * host is modelled one op ahead of the GPU: ops issued at access i start
 * no earlier than the compute of the op before i; an op that needs pinned
 * space not yet free waits for it, the host does not. With
 * TC_PLAN_HOST_ASYNC host ops run on a lane of their own, one at a time,
 * from when the host reaches them and their copies are done; the GPU goes
 * on, but the host blocks where it acquires a tensor a host op still holds
 * (as the executor's caller settles a detached op), and, unless they run in
 * order (TC_PLAN_HOST_FIFO), at a host op's copies and at pinned space. It
 * models time; it moves no data. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "plan/plan.h"

/* pending frees: (time, bytes), a binary min-heap on time */
struct frees {
	struct fr { uint64_t t, b; } *v;
	uint32_t nr, cap;
};

static int fr_push(struct frees *h, uint64_t t, uint64_t b)
{
	uint32_t i;

	if (TC_GROW(h->v, h->cap, h->nr, 64))
		return -ENOMEM;
	for (i = h->nr++; i && h->v[(i - 1) / 2].t > t; i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = (struct fr){ t, b };
	return 0;
}

static struct fr fr_pop(struct frees *h)
{
	struct fr top = h->v[0], last = h->v[--h->nr];
	uint32_t i = 0, c;

	while ((c = 2 * i + 1) < h->nr) {
		if (c + 1 < h->nr && h->v[c + 1].t < h->v[c].t)
			c++;
		if (h->v[c].t >= last.t)
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->nr)
		h->v[i] = last;
	return top;
}

/* A link's busy intervals, sorted and disjoint. */
struct busy {
	struct iv { uint64_t a, b; } *v;
	uint32_t nr, cap;
};

/*
 * Wall time from t on, up to lim, for work ns of transfer where the other
 * direction's busy intervals (o; NULL: none) slow it to rate f; *done is
 * the work it got through.
 */
static uint64_t duplex_span(const struct busy *o, double f, uint64_t t, uint64_t lim,
			    uint64_t work, uint64_t *done)
{
	uint64_t t0 = t, left = work;
	uint32_t j = 0;

	if (!o || f >= 1) {
		*done = lim - t < work ? lim - t : work;
		return *done;
	}
	while (left && t < lim) {
		uint64_t e, w;

		while (j < o->nr && o->v[j].b <= t)
			j++;
		if (j < o->nr && o->v[j].a <= t) {	/* both at once */
			e = o->v[j].b < lim ? o->v[j].b : lim;
			w = (uint64_t)((e - t) * f);
			if (w >= left) {
				t += (uint64_t)(left / f);
				left = 0;
				break;
			}
		} else {
			e = j < o->nr && o->v[j].a < lim ? o->v[j].a : lim;
			w = e - t;
			if (w >= left) {
				t += left;
				left = 0;
				break;
			}
		}
		left -= w;
		t = e;
	}
	if (t > lim)
		t = lim;
	*done = work - left;
	return t - t0;
}

/*
 * Puts dur ns of transfer on the link from t on, into its idle time (a copy
 * queued out of order shares the link with the others); *end is when it
 * is done. Where the other direction (o) is busy, it moves at rate f. Its
 * intervals ending by floor (no op starts earlier) are forgotten.
 */
static int busy_add(struct busy *l, uint64_t a, uint64_t b)
{
	if (TC_GROW(l->v, l->cap, l->nr, 64))
		return -ENOMEM;
	l->v[l->nr++] = (struct iv){ a, b };
	return 0;
}

static int busy_place(struct busy *l, const struct busy *o, double f, uint64_t t, uint64_t dur,
		      uint64_t floor, uint64_t *end, struct busy *rec)
{
	uint32_t i = 0, k = 0;

	while (k < l->nr && l->v[k].b <= floor)
		k++;
	memmove(l->v, l->v + k, (l->nr - k) * sizeof(*l->v));
	l->nr -= k;
	while (dur) {
		uint64_t take, done;

		while (i < l->nr && l->v[i].b <= t)
			i++;
		if (i < l->nr && l->v[i].a <= t) {	/* busy at t */
			t = l->v[i].b;
			continue;
		}
		take = duplex_span(o, f, t, i < l->nr ? l->v[i].a : UINT64_MAX, dur, &done);
		if (rec && take && busy_add(rec, t, t + take))
			return -ENOMEM;
		if (i > 0 && l->v[i - 1].b == t) {
			l->v[i - 1].b = t + take;
		} else {
			if (l->nr == l->cap) {
				uint32_t nc = l->cap ? l->cap * 2 : 64;
				struct iv *nv = realloc(l->v, nc * sizeof(*nv));

				if (!nv)
					return -ENOMEM;
				l->v = nv;
				l->cap = nc;
			}
			memmove(l->v + i + 1, l->v + i, (l->nr - i) * sizeof(*l->v));
			l->v[i] = (struct iv){ t, t + take };
			l->nr++;
			i++;
		}
		if (i < l->nr && l->v[i - 1].b == l->v[i].a) {	/* closes a gap */
			l->v[i - 1].b = l->v[i].b;
			memmove(l->v + i, l->v + i + 1, (l->nr - i - 1) * sizeof(*l->v));
			l->nr--;
			i--;	/* the merged interval: what is left goes after it */
		}
		t += take;
		dur -= done;
	}
	*end = t;
	return 0;
}

static int iv_cmp(const void *x, const void *y)
{
	const struct iv *a = x, *b = y;

	return a->a < b->a ? -1 : a->a > b->a;
}

/* The time in [t0, t1) that no interval of d covers, and its longest gap
 * (*gap, starting *at after t0). Sorts d. */
static uint64_t idle_in(struct busy *d, uint64_t t0, uint64_t t1, uint64_t *gap, uint64_t *at)
{
	uint64_t t = t0, idle = 0;

	*gap = *at = 0;
	qsort(d->v, d->nr, sizeof(*d->v), iv_cmp);
	for (uint32_t k = 0; k <= d->nr && t < t1; k++) {
		uint64_t a = k < d->nr ? d->v[k].a : t1;

		if (a > t) {
			uint64_t e = a < t1 ? a : t1;

			idle += e - t;
			if (e - t > *gap) {
				*gap = e - t;
				*at = t - t0;
			}
		}
		if (k < d->nr && d->v[k].b > t)
			t = d->v[k].b;
	}
	return idle;
}

struct tier {
	uint64_t used, cap, peak;
	struct frees f;
};

/*
 * A laid-out plan's GPU ranges (plan->op_goff): a copy into a range waits
 * for the last users of what was there, not for any bytes to free up. The
 * ranges freed and when, superseded as they are taken again.
 */
struct ranges {
	struct rg { uint64_t off, end, t; } *v;
	uint32_t nr, cap;
	int64_t *at;		/* per tensor: its offset while resident, else -1 */
};

static int rg_free(struct ranges *g, uint64_t off, uint64_t len, uint64_t t)
{
	if (TC_GROW(g->v, g->cap, g->nr, 256))
		return -ENOMEM;
	g->v[g->nr++] = (struct rg){ off, off + len, t };
	return 0;
}

/* When [off, off + len) is free: the latest free it overlaps; the ones
 * it covers are forgotten (a later free of the range comes after this). */
static uint64_t rg_take(struct ranges *g, uint64_t off, uint64_t len)
{
	uint64_t t = 0, end = off + len;
	uint32_t k = 0;

	for (uint32_t i = 0; i < g->nr; i++) {
		struct rg *r = &g->v[i];

		if (r->off < end && off < r->end && r->t > t)
			t = r->t;
		if (!(r->off >= off && r->end <= end))
			g->v[k++] = *r;
	}
	g->nr = k;
	return t;
}

/* Time at which b more bytes fit, taking the earliest frees first. */
static int tier_alloc(struct tier *m, uint64_t ready, uint64_t b, uint64_t *at)
{
	while (m->f.nr && m->f.v[0].t <= ready)
		m->used -= fr_pop(&m->f).b;
	while (m->used + b > m->cap) {
		struct fr f;

		if (!m->f.nr)
			return -EINVAL;	/* the plan overcommits: a planner bug */
		f = fr_pop(&m->f);
		m->used -= f.b;
		if (f.t > ready)
			ready = f.t;
	}
	m->used += b;
	if (m->used > m->peak)
		m->peak = m->used;
	*at = ready;
	return 0;
}

/* the last step's spans (sp non-NULL): a link op or a compute */
static int span_add(struct tc_sim_spans *sp, unsigned what, uint32_t id, uint64_t t0, uint64_t t1,
		    uint64_t step_start)
{
	if (TC_GROW(sp->v, sp->cap, sp->nr, 1024))
		return -ENOMEM;
	sp->v[sp->nr++] = (struct tc_sim_span){ .what = what, .id = id,
						.t0 = (int64_t)(t0 - step_start),
						.t1 = (int64_t)(t1 - step_start) };
	return 0;
}

static int sim_run(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		   const struct tc_plan *pl, unsigned nsteps, struct tc_sim_result *res,
		   struct tc_sim_spans *sp)
{
	static const int8_t link_of[TC_OP_NR] = {
		[TC_OP_FETCH] = TC_LINK_H2D, [TC_OP_WRITEBACK] = TC_LINK_D2H,
		[TC_OP_STAGE_IN] = TC_LINK_NVME_RD, [TC_OP_STAGE_OUT] = TC_LINK_NVME_WR,
		[TC_OP_ALLOC] = -1, [TC_OP_DROP] = -1, [TC_OP_PALLOC] = -1, [TC_OP_PDROP] = -1,
	};
	struct tier gpu = { 0 }, pin = { 0 };
	struct ranges rg = { 0 };
	uint64_t *op_end, *acc_end, *held = NULL, link_free[TC_LINK_NR] = { 0 };
	struct busy lk[TC_LINK_NR] = { 0 }, disk = { 0 };	/* disk: the last two steps' NVMe time */
	uint64_t now = 0, step_start = 0, busy[TC_LINK_NR] = { 0 };
	uint32_t n, opstart = 0;
	uint64_t wait_max = 0, opready = 0, issue = 0, host_free = 0, blocked = 0;
	bool async = cfg && (cfg->flags & TC_PLAN_HOST_ASYNC);
	bool fifo = async && (cfg->flags & TC_PLAN_HOST_FIFO);
	double f[TC_LINK_NR] = { 1, 1, 1, 1 };
	bool one_disk_queue = false;	/* NVMe reads and writes take turns */
	int ret = 0;

	if (!tr || !cfg || !pl || !res || nsteps < 2 || pl->nr_acc != tr->nr_acc ||
	    pl->nr_tensors != tr->nr_tensors)
		return -EINVAL;
	memset(res, 0, sizeof(*res));
	n = tr->nr_acc;
	op_end = calloc(pl->nr_ops ? pl->nr_ops : 1, sizeof(*op_end));
	acc_end = calloc(n, sizeof(*acc_end));
	if (async)
		held = calloc(tr->nr_tensors, sizeof(*held));
	if (pl->op_goff && pl->start_goff) {
		rg.at = malloc((tr->nr_tensors ? tr->nr_tensors : 1) * sizeof(*rg.at));
		if (rg.at)
			memcpy(rg.at, pl->start_goff, tr->nr_tensors * sizeof(*rg.at));
	}
	if (!op_end || !acc_end || (async && !held) || (pl->op_goff && !rg.at)) {
		ret = -ENOMEM;
		goto out;
	}
	/* the copy placed later gets what duplex leaves of the other's rate
	 * (pairs: H2D with D2H, NVMe read with NVMe write) */
	for (int l = 0; l < TC_LINK_NR; l++) {
		double d = l < 2 ? cfg->duplex_bw : cfg->nvme_bytes ? cfg->nvme_duplex_bw : 0;

		if (d > 0) {
			f[l] = (d - cfg->bw[l ^ 1]) / cfg->bw[l];
			f[l] = f[l] > 1 ? 1 : f[l] < 0.05 ? 0.05 : f[l];
		}
	}
	/* a disk taking turns serves its read and write queues in turn, each
	 * at its own rate. The rule above would let a write run at its full
	 * rate beside a read, faster than such a disk was ever measured (a
	 * virtual disk: 1.8 read, 2.7 write, 2.1 both at once). */
	one_disk_queue = cfg->nvme_bytes &&
			 tc_disk_takes_turns(cfg->bw[TC_LINK_NVME_RD], cfg->bw[TC_LINK_NVME_WR],
					     cfg->nvme_duplex_bw);
	gpu.cap = cfg->gpu_bytes;
	pin.cap = cfg->nvme_bytes ? cfg->pinned_bytes : UINT64_MAX;
	for (uint32_t t = 0; t < tr->nr_tensors; t++) {
		if (pl->start_gpu[t] & 1)
			gpu.used += tr->tensors[t].bytes;
		if (pl->start_pinned[t] & 1)
			pin.used += tr->tensors[t].bytes;
	}
	gpu.peak = gpu.used;
	pin.peak = pin.used;
	for (unsigned step = 0; step < nsteps && !ret; step++) {
		bool last = step == nsteps - 1;

		step_start = now;
		if (last) {
			memset(busy, 0, sizeof(busy));
			wait_max = 0;
		}
		for (uint32_t i = 0; i < n && !ret; i++) {
			const struct tc_access *a = &tr->acc[i];

			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
				const struct tc_op *op = &pl->ops[k];
				uint64_t ready = issue > blocked ? issue : blocked, at;
				uint64_t b = tr->tensors[op->tensor].bytes;
				int l = link_of[op->kind];

				if (last && sp && sp->op_issue)
					sp->op_issue[k] = (int64_t)(ready - step_start);

				for (uint32_t d = 0; d < op->nr_deps; d++) {
					int32_t e = pl->deps[op->dep_first + d];
					uint64_t t = e >= 0 ? op_end[e] : acc_end[-(e + 1)];

					if (t > ready)
						ready = t;
				}
				if (op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC) {
					ret = tier_alloc(&gpu, ready, b, &ready);
					if (rg.at && pl->op_goff[k] >= 0) {
						uint64_t t = rg_take(&rg, pl->op_goff[k], b);

						if (t > ready)
							ready = t;
						rg.at[op->tensor] = pl->op_goff[k];
					}
				}
				else if (op->kind == TC_OP_STAGE_IN || op->kind == TC_OP_PALLOC) {
					/* the space is free at the op's issue (PDROP
					 * frees at issue) and the op waits for its
					 * last users; with detached host ops run out
					 * of order the caller waits for those that may
					 * wait for one (cache.c det_pending), taken
					 * here as every one */
					uint64_t h = issue > blocked ? issue : blocked;

					ret = tier_alloc(&pin, h, b, &at);
					if (at > h && async && !fifo)
						blocked = at;
					if (at > ready)
						ready = at;
				}
				if (ret)
					break;
				if (l >= 0) {
					uint64_t dur = cfg->link_lat_ns + (uint64_t)(b / cfg->bw[l] * 1e9);
					/* each direction keeps its queue (a worker each);
					 * a disk taking turns serves both in its idle time */
					bool one = one_disk_queue && l >= TC_LINK_NVME_RD;

					at = ready > link_free[l] || op->gated ? ready : link_free[l];
					ret = busy_place(one ? &lk[TC_LINK_NVME_RD] : &lk[l],
							 one ? NULL : &lk[l ^ 1], f[l], at, dur, issue,
							 &op_end[k], l >= TC_LINK_NVME_RD &&
							 step + 2 >= nsteps ? &disk : NULL);
					if (ret)
						break;
					if (!op->gated)
						link_free[l] = op_end[k];
					if (last) {
						res->link_bytes[l] += b;
						busy[l] += dur;
					}
					/* from its start, unless its time was split
					 * among idle gaps: then its last dur */
					if (last && sp)
						ret = span_add(sp, (unsigned)l, op->tensor,
							       op_end[k] - dur > at ? op_end[k] - dur : at,
							       op_end[k], step_start);
					if (ret)
						break;
				} else {
					op_end[k] = ready;
				}
				if (op->kind == TC_OP_DROP) {
					ret = fr_push(&gpu.f, op_end[k], b);
					if (!ret && rg.at && rg.at[op->tensor] >= 0)
						ret = rg_free(&rg, rg.at[op->tensor], b, op_end[k]);
					if (rg.at)
						rg.at[op->tensor] = -1;
				}
				else if (op->kind == TC_OP_PDROP)
					ret = fr_push(&pin.f, op_end[k], b);
				if (ret)
					break;
			}
			if (ret)
				break;
			/* the op computes once all its accesses' copies are done */
			if (i == 0 || (tr->acc[i - 1].flags & TC_ACC_END)) {
				opstart = i;
				opready = 0;
			}
			for (uint32_t w = pl->wait_first[i]; w < pl->wait_first[i + 1]; w++)
				if (op_end[pl->wait_ops[w]] > opready)
					opready = op_end[pl->wait_ops[w]];
			/* the host waits here for a host op still holding the tensor */
			if (async && held[a->tensor] > blocked)
				blocked = held[a->tensor];
			if ((a->flags & TC_ACC_END) && async && (a->flags & TC_ACC_HOST)) {
				uint64_t st = opready > issue ? opready : issue;

				/* the caller's acquires waited for the op's
				 * copies (TENCACHE_ACQ_NOWAIT gives them to the
				 * op's runner: with the ops run in order, all) */
				if (opready > blocked && !fifo)
					blocked = opready;
				if (host_free > st)
					st = host_free;
				if (blocked > st)
					st = blocked;
				host_free = st + a->compute_ns;
				for (uint32_t k = opstart; k <= i; k++) {
					acc_end[k] = host_free;
					held[tr->acc[k].tensor] = host_free;
				}
				if (last)
					res->host_ns += a->compute_ns;
				if (last && sp)
					ret = span_add(sp, TC_SIM_HOSTOP, i, st, host_free, step_start);
			} else if (a->flags & TC_ACC_END) {
				uint64_t st = opready > now ? opready : now;

				if (blocked > st)
					st = blocked;
				if (last && st - now > wait_max)
					wait_max = st - now;
				/* the host runs one op ahead of the GPU: what it issues
				 * at the next access cannot start before this op does */
				issue = st;
				now = st + a->compute_ns;
				for (uint32_t k = opstart; k <= i; k++)
					acc_end[k] = now;
				if (last)
					res->compute_ns += a->compute_ns;
				if (last && sp)	/* a host op in sequence, without HOST_ASYNC */
					ret = span_add(sp, a->flags & TC_ACC_HOST ? TC_SIM_HOSTOP :
						       TC_SIM_COMPUTE, i, st, now, step_start);
			}
		}
	}
	if (ret)
		goto out;
	if (sp && sp->op_done)
		for (uint32_t k = 0; k < pl->nr_ops; k++)
			sp->op_done[k] = (int64_t)(op_end[k] - step_start);
	res->step_ns = now - step_start;
	res->stall_ns = res->step_ns - res->compute_ns;
	memcpy(res->link_busy_ns, busy, sizeof(busy));
	res->gpu_peak = gpu.peak;
	res->pinned_peak = pin.peak;
	res->max_wait_ns = wait_max;
	if (cfg->nvme_bytes)
		res->nvme_idle_ns = idle_in(&disk, step_start, now, &res->nvme_gap_ns,
					    &res->nvme_gap_at_ns);
out:
	free(op_end);
	free(acc_end);
	free(held);
	for (int l = 0; l < TC_LINK_NR; l++)
		free(lk[l].v);
	free(disk.v);
	free(gpu.f.v);
	free(pin.f.v);
	free(rg.v);
	free(rg.at);
	return ret;
}

int tc_sim_run(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
	       const struct tc_plan *pl, unsigned nsteps, struct tc_sim_result *res)
{
	return sim_run(tr, cfg, pl, nsteps, res, NULL);
}

int tc_sim_run_spans(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		     const struct tc_plan *pl, unsigned nsteps, struct tc_sim_result *res,
		     struct tc_sim_spans *sp)
{
	int ret;

	if (!sp)
		return -EINVAL;
	sp->nr = 0;
	ret = sim_run(tr, cfg, pl, nsteps, res, sp);
	if (ret)
		sp->nr = 0;
	return ret;
}
