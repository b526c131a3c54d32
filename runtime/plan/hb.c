/* hb.c - happens-before check of a plan under the executor's semantics:
 * every pair of conflicting memory accesses (copies, GPU ops, host ops) is
 * ordered whatever the streams' timing.
 *
 * The model follows runtime/exec/cache.c in planned mode. The CPU issues, in
 * table order: the ops of access i (FETCH / ALLOC on the H2D stream after
 * waiting for the last users of every freed GPU range they overlap, and
 * FETCH / WRITEBACK after their deps), then the access's waits (a GPU access:
 * its compute stream waits; a host access: the CPU syncs), then at an op's
 * END its compute (GPU: on the compute stream, after its waits) or its host
 * op (detached: on a thread of its own from here until it is synced on;
 * inline: on the CPU). A wait names the latest instance issued so far of an
 * event; a DROP frees its range at issue. Waiting for a host event blocks the
 * CPU (CUDA). A tensor held by a detached op is released, after its done,
 * before it is acquired again; a step ends with the CPU syncing every stream.
 *
 * Gated FETCH (tc_op.gated) whose one host dependency is a detached op the
 * CPU has not synced on: cache.c holds the copy. It takes its space, its
 * freed-range waits and its other deps' waits at its issue point, and goes
 * out on H2D once the op is done: at a later issue point's poll, or forced
 * by the first wait for its event (the CPU waits for the op, then queues
 * it). Here it is a node off the H2D order: after the issue point's CPU and
 * H2D stream and after its host op; before what waits for it (a chain that
 * waits is after it from its next seq on), and, once forced, before what
 * H2D gets after the force. A freed range's waits skip a held copy for its
 * event's previous instance (cache.c gfreed_ev); the step's end does not
 * wait for a held copy (tc_exec_drain: it is on no stream yet). Not
 * modelled here: a freed range's waits skip an op's newer instance once the
 * one the free meant is known done (cache.c freed_older_done: a wait only
 * left out for what is done), and with ops run in order a gated copy whose
 * op still runs is not held but waits for it on a stream of its own,
 * gstream (cache.c fetch_stream).
 *
 * Happens-before is tracked with vector clocks over the chains CPU, compute,
 * H2D and D2H; a detached host op is ordered before what follows the first
 * CPU sync on it, a held gated copy before what follows each chain's first
 * wait for it. Memory: each tensor's pinned copy, and GPU bytes, split into
 * atoms at every range boundary, so reuse of space by another tensor is
 * checked. Each access is checked against the last write and the reads
 * since (in issue order, the order tc_plan_check proves the values for).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "plan/plan.h"

enum { CH_CPU, CH_CMP, CH_H2D, CH_D2H, CH_NR, CH_HOST = CH_NR, CH_GATED };

struct hnode {
	uint32_t vc[CH_NR];
	uint8_t chain;
	uint32_t seq;		/* on its chain; host op: index into sync_at;
				 * gated copy: into gates */
	uint32_t lap, what;	/* op index, or access index (| 1 << 31) */
};

/* A held gated copy: after its vc and its host op; before what joined it. */
struct hgate {
	int64_t host;		/* the host op's node */
	uint32_t join[CH_NR];	/* per chain: first seq after it, 0 none */
	uint8_t forced;		/* sent by a wait: on H2D before join[CH_H2D] */
};

struct hacc {
	uint32_t node;
	uint8_t write;
};

struct hloc {			/* one memory location's access history */
	int64_t lastw;		/* node, -1 none */
	struct hacc *rd;	/* reads since lastw */
	uint32_t nrd, caprd;
};

struct hatom {
	uint64_t start;		/* up to the next atom's start */
	struct hloc l;
};

struct hgfree {
	uint64_t off, len;
	uint32_t op;
};

struct hb {
	const struct tc_trace *tr;
	const struct tc_plan *pl;
	struct hnode *nodes;
	uint32_t nr_nodes, cap_nodes;
	uint32_t *sync_at;	/* per host op node: first CPU seq after its sync, 0 none */
	uint32_t nr_host, cap_host;
	struct hgate *gates;	/* per gated copy node */
	uint32_t nr_gates, cap_gates;
	uint32_t cur[CH_NR];	/* the CPU's clock */
	uint32_t sv[CH_NR][CH_NR];	/* each stream's clock (its waits so far) */
	int64_t *latest;	/* per event (ops, then accesses): node, -1 none */
	int64_t *prev;		/* per op: the instance before latest (gated) */
	int64_t *held_by;	/* per tensor: detached host op node holding it */
	struct hloc *pin;	/* per tensor */
	struct hatom *atoms;
	uint32_t nr_atoms, cap_atoms;
	struct hgfree *gf;
	uint32_t nr_gf, cap_gf;
	int64_t *goff;		/* per tensor: GPU offset, -1 none */
	char *err;
	size_t errlen;
};

static void vmax(uint32_t *a, const uint32_t *b)
{
	for (int k = 0; k < CH_NR; k++)
		if (b[k] > a[k])
			a[k] = b[k];
}

static int new_node(struct hb *h, uint8_t chain, const uint32_t *vc, uint32_t lap,
		    uint32_t what, uint32_t *id)
{
	struct hnode *n;

	if (TC_GROW(h->nodes, h->cap_nodes, h->nr_nodes, 1024))
		return -ENOMEM;
	n = &h->nodes[h->nr_nodes];
	memcpy(n->vc, vc, sizeof(n->vc));
	n->chain = chain;
	n->lap = lap;
	n->what = what;
	if (chain == CH_HOST) {
		if (TC_GROW(h->sync_at, h->cap_host, h->nr_host, 256))
			return -ENOMEM;
		h->sync_at[h->nr_host] = 0;
		n->seq = h->nr_host++;
	} else if (chain == CH_GATED) {
		if (TC_GROW(h->gates, h->cap_gates, h->nr_gates, 64))
			return -ENOMEM;
		h->gates[h->nr_gates] = (struct hgate){ .host = -1 };
		n->seq = h->nr_gates++;
	} else {
		n->seq = vc[chain];
	}
	*id = h->nr_nodes++;
	return 0;
}

/* a happens before b (a issued before b) */
static int hb_before(const struct hb *h, uint32_t a, uint32_t b)
{
	const struct hnode *x = &h->nodes[a], *y = &h->nodes[b];

	if (a == b)
		return 1;
	/* a gated copy's predecessors: its vc's, and its host op (whose own
	 * predecessors its vc has: the op was issued before it) */
	if (y->chain == CH_GATED && h->gates[y->seq].host == a)
		return 1;
	if (x->chain == CH_HOST) {
		uint32_t s = h->sync_at[x->seq];

		return s && y->vc[CH_CPU] >= s;
	}
	if (x->chain == CH_GATED) {
		const struct hgate *g = &h->gates[x->seq];

		for (int k = 0; k < CH_NR; k++)
			if (g->join[k] && y->vc[k] >= g->join[k])
				return 1;
		return 0;
	}
	return y->vc[x->chain] >= x->seq;
}

static void describe(const struct hb *h, uint32_t id, char *b, size_t len)
{
	static const char *const ch[] = { "cpu", "compute", "h2d", "d2h", "host op",
					  "h2d (gated)" };
	const struct hnode *n = &h->nodes[id];

	if (n->what >> 31) {
		uint32_t i = n->what & ~(1u << 31);

		snprintf(b, len, "step %u %s of access %u (t%u)", n->lap, ch[n->chain], i,
			 h->tr->acc[i].tensor);
	} else {
		const struct tc_op *op = &h->pl->ops[n->what];

		snprintf(b, len, "step %u %s op %u t%u at %u on %s", n->lap, tc_op_name(op->kind),
			 n->what, op->tensor, op->pos, ch[n->chain]);
	}
}

static int race(struct hb *h, uint32_t a, uint32_t b, const char *where)
{
	char x[128], y[128];

	describe(h, a, x, sizeof(x));
	describe(h, b, y, sizeof(y));
	if (h->err && h->errlen)
		snprintf(h->err, h->errlen, "%s and %s conflict on %s, unordered", x, y, where);
	return -EDEADLK;
}

static int loc_access(struct hb *h, struct hloc *l, uint32_t node, int write, const char *where)
{
	if (l->lastw >= 0 && !hb_before(h, l->lastw, node))
		return race(h, l->lastw, node, where);
	if (write) {
		for (uint32_t k = 0; k < l->nrd; k++)
			if (!hb_before(h, l->rd[k].node, node))
				return race(h, l->rd[k].node, node, where);
		l->lastw = node;
		l->nrd = 0;
		return 0;
	}
	if (l->nrd && l->rd[l->nrd - 1].node == node)
		return 0;
	if (TC_GROW(l->rd, l->caprd, l->nrd, 4))
		return -ENOMEM;
	l->rd[l->nrd++] = (struct hacc){ node, 0 };
	return 0;
}

/* index of the atom holding byte off, splitting so one starts at off */
static int atom_split(struct hb *h, uint64_t off, uint32_t *idx)
{
	uint32_t lo = 0, hi = h->nr_atoms;
	struct hatom *a;

	while (hi - lo > 1) {	/* last atom with start <= off; atoms[0].start = 0 */
		uint32_t mid = (lo + hi) / 2;

		if (h->atoms[mid].start <= off)
			lo = mid;
		else
			hi = mid;
	}
	if (h->atoms[lo].start == off) {
		*idx = lo;
		return 0;
	}
	if (TC_GROW(h->atoms, h->cap_atoms, h->nr_atoms, 256))
		return -ENOMEM;
	memmove(&h->atoms[lo + 2], &h->atoms[lo + 1],
		(h->nr_atoms - lo - 1) * sizeof(*h->atoms));
	h->nr_atoms++;
	a = &h->atoms[lo + 1];
	*a = h->atoms[lo];
	a->start = off;
	a->l.rd = NULL;
	a->l.caprd = a->l.nrd = 0;
	if (h->atoms[lo].l.nrd) {
		a->l.rd = malloc(h->atoms[lo].l.nrd * sizeof(*a->l.rd));
		if (!a->l.rd)
			return -ENOMEM;
		memcpy(a->l.rd, h->atoms[lo].l.rd, h->atoms[lo].l.nrd * sizeof(*a->l.rd));
		a->l.nrd = a->l.caprd = h->atoms[lo].l.nrd;
	}
	*idx = lo + 1;
	return 0;
}

static int gpu_access(struct hb *h, uint32_t t, uint32_t node, int write)
{
	uint64_t off = h->goff[t], end = off + h->tr->tensors[t].bytes;
	uint32_t a, b;
	char where[96];
	int ret;

	if (h->goff[t] < 0) {
		if (h->err && h->errlen)
			snprintf(h->err, h->errlen, "t%u used on the GPU without space", t);
		return -EINVAL;
	}
	snprintf(where, sizeof(where), "GPU bytes of t%u [%llu, %llu)", t,
		 (unsigned long long)off, (unsigned long long)end);
	ret = atom_split(h, off, &a);
	ret = ret ?: atom_split(h, end, &b);
	if (ret)
		return ret;
	for (uint32_t k = a; k < b; k++) {
		ret = loc_access(h, &h->atoms[k].l, node, write, where);
		if (ret)
			return ret;
	}
	return 0;
}

static int pin_access(struct hb *h, uint32_t t, uint32_t node, int write)
{
	char where[48];

	snprintf(where, sizeof(where), "the pinned copy of t%u", t);
	return loc_access(h, &h->pin[t], node, write, where);
}

static void cpu_sync(struct hb *h, int64_t n);

/*
 * A wait on a held gated copy's event sends it first (cache.c gate_send):
 * the CPU waits for its host op, then queues it on H2D, before anything
 * queued there later. Sent earlier by a poll, it is there before that too.
 */
static void gate_force(struct hb *h, struct hgate *g)
{
	if (g->forced)
		return;
	g->forced = 1;
	cpu_sync(h, g->host);
	vmax(h->sv[CH_H2D], h->cur);
	g->join[CH_H2D] = ++h->sv[CH_H2D][CH_H2D];
}

/* the CPU waits for node n (a sync) */
static void cpu_sync(struct hb *h, int64_t n)
{
	struct hnode *x;

	if (n < 0)
		return;
	x = &h->nodes[n];
	if (x->chain == CH_GATED)
		gate_force(h, &h->gates[x->seq]);
	vmax(h->cur, x->vc);
	h->cur[CH_CPU]++;
	if (x->chain == CH_HOST && !h->sync_at[x->seq])
		h->sync_at[x->seq] = h->cur[CH_CPU];
	if (x->chain == CH_GATED && !h->gates[x->seq].join[CH_CPU])
		h->gates[x->seq].join[CH_CPU] = h->cur[CH_CPU];
}

/* stream s waits for node n; a host event blocks the CPU (CUDA) */
static void stream_wait(struct hb *h, int s, int64_t n)
{
	struct hgate *g;

	if (n < 0)
		return;
	if (h->nodes[n].chain == CH_HOST) {
		cpu_sync(h, n);
		return;
	}
	if (h->nodes[n].chain != CH_GATED) {
		vmax(h->sv[s], h->nodes[n].vc);
		return;
	}
	/* the copy's record may come from a poll, before the force: what
	 * s queues next is after the copy, not after the force's CPU */
	g = &h->gates[h->nodes[n].seq];
	gate_force(h, g);
	vmax(h->sv[s], h->nodes[n].vc);
	if (!g->join[s])
		g->join[s] = h->sv[s][s] + 1;
}

static int64_t ev_latest(const struct hb *h, int32_t d)
{
	return d >= 0 ? h->latest[d] : h->latest[h->pl->nr_ops + (uint32_t)(-(d + 1))];
}

static int enqueue(struct hb *h, int s, uint32_t lap, uint32_t what, uint32_t *id)
{
	vmax(h->sv[s], h->cur);
	h->sv[s][s]++;
	return new_node(h, s, h->sv[s], lap, what, id);
}

static int held(const struct hb *h, int64_t n)
{
	return n >= 0 && h->nodes[n].chain == CH_GATED && !h->gates[h->nodes[n].seq].forced;
}

/*
 * A freed range's last users (cache.c gfreed_ev): a copy still held for its
 * host op is not waited for, its event's previous instance is (the one
 * recorded). Sent by a poll, it would be waited for: after that one.
 */
static int64_t gfreed_ev(const struct hb *h, int32_t d)
{
	int64_t n = ev_latest(h, d);

	return d >= 0 && held(h, n) ? h->prev[d] : n;
}

static void gfreed_wait(struct hb *h, int s, uint64_t off, uint64_t len)
{
	for (uint32_t g = 0; g < h->nr_gf; g++) {
		const struct hgfree *f = &h->gf[g];
		const struct tc_op *op = &h->pl->ops[f->op];

		if (f->off >= off + len || off >= f->off + f->len)
			continue;
		for (uint32_t k = 0; k < op->nr_deps; k++)
			stream_wait(h, s, gfreed_ev(h, h->pl->deps[op->dep_first + k]));
	}
}

/*
 * Whether cache.c's event for dependency d is a host event (not a deferred
 * one: the NVMe tier's ops are not modelled): a DROP's, signalled at issue,
 * or an access's other than a GPU op's end.
 */
static int dep_host(const struct hb *h, int32_t d)
{
	const struct tc_access *a;

	if (d >= 0)
		return h->pl->ops[d].kind == TC_OP_DROP;
	a = &h->tr->acc[-(d + 1)];
	return (a->flags & TC_ACC_HOST) || !(a->flags & TC_ACC_END);
}

/*
 * cache.c gate_hold: a gated FETCH is held when it has one host dependency
 * and that op may still run (a detached one the CPU has not synced on).
 * Done, the copy goes out at once, as any; held, it goes out when the op is
 * done, which no wait here can rule out before a wait forces it.
 */
static int64_t gate_host(const struct hb *h, const struct tc_op *op)
{
	int64_t host = -1;
	int nr = 0;

	if (!op->gated)
		return -1;
	for (uint32_t d = 0; d < op->nr_deps; d++) {
		int32_t dep = h->pl->deps[op->dep_first + d];

		if (dep_host(h, dep)) {
			nr++;
			host = ev_latest(h, dep);
		}
	}
	if (nr != 1 || host < 0 || h->nodes[host].chain != CH_HOST ||
	    h->sync_at[h->nodes[host].seq])
		return -1;
	return host;
}

static int gpu_place(struct hb *h, const struct tc_hb_cfg *hc, uint32_t t, uint32_t op)
{
	uint64_t off;
	int ret;

	if (h->goff[t] >= 0) {
		if (h->err && h->errlen)
			snprintf(h->err, h->errlen, "op %u: t%u placed twice", op, t);
		return -EINVAL;
	}
	ret = hc->alloc(hc->ctx, t, op, h->tr->tensors[t].bytes, &off);
	if (ret) {
		if (h->err && h->errlen)
			snprintf(h->err, h->errlen, "op %u: no GPU space for t%u (%d)", op, t, ret);
		return ret;
	}
	h->goff[t] = off;
	return 0;
}

static int issue_op(struct hb *h, const struct tc_hb_cfg *hc, uint32_t k, uint32_t lap)
{
	const struct tc_op *op = &h->pl->ops[k];
	uint32_t t = op->tensor, id;
	uint64_t b = h->tr->tensors[t].bytes;
	int64_t host;
	int ret = 0;

	switch (op->kind) {
	case TC_OP_FETCH:
	case TC_OP_ALLOC:
		/* its event's gate still set: cache.c would not send this one */
		if (held(h, h->latest[k])) {
			if (h->err && h->errlen)
				snprintf(h->err, h->errlen,
					 "step %u op %u: FETCH of t%u issued again while its last (gated) instance may be held",
					 lap, k, t);
			return -EDEADLK;
		}
		ret = gpu_place(h, hc, t, k);
		if (ret)
			return ret;
		gfreed_wait(h, CH_H2D, h->goff[t], b);
		host = op->kind == TC_OP_FETCH ? gate_host(h, op) : -1;
		for (uint32_t d = 0; d < op->nr_deps; d++) {	/* ALLOC has none */
			int32_t dep = h->pl->deps[op->dep_first + d];

			if (host < 0 || !dep_host(h, dep))
				stream_wait(h, CH_H2D, ev_latest(h, dep));
		}
		if (host >= 0) {
			uint32_t vc[CH_NR];

			/* held: off the H2D order, after what H2D waited for */
			memcpy(vc, h->sv[CH_H2D], sizeof(vc));
			vmax(vc, h->cur);
			ret = new_node(h, CH_GATED, vc, lap, k, &id);
			if (!ret)
				h->gates[h->nodes[id].seq].host = host;
		} else {
			ret = enqueue(h, CH_H2D, lap, k, &id);
		}
		if (!ret && op->kind == TC_OP_FETCH) {
			ret = pin_access(h, t, id, 0);
			ret = ret ?: gpu_access(h, t, id, 1);
		}
		h->prev[k] = h->latest[k];
		h->latest[k] = id;
		return ret;
	case TC_OP_WRITEBACK:
		for (uint32_t d = 0; d < op->nr_deps; d++)
			stream_wait(h, CH_D2H, ev_latest(h, h->pl->deps[op->dep_first + d]));
		ret = enqueue(h, CH_D2H, lap, k, &id);
		ret = ret ?: gpu_access(h, t, id, 0);
		ret = ret ?: pin_access(h, t, id, 1);
		h->latest[k] = id;
		return ret;
	case TC_OP_DROP:
		if (h->goff[t] >= 0) {
			if (TC_GROW(h->gf, h->cap_gf, h->nr_gf, 64))
				return -ENOMEM;
			h->gf[h->nr_gf++] = (struct hgfree){ h->goff[t], b, k };
			ret = hc->free(hc->ctx, t, h->goff[t]);
			h->goff[t] = -1;
		}
		h->latest[k] = -1;	/* signalled at issue */
		return ret;
	default:
		if (h->err && h->errlen)
			snprintf(h->err, h->errlen, "op %u: %s is not modelled (NVMe tier)", k,
				 tc_op_name(op->kind));
		return -EOPNOTSUPP;
	}
}

/* Default placement: every tensor its own range (no reuse to check). */
struct own_ctx {
	const struct tc_trace *tr;
	uint64_t *base;
};

static int own_alloc(void *ctx, uint32_t t, uint32_t op, uint64_t bytes, uint64_t *off)
{
	*off = ((struct own_ctx *)ctx)->base[t];
	return 0;
}

static int own_free(void *ctx, uint32_t t, uint64_t off)
{
	return 0;
}

static int run(struct hb *h, const struct tc_hb_cfg *hc)
{
	const struct tc_trace *tr = h->tr;
	const struct tc_plan *pl = h->pl;
	uint32_t n = tr->nr_acc, first = 0;
	int ret = 0;

	/* the start set, loaded synchronously */
	for (uint32_t t = 0; t < tr->nr_tensors && !ret; t++)
		if (pl->start_gpu[t] & 1)
			ret = gpu_place(h, hc, t, UINT32_MAX);
	for (uint32_t lap = 0; lap < hc->steps && !ret; lap++) {
		for (uint32_t i = 0; i < n && !ret; i++) {
			const struct tc_access *a = &tr->acc[i];
			int host = !!(a->flags & TC_ACC_HOST);
			uint32_t id;

			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1] && !ret; k++)
				ret = issue_op(h, hc, k, lap);
			if (ret)
				break;
			/* released after its detached op is done, before this acquire */
			if (h->held_by[a->tensor] >= 0) {
				cpu_sync(h, h->held_by[a->tensor]);
				h->held_by[a->tensor] = -1;
			}
			for (uint32_t w = pl->wait_first[i]; w < pl->wait_first[i + 1]; w++) {
				int64_t e = h->latest[pl->wait_ops[w]];

				if (host)
					cpu_sync(h, e);
				else
					stream_wait(h, CH_CMP, e);
			}
			if (!(a->flags & TC_ACC_END))
				continue;
			if (!host) {
				ret = enqueue(h, CH_CMP, lap, i | 1u << 31, &id);
			} else if (hc->detach) {
				ret = new_node(h, CH_HOST, h->cur, lap, i | 1u << 31, &id);
			} else {
				h->cur[CH_CPU]++;
				ret = new_node(h, CH_CPU, h->cur, lap, i | 1u << 31, &id);
			}
			for (uint32_t j = first; j <= i && !ret; j++) {
				const struct tc_access *b = &tr->acc[j];
				int w = !!(b->flags & TC_ACC_WRITE);

				if (b->flags & TC_ACC_READ)
					ret = host ? pin_access(h, b->tensor, id, 0)
						   : gpu_access(h, b->tensor, id, 0);
				if (!ret && w)
					ret = host ? pin_access(h, b->tensor, id, 1)
						   : gpu_access(h, b->tensor, id, 1);
				h->latest[pl->nr_ops + j] = id;
				if (host && hc->detach)
					h->held_by[b->tensor] = id;
			}
			first = i + 1;
		}
		first = 0;
		/* step end: the CPU syncs every stream (tc_exec_drain) */
		for (int s = CH_CMP; s < CH_NR; s++)
			vmax(h->cur, h->sv[s]);
		h->cur[CH_CPU]++;
		h->nr_gf = 0;
	}
	return ret;
}

int tc_plan_hb_check(const struct tc_trace *tr, const struct tc_plan *pl,
		     const struct tc_hb_cfg *cfg, char *err, size_t errlen)
{
	struct tc_hb_cfg hc;
	struct own_ctx own = { tr, NULL };
	struct hb h = { 0 };
	int ret = -ENOMEM;

	if (!tr || !pl || !cfg || !pl->ops || pl->nr_acc != tr->nr_acc ||
	    pl->nr_tensors != tr->nr_tensors || cfg->steps < 1 || !cfg->alloc != !cfg->free)
		return -EINVAL;
	hc = *cfg;
	if (!hc.alloc) {
		uint64_t at = 0;

		own.base = malloc((tr->nr_tensors + 1) * sizeof(*own.base));
		if (!own.base)
			return -ENOMEM;
		for (uint32_t t = 0; t < tr->nr_tensors; t++) {
			own.base[t] = at;
			at += (tr->tensors[t].bytes + 255) & ~255ull;
		}
		hc.alloc = own_alloc;
		hc.free = own_free;
		hc.ctx = &own;
	}
	h.tr = tr;
	h.pl = pl;
	h.err = err;
	h.errlen = errlen;
	if (err && errlen)
		err[0] = 0;
	h.latest = malloc((pl->nr_ops + tr->nr_acc + 1) * sizeof(*h.latest));
	h.prev = malloc((pl->nr_ops + 1) * sizeof(*h.prev));
	h.held_by = malloc((tr->nr_tensors + 1) * sizeof(*h.held_by));
	h.goff = malloc((tr->nr_tensors + 1) * sizeof(*h.goff));
	h.pin = calloc(tr->nr_tensors + 1, sizeof(*h.pin));
	h.atoms = calloc(256, sizeof(*h.atoms));
	if (!h.latest || !h.prev || !h.held_by || !h.goff || !h.pin || !h.atoms)
		goto out;
	h.cap_atoms = 256;
	h.nr_atoms = 1;
	h.atoms[0].l.lastw = -1;
	for (uint32_t k = 0; k < pl->nr_ops + tr->nr_acc; k++)
		h.latest[k] = -1;
	for (uint32_t k = 0; k < pl->nr_ops; k++)
		h.prev[k] = -1;
	for (uint32_t t = 0; t < tr->nr_tensors; t++) {
		h.held_by[t] = h.goff[t] = -1;
		h.pin[t].lastw = -1;
	}
	/* seq 0 means "before everything": chains count from 1 */
	ret = run(&h, &hc);
out:
	for (uint32_t t = 0; h.pin && t < tr->nr_tensors; t++)
		free(h.pin[t].rd);
	for (uint32_t k = 0; h.atoms && k < h.nr_atoms; k++)
		free(h.atoms[k].l.rd);
	free(h.pin); free(h.atoms); free(h.latest); free(h.prev); free(h.held_by); free(h.goff);
	free(h.nodes); free(h.sync_at); free(h.gates); free(h.gf); free(own.base);
	return ret;
}
