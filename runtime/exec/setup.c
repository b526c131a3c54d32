/*
 * setup.c - the tensor cache's life cycle: freezing the registered tensors
 * into memory (device region, pinned pool, NVMe swap, streams, calibration),
 * learning a profiled step, entering a plan (placement, events, the start
 * state), leaving it when the order changes, flushing and destroying.
 */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/table_file.h"

static const char *const link_names[4] = { "H2D", "D2H", "NVMe read", "NVMe write" };

/* dev: a device event; pair: two timing events used in turns (a plan's
 * copies on a GPU, read by the GPU-timeline measure) */
static int xev_init(struct tencache_cache *c, struct tc_xev *e, int dev, int pair)
{
	int ret;

	memset(e, 0, sizeof(*e));
	if (!dev)
		return 0;
	ret = c->dev->ops->event_create(c->dev, pair, &e->dev);
	if (!ret && pair)
		ret = c->dev->ops->event_create(c->dev, 1, &e->alt);
	return ret;
}

static void xev_fini(struct tencache_cache *c, struct tc_xev *e)
{
	tc_exec_bev_put(c, e->bev);
	e->bev = NULL;
	if (e->dev)
		c->dev->ops->event_destroy(c->dev, e->dev);
	if (e->alt)
		c->dev->ops->event_destroy(c->dev, e->alt);
	e->dev = e->alt = NULL;
}

/*
 * Times a copy of len bytes in each direction of dirs (bit 0 H2D, bit 1
 * D2H), all at once, into ns[dir]; the D2H one is at offset len when both
 * go, so the two touch different bytes.
 */
static int time_copies(struct tencache_cache *c, void *ev[2][2], unsigned dirs, uint64_t len,
		       uint64_t ns[2])
{
	int ret = 0;

	for (int d = 0; d < 2 && !ret; d++) {
		uint64_t off = dirs == 3 && d ? len : 0;
		char *g = (char *)c->dev->base + off, *p = c->pbase + off;
		void *s = d ? c->d2h : c->h2d;

		if (!(dirs & (1u << d)))
			continue;
		ret = c->dev->ops->record(c->dev, ev[d][0], s);
		ret = ret ?: c->dev->ops->copy(c->dev, s, d ? TENCACHE_COPY_D2H : TENCACHE_COPY_H2D,
					       d ? p : g, d ? g : p, len);
		ret = ret ?: c->dev->ops->record(c->dev, ev[d][1], s);
	}
	for (int d = 0; d < 2 && !ret; d++)
		if (dirs & (1u << d)) {
			ret = c->dev->ops->sync(c->dev, ev[d][1]);
			ret = ret ?: c->dev->ops->elapsed(c->dev, ev[d][0], ev[d][1], &ns[d]);
		}
	return ret;
}

/* One staging request of len bytes at off each on the rings given (write:
 * wr[k]), all in flight together; the wall time of the lot. */
static int time_stage(struct tencache_cache *c, struct tencache_stage **st, const int *wr,
		      const uint64_t *off, int n, uint64_t len, uint64_t *ns)
{
	uint64_t t0 = tc_now_ns();
	int ret = 0;

	for (int k = 0; k < n && !ret; k++) {
		void *buf = (char *)c->pbase + k * len;

		ret = wr[k] ? tencache_stage_write(st[k], c->nvme_fd, buf, len, off[k], 0, 0)
			    : tencache_stage_read(st[k], c->nvme_fd, buf, len, off[k], 0, 0);
		ret = ret ?: (tencache_stage_submit(st[k]) < 0 ? -EIO : 0);
	}
	for (int k = 0; k < n && !ret; k++) {
		struct tencache_stage_cqe cqe;

		if (tencache_stage_wait(st[k], 1, &cqe, 1, 0) != 1 || cqe.res < 0)
			ret = -EIO;
	}
	*ns = tc_now_ns() - t0 + 1;
	return ret;
}

#define NVME_CAL_BYTES	(256ULL << 20)	/* a swap file sample, where pool and swap allow */

/* The median of three timings of one transfer set (one sample varied by
 * up to 30% from cache to cache on the GPU machines' disks). */
static int time_stage3(struct tencache_cache *c, struct tencache_stage **st, const int *wr,
		       const uint64_t *off, int n, uint64_t len, uint64_t *ns)
{
	uint64_t v[3], lo = UINT64_MAX, hi = 0;
	int ret = 0;

	for (int k = 0; k < 3 && !ret; k++) {
		ret = time_stage(c, st, wr, off, n, len, &v[k]);
		lo = v[k] < lo ? v[k] : lo;
		hi = v[k] > hi ? v[k] : hi;
	}
	if (!ret)
		*ns = v[0] + v[1] + v[2] - lo - hi;
	return ret;
}

/*
 * The swap file's bandwidths: written first, then read back, as a fresh
 * (fallocated) file reads its unwritten ranges as zeros without touching
 * the disk; then a read and a write at once (one disk serves both: on a
 * shared or virtual disk they add up to less than the two apart), unless
 * that rate is given (duplex_bw[1]). Each the median of three.
 */
static int calibrate_nvme(struct tencache_cache *c, uint64_t len)
{
	struct tencache_stage *st[2] = { c->wstage, c->stage };
	uint64_t off[2] = { 0, 0 }, ns = 0, half;
	static const int wr[2] = { 1, 0 }, rd[1] = { 0 };
	int ret = 0;

	if (c->swap && c->p.duplex_bw[1] > 0)
		c->nvme_duplex_bw = c->p.duplex_bw[1];
	if (!c->swap || (c->p.bw[2] > 0 && c->p.bw[3] > 0)) {
		for (int l = 2; l < 4; l++)
			c->bw[l] = c->p.bw[l] > 0 ? c->p.bw[l] : 5e9;
		return 0;
	}
	if (len > c->p.nvme_budget)
		len = c->p.nvme_budget & ~4095ULL;
	half = len / 2 & ~4095ULL;
	if (!len)
		return -EINVAL;
	/* the first write makes the range real; the next are timed */
	ret = time_stage(c, st, wr, off, 1, len, &ns);
	ret = ret ?: time_stage3(c, st, wr, off, 1, len, &ns);
	if (!ret)
		c->bw[3] = c->p.bw[3] > 0 ? c->p.bw[3] : len * 1e9 / ns;
	ret = ret ?: time_stage3(c, st + 1, rd, off, 1, len, &ns);
	if (!ret)
		c->bw[2] = c->p.bw[2] > 0 ? c->p.bw[2] : len * 1e9 / ns;
	/* a write of one half while the other is read back */
	off[1] = half;
	if (!ret && half && !(c->p.bw[2] > 0) && !(c->p.bw[3] > 0) && !(c->p.duplex_bw[1] > 0)) {
		ret = time_stage3(c, st, wr, off, 2, half, &ns);
		if (!ret)
			c->nvme_duplex_bw = 2.0 * half * 1e9 / ns;
	}
	return ret;
}

/*
 * Link bandwidths: given, or measured with one 32 MiB transfer each way,
 * then both ways at once (PCIe moves less than the two together). The swap
 * file's: the median of three of NVME_CAL_BYTES each; 32 MiB read up to
 * 35% below and far less steadily than 256 MiB on a virtual disk (a
 * request's fixed costs weigh more).
 */
static int calibrate(struct tencache_cache *c, uint64_t pool_bytes)
{
	uint64_t len = 32ULL << 20, ns[2] = { 0, 0 };
	void *ev[2][2] = { { NULL, NULL }, { NULL, NULL } };
	int ret = 0;

	if (len > pool_bytes)
		len = pool_bytes;
	if (len > c->dev->bytes)
		len = c->dev->bytes;
	len &= ~4095ULL;
	for (int k = 0; k < 4 && !ret; k++)
		ret = c->dev->ops->event_create(c->dev, 1, &ev[k / 2][k % 2]);
	for (int dir = 0; dir < 2 && !ret && len; dir++) {
		if (c->p.bw[dir] > 0) {
			c->bw[dir] = c->p.bw[dir];
			continue;
		}
		for (int rep = 0; rep < 2 && !ret; rep++)	/* the first warms up */
			ret = time_copies(c, ev, 1u << dir, len, ns);
		if (!ret)
			c->bw[dir] = ns[dir] ? len * 1e9 / ns[dir] : 1e12;
	}
	if (c->p.duplex_bw[0] > 0) {
		c->duplex_bw = c->p.duplex_bw[0];
	} else if (!ret && len >= 2 * 4096 && !(c->p.bw[0] > 0) && !(c->p.bw[1] > 0)) {
		uint64_t half = len / 2 & ~4095ULL, slow;

		ret = time_copies(c, ev, 3, half, ns);
		slow = ns[0] > ns[1] ? ns[0] : ns[1];
		if (!ret && slow)
			c->duplex_bw = 2.0 * half * 1e9 / slow;
	}
	if (!ret)
		ret = calibrate_nvme(c, (pool_bytes < NVME_CAL_BYTES ? pool_bytes : NVME_CAL_BYTES) &
				    ~4095ULL);
	for (int k = 0; k < 4; k++)
		if (ev[k / 2][k % 2])
			c->dev->ops->event_destroy(c->dev, ev[k / 2][k % 2]);
	if (!ret && c->duplex_bw > 0)
		tc_info(c->tc, "cache: H2D + D2H at once %.1f GB/s (%s)", c->duplex_bw / 1e9,
			c->p.duplex_bw[0] > 0 ? "given" : "measured");
	if (!ret && c->nvme_duplex_bw > 0)
		tc_info(c->tc, "cache: NVMe read + write at once %.1f GB/s (%s)",
			c->nvme_duplex_bw / 1e9, c->p.duplex_bw[1] > 0 ? "given" : "measured");
	for (int l = 0; l < 4 && !ret; l++)
		tc_info(c->tc, "cache: %s %.1f GB/s (%s)", link_names[l], c->bw[l] / 1e9,
			c->p.bw[l] > 0 ? "given" : l >= 2 && !c->swap ? "no NVMe tier: unused" :
			"measured");
	return ret;
}

/* The signature of the registered tensors (table_file.h). */
static int tensors_signature(struct tencache_cache *c, uint64_t *sig)
{
	struct tc_trace tr;
	int ret = tc_trace_init(&tr);

	for (uint32_t i = 0; i < c->nr && !ret; i++)
		ret = tc_trace_add_tensor(&tr, c->t[i].bytes, c->t[i].role) < 0 ? -ENOMEM : 0;
	if (!ret)
		*sig = tc_table_signature(&tr);
	tc_trace_free(&tr);
	return ret;
}

/*
 * table_path: a step learnt by an earlier run with the same tensors is the
 * learnt step now, so the first step runs from a plan. Any other file is
 * ignored with a line saying why: the warm-up profiles as usual and the
 * learnt step replaces it.
 */
static void table_load(struct tencache_cache *c)
{
	const char *path = c->p.table_path;
	struct tc_trace tr;
	uint64_t sig;
	int ret;

	if (tensors_signature(c, &sig) || tc_trace_init(&tr))
		return;
	ret = tc_table_load(path, sig, &tr);
	switch (ret) {
	case 0:
		tc_trace_free(&c->trace);
		c->trace = tr;
		c->od_max_op = tc_trace_max_op_span(&c->trace, TC_GPU_ALIGN);
		c->ours_no_layout = 0;
		c->want_plan = 1;
		c->profiled = c->p.warmup_steps;
		c->st.table_loads++;
		tc_info(c->tc, "cache: learnt step loaded from %s (%u accesses): no profiling warm-up",
			path, c->trace.nr_acc);
		return;
	case -ENOENT:
		tc_info(c->tc, "cache: no learnt step at %s yet: profiling, then saving it there", path);
		break;
	case -ESTALE:
		tc_warn(c->tc, "cache: %s was learnt with other tensors (signature differs): profiling again; it will be replaced",
			path);
		break;
	case -EINVAL:
		tc_warn(c->tc, "cache: %s is not a tencache table of this version or is damaged: ignored, profiling again; it will be replaced",
			path);
		break;
	default:
		tc_warn(c->tc, "cache: cannot read %s (%s): profiling again", path, strerror(-ret));
	}
	tc_trace_free(&tr);
}

int tc_exec_freeze(struct tencache_cache *c)
{
	uint64_t maxb = 0, sum = 0, pool_bytes;
	struct tencache_pool_info pi;
	char b1[32], b2[32];
	int ret;

	if (c->frozen)
		return 0;
	if (!c->nr) {
		tc_err(c->tc, "cache: no tensors registered");
		return -EINVAL;
	}
	for (uint32_t i = 0; i < c->nr; i++) {
		if (c->t[i].bytes > maxb)
			maxb = c->t[i].bytes;
		sum += TC_ALIGN_UP(c->t[i].bytes, 4096);
	}
	c->host_mode = !!(c->p.flags & TENCACHE_CACHE_HOST_MODE);
	if (!c->host_mode && tencache_cuda_available(c->tc)) {
		tc_err(c->tc, "cache: no usable CUDA GPU; pass TENCACHE_CACHE_HOST_MODE for the CPU-only mode");
		return -ENODEV;
	}
	c->timeline_on = !!(c->p.flags & TENCACHE_CACHE_TIMELINE);
	ret = (c->host_mode ? &tc_dev_host_ops : &tc_dev_cuda_ops)->open(c->tc,
				c->p.gpu_budget, &c->dev);
	if (ret)
		return ret;
	if (c->p.flags & TENCACHE_CACHE_ISSUER) {
		ret = tc_dev_issuer_wrap(&c->dev);
		if (ret)
			goto fail;
	}
	ret = tencache_arena_create(&c->garena, c->p.gpu_budget, TC_GPU_ALIGN, NULL, 0);
	if (!ret)
		tencache_arena_set_high(c->garena, c->p.gpu_budget / 16);
	if (ret)
		goto fail;
	pool_bytes = c->p.nvme_budget ? c->p.pinned_budget + maxb : sum;
	pool_bytes = TC_ALIGN_UP(pool_bytes + TC_2M, TC_2M);
	ret = tencache_pool_create(c->tc, &c->pool, pool_bytes, NULL, 0);
	if (ret)
		goto fail;
	ret = tencache_pool_info(c->pool, &pi);
	if (ret)
		goto fail;
	c->pbase = pi.base;
	if (!c->host_mode) {
		ret = tencache_pool_cuda_register(c->pool);
		if (ret)
			goto fail;
	}
	if (c->p.nvme_budget) {
		ret = tencache_swap_create(c->tc, &c->swap, c->p.nvme_path, c->p.nvme_budget,
					   NULL, 0);
		ret = ret ?: tencache_stage_create(c->tc, c->pool, &c->stage);
		ret = ret ?: tencache_stage_create(c->tc, c->pool, &c->wstage);
		if (ret)
			goto fail;
		c->nvme_fd = tencache_swap_fd(c->swap);
	}
	if (c->p.nvme_budget) {
		ret = c->dev->ops->stream_create(c->dev, &c->sstream);
		if (ret)
			goto fail;
	}
	ret = c->dev->ops->stream_create(c->dev, &c->h2d);
	ret = ret ?: c->dev->ops->stream_create(c->dev, &c->d2h);
	ret = ret ?: c->dev->ops->stream_create(c->dev, &c->rstream);
	/* gated copies' own stream: only where host ops run in order */
	if (c->p.flags & TENCACHE_CACHE_DETACH_FIFO)
		ret = ret ?: c->dev->ops->stream_create(c->dev, &c->gstream);
	/* test only: a compute stream of the host backend's own, which the
	 * issuer, if any, treats as a caller's stream, as a GPU's is */
	if (!ret && c->lag_on)
		ret = tc_dev_host_ops.stream_create(c->dev->hdev, &c->lag_s);
	ret = ret ?: c->dev->ops->event_create(c->dev, 1, &c->step_ev);
	if (ret)
		goto fail;
	ret = calibrate(c, pool_bytes);
	if (ret)
		goto fail;
	/* as the timing model has it (sim.c): a disk that moves no more both
	 * ways at once than in turn gets its reads and writes in turn */
	c->disk_dir = c->disk_last = -1;
	c->disk_turns = c->swap && tc_disk_takes_turns(c->bw[2], c->bw[3], c->nvme_duplex_bw);
	if (c->disk_turns)
		tc_info(c->tc, "cache: NVMe reads and writes take turns: %.1f GB/s both at once is no more than %.1f in turn",
			c->nvme_duplex_bw / 1e9, tc_disk_turns_rate(c->bw[2], c->bw[3]) / 1e9);
	for (uint32_t i = 0; i < c->nr && !ret; i++)
		ret = xev_init(c, &c->t[i].ready, 1, 0);
	c->pfreed.pinned = 1;
	if (ret)
		goto fail;
	if (c->swap) {
		ret = pthread_create(&c->sthread[0], NULL, tc_exec_stage_reader, c) ? -EAGAIN : 0;
		if (ret)
			goto fail;
		c->sthread_on = 1;
		ret = pthread_create(&c->sthread[1], NULL, tc_exec_stage_writer, c) ? -EAGAIN : 0;
		if (ret)
			goto fail;
		c->sthread_on = 2;
		ret = pthread_create(&c->sthread[2], NULL, tc_exec_settler, c) ? -EAGAIN : 0;
		if (ret)
			goto fail;
		c->sthread_on = 3;
	}
	/* without NVMe every tensor lives in pinned memory, zero at first:
	 * allocated in order, then zeroed at once by several threads */
	if (!c->swap) {
		uint64_t lo = UINT64_MAX, hi = 0;

		for (uint32_t i = 0; i < c->nr; i++) {
			struct tc_tstate *t = &c->t[i];

			t->pinned_home = 1;
			ret = tc_exec_palloc(c, i);
			if (ret)
				goto fail;
			t->valid |= TC_V_PINNED;
			if ((uint64_t)t->poff < lo)
				lo = t->poff;
			if (t->poff + t->bytes > hi)
				hi = t->poff + t->bytes;
		}
		if (hi > lo)
			tc_par_zero(c->pbase + lo, hi - lo);
	}
	tc_trace_init(&c->rec);
	tc_trace_init(&c->trace);
	c->frozen = 1;
	tc_fmt_bytes(b1, sizeof(b1), sum);
	tc_fmt_bytes(b2, sizeof(b2), c->p.gpu_budget);
	tc_info(c->tc, "cache: %u tensors, %s; GPU budget %s; %s mode%s; profiling %u step(s)",
		c->nr, b1, b2, c->host_mode ? "host" : "cuda",
		(c->p.flags & TENCACHE_CACHE_ISSUER) ? ", copies issued by a thread" : "",
		c->p.warmup_steps);
	if (c->p.table_path)
		table_load(c);
	return 0;
fail:
	tc_err(c->tc, "cache: setup failed: %s", strerror(-ret));
	return ret;
}

int tc_exec_learn(struct tencache_cache *c)
{
	struct tc_trace tmp;
	int ret;

	if (c->skip_learn)
		return 0;
	ret = tc_trace_validate(&c->rec);
	if (ret < 0) {
		tc_warn(c->tc, "cache: the profiled step is not usable (%s); staying on demand",
			strerror(-ret));
		c->profiled = 0;
		return 0;
	}
	tmp = c->trace;		/* the learnt step is the recorded one */
	c->trace = c->rec;
	c->rec = tmp;
	c->od_max_op = tc_trace_max_op_span(&c->trace, TC_GPU_ALIGN);
	c->trial = TC_TRIAL_NONE;	/* a new order: new plans to time */
	c->ours_no_layout = 0;
	c->nr_pcut = 0;			/* cut over the old order's accesses */
	c->want_plan = 1;
	if (c->p.table_path) {	/* a failed save costs only the next run's warm-up */
		uint64_t sig = tc_table_signature(&c->trace);

		ret = tc_table_save(c->p.table_path, sig, &c->trace);
		if (ret)
			tc_warn(c->tc, "cache: cannot save the learnt step to %s (%s); the next run profiles again",
				c->p.table_path, strerror(-ret));
		else
			c->st.table_saves++;
	}
	return 0;
}

static void free_plan_events(struct tencache_cache *c)
{
	tc_exec_wait_detached(c);	/* they signal these events */
	free(c->op_goff);
	free(c->start_goff);
	free(c->op_poff);
	free(c->start_poff);
	c->op_goff = c->start_goff = c->op_poff = c->start_poff = NULL;
	free(c->pcapv);
	c->pcapv = NULL;
	c->pcfg.pinned_cap = NULL;
	for (uint32_t k = 0; c->opev && k < c->plan.nr_ops; k++)
		xev_fini(c, &c->opev[k]);
	for (uint32_t i = 0; c->accev && i < c->nacc_ev; i++)
		xev_fini(c, &c->accev[i]);
	tc_exec_sorder_forget(c);	/* stream order must not point at them */
	free(c->opev);
	free(c->accev);
	c->opev = c->accev = NULL;
	c->nacc_ev = 0;
	if (c->hev_words)	/* no stream waits on them: the plan was left */
		c->dev->ops->hev_unmap(c->dev, c->hev_words);
	c->hev_words = NULL;
}

/*
 * Replay the plan's GPU allocations (start state in tensor order, then laps
 * of FETCH/ALLOC and DROP in table order) on an arena like the real one: 1
 * if they all fit, 0 when fragmentation defeats the byte budget. A lap that
 * ends with every tensor at the offset it had after the previous lap proves
 * the steady state (the arena is a function of what it holds); a best-fit
 * arena can drift for several laps first, so up to FITS_LAPS are tried. A
 * later step that still fragments makes the executor leave the plan and
 * plan again with more room (cache.c).
 */
#define FITS_LAPS	64
static int gpu_fits(struct tencache_cache *c, const struct tc_plan *pl,
		    const struct tencache_size_count *hist, unsigned nr_hist)
{
	int64_t *off = malloc(2 * c->nr * sizeof(*off)), *prev = off + c->nr;
	struct tencache_arena *a;
	int fits = 1;

	if (!off)
		return -ENOMEM;
	if (tencache_arena_create(&a, c->p.gpu_budget, TC_GPU_ALIGN, hist, nr_hist)) {
		free(off);
		return 0;	/* the slabs alone do not fit */
	}
	tencache_arena_set_high(a, c->p.gpu_budget / 16);
	for (uint32_t i = 0; i < c->nr; i++) {
		uint64_t o;

		off[i] = -1;
		if ((pl->start_gpu[i] & 1) && fits) {
			fits = !tencache_arena_alloc(a, c->t[i].bytes, &o);
			off[i] = o;
		}
	}
	for (int lap = 0; lap < FITS_LAPS && fits; lap++) {
		if (lap) {
			if (!memcmp(prev, off, c->nr * sizeof(*off)))
				break;	/* periodic: every later lap is this one */
		}
		memcpy(prev, off, c->nr * sizeof(*off));
		for (uint32_t k = 0; k < pl->nr_ops && fits; k++) {
			const struct tc_op *op = &pl->ops[k];
			uint64_t o;

			if ((op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC) && off[op->tensor] < 0) {
				fits = !tencache_arena_alloc(a, c->t[op->tensor].bytes, &o);
				off[op->tensor] = o;
			} else if (op->kind == TC_OP_DROP && off[op->tensor] >= 0) {
				tencache_arena_free(a, off[op->tensor]);
				off[op->tensor] = -1;
			}
		}
	}
	tencache_arena_destroy(a);
	free(off);
	return fits;
}

/*
 * A static GPU layout, for plans whose allocations fragment the arena when it
 * places them as they come (gpu_fits). Every residency of a tensor on the GPU
 * (FETCH or ALLOC to DROP, on the step's circle: one resident across the
 * step's end continues into the next step's start set) gets an offset,
 * biggest first, at the lowest address free in every residency it overlaps
 * in time (greedy by size). 1 when they fit the budget (c->op_goff and
 * c->start_goff set), 0 when not, -ENOMEM.
 */
struct tc_res {
	uint64_t s, e;		/* on the circle: 0 <= s < T, s < e <= s + T */
	uint64_t e2;		/* e, or later: where its space is free in fact
				 * (its last users done, in the timing model) */
	uint64_t len, off;
	uint32_t tensor;
	int dead;		/* a start residency merged into the step's last */
	int fixed;		/* placed already (pinned for good): off is its own */
};

/* a and b overlap in time: up to their ends e, or (soft) e2 */
static int res_overlap(const struct tc_res *a, const struct tc_res *b, uint64_t T, bool soft)
{
	int64_t ae = (int64_t)(soft ? a->e2 : a->e);

	for (int k = -1; k <= 1; k++) {
		int64_t bs = (int64_t)b->s + k * (int64_t)T;
		int64_t be = (int64_t)(soft ? b->e2 : b->e) + k * (int64_t)T;

		if ((int64_t)a->s < be && bs < ae)
			return 1;
	}
	return 0;
}

static int res_by_size(const void *x, const void *y, void *arg)
{
	const struct tc_res *r = arg;
	const struct tc_res *a = &r[*(const uint32_t *)x], *b = &r[*(const uint32_t *)y];

	if (a->fixed != b->fixed)
		return a->fixed ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	if (a->e - a->s != b->e - b->s)
		return a->e - a->s > b->e - b->s ? -1 : 1;
	return a->s < b->s ? -1 : a->s > b->s;
}

static int u64_first_cmp(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y;

	return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Where len fits among the busy (offset, length, soft) triples, sorted by
 * offset: the lowest offset (first fit) or the smallest gap (best fit);
 * soft ones count only with soft. */
static uint64_t fit_at(const uint64_t *busy, uint32_t nb, uint64_t len, bool best, bool soft)
{
	uint64_t at = 0, end = 0, gap = UINT64_MAX;

	for (uint32_t b = 0; b <= nb; b++) {
		uint64_t next = b < nb ? busy[3 * b] : UINT64_MAX;

		if (b < nb && busy[3 * b + 2] && !soft)
			continue;
		if (!best) {
			if (next >= at + len)
				return at;
			if (busy[3 * b] + busy[3 * b + 1] > at)
				at = busy[3 * b] + busy[3 * b + 1];
			continue;
		}
		/* each gap from the busy end so far to the next start */
		if (next > end && next - end >= len && next - end < gap) {
			gap = next - end;
			at = end;
		}
		if (b < nb && busy[3 * b] + busy[3 * b + 1] > end)
			end = busy[3 * b] + busy[3 * b + 1];
	}
	return at;
}

/* Where a layout failed: a residency's access window and the bytes over. */
struct place_fail {
	uint32_t from, to;	/* accesses, from..to (to < from: it wraps) */
	uint64_t over;
};

/* Equal sizes in time order (start, then the longer first). */
static int res_by_start(const void *x, const void *y, void *arg)
{
	const struct tc_res *r = arg;
	const struct tc_res *a = &r[*(const uint32_t *)x], *b = &r[*(const uint32_t *)y];

	if (a->fixed != b->fixed)
		return a->fixed ? -1 : 1;
	if (a->len != b->len)
		return a->len > b->len ? -1 : 1;
	if (a->s != b->s)
		return a->s < b->s ? -1 : 1;
	return a->e - a->s > b->e - b->s ? -1 : a->e - a->s < b->e - b->s;
}

/* Most bytes x time first (then in time order). */
static int res_by_area(const void *x, const void *y, void *arg)
{
	const struct tc_res *r = arg;
	const struct tc_res *a = &r[*(const uint32_t *)x], *b = &r[*(const uint32_t *)y];
	double aa = (double)a->len * (a->e - a->s), ab = (double)b->len * (b->e - b->s);

	if (a->fixed != b->fixed)
		return a->fixed ? -1 : 1;
	if (aa != ab)
		return aa > ab ? -1 : 1;
	return a->s < b->s ? -1 : a->s > b->s;
}

/*
 * The residencies in order, each at the lowest offset free of those placed
 * before it that overlap it in time (first fit), or in the smallest such
 * gap that holds it (best fit); fixed ones come first and keep theirs.
 * Returns the height they reach (past cap: at the first one past it, unless
 * whole); pf[0..*npf) says where the first (at most max_pf) past cap lie.
 */
static uint64_t place_order(const struct tc_plan *pl, struct tc_res *r, uint32_t nres,
			    const uint32_t *order, uint64_t *busy, uint64_t T, uint64_t cap,
			    bool best, bool whole, struct place_fail *pf, uint32_t max_pf,
			    uint32_t *npf, uint32_t *soft)
{
	uint64_t height = 0;

	*npf = 0;

	soft[0] = soft[1] = 0;
	for (uint32_t n = 0; n < nres; n++) {
		struct tc_res *x = &r[order[n]];
		uint32_t nb = 0, nsoft = 0;
		uint64_t at;

		if (x->fixed && !x->dead && x->off + x->len > height)
			height = x->off + x->len;

		if (x->dead || x->fixed)
			continue;
		for (uint32_t m = 0; m < n; m++) {
			const struct tc_res *y = &r[order[m]];
			int hard = !y->dead && res_overlap(x, y, T, false);

			if (hard || (!y->dead && res_overlap(x, y, T, true))) {
				busy[3 * nb] = y->off;
				busy[3 * nb + 1] = y->len;
				busy[3 * nb++ + 2] = !hard;
				nsoft += !hard;
			}
		}
		qsort(busy, nb, 3 * sizeof(*busy), u64_first_cmp);
		/* clear of the ranges still in use in fact, where that fits */
		at = fit_at(busy, nb, x->len, best, nsoft > 0);
		if (nsoft && at + x->len > cap)
			at = fit_at(busy, nb, x->len, best, false);
		x->off = at;
		if (nsoft) {	/* soft[0]: had such ranges; soft[1]: lies over one */
			soft[0]++;
			for (uint32_t b = 0; b < nb; b++)
				if (busy[3 * b + 2] && busy[3 * b] < at + x->len &&
				    at < busy[3 * b] + busy[3 * b + 1]) {
					soft[1]++;
					break;
				}
		}
		if (at + x->len > height)
			height = at + x->len;
		if (at + x->len > cap && max_pf) {	/* op k is at time k + 1, the step's start at 0 */
			uint64_t s0 = x->s % T, e0 = x->e % T;

			pf->from = s0 ? pl->ops[s0 - 1].pos : 0;
			pf->to = e0 ? pl->ops[e0 - 1].pos : pl->nr_acc - 1;
			pf->over = at + x->len - cap;
			pf++;
			max_pf--;
			++*npf;
		}
		if (height > cap && !whole)
			break;
	}
	return height;
}

/* What a tier's residencies are made of, for lay_out. */
struct tier_layout {
	const uint8_t *start;		/* per tensor: bit0 resident at the start */
	uint8_t open[2], close;		/* op kinds that begin / end a residency */
	int pinned;			/* values pinned for good keep their place */
	int thorough;			/* try more orders, and best fit */
	uint64_t align, cap;
	/* per op, optional: where a residency that op closes ends (at least
	 * the op's own k + 1: later while its last users run on) */
	const uint64_t *close_at;
	/* out, optional: of the layout made, the residencies that met ranges
	 * still in use (close_at), and those placed over one all the same */
	uint32_t *soft;
	/* optional: lay_out's pf holds max_fail places, and *nfail says how
	 * many of them the first order filled: every residency it placed
	 * past cap (placing them all), not only the first */
	uint32_t max_fail, *nfail;
};

/* The orders lay_out tries, the last four only where thorough. Best fit and
 * the area order each pack some of OPT-13B's pinned plans ~1% lower than
 * the first two (tests/tools/replay_nvme_room.sh). */
static const struct {
	int (*cmp)(const void *, const void *, void *);
	bool best;
} lay_passes[] = {
	{ res_by_size, false }, { res_by_start, false }, { res_by_area, false },
	{ res_by_size, true }, { res_by_start, true }, { res_by_area, true },
};

/*
 * Every residency of a tier (a tensor's from an op that opens it to one that
 * closes it, on the step's circle: one resident across the step's end
 * continues into the next step's start set) gets an offset below cap, by
 * first fit in size order (two orders tried; six with best fit where
 * thorough). 1 with *op_off (per op: its offset where it opens a residency,
 * else -1) and *start_off (per tensor: its offset in the start set, else
 * -1) set; 0 when they do not fit (*height, if given: the least height the
 * orders reached), or the plan's ops do not pair up; -ENOMEM.
 */
static int lay_out(struct tencache_cache *c, const struct tc_plan *pl,
		   const struct tier_layout *tl, int64_t **op_off, int64_t **start_off,
		   struct place_fail *pf, uint64_t *height)
{
	uint64_t T = (uint64_t)pl->nr_ops + 1;	/* the start set at 0, op k at k + 1 */
	uint32_t nres = 0, *order = NULL, *op_res = NULL;
	int32_t *open = NULL, *startres = NULL;
	int64_t *oo = NULL, *so = NULL;
	uint64_t *busy = NULL;
	struct tc_res *r = NULL;
	int fits = 0, placed = 0, ret = -ENOMEM;
	uint32_t soft_tmp[2], *soft = tl->soft ? tl->soft : soft_tmp;

	r = calloc((size_t)c->nr + pl->nr_ops + 1, sizeof(*r));
	op_res = malloc(((size_t)pl->nr_ops + 1) * sizeof(*op_res));
	open = malloc(c->nr * sizeof(*open));
	startres = malloc(c->nr * sizeof(*startres));
	if (!r || !op_res || !open || !startres)
		goto out;
	ret = 0;
	for (uint32_t t = 0; t < c->nr; t++) {
		open[t] = startres[t] = -1;
		if (tl->pinned && c->t[t].pinned_home) {	/* there all along */
			if (c->t[t].poff < 0)
				goto out;
			r[nres++] = (struct tc_res){ .s = 0, .e = T, .e2 = T, .tensor = t, .fixed = 1,
						     .off = (uint64_t)c->t[t].poff };
		} else if (tl->start[t] & 1) {
			r[nres] = (struct tc_res){ .s = 0, .tensor = t };
			open[t] = startres[t] = (int32_t)nres++;
		}
	}
	for (uint32_t k = 0; k < pl->nr_ops; k++) {
		const struct tc_op *op = &pl->ops[k];
		uint32_t t = op->tensor;

		op_res[k] = UINT32_MAX;
		if (tl->pinned && c->t[t].pinned_home)
			continue;
		if (op->kind == tl->open[0] || op->kind == tl->open[1]) {
			if (open[t] >= 0)
				goto out;	/* not a checked plan */
			r[nres] = (struct tc_res){ .s = k + 1, .tensor = t };
			op_res[k] = nres;
			open[t] = (int32_t)nres++;
		} else if (op->kind == tl->close) {
			if (open[t] < 0)
				goto out;
			r[open[t]].e = k + 1;
			r[open[t]].e2 = tl->close_at ? tl->close_at[k] : k + 1;
			open[t] = -1;
		}
	}
	for (uint32_t t = 0; t < c->nr; t++) {
		if (open[t] < 0) {
			if (startres[t] >= 0)
				goto out;	/* not periodic */
			continue;
		}
		if (startres[t] < 0)
			goto out;
		if (open[t] == startres[t]) {
			r[open[t]].e = r[open[t]].e2 = T;	/* resident all step */
		} else {
			r[open[t]].e = T + r[startres[t]].e;
			r[open[t]].e2 = T + r[startres[t]].e2;
			r[startres[t]].dead = 1;
		}
	}
	for (uint32_t i = 0; i < nres; i++) {
		r[i].len = TC_ALIGN_UP(c->t[r[i].tensor].bytes, tl->align);
		if (tl->pinned && !r[i].fixed)	/* tc_exec_test_pinned_pad */
			r[i].len += c->test_pinned_pad;
		if (r[i].e2 < r[i].e)
			r[i].e2 = r[i].e;
		if (r[i].e2 > r[i].s + T)
			r[i].e2 = r[i].s + T;
	}
	order = malloc(nres * sizeof(*order));
	busy = malloc(3 * (size_t)nres * sizeof(*busy));
	if (!order || !busy) {
		ret = -ENOMEM;
		goto out;
	}
	/* largest first; equal sizes longest-lived first, else in time order
	 * (the second packs a saturated plan ~2% tighter on some traces) */
	for (unsigned pass = 0; pass < (tl->thorough ? 6 : 2) && !placed; pass++) {
		struct place_fail pp = { 0 };
		bool many = pf && tl->nfail && !pass;
		uint32_t n;
		uint64_t h;

		for (uint32_t i = 0; i < nres; i++)
			order[i] = i;
		qsort_r(order, nres, sizeof(*order), lay_passes[pass].cmp, r);
		/* pf: the first order's, or with height the lowest one's */
		h = place_order(pl, r, nres, order, busy, T, tl->cap, lay_passes[pass].best,
				height != NULL || many, many ? pf : &pp,
				many ? tl->max_fail : pf && (height || !pass), &n, soft);
		placed = h <= tl->cap;
		if (many)
			*tl->nfail = n;
		else if (pf && (!pass || (height && h < *height)))
			*pf = pp;
		if (height && (!pass || h < *height))
			*height = h;
	}
	if (!placed)
		goto out;	/* ret 0: does not fit */
	oo = malloc(((size_t)pl->nr_ops + 1) * sizeof(*oo));
	so = malloc(((size_t)c->nr + 1) * sizeof(*so));
	if (!oo || !so) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < pl->nr_ops; k++)
		oo[k] = op_res[k] == UINT32_MAX ? -1 : (int64_t)r[op_res[k]].off;
	for (uint32_t t = 0; t < c->nr; t++) {
		so[t] = -1;
		if (startres[t] >= 0)	/* merged: the step's last residency's place */
			so[t] = (int64_t)r[r[startres[t]].dead ? open[t] : startres[t]].off;
	}
	*op_off = oo;
	*start_off = so;
	oo = so = NULL;
	fits = 1;
out:
	free(oo);
	free(so);
	free(r);
	free(op_res);
	free(open);
	free(startres);
	free(order);
	free(busy);
	return ret < 0 ? ret : fits;
}

/* The GPU arena's layout (c->op_goff, c->start_goff); with nfail, pf holds
 * max_fail places (tier_layout.nfail). */
static int plan_place(struct tencache_cache *c, const struct tc_plan *pl, struct place_fail *pf,
		      uint32_t max_fail, uint32_t *nfail)
{
	const struct tier_layout tl = {
		.start = pl->start_gpu, .open = { TC_OP_FETCH, TC_OP_ALLOC },
		.close = TC_OP_DROP, .align = 256, .cap = c->p.gpu_budget,
		.max_fail = max_fail, .nfail = nfail,
	};

	return lay_out(c, pl, &tl, &c->op_goff, &c->start_goff, pf, NULL);
}

/*
 * Where each PDROP's range is free in fact, for the pinned layout: the plan
 * frees a range when the host issues its PDROP, but the space is free only
 * once its last users are done (a detached CPU Adam may run on for tens of
 * ms), and a read laid out there waits for them while the timing model,
 * which counts bytes, had it start at once into other free space: on the
 * development VM such waits idled the disk 29 of 65 ms a step (the
 * timeline's NVMe waits against the model's step). From the model's last
 * step: close_at[k] = j + 1 for the first op j the host issues once PDROP
 * k's users are done (the step's end if none), else k + 1. The layout puts
 * each range clear of those until then where that fits (tc_res.e2). NULL
 * where the model cannot run or memory is short.
 */
static uint64_t *pinned_close_at(struct tencache_cache *c)
{
	uint32_t n = c->plan.nr_ops;
	int64_t *iss = malloc((n ? n : 1) * sizeof(*iss)), *done = malloc((n ? n : 1) * sizeof(*done));
	uint64_t *at = malloc((n ? n : 1) * sizeof(*at));
	struct tc_sim_spans sp = { .op_issue = iss, .op_done = done };
	struct tc_plan p = tc_exec_plan_run(c);
	struct tc_sim_result sr;

	if (!iss || !done || !at || tc_sim_run_spans(&c->trace, &c->pcfg, &p, 3, &sr, &sp)) {
		free(at);
		at = NULL;
		goto out;
	}
	/* issue times do not decrease along the ops: the first at or past a
	 * time by bisection */
	for (uint32_t k = 0; k < n; k++) {
		uint32_t lo = k + 1, hi = n;

		at[k] = k + 1;
		if (c->plan.ops[k].kind != TC_OP_PDROP)
			continue;
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;

			if (iss[mid] >= done[k])
				hi = mid;
			else
				lo = mid + 1;
		}
		at[k] = (uint64_t)lo + 1 > n + 1 ? n + 1 : (uint64_t)lo + 1;
		if (at[k] < k + 1)
			at[k] = k + 1;
	}
out:
	free(sp.v);
	free(iss);
	free(done);
	return at;
}

/*
 * The pinned pool's layout for a plan with an NVMe tier (c->op_poff,
 * c->start_poff), made once the values pinned for good have their places:
 * the staged values' ranges come and go around them, and best fit as they
 * come fragmented the pool at OPT-13B's sizes (1 GiB embeddings among
 * 100-400 MiB layer tensors): the plan stopped mid-step and planned again
 * with room, step after step. Within the whole pool (the budget and the
 * largest tensor's room). 1: laid out; 0: they do not fit; -ENOENT: not
 * tried (no NVMe tier, or a layout failed before); -ENOMEM. Else best fit
 * places them as they come.
 */
static int pinned_place(struct tencache_cache *c)
{
	struct tencache_pool_info pi;
	struct tier_layout tl = {
		.start = c->plan.start_pinned, .open = { TC_OP_STAGE_IN, TC_OP_PALLOC },
		.close = TC_OP_PDROP, .pinned = 1, .thorough = 1, .align = 4096,
	};
	uint64_t h = 0, *close_at;
	uint32_t soft[2] = { 0, 0 };
	struct place_fail pf = { 0 };
	int ret;

	free(c->op_poff);
	free(c->start_poff);
	c->op_poff = c->start_poff = NULL;
	c->pinned_over = 0;
	c->pover_from = c->pover_to = 0;
	c->pover = 0;
	if (!c->swap || c->playout_failed || tencache_pool_info(c->pool, &pi))
		return -ENOENT;
	tl.cap = pi.size;
	/* each range, where it fits, clear of those whose last users run on
	 * in the model; where the whole does not fit so, as before */
	close_at = pinned_close_at(c);
	tl.close_at = close_at;
	tl.soft = soft;
	ret = close_at ? lay_out(c, &c->plan, &tl, &c->op_poff, &c->start_poff, NULL, &h) : 0;
	if (!ret) {
		tl.close_at = NULL;
		ret = lay_out(c, &c->plan, &tl, &c->op_poff, &c->start_poff, &pf, &h);
	}
	free(close_at);
	c->pin_soft[0] = ret > 0 && tl.close_at ? soft[0] : 0;
	c->pin_soft[1] = ret > 0 && tl.close_at ? soft[1] : 0;
	if (ret > 0 && c->test_place_fail && !--c->test_place_fail)
		ret = 0;	/* tc_exec_test_place_fail */
	/* how far past the pool they reach: what the next plan keeps out */
	if (!ret && h > tl.cap) {
		c->pinned_over = h - tl.cap;
		if (pf.over) {	/* where the lowest order first reached past it */
			c->pover_from = pf.from;
			c->pover_to = pf.to;
			c->pover = pf.over;
		}
	}
	if (ret > 0) {
		c->st.pinned_layouts++;
		tc_info(c->tc, "cache: the plan's pinned ranges laid out ahead%s",
			tl.close_at ? ", where they fit clear of ranges whose last users run on" : "");
	}
	return ret;
}

/*
 * Size classes for the GPU arena: every size of at least 1/16 of the budget
 * gets a slab of as many slots as the plan ever holds of it at once, so the
 * big tensors never fragment the space the small ones share.
 */
static unsigned gpu_classes(struct tencache_cache *c, const struct tc_plan *pl,
			    struct tencache_size_count *hist, unsigned max)
{
	uint8_t *on = calloc(c->nr, 1);
	unsigned nr = 0;

	if (!on)
		return 0;
	for (uint32_t i = 0; i < c->nr; i++) {
		uint64_t b = TC_ALIGN_UP(c->t[i].bytes, 256);
		unsigned k;

		if (b < c->p.gpu_budget / 16)
			continue;
		for (k = 0; k < nr && hist[k].size != b; k++)
			;
		if (k == nr && nr < max)
			hist[nr++] = (struct tencache_size_count){ b, 0 };
	}
	for (unsigned k = 0; k < nr; k++) {
		uint64_t cur = 0, peak = 0;

		memset(on, 0, c->nr);
		for (uint32_t i = 0; i < c->nr; i++)
			if ((pl->start_gpu[i] & 1) && TC_ALIGN_UP(c->t[i].bytes, 256) == hist[k].size) {
				on[i] = 1;
				cur++;
			}
		peak = cur;
		for (int lap = 0; lap < 2; lap++)
			for (uint32_t j = 0; j < pl->nr_ops; j++) {
				const struct tc_op *op = &pl->ops[j];

				if (TC_ALIGN_UP(c->t[op->tensor].bytes, 256) != hist[k].size)
					continue;
				if ((op->kind == TC_OP_FETCH || op->kind == TC_OP_ALLOC) && !on[op->tensor]) {
					on[op->tensor] = 1;
					if (++cur > peak)
						peak = cur;
				} else if (op->kind == TC_OP_DROP && on[op->tensor]) {
					on[op->tensor] = 0;
					cur--;
				}
			}
		hist[k].count = peak;
	}
	free(on);
	return nr;
}

/*
 * Builds the plan for cfg into c->plan and checks that its GPU allocations
 * fit the arena (as they come, in slabs, or laid out ahead). 1: they do;
 * 0: they do not (the plan is freed, *pf says where a layout failed; with
 * nfail, pf holds max_fail places and *nfail says how many it filled);
 * -EBADMSG: the plan failed its check (logged and counted). The first
 * plan's pinned victim horizon (and where its stage-outs go) is kept in cfg
 * for the next tries, which change only the GPU's room: searched in each,
 * it made every plan of OPT-13B on the H100 take 13-18 s instead of 4-5.
 * plan_local searches them again for the three plans it starts from.
 */
static int plan_fit(struct tencache_cache *c, struct tc_plan_cfg *cfg,
		    struct place_fail *pf, uint32_t max_fail, uint32_t *nfail)
{
	char err[256];
	int ret, fits;

	memset(pf, 0, (nfail ? max_fail : 1) * sizeof(*pf));
	if (nfail)
		*nfail = 0;
	ret = tc_plan_build(&c->trace, cfg, &c->plan);
	if (ret)
		return ret;
	if (cfg->pinned_horizon < 0)
		cfg->pinned_horizon = (int32_t)c->plan.st.pinned_horizon;
	if (cfg->pinned_stage_out < 0)
		cfg->pinned_stage_out = (int32_t)c->plan.st.pinned_stage_out;
	/* a plan that would lose or misread a value is a planner bug:
	 * never run it (on demand is slow but correct) */
	ret = tc_plan_check(&c->trace, cfg, &c->plan, err, sizeof(err));
	if (!ret && (c->test_reject & TC_TEST_REJECT_OWN)) {
		snprintf(err, sizeof(err), "tc_exec_test_reject");
		ret = -EINVAL;
	}
	if (ret) {
		tc_plan_free(&c->plan);
		tc_err(c->tc, "cache: the plan failed its check (%s); running on demand, without prefetch: please report this with the trace (tencache_cache_params.table_path)",
		       err);
		c->st.plan_rejects++;
		return -EBADMSG;
	}
	c->nr_ghist = 0;
	fits = gpu_fits(c, &c->plan, NULL, 0);
	if (!fits) {	/* slabs for the big sizes, then */
		c->nr_ghist = gpu_classes(c, &c->plan, c->ghist, TC_GPU_CLASSES);
		fits = c->nr_ghist ? gpu_fits(c, &c->plan, c->ghist, c->nr_ghist) : 0;
	}
	if (!fits) {	/* lay it out ahead instead */
		c->nr_ghist = 0;
		fits = plan_place(c, &c->plan, pf, max_fail, nfail);
		if (fits > 0) {
			tc_info(c->tc, "cache: the plan's GPU allocations would fragment the arena: laid out ahead");
			c->st.static_layouts++;
		}
	}
	if (fits <= 0)
		tc_plan_free(&c->plan);
	return fits;
}

/* A plan with its GPU layout and slabs, as plan_local keeps the best. */
struct fit_plan {
	struct tc_plan pl;
	int64_t *op_goff, *start_goff;
	struct tencache_size_count ghist[TC_GPU_CLASSES];
	unsigned nr_ghist;
	uint64_t ns, bytes;	/* modelled step; GPU room, on average */
};

static void fit_take(struct tencache_cache *c, struct fit_plan *f)
{
	f->pl = c->plan;
	f->op_goff = c->op_goff;
	f->start_goff = c->start_goff;
	memcpy(f->ghist, c->ghist, sizeof(f->ghist));
	f->nr_ghist = c->nr_ghist;
	c->op_goff = c->start_goff = NULL;
}

static void fit_give(struct tencache_cache *c, struct fit_plan *f)
{
	c->plan = f->pl;
	c->op_goff = f->op_goff;
	c->start_goff = f->start_goff;
	memcpy(c->ghist, f->ghist, sizeof(c->ghist));
	c->nr_ghist = f->nr_ghist;
}

static void fit_free(struct fit_plan *f)
{
	tc_plan_free(&f->pl);
	free(f->op_goff);
	free(f->start_goff);
}

static uint64_t own_sim_ns(struct tencache_cache *c, const struct tc_plan_cfg *cfg);

/* Frees the plan in c and its GPU layout (one plan_local passes over). */
static void fit_drop(struct tencache_cache *c)
{
	tc_plan_free(&c->plan);
	free(c->op_goff);
	free(c->start_goff);
	c->op_goff = c->start_goff = NULL;
}

/*
 * The plan in c fits the arena only at less than the budget throughout
 * (gpu_bytes). First that plan and those for 1 to THROUGH steps of 1/64
 * less, each with the pinned victim horizon (and stage-out place) searched
 * again from the first plan's (plan_fit keeps those). --model-only on OPT-13B, 20 layers, 13
 * such steps: the step modelled with the full budget's horizon kept was
 * 1.6% (25%) and 4.4% (50%) longer on average than with it searched so,
 * and it swings by several percent from one room to the next, not in
 * order of room; the best of these three plans was 3.4% (25%) and 7.4%
 * (50%) shorter than the first with the horizon kept, on average where the
 * first layouts fit (5-10 steps). Then more room with less only where a
 * layout failed (ours and LRU take a per-access capacity): from the full
 * budget, then from halfway between the two, and so on while time is left.
 * Each round cuts 1/64 of the budget (or what it reached past, if more)
 * over the accesses of every residency the layout placed past the budget,
 * until one lays out. It keeps the plan the timing model finds fastest,
 * c's own if none is. Cutting where the first failing residency lay, 1/16
 * at a time, chased one failure after another: on the OPT-13B shape in
 * host mode it never laid out in the 10-14 rounds its time allowed; now
 * 2-3 rounds. Hits do not choose (one local plan hit more and modelled 22%
 * slower). The local rounds stop once they took as long as the plan before
 * them (at least a second).
 */
#define LOCAL_FAILS	64
#define THROUGH		2
static int plan_local(struct tencache_cache *c, struct tc_plan_cfg *cfg, uint64_t full,
		      uint64_t spent_ns, uint64_t *plan_bytes)
{
	enum { ROUNDS = 16 };
	uint64_t *capv, *cut, gb = cfg->gpu_bytes, from = full, until, step = c->p.gpu_budget / 64;
	uint64_t a_ns = own_sim_ns(c, cfg), least = UINT64_MAX, whole_ns, whole_gb = gb;
	struct fit_plan best = { .ns = a_ns, .bytes = gb };
	int32_t h = cfg->pinned_horizon, so = cfg->pinned_stage_out;
	/* ours' pinned level over NVMe has a victim horizon to search */
	bool searched = cfg->policy == TC_POLICY_OURS && cfg->nvme_bytes && h >= 0;
	int ret = 0, tries = 0, lower = 0, took = 0, local = 0;
	struct place_fail *pf;

	capv = malloc(c->trace.nr_acc * sizeof(*capv));
	cut = malloc(c->trace.nr_acc * sizeof(*cut));
	pf = calloc(LOCAL_FAILS, sizeof(*pf));
	if (!capv || !cut || !pf) {
		ret = -ENOMEM;
		goto out;
	}
	fit_take(c, &best);
	for (unsigned j = 0; j <= THROUGH; j++) {
		uint64_t ns;
		int fits;

		if (!j && !searched)
			continue;	/* the same plan again */
		if (j && gb <= j * step + tc_trace_max_op_bytes(&c->trace))
			break;
		cfg->gpu_bytes = gb - j * step;
		if (searched)	/* from the first plan's */
			cfg->flags |= TC_PLAN_HORIZON_SEARCH;
		fits = plan_fit(c, cfg, pf, 1, NULL);
		cfg->flags &= ~TC_PLAN_HORIZON_SEARCH;
		if (fits == -ENOMEM) {
			ret = fits;
			break;
		}
		if (fits != 1)	/* as below */
			continue;
		ns = own_sim_ns(c, cfg);
		lower++;
		if (ns < best.ns) {
			fit_free(&best);
			fit_take(c, &best);
			best.ns = ns;
			best.bytes = whole_gb = cfg->gpu_bytes;
			h = (int32_t)best.pl.st.pinned_horizon;
			so = (int32_t)best.pl.st.pinned_stage_out;
			took = 1;
		} else {
			fit_drop(c);
		}
	}
	/* the local plans keep the best one's horizon */
	cfg->pinned_horizon = h;
	cfg->pinned_stage_out = so;
	whole_ns = best.ns;
	if (lower)
		tc_info(c->tc, "cache: less GPU room throughout: %d plans for %d-%d steps of 1/64 less laid out%s, the best modelled at %.1f ms/step against %.1f for the first: %s",
			lower, searched ? 0 : 1, THROUGH,
			searched ? ", each with the pinned horizon searched again" : "",
			whole_ns / 1e6, a_ns / 1e6, took ? "it stands" : "the first stands");
	/* at most as long again as the plan took, so start-up stays bounded */
	until = tc_now_ns() + (spent_ns > 1000000000ULL ? spent_ns : 1000000000ULL);
	cfg->gpu_bytes = full;
	cfg->gpu_cap = capv;
	for (; !ret && from > gb + c->p.gpu_budget / 128 && tc_now_ns() < until;
	     from = gb + (from - gb) / 2) {
		double sum = 0;
		int fits = 0;
		uint64_t ns;

		for (uint32_t i = 0; i < c->trace.nr_acc; i++)
			capv[i] = from;
		for (int round = 1; round <= ROUNDS && tc_now_ns() < until; round++) {
			uint32_t nf;

			fits = plan_fit(c, cfg, pf, LOCAL_FAILS, &nf);
			if (fits || !nf)
				break;
			/* per access, the most any failing residency there wants */
			memset(cut, 0, c->trace.nr_acc * sizeof(*cut));
			for (uint32_t f = 0; f < nf; f++) {
				uint64_t x = pf[f].over > c->p.gpu_budget / 64 ? pf[f].over :
						c->p.gpu_budget / 64;

				for (uint32_t i = pf[f].from;; i = (i + 1) % c->trace.nr_acc) {
					cut[i] = cut[i] > x ? cut[i] : x;
					if (i == pf[f].to)
						break;
				}
			}
			for (uint32_t i = 0; i < c->trace.nr_acc; i++)
				capv[i] = capv[i] > cut[i] ? capv[i] - cut[i] : 0;
		}
		if (fits == -ENOMEM) {
			ret = fits;
			break;
		}
		/* -ENOSPC (a capacity too low somewhere for an op), -EBADMSG
		 * (a plan that failed its check, logged): the next start */
		if (fits != 1)
			continue;
		cfg->gpu_cap = NULL;
		ns = own_sim_ns(c, cfg);
		cfg->gpu_cap = capv;
		for (uint32_t i = 0; i < c->trace.nr_acc; i++)
			sum += capv[i];
		tries++;
		least = ns < least ? ns : least;
		if (ns < best.ns) {
			fit_free(&best);
			fit_take(c, &best);
			best.ns = ns;
			best.bytes = (uint64_t)(sum / c->trace.nr_acc);	/* on average */
			local = 1;
		} else {
			fit_drop(c);
		}
	}
	cfg->gpu_cap = NULL;
	fit_give(c, &best);
	cfg->gpu_bytes = local ? full : whole_gb;
	if (local || took)
		*plan_bytes = best.bytes;
	if (tries)	/* tests/tools/replay_gpu_local.sh */
		tc_info(c->tc, "cache: less GPU room only where the layout needed it: %d plans laid out, the best modelled at %.1f ms/step against %.1f with less room throughout: %s",
			tries, least / 1e6, whole_ns / 1e6, local ? "it runs" : "that one runs");
out:
	free(capv);
	free(cut);
	free(pf);
	return ret;
}

/*
 * Ours laid out by the planner (TC_PLAN_LAYOUT): every GPU residency at an
 * offset of its own in the whole budget, so nothing is kept back for
 * fragmentation. It runs on a thread of its own beside the executor's own
 * plans (laid_start, laid_join), so it touches nothing of c's but reads.
 */
struct laid_job {
	struct tencache_cache *c;
	struct tc_plan_cfg cfg;
	struct tc_plan lp;
	pthread_t thread;
	bool started, threaded, joined, rejected;
	int ret;	/* 1: built and checked into lp; 0: none (logged) */
};

static void *plan_laid_out(void *arg)
{
	struct laid_job *j = arg;
	struct tencache_cache *c = j->c;
	char err[256];
	int ret;

	j->cfg.policy = TC_POLICY_OURS;	/* cfg may be the ZeRO-like fallback's */
	j->cfg.gpu_bytes = c->p.gpu_budget;
	j->cfg.gpu_cap = NULL;
	j->cfg.flags |= TC_PLAN_LAYOUT;
	ret = tc_plan_build(&c->trace, &j->cfg, &j->lp);
	if (ret) {
		tc_info(c->tc, "cache: no plan laid out by the planner: %s", ret == -ENOSPC ?
			"an op found no window, or the pinned or NVMe budget is short" : strerror(-ret));
		return NULL;
	}
	ret = tc_plan_check(&c->trace, &j->cfg, &j->lp, err, sizeof(err));
	if (!ret && (c->test_reject & TC_TEST_REJECT_LAID)) {
		snprintf(err, sizeof(err), "tc_exec_test_reject");
		ret = -EINVAL;
	}
	if (ret) {
		tc_plan_free(&j->lp);
		tc_err(c->tc, "cache: the laid-out plan failed its check (%s); not using it: please report this with the trace (tencache_cache_params.table_path)",
		       err);
		j->rejected = ret != -ENOMEM;
		return NULL;
	}
	j->ret = 1;
	return NULL;
}

/* Starts the laid-out plan for cfg (inline where no thread starts). */
static void laid_start(struct laid_job *j, struct tencache_cache *c,
		       const struct tc_plan_cfg *cfg)
{
	memset(j, 0, sizeof(*j));
	j->c = c;
	j->cfg = *cfg;
	j->started = true;
	j->threaded = !(c->test_reject & TC_TEST_LAID_INLINE) &&
		      !pthread_create(&j->thread, NULL, plan_laid_out, j);
	if (!j->threaded)
		plan_laid_out(j);
}

/* Its result, once it ended: 1, or 0 (also where none was started). */
static int laid_join(struct laid_job *j)
{
	if (!j->started)
		return 0;
	if (!j->joined) {	/* its reject is counted here, on c's thread */
		if (j->threaded)
			pthread_join(j->thread, NULL);
		j->joined = true;
		if (j->rejected)
			j->c->st.plan_rejects++;
	}
	return j->ret;
}

/* c's plan as the executor runs it, for the timing model: at the offsets
 * its static layout gave it (plan_place), where it has one, as the
 * laid-out plan is at its own (a copy into a range waits for what was
 * there). A shallow copy: the arrays stay c's. */
struct tc_plan tc_exec_plan_run(const struct tencache_cache *c)
{
	struct tc_plan p = c->plan;

	if (c->op_goff && c->start_goff) {
		p.op_goff = c->op_goff;
		p.start_goff = c->start_goff;
	}
	return p;
}

/* The timing model of c's plan as it runs; without a static layout, the
 * planner's figure. */
static uint64_t own_sim_ns(struct tencache_cache *c, const struct tc_plan_cfg *cfg)
{
	struct tc_plan p = tc_exec_plan_run(c);
	struct tc_sim_result sr;

	if (!c->op_goff || !c->start_goff)
		return c->plan.st.sim_step_ns;
	if (tc_sim_run(&c->trace, cfg, &p, 3, &sr))
		return c->plan.st.sim_step_ns;
	return sr.step_ns;
}

/* Runs the laid-out plan lp instead of c's (if any): its offsets become
 * the executor's static layout (c->op_goff, c->start_goff). */
static void take_laid_out(struct tencache_cache *c, struct tc_plan *lp)
{
	if (c->plan.ops)
		tc_plan_free(&c->plan);
	free(c->op_goff);
	free(c->start_goff);
	c->op_goff = lp->op_goff;
	c->start_goff = lp->start_goff;
	lp->op_goff = lp->start_goff = NULL;
	c->plan = *lp;
	c->nr_ghist = 0;
	c->laid_out = 1;
	c->st.planner_layouts++;
}

/*
 * The learnt step's host ops that the trainer detached (tencache_op_detach)
 * ran on a thread beside the GPU, and the caller's release gave them no
 * time: each gets the run the cache measured (detach or the previous op's
 * end, to tencache_op_done), or, still running, the measured ones' time per
 * byte of their tensors; the model then runs them beside the GPU
 * (TC_PLAN_HOST_ASYNC), as the trainer does. Without this the plan and its
 * timing model take the optimizer for free.
 */
static void learn_detached(struct tencache_cache *c, struct tc_plan_cfg *cfg)
{
	struct tc_trace *tr = &c->trace;
	uint64_t known = 0, kbytes = 0, *ob;
	uint32_t nk = 0, ng = 0, start = 0;

	pthread_mutex_lock(&c->dlock);
	if (!c->det_prof || c->det_prof != c->prof_gen || c->det_ns_n > tr->nr_acc ||
	    !(ob = calloc(c->det_ns_n, sizeof(*ob)))) {
		pthread_mutex_unlock(&c->dlock);
		return;
	}
	/* each detached op's bytes; the measured ones' time per byte */
	for (uint32_t i = 0; i < c->det_ns_n; i++) {
		uint64_t b = 0;

		if (!(tr->acc[i].flags & TC_ACC_END))
			continue;
		for (uint32_t k = start; k <= i; k++)
			b += tr->tensors[tr->acc[k].tensor].bytes;
		start = i + 1;
		ob[i] = b;
		if (c->det_ns[i] && c->det_ns[i] != TC_DET_RUNNING) {
			known += c->det_ns[i];
			kbytes += b;
		}
	}
	for (uint32_t i = 0; i < c->det_ns_n; i++) {
		struct tc_access *a = &tr->acc[i];

		if (!c->det_ns[i] || !(a->flags & TC_ACC_HOST) || !(a->flags & TC_ACC_END) ||
		    a->compute_ns)
			continue;	/* not a detached op's end, or the caller timed it */
		if (c->det_ns[i] != TC_DET_RUNNING) {
			a->compute_ns = c->det_ns[i];
			nk++;
		} else if (kbytes) {
			a->compute_ns = (uint64_t)((double)known / kbytes * ob[i]);
			ng++;
		}
	}
	pthread_mutex_unlock(&c->dlock);
	free(ob);
	if (nk + ng)
		tc_info(c->tc, "cache: %u host ops ran detached in the profiled step (%u timed, %u still running: from the others' time per byte); planning them beside the GPU",
			nk + ng, nk, ng);
	cfg->flags |= TC_PLAN_HOST_ASYNC;
	if (c->p.flags & TENCACHE_CACHE_DETACH_FIFO)
		cfg->flags |= TC_PLAN_HOST_FIFO;
}

/*
 * The laid-out plan or the executor's own: the timing model has misjudged
 * them both ways on the H200 (results/h200-replay.md: session 13, laid out
 * 11% slower at 10% where it was modelled 1.8% slower; session 14, laid out
 * 2.5-5% faster at 25 and 50% where it was modelled slower). Where the
 * model finds them within 1/TRIAL_MARGIN of each other, both run for real:
 * the model's pick for TRIAL_STEPS steps (the first loads its start set;
 * the last is timed from its tencache_step_begin to the next, as the
 * trainer sees it), then the other as long, and the faster runs from then
 * on (a third planning when that is the first). Each switch enters a plan,
 * which waits for detached host ops (tencache_op_detach). 1: laid out.
 */
#define TRIAL_MARGIN	20	/* within 5% */
#define TRIAL_STEPS	2
static int trial_pick(struct tencache_cache *c, int model, uint64_t lay_ns, uint64_t own_ns)
{
	uint64_t lo = lay_ns < own_ns ? lay_ns : own_ns;
	uint64_t d = lay_ns > own_ns ? lay_ns - own_ns : own_ns - lay_ns;

	switch (c->trial) {
	case TC_TRIAL_NONE:
		if (d > lo / TRIAL_MARGIN && !c->trial_test)
			return model;
		c->trial = TC_TRIAL_FIRST;
		c->trial_first = model;
		c->trial_steps = 0;
		c->trial_room[2][0] = c->frag_slack;
		c->trial_room[2][1] = c->pfrag_slack;
		c->trial_room[2][2] = c->nr_pcut;
		tc_info(c->tc, "cache: the laid-out plan and the executor's own model within %.1f%% of each other (%.1f against %.1f ms/step): timing each for %d steps, the %s first",
			100.0 * d / lo, lay_ns / 1e6, own_ns / 1e6, TRIAL_STEPS,
			model ? "laid-out one" : "executor's");
		return model;
	case TC_TRIAL_FIRST:	/* re-planned before it was timed: on with it */
		return c->trial_first;
	case TC_TRIAL_SECOND:
		return !c->trial_first;
	default:
		return c->trial_best < 2 ? c->trial_best : model;
	}
}

static int plan_stop(struct tencache_cache *c);

int tc_exec_trial_tick(struct tencache_cache *c)
{
	int cand = c->laid_out, ret, room;

	if (c->trial != TC_TRIAL_FIRST && c->trial != TC_TRIAL_SECOND)
		return 0;
	if (!c->planned || cand != (c->trial == TC_TRIAL_FIRST ? c->trial_first : !c->trial_first)) {
		/* left or re-planned under the trial (fragmentation): the model decides */
		c->trial = TC_TRIAL_DONE;
		c->trial_best = 2;
		return 0;
	}
	if (++c->trial_steps < TRIAL_STEPS)
		return 0;
	c->trial_ns[cand] = tc_now_ns() - c->step_t0 + c->trial_extra[cand];	/* the step begun last */
	c->trial_steps = 0;
	c->trial_room[cand][0] = c->frag_slack;
	c->trial_room[cand][1] = c->pfrag_slack;
	c->trial_room[cand][2] = c->nr_pcut;
	if (c->trial == TC_TRIAL_FIRST) {
		c->trial = TC_TRIAL_SECOND;
		/* the other from the room the first began in */
		room = 2;
	} else {
		c->trial = TC_TRIAL_DONE;
		c->trial_best = c->trial_ns[1] <= c->trial_ns[0];
		c->st.plan_trials++;
		tc_info(c->tc, "cache: timed: the laid-out plan %.1f ms/step, the executor's own %.1f: the %s runs",
			c->trial_ns[1] / 1e6, c->trial_ns[0] / 1e6,
			c->trial_best ? "laid-out one" : "executor's");
		if (c->trial_best == cand)
			return 0;
		/*
		 * The first again, in the room it was timed in: the same
		 * plan. On an H100 (OPT-13B at 25%, session 25) the executor's
		 * own plan re-planned twice for pinned room, and the laid-out
		 * one, planned again in that room, homed 885 tensors on NVMe
		 * instead of 852 and ran 8704-8910 ms a step, not the 7766 it
		 * was timed at.
		 */
		room = c->trial_best;
	}
	c->frag_slack = c->trial_room[room][0];
	c->pfrag_slack = c->trial_room[room][1];
	c->nr_pcut = (unsigned)c->trial_room[room][2];	/* cuts only grow: its first ones */
	ret = plan_stop(c);	/* the next plan is entered now, at this step's begin */
	c->want_plan = 1;
	return ret;
}

/*
 * Swap space for good for NVMe-homed value id. On demand may have left the
 * swap full of values the plan keeps pinned (their only copy there) while
 * pinned memory holds values it homes on NVMe: they trade places, one
 * pinned-homed value read back at a time (its slot then given back), room
 * for it made by staging out NVMe-homed values that have a slot, else by
 * dropping pinned copies that NVMe holds too, else by staging out
 * NVMe-homed values a slot still takes. After the quiesce, values held by
 * detached ops (the CPU Adam's, until the trainer next needs them) move
 * too: those ops are done. -ENOMEM: it found no trade.
 */
static int slot_for_good(struct tencache_cache *c, uint32_t id)
{
	int ret;

	if (c->test_swap_full && !--c->test_swap_full)
		return -ENOMEM;
	ret = tc_exec_swap_slot(c, id, 1);

	if (ret == -ENOMEM)	/* no copy reads the pinned copies below */
		ret = tc_exec_quiesce(c) ?: -ENOMEM;
	while (ret == -ENOMEM) {
		struct tc_tstate *p = NULL;
		void *ptr;

		for (uint32_t i = 0; i < c->nr && !p; i++)
			if (c->t[i].pinned_home && c->t[i].valid == TC_V_NVME)
				p = &c->t[i];
		if (!p)
			break;
		while ((ret = tencache_pool_alloc(c->pool, p->bytes, &ptr)) == -ENOMEM) {
			struct tc_tstate *h = NULL;

			for (uint32_t i = 0; i < c->nr && !h; i++)
				if (!c->t[i].pinned_home && c->t[i].poff >= 0 &&
				    c->t[i].noff >= 0 && tc_exec_movable(c, i))
					h = &c->t[i];
			/* else a pinned copy that NVMe holds too (read back later) */
			for (uint32_t i = 0; i < c->nr && !h; i++)
				if (c->t[i].poff >= 0 && c->t[i].noff >= 0 &&
				    (c->t[i].valid & TC_V_NVME) && tc_exec_movable(c, i))
					h = &c->t[i];
			/* else an NVMe-homed value that a slot still takes */
			for (uint32_t i = 0; i < c->nr && !h; i++)
				if (!c->t[i].pinned_home && c->t[i].poff >= 0 &&
				    tc_exec_movable(c, i) && !tc_exec_swap_slot(c, i, 1))
					h = &c->t[i];
			if (!h)
				break;
			if ((h->valid & TC_V_PINNED) && !(h->valid & TC_V_NVME)) {
				ret = tc_exec_stage_sync(c, h - c->t, 1);
				if (ret)
					return ret;
				h->valid |= TC_V_NVME;
			}
			ret = tencache_pool_free(c->pool, c->pbase + h->poff);
			if (ret)
				return ret;
			h->poff = -1;
			h->valid &= ~TC_V_PINNED;
		}
		if (ret)
			break;
		p->poff = (char *)ptr - c->pbase;
		ret = tc_exec_stage_sync(c, p - c->t, 0);
		if (ret)
			return ret;
		p->valid |= TC_V_PINNED;
		ret = tc_exec_swap_slot(c, id, 1);
	}
	return ret;
}

/*
 * The pinned room kept out where a plan's pinned ranges did not lay out
 * (c->pcut: accesses from..to, wrapping where to < from) as the planner's
 * per-access capacity (cfg->pinned_cap, in c->pcapv), below what is kept
 * out of the whole step (pfrag_slack). Kept out of the whole step, the
 * room cost OPT-13B on an H100 8% of its modelled step (6455.6 against
 * 6984.8 ms at 99.2% of the pinned budget): the disk moved 6% more each
 * way. Each access keeps at least half the budget.
 */
static int pinned_cap_make(struct tencache_cache *c, struct tc_plan_cfg *cfg)
{
	uint32_t n = c->trace.nr_acc;

	free(c->pcapv);
	c->pcapv = NULL;
	cfg->pinned_cap = NULL;
	if (!c->swap || !c->nr_pcut || !n)
		return 0;
	c->pcapv = malloc(n * sizeof(*c->pcapv));
	if (!c->pcapv)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		c->pcapv[i] = cfg->pinned_bytes;
	for (unsigned k = 0; k < c->nr_pcut; k++)
		for (uint32_t i = c->pcut[k].from % n;; i = (i + 1) % n) {
			uint64_t *v = &c->pcapv[i], floor = cfg->pinned_bytes / 2;

			if (c->pcut[k].cap < *v)
				*v = c->pcut[k].cap > floor ? c->pcut[k].cap : floor;
			if (i == c->pcut[k].to % n)
				break;
		}
	cfg->pinned_cap = c->pcapv;
	return 0;
}

/*
 * Room over the range that reached past the pool: the plan's pinned bytes
 * within it held to cut below their peak there, at the accesses that pass
 * that (pc: from..to narrowed to them, cap): a range placed high is crowded
 * at some points of its life, and the ranges of an NVMe plan live long (a
 * read to its Adam op), so room over all of it cost nearly what room over
 * the step does. Capped below the plan's own bytes, the next plan differs
 * there: a cut off the budget alone did not bind where the plan held less.
 */
static void pinned_cut_at(const struct tencache_cache *c, struct tc_pcut *pc, uint64_t cut)
{
	const struct tc_plan *pl = &c->plan;
	uint32_t n = c->trace.nr_acc, len, first = UINT32_MAX, last = 0;
	uint64_t used = 0, peak = 0, *at = malloc((n ? n : 1) * sizeof(*at));
	uint8_t *in = calloc(c->nr ? c->nr : 1, 1);

	pc->cap = c->p.pinned_budget > cut ? c->p.pinned_budget - cut : 0;
	if (!at || !in || !pl->ops || pc->from >= n || pc->to >= n)
		goto out;
	for (uint32_t t = 0; t < c->nr; t++)
		if ((in[t] = pl->start_pinned[t] & 1))
			used += c->t[t].bytes;
	for (uint32_t i = 0; i < n; i++) {	/* after access i's ops */
		for (uint32_t k = pl->op_first[i]; k < pl->op_first[i + 1]; k++) {
			const struct tc_op *op = &pl->ops[k];

			if ((op->kind == TC_OP_STAGE_IN || op->kind == TC_OP_PALLOC) && !in[op->tensor]) {
				in[op->tensor] = 1;
				used += c->t[op->tensor].bytes;
			} else if (op->kind == TC_OP_PDROP && in[op->tensor]) {
				in[op->tensor] = 0;
				used -= c->t[op->tensor].bytes;
			}
		}
		at[i] = used;
	}
	len = (pc->to + n - pc->from) % n + 1;
	for (uint32_t d = 0; d < len; d++)
		if (at[(pc->from + d) % n] > peak)
			peak = at[(pc->from + d) % n];
	pc->cap = peak > cut ? peak - cut : 0;
	for (uint32_t d = 0; d < len; d++)
		if (at[(pc->from + d) % n] > pc->cap) {
			if (first == UINT32_MAX)
				first = d;
			last = d;
		}
	if (first != UINT32_MAX) {
		pc->to = (pc->from + last) % n;
		pc->from = (pc->from + first) % n;
	}
out:
	free(at);
	free(in);
}

/* The pinned bytes a plan was made for: on average over the step. */
static uint64_t pinned_cap_mean(const struct tencache_cache *c, const struct tc_plan_cfg *cfg)
{
	double sum = 0;

	if (!cfg->pinned_cap || !c->trace.nr_acc)
		return cfg->pinned_bytes;
	for (uint32_t i = 0; i < c->trace.nr_acc; i++)
		sum += cfg->pinned_cap[i];
	return (uint64_t)(sum / c->trace.nr_acc);
}

int tc_exec_enter_plan(struct tencache_cache *c)
{
	struct tc_plan_cfg cfg;
	struct laid_job lj = { 0 };
	struct tc_plan *lp = &lj.lp;
	uint64_t sum = 0, t0 = tc_now_ns(), gpu_bytes0, plan_bytes;
	char b1[32], b2[32];
	int ret = 0, laid = 0;

	c->want_plan = 0;
	tc_plan_cfg_default(&cfg);
	for (uint32_t i = 0; i < c->nr; i++)
		sum += c->t[i].bytes;
	cfg.gpu_bytes = c->p.gpu_budget - (c->frag_slack < c->p.gpu_budget / 2 ?
					    c->frag_slack : c->p.gpu_budget / 2);
	cfg.pinned_bytes = c->swap ? c->p.pinned_budget - (c->pfrag_slack < c->p.pinned_budget / 2 ?
							   c->pfrag_slack : c->p.pinned_budget / 2) : sum;
	cfg.nvme_bytes = c->swap ? c->p.nvme_budget : 0;
	for (int l = 0; l < 4; l++)
		cfg.bw[l] = c->bw[l];
	if (c->duplex_bw > 0)
		cfg.duplex_bw = c->duplex_bw;
	cfg.nvme_duplex_bw = c->nvme_duplex_bw;
	cfg.policy = (enum tc_policy)c->p.policy;
	learn_detached(c, &cfg);
	/* ours found no layout for this trace before, and a re-plan only has
	 * less room: straight to the fallback */
	if (cfg.policy == TC_POLICY_OURS && c->ours_no_layout)
		cfg.policy = TC_POLICY_ZERO;
	free_plan_events(c);
	if (c->have_plan)
		tc_plan_free(&c->plan);
	c->have_plan = 0;
	ret = pinned_cap_make(c, &cfg);	/* after free_plan_events: it frees the last one's */
	if (ret)
		return ret;
	gpu_bytes0 = cfg.gpu_bytes;
	c->laid_out = 0;
	if (c->p.policy == TENCACHE_POLICY_OURS && !(c->p.flags & TENCACHE_CACHE_NO_LAYOUT) &&
	    !c->layout_failed) {
		laid_start(&lj, c, &cfg);
	}
	/* plan for less than the budget when its allocations would fragment */
	for (int tries = 0;; tries++) {
		uint64_t step = c->p.gpu_budget / 64;
		struct place_fail pf;
		int fits = plan_fit(c, &cfg, &pf, 1, NULL);

		if (fits == -EBADMSG && !(laid = laid_join(&lj))) {	/* a planner bug: on demand is slow but correct */
			c->no_plan = 1;
			return 0;
		}
		if (fits == -EBADMSG) {
			ret = fits;
			break;
		}
		if (fits < 0) {
			ret = fits;
			break;
		}
		if (fits)
			break;
		if (tries == 32 || cfg.gpu_bytes <= step + tc_trace_max_op_bytes(&c->trace)) {
			/*
			 * No layout for ours: its resident sets shift with
			 * every op. The ZeRO-like plan (release after use,
			 * a prefetch bucket) keeps short, regular residencies
			 * that may lay out where ours' do not, and any plan
			 * beats running on demand.
			 */
			if (cfg.policy == TC_POLICY_OURS) {
				tc_fmt_bytes(b1, sizeof(b1), c->p.gpu_budget);
				laid = laid_join(&lj);
				if (!laid)	/* else the laid-out plan runs */
					tc_warn(c->tc, "cache: no layout of the planned GPU allocations fits the GPU budget (%s); using the ZeRO-like streaming plan instead (a larger gpu_budget may let ours plan)",
						b1);
				cfg.policy = TC_POLICY_ZERO;
				cfg.gpu_bytes = gpu_bytes0;
				tries = -1;
				c->ours_no_layout = 1;
				continue;
			}
			ret = -ENOSPC;
			break;
		}
		cfg.gpu_bytes -= step;
	}
	plan_bytes = cfg.gpu_bytes;
	if (!ret && cfg.gpu_bytes < gpu_bytes0 &&
	    (cfg.policy == TC_POLICY_OURS || cfg.policy == TC_POLICY_LRU)) {
		ret = plan_local(c, &cfg, gpu_bytes0, tc_now_ns() - t0, &plan_bytes);
		if (ret < 0) {
			if (laid_join(&lj))
				tc_plan_free(lp);
			return ret;
		}
		ret = 0;
	}
	laid = laid_join(&lj);
	/*
	 * The laid-out plan runs unless the other is ours and the timing
	 * model finds it faster, or the two ran and were timed (trial_pick).
	 * TENCACHE_CACHE_LAYOUT: it runs anyway.
	 */
	if (laid) {
		uint64_t lay_ns = lp->st.sim_step_ns, own_ns = ret ? 0 : own_sim_ns(c, &cfg);
		int both = !ret && cfg.policy == TC_POLICY_OURS && own_ns &&
			   !(c->p.flags & TENCACHE_CACHE_LAYOUT);
		int use = !both || lay_ns <= own_ns;

		if (both)
			use = trial_pick(c, use, lay_ns, own_ns);
		if (use) {
			tc_info(c->tc, "cache: laid out by the planner: %u GPU hits, %.2f%% of the bytes read, model %.1f ms/step (planned for %.1f%% of the budget: %u, %.2f%%, %.1f ms)",
				lp->st.hits, 100.0 * lp->st.hit_bytes / (lp->st.read_bytes ? lp->st.read_bytes : 1),
				lay_ns / 1e6, ret ? 0.0 : 100.0 * plan_bytes / c->p.gpu_budget,
				ret ? 0 : c->plan.st.hits,
				ret ? 0.0 : 100.0 * c->plan.st.hit_bytes /
					    (c->plan.st.read_bytes ? c->plan.st.read_bytes : 1),
				own_ns / 1e6);
			take_laid_out(c, lp);
			ret = 0;
			cfg.policy = TC_POLICY_OURS;
			cfg.gpu_bytes = plan_bytes = c->p.gpu_budget;
		} else {
			tc_info(c->tc, "cache: not laid out by the planner: %s (%.1f against %.1f ms/step modelled)",
				c->trial == TC_TRIAL_NONE ? "the timing model finds it slower" :
				c->trial == TC_TRIAL_DONE ? "timed slower" : "timing the executor's own plan",
				lay_ns / 1e6, own_ns / 1e6);
			tc_plan_free(lp);
		}
	}
	if (ret == -EBADMSG) {	/* a planner bug: on demand is slow but correct */
		c->no_plan = 1;
		return 0;
	}
	if (!ret && cfg.policy == TC_POLICY_ZERO && c->p.policy == TENCACHE_POLICY_OURS)
		c->st.plan_fallbacks++;	/* the ZeRO-like plan runs for ours */
	if (ret) {
		tc_fmt_bytes(b1, sizeof(b1), c->p.gpu_budget);
		tc_fmt_bytes(b2, sizeof(b2), tc_trace_max_op_bytes(&c->trace));
		if (ret != -ENOSPC) {
			tc_err(c->tc, "cache: planning failed: %s", strerror(-ret));
			return ret;
		}
		/* on demand still works when the largest op fits at all */
		tc_warn(c->tc, "cache: cannot plan within the GPU budget (%s; the largest op holds %s) or the pinned/NVMe space; running on demand, without prefetch",
			b1, b2);
		c->no_plan = 1;
		return 0;
	}
	if (cfg.gpu_bytes < c->p.gpu_budget) {
		tc_fmt_bytes(b1, sizeof(b1), c->p.gpu_budget - cfg.gpu_bytes);
		tc_info(c->tc, "cache: planned with %s less than the GPU budget: room for fragmentation",
			b1);
	}
	c->have_plan = 1;
	c->pcfg = cfg;
	c->plan_gpu_bytes = plan_bytes;
	c->plan_pinned_bytes = pinned_cap_mean(c, &cfg);
	c->opev = calloc(c->plan.nr_ops + 1, sizeof(*c->opev));
	c->accev = calloc(c->trace.nr_acc + 1, sizeof(*c->accev));
	if (!c->opev || !c->accev)
		return -ENOMEM;
	for (uint32_t k = 0; k < c->plan.nr_ops && !ret; k++) {
		int kind = c->plan.ops[k].kind;

		ret = xev_init(c, &c->opev[k], kind == TC_OP_FETCH || kind == TC_OP_WRITEBACK ||
			       kind == TC_OP_ALLOC, !c->host_mode && kind != TC_OP_ALLOC);
	}
	for (uint32_t i = 0; i < c->trace.nr_acc && !ret; i++)
		ret = xev_init(c, &c->accev[i], !(c->trace.acc[i].flags & TC_ACC_HOST) &&
			       (c->trace.acc[i].flags & TC_ACC_END), 0);
	c->nacc_ev = c->trace.nr_acc;
	if (ret)
		return ret;
	/* host events a stream may wait for: on the device where it can */
	if (c->dev->ops->hev_map &&
	    !c->dev->ops->hev_map(c->dev, c->plan.nr_ops + c->nacc_ev, &c->hev_words)) {
		for (uint32_t k = 0; k < c->plan.nr_ops; k++)
			if (!c->opev[k].dev)
				c->opev[k].h.word = &c->hev_words[k];
		for (uint32_t i = 0; i < c->nacc_ev; i++)
			if (!c->accev[i].dev)
				c->accev[i].h.word = &c->hev_words[c->plan.nr_ops + i];
	}
	/*
	 * A value's home is NVMe when the plan stages or drops its pinned copy:
	 * placed there, or placed on the GPU for good (its pinned copy may
	 * still go out to NVMe and come back).
	 */
	for (uint32_t i = 0; i < c->nr; i++)
		c->t[i].pinned_home = !c->swap || c->plan.placement[i] != TC_TIER_NVME;
	for (uint32_t k = 0; k < c->plan.nr_ops && c->swap; k++) {
		int kind = c->plan.ops[k].kind;

		if (kind == TC_OP_STAGE_IN || kind == TC_OP_STAGE_OUT || kind == TC_OP_PDROP)
			c->t[c->plan.ops[k].tensor].pinned_home = 0;
	}
	for (uint32_t i = 0; i < c->nr && !ret; i++)	/* swap space for good */
		if (!c->t[i].pinned_home)
			ret = slot_for_good(c, i);
	if (ret == -ENOMEM) {
		/* every value still has its newest copy somewhere: on demand runs */
		c->no_plan = 1;
		tc_warn(c->tc, "cache: the swap cannot hold the plan's NVMe-homed values beside those on demand left there; running on demand, without prefetch (a larger nvme_budget lets the plan run)");
		return tc_exec_quiesce(c);
	}
	if (ret)
		return ret;
	tc_info(c->tc, "cache: planned %u accesses, %u ops (%s) in %.1f ms: %u tensors on the GPU, %u pinned, %u on NVMe; predicted GPU hits %u of %u",
		c->trace.nr_acc, c->plan.nr_ops, tc_policy_name(cfg.policy),
		(tc_now_ns() - t0) / 1e6, c->plan.st.nr_gpu_resident,
		c->plan.st.nr_pinned_resident, c->plan.st.nr_nvme, c->plan.st.hits,
		c->plan.st.reads);
	c->planned = 1;
	c->pinned_enomem = 0;
	ret = tc_exec_load_start(c);
	if (ret == -ENOMEM && c->swap && c->pinned_enomem &&
	    c->pfrag_slack < c->p.pinned_budget / 2) {
		/* the start set does not fit the fragmented pinned arena, or
		 * the plan's ranges do not lay out: plan again with room. A
		 * layout keeps out what it reached past the pool, at least
		 * 1/256 of the budget, doubling with each try up to 1/16
		 * (the layout packs a plan within ~2% of its peak: 1/16 at
		 * once sent OPT-13B's staging ~35% more bytes each way) */
		uint64_t step = c->p.pinned_budget >> (8 - (c->pslack_tries < 4 ? c->pslack_tries : 4));
		char b[32], b2[32];

		c->planned = 0;
		if (c->pinned_over && c->pover && c->nr_pcut < TC_PINNED_CUTS) {
			/* room only where the layout first reached past the
			 * pool (at least 1/256 of the budget) */
			uint64_t cut = c->p.pinned_budget / 256;
			struct tc_pcut *pc = &c->pcut[c->nr_pcut];

			cut = c->pover > cut ? c->pover : cut;
			*pc = (struct tc_pcut){ c->pover_from, c->pover_to, 0 };
			pinned_cut_at(c, pc, cut);
			c->nr_pcut++;
			tc_fmt_bytes(b, sizeof(b), c->pover);
			tc_fmt_bytes(b2, sizeof(b2), cut);
			tc_info(c->tc, "cache: the plan's pinned ranges do not fit the pool as laid out (%s past it, a range of accesses %u-%u); planning again with %s fewer pinned bytes at its fullest, accesses %u-%u",
				b, c->pover_from, c->pover_to, b2, pc->from, pc->to);
			return tc_exec_enter_plan(c);
		}
		if (c->pinned_over) {
			c->pfrag_slack += c->pinned_over > step ? c->pinned_over : step;
			c->pslack_tries++;
		} else {
			c->pfrag_slack += c->p.pinned_budget / 16;
		}
		tc_info(c->tc, "cache: the plan's pinned ranges do not fit the pool as laid out, or it fragmented loading the plan's start; planning again with room");
		return tc_exec_enter_plan(c);
	}
	if (ret == -ENOMEM) {
		c->planned = 0;
		c->no_plan = 1;
		tc_warn(c->tc, "cache: cannot load the plan's start state (memory fragmented); running on demand, without prefetch");
		return tc_exec_quiesce(c);
	}
	return ret;
}

/* A new, empty GPU arena in place of the (empty) old one: plain, or laid
 * out for a plan's size classes with big sizes at the high end. */
static int gpu_arena_new(struct tencache_cache *c, const struct tencache_size_count *hist,
			 unsigned nr)
{
	struct tencache_arena *a;
	int ret = tencache_arena_create(&a, c->p.gpu_budget, TC_GPU_ALIGN, hist, nr);

	if (ret)
		return ret;
	if (hist)
		tencache_arena_set_high(a, c->p.gpu_budget / 16);
	tencache_arena_destroy(c->garena);
	c->garena = a;
	c->garena_shaped = !!hist;
	c->garena_stuck = 0;
	return 0;
}

/* Put every value in its home: the GPU arena is empty after. */
static int values_home(struct tencache_cache *c)
{
	int ret = tc_exec_quiesce(c);

	/* NVMe-homed values with pinned space go to NVMe first, to make room */
	for (uint32_t i = 0; i < c->nr && !ret; i++) {
		struct tc_tstate *t = &c->t[i];

		if (t->pinned_home || t->poff < 0)
			continue;
		if (!(t->valid & (TC_V_PINNED | TC_V_NVME)) && (t->valid & TC_V_GPU)) {
			ret = tc_exec_copy_sync(c, i, TENCACHE_COPY_D2H);
			t->valid |= TC_V_PINNED;
		}
		if (!ret && (t->valid & TC_V_PINNED) && !(t->valid & TC_V_NVME)) {
			ret = tc_exec_stage_sync(c, i, 1);
			t->valid |= TC_V_NVME;
		}
		ret = ret ?: tencache_pool_free(c->pool, c->pbase + t->poff);
		t->poff = -1;
		t->valid &= ~TC_V_PINNED;
	}
	/* values only on the GPU go home through pinned memory */
	for (uint32_t i = 0; i < c->nr && !ret; i++) {
		struct tc_tstate *t = &c->t[i];

		if (t->valid == TC_V_GPU) {
			ret = tc_exec_od_to_pinned(c, i);
			if (!ret && !t->pinned_home) {
				ret = tc_exec_stage_sync(c, i, 1);
				t->valid |= TC_V_NVME;
				ret = ret ?: tencache_pool_free(c->pool, c->pbase + t->poff);
				t->poff = -1;
				t->valid &= ~TC_V_PINNED;
			}
		}
		if (!ret && t->goff >= 0) {
			ret = tencache_arena_free(c->garena, t->goff);
			t->goff = -1;
		}
		t->valid &= ~TC_V_GPU;
	}
	return ret;
}

/*
 * Unplanned steps (profiling, or on demand after a plan ended) allocate in
 * acquire order; an arena shaped for a plan (its size-class slabs, big
 * sizes at the high end) scatters an op's tensors there, and a large op
 * may then find no hole though the budget holds it. Once, at such a step's
 * start: every value home, and a plain arena.
 */
int tc_exec_plain_gpu(struct tencache_cache *c)
{
	tc_exec_wait_detached(c);	/* a host op may still use a pinned copy */
	return values_home(c) ?: gpu_arena_new(c, NULL, 0);
}

/* Put every value in its home, then load the plan's start state. */
int tc_exec_load_start(struct tencache_cache *c)
{
	/* empty now: lay it out for the plan's size classes */
	int ret = values_home(c) ?: gpu_arena_new(c, c->ghist, c->nr_ghist);

	for (uint32_t i = 0; i < c->nr && !ret; i++)
		if (c->t[i].pinned_home)
			ret = tc_exec_od_to_pinned(c, i);
	/* no layout: plan again with room (enter_plan), as for a start set
	 * that does not fit, while it may; mid-step it would cost a step */
	if (!ret && !pinned_place(c) && c->pfrag_slack < c->p.pinned_budget / 2) {
		c->pinned_enomem = 1;
		return -ENOMEM;
	}
	/* in tensor order: the plan's allocations were checked in this order */
	for (uint32_t i = 0; i < c->nr && !ret; i++) {
		struct tc_tstate *t = &c->t[i];
		int staged = 0;

		if (!(c->plan.start_gpu[i] & 1))
			continue;
		ret = tc_exec_galloc(c, i);
		if (ret || !t->valid)
			continue;	/* no value yet: space only */
		if (c->plan.start_pinned[i] & 1)
			ret = tc_exec_palloc_start(c, i);
		if (!ret && !(t->valid & TC_V_PINNED)) {	/* on NVMe only */
			ret = tc_exec_od_to_pinned(c, i);
			staged = 1;
		}
		ret = ret ?: tc_exec_copy_sync(c, i, TENCACHE_COPY_H2D);
		t->valid |= TC_V_GPU;
		if (!ret && staged && !(c->plan.start_pinned[i] & 1)) {
			ret = tencache_pool_free(c->pool, c->pbase + t->poff);
			t->poff = -1;
			t->valid &= ~TC_V_PINNED;
		}
	}
	/* the pinned start set, at its places: the GPU's bounced through
	 * pinned memory before it, through space these may take */
	for (uint32_t i = 0; i < c->nr && !ret; i++)
		if (!c->t[i].pinned_home && (c->plan.start_pinned[i] & 1))
			ret = tc_exec_palloc_start(c, i) ?: tc_exec_od_to_pinned(c, i);
	return ret ?: tc_exec_quiesce(c);
}

/*
 * On demand after a plan stopped mid-step: not in the arena shaped for the
 * plan's size classes, whose slabs do not fit on demand's allocations
 * (OPT-13B at 25% on the H200 found no 200 MiB range 35 accesses after a
 * re-plan: largest free 209674240 of 1392506880). Once nothing is held on
 * the GPU (at the stop, or at a later acquire), the arena is cleared and a
 * plain one takes its place.
 */
int tc_exec_od_plain_gpu(struct tencache_cache *c)
{
	struct tencache_arena_stats st;
	int ret;

	if (c->planned || !c->garena || !c->garena_shaped || c->garena_stuck)
		return 0;
	for (uint32_t i = 0; i < c->nr; i++)
		if (c->t[i].goff >= 0 && c->t[i].held && !c->t[i].held_host)
			return 0;	/* in the caller's hands: not yet */
	ret = tc_exec_od_clear_gpu(c) ?: tencache_arena_stats(c->garena, &st);
	if (!ret && !st.used)
		ret = gpu_arena_new(c, NULL, 0);
	else if (!ret)
		c->garena_stuck = 1;	/* not a tensor's: clearing again would not help */
	return ret;
}

/* Ends planned mode mid-step: the rest of this step runs on demand, and
 * its record (from here on) is not learnt. */
static int plan_stop(struct tencache_cache *c)
{
	int ret = tc_exec_quiesce(c);

	c->planned = 0;
	/* the rest of the step runs on demand: not among the laid-out
	 * plan's residents, which split the arena where it put them (after
	 * planned = 0: their pinned room comes from any value, on demand) */
	if (!ret && c->laid_out && c->garena)
		ret = tc_exec_od_clear_gpu(c);
	ret = ret ?: tc_exec_od_plain_gpu(c);
	c->laid_out = 0;
	c->skip_learn = 1;
	tc_trace_free(&c->rec);
	tc_trace_init(&c->rec);
	for (uint32_t i = 0; i < c->nr && !ret; i++)
		ret = tc_trace_add_tensor(&c->rec, c->t[i].bytes, c->t[i].role) < 0 ? -ENOMEM : 0;
	return ret;
}

int tc_exec_leave_plan(struct tencache_cache *c, const char *why)
{
	int ret = plan_stop(c);

	c->want_plan = 0;
	c->profiled = 0;
	c->st.reprofiles++;
	tc_warn(c->tc, "cache: step %llu: %s at access %u; profiling the order again",
		(unsigned long long)c->st.steps + 1, why, c->pos);
	return ret;
}

/*
 * The learnt order still holds but the plan met a fragmented arena (gpu: the
 * GPU's, else the pinned pool): the rest of this step runs on demand and the
 * next step plans again with 1/16 of that budget more room (slack), without
 * profiling the order again. Once the room would pass half the budget it
 * profiles again instead.
 */
int tc_exec_replan(struct tencache_cache *c, const char *why, int gpu)
{
	uint64_t *slack = gpu ? &c->frag_slack : &c->pfrag_slack;
	uint64_t budget = gpu ? c->p.gpu_budget : c->p.pinned_budget;
	char b[32];
	int ret;

	*slack += budget / 16;
	/* a laid-out plan's ranges are the planner's: a bug, never again */
	if (gpu && c->laid_out)
		c->layout_failed = 1;
	if (*slack > budget / 2)
		return tc_exec_leave_plan(c, why);
	ret = plan_stop(c);
	c->want_plan = 1;
	c->st.replans++;
	tc_fmt_bytes(b, sizeof(b), budget / 16);
	tc_warn(c->tc, "cache: step %llu: %s at access %u; the rest of the step runs on demand, and the next step plans again with %s more room",
		(unsigned long long)c->st.steps + 1, why, c->pos, b);
	return ret;
}

int tc_exec_step_sync(struct tencache_cache *c)
{
	int ret = tc_exec_drain(c);

	return ret ?: tc_exec_timeline_resolve(c);
}

int tc_exec_flush(struct tencache_cache *c)
{
	int ret = tc_exec_quiesce(c);

	/* as between steps (tencache_tensor_host): pinned room from any
	 * value, since the next step loads the plan's start state again. A
	 * plan that ends with more of the step's values on the GPU alone than
	 * its pinned room holds (on the H200, the NVMe tier's laid-out plan)
	 * failed here with -ENOMEM */
	c->any_room = 1;
	for (uint32_t i = 0; i < c->nr && !ret; i++) {
		struct tc_tstate *t = &c->t[i];

		if (t->valid == TC_V_GPU)
			ret = tc_exec_od_to_pinned(c, i);
		if (!ret && !t->pinned_home && t->valid == TC_V_PINNED) {
			ret = tc_exec_stage_sync(c, i, 1);
			t->valid |= TC_V_NVME;
		}
	}
	c->any_room = 0;
	c->reload = 1;
	return ret;
}

void tencache_cache_destroy(struct tencache_cache *c)
{
	if (!c)
		return;
	if (c->frozen)
		tc_exec_quiesce(c);
	if (c->sthread_on) {
		pthread_mutex_lock(&c->slock);
		c->sexit = 1;
		pthread_cond_broadcast(&c->scond);
		pthread_mutex_unlock(&c->slock);
		for (int w = 0; w < c->sthread_on; w++)
			pthread_join(c->sthread[w], NULL);
	}
	if (c->dev) {
		free_plan_events(c);
		for (uint32_t i = 0; i < c->nr; i++)
			xev_fini(c, &c->t[i].ready);
		tc_exec_timeline_free(c);
		for (uint32_t k = 0; k < c->gp_nr; k++)
			tc_exec_bev_put(c, c->gp[k].bev);
		while (c->bev_all) {
			struct tc_bev *b = c->bev_all;

			c->bev_all = b->all;
			c->dev->ops->event_destroy(c->dev, b->dev);
			free(b);
		}
		free(c->gp);
		free(c->gq);
		for (int i = 0; i < 2; i++) {
			free(c->cb[i].dst); free(c->cb[i].src); free(c->cb[i].len);
			free(c->cb[i].ev); free(c->cb[i].id);
		}
		for (uint32_t i = 0; i < c->cap_prof; i++) {
			if (c->prof[i].a)
				c->dev->ops->event_destroy(c->dev, c->prof[i].a);
			if (c->prof[i].b)
				c->dev->ops->event_destroy(c->dev, c->prof[i].b);
		}
		free(c->prof);
		if (c->step_ev)
			c->dev->ops->event_destroy(c->dev, c->step_ev);
		for (uint32_t k = 0; k < c->sev_nr; k++)	/* the workers are joined */
			c->dev->ops->event_destroy(c->dev, c->sev[k]);
		free(c->sev);
		/* first: it may wait for the others' copies */
		if (c->rstream)
			c->dev->ops->stream_destroy(c->dev, c->rstream);
		c->dev->ops->stream_destroy(c->dev, c->h2d);
		c->dev->ops->stream_destroy(c->dev, c->d2h);
		if (c->gstream)
			c->dev->ops->stream_destroy(c->dev, c->gstream);
		if (c->sstream)
			c->dev->ops->stream_destroy(c->dev, c->sstream);
		if (c->lag_s)
			tc_dev_host_ops.stream_destroy(c->dev->hdev, c->lag_s);
	}
	if (c->have_plan)
		tc_plan_free(&c->plan);
	tc_trace_free(&c->rec);
	tc_trace_free(&c->trace);
	free(c->pcapv);
	if (c->stage)
		tencache_stage_destroy(c->stage);
	if (c->wstage)
		tencache_stage_destroy(c->wstage);
	if (c->swap)
		tencache_swap_destroy(c->swap);
	if (c->pool)
		tencache_pool_destroy(c->pool);
	if (c->garena)
		tencache_arena_destroy(c->garena);
	if (c->dev)
		c->dev->ops->close(c->dev);
	free(c->gfreed.v);
	free(c->pfreed.v);
	free(c->sdeps);
	free(c->op_ids);
	for (uint32_t k = 0; k < c->nr_det; k++)
		free(c->det[k].hw);
	free(c->det);
	free(c->op_hw);
	free(c->det_ns);
	free(c->t);
	free(c);
}
