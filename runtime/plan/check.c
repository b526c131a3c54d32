/* check.c - replays a plan's table against the trace and proves it safe:
 * every read finds the current value, holds last through their op, copies
 * read valid sources, and the GPU and pinned budgets hold at every point. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"

struct cst {
	uint8_t gres, gv, pres, pv, nv;
};

static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* Layout: tensor t's range at off is in the budget and free of the other
 * residents' (go[] >= 0). O(tensors), checking only. */
static int range_free(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		      const int64_t *go, uint32_t t, int64_t off, char *err, size_t errlen)
{
	uint64_t len = (tr->tensors[t].bytes + TC_PLAN_ALIGN - 1) / TC_PLAN_ALIGN * TC_PLAN_ALIGN;

	if (off < 0 || off % TC_PLAN_ALIGN || (uint64_t)off + len > cfg->gpu_bytes)
		return fail(err, errlen, "t%u's GPU range at %lld is outside the budget",
			    t, (long long)off);
	for (uint32_t u = 0; u < tr->nr_tensors; u++) {
		uint64_t ul = (tr->tensors[u].bytes + TC_PLAN_ALIGN - 1) / TC_PLAN_ALIGN * TC_PLAN_ALIGN;

		if (u != t && go[u] >= 0 && (uint64_t)go[u] < (uint64_t)off + len &&
		    (uint64_t)off < (uint64_t)go[u] + ul)
			return fail(err, errlen, "t%u's GPU range at %lld overlaps t%u's at %lld",
				    t, (long long)off, u, (long long)go[u]);
	}
	return 0;
}

int tc_plan_check(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		  const struct tc_plan *pl, char *err, size_t errlen)
{
	uint64_t gused = 0, pused = 0;
	uint32_t n, nt, start = 0;
	struct cst *s;
	int64_t *go;
	int ret = 0;

	if (!tr || !cfg || !pl || !pl->ops || pl->nr_acc != tr->nr_acc ||
	    pl->nr_tensors != tr->nr_tensors)
		return -EINVAL;
	n = tr->nr_acc;
	nt = tr->nr_tensors;
	if (!pl->op_goff != !pl->start_goff)
		return -EINVAL;
	s = calloc(nt, sizeof(*s));
	go = pl->op_goff ? malloc((nt ? nt : 1) * sizeof(*go)) : NULL;
	if (!s || (pl->op_goff && !go)) {
		free(s);
		return -ENOMEM;
	}
	for (uint32_t t = 0; go && t < nt; t++)
		go[t] = -1;
	/* start: GPU/pinned start sets; a dirty copy is the only current one */
	for (uint32_t t = 0; t < nt; t++) {
		bool gd = (pl->start_gpu[t] & 3) == 3, pd = (pl->start_pinned[t] & 3) == 3;

		s[t].gres = s[t].gv = pl->start_gpu[t] & 1;
		s[t].pres = pl->start_pinned[t] & 1;
		s[t].pv = s[t].pres && !gd;
		s[t].nv = cfg->nvme_bytes && !gd && !pd;
		if (s[t].gres)
			gused += tr->tensors[t].bytes;
		if (s[t].gres && go && !ret) {
			ret = range_free(tr, cfg, go, t, pl->start_goff[t], err, errlen);
			go[t] = pl->start_goff[t];
		}
		if (s[t].pres)
			pused += tr->tensors[t].bytes;
	}
	if (!ret && gused > cfg->gpu_bytes)
		ret = fail(err, errlen, "start set %llu > GPU budget", (unsigned long long)gused);
	if (cfg->nvme_bytes && pused > cfg->pinned_bytes)
		ret = fail(err, errlen, "pinned start set over budget");
	for (unsigned step = 0; step < (cfg->flags & TC_PLAN_ACYCLIC ? 1u : 3u) && !ret; step++) {
		for (uint32_t i = 0; i < n && !ret; i++) {
			const struct tc_access *a = &tr->acc[i];
			struct cst *x;

			for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1] && !ret; k++) {
				const struct tc_op *op = &pl->ops[k];
				uint64_t b = tr->tensors[op->tensor].bytes;

				x = &s[op->tensor];
				/* without NVMe every value stays pinned: no pinned level */
				if (op->kind >= TC_OP_STAGE_IN && op->kind < TC_OP_NR && !cfg->nvme_bytes) {
					ret = fail(err, errlen, "op %u: %s t%u without an NVMe tier",
						   k, tc_op_name(op->kind), op->tensor);
					continue;	/* ret ends the loops */
				}
				switch (op->kind) {
				case TC_OP_FETCH:
					if (x->gres || !x->pres || !x->pv)
						ret = fail(err, errlen, "step %u op %u: fetch t%u gres %d pres %d pv %d",
							   step, k, op->tensor, x->gres, x->pres, x->pv);
					x->gres = x->gv = 1;
					gused += b;
					break;
				case TC_OP_ALLOC:
					if (x->gres)
						ret = fail(err, errlen, "op %u: alloc of resident t%u", k, op->tensor);
					x->gres = 1;
					x->gv = 0;
					gused += b;
					break;
				case TC_OP_WRITEBACK:
					if (!x->gres || !x->gv || !x->pres)
						ret = fail(err, errlen, "step %u op %u: writeback t%u gres %d gv %d pres %d",
							   step, k, op->tensor, x->gres, x->gv, x->pres);
					x->pv = 1;
					break;
				case TC_OP_DROP:
					if (!x->gres)
						ret = fail(err, errlen, "op %u: drop of absent t%u", k, op->tensor);
					x->gres = x->gv = 0;
					gused -= b;
					if (go)
						go[op->tensor] = -1;
					break;
				case TC_OP_STAGE_IN:
					if (x->pres || !x->nv)
						ret = fail(err, errlen, "step %u op %u: stage-in t%u pres %d nv %d",
							   step, k, op->tensor, x->pres, x->nv);
					x->pres = x->pv = 1;
					pused += b;
					break;
				case TC_OP_PALLOC:
					if (x->pres)
						ret = fail(err, errlen, "op %u: palloc of resident t%u", k, op->tensor);
					x->pres = 1;
					x->pv = 0;
					pused += b;
					break;
				case TC_OP_STAGE_OUT:
					if (!x->pres || !x->pv || !cfg->nvme_bytes)
						ret = fail(err, errlen, "op %u: stage-out of invalid t%u", k, op->tensor);
					x->nv = 1;
					break;
				case TC_OP_PDROP:
					if (!x->pres)
						ret = fail(err, errlen, "op %u: pdrop of absent t%u", k, op->tensor);
					x->pres = x->pv = 0;
					pused -= b;
					break;
				default:
					ret = fail(err, errlen, "op %u: bad kind %u", k, op->kind);
				}
				if (!ret && go &&
				    (op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC)) {
					ret = range_free(tr, cfg, go, op->tensor, pl->op_goff[k],
							 err, errlen);
					go[op->tensor] = pl->op_goff[k];
				}
				if (!ret && gused > cfg->gpu_bytes)
					ret = fail(err, errlen, "step %u op %u (%s t%u at %u): GPU %llu > budget %llu",
						   step, k, tc_op_name(op->kind), op->tensor, op->pos,
						   (unsigned long long)gused,
						   (unsigned long long)cfg->gpu_bytes);
				if (!ret && cfg->nvme_bytes && pused > cfg->pinned_bytes)
					ret = fail(err, errlen, "step %u op %u: pinned %llu > budget",
						   step, k, (unsigned long long)pused);
			}
			if (ret)
				break;
			x = &s[a->tensor];
			if (a->flags & TC_ACC_HOST) {
				if (!x->pres || ((a->flags & TC_ACC_READ) && !x->pv))
					ret = fail(err, errlen, "step %u acc %u: host t%u pres %d pv %d",
						   step, i, a->tensor, x->pres, x->pv);
				if (a->flags & TC_ACC_WRITE) {
					x->pv = 1;
					x->gv = x->nv = 0;
				}
			} else {
				if (!x->gres || ((a->flags & TC_ACC_READ) && !x->gv))
					ret = fail(err, errlen, "step %u acc %u: GPU t%u gres %d gv %d",
						   step, i, a->tensor, x->gres, x->gv);
				if (a->flags & TC_ACC_WRITE) {
					x->gv = 1;
					x->pv = x->nv = 0;
				}
			}
			if (!ret && (a->flags & TC_ACC_END)) {
				/* holds: the whole op is still resident when it computes */
				for (uint32_t k = start; k <= i && !ret; k++) {
					const struct tc_access *b = &tr->acc[k];
					const struct cst *y = &s[b->tensor];

					if ((b->flags & TC_ACC_HOST) ? !y->pres : !y->gres)
						ret = fail(err, errlen, "step %u acc %u: t%u left before its op ended",
							   step, k, b->tensor);
				}
				start = i + 1;
			}
		}
		start = 0;
	}
	free(s);
	free(go);
	return ret;
}
