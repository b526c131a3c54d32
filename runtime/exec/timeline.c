/*
 * timeline.c - what the last step did, per stream, as Chrome trace-event
 * JSON (opens in Perfetto / chrome://tracing): copies on the H2D and D2H
 * streams, NVMe staging, compute, host ops, the host's stalls in
 * acquire, and the acquires, releases and detaches that kept the caller
 * 100 us or more (on a GPU, in the driver). Device spans are bracketed by timing
 * events and turned into host time at the end of the step, relative to an
 * event recorded at its start.
 * Beside it, what the timing model said of the same plan's step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

static const char *const tl_names[TC_TL_NR] = {
	"H2D", "D2H", "NVMe read", "NVMe write", "compute", "host op", "acquire stall",
	"NVMe read wait", "NVMe write wait", "tencache call",
};

/* the plan's op kinds, as an NVMe wait names what it waited for */
static const char *const why_ops[TC_OP_NR] = {
	[TC_OP_FETCH] = "H2D", [TC_OP_ALLOC] = "GPU alloc", [TC_OP_WRITEBACK] = "D2H",
	[TC_OP_DROP] = "GPU drop", [TC_OP_STAGE_IN] = "NVMe read",
	[TC_OP_PALLOC] = "pinned alloc", [TC_OP_STAGE_OUT] = "NVMe write",
	[TC_OP_PDROP] = "pinned drop",
};

static struct tc_tl_span *tl_push(struct tencache_cache *c)
{
	if (TC_GROW(c->tl, c->tl_cap, c->tl_nr, 1024))
		return NULL;
	memset(&c->tl[c->tl_nr], 0, sizeof(c->tl[0]));
	return &c->tl[c->tl_nr++];
}

void tc_exec_timeline_step(struct tencache_cache *c)
{
	c->tl_nr = 0;
	c->tl_evs_used = 0;
}

/* A span the host timed itself (staging workers, stalls, host ops). */
static void tl_add(struct tencache_cache *c, const struct tc_tl_span *span)
{
	bool worker = span->kind == TC_TL_NVME_RD || span->kind == TC_TL_NVME_WR ||
		      span->kind == TC_TL_NVME_RD_WAIT || span->kind == TC_TL_NVME_WR_WAIT;
	struct tc_tl_span *sp;

	if (!c->timeline_on)
		return;
	if (worker)
		pthread_mutex_lock(&c->slock);	/* from a staging worker */
	sp = tl_push(c);
	if (sp)
		*sp = *span;
	if (worker)
		pthread_mutex_unlock(&c->slock);
}

void tc_exec_timeline_add(struct tencache_cache *c, int kind, unsigned lane, uint32_t id,
			  uint64_t t0, uint64_t t1)
{
	tl_add(c, &(struct tc_tl_span){ .kind = kind, .lane = lane, .id = id, .t0 = t0, .t1 = t1 });
}

void tc_exec_timeline_wait(struct tencache_cache *c, int kind, uint32_t id, unsigned why,
			   uint32_t why_id, uint64_t t0, uint64_t t1)
{
	tl_add(c, &(struct tc_tl_span){ .kind = kind, .id = id, .why = why, .why_id = why_id,
					.t0 = t0, .t1 = t1 });
}

int tc_exec_timing_event(struct tencache_cache *c, void **e)
{
	if (c->tl_evs_used == c->tl_evs_nr) {
		void **n = realloc(c->tl_evs, (c->tl_evs_nr + 256) * sizeof(*n));
		int ret;

		if (!n)
			return -ENOMEM;
		c->tl_evs = n;
		for (uint32_t i = 0; i < 256; i++) {
			ret = c->dev->ops->event_create(c->dev, 1, &c->tl_evs[c->tl_evs_nr]);
			if (ret)
				return ret;
			c->tl_evs_nr++;
		}
	}
	*e = c->tl_evs[c->tl_evs_used++];
	return 0;
}

int tc_exec_timeline_mark(struct tencache_cache *c, void *s, int kind, uint32_t id, int end)
{
	struct tc_tl_span *sp = NULL;
	void *e;
	int ret;

	if (!c->timeline_on || !c->in_step)
		return 0;
	ret = tc_exec_timing_event(c, &e);
	ret = ret ?: c->dev->ops->record(c->dev, e, s);
	if (ret)
		return ret;
	if (!end) {
		pthread_mutex_lock(&c->slock);
		sp = tl_push(c);
		if (sp)
			/* gated copies' stream: a track of its own ("H2D 2") */
			*sp = (struct tc_tl_span){ .kind = kind, .lane = s && s == c->gstream,
						   .id = id, .ev0 = e };
		pthread_mutex_unlock(&c->slock);
		return sp ? 0 : -ENOMEM;
	}
	/* the latest open span of this kind and id (one stream per kind) */
	pthread_mutex_lock(&c->slock);
	for (uint32_t i = c->tl_nr; i-- > 0;)
		if (c->tl[i].kind == kind && c->tl[i].id == id && c->tl[i].ev0 && !c->tl[i].ev1) {
			c->tl[i].ev1 = e;
			break;
		}
	pthread_mutex_unlock(&c->slock);
	return 0;
}

/* After the step's work is done: device spans to host time. */
int tc_exec_timeline_resolve(struct tencache_cache *c)
{
	uint64_t a, b;

	if (!c->timeline_on)
		return 0;
	for (uint32_t i = 0; i < c->tl_nr; i++) {
		struct tc_tl_span *sp = &c->tl[i];

		if (!sp->ev0 || !sp->ev1)
			continue;
		if (c->dev->ops->elapsed(c->dev, c->step_ev, sp->ev0, &a) ||
		    c->dev->ops->elapsed(c->dev, c->step_ev, sp->ev1, &b))
			continue;
		sp->t0 = c->step_t0 + a;
		sp->t1 = c->step_t0 + b;
		sp->ev0 = sp->ev1 = NULL;
	}
	return 0;
}

void tc_exec_timeline_free(struct tencache_cache *c)
{
	for (uint32_t i = 0; i < c->tl_evs_nr; i++)
		c->dev->ops->event_destroy(c->dev, c->tl_evs[i]);
	free(c->tl_evs);
	free(c->tl);
	c->tl_evs = NULL;
	c->tl = NULL;
	c->tl_nr = c->tl_cap = c->tl_evs_nr = c->tl_evs_used = 0;
}

/* model spans by kind, then start */
static int span_cmp(const void *a, const void *b)
{
	const struct tc_sim_span *x = a, *y = b;

	if (x->what != y->what)
		return x->what < y->what ? -1 : 1;
	return (x->t0 > y->t0) - (x->t0 < y->t0);
}

/*
 * The timing model's step for plan p, as a process of its own ("timing
 * model", pid 2; beside the executor's, pid 1): its copies, staging and
 * compute, tracks named as the executor's and split into lanes where spans
 * overlap (Perfetto drops overlapping slices). Only what the model can
 * say: no waits, no stalls. Each event is written after a comma.
 */
static int model_spans(FILE *f, const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		       const struct tc_plan *p)
{
	enum { LANES = 16 };
	struct tc_sim_spans sp = { 0 };
	struct tc_sim_result sr;
	int64_t lane_end[LANES];
	uint32_t used = 0, what = UINT32_MAX;
	const char *const *names = tl_names;	/* a model span's what is its kind */
	int ret;

	_Static_assert((int)TC_LINK_H2D == TC_TL_H2D && (int)TC_LINK_D2H == TC_TL_D2H &&
		       (int)TC_LINK_NVME_RD == TC_TL_NVME_RD &&
		       (int)TC_LINK_NVME_WR == TC_TL_NVME_WR &&
		       (int)TC_SIM_COMPUTE == TC_TL_COMPUTE && (int)TC_SIM_HOSTOP == TC_TL_HOSTOP,
		       "model spans and timeline kinds share their numbers");
	ret = tc_sim_run_spans(tr, cfg, p, 3, &sr, &sp);
	if (ret)
		goto out;
	qsort(sp.v, sp.nr, sizeof(*sp.v), span_cmp);
	fprintf(f, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,"
		"\"args\":{\"name\":\"timing model (%.1f ms/step)\"}}", sr.step_ns / 1e6);
	for (uint32_t i = 0; i < sp.nr; i++) {
		const struct tc_sim_span *s = &sp.v[i];
		uint32_t l = 0;

		if (s->what != what) {	/* the next kind's lanes */
			what = s->what;
			used = 0;
		}
		while (l < used && lane_end[l] > s->t0 && l < LANES - 1)
			l++;
		if (l == used) {	/* a new lane: its track */
			lane_end[l] = s->t1;
			fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":2,"
				"\"tid\":%u,\"args\":{\"name\":\"%s", what + 1 + LANES * l,
				names[what]);
			fprintf(f, l ? " %u\"}}" : "\"}}", l + 1);
			used++;
		}
		if (s->t1 > lane_end[l])	/* (the last lane may overlap) */
			lane_end[l] = s->t1;
		fprintf(f, ",\n{\"name\":\"%s %u\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":2,"
			"\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"%s\":%u}}",
			what >= TC_SIM_COMPUTE ? "op" : "tensor", s->id, names[what],
			what + 1 + LANES * l, s->t0 / 1e3, (s->t1 - s->t0) / 1e3,
			what >= TC_SIM_COMPUTE ? "access" : "tensor", s->id);
	}
out:
	free(sp.v);
	return ret;
}

/* The model's step for the plan that runs, beside the executor's. */
static int tl_model(struct tencache_cache *c, FILE *f)
{
	struct tc_plan p = tc_exec_plan_run(c);

	return model_spans(f, &c->trace, &c->pcfg, &p);
}

/* A trace file begun: its event list, and pid 1's name (the executor's). */
static FILE *tl_open(const char *path, const char *pid1)
{
	FILE *f = fopen(path, "w");

	if (f)
		fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
			"{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"args\":{\"name\":\"%s\"}}",
			pid1);
	return f;
}

/* Ends the file tl_open began; ret, or the write's error. */
static int tl_close(FILE *f, int ret)
{
	fprintf(f, "\n]}\n");
	if (ferror(f) && !ret)
		ret = -EIO;
	if (fclose(f) && !ret)
		ret = -errno;
	return ret;
}

int tc_timeline_model_file(const char *path, const struct tc_trace *tr,
			   const struct tc_plan_cfg *cfg, const struct tc_plan *p)
{
	FILE *f = tl_open(path, "no executor (--model-only)");

	if (!f)
		return -errno;
	return tl_close(f, model_spans(f, tr, cfg, p));
}

int tencache_cache_timeline(struct tencache_cache *c, const char *path)
{
	unsigned lanes[TC_TL_NR] = { 0 };	/* tracks per kind */
	FILE *f;
	int first = 1, ret = 0;

	if (!c || !path)
		return -EINVAL;
	if (!c->timeline_on)
		return -ENODATA;
	f = tl_open(path, "executor");
	if (!f)
		return -errno;
	first = 0;
	for (uint32_t i = 0; i < c->tl_nr; i++)
		if (c->tl[i].lane >= lanes[c->tl[i].kind])
			lanes[c->tl[i].kind] = c->tl[i].lane + 1u;
	/* a track per kind and lane: "NVMe read", "NVMe read 2", ... */
	for (int k = 0; k < TC_TL_NR; k++)
		for (unsigned l = 0; l < (lanes[k] ? lanes[k] : 1); l++) {
			fprintf(f, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,"
				"\"tid\":%u,\"args\":{\"name\":\"%s", first ? "" : ",\n",
				k + 1 + TC_TL_NR * l, tl_names[k]);
			fprintf(f, l ? " %u\"}}" : "\"}}", l + 1);
			first = 0;
		}
	for (uint32_t i = 0; i < c->tl_nr; i++) {
		const struct tc_tl_span *sp = &c->tl[i];

		if (sp->ev0 || sp->t1 < sp->t0 || sp->t0 < c->step_t0)
			continue;	/* unresolved */
		fprintf(f, ",\n{\"name\":\"%s %u\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":1,"
			"\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"%s\":%u",
			sp->kind == TC_TL_COMPUTE || sp->kind == TC_TL_HOSTOP ? "op" : "tensor",
			sp->id, tl_names[sp->kind], sp->kind + 1u + TC_TL_NR * sp->lane,
			(sp->t0 - c->step_t0) / 1e3, (sp->t1 - sp->t0) / 1e3,
			sp->kind == TC_TL_COMPUTE || sp->kind == TC_TL_HOSTOP ? "access" : "tensor",
			sp->id);
		if (sp->why >= TC_TL_WHY_OP && sp->why - TC_TL_WHY_OP < TC_OP_NR)
			fprintf(f, ",\"waited for\":\"%s of tensor %u\"",
				why_ops[sp->why - TC_TL_WHY_OP], sp->why_id);
		else if (sp->why == TC_TL_WHY_HOSTOP || sp->why == TC_TL_WHY_COMPUTE)
			fprintf(f, ",\"waited for\":\"%s ending at access %u\"",
				sp->why == TC_TL_WHY_HOSTOP ? "host op" : "GPU op", sp->why_id);
		else if (sp->why == TC_TL_WHY_COPIES)
			fprintf(f, ",\"waited for\":\"copies on the GPU's streams\"");
		else if (sp->why == TC_TL_WHY_TURN)
			fprintf(f, ",\"waited for\":\"its turn on the disk\"");
		fprintf(f, "}}");
	}
	if (c->have_plan && c->planned)	/* what the model said of this step */
		ret = tl_model(c, f);
	return tl_close(f, ret);
}
