/*
 * exec.h - the tensor cache's internal state, shared by cache.c (the API,
 * planned and on-demand execution), setup.c (creation, learning, entering
 * and leaving a plan, flush) and timeline.c (the Perfetto export).
 */
#ifndef TENCACHE_EXEC_H
#define TENCACHE_EXEC_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exec/dev.h"
#include "grow.h"
#include "plan/plan.h"

/* tc_tstate.valid: tiers that hold the newest value */
#define TC_V_GPU	0x1
#define TC_V_PINNED	0x2
#define TC_V_NVME	0x4

/*
 * An event of either domain: a device event, or a host event (dev NULL).
 * Device events remember what saves driver calls: the instance (gen, one
 * per record) known complete, the stream it was recorded on (a wait there
 * is in order anyway) and the last streams that waited for an instance.
 * Copy events of a plan are timing events used in turns (dev, alt): the
 * GPU-timeline measure reads one at step end, after the next record. The
 * copies of a batch share one record (bev): their latest instance is that.
 */
struct tc_bev;

enum { TC_TRIAL_NONE, TC_TRIAL_FIRST, TC_TRIAL_SECOND, TC_TRIAL_DONE };

/* A host event's instance to wait for. */
struct tc_sdep {
	struct tc_hev *h;
	uint64_t inst;
};

struct tc_xev {
	void *dev;
	void *alt;			/* the other half of a pair, or NULL */
	struct tc_bev *bev;		/* latest instance: a batch's record, or NULL */
	struct tc_hev h;
	uint32_t gen, done_gen;		/* records made; the newest known done */
	void *rec_s;			/* stream of the latest record */
	uint8_t rec_o;			/* its tc_sorder + 1; 0: not tracked */
	uint64_t rec_seq;		/* the record's place on that stream */
	uint64_t rec_at, prev_at;	/* c->rec_clock at its latest record and the
					 * one before */
	uint8_t prev_done;		/* that one was known done when the latest
					 * was made */
	uint8_t cb;			/* its copy waits in a batch (tc_cbatch):
					 * recorded when the batch goes out */
	uint8_t gate;			/* its copy waits for a host op (tc_gated) */
	uint64_t det_dep;		/* host event: the newest detached op its latest
					 * instance may wait for (token; 0: none) */
	void *wait_s[2];		/* streams that waited ... */
	uint32_t wait_gen[2];		/* ... for these instances */
};

/*
 * One device-event record made for all the copies of a batch (a record
 * costs about as much as a copy call on a GPU): the events of its copies
 * name it as their latest instance. Back on the free list, to be recorded
 * again, only once nothing names it (refs: events and GPU-timeline probes),
 * so no wait or query ever meets a later instance than it asked for.
 */
struct tc_bev {
	void *dev;
	uint32_t refs;
	void *wait_s[2];		/* the last streams that waited for it */
	struct tc_bev *next;		/* on the free list */
	struct tc_bev *all;		/* every one made, to destroy them */
};

/*
 * Copies a plan issues at one access, held back to go out as one device
 * call per stream (cache.c, "copy batches"). Their ops' events are recorded
 * after it; anything else queued on the stream, or a look at one of those
 * events, sends the batch out first.
 */
struct tc_cbatch {
	void *s;
	int dir;
	uint32_t n, cap;
	void **dst;
	const void **src;
	uint64_t *len;
	struct tc_xev **ev;
	uint32_t *id;
};

/*
 * The device-event records made on one stream (cache.c, "stream order"):
 * a stream completes its work in order, so an instance found done proves
 * every one recorded on the stream before it done too, without a query.
 * The ring keeps the recent records (event, instance, when) to choose one
 * to query that proves the most.
 */
#define TC_SORDER_NR	8	/* streams tracked: the cache's + a few callers' */
#define TC_SORDER_RING	64
struct tc_sorder {
	void *s;
	uint64_t seq;			/* records made on s */
	uint64_t done_seq;		/* all up to this one are known done */
	uint64_t probe_at;		/* no probe before this decision clock */
	uint32_t lag;			/* records it runs behind, estimated */
	struct tc_srec {
		struct tc_xev *e;	/* NULL: forgotten (plan events freed) */
		uint32_t gen;
		uint64_t clock;		/* the cache's sclock at the record */
	} ring[TC_SORDER_RING];
};

/* A GPU acquire's wait the CPU saw pending: the stream's clock at the
 * acquire (probe) against the copy's end, read at step end. */
struct tc_gprobe {
	void *probe, *copy;
	struct tc_bev *bev;		/* copy's, held until resolved; or NULL */
	uint32_t acq;			/* the acquire's number in the step */
	uint8_t fetch;			/* a FETCH: decides the hit */
	uint8_t cand;			/* the acquire is a hit unless a FETCH was late */
};

/*
 * A gated FETCH (plan.h) whose host op was still running at its issue
 * point: its space and stream waits are taken, the copy goes out once the
 * op is done (cache.c, "gated copies"). Its pointers are kept from the
 * issue point: the tensor's own may change before the copy goes.
 */
struct tc_gated {
	uint32_t k, id;			/* plan op, tensor */
	void *dst;
	const void *src;
	uint64_t len;
	struct tc_hev *h;		/* the host op's event ... */
	uint64_t inst;			/* ... and the instance it waits for */
};

/*
 * Ranges freed at issue (GPU: DROP; pinned: PDROP) whose last users may
 * still run: what is placed there next waits for them (cache.c, "freed
 * ranges"). Oldest first.
 */
struct tc_freed {
	struct tc_freed_range {
		uint64_t off, len;
		const int32_t *deps;	/* the free's dependencies: its last users */
		uint32_t nr_deps;
		uint64_t at;		/* c->rec_clock then: their instances */
	} *v;
	uint32_t nr, cap;
	uint32_t poll_at;	/* freed_poll queries past this length */
	uint8_t pinned;		/* a held gated copy reads the range: a user */
};

#define TC_GPU_ALIGN	256	/* the GPU arena's alignment */

struct tc_tstate {
	uint64_t bytes;
	uint8_t role;
	uint8_t valid;		/* TC_V_* */
	uint8_t held;		/* acquired in the open op */
	uint8_t held_host;	/* by a host op: its GPU copy is not in use */
	uint8_t pinned_home;	/* keeps its pinned space for good */
	uint64_t det;		/* held by the detached host op of this token; 0: none */
	int64_t goff, poff, noff;	/* space in each tier, -1: none */
	uint64_t lru;
	struct tc_xev ready;	/* on demand: its copy / last use on the GPU */
};

/* _WAIT: a staging worker, nothing of its own in flight, waits for the
 * dependencies of its next job (a copy, an op, pinned space); _CALL: an
 * acquire, release or detach that kept the caller TC_TL_CALL_NS or longer
 * (on a GPU, in the driver's calls: the caller issues the plan's NVMe jobs) */
#define TC_TL_CALL_NS	100000
enum tc_tl_kind {
	TC_TL_H2D, TC_TL_D2H, TC_TL_NVME_RD, TC_TL_NVME_WR, TC_TL_COMPUTE,
	TC_TL_HOSTOP, TC_TL_STALL, TC_TL_NVME_RD_WAIT, TC_TL_NVME_WR_WAIT, TC_TL_CALL, TC_TL_NR,
};

/* what an NVMe wait span waited for last: a plan op (TC_TL_WHY_OP + its
 * kind, of tensor why_id), an op's end (access why_id), copies, or the
 * other worker's jobs (a disk taking turns) */
enum { TC_TL_WHY_NONE, TC_TL_WHY_COPIES, TC_TL_WHY_HOSTOP, TC_TL_WHY_COMPUTE, TC_TL_WHY_TURN,
       TC_TL_WHY_OP };

struct tc_tl_span {
	uint8_t kind;
	uint8_t lane;		/* of an NVMe job: its slot among those in flight; of a
				 * copy: 1 on the gated copies' stream */
	uint8_t why;		/* NVMe wait: TC_TL_WHY_* */
	uint32_t id;		/* tensor, or access for compute */
	uint32_t why_id;
	uint64_t t0, t1;	/* host ns (resolved at step end for device spans) */
	void *ev0, *ev1;	/* device timing events, until resolved */
};

struct tencache_cache {
	struct tencache *tc;
	struct tencache_cache_params p;
	int host_mode;
	int frozen, in_step, planned, want_plan, reload, skip_learn;
	int any_room;			/* tensor_host: room from any value (between steps) */
	uint64_t od_max_op;		/* the learnt step's largest GPU op, for on-demand
					 * placement (od_galloc); 0: none learnt */
	int no_plan;			/* planning failed: stay on demand */
	uint64_t frag_slack;		/* GPU bytes kept out of plans */
	uint64_t pfrag_slack;		/* pinned bytes kept out of plans */
	int pinned_enomem;		/* the last -ENOMEM was the pinned arena's */
	uint64_t pinned_over;		/* pinned_place: bytes its layout needs past the pool */
	unsigned pslack_tries;		/* plans made again for the pinned layout */
	/* where pinned_place's lowest order first reached past the pool: its
	 * range's accesses, from..to, and the bytes past it (0: unknown) */
	uint32_t pover_from, pover_to;
	uint64_t pover;
	/* pinned room kept out of plans over some accesses only (setup.c
	 * pinned_cap_make), before any out of the whole step (pfrag_slack) */
#define TC_PINNED_CUTS 16
	struct tc_pcut {
		uint32_t from, to;	/* accesses; to < from: it wraps */
		uint64_t cap;		/* the pinned bytes there at most */
	} pcut[TC_PINNED_CUTS];
	unsigned nr_pcut;
	uint64_t *pcapv;		/* the plan's per-access pinned capacity, or NULL */
#define TC_GPU_CLASSES 16
	struct tencache_size_count ghist[TC_GPU_CLASSES];	/* the plan's GPU slabs */
	unsigned nr_ghist;
	/* a static GPU layout (setup.c plan_place), or NULL: the arena places */
	int64_t *op_goff;		/* per plan op: FETCH/ALLOC offset, else -1 */
	int64_t *start_goff;		/* per tensor: its offset in the start set */
	/* the same for the pinned pool with an NVMe tier (setup.c pinned_place) */
	int64_t *op_poff;		/* per plan op: STAGE_IN/PALLOC offset, else -1 */
	int64_t *start_poff;
	int playout_failed;		/* a pinned range was not free: best fit from now on */
	uint32_t nr, cap;
	struct tc_tstate *t;
	uint64_t tick;

	struct tc_dev *dev;
	void *h2d, *d2h;
	void *gstream;			/* gated FETCHes' copies (cache.c, "gated copies") */
	void *sstream;			/* staging jobs' device deps (snapshots) */
	/*
	 * Waits of host acquires that did not wait (TENCACHE_ACQ_NOWAIT): the
	 * stream waits for the copies, then signals ready_h's next instance
	 * for the op (in order: done up to k means every op up to k).
	 */
	void *rstream;
	struct tc_hev ready_h;
	void *cstream_last;		/* the caller's stream of the latest GPU op */
	int cstream_used;
	void *step_ev;
	struct tc_sorder sorder[TC_SORDER_NR];	/* stream order (cache.c) */
	uint32_t nr_sorder;
	uint64_t sclock;		/* decision clock: acquires made */
	struct tencache_arena *garena;
	int garena_shaped;		/* laid out for a plan (load_start) */
	int garena_stuck;		/* shaped, and cleared on demand with bytes
					 * still in use: not cleared again */
	struct tencache_pool *pool;
	char *pbase;
	struct tencache_arena *parena;
	struct tencache_swap *swap;
	struct tencache_stage *stage;
	int nvme_fd;
	double bw[4];
	double duplex_bw;	/* H2D + D2H both at once; 0: the planner's figure */
	double nvme_duplex_bw;	/* NVMe read + write at once; 0: independent */
	uint64_t plan_gpu_bytes;	/* the GPU bytes the plan was made for */
	uint64_t plan_pinned_bytes;	/* the same for the pinned pool */

	/*
	 * Staging workers, one per direction (reads, writes), each with a
	 * queue and a ring of its own (the reader's is c->stage, which the
	 * caller's synchronous transfers share while the workers are idle),
	 * and the settler of pinned space (PALLOC, no I/O): cache.c
	 */
#define TC_SJ_READ	0
#define TC_SJ_WRITE	1
#define TC_SJ_SETTLE	2
#define TC_SJ_NR	3
	pthread_t sthread[TC_SJ_NR];
	int sthread_on, sexit;		/* workers started */
	pthread_mutex_t slock;
	pthread_cond_t scond;
	struct tc_sjob *shead[TC_SJ_NR], *stail[TC_SJ_NR];
	unsigned sbusy[TC_SJ_NR];	/* jobs taken by a worker, not yet signalled */
	/* the disk takes turns (tc_disk_takes_turns on the cache's rates):
	 * reads and writes are not in flight at once. disk_dir: the worker
	 * whose jobs are in flight (-1: none), disk_last the last one to;
	 * disk_want: a worker waits for its turn, and the other adds no job
	 * meanwhile (under slock) */
	bool disk_turns;
	int disk_dir, disk_last;
	uint8_t disk_want[2];
	/* jobs in flight per worker, and the jobs started while the other's
	 * were (atomics; tests read them) */
	unsigned disk_fly[2];
	uint64_t disk_both;
	/* under slock: transfers in flight per direction (a worker's, a
	 * synchronous one), since disk_t0[w] (st's disk_busy_ns), both since
	 * disk_both_t0; the disk's figures at the last step's end
	 * (slow_disk_check) */
	unsigned disk_on[2];
	uint64_t disk_t0[2], disk_both_t0;
	uint64_t disk_prev[5];
	uint64_t sq_det_dep[TC_SJ_NR];	/* the last job's det_dep (cache.c det_pending) */
	/* the jobs' device events, made and destroyed by the caller only and
	 * handed back by the workers once synced (cache.c sev_get): under
	 * slock; sev_cap >= every one made, so a worker's put never grows it */
	void **sev;
	uint32_t sev_nr, sev_cap, sev_made;
	struct tencache_stage *wstage;	/* the writer's */
	int stage_err;

	/* profile and plan */
	struct tc_trace rec;		/* the step being profiled: accesses */
	struct tc_trace trace;		/* the learnt step */
	struct tc_plan plan;
	struct tc_plan_cfg pcfg;	/* the configuration plan was made with */
	/* the pinned layout running, laid out clear of ranges still in use
	 * (pinned_place): the residencies that met such ranges, and those it
	 * put over one all the same (0, 0: not laid out so) */
	uint32_t pin_soft[2];
	int have_plan;
	int ours_no_layout;		/* for this trace: the ZeRO-like plan ran */
	uint8_t laid_out;		/* the plan running was laid out by the planner */
	/* the laid-out plan against the executor's own, timed (setup.c) */
	uint8_t trial;			/* TC_TRIAL_* */
	uint8_t trial_first;		/* laid out first (1) or the own plan */
	uint8_t trial_best;		/* decided: 0 own, 1 laid out, 2 the model's */
	uint32_t trial_steps;		/* steps begun on the candidate running */
	uint64_t trial_ns[2];		/* their step times: own, laid out */
	uint64_t trial_extra[2];	/* tc_exec_test_trial: added to those */
	/* the room kept out of plans (frag_slack, pfrag_slack) each ran in
	 * (own, laid out) and the trial began with: a candidate that re-plans
	 * with more room must not take it from the other */
	uint64_t trial_room[3][3];
	uint8_t trial_test;		/* tc_exec_test_trial: time whenever both exist */
	uint8_t layout_failed;		/* ... and its GPU ranges were not free once */
	uint32_t profiled;
	struct tc_xev *opev, *accev;
	uint32_t nacc_ev;
	uint64_t *hev_words;		/* their host events' mapped words (dev hev_map) */

	/* GPU ranges freed by DROP, pinned ones by PDROP */
	struct tc_freed gfreed, pfreed;
	uint64_t rec_clock;		/* device-event records made (tc_xev.rec_at) */
	int32_t *sdeps;			/* a staging job's dependencies, gathered */
	uint32_t nr_sdeps, cap_sdeps;


	/* profiling: the measured compute time of each op */
	struct tc_prof {
		uint32_t acc;		/* the op's END access in rec */
		void *a, *b;		/* timing events around its kernels */
		uint64_t host_ns;	/* host mode: measured in the caller */
	} *prof;
	uint32_t nprof, cap_prof;
	uint64_t last_acq_t;

	/* the step in progress */
	uint32_t pos;
	uint32_t issued_to;		/* the plan's ops issued up to this access */
	int op_open;			/* 0 none, 1 acquiring, 2 released */
	int op_host;
	uint32_t op_deferred;		/* the open op's waits on rstream */
	uint32_t op_first_acc;
	uint32_t *op_ids, nr_op_ids, cap_op_ids;	/* the open op's tensors */
	struct tc_sdep *op_hw;		/* the open host op's host waits (NOWAIT) */
	uint32_t nr_op_hw, cap_op_hw;

	/*
	 * Host ops detached by tencache_op_detach: their accesses' host events
	 * are signalled by tencache_op_done, from any thread (dlock). Record k
	 * has token det_base + k + 1; done records are dropped from the front
	 * when a step begins, so an op may outlive its step.
	 */
	pthread_mutex_t dlock;
	pthread_cond_t dcond;
	struct tc_detached {
		uint32_t first, end;	/* the op's accesses */
		int done;		/* atomic */
		int in_tl;		/* its span is on the timeline */
		uint64_t t0, t1;	/* detached, done (timeline) */
		uint64_t ready;		/* ready_h's instance, 0: none deferred */
		struct tc_sdep *hw;	/* host events its runner waits for too */
		uint32_t nr_hw;
		uint64_t t_run;		/* its tensors in place (tencache_op_wait) */
		uint32_t prof_end;	/* its end in profile prof_gen, or UINT32_MAX */
		uint32_t prof_gen;
	} *det;
	uint32_t nr_det, cap_det, det_live;
	uint64_t det_base;
	uint64_t det_done_to;	/* every token up to it done (det_pending) */
	/*
	 * Detached host ops of the step being profiled: the learnt step gets
	 * their measured run times (the caller's release gives none), and the
	 * planner's model runs them beside the GPU (TC_PLAN_HOST_ASYNC).
	 * Under dlock: tencache_op_done writes from any thread.
	 */
	uint64_t *det_ns;		/* per access of the profile: its op's run, 0 */
#define TC_DET_RUNNING	UINT64_MAX	/* ... detached, not done yet */
	uint32_t det_ns_n, det_ns_cap;
	uint32_t prof_gen;		/* profiled steps begun */
	uint32_t det_prof;		/* the profile prof_gen detached host ops */
	uint64_t det_prev_t1;		/* the previous op's end: ops run one at a time */
	uint64_t step_t0, last_stall, last_acq, last_hits;
	uint64_t last_gpu_stall, last_gpu_hits;

	/* GPU-timeline hits and stalls: probes resolved at quiesce */
	struct tc_gprobe *gp;
	uint32_t gp_nr, gp_cap, gp_acq;

	/* gated copies waiting for their host ops; polled once one is done */
	struct tc_gated *gq;
	uint32_t gq_nr, gq_cap;
	uint64_t det_done_n;		/* host ops done (atomic) ... */
	uint64_t gq_seen;		/* ... when the queue was last polled */

	/* copy batches (H2D, D2H), filled inside issue_at only */
	struct tc_cbatch cb[2];
	int cb_on, cb_err;
	struct tc_bev *bev_free, *bev_all;	/* their shared records */
	uint64_t cb_ns[2];	/* CPU ns per copy: batched, one by one (cb_copy) */
	uint64_t cb_runs;

	/* timeline of the last step */
	int timeline_on;
	struct tc_tl_span *tl;
	uint32_t tl_nr, tl_cap;
	void **tl_evs;			/* timing event pool */
	uint32_t tl_evs_nr, tl_evs_used;	/* (also the GPU-timeline probes) */

	struct tencache_cache_stats st;

	/*
	 * Test only (tc_exec_test_lag): host mode's compute on a host stream
	 * of its own, which lags the caller as a GPU's does; NULL: compute
	 * runs on the caller's thread. Copies may lag too (copy_lag_ns).
	 */
	int lag_on;
	void *lag_s;
	uint32_t test_fail[2];		/* tc_exec_test_fail: pinned, GPU countdowns */
	uint32_t test_taken;		/* tc_exec_test_taken: countdown */
	uint32_t test_swap_full;	/* tc_exec_test_swap_full: countdown */
	uint32_t test_place_fail;	/* tc_exec_test_place_fail: countdown */
	uint64_t test_pinned_pad;	/* tc_exec_test_pinned_pad: bytes */
	unsigned test_reject;		/* tc_exec_test_reject: TC_TEST_* */
	uint64_t kernel_lag_ns, copy_lag_ns;
	uint64_t read_lag_ns;		/* tc_exec_test_read_lag */
	unsigned sj_fly_max[2];		/* tc_exec_test_fly_max: reader's, writer's */
};

/* cache.c */
/* Drop a reference to a batch's shared record (NULL: none). */
void tc_exec_bev_put(struct tencache_cache *c, struct tc_bev *b);
int tc_exec_quiesce(struct tencache_cache *c);
int tc_exec_drain(struct tencache_cache *c);
int tc_exec_gate_flush(struct tencache_cache *c);
void tc_exec_wait_detached(struct tencache_cache *c);
int tc_exec_od_to_pinned(struct tencache_cache *c, uint32_t id);
int tc_exec_od_clear_gpu(struct tencache_cache *c);
int tc_exec_od_plain_gpu(struct tencache_cache *c);
int tc_exec_copy_sync(struct tencache_cache *c, uint32_t id, int dir);
int tc_exec_swap_slot(struct tencache_cache *c, uint32_t id, int keep_homed);
int tc_exec_movable(const struct tencache_cache *c, uint32_t id);
void tc_exec_swap_full_err(struct tencache_cache *c, uint32_t id);
int tc_exec_stage_sync(struct tencache_cache *c, uint32_t id, int write);
int tc_exec_galloc(struct tencache_cache *c, uint32_t id);
void tc_exec_sorder_forget(struct tencache_cache *c);
int tc_exec_palloc(struct tencache_cache *c, uint32_t id);
/* Pinned space for a value of the plan's start set (at its laid-out place). */
int tc_exec_palloc_start(struct tencache_cache *c, uint32_t id);
int tc_exec_prof_resolve(struct tencache_cache *c);
int tc_exec_gpu_resolve(struct tencache_cache *c);
void *tc_exec_stage_reader(void *arg);
void *tc_exec_stage_writer(void *arg);
void *tc_exec_settler(void *arg);

/*
 * Test hooks (cache.c; tests/runtime/cache_lag.c, linked statically): not
 * part of the API. tc_exec_test_lag, on a host-mode cache before its first
 * step, gives it a lagging compute stream: acquires' waits for copies are
 * queued on it, releases' compute_ns run on it, and the events that order
 * later copies after the compute are recorded on it, as on a GPU. Each copy
 * is delayed by copy_ns on its stream. tc_exec_test_kernel queues a "kernel"
 * on that stream: kernel_ns of lag, then memcpy(dst, src, len) (dst or src
 * an acquired "GPU" pointer); src must stay as it is until the stream runs
 * it (tencache_cache_sync, or the step's end).
 */
int tc_exec_test_lag(struct tencache_cache *c, uint64_t kernel_ns, uint64_t copy_ns);
/* Test hook: each NVMe read of a staging worker starts ns late. 0, -EINVAL. */
int tc_exec_test_read_lag(struct tencache_cache *c, uint64_t ns);
/*
 * Test hook: the laid-out plan and the executor's own are timed wherever
 * both exist (not only within the model's margin), and each one's timed
 * step counts extra ns more (to make either the faster). 0, -EINVAL.
 */
int tc_exec_test_trial(struct tencache_cache *c, uint64_t own_extra_ns, uint64_t laid_extra_ns);
int tc_exec_test_kernel(struct tencache_cache *c, void *dst, const void *src, uint64_t len);
/* Counts the device calls of a cache (after its first step) into
 * calls[TC_DC_NR], and with ns non-NULL the wall ns inside them into
 * ns[TC_DC_NR] (dev_count.c); tools/decide.c reports them per decision. */
int tc_exec_test_count(struct tencache_cache *c, uint64_t *calls, uint64_t *ns);
/* Makes the plan's n-th allocating op from now (n >= 1) in the GPU arena
 * (gpu: FETCH, ALLOC) or the pinned pool (STAGE_IN, PALLOC) fail with
 * -ENOMEM once, as a fragmented arena would: the re-plan path
 * (tests/runtime/cache_replan.c). n 0: off. -EINVAL before the first
 * tensor_host or step (no GPU arena yet). */
int tc_exec_test_fail(struct tencache_cache *c, int gpu, uint32_t n);
/* Makes the plan's n-th pinned allocation from now (n >= 1) at a laid-out
 * offset (STAGE_IN, PALLOC) find its range taken for good, as a faulty
 * layout would: palloc_at's error path (the plan stops, best fit places
 * from then on; tests/runtime/cache_replan.c). n 0: off. -EINVAL: no cache. */
int tc_exec_test_taken(struct tencache_cache *c, uint32_t n);
/* Makes the n-th NVMe-homed value from now (n >= 1) that a new plan gives
 * swap space for good find no trade (setup.c slot_for_good), as a swap
 * left full by on demand would: the plan is dropped and the cache runs on
 * demand (tests/runtime/cache_replan.c). n 0: off. -EINVAL: no cache. */
int tc_exec_test_swap_full(struct tencache_cache *c, uint32_t n);
/* Makes the n-th layout of a plan's pinned ranges from now (n >= 1) find
 * no room, as a fragmented pool would: the plan is made again with more
 * room (setup.c pinned_place; tests/runtime/cache_trial.c). n 0: off.
 * -EINVAL: no cache. */
int tc_exec_test_place_fail(struct tencache_cache *c, uint32_t n);
/* Makes every plan from now fail its check, as a planner bug would: the
 * executor's own (TC_TEST_REJECT_OWN), the planner's laid-out one
 * (TC_TEST_REJECT_LAID); TC_TEST_LAID_INLINE builds the laid-out plan on
 * the caller's thread, as where no thread starts (tests/runtime/
 * cache_reject.c). 0: off. -EINVAL: no cache or an unknown bit. */
#define TC_TEST_REJECT_OWN	0x1u
#define TC_TEST_REJECT_LAID	0x2u
#define TC_TEST_LAID_INLINE	0x4u
int tc_exec_test_reject(struct tencache_cache *c, unsigned flags);
/* The most NVMe jobs the reader and the writer have had in flight at once
 * (the disk's queue kept full from one tensor to the next: stage_main).
 * -EINVAL: no cache or no pointer. */
int tc_exec_test_fly_max(struct tencache_cache *c, unsigned *rd, unsigned *wr);
/* *n: the device events made or destroyed on a staging worker's thread so
 * far (tc_dev_on_worker; 0 unless a bug). -EINVAL: no cache or no pointer. */
int tc_exec_test_worker_lifecycle(struct tencache_cache *c, uint64_t *n);
/* The pinned layout running (pinned_place): *met, its residencies whose
 * range met ranges still in use in the timing model (their last users
 * running on); *over, those placed over one all the same; 0 and 0 where it
 * was not laid out clear of them. -EINVAL: no cache or no pointer. */
int tc_exec_test_pinned_clear(struct tencache_cache *c, unsigned *met, unsigned *over);
/* The pinned layouts from now give each staged range bytes more room than
 * its tensor, as a coarser pool would: the plans' ranges reach past the
 * pool where it holds the most of them (tests/runtime/cache_pinned_room.c).
 * 0: off. -EINVAL: no cache, or bytes not a multiple of 4096. */
int tc_exec_test_pinned_pad(struct tencache_cache *c, uint64_t bytes);

/* setup.c */
struct tc_plan tc_exec_plan_run(const struct tencache_cache *c);
int tc_exec_freeze(struct tencache_cache *c);
int tc_exec_learn(struct tencache_cache *c);
int tc_exec_enter_plan(struct tencache_cache *c);
int tc_exec_load_start(struct tencache_cache *c);
int tc_exec_plain_gpu(struct tencache_cache *c);
int tc_exec_leave_plan(struct tencache_cache *c, const char *why);
int tc_exec_replan(struct tencache_cache *c, const char *why, int gpu);
/* At a step's begin: times the plan candidate on trial, and switches (setup.c). */
int tc_exec_trial_tick(struct tencache_cache *c);
int tc_exec_step_sync(struct tencache_cache *c);
int tc_exec_flush(struct tencache_cache *c);

/* timeline.c */
void tc_exec_timeline_step(struct tencache_cache *c);
/* a span the host timed; lane: an NVMe job's slot (its own track: the
 * jobs in flight at once overlap), else 0 */
void tc_exec_timeline_add(struct tencache_cache *c, int kind, unsigned lane, uint32_t id,
			  uint64_t t0, uint64_t t1);
/* a staging worker's wait for job id's dependencies (TC_TL_NVME_*_WAIT),
 * with what it waited for last (TC_TL_WHY_*) */
void tc_exec_timeline_wait(struct tencache_cache *c, int kind, uint32_t id, unsigned why,
			   uint32_t why_id, uint64_t t0, uint64_t t1);
/* brackets an async span on stream s: call before (start) and after (end) */
int tc_exec_timeline_mark(struct tencache_cache *c, void *s, int kind, uint32_t id,
			  int end);
int tc_exec_timeline_resolve(struct tencache_cache *c);
/* a timing event from the step's pool (free again at the next step) */
int tc_exec_timing_event(struct tencache_cache *c, void **e);
void tc_exec_timeline_free(struct tencache_cache *c);
/* the timing model's step for plan p alone as a trace file at path, as it
 * is written beside the executor's (pid 2; tencache-bench replay
 * --model-only --timeline). 0, -errno of the file, or tc_sim_run_spans' */
int tc_timeline_model_file(const char *path, const struct tc_trace *tr,
			   const struct tc_plan_cfg *cfg, const struct tc_plan *p);

#endif
