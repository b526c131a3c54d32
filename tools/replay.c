/*
 * replay.c - tencache-bench replay: the main job. Generates the tensor trace
 * of one transformer training step from a model config (runtime/plan's
 * generator), then replays it through the real tensor cache (the public
 * trainer API) once per policy, side by side: step time, GPU hit rate, stall,
 * bytes per link, the planner's timing-model prediction (tc_sim_run) and the
 * bound max(compute, bytes moved / link bandwidth). Writes a JSON result, the
 * Perfetto timeline of our policy and a PNG plot (tools/plot_replay.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "tencache.h"
#include "plan/plan.h"
#include "exec/exec.h"	/* tc_timeline_model_file */
#include "bench.h"


extern char **environ;

#define MB	1e6
#define MAX_STEPS 1000

/* The embedded default: OPT-1.3B's shape scaled to ~85M parameters (1.3 GB
 * of fp16/fp32 state), so that host mode runs on a small CPU-only machine in
 * seconds. Batch 2: at batch 8 the scaled model's activations make its
 * largest op 64% of a 25% budget, where the GPU arena cannot be planned
 * without fragmenting (the full OPT-1.3B's is 38%). */
#define DEF_MODEL	"opt-1.3b"
#define DEF_HIDDEN	512
#define DEF_VOCAB	16384
#define DEF_BATCH	2

static const struct {
	const char *name;	/* as typed in --policies */
	unsigned pol;		/* enum tencache_policy */
	enum tc_policy tp;	/* the planner's twin */
} policies[] = {
	{ "ours", TENCACHE_POLICY_OURS, TC_POLICY_OURS },
	{ "lru", TENCACHE_POLICY_LRU, TC_POLICY_LRU },
	{ "zero", TENCACHE_POLICY_ZERO, TC_POLICY_ZERO },
	{ "10cache", TENCACHE_POLICY_10CACHE, TC_POLICY_10CACHE },
};
#define NR_POL (sizeof(policies) / sizeof(policies[0]))

static const char *const link_names[TC_LINK_NR] = { "H2D", "D2H", "NVMe-rd", "NVMe-wr" };

struct opts {
	const char *model, *out, *timeline, *plot, *nvme, *table;
	const char *gpu_budget, *pinned_budget, *nvme_budget;
	uint32_t layers, hidden, vocab;
	struct tc_gen_cfg gen;
	uint32_t steps, warmup, profile;
	double time_limit;	/* s, 0: none */
	bool host, have_bw, have_batch, pol[NR_POL];
	uint32_t overlap_layers;	/* --overlap-layers */
	uint32_t queue_depth, io_kib;	/* --queue-depth, --io-size (0: the library's) */
	bool model_only;		/* --model-only: the timing model, no replay */
	bool timeline_all;		/* --timeline-all: every policy's, not only ours */
	bool verbose;			/* --verbose: the cache's info and debug lines */
	bool no_layout;			/* --no-layout: TENCACHE_CACHE_NO_LAYOUT */
	bool layout;			/* --layout: TENCACHE_CACHE_LAYOUT */
	bool have_overlap_layers;
	uint32_t plan_threads;		/* --plan-threads (0: the planner's default) */
	bool plan_bench;		/* --plan-bench: ours' plan also on one thread */
	bool no_defer;			/* --no-defer: host acquires wait (the caller) */
	double bw[TC_LINK_NR];	/* B/s */
	double nvme_duplex;	/* --bw's fifth figure, B/s (0: none) */
};

/* What one policy's run gave. */
struct result {
	bool ran;
	int err;			/* -errno of a failure, 0 */
	unsigned steps;			/* measured steps (--steps, fewer at --time-limit) */
	uint64_t step_ns[MAX_STEPS];	/* measured steps, wall */
	/* measured steps: hits and stall on the CPU's and the compute's clock */
	uint64_t step_hits[MAX_STEPS], step_gpu_hits[MAX_STEPS];
	uint64_t step_stall_ns[MAX_STEPS], step_gpu_stall_ns[MAX_STEPS];
	uint64_t step_mean_ns, step_min_ns;
	uint64_t acquires, hits, stall_ns, late;	/* per measured step */
	uint64_t gpu_hits, gpu_stall_ns;		/* the same on the compute's clock */
	uint64_t link_bytes[TC_LINK_NR];		/* per measured step */
	/* the time the disk had reads, writes and both in flight, per
	 * measured step; planned steps on a disk slower than planned */
	uint64_t disk_busy_ns[2], disk_both_ns, disk_slow_steps;
	uint64_t planned_steps, reprofiles, replans, plan_fallbacks, planner_layouts, gpu_peak;
	bool plan_laid_out;		/* the plan running at the end was the planner's layout */
	unsigned warmup;		/* warm-up steps run (more while plan_trying) */
	uint64_t plan_trials;		/* the cache's timed picks of its plans */
	uint64_t pinned_layouts;	/* plans whose pinned ranges were laid out */
	uint64_t deferred_waits, deferred_host_waits;	/* the worker's, not the caller's */
	uint64_t queued_host_waits;	/* copy streams' waits for host events, queued */
	uint64_t exec_plan_gpu;		/* the GPU bytes the cache's plan was made for */
	uint64_t exec_plan_pinned;	/* the same for the pinned pool (NVMe tier) */
	uint64_t exec_plan_pinned_cuts;	/* stretches it kept that room out of only */
	double exec_plan_hit;		/* that plan's hit rate */
	double exec_plan_hit_bytes;	/* of the bytes read */
	double link_bw[TC_LINK_NR];	/* the bandwidths the cache measured (or was given) */
	double duplex_bw[2];		/* and both ways at once: PCIe, NVMe (0: independent) */
	double decision_ns;		/* per acquire/release decision */
	/* the planner's view */
	int plan_err;
	uint64_t plan_ns;		/* the planner's wall time (plan and model) */
	uint64_t plan1_ns;		/* the same on one thread (--plan-bench) */
	double plan_hit;		/* planned GPU hit rate */
	struct tc_plan_stats plan_st;	/* what the plan's search chose */
	struct tc_sim_result sim;
	uint64_t bound_ns;
	uint64_t model_bound_ns;	/* the bound with the model's link bytes */
	bool model_fallback;		/* the model is the ZeRO-like plan's, which ran */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int usage(void)
{
	fprintf(stderr,
"usage: tencache-bench replay [options]\n"
"  Replays a transformer training step's tensor trace through the tensor cache,\n"
"  one run per policy, and prints them side by side.\n"
"model:\n"
"  --model NAME|PATH   opt-1.3b opt-6.7b opt-13b llama-2-7b llama-2-13b, or an HF\n"
"                      config.json. Default: the embedded small model, opt-1.3b\n"
"                      scaled with --hidden %d --vocab %d (84.5M params, runs in\n"
"                      host mode in ~2 GB of memory)\n"
"  --layers N --hidden N --vocab N   override the shape (ffn and heads follow\n"
"                      hidden, keeping the head size)\n"
"  --batch N --seq N   tokens per step (default 8 x 1024; the embedded default\n"
"                      model: %d x 1024)\n"
"  --tflops X          GPU rate for compute times (default 400)\n"
"  --adam-rate X       optimizer params/s (default 2e9, CPU Adam)\n"
"  --gpu-adam          run Adam on the GPU instead of the host\n"
"  --overlap           CPU Adam beside backward, as tencache.offload(overlap=True)\n"
"                      runs it: each host op detached to a worker thread, the\n"
"                      ones inside backward in the order its worker takes them\n"
"                      (the lowest queued layer first) or the last layers'\n"
"                      (--overlap-layers N), whichever the timing model finds\n"
"                      quicker, the rest in forward order; the bound's compute\n"
"                      is then max(GPU, host)\n"
"  --no-defer          with --overlap, the caller's host acquires wait for the\n"
"                      gradients' copies themselves (by default the worker\n"
"                      does: TENCACHE_ACQ_NOWAIT and tencache_op_wait)\n"
"cache:\n"
"  --gpu-budget B|P%%   GPU bytes (K/M/G suffixes, binary) or %% of the fp16/bf16\n"
"                      params (default 25%%)\n"
"  --nvme PATH         NVMe tier: swap file (created and removed)\n"
"  --pinned-budget B|P%%  pinned bytes with --nvme (%% of all tensor bytes;\n"
"                      default 50%%)\n"
"  --nvme-budget B     NVMe bytes (default: all tensor bytes)\n"
"  --bw H2D,D2H[,NVR,NVW[,NVRW]]  link bandwidths in GB/s, given to the caches\n"
"                      and the timing model (default: host mode measures memcpy; on\n"
"                      a GPU each cache calibrates PCIe and the model uses the\n"
"                      H200 figures; with --nvme the swap file is measured once, for\n"
"                      the model and every cache); NVRW: the disk's read + write\n"
"                      rate when it serves both at once (default: the two\n"
"                      independent)\n"
"  --host              host mode even with a GPU (always without one)\n"
"  --model-only        only the planner and its timing model (tc_sim_run) per\n"
"                      policy, with --bw or the H200 figures: no cache, no\n"
"                      memory needed (what a budget would give, before a run)\n"
"  --plan-threads N    threads the timing model's planner searches on (default 0:\n"
"                      the CPUs it may run on, at most 16; the plan is the same)\n"
"  --plan-bench        also plan ours on one thread and print both times and\n"
"                      their ratio (the planner's search against its baseline)\n"
"  --policies LIST     comma list of ours,lru,zero,10cache (default: all)\n"
"  --table PATH        keep the learnt table there (the cache's table_path)\n"
"  --queue-depth N     NVMe staging requests in flight, 1-256 (default: the\n"
"                      library's, 16)\n"
"  --io-size KiB       NVMe staging request size, a multiple of 4 up to 65536\n"
"                      (default: the library's, 1024)\n"
"run:\n"
"  --steps N           measured steps per policy (default 4)\n"
"  --warmup N          unmeasured steps first (default 2: profile + first plan)\n"
"  --profile N         of which profiled by the cache (default 1)\n"
"  --time-limit S      finish within about S seconds: each policy gets an equal\n"
"                      share of the time left and, once past it, ends after its\n"
"                      first measured step; a policy not started by then is\n"
"                      skipped (\"time limit\")\n"
"output:\n"
"  -o, --out PATH      JSON result\n"
"  --timeline PATH     Perfetto (Chrome trace JSON) timeline of our policy's run\n"
"                      (with --model-only: of its plan's step in the timing model)\n"
"  --timeline-all      every policy's too, each at PATH with -POLICY before its\n"
"                      extension (timeline-lru.json)\n"
"  --plot PATH         PNG plot (python3 + matplotlib, tools/plot_replay.py)\n"
"  --verbose           the cache's info and debug lines too (calibration,\n"
"                      planning, layout; on a GPU, its slow driver calls)\n"
"  --no-layout         ours leaves the GPU layout to the executor's pass, which\n"
"                      plans for less where it fragments (the default: ours\n"
"                      also plans each tensor's offset in the whole budget,\n"
"                      and runs that plan unless its timing model is slower)\n"
"  --layout            ours runs the plan laid out in the whole budget whenever\n"
"                      there is one\n",
		DEF_HIDDEN, DEF_VOCAB, DEF_BATCH);
	return 2;
}

/* ---- option parsing ------------------------------------------------------- */

/* an integer in [lo, hi] */
static int parse_range(const char *s, unsigned long lo, unsigned long hi, uint32_t *v)
{
	char *end;
	unsigned long x;

	errno = 0;
	x = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || x < lo || x > hi)
		return -EINVAL;
	*v = x;
	return 0;
}

static int parse_u32(const char *s, uint32_t *v)
{
	return parse_range(s, 1, UINT32_MAX, v);
}

static int parse_double(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return errno || end == s || *end || !(*v > 0) || !isfinite(*v) ? -EINVAL : 0;
}

/* "25%" -> of base; "512M", "2G", "123" -> bytes. */
static int parse_bytes(const char *s, uint64_t base, uint64_t *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(s, &end);
	if (errno || end == s || !(x > 0) || !isfinite(x))
		return -EINVAL;
	if (!strcmp(end, "%")) {
		if (x > 100)
			return -EINVAL;
		*v = (uint64_t)(base * x / 100);
		return *v ? 0 : -EINVAL;
	}
	switch (*end) {
	case 0: break;
	case 'k': case 'K': x *= 1ULL << 10; end++; break;
	case 'm': case 'M': x *= 1ULL << 20; end++; break;
	case 'g': case 'G': x *= 1ULL << 30; end++; break;
	case 't': case 'T': x *= 1ULL << 40; end++; break;
	default: return -EINVAL;
	}
	if (*end == 'i')
		end++;
	if (*end == 'B')
		end++;
	if (*end || x >= 1.8e19)
		return -EINVAL;
	*v = (uint64_t)x;
	return 0;
}

static int parse_bw(const char *s, double *bw, double *nvme_duplex)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int n = 0, ret = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		double *v = n < TC_LINK_NR ? &bw[n] : nvme_duplex;

		if (n > TC_LINK_NR || parse_double(tok, v) || !(*v > 0)) {
			ret = -EINVAL;
		} else {
			*v *= 1e9;
			n++;
		}
	}
	free(copy);
	if (!ret && (n < 2 || n == 3))
		ret = -EINVAL;
	/* NVMe figures default to the planner's when only the PCIe ones are given */
	if (!ret && n == 2) {
		struct tc_plan_cfg d;

		tc_plan_cfg_default(&d);
		bw[TC_LINK_NVME_RD] = d.bw[TC_LINK_NVME_RD];
		bw[TC_LINK_NVME_WR] = d.bw[TC_LINK_NVME_WR];
	}
	return ret;
}

static int parse_policies(const char *s, bool *pol)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int ret = 0, any = 0;

	if (!copy)
		return -ENOMEM;
	memset(pol, 0, NR_POL * sizeof(*pol));
	for (tok = strtok_r(copy, ",", &save); tok && !ret; tok = strtok_r(NULL, ",", &save)) {
		unsigned i;

		for (i = 0; i < NR_POL; i++)
			if (!strcmp(tok, policies[i].name) ||
			    !strcmp(tok, tc_policy_name(policies[i].tp)))
				break;
		if (i == NR_POL)
			ret = -EINVAL;
		else
			pol[i] = true, any = 1;
	}
	free(copy);
	return ret ? ret : any ? 0 : -EINVAL;
}

enum {
	O_MODEL = 256, O_LAYERS, O_HIDDEN, O_VOCAB, O_BATCH, O_SEQ, O_TFLOPS, O_ADAM,
	O_GPU_ADAM, O_GPU_BUDGET, O_PINNED_BUDGET, O_NVME_BUDGET, O_NVME, O_BW, O_HOST,
	O_POLICIES, O_TABLE, O_STEPS, O_WARMUP, O_PROFILE, O_TIMELINE, O_TIMELINE_ALL, O_PLOT, O_TIME_LIMIT,
	O_QUEUE_DEPTH, O_IO_SIZE,
	O_OVERLAP, O_OVERLAP_LAYERS, O_NO_DEFER, O_MODEL_ONLY, O_VERBOSE, O_NO_LAYOUT, O_LAYOUT,
	O_PLAN_THREADS, O_PLAN_BENCH,
};

/* An output's directory must take files before hours of replay, not after. */
static int out_dir_ok(const char *opt, const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;
	char dir[PATH_MAX];

	if (!path)
		return 1;
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (!access(dir, W_OK | X_OK))
		return 1;
	fprintf(stderr, "replay: %s %s: cannot write in %s: %s (create it, or pick another path)\n",
		opt, path, dir, strerror(errno));
	return 0;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "model", 1, 0, O_MODEL }, { "layers", 1, 0, O_LAYERS },
		{ "hidden", 1, 0, O_HIDDEN }, { "vocab", 1, 0, O_VOCAB },
		{ "batch", 1, 0, O_BATCH }, { "seq", 1, 0, O_SEQ },
		{ "tflops", 1, 0, O_TFLOPS }, { "adam-rate", 1, 0, O_ADAM },
		{ "gpu-adam", 0, 0, O_GPU_ADAM }, { "gpu-budget", 1, 0, O_GPU_BUDGET },
		{ "overlap", 0, 0, O_OVERLAP }, { "overlap-layers", 1, 0, O_OVERLAP_LAYERS },
		{ "no-defer", 0, 0, O_NO_DEFER },
		{ "model-only", 0, 0, O_MODEL_ONLY },
		{ "plan-threads", 1, 0, O_PLAN_THREADS }, { "plan-bench", 0, 0, O_PLAN_BENCH },
		{ "verbose", 0, 0, O_VERBOSE }, { "no-layout", 0, 0, O_NO_LAYOUT },
		{ "layout", 0, 0, O_LAYOUT },
		{ "pinned-budget", 1, 0, O_PINNED_BUDGET }, { "nvme-budget", 1, 0, O_NVME_BUDGET },
		{ "nvme", 1, 0, O_NVME }, { "bw", 1, 0, O_BW }, { "host", 0, 0, O_HOST },
		{ "policies", 1, 0, O_POLICIES }, { "table", 1, 0, O_TABLE },
		{ "steps", 1, 0, O_STEPS }, { "warmup", 1, 0, O_WARMUP },
		{ "profile", 1, 0, O_PROFILE }, { "timeline", 1, 0, O_TIMELINE },
		{ "timeline-all", 0, 0, O_TIMELINE_ALL },
		{ "plot", 1, 0, O_PLOT }, { "time-limit", 1, 0, O_TIME_LIMIT },
		{ "queue-depth", 1, 0, O_QUEUE_DEPTH }, { "io-size", 1, 0, O_IO_SIZE },
		{ "out", 1, 0, 'o' }, { "help", 0, 0, 'h' },
		{ 0 },
	};
	int c, bad = 0;

	memset(o, 0, sizeof(*o));
	tc_gen_cfg_default(&o->gen);
	o->gpu_budget = "25%";
	o->steps = 4;
	o->warmup = 2;
	o->profile = 1;
	for (unsigned i = 0; i < NR_POL; i++)
		o->pol[i] = true;
	optind = 1;
	while (!bad && (c = getopt_long(argc, argv, "o:h", lo, NULL)) != -1) {
		switch (c) {
		case O_MODEL: o->model = optarg; break;
		case O_LAYERS: bad = parse_u32(optarg, &o->layers); break;
		case O_HIDDEN: bad = parse_u32(optarg, &o->hidden); break;
		case O_VOCAB: bad = parse_u32(optarg, &o->vocab); break;
		case O_BATCH: bad = parse_u32(optarg, &o->gen.batch); o->have_batch = true; break;
		case O_SEQ: bad = parse_u32(optarg, &o->gen.seq); break;
		case O_TFLOPS: bad = parse_double(optarg, &o->gen.tflops); break;
		case O_ADAM: bad = parse_double(optarg, &o->gen.adam_params_per_s); break;
		case O_GPU_ADAM: o->gen.opt_on_gpu = true; break;
		case O_OVERLAP: o->gen.opt_overlap = true; break;
		case O_NO_DEFER: o->no_defer = true; break;
		case O_MODEL_ONLY: o->model_only = true; break;
		case O_PLAN_THREADS:
			bad = parse_range(optarg, 0, TC_PLAN_THREADS_MAX, &o->plan_threads);
			break;
		case O_PLAN_BENCH: o->plan_bench = true; break;
		case O_VERBOSE: o->verbose = true; break;
		case O_NO_LAYOUT: o->no_layout = true; break;
		case O_LAYOUT: o->layout = true; break;
		case O_OVERLAP_LAYERS:
			bad = parse_range(optarg, 0, 100000, &o->overlap_layers);
			o->have_overlap_layers = true;
			o->gen.opt_overlap = true;
			break;
		case O_GPU_BUDGET: o->gpu_budget = optarg; break;
		case O_PINNED_BUDGET: o->pinned_budget = optarg; break;
		case O_NVME_BUDGET: o->nvme_budget = optarg; break;
		case O_NVME: o->nvme = optarg; break;
		case O_BW: bad = parse_bw(optarg, o->bw, &o->nvme_duplex); o->have_bw = true; break;
		case O_HOST: o->host = true; break;
		case O_POLICIES: bad = parse_policies(optarg, o->pol); break;
		case O_TABLE: o->table = optarg; break;
		case O_STEPS: bad = parse_range(optarg, 1, MAX_STEPS, &o->steps); break;
		case O_WARMUP: bad = parse_range(optarg, 0, 100, &o->warmup); break;
		case O_PROFILE: bad = parse_range(optarg, 1, 100, &o->profile); break;
		case O_TIMELINE: o->timeline = optarg; break;
		case O_TIMELINE_ALL: o->timeline_all = true; break;
		case O_PLOT: o->plot = optarg; break;
		case O_TIME_LIMIT: bad = parse_double(optarg, &o->time_limit); break;
		case O_QUEUE_DEPTH: bad = parse_range(optarg, 1, 256, &o->queue_depth); break;
		case O_IO_SIZE:
			bad = parse_range(optarg, 4, 65536, &o->io_kib) || o->io_kib % 4;
			break;
		case 'o': o->out = optarg; break;
		case 'h': usage(); return -1;
		default: return usage();
		}
		if (bad)
			return bench_bad_value("replay", lo, c, optarg);
	}
	if (optind < argc) {
		fprintf(stderr, "replay: unexpected argument %s\n", argv[optind]);
		return usage();
	}
	if (o->nvme_budget && !o->nvme) {
		fprintf(stderr, "replay: --nvme-budget needs --nvme PATH\n");
		return 2;
	}
	if (!out_dir_ok("-o", o->out) || !out_dir_ok("--timeline", o->timeline) ||
	    !out_dir_ok("--plot", o->plot))
		return 2;
	if (o->timeline_all && !o->timeline) {
		fprintf(stderr, "replay: --timeline-all needs --timeline PATH (ours' timeline; the "
			"other policies' go next to it)\n");
		return 2;
	}
	if (o->model_only && o->table) {
		fprintf(stderr, "replay: --model-only runs no cache: no --table\n");
		return 2;
	}
	if (o->layout && o->no_layout) {
		fprintf(stderr, "replay: --layout runs ours laid out whenever it can, --no-layout "
			"never: pick one\n");
		return 2;
	}
	if (o->no_defer && !o->gen.opt_overlap) {
		fprintf(stderr, "replay: --no-defer is about --overlap's host ops: add --overlap\n");
		return 2;
	}
	if (o->gen.opt_overlap && o->gen.opt_on_gpu) {
		fprintf(stderr, "replay: --overlap runs the CPU Adam beside backward; with "
			"--gpu-adam there is no host op to overlap: pick one\n");
		return 2;
	}
	if (!o->model) {
		o->model = DEF_MODEL;
		if (!o->hidden)
			o->hidden = DEF_HIDDEN;
		if (!o->vocab)
			o->vocab = DEF_VOCAB;
		if (!o->have_batch)
			o->gen.batch = DEF_BATCH;
	}
	return 0;
}

/* ---- model and trace ------------------------------------------------------ */

static int load_model(const struct opts *o, struct tc_model *m)
{
	int ret = tc_model_builtin(o->model, m);

	if (ret == -ENOENT)
		ret = tc_model_from_hf_file(o->model, m);
	if (ret) {
		fprintf(stderr, "replay: model %s: %s (built-in:", o->model, strerror(-ret));
		for (const char *const *n = tc_model_builtin_names(); *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, ", or an HF config.json)\n");
		return ret;
	}
	if (o->hidden && o->hidden != m->hidden) {
		uint32_t hd = m->hidden / m->heads, kvr = m->heads / m->kv_heads;

		if (o->hidden % hd || (o->hidden / hd) % kvr) {
			fprintf(stderr, "replay: --hidden %u is not a multiple of the head size %u%s\n",
				o->hidden, hd, kvr > 1 ? " x the GQA group" : "");
			return -EINVAL;
		}
		m->ffn = (uint32_t)((uint64_t)m->ffn * o->hidden / m->hidden);
		m->heads = o->hidden / hd;
		m->kv_heads = m->heads / kvr;
		m->hidden = o->hidden;
	}
	if (o->layers)
		m->layers = o->layers;
	if (o->vocab)
		m->vocab = o->vocab;
	return 0;
}

/* ---- link bandwidth in host mode: what a memcpy moves ------------------------ */

static double memcpy_bw(void)
{
	const size_t len = 64ULL << 20;
	char *a = malloc(len), *b = malloc(len);
	double best = 0;

	if (!a || !b) {
		free(a);
		free(b);
		return 0;
	}
	memset(a, 1, len);
	memset(b, 2, len);
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = now_ns(), dt;

		memcpy(i & 1 ? a : b, i & 1 ? b : a, len);
		dt = now_ns() - t0;
		if (dt && len * 1e9 / dt > best)
			best = len * 1e9 / dt;
	}
	free(a);
	free(b);
	return best;
}

/* ---- the planner's prediction --------------------------------------------- */

/*
 * The swap file's rates, for the timing model (which picks --overlap's Adam
 * schedule) and then given to every policy's cache: a cache holding one
 * small tensor calibrates on the same file and is gone. Into bw[NVMe read,
 * write] and *dx (both at once).
 */
static int measure_disk(struct tencache *tc, const struct tencache_cache_params *base,
			double *bw, double *dx)
{
	struct tencache_cache_params p = {
		.flags = base->flags & TENCACHE_CACHE_HOST_MODE, .policy = TENCACHE_POLICY_OURS,
		.gpu_budget = 64ULL << 20, .nvme_path = base->nvme_path,
		.pinned_budget = base->pinned_budget < (512ULL << 20) ? base->pinned_budget :
				 512ULL << 20,
		.nvme_budget = base->nvme_budget < (1ULL << 30) ? base->nvme_budget : 1ULL << 30,
	};
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	void *h;
	int ret;

	p.bw[TC_LINK_H2D] = base->bw[TC_LINK_H2D];	/* host mode: memcpy's, given */
	p.bw[TC_LINK_D2H] = base->bw[TC_LINK_D2H];
	ret = tencache_cache_create(tc, &c, &p);
	if (ret)
		return ret;
	ret = tencache_tensor_register(c, 4096, TENCACHE_ROLE_PARAM_FP16);
	ret = ret < 0 ? ret : tencache_tensor_host(c, ret, &h);	/* calibrates */
	ret = ret ?: tencache_cache_stats(c, &st, sizeof(st));
	if (!ret) {
		bw[TC_LINK_NVME_RD] = st.link_bw[TC_LINK_NVME_RD];
		bw[TC_LINK_NVME_WR] = st.link_bw[TC_LINK_NVME_WR];
		*dx = st.duplex_bw[1];
	}
	tencache_cache_destroy(c);
	return ret;
}

static void plan_cfg(const struct opts *o, const struct tencache_cache_params *cp,
		     const double *bw, enum tc_policy pol, struct tc_plan_cfg *cfg)
{
	tc_plan_cfg_default(cfg);
	cfg->threads = o->plan_threads;
	if (o->gen.opt_overlap)	/* the worker runs them in order (TENCACHE_CACHE_DETACH_FIFO) */
		cfg->flags |= TC_PLAN_HOST_ASYNC | TC_PLAN_HOST_FIFO;
	cfg->gpu_bytes = cp->gpu_budget;
	/* without NVMe every tensor has a pinned home: no pinned limit */
	cfg->pinned_bytes = cp->nvme_budget ? cp->pinned_budget : UINT64_MAX;
	cfg->nvme_bytes = cp->nvme_budget;
	for (int l = 0; l < TC_LINK_NR; l++)
		cfg->bw[l] = bw[l];
	if (o->nvme_duplex > 0)
		cfg->nvme_duplex_bw = o->nvme_duplex;
	cfg->policy = pol;
}

/* The hit rates a policy is held to (of reads, and of the bytes read). */
struct hitref {
	double belady, belady_bytes;	/* MIN by next use alone */
	double kept, kept_bytes;	/* MIN keeping small tensors, as ours plans */
};

/* MIN's hit rate for the budget, of reads and of read bytes: ours with no
 * prefetch reserve; pure: by next use alone (Belady), else as ours plans
 * (small tensors kept). */
static int belady_hit(const struct tc_trace *tr, const struct tc_plan_cfg *base, bool pure,
		      double *hit, double *hit_bytes)
{
	struct tc_plan_cfg cfg = *base;
	struct tc_plan pl;
	int ret;

	cfg.policy = TC_POLICY_OURS;
	cfg.reserve_bytes = 0;
	cfg.pinned_horizon = 0;	/* the GPU level's hits only */
	cfg.pinned_stage_out = 0;
	if (pure)
		cfg.flags |= TC_PLAN_PURE_MIN;
	ret = tc_plan_build(tr, &cfg, &pl);
	if (ret)
		return ret;
	*hit = pl.st.reads ? (double)pl.st.hits / pl.st.reads : 1;
	*hit_bytes = pl.st.read_bytes ? (double)pl.st.hit_bytes / pl.st.read_bytes : 1;
	tc_plan_free(&pl);
	return 0;
}

/* The plan for cfg and its modelled step into r; with timeline (a path),
 * that step's timeline too. */
static void predict(const struct tc_trace *tr, const struct tc_plan_cfg *cfg, struct result *r,
		    const char *timeline)
{
	struct tc_plan pl;
	int ret;

	r->plan_err = tc_plan_build(tr, cfg, &pl);
	if (r->plan_err)
		return;
	r->plan_hit = pl.st.reads ? (double)pl.st.hits / pl.st.reads : 1;
	r->plan_st = pl.st;
	r->plan_err = tc_sim_run(tr, cfg, &pl, 4, &r->sim);
	if (!r->plan_err && timeline && (ret = tc_timeline_model_file(timeline, tr, cfg, &pl)))
		fprintf(stderr, "replay: cannot write the model's timeline to %s: %s\n", timeline,
			strerror(-ret));
	tc_plan_free(&pl);
}

/*
 * --plan-bench: ours' plan again on one thread, against r's (the default
 * threads), side by side; the two must be the same plan.
 */
static void plan_bench(const struct tc_trace *tr, const struct tc_plan_cfg *cfg,
		       struct result *r)
{
	struct tc_plan_cfg one = *cfg;
	struct result r1 = { 0 };
	uint64_t t0;

	one.threads = 1;
	t0 = now_ns();
	predict(tr, &one, &r1, NULL);
	r->plan1_ns = now_ns() - t0;
	if (r1.plan_err) {
		fprintf(stderr, "  plan-bench: on one thread: %s\n", strerror(-r1.plan_err));
		return;
	}
	printf("  plan-bench: ours planned in %.0f ms (threads: %s), %.0f ms on one thread: "
	       "%.2fx; %s\n", r->plan_ns / 1e6, cfg->threads ? "--plan-threads" : "default",
	       r->plan1_ns / 1e6, (double)r->plan1_ns / (r->plan_ns ? r->plan_ns : 1),
	       r1.sim.step_ns == r->sim.step_ns ? "the same plan (modelled step equal)" :
	       "PLANS DIFFER (modelled steps differ): a planner bug");
}

/*
 * The least time a pair of links (H2D and D2H; NVMe read and write, one
 * disk) needs for x and y bytes: each moves at most bw0 and bw1 alone and
 * together at most dx both at once (dx <= 0: independent). The rates it
 * can keep are the convex hull of (bw0, 0), (0, bw1) and the both-at-once
 * line's ends in the box; the time is where the ray along (x, y) leaves it.
 */
static double pair_ns(double x, double y, double bw0, double bw1, double dx)
{
	double p[4][2] = { { bw0, 0 }, { 0, bw1 } }, best = 0;
	int n = 2;

	if (!(x + y > 0))
		return 0;
	if (!(dx > 0) || dx >= bw0 + bw1)
		dx = bw0 + bw1;
	p[n][0] = dx < bw0 ? dx : bw0;	/* reads at their most */
	p[n][1] = dx - p[n][0] < bw1 ? dx - p[n][0] : bw1;
	n++;
	p[n][1] = dx < bw1 ? dx : bw1;	/* writes at their most */
	p[n][0] = dx - p[n][1] < bw0 ? dx - p[n][1] : bw0;
	n++;
	/* every segment between two of them lies in the hull: the farthest
	 * crossing of the ray is on its edge */
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++) {
			double d0 = p[j][0] - p[i][0], d1 = p[j][1] - p[i][1];
			double den = x * d1 - y * d0, s, u;

			if (den == 0)	/* along the ray: its ends are on others */
				continue;
			s = (p[i][0] * d1 - p[i][1] * d0) / den;
			u = (p[i][0] * y - p[i][1] * x) / den;
			if (u >= -1e-12 && u <= 1 + 1e-12 && s > best)
				best = s;
		}
	return best > 0 ? 1e9 / best : 0;
}

/* max(compute, each pair of links' least time for its bytes: pair_ns; a
 * disk that moves both ways at once no faster than by taking turns takes
 * turns, as in the timing model (plan/sim.c)) */
static uint64_t bound_ns(uint64_t compute_ns, const uint64_t *bytes, const double *bw,
			 const double *dx)
{
	uint64_t b = compute_ns;

	for (int l = 0; l < TC_LINK_NR; l += 2) {
		double t;

		if (!(bw[l] > 0) || !(bw[l + 1] > 0))
			continue;
		if (l == TC_LINK_NVME_RD && tc_disk_takes_turns(bw[l], bw[l + 1], dx[1]))
			t = ((double)bytes[l] / bw[l] + (double)bytes[l + 1] / bw[l + 1]) * 1e9;
		else
			t = pair_ns((double)bytes[l], (double)bytes[l + 1], bw[l], bw[l + 1],
				    dx[l / 2]);
		if (t > b)
			b = (uint64_t)t;
	}
	return b;
}

/*
 * The runs' bounds on one scale: each policy's bytes over the fastest rate
 * any policy's cache measured for that link in this run (and both ways at
 * once). Each cache calibrates on its own, and a disk's samples vary by
 * tens of percent from one to the next: bounds from each cache's own
 * figures put the policies' ratios on different scales. The fastest rate
 * seen keeps the bound a lower bound. Policies that did not run: the
 * model's bytes and figures.
 */
static void run_bounds(struct result *res, uint64_t compute, const double *bw,
		       const double *mdx)
{
	double lbw[TC_LINK_NR] = { 0 }, dx[2] = { 0 };

	for (unsigned i = 0; i < NR_POL; i++) {
		if (!res[i].ran)
			continue;
		for (int l = 0; l < TC_LINK_NR; l++)
			if (res[i].link_bw[l] > lbw[l])
				lbw[l] = res[i].link_bw[l];
		for (int k = 0; k < 2; k++)
			if (res[i].duplex_bw[k] > dx[k])
				dx[k] = res[i].duplex_bw[k];
	}
	for (int l = 0; l < TC_LINK_NR; l++)
		if (!(lbw[l] > 0))
			lbw[l] = bw[l];
	for (unsigned i = 0; i < NR_POL; i++) {
		struct result *r = &res[i];

		if (r->ran)	/* an NVMe tier on a slow disk: far from the planner's figure */
			r->bound_ns = bound_ns(compute, r->link_bytes, lbw, dx);
		else
			r->bound_ns = bound_ns(compute, r->sim.link_bytes, bw, mdx);
	}
}

/* The bound's compute: GPU and host ops in sequence, or with --overlap the
 * busier of the two (the host ops run beside the GPU). */
static uint64_t bound_compute(const struct tc_trace *tr, bool overlap)
{
	uint64_t gpu = 0, hostw = 0;

	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		if (!(tr->acc[i].flags & TC_ACC_END))
			continue;
		if (tr->acc[i].flags & TC_ACC_HOST)
			hostw += tr->acc[i].compute_ns;
		else
			gpu += tr->acc[i].compute_ns;
	}
	return overlap ? (gpu > hostw ? gpu : hostw) : gpu + hostw;
}

/* One --overlap candidate: its trace's modelled step for ours, or
 * UINT64_MAX where it finds no plan. */
static int overlap_try(struct opts *o, const struct tc_model *m, const struct tc_plan_cfg *pc,
		       uint64_t *step_ns)
{
	struct tc_sim_result r;
	struct tc_trace t;
	struct tc_plan pl;
	int ret;

	*step_ns = UINT64_MAX;
	tc_trace_init(&t);
	ret = tc_model_trace(m, &o->gen, &t);
	ret = ret ?: tc_plan_build(&t, pc, &pl);
	if (!ret) {
		ret = tc_sim_run(&t, pc, &pl, 3, &r);
		tc_plan_free(&pl);
	}
	tc_trace_free(&t);
	if (ret == -ENOSPC || ret == -EINVAL)
		return 0;	/* no plan this way: another may do */
	if (!ret)
		*step_ns = r.step_ns;
	return ret;
}

/*
 * --overlap: which layers get their Adam inside backward. --overlap-layers
 * N: the last N. Else the timing model's shortest step for ours among
 * 1/16, 2/16 .. all of the last layers (and the generator's estimate), and
 * the order tencache.offload's worker runs them in (the lowest queued layer
 * first, overlap.py) at a GPU backward of 1, 1.5 .. 6 x its compute per
 * layer: the copies make backward slower than its compute where the budget
 * is small. Regenerates *tr.
 */
static int pick_overlap(struct opts *o, const struct tc_model *m, const struct tc_plan_cfg *cfg,
			struct tc_trace *tr)
{
	static const double pace_x[] = { 1, 1.5, 2, 2.5, 3, 4, 5, 6 };
	struct tc_plan_cfg pc = *cfg;
	uint64_t best_ns = UINT64_MAX, best_pace = 0, bwd_ns = 0, ns;
	int32_t best = -1;
	int ret;

	pc.policy = TC_POLICY_OURS;
	if (o->have_overlap_layers) {
		best = (int32_t)(o->overlap_layers < m->layers ? o->overlap_layers : m->layers);
	} else {
		for (int j = -1; j <= 16; j++) {
			o->gen.opt_split = j < 0 ? -1 : (int32_t)(m->layers * j / 16);
			if (j > 0 && o->gen.opt_split == (int32_t)(m->layers * (j - 1) / 16))
				continue;
			ret = overlap_try(o, m, &pc, &ns);
			if (ret)
				return ret;
			if (ns < best_ns) {
				best_ns = ns;
				best = o->gen.opt_split;
			}
		}
		/* the GPU's backward compute per layer, from the trace at hand */
		for (uint32_t i = 0; i < tr->nr_acc; i++)
			if (tr->acc[i].phase == TC_PHASE_BWD && (tr->acc[i].flags & TC_ACC_END) &&
			    !(tr->acc[i].flags & TC_ACC_HOST))
				bwd_ns += tr->acc[i].compute_ns;
		bwd_ns /= m->layers;
		for (unsigned k = 0; bwd_ns && k < sizeof(pace_x) / sizeof(pace_x[0]); k++) {
			o->gen.opt_pace_ns = (uint64_t)(bwd_ns * pace_x[k]);
			ret = overlap_try(o, m, &pc, &ns);
			if (ret)
				return ret;
			if (ns < best_ns) {
				best_ns = ns;
				best_pace = o->gen.opt_pace_ns;
			}
		}
	}
	o->gen.opt_split = best;
	o->gen.opt_pace_ns = best_pace;
	tc_trace_free(tr);
	tc_trace_init(tr);
	ret = tc_model_trace(m, &o->gen, tr);
	if (ret)
		return ret;
	{
		uint32_t last_bwd = 0, in = 0, all = 0;

		for (uint32_t i = 0; i < tr->nr_acc; i++)
			if (tr->acc[i].phase == TC_PHASE_BWD && (tr->acc[i].flags & TC_ACC_END))
				last_bwd = i;
		for (uint32_t i = 0; i < tr->nr_acc; i++)
			if ((tr->acc[i].flags & TC_ACC_HOST) && (tr->acc[i].flags & TC_ACC_END)) {
				all++;
				in += i < last_bwd;
			}
		printf("  overlap: CPU Adam detached to a worker thread, %u of its %u ops inside "
		       "backward (", in, all);
		if (o->have_overlap_layers)
			printf("--overlap-layers)\n");
		else if (best_pace)
			printf("the timing model's shortest step: the worker's order, lowest queued "
			       "layer first, at a backward of %.1f ms per layer)\n", best_pace / 1e6);
		else
			printf("%s: the last layers')\n", best < 0 ? "the generator's estimate" :
			       "the timing model's shortest step");
	}
	return 0;
}

/* ---- the replay through the cache ----------------------------------------- */

static const char *pol_label(unsigned i)
{
	return tc_policy_name(policies[i].tp);
}

/* What the disk gave in the measured steps against the rates planned:
 * each direction's bytes over its time in flight (its own rate only where
 * the two were seldom in flight at once). */
static void disk_line(const struct result *r, unsigned i)
{
	double rate[2];

	for (int w = 0; w < 2; w++)
		rate[w] = r->disk_busy_ns[w] ?
			(double)r->link_bytes[TC_LINK_NVME_RD + w] / r->disk_busy_ns[w] : 0;
	fprintf(stderr, "  %-9s the disk: reads in flight %.1f ms a step (%.2f GB/s), writes %.1f "
		"(%.2f GB/s), both at once %.1f; planned at %.2f and %.2f GB/s%s\n",
		pol_label(i), r->disk_busy_ns[0] / 1e6, rate[0],
		r->disk_busy_ns[1] / 1e6, rate[1], r->disk_both_ns / 1e6,
		r->link_bw[TC_LINK_NVME_RD] / 1e9, r->link_bw[TC_LINK_NVME_WR] / 1e9,
		r->disk_slow_steps ? " (slower than planned: the cache warned)" : "");
}

/* --time-limit: CLOCK_MONOTONIC ns after which no policy starts (0: none),
 * and the running policy's share of what is left, after which it starts no
 * step */
static uint64_t deadline_ns, pol_deadline_ns;

static const char *err_str(int err)
{
	return err == -ETIME ? "time limit" : strerror(-err);
}

/*
 * A host op's compute: exactly ns. A plain nanosleep overshoots by the
 * timer slack and the wake-up (70-90 us per call on the H200 machine, 1.2
 * ms per layer of 16 Adam ops, 3% of an OPT-6.7B step), so sleep to a
 * deadline short of the end and spin the rest, as a computing CPU would.
 */
#define SPIN_NS 200000ULL

static void sleep_ns(uint64_t ns)
{
	struct timespec ts;
	uint64_t end, now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	end = now + ns;
	if (ns > SPIN_NS) {
		uint64_t wake = end - SPIN_NS;
		struct timespec w = { wake / 1000000000ULL, wake % 1000000000ULL };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &w, NULL) == EINTR)
			;
	}
	do {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	} while (now < end);
}

static int fail(const char *what, int ret)
{
	fprintf(stderr, "replay: %s: %s\n", what, strerror(-ret));
	return ret;
}

/* --overlap: host ops detached (tencache_op_detach) and run one at a time,
 * in trace order, by a worker thread that waits for their tensors
 * (tencache_op_wait: the caller's acquires did not, TENCACHE_ACQ_NOWAIT),
 * spends their compute and calls tencache_op_done; the caller releases an op's tensors when it next needs
 * one of them, as the trainer's settle does. */
struct job {
	uint64_t token, ns;
	uint32_t first, end;	/* its accesses */
	int ret;		/* tencache_op_done's */
	bool done, settled;
};

struct worker {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct tencache_cache *c;
	struct job *jobs;
	uint32_t nr, cap, next;	/* queued; jobs[next] is the worker's next */
	uint32_t *held_by;	/* per tensor: job index + 1 holding it, 0 */
	bool quit, started;
	bool defer;		/* host acquires with TENCACHE_ACQ_NOWAIT */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct job *j;
		uint64_t token, ns;
		int ret;

		while (w->next == w->nr && !w->quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->next == w->nr)
			break;
		j = &w->jobs[w->next++];
		token = j->token;
		ns = j->ns;
		pthread_mutex_unlock(&w->mu);
		ret = tencache_op_wait(w->c, token);
		if (!ret)
			sleep_ns(ns);
		ret = ret ?: tencache_op_done(w->c, token);
		pthread_mutex_lock(&w->mu);
		/* jobs may have moved (realloc under mu): index again */
		w->jobs[w->next - 1].ret = ret;
		w->jobs[w->next - 1].done = true;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static int worker_start(struct worker *w, struct tencache_cache *c, uint32_t nr_tensors)
{
	int ret;

	memset(w, 0, sizeof(*w));
	w->c = c;
	w->held_by = calloc(nr_tensors, sizeof(*w->held_by));
	if (!w->held_by)
		return -ENOMEM;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	ret = -pthread_create(&w->th, NULL, worker_main, w);
	w->started = !ret;
	return ret;
}

/* Lets the worker finish its queue and joins it (before the cache goes). */
static void worker_stop(struct worker *w)
{
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->quit = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
	}
	free(w->jobs);
	free(w->held_by);
	memset(w, 0, sizeof(*w));
}

static int worker_push(struct worker *w, uint64_t token, uint64_t ns, uint32_t first,
		       uint32_t end, const struct tc_trace *tr)
{
	pthread_mutex_lock(&w->mu);
	if (w->nr == w->cap) {
		uint32_t nc = w->cap ? 2 * w->cap : 256;
		struct job *nj = realloc(w->jobs, nc * sizeof(*nj));

		if (!nj) {
			pthread_mutex_unlock(&w->mu);
			return -ENOMEM;
		}
		w->jobs = nj;
		w->cap = nc;
	}
	w->jobs[w->nr] = (struct job){ .token = token, .ns = ns, .first = first, .end = end };
	w->nr++;
	for (uint32_t k = first; k <= end; k++)
		w->held_by[tr->acc[k].tensor] = w->nr;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* Waits for job idx (0-based) and releases its tensors. */
static int worker_settle(struct worker *w, struct tencache_cache *c, const struct tc_trace *tr,
			 const int *ids, uint32_t idx)
{
	struct job j;
	int ret;

	pthread_mutex_lock(&w->mu);
	while (!w->jobs[idx].done)
		pthread_cond_wait(&w->cv, &w->mu);
	j = w->jobs[idx];
	w->jobs[idx].settled = true;
	pthread_mutex_unlock(&w->mu);
	if (j.settled)
		return 0;
	if (j.ret)
		return fail("tencache_op_done", j.ret);
	for (uint32_t k = j.first; k <= j.end; k++) {
		uint32_t t = tr->acc[k].tensor;

		ret = tencache_release(c, ids[t], NULL, 0);
		if (ret) {
			fprintf(stderr, "replay: release of tensor %u (access %u, detached): %s\n",
				t, k, strerror(-ret));
			return ret;
		}
		if (w->held_by[t] == idx + 1)
			w->held_by[t] = 0;
	}
	return 0;
}

/* One step: ops in trace order; an op's tensors are acquired, then released,
 * the first with the op's compute time. A host op (CPU Adam) is the caller's
 * own work: on a GPU the caller spends its time here before releasing (the
 * cache does it for us in host mode), as the timing model and the bound
 * count it; with a worker (--overlap) it is detached to the worker instead,
 * and its tensors stay held into the next step until needed (the cache's
 * destroy waits for the last ones: no step has to settle them). */
static int run_step(struct tencache_cache *c, const struct tc_trace *tr, const int *ids,
		    bool host, struct worker *w)
{
	uint32_t start = 0;
	int ret;

	ret = tencache_step_begin(c);
	if (ret)
		return fail("tencache_step_begin", ret);
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];
		unsigned fl = 0;
		void *ptr;

		if (a->flags & TC_ACC_READ)
			fl |= TENCACHE_ACQ_READ;
		if (a->flags & TC_ACC_WRITE)
			fl |= TENCACHE_ACQ_WRITE;
		if (a->flags & TC_ACC_HOST)
			fl |= TENCACHE_ACQ_HOST;
		if ((a->flags & TC_ACC_HOST) && w && w->defer)
			fl |= TENCACHE_ACQ_NOWAIT;
		if (w && w->held_by[a->tensor]) {
			ret = worker_settle(w, c, tr, ids, w->held_by[a->tensor] - 1);
			if (ret)
				return ret;
		}
		ret = tencache_acquire(c, ids[a->tensor], fl, NULL, &ptr);
		if (ret) {
			fprintf(stderr, "replay: acquire of tensor %u (access %u): %s\n",
				a->tensor, i, strerror(-ret));
			return ret;
		}
		if (!(a->flags & TC_ACC_END))
			continue;
		if (w && (a->flags & TC_ACC_HOST)) {
			uint64_t token;

			ret = tencache_op_detach(c, &token);
			ret = ret ?: worker_push(w, token, a->compute_ns, start, i, tr);
			if (ret)
				return fail("detaching a host op", ret);
			start = i + 1;
			continue;
		}
		if (!host && (a->flags & TC_ACC_HOST) && a->compute_ns)
			sleep_ns(a->compute_ns);
		for (uint32_t j = start; j <= i; j++) {
			ret = tencache_release(c, ids[tr->acc[j].tensor], NULL,
					       j == start ? a->compute_ns : 0);
			if (ret) {
				fprintf(stderr, "replay: release of tensor %u (access %u): %s\n",
					tr->acc[j].tensor, j, strerror(-ret));
				return ret;
			}
		}
		start = i + 1;
	}
	ret = tencache_step_end(c);
	return ret ? fail("tencache_step_end", ret) : 0;
}

/* Where policy pi's timeline goes: --timeline's PATH for ours; with
 * --timeline-all the others' at PATH with -POLICY before its extension.
 * NULL: none. */
static const char *timeline_path(const struct opts *o, unsigned pi, char *buf, size_t n)
{
	const char *slash, *dot;

	if (!o->timeline)
		return NULL;
	if (policies[pi].pol == TENCACHE_POLICY_OURS)
		return o->timeline;
	if (!o->timeline_all)
		return NULL;
	slash = strrchr(o->timeline, '/');
	dot = strrchr(o->timeline, '.');
	if (!dot || (slash && dot < slash))
		dot = o->timeline + strlen(o->timeline);
	if ((size_t)snprintf(buf, n, "%.*s-%s%s", (int)(dot - o->timeline), o->timeline,
			     pol_label(pi), dot) >= n)
		return NULL;
	return buf;
}

static int run_policy(struct tencache *tc, const struct opts *o, const struct tc_trace *tr,
		      const struct tencache_cache_params *base, unsigned pi, const char *timeline,
		      struct result *r)
{
	struct tencache_cache_params cp = *base;
	struct tencache_cache_stats s0, s1;
	struct tencache_cache *c;
	struct worker w = { 0 };
	const char *name = pol_label(pi);
	unsigned warm = o->warmup, total = o->warmup + o->steps;
	enum { TRIAL_WARM = 8 };	/* warm-up steps added at most while it times */
	uint64_t sum = 0, planned = 0;
	unsigned n = 0;
	int *ids, ret;

	ids = malloc(tr->nr_tensors * sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	cp.policy = policies[pi].pol;
	if (timeline)
		cp.flags |= TENCACHE_CACHE_TIMELINE;
	ret = tencache_cache_create(tc, &c, &cp);
	if (ret) {
		free(ids);
		return fail("tencache_cache_create", ret);
	}
	for (uint32_t t = 0; t < tr->nr_tensors; t++) {
		/* enum tc_role and enum tencache_role list the roles in one order */
		ret = tencache_tensor_register(c, tr->tensors[t].bytes, tr->tensors[t].role);
		if (ret < 0) {
			fail("tencache_tensor_register", ret);
			goto out;
		}
		ids[t] = ret;
	}
	if (o->gen.opt_overlap) {
		ret = worker_start(&w, c, tr->nr_tensors);
		if (ret) {
			fail("starting the host-op worker", ret);
			goto out;
		}
		w.defer = !o->no_defer;
	}
	memset(&s0, 0, sizeof(s0));
	for (unsigned k = 0; k < total; k++) {
		struct tencache_cache_stats st;
		bool measured = k >= warm;
		uint64_t t0 = now_ns(), dt;

		if (k == warm) {
			ret = tencache_cache_stats(c, &s0, sizeof(s0));
			if (ret) {
				fail("tencache_cache_stats", ret);
				goto out;
			}
		}
		/* past its share of --time-limit, after one measured step: stop there */
		if (pol_deadline_ns && k > warm && now_ns() > pol_deadline_ns) {
			fprintf(stderr, "  %-9s time limit (its share of --time-limit): %u of %u "
				"measured steps\n", name, k - warm, o->steps);
			break;
		}
		ret = run_step(c, tr, ids, !!(cp.flags & TENCACHE_CACHE_HOST_MODE),
			       o->gen.opt_overlap ? &w : NULL);
		/* a step ends when its compute does, as at a trainer's loss.item() */
		ret = ret ?: tencache_cache_sync(c, NULL);
		if (ret)
			goto out;
		dt = now_ns() - t0;
		ret = tencache_cache_stats(c, &st, sizeof(st));
		if (ret) {
			fail("tencache_cache_stats", ret);
			goto out;
		}
		fprintf(stderr, "  %-9s step %u/%u %-8s %9.1f ms  hits %6.2f%%  stall %8.1f ms"
			"  GPU-timeline hits %6.2f%%  stall %8.1f ms\n",
			name, k + 1, total,
			!measured ? (st.plan_trying ? "timing" : "warm-up") :
			st.planned_steps > planned ? "" : "UNPLANNED",
			dt / 1e6,
			st.last_acquires ? 100.0 * st.last_hits / st.last_acquires : 100.0,
			st.last_stall_ns / 1e6,
			st.last_acquires ? 100.0 * st.last_gpu_hits / st.last_acquires : 100.0,
			st.last_gpu_stall_ns / 1e6);
		planned = st.planned_steps;
		/* the cache still times its plans (plan_trying): warm up longer */
		if (!measured && k + 1 == warm && st.plan_trying && warm < o->warmup + TRIAL_WARM) {
			warm++;
			total++;
		}
		if (measured) {
			n++;
			r->step_ns[k - warm] = dt;
			r->step_hits[k - warm] = st.last_hits;
			r->step_gpu_hits[k - warm] = st.last_gpu_hits;
			r->step_stall_ns[k - warm] = st.last_stall_ns;
			r->step_gpu_stall_ns[k - warm] = st.last_gpu_stall_ns;
			sum += dt;
			if (!r->step_min_ns || dt < r->step_min_ns)
				r->step_min_ns = dt;
		}
	}
	ret = tencache_cache_stats(c, &s1, sizeof(s1));
	if (ret) {
		fail("tencache_cache_stats", ret);
		goto out;
	}
	r->steps = n;
	r->step_mean_ns = sum / n;
	r->acquires = (s1.acquires - s0.acquires) / n;
	r->hits = (s1.hits - s0.hits) / n;
	r->stall_ns = (s1.stall_ns - s0.stall_ns) / n;
	r->gpu_hits = (s1.gpu_hits - s0.gpu_hits) / n;
	r->gpu_stall_ns = (s1.gpu_stall_ns - s0.gpu_stall_ns) / n;
	r->late = (s1.late_prefetches - s0.late_prefetches) / n;
	for (int l = 0; l < TC_LINK_NR; l++)
		r->link_bytes[l] = (s1.link_bytes[l] - s0.link_bytes[l]) / n;
	for (int w = 0; w < 2; w++)
		r->disk_busy_ns[w] = (s1.disk_busy_ns[w] - s0.disk_busy_ns[w]) / n;
	r->disk_both_ns = (s1.disk_both_ns - s0.disk_both_ns) / n;
	r->disk_slow_steps = s1.disk_slow_steps;
	r->planned_steps = s1.planned_steps;
	r->reprofiles = s1.reprofiles;
	r->replans = s1.replans;
	r->plan_fallbacks = s1.plan_fallbacks;
	r->planner_layouts = s1.planner_layouts;
	r->plan_laid_out = s1.plan_laid_out;
	r->plan_trials = s1.plan_trials;
	r->pinned_layouts = s1.pinned_layouts;
	r->deferred_waits = s1.deferred_waits - s0.deferred_waits;
	r->deferred_host_waits = s1.deferred_host_waits - s0.deferred_host_waits;
	r->queued_host_waits = s1.queued_host_waits - s0.queued_host_waits;
	r->warmup = warm;
	r->gpu_peak = s1.gpu_bytes_peak;
	r->exec_plan_gpu = s1.plan_gpu_bytes;
	r->exec_plan_pinned = s1.plan_pinned_bytes;
	r->exec_plan_pinned_cuts = s1.plan_pinned_cuts;
	memcpy(r->link_bw, s1.link_bw, sizeof(r->link_bw));
	memcpy(r->duplex_bw, s1.duplex_bw, sizeof(r->duplex_bw));
	r->exec_plan_hit = s1.plan_reads ? (double)s1.plan_hits / s1.plan_reads : 0;
	r->exec_plan_hit_bytes = s1.plan_read_bytes ? (double)s1.plan_hit_bytes / s1.plan_read_bytes : 0;
	if (s1.plan_gpu_bytes && s1.plan_laid_out)
		fprintf(stderr, "  %-9s its plan: %.2f%% hits (%.2f%% of the bytes read), laid out "
			"by the planner in the whole GPU budget\n", name,
			100 * r->exec_plan_hit, 100 * r->exec_plan_hit_bytes);
	else if (s1.plan_gpu_bytes)
		fprintf(stderr, "  %-9s its plan: %.2f%% hits (%.2f%% of the bytes read), made for %.1f%% "
			"of the GPU budget (the rest: room for the arena's fragmentation)\n", name,
			100 * r->exec_plan_hit, 100 * r->exec_plan_hit_bytes,
			100.0 * s1.plan_gpu_bytes / cp.gpu_budget);
	if (s1.plan_pinned_bytes && s1.plan_pinned_bytes < cp.pinned_budget)
		fprintf(stderr, "  %-9s its plan: made for %.1f%% of the pinned budget on average (the "
			"rest: room for its pinned layout, %s)\n", name,
			100.0 * s1.plan_pinned_bytes / cp.pinned_budget,
			s1.plan_pinned_cuts ? "where the layout needed it" : "over the whole step");
	r->decision_ns = s1.decisions ? (double)s1.decision_ns / s1.decisions : 0;
	if (warm > o->warmup)
		fprintf(stderr, "  %-9s warmed up for %u steps: the cache timed the laid-out plan against its own (the %s ran)\n",
			name, warm, s1.plan_laid_out ? "laid-out one" : "executor's");
	if (timeline) {
		ret = tencache_cache_timeline(c, timeline);
		if (ret)
			fail(timeline, ret);
		else
			fprintf(stderr, "  timeline of %s: %s (open in https://ui.perfetto.dev)\n",
				name, timeline);
	}
out:
	worker_stop(&w);
	tencache_cache_destroy(c);
	free(ids);
	r->ran = !ret;
	r->err = ret;
	return ret;
}

/* ---- output --------------------------------------------------------------- */

static void fmt_bytes(char *buf, size_t n, uint64_t b)
{
	if (b >= 10ULL << 30)
		snprintf(buf, n, "%.1f GiB", b / 1073741824.0);
	else if (b >= 10ULL << 20)
		snprintf(buf, n, "%.0f MiB", b / 1048576.0);
	else
		snprintf(buf, n, "%.1f MiB", b / 1048576.0);
}

static void print_table(const struct opts *o, const struct result *res)
{
	printf("\n%-9s %9s %9s %9s %6s %7s %7s %7s %9s %9s %5s", "policy", "step ms", "model ms",
	       "bound ms", "ratio", "hit %", "gpu %", "plan %", "stall ms", "gpu stl", "late");
	for (int l = 0; l < TC_LINK_NR; l++)
		printf(" %9s", link_names[l]);
	printf("\n%-9s %9s %9s %9s %6s %7s %7s %7s %9s %9s %5s", "", "(mean)", "(sim)", "", "step/b",
	       "", "", "", "/step", "ms/step", "/step");
	for (int l = 0; l < TC_LINK_NR; l++)
		printf(" %9s", "MB/step");
	printf("\n");
	for (unsigned i = 0; i < NR_POL; i++) {
		const struct result *r = &res[i];

		if (!o->pol[i])
			continue;
		printf("%-9s", pol_label(i));
		if (o->model_only) {
			if (r->plan_err) {
				printf(" %9s %9s  (%s)\n", "-", "-", err_str(r->plan_err));
				continue;
			}
			printf(" %9s %9.1f %9.1f %6.2f %7s %7s %7.2f %9.2f %9s %5s", "-",
			       r->sim.step_ns / 1e6, r->model_bound_ns / 1e6,
			       r->model_bound_ns ? (double)r->sim.step_ns / r->model_bound_ns : 0,
			       "-", "-", 100 * r->plan_hit, r->sim.stall_ns / 1e6, "-", "-");
			for (int l = 0; l < TC_LINK_NR; l++)
				printf(" %9.1f", r->sim.link_bytes[l] / MB);
			printf("\n");
			continue;
		}
		if (r->ran)
			printf(" %9.1f", r->step_mean_ns / 1e6);
		else
			printf(" %9s", "error");
		if (!r->plan_err)
			printf(r->model_fallback ? " %8.1f*" : " %9.1f", r->sim.step_ns / 1e6);
		else
			printf(" %9s", "-");
		printf(" %9.1f", r->bound_ns / 1e6);
		if (r->ran) {
			printf(" %6.2f %7.2f %7.2f",
			       r->bound_ns ? (double)r->step_mean_ns / r->bound_ns : 0,
			       r->acquires ? 100.0 * r->hits / r->acquires : 100.0,
			       r->acquires ? 100.0 * r->gpu_hits / r->acquires : 100.0);
			if (r->exec_plan_gpu)
				printf(" %7.2f", 100 * r->exec_plan_hit);
			else
				printf(" %7s", "-");
			printf(" %9.2f %9.2f %5llu", r->stall_ns / 1e6, r->gpu_stall_ns / 1e6,
			       (unsigned long long)r->late);
			for (int l = 0; l < TC_LINK_NR; l++)
				printf(" %9.1f", r->link_bytes[l] / MB);
		} else {
			printf("  (%s)", err_str(r->err));
		}
		printf("\n");
	}
	if (o->model_only)
		printf("\n--model-only: no replay; ratio and stall are the model's (step/bound, the\n"
		       "time its GPU op waited), link MB the plan's.");
	for (unsigned i = 0; i < NR_POL; i++) {
		if (o->pol[i] && res[i].model_fallback) {
			printf("\n*: no layout of ours' plan fitted the GPU budget: the cache ran the\n"
			       "ZeRO-like plan, and model and plan are that plan's.");
			break;
		}
	}
	printf("\nstep: wall time per measured step (mean of %u, fewer at --time-limit); model:\n"
	       "the planner's timing model (tc_sim_run) for the same budget and links; bound:\n"
	       "max(compute, each pair of links' least time for its bytes (H2D and D2H, NVMe\n"
	       "read and write: each alone or both at once), at the fastest rates any\n"
	       "policy's cache measured in this run)%s; hit: GPU acquires found\n"
	       "resident and their copies done when acquire ran (the CPU's clock); gpu: the same\n"
	       "on the compute stream's clock (copies done when the stream got there); plan: the\n"
	       "hit rate of the plan the cache ran (reads needing data; made for less than the\n"
	       "budget where its layout needed room, see 'its plan' above; the model's is in the\n"
	       "JSON); stall: host time acquire waited (host mode, host ops); gpu stl: time the\n"
	       "compute waited for copies on its own clock (host mode: the same as stall).\n", o->steps,
	       o->gen.opt_overlap ? "\n(--overlap: compute is the GPU's or the host ops', the busier)" : "");
}

static cJSON *u64_array(const uint64_t *v, unsigned n)
{
	cJSON *a = cJSON_CreateArray();

	for (unsigned i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
	return a;
}

/* What ours' plan search chose (tc_plan_build), under "model" */
static void add_choices(cJSON *s, const struct tc_plan_stats *st, bool nvme)
{
	static const char *const so[TC_STAGE_OUT_NR] = { "eviction", "written", "halfway" };
	cJSON *c = cJSON_AddObjectToObject(s, "search");

	if (!c)
		return;
	cJSON_AddNumberToObject(c, "gpu_reserve_bytes", (double)st->reserve_bytes);
	cJSON_AddBoolToObject(c, "cold_first", st->cold_first);
	if (!nvme)
		return;
	cJSON_AddNumberToObject(c, "pinned_reserve_bytes", (double)st->pinned_reserve_bytes);
	cJSON_AddNumberToObject(c, "pinned_horizon_64ths", st->pinned_horizon);
	cJSON_AddStringToObject(c, "pinned_stage_out",
				st->pinned_stage_out < TC_STAGE_OUT_NR ? so[st->pinned_stage_out] : "?");
}

static cJSON *result_json(int argc, char **argv, const struct opts *o,
			  const struct tc_model *m, const struct tc_trace *tr,
			  const struct tencache_cache_params *cp, const double *bw,
			  const char *bw_src, bool host, const struct hitref *hr, const struct result *res)
{
	cJSON *root = cJSON_CreateObject(), *x, *arr;
	struct utsname u;
	char cmd[4096] = "tencache-bench";
	size_t n = strlen(cmd);
	uint64_t ops = 0;

	if (!root)
		return NULL;
	for (int i = 0; i < argc && n < sizeof(cmd) - 2; i++)
		n += snprintf(cmd + n, sizeof(cmd) - n, " %s", argv[i]);
	cJSON_AddStringToObject(root, "command", cmd);
	uname(&u);
	x = cJSON_AddObjectToObject(root, "machine");
	cJSON_AddStringToObject(x, "host", u.nodename);
	cJSON_AddStringToObject(x, "kernel", u.release);
	cJSON_AddNumberToObject(x, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	cJSON_AddStringToObject(root, "mode", o->model_only ? "model-only" : host ? "host" : "gpu");

	x = cJSON_AddObjectToObject(root, "model");
	cJSON_AddStringToObject(x, "name", m->name);
	cJSON_AddStringToObject(x, "arch", m->arch == TC_ARCH_OPT ? "opt" : "llama");
	cJSON_AddNumberToObject(x, "layers", m->layers);
	cJSON_AddNumberToObject(x, "hidden", m->hidden);
	cJSON_AddNumberToObject(x, "ffn", m->ffn);
	cJSON_AddNumberToObject(x, "heads", m->heads);
	cJSON_AddNumberToObject(x, "kv_heads", m->kv_heads);
	cJSON_AddNumberToObject(x, "vocab", m->vocab);
	cJSON_AddNumberToObject(x, "params", (double)tc_model_params(m));
	x = cJSON_AddObjectToObject(root, "generator");
	cJSON_AddNumberToObject(x, "batch", o->gen.batch);
	cJSON_AddNumberToObject(x, "seq", o->gen.seq);
	cJSON_AddNumberToObject(x, "tflops", o->gen.tflops);
	cJSON_AddNumberToObject(x, "adam_params_per_s", o->gen.adam_params_per_s);
	cJSON_AddBoolToObject(x, "adam_on_gpu", o->gen.opt_on_gpu);
	cJSON_AddBoolToObject(x, "overlap", o->gen.opt_overlap);
	/* the worker, not the caller, waits for the host ops' tensors */
	cJSON_AddBoolToObject(x, "deferred_host_waits", o->gen.opt_overlap && !o->no_defer);
	if (o->gen.opt_overlap && o->gen.opt_pace_ns)	/* the worker's order */
		cJSON_AddNumberToObject(x, "overlap_pace_ns", (double)o->gen.opt_pace_ns);
	else if (o->gen.opt_overlap)
		cJSON_AddNumberToObject(x, "overlap_layers", o->gen.opt_split);	/* -1: estimate */

	for (uint32_t i = 0; i < tr->nr_acc; i++)
		ops += !!(tr->acc[i].flags & TC_ACC_END);
	x = cJSON_AddObjectToObject(root, "trace");
	cJSON_AddNumberToObject(x, "tensors", tr->nr_tensors);
	cJSON_AddNumberToObject(x, "accesses", tr->nr_acc);
	cJSON_AddNumberToObject(x, "ops", (double)ops);
	cJSON_AddNumberToObject(x, "bytes", (double)tc_trace_bytes(tr, -1));
	cJSON_AddNumberToObject(x, "param16_bytes",
				(double)(tc_trace_bytes(tr, TC_ROLE_PARAM_FP16) +
					 tc_trace_bytes(tr, TC_ROLE_PARAM_BF16)));
	cJSON_AddNumberToObject(x, "compute_ns", (double)tc_trace_compute_ns(tr));
	cJSON_AddNumberToObject(x, "bound_compute_ns", (double)bound_compute(tr, o->gen.opt_overlap));
	cJSON_AddNumberToObject(x, "max_op_bytes", (double)tc_trace_max_op_bytes(tr));

	x = cJSON_AddObjectToObject(root, "cache");
	cJSON_AddNumberToObject(x, "gpu_budget", (double)cp->gpu_budget);
	cJSON_AddNumberToObject(x, "pinned_budget", (double)cp->pinned_budget);
	cJSON_AddNumberToObject(x, "nvme_budget", (double)cp->nvme_budget);
	cJSON_AddNumberToObject(x, "warmup_steps", o->warmup);
	cJSON_AddNumberToObject(x, "profile_steps", o->profile);
	cJSON_AddNumberToObject(x, "steps", o->steps);
	arr = cJSON_AddObjectToObject(x, "bw");
	for (int l = 0; l < TC_LINK_NR; l++)
		cJSON_AddNumberToObject(arr, link_names[l], bw[l]);
	if (o->nvme_duplex > 0)
		cJSON_AddNumberToObject(arr, "NVMe-rd+wr", o->nvme_duplex);
	cJSON_AddStringToObject(x, "bw_source", bw_src);
	cJSON_AddNumberToObject(root, "belady_hit_rate", hr->belady);
	cJSON_AddNumberToObject(root, "belady_byte_hit_rate", hr->belady_bytes);
	cJSON_AddNumberToObject(root, "min_small_kept_hit_rate", hr->kept);
	cJSON_AddNumberToObject(root, "min_small_kept_byte_hit_rate", hr->kept_bytes);

	arr = cJSON_AddArrayToObject(root, "policies");
	for (unsigned i = 0; i < NR_POL; i++) {
		const struct result *r = &res[i];
		cJSON *p, *s;

		if (!o->pol[i])
			continue;
		p = cJSON_CreateObject();
		cJSON_AddItemToArray(arr, p);
		cJSON_AddStringToObject(p, "policy", pol_label(i));
		cJSON_AddBoolToObject(p, "ok", r->ran || (o->model_only && !r->plan_err));
		if (!r->ran && !o->model_only)	/* no error yet: written before it ran */
			cJSON_AddStringToObject(p, "error", r->err ? err_str(r->err) : "not run yet");
		if (r->ran) {
			cJSON_AddItemToObject(p, "step_ns", u64_array(r->step_ns, r->steps));
			cJSON_AddNumberToObject(p, "step_mean_ns", (double)r->step_mean_ns);
			cJSON_AddNumberToObject(p, "step_min_ns", (double)r->step_min_ns);
			cJSON_AddNumberToObject(p, "acquires", (double)r->acquires);
			cJSON_AddNumberToObject(p, "hits", (double)r->hits);
			cJSON_AddNumberToObject(p, "hit_rate",
						r->acquires ? (double)r->hits / r->acquires : 1);
			cJSON_AddNumberToObject(p, "stall_ns", (double)r->stall_ns);
			/* on the compute's clock (host mode: = hits, stall_ns) */
			cJSON_AddNumberToObject(p, "gpu_hits", (double)r->gpu_hits);
			cJSON_AddNumberToObject(p, "gpu_hit_rate",
						r->acquires ? (double)r->gpu_hits / r->acquires : 1);
			cJSON_AddNumberToObject(p, "gpu_stall_ns", (double)r->gpu_stall_ns);
			cJSON_AddItemToObject(p, "step_hits", u64_array(r->step_hits, r->steps));
			cJSON_AddItemToObject(p, "step_gpu_hits", u64_array(r->step_gpu_hits, r->steps));
			cJSON_AddItemToObject(p, "step_stall_ns", u64_array(r->step_stall_ns, r->steps));
			cJSON_AddItemToObject(p, "step_gpu_stall_ns",
					      u64_array(r->step_gpu_stall_ns, r->steps));
			cJSON_AddNumberToObject(p, "late_prefetches", (double)r->late);
			cJSON_AddItemToObject(p, "link_bytes", u64_array(r->link_bytes, TC_LINK_NR));
			cJSON_AddItemToObject(p, "disk_busy_ns", u64_array(r->disk_busy_ns, 2));
			cJSON_AddNumberToObject(p, "disk_both_ns", (double)r->disk_both_ns);
			cJSON_AddNumberToObject(p, "disk_slow_steps", (double)r->disk_slow_steps);
			cJSON_AddNumberToObject(p, "planned_steps", (double)r->planned_steps);
			cJSON_AddNumberToObject(p, "reprofiles", (double)r->reprofiles);
			cJSON_AddNumberToObject(p, "replans", (double)r->replans);
			cJSON_AddNumberToObject(p, "plan_fallbacks", (double)r->plan_fallbacks);
			cJSON_AddNumberToObject(p, "planner_layouts", (double)r->planner_layouts);
			cJSON_AddNumberToObject(p, "plan_trials", (double)r->plan_trials);
			cJSON_AddNumberToObject(p, "pinned_layouts", (double)r->pinned_layouts);
			cJSON_AddNumberToObject(p, "deferred_waits", (double)r->deferred_waits);
			cJSON_AddNumberToObject(p, "deferred_host_waits",
						(double)r->deferred_host_waits);
			cJSON_AddNumberToObject(p, "queued_host_waits",
						(double)r->queued_host_waits);
			cJSON_AddNumberToObject(p, "warmup_steps", r->warmup);
			cJSON_AddNumberToObject(p, "exec_plan_gpu_bytes", (double)r->exec_plan_gpu);
			if (r->exec_plan_pinned) {
				cJSON_AddNumberToObject(p, "exec_plan_pinned_bytes",
							(double)r->exec_plan_pinned);
				cJSON_AddNumberToObject(p, "exec_plan_pinned_cuts",
							(double)r->exec_plan_pinned_cuts);
			}
			cJSON_AddNumberToObject(p, "exec_plan_hit_rate", r->exec_plan_hit);
			cJSON_AddNumberToObject(p, "exec_plan_byte_hit_rate", r->exec_plan_hit_bytes);
			cJSON_AddNumberToObject(p, "gpu_bytes_peak", (double)r->gpu_peak);
			cJSON_AddNumberToObject(p, "decision_ns", r->decision_ns);
			cJSON_AddNumberToObject(p, "bound_ns", (double)r->bound_ns);
			x = cJSON_AddObjectToObject(p, "link_bw");	/* the bound's */
			for (int l = 0; l < TC_LINK_NR; l++)
				cJSON_AddNumberToObject(x, link_names[l], r->link_bw[l]);
			cJSON_AddNumberToObject(x, "H2D+D2H", r->duplex_bw[0]);
			cJSON_AddNumberToObject(x, "NVMe-rd+wr", r->duplex_bw[1]);
			cJSON_AddNumberToObject(p, "step_over_bound",
						r->bound_ns ? (double)r->step_mean_ns / r->bound_ns : 0);
		}
		s = cJSON_AddObjectToObject(p, "model");
		if (r->plan_err) {
			cJSON_AddStringToObject(s, "error", err_str(r->plan_err));
			continue;
		}
		cJSON_AddStringToObject(s, "policy", r->model_fallback ? "zero" : policies[i].name);
		cJSON_AddNumberToObject(s, "hit_rate", r->plan_hit);
		cJSON_AddNumberToObject(s, "step_ns", (double)r->sim.step_ns);
		cJSON_AddNumberToObject(s, "compute_ns", (double)r->sim.compute_ns);
		cJSON_AddNumberToObject(s, "stall_ns", (double)r->sim.stall_ns);
		cJSON_AddNumberToObject(s, "host_ns", (double)r->sim.host_ns);
		cJSON_AddNumberToObject(s, "bound_ns", (double)r->model_bound_ns);
		cJSON_AddItemToObject(s, "link_bytes", u64_array(r->sim.link_bytes, TC_LINK_NR));
		cJSON_AddNumberToObject(s, "gpu_peak", (double)r->sim.gpu_peak);
		cJSON_AddNumberToObject(s, "plan_ns", (double)r->plan_ns);
		if (r->plan1_ns)
			cJSON_AddNumberToObject(s, "plan_one_thread_ns", (double)r->plan1_ns);
		if (!r->model_fallback && policies[i].tp == TC_POLICY_OURS)
			add_choices(s, &r->plan_st, o->nvme != NULL);
		if (r->sim.link_bytes[TC_LINK_NVME_RD] || r->sim.link_bytes[TC_LINK_NVME_WR]) {
			cJSON_AddNumberToObject(s, "nvme_idle_ns", (double)r->sim.nvme_idle_ns);
			cJSON_AddNumberToObject(s, "nvme_gap_ns", (double)r->sim.nvme_gap_ns);
			cJSON_AddNumberToObject(s, "nvme_gap_at_ns", (double)r->sim.nvme_gap_at_ns);
		}
	}
	return root;
}

static int write_json(const char *path, cJSON *root)
{
	char *text = cJSON_Print(root);
	FILE *f;
	int ret = 0;

	if (!text)
		return -ENOMEM;
	f = fopen(path, "w");
	if (!f)
		ret = -errno;
	else if (fputs(text, f) < 0 || fputc('\n', f) < 0)
		ret = -EIO;
	if (f && fclose(f) && !ret)
		ret = -errno;
	cJSON_free(text);
	return ret;
}

/* Runs python3 plot_replay.py JSON PNG (the python3 on PATH, then the
 * system's, which has Debian's python3-matplotlib); a missing python or
 * matplotlib is a message, not a failure. */
static void plot(const char *json, const char *png)
{
	static const char *const pythons[] = { "python3", "/usr/bin/python3" };
	const char *cands[] = { "%s/plot_replay.py", "%s/../../tools/plot_replay.py" };
	char exe[PATH_MAX], script[PATH_MAX + 64], *slash;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	const char *env = getenv("TENCACHE_PLOT_SCRIPT");
	int st = -1;

	script[0] = 0;
	if (env)
		snprintf(script, sizeof(script), "%s", env);
	else if (n > 0) {
		exe[n] = 0;
		slash = strrchr(exe, '/');
		if (slash)
			*slash = 0;
		for (unsigned i = 0; i < 2 && !script[0]; i++) {
			snprintf(script, sizeof(script), cands[i], exe);
			if (access(script, R_OK))
				script[0] = 0;
		}
	}
	if (!script[0]) {
		fprintf(stderr, "replay: no plot: tools/plot_replay.py not found "
			"(set TENCACHE_PLOT_SCRIPT)\n");
		return;
	}
	fflush(NULL);
	/* exit 3: that python has no matplotlib; try the next one */
	for (unsigned i = 0; i < 2 && (st == -1 || st == 3); i++) {
		char *args[] = { (char *)pythons[i], script, (char *)json, (char *)png, NULL };
		pid_t pid;
		int ws;

		if (posix_spawnp(&pid, pythons[i], NULL, NULL, args, environ))
			continue;
		if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws))
			st = 1;
		else
			st = WEXITSTATUS(ws);
	}
	if (st == -1)
		fprintf(stderr, "replay: no plot: python3 not found\n");
	else if (st)
		fprintf(stderr, "replay: no plot (see the message above; the run itself is fine)\n");
}

static uint64_t mem_available(void)
{
	unsigned long long kb = 0;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* Host memory the cache will take: every pinned home (or the pinned budget
 * with NVMe), plus in host mode the "GPU" arena. */
static int check_memory(const struct tc_trace *tr, const struct tencache_cache_params *cp,
			bool host)
{
	uint64_t need = 0, avail = mem_available();
	struct tencache_reservation r;
	char b1[32], b2[32];

	/* a reservation (tencache-ctl reserve) is memory the pool will map */
	if (!tencache_reserve_info(NULL, -1, &r) && !r.in_use)
		avail += r.allocated;

	for (uint32_t i = 0; i < tr->nr_tensors && !cp->nvme_budget; i++)
		need += (tr->tensors[i].bytes + 4095) & ~4095ULL;
	if (cp->nvme_budget)
		need = cp->pinned_budget;
	if (host)
		need += cp->gpu_budget;
	if (!avail || need < avail)
		return 0;
	fmt_bytes(b1, sizeof(b1), need);
	fmt_bytes(b2, sizeof(b2), avail);
	fprintf(stderr, "replay: the cache needs %s of host memory and %s is available; "
		"scale the model (--layers, --hidden, --vocab) or use --nvme PATH with a "
		"--pinned-budget\n", b1, b2);
	return -ENOMEM;
}

/* ---- main ----------------------------------------------------------------- */

int bench_replay(int argc, char **argv)
{
	struct tencache_params tp = { 0 };
	struct tencache_cache_params cp = { 0 };
	struct result *res = NULL;
	struct tc_plan_cfg pcfg;
	double mdx[2];		/* the model's both-ways figures (the bound's) */
	struct tc_trace tr;
	struct tc_model m;
	struct tencache *tc = NULL;
	struct opts o;
	double bw[TC_LINK_NR], belady = 0;
	struct hitref hr = { 0 };
	uint64_t p16, all, maxop, compute;
	const char *bw_src;
	char b1[32], b2[32], b3[32], tmp_json[64] = "", tl[4096];
	bool host, any_fail = false;
	int ret;

	ret = parse_opts(argc, argv, &o);
	if (ret)
		return ret < 0 ? 0 : ret;	/* --help: 0 */
	deadline_ns = o.time_limit > 0 ? now_ns() + (uint64_t)(o.time_limit * 1e9) : 0;
	ret = load_model(&o, &m);
	if (ret)
		return 1;
	tc_trace_init(&tr);
	ret = tc_model_trace(&m, &o.gen, &tr);
	if (ret) {
		fail("generating the trace", ret);
		return 1;
	}
	p16 = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16);
	all = tc_trace_bytes(&tr, -1);
	maxop = tc_trace_max_op_bytes(&tr);
	compute = tc_trace_compute_ns(&tr);

	/* budgets */
	cp.warmup_steps = o.profile;
	cp.table_path = o.table;
	if (parse_bytes(o.gpu_budget, p16, &cp.gpu_budget)) {
		fprintf(stderr, "replay: bad --gpu-budget %s\n", o.gpu_budget);
		ret = 2;
		goto out;
	}
	if (o.nvme) {
		cp.nvme_path = o.nvme;
		if (parse_bytes(o.pinned_budget ? o.pinned_budget : "50%", all, &cp.pinned_budget) ||
		    parse_bytes(o.nvme_budget ? o.nvme_budget : "100%", all, &cp.nvme_budget)) {
			fprintf(stderr, "replay: bad --pinned-budget or --nvme-budget\n");
			ret = 2;
			goto out;
		}
		/* default: room for every tensor's O_DIRECT-aligned swap slot */
		if (!o.nvme_budget)
			cp.nvme_budget += (uint64_t)tr.nr_tensors * 4096;
	} else if (o.pinned_budget) {
		fprintf(stderr, "replay: --pinned-budget needs --nvme (without NVMe every "
			"tensor has a pinned home)\n");
		ret = 2;
		goto out;
	}
	if (cp.gpu_budget < maxop) {
		fmt_bytes(b1, sizeof(b1), cp.gpu_budget);
		fmt_bytes(b2, sizeof(b2), maxop);
		fprintf(stderr, "replay: GPU budget %s is below the largest op (%s held at "
			"once); raise --gpu-budget\n", b1, b2);
		ret = 2;
		goto out;
	}
	/* a host op (CPU Adam) holds all its tensors in pinned memory */
	if (o.nvme && cp.pinned_budget < tc_trace_max_host_op_bytes(&tr)) {
		fmt_bytes(b1, sizeof(b1), cp.pinned_budget);
		fmt_bytes(b2, sizeof(b2), tc_trace_max_host_op_bytes(&tr));
		fprintf(stderr, "replay: pinned budget %s is below the largest CPU optimizer op "
			"(%s held in pinned memory at once); raise --pinned-budget\n", b1, b2);
		ret = 2;
		goto out;
	}

	/* library, mode (--model-only: neither) */
	if (o.model_only) {
		host = false;
	} else {
		tp.flags = o.host ? TENCACHE_F_NO_CUDA : 0;
		tp.log_level = o.verbose ? TENCACHE_LOG_DEBUG : TENCACHE_LOG_WARN;
		tp.queue_depth = o.queue_depth;
		tp.io_size = o.io_kib * 1024;
		ret = tencache_init(&tc, &tp);
		if (ret) {
			fail("tencache_init", ret);
			goto out;
		}
		host = o.host || tencache_cuda_available(tc);
		if (host)
			cp.flags |= TENCACHE_CACHE_HOST_MODE;
		if (o.no_layout)
			cp.flags |= TENCACHE_CACHE_NO_LAYOUT;
		if (o.layout)
			cp.flags |= TENCACHE_CACHE_LAYOUT;
		cp.flags |= TENCACHE_CACHE_DETACH_FIFO;	/* the worker runs ops in trace order */
		if (check_memory(&tr, &cp, host)) {
			ret = 2;
			goto out;
		}
	}

	/* links */
	if (o.have_bw) {
		memcpy(bw, o.bw, sizeof(bw));
		memcpy(cp.bw, o.bw, sizeof(cp.bw));
		cp.duplex_bw[1] = o.nvme_duplex;
		bw_src = "given (--bw)";
	} else if (host) {
		struct tc_plan_cfg d;

		tc_plan_cfg_default(&d);
		bw[TC_LINK_H2D] = bw[TC_LINK_D2H] = memcpy_bw();
		bw[TC_LINK_NVME_RD] = d.bw[TC_LINK_NVME_RD];
		bw[TC_LINK_NVME_WR] = d.bw[TC_LINK_NVME_WR];
		if (!(bw[0] > 0)) {
			ret = -ENOMEM;
			fail("measuring memcpy", ret);
			goto out;
		}
		/* NVMe is left to the cache's calibration */
		cp.bw[TC_LINK_H2D] = cp.bw[TC_LINK_D2H] = bw[TC_LINK_H2D];
		bw_src = "memcpy measured here (NVMe: planner defaults for the model)";
	} else {
		tc_plan_cfg_default(&pcfg);
		memcpy(bw, pcfg.bw, sizeof(bw));
		bw_src = o.model_only ? "the planner's H200 figures (--model-only)" :
			 "cache calibrates; model and bound use the planner's H200 figures";
	}
	/* the disk: the swap file's own rates, measured once, for the model
	 * and every policy's cache (their plans and bounds on one scale) */
	if (!o.have_bw && !o.model_only && cp.nvme_budget) {
		ret = measure_disk(tc, &cp, bw, &o.nvme_duplex);
		if (ret) {
			fail("measuring the swap file's rates", ret);
			goto out;
		}
		cp.bw[TC_LINK_NVME_RD] = bw[TC_LINK_NVME_RD];
		cp.bw[TC_LINK_NVME_WR] = bw[TC_LINK_NVME_WR];
		cp.duplex_bw[1] = o.nvme_duplex;
		bw_src = host ? "memcpy measured here, NVMe measured on the swap file (the model's "
				"and every cache's)" :
			 "NVMe measured on the swap file (the model's and every cache's), H2D and D2H "
			 "the planner's H200 figures for the model (each cache calibrates them)";
	}

	/* header */
	fmt_bytes(b1, sizeof(b1), all);
	fmt_bytes(b2, sizeof(b2), p16);
	printf("replay: %s (%u layers, hidden %u, vocab %u: %.1fM params), batch %u x seq %u, "
	       "%s Adam\n", m.name, m.layers, m.hidden, m.vocab, tc_model_params(&m) / 1e6,
	       o.gen.batch, o.gen.seq, o.gen.opt_on_gpu ? "GPU" : "CPU");
	printf("  trace: %u tensors, %u accesses; state %s (fp16 params %s); compute %.1f ms "
	       "per step at %.0f TFLOP/s\n", tr.nr_tensors, tr.nr_acc, b1, b2, compute / 1e6,
	       o.gen.tflops);
	fmt_bytes(b1, sizeof(b1), cp.gpu_budget);
	fmt_bytes(b3, sizeof(b3), maxop);
	printf("  %s; GPU budget %s (%.1f%% of fp16 params; largest op %s)",
	       o.model_only ? "timing model only" : host ? "host mode" : "GPU mode", b1,
	       100.0 * cp.gpu_budget / p16, b3);
	if (cp.nvme_budget) {
		fmt_bytes(b1, sizeof(b1), cp.pinned_budget);
		fmt_bytes(b2, sizeof(b2), cp.nvme_budget);
		printf("; pinned %s, NVMe %s at %s", b1, b2, o.nvme);
	}
	plan_cfg(&o, &cp, bw, TC_POLICY_OURS, &pcfg);
	mdx[0] = pcfg.duplex_bw;
	mdx[1] = pcfg.nvme_duplex_bw;
	printf("\n  links (GB/s): H2D %.1f, D2H %.1f (both at once %.1f in the model), NVMe read %.1f, "
	       "write %.1f", bw[0] / 1e9, bw[1] / 1e9, pcfg.duplex_bw / 1e9, bw[2] / 1e9,
	       bw[3] / 1e9);
	if (pcfg.nvme_duplex_bw > 0)
		printf(" (both at once %.1f in the model)", pcfg.nvme_duplex_bw / 1e9);
	printf(": %s\n", bw_src);
	if (o.gen.opt_overlap) {
		ret = pick_overlap(&o, &m, &pcfg, &tr);
		if (ret) {
			fail("--overlap: the timing model", ret);
			ret = 1;
			goto out;
		}
		compute = bound_compute(&tr, true);
	}
	ret = belady_hit(&tr, &pcfg, true, &belady, &hr.belady_bytes);
	ret = ret ?: belady_hit(&tr, &pcfg, false, &hr.kept, &hr.kept_bytes);
	hr.belady = belady;
	if (ret)
		fprintf(stderr, "replay: the Belady planner: %s\n", strerror(-ret));
	else
		printf("  Belady (MIN) GPU hit rate for this budget: %.2f%% (%.2f%% of the bytes read); "
		       "MIN keeping tensors under 1/1000 of the budget (up to 1/32 of it): %.2f%% (%.2f%%)\n",
		       100 * belady, 100 * hr.belady_bytes, 100 * hr.kept, 100 * hr.kept_bytes);
	fflush(stdout);

	res = calloc(NR_POL, sizeof(*res));
	if (!res) {
		ret = -ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < NR_POL; i++) {
		struct result *r = &res[i];
		unsigned left = 0;
		uint64_t t0;

		if (!o.pol[i])
			continue;
		for (unsigned j = i; j < NR_POL; j++)
			left += o.pol[j];
		t0 = now_ns();
		pol_deadline_ns = deadline_ns && t0 < deadline_ns ?
				  t0 + (deadline_ns - t0) / left : deadline_ns;
		plan_cfg(&o, &cp, bw, policies[i].tp, &pcfg);
		if (o.layout && policies[i].tp == TC_POLICY_OURS)
			pcfg.flags |= TC_PLAN_LAYOUT;	/* what the cache runs then */
		t0 = now_ns();
		if (deadline_ns && t0 > deadline_ns) {
			fprintf(stderr, "  %-9s skipped: time limit (--time-limit)\n", pol_label(i));
			r->err = -ETIME;
			r->plan_err = -ETIME;
			any_fail = true;
			continue;
		}
		predict(&tr, &pcfg, r, o.model_only ? timeline_path(&o, i, tl, sizeof(tl)) : NULL);
		r->plan_ns = now_ns() - t0;
		if (r->plan_err)
			fprintf(stderr, "  %-9s timing model: %s\n", pol_label(i),
				strerror(-r->plan_err));
		else {
			fprintf(stderr, "  %-9s timing model: %.1f ms/step, stall %.1f ms",
				pol_label(i), r->sim.step_ns / 1e6, r->sim.stall_ns / 1e6);
			/* where the disk waits is where an NVMe step loses time */
			if (r->sim.link_bytes[TC_LINK_NVME_RD] || r->sim.link_bytes[TC_LINK_NVME_WR])
				fprintf(stderr, ", disk idle %.1f ms (longest %.1f ms, %.1f ms into the step)",
					r->sim.nvme_idle_ns / 1e6, r->sim.nvme_gap_ns / 1e6,
					r->sim.nvme_gap_at_ns / 1e6);
			fprintf(stderr, " (planned in %.0f ms)\n", r->plan_ns / 1e6);
			if (o.plan_bench && policies[i].tp == TC_POLICY_OURS)
				plan_bench(&tr, &pcfg, r);
		}
		if (!r->plan_err)
			r->model_bound_ns = bound_ns(compute, r->sim.link_bytes, bw, mdx);
		if (o.model_only) {
			any_fail |= r->plan_err != 0;
			continue;
		}
		ret = run_policy(tc, &o, &tr, &cp, i, timeline_path(&o, i, tl, sizeof(tl)), r);
		if (ret)
			any_fail = true;
		if (r->plan_laid_out && !(pcfg.flags & TC_PLAN_LAYOUT)) {
			/* the cache ran ours laid out by the planner: model that */
			plan_cfg(&o, &cp, bw, TC_POLICY_OURS, &pcfg);
			pcfg.flags |= TC_PLAN_LAYOUT;
			predict(&tr, &pcfg, r, NULL);
			if (!r->plan_err)
				r->model_bound_ns = bound_ns(compute, r->sim.link_bytes, bw, mdx);
		}
		if (r->plan_fallbacks && policies[i].tp == TC_POLICY_OURS) {
			/* the cache ran the ZeRO-like plan: model that one */
			plan_cfg(&o, &cp, bw, TC_POLICY_ZERO, &pcfg);
			predict(&tr, &pcfg, r, NULL);
			r->model_fallback = true;
			if (!r->plan_err) {
				r->model_bound_ns = bound_ns(compute, r->sim.link_bytes, bw, mdx);
				fprintf(stderr, "  %-9s ran the ZeRO-like plan (fallback): its timing "
					"model %.1f ms/step\n", pol_label(i), r->sim.step_ns / 1e6);
			}
		}
		/* what it measured now, and in the JSON, so a later policy that is
		 * cut short (the caller's timeout) loses none of it */
		run_bounds(res, compute, bw, mdx);
		if (r->ran)
			fprintf(stderr, "  %-9s measured: %.1f ms/step (mean of %u), bound %.1f ms "
				"(step / bound %.2f, at the fastest rates seen so far), NVMe %.1f MB "
				"read and %.1f MB written a step\n", pol_label(i),
				r->step_mean_ns / 1e6, r->steps, r->bound_ns / 1e6,
				r->bound_ns ? (double)r->step_mean_ns / r->bound_ns : 0,
				r->link_bytes[TC_LINK_NVME_RD] / MB, r->link_bytes[TC_LINK_NVME_WR] / MB);
		if (r->ran && (r->disk_busy_ns[0] || r->disk_busy_ns[1]))
			disk_line(r, i);
		if (o.out) {
			cJSON *root = result_json(argc, argv, &o, &m, &tr, &cp, bw, bw_src, host,
						  &hr, res);

			if (!root || write_json(o.out, root))
				fprintf(stderr, "  %-9s could not write %s yet: it is tried again at the end\n",
					pol_label(i), o.out);
			cJSON_Delete(root);
		}
	}
	run_bounds(res, compute, bw, mdx);
	print_table(&o, res);

	if (o.out || o.plot) {
		cJSON *root = result_json(argc, argv, &o, &m, &tr, &cp, bw, bw_src, host,
					  &hr, res);
		const char *path = o.out;

		if (!path) {
			int fd;

			snprintf(tmp_json, sizeof(tmp_json), "/tmp/tencache-replay-XXXXXX");
			fd = mkstemp(tmp_json);
			if (fd >= 0)
				close(fd);
			path = fd >= 0 ? tmp_json : NULL;
		}
		ret = root && path ? write_json(path, root) : -ENOMEM;
		cJSON_Delete(root);
		if (ret) {
			fail(path ? path : "the JSON result", ret);
			any_fail = true;
		} else {
			if (o.out)
				printf("result: %s\n", o.out);
			if (o.plot)
				plot(path, o.plot);
		}
		if (tmp_json[0])
			unlink(tmp_json);
	}
	ret = any_fail ? 1 : 0;
out:
	free(res);
	if (tc)
		tencache_exit(tc);
	tc_trace_free(&tr);
	return ret < 0 ? 1 : ret;
}
