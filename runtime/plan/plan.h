/* plan.h - internal API of the pure planner: step traces, the transformer
 * trace generator, tier placement + prefetch schedule (ours and baseline
 * policies), the schedule checker and the CPU-only timing model.
 *
 * Everything here is pure (no CUDA, no I/O) except tc_model_from_hf_file().
 * Every int-returning function returns 0 (or a count / id) or -errno.
 *
 * Trace semantics. A step is a sequence of accesses grouped into ops: an op
 * is the run of accesses up to and including one flagged TC_ACC_END; all its
 * tensors are held together while the op computes for the END access's
 * compute_ns (other accesses carry 0). An op runs either on the GPU (tensors
 * must be GPU-resident) or on the host (TC_ACC_HOST: tensors must be in
 * pinned memory, e.g. a CPU Adam step). The step repeats (cyclic trace).
 */
#ifndef TENCACHE_PLAN_H
#define TENCACHE_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- trace model -------------------------------------------------------- */

enum tc_role {
	TC_ROLE_PARAM_FP16,
	TC_ROLE_PARAM_BF16,
	TC_ROLE_GRAD,
	TC_ROLE_MASTER_FP32,
	TC_ROLE_OPT_STATE,
	TC_ROLE_ACTIVATION,
	TC_ROLE_NR,
};

enum tc_phase { TC_PHASE_FWD, TC_PHASE_BWD, TC_PHASE_OPT, TC_PHASE_NR };

#define TC_ACC_READ	0x1u	/* needs the tensor's current value */
#define TC_ACC_WRITE	0x2u	/* writes it (WRITE alone: value overwritten) */
#define TC_ACC_HOST	0x4u	/* op runs on the CPU over pinned memory */
#define TC_ACC_END	0x8u	/* last access of its op; compute_ns follows */
#define TC_ACC_MASK	0xfu

struct tc_tensor {
	uint64_t bytes;
	uint8_t role;		/* enum tc_role */
	uint8_t dirty;		/* written during the step (set by add_access) */
};

struct tc_access {
	uint32_t tensor;
	uint8_t phase;		/* enum tc_phase */
	uint8_t flags;		/* TC_ACC_* */
	uint64_t compute_ns;	/* compute after this access; END accesses only */
};

struct tc_trace {
	struct tc_tensor *tensors;
	struct tc_access *acc;
	uint32_t nr_tensors, nr_acc;
	uint32_t cap_tensors, cap_acc;
};

int tc_trace_init(struct tc_trace *tr);
void tc_trace_free(struct tc_trace *tr);
/* Returns the new tensor id (>= 0) or -errno. */
int tc_trace_add_tensor(struct tc_trace *tr, uint64_t bytes, enum tc_role role);
int tc_trace_add_access(struct tc_trace *tr, uint32_t tensor,
			enum tc_phase phase, unsigned flags, uint64_t compute_ns);
/* Structural checks: ids, flags, op grouping (END last, one tensor once per
 * op, no mixed host/GPU op), compute only on END. */
int tc_trace_validate(const struct tc_trace *tr);
uint64_t tc_trace_bytes(const struct tc_trace *tr, int role /* -1: all */);
uint64_t tc_trace_compute_ns(const struct tc_trace *tr);
/* Largest sum of bytes held by one GPU op (the smallest workable budget). */
uint64_t tc_trace_max_op_bytes(const struct tc_trace *tr);
/* the same with each tensor's bytes rounded up to align (an arena's span) */
uint64_t tc_trace_max_op_span(const struct tc_trace *tr, uint64_t align);
/* the same over host ops (CPU optimizer): pinned memory held at once */
uint64_t tc_trace_max_host_op_bytes(const struct tc_trace *tr);

/* ---- transformer trace generator (model.c) ------------------------------ */

enum tc_arch { TC_ARCH_OPT, TC_ARCH_LLAMA };

struct tc_model {
	char name[64];
	uint8_t arch;		/* enum tc_arch */
	uint8_t tied;		/* lm_head shares the token embedding */
	uint8_t bf16;		/* params in bf16 rather than fp16 */
	uint32_t vocab, hidden, layers, heads, kv_heads, ffn, max_pos;
};

struct tc_gen_cfg {
	uint32_t batch, seq;
	double tflops;		/* sustained GPU matmul rate, TFLOP/s */
	double adam_params_per_s; /* optimizer rate (host or GPU) */
	bool opt_on_gpu;	/* Adam on the GPU instead of the CPU */
	/* CPU Adam beside backward, as tencache.offload(overlap=True) runs it:
	 * the last layers' Adam ops right after their backward, as many as the
	 * host finishes within the GPU's backward, then the rest in forward
	 * order (what the next forward needs first). Replay their host ops
	 * detached (TC_PLAN_HOST_ASYNC). opt_split >= 0: that many last layers
	 * get theirs during backward instead (a caller may search it with
	 * tc_sim_run: the GPU's backward is often longer than its compute). */
	bool opt_overlap;
	int32_t opt_split;
	/* > 0: instead of a split, the order tencache.offload's worker runs
	 * them in (overlap.py): whenever it is free, the queued layer that the
	 * next forward needs first, with the GPU's backward taking this many ns
	 * per layer; what is left when backward ends, in forward order */
	uint64_t opt_pace_ns;
};

/* Fills a default generator config (batch 8, seq 1024, 400 TFLOP/s, CPU Adam). */
void tc_gen_cfg_default(struct tc_gen_cfg *g);
/* Built-in configs: opt-1.3b opt-6.7b opt-13b llama-2-7b llama-2-13b. */
int tc_model_builtin(const char *name, struct tc_model *m);
const char *const *tc_model_builtin_names(void);
/* HF config.json (model_type opt / llama / mistral); from a string or file. */
int tc_model_from_hf_json(const char *json, struct tc_model *m);
int tc_model_from_hf_file(const char *path, struct tc_model *m);
uint64_t tc_model_params(const struct tc_model *m);
/* Appends one training step (forward, backward, optimizer) to an empty trace. */
int tc_model_trace(const struct tc_model *m, const struct tc_gen_cfg *g,
		   struct tc_trace *tr);

/* ---- planner ------------------------------------------------------------ */

enum tc_policy {
	TC_POLICY_OURS,		/* Belady/MIN eviction + earliest safe prefetch */
	TC_POLICY_LRU,		/* LRU eviction, fetch on demand */
	TC_POLICY_ZERO,		/* ZeRO-Infinity-like: release after use, prefetch bucket */
	TC_POLICY_10CACHE,	/* 10Cache: table-order resident prefix + MRU window */
	TC_POLICY_NR,
};

enum tc_tier { TC_TIER_GPU, TC_TIER_PINNED, TC_TIER_NVME };

enum tc_link { TC_LINK_H2D, TC_LINK_D2H, TC_LINK_NVME_RD, TC_LINK_NVME_WR, TC_LINK_NR };

#define TC_PLAN_ACYCLIC	0x1u	/* one-shot trace from an empty GPU (tests) */
#define TC_PLAN_HOST_ASYNC 0x2u	/* host ops run detached, one at a time on a
				 * thread of their own beside the GPU */
#define TC_PLAN_HOST_FIFO 0x10u	/* ... run in the order they were detached:
				 * the executor's caller never waits for
				 * their inputs (TENCACHE_CACHE_DETACH_FIFO) */
#define TC_PLAN_PURE_MIN 0x4u	/* ours evicts by next use alone, small tensors
				 * too (Belady's rule as published) */
/* Ours plans the GPU arena's layout too: every residency gets an offset in
 * [0, gpu_bytes) (TC_PLAN_ALIGN-aligned sizes), and a miss evicts one
 * contiguous window of residents (the one whose next uses are furthest
 * off, by the sum of 1 / distance) instead of single victims. The plan
 * then needs no layout pass and no room for fragmentation: plan->op_goff
 * and plan->start_goff say where everything goes. */
#define TC_PLAN_LAYOUT	0x8u
/* Ours with NVMe: pinned_horizon and pinned_stage_out (>= 0) are where
 * the search starts, and both are searched as if they were < 0 (the
 * executor keeps the first plan's while it looks for a layout, then
 * searches them again) */
#define TC_PLAN_HORIZON_SEARCH 0x20u
#define TC_PLAN_HORIZON_DIV	64u	/* pinned_horizon's unit: 1/64 of a step */
/* Where the pinned level issues a dirty victim's write to NVMe. With the
 * eviction, its space waits for the write; from its last write on (the
 * value is final then), the disk can take it while the value is still
 * read, and the read that needs the space does not wait for it. */
enum tc_stage_out {
	TC_STAGE_OUT_EVICT,	/* at the eviction (the read that takes the space) */
	TC_STAGE_OUT_WRITTEN,	/* right after the value's last write */
	TC_STAGE_OUT_HALFWAY,	/* halfway between the two */
	TC_STAGE_OUT_NR,
};
#define TC_PLAN_ALIGN	256u

struct tc_plan_cfg {
	uint64_t gpu_bytes, pinned_bytes, nvme_bytes; /* nvme 0: no NVMe tier */
	double bw[TC_LINK_NR];	/* bytes per second */
	/* H2D + D2H together when both directions run at once (PCIe loses
	 * to duplex overhead); 0: the two are independent */
	double duplex_bw;
	/* the same for NVMe read + write (one disk serves both); 0: independent */
	double nvme_duplex_bw;
	uint64_t link_lat_ns;	/* fixed cost per copy */
	enum tc_policy policy;
	unsigned flags;		/* TC_PLAN_* */
	uint64_t zero_bucket_bytes;	/* ZeRO prefetch bucket (default 100 MB) */
	uint64_t zero_persist_bytes;	/* ZeRO persistence threshold (200 KB) */
	uint32_t tencache_window;	/* 10Cache window in tensors (30) */
	/* Ours: GPU bytes kept out of the MIN cache so prefetches can start
	 * before the previous op frees its victims. < 0: chosen by simulating
	 * a few candidates (default); 0: pure MIN, Belady-optimal hit count. */
	int64_t reserve_bytes;
	int64_t pinned_reserve_bytes;	/* the same for pinned over NVMe */
	/* Ours with NVMe: the pinned level's victims are the oldest-used of
	 * those whose next use is within pinned_horizon / TC_PLAN_HORIZON_DIV
	 * of a step of the furthest (horizon_victim in plan.c). < 0: chosen
	 * by simulating a few (default); 0: MIN. Dead values (overwritten
	 * before their next read) go first, the oldest-used first. */
	int32_t pinned_horizon;
	/* Ours with NVMe: where a dirty pinned victim's stage-out is issued
	 * (enum tc_stage_out). < 0: chosen by simulating each (default) */
	int32_t pinned_stage_out;
	/* Ours and LRU: per access, the GPU bytes there (each <= gpu_bytes);
	 * NULL: gpu_bytes throughout. The executor lowers it where the plan's
	 * GPU allocations would not lay out in the arena. */
	const uint64_t *gpu_cap;
	/* With NVMe, the same for the pinned pool: per access, the pinned
	 * bytes there (each <= pinned_bytes); NULL: pinned_bytes throughout.
	 * The executor lowers it where the plan's pinned ranges do not lay
	 * out in the pool, rather than the whole step's. */
	const uint64_t *pinned_cap;
	/* threads that build and simulate the search's candidate plans at
	 * once (tc_plan_build); the plan is the same for any count. 0: the
	 * CPUs this thread may run on, at most TC_PLAN_THREADS_MAX */
	uint32_t threads;
};

#define TC_PLAN_THREADS_MAX 16

/* Schedule operations, issued by the executor when it reaches access pos. */
enum tc_op_kind {
	TC_OP_FETCH,		/* pinned -> GPU (H2D) */
	TC_OP_ALLOC,		/* GPU space for a tensor about to be overwritten */
	TC_OP_WRITEBACK,	/* GPU -> pinned (D2H) */
	TC_OP_DROP,		/* free the GPU copy */
	TC_OP_STAGE_IN,		/* NVMe -> pinned */
	TC_OP_PALLOC,		/* pinned space for a tensor about to be overwritten */
	TC_OP_STAGE_OUT,	/* pinned -> NVMe */
	TC_OP_PDROP,		/* free the pinned copy */
	TC_OP_NR,
};

/* A dependency is the latest issued instance of an event: >= 0 an op index,
 * < 0 the compute of access -(dep + 1) (its op's end). "Latest instance"
 * makes the cyclic table self-describing: an event later in table order
 * than the waiter means the previous step's instance. */
struct tc_op {
	uint32_t tensor;
	uint8_t kind;		/* enum tc_op_kind */
	uint8_t need_next;	/* the need access is in the next step */
	/* FETCH of a value a host op wrote: not waited for at pos. The
	 * executor takes its space and its stream waits at pos, and queues
	 * the copy once the host op is done (at the latest where something
	 * waits for the copy), so it never holds the caller or the H2D stream.
	 * Held, it is out of the H2D stream's order: only its host dependency
	 * orders it after the op, only waits for it order its readers after
	 * it (tc_plan_hb_check models it so) */
	uint8_t gated;
	uint32_t pos;		/* issued when the executor reaches access pos */
	int32_t need;		/* access that waits for it, -1: none */
	uint32_t dep_first, nr_deps; /* into plan->deps */
};

struct tc_plan_stats {
	uint32_t reads, hits;		/* GPU reads needing data, and hits */
	uint64_t read_bytes, hit_bytes;
	uint64_t link_bytes[TC_LINK_NR]; /* per step */
	uint32_t nr_gpu_resident, nr_pinned_resident, nr_nvme;
	uint64_t gpu_resident_bytes, pinned_resident_bytes, nvme_bytes;
	uint64_t gpu_peak, pinned_peak;	/* at issue points */
	uint32_t steady_iters;		/* steps until the cyclic state repeated */
	uint64_t reserve_bytes;		/* prefetch reserves used (ours) */
	uint64_t pinned_reserve_bytes;
	uint32_t pinned_horizon;	/* in 1/TC_PLAN_HORIZON_DIV of a step; 0: MIN */
	uint32_t pinned_stage_out;	/* enum tc_stage_out (ours with NVMe) */
	uint64_t sim_step_ns;		/* simulated step time (auto reserve only) */
	bool reconciled;		/* no fixed point: table starts with fix-ups */
	bool cold_first;		/* victims whose last use is over preferred */
	bool laid_out;			/* TC_PLAN_LAYOUT: op_goff / start_goff set */
};

struct tc_plan {
	uint32_t nr_acc, nr_tensors, nr_ops, nr_deps;
	struct tc_op *ops;	/* sorted by pos; access i issues op_first[i]..op_first[i+1] */
	uint32_t *op_first;	/* nr_acc + 1 */
	int32_t *deps;
	uint32_t *wait_first;	/* nr_acc + 1, into wait_ops */
	uint32_t *wait_ops;	/* ops (latest instance) an access waits for */
	uint8_t *hit;		/* per access: 1 = GPU hit (resident before the op) */
	uint8_t *placement;	/* per tensor: enum tc_tier home */
	uint8_t *start_gpu;	/* per tensor: bit0 resident, bit1 dirty at step start */
	uint8_t *start_pinned;	/* same for pinned */
	/* TC_PLAN_LAYOUT (else NULL): per op, a FETCH / ALLOC's GPU offset
	 * (else -1); per tensor, its offset in the start set (else -1) */
	int64_t *op_goff, *start_goff;
	enum tc_policy policy;
	struct tc_plan_stats st;
};

void tc_plan_cfg_default(struct tc_plan_cfg *cfg); /* H200 link figures */
const char *tc_policy_name(enum tc_policy p);
const char *tc_op_name(enum tc_op_kind k);
int tc_plan_build(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		  struct tc_plan *plan);
void tc_plan_free(struct tc_plan *plan);
/* Tests: pick every victim by a scan of the residents, as before the heap
 * (plan.c heap_victim); the plans must come out the same. */
void tc_plan_test_victim_scan(bool on);
/* Replays the table over several steps from the start state; checks every
 * read finds valid data, holds last through their op, nothing valid is lost,
 * and GPU / pinned bytes never exceed the budgets; with a layout, that no
 * GPU range overlaps another resident's or leaves [0, gpu_bytes). 0 or -EINVAL (+ message
 * into err when given). */
int tc_plan_check(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		  const struct tc_plan *plan, char *err, size_t errlen);

/* ---- happens-before check (hb.c) ---------------------------------------- */

/* How the executor runs the plan for tc_plan_hb_check. alloc / free (both or
 * neither) place GPU ranges as the executor's arena does: op is the FETCH /
 * ALLOC's index, UINT32_MAX for the start set; without them every tensor
 * has a range of its own (reuse of space by another tensor is not checked). */
struct tc_hb_cfg {
	unsigned steps;		/* steps run from the start state (>= 1) */
	bool detach;		/* host ops detached (overlap), else inline */
	int (*alloc)(void *ctx, uint32_t tensor, uint32_t op, uint64_t bytes, uint64_t *off);
	int (*free)(void *ctx, uint32_t tensor, uint64_t off);
	void *ctx;
};

/* Runs the plan's table as the executor issues it (streams, waits on the
 * latest instances, deferred GPU frees, CPU syncs, detached host ops, gated
 * copies held for their host ops) and proves every conflicting pair of
 * memory accesses (pinned copies, GPU bytes) ordered under any timing. 0;
 * -EDEADLK (+ the pair into err) for an unordered pair, or a FETCH issued
 * again while its gated last instance may be held; -EINVAL, -EOPNOTSUPP
 * (NVMe ops), -ENOMEM, or alloc's error. */
int tc_plan_hb_check(const struct tc_trace *tr, const struct tc_plan *pl,
		     const struct tc_hb_cfg *cfg, char *err, size_t errlen);

/* ---- CPU-only timing model (sim.c) -------------------------------------- */

struct tc_sim_result {
	uint64_t step_ns;		/* steady-state step time */
	uint64_t compute_ns, stall_ns;	/* per step; compute: the GPU's, and
					 * the host ops' unless HOST_ASYNC */
	uint64_t host_ns;		/* HOST_ASYNC: the host ops' time per step */
	uint64_t link_bytes[TC_LINK_NR];
	uint64_t link_busy_ns[TC_LINK_NR];
	uint64_t gpu_peak, pinned_peak;	/* physical, in time */
	uint64_t max_wait_ns;		/* worst single op wait */
	/* with NVMe: the step's time with the disk neither reading nor
	 * writing, and its longest stretch (starting nvme_gap_at_ns in) */
	uint64_t nvme_idle_ns, nvme_gap_ns, nvme_gap_at_ns;
};

/* The rate of equal bytes read and written by taking turns: reads alone at
 * rd, then writes alone at wr (0 where either is unknown). */
static inline double tc_disk_turns_rate(double rd, double wr)
{
	return rd > 0 && wr > 0 ? 2 / (1 / rd + 1 / wr) : 0;
}

/* A disk that moves equal bytes both ways at once (dx) no faster than by
 * taking turns gains nothing from doing both: the timing model has it
 * serve its two queues in turn, and the replay's bound takes turns too. */
static inline bool tc_disk_takes_turns(double rd, double wr, double dx)
{
	return dx > 0 && rd > 0 && wr > 0 && dx <= tc_disk_turns_rate(rd, wr);
}

/* Replays nsteps (>= 2) steps of the table; reports the last one. Links are
 * FIFO streams in table order; an op starts when its deps are done, its
 * link is free and the memory it allocates has physically been freed. A
 * gated fetch starts when its deps are done, in the link's idle time. */
int tc_sim_run(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
	       const struct tc_plan *plan, unsigned nsteps,
	       struct tc_sim_result *res);

/* What the model's last step did, span by span, to set beside an executor's
 * timeline: a link op (what = its TC_LINK_*, id its tensor) from its start
 * (its last dur where its time was split among idle gaps) to its end, or an
 * op's compute (id its END access); ns from the step's start (a copy may
 * end after the step, or start before it). */
enum { TC_SIM_COMPUTE = TC_LINK_NR, TC_SIM_HOSTOP };
struct tc_sim_span {
	uint32_t what, id;
	int64_t t0, t1;
};
struct tc_sim_spans {
	struct tc_sim_span *v;	/* grown as needed; the caller frees v */
	uint32_t nr, cap;
	/* optional (the caller's, plan->nr_ops each): per op of the last
	 * step, when the host issued it and when it was done (a PDROP: when
	 * its last users were, and the space free), ns from the step's start */
	int64_t *op_issue, *op_done;
};
/* tc_sim_run, keeping the last step's spans in *sp (reused: emptied first) */
int tc_sim_run_spans(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		     const struct tc_plan *plan, unsigned nsteps, struct tc_sim_result *res,
		     struct tc_sim_spans *sp);

#endif
