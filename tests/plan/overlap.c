/* overlap.c - the optimizer beside backward in the timing model: the trace
 * generator's opt_overlap (the same accesses as the serial step, the last
 * layers' Adam ops inside backward, the rest in forward order; or the
 * order tencache.offload's worker runs them in, opt_pace_ns), and
 * tc_sim_run's TC_PLAN_HOST_ASYNC host lane (host ops beside the GPU, the
 * host blocking where it needs a tensor a host op still holds). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "plan/plan.h"

#define MS 1000000ull

static int cmp_acc(const void *x, const void *y)
{
	const struct tc_access *a = x, *b = y;

	if (a->tensor != b->tensor)
		return a->tensor < b->tensor ? -1 : 1;
	if (a->flags != b->flags)
		return a->flags < b->flags ? -1 : 1;
	return a->compute_ns < b->compute_ns ? -1 : a->compute_ns > b->compute_ns;
}

/* Both orders hold the same accesses (tensor, flags, compute), once each. */
static int same_accesses(const struct tc_trace *a, const struct tc_trace *b)
{
	struct tc_access *x, *y;
	int same;

	if (a->nr_acc != b->nr_acc || a->nr_tensors != b->nr_tensors)
		return 0;
	x = malloc(a->nr_acc * sizeof(*x));
	y = malloc(b->nr_acc * sizeof(*y));
	if (!x || !y) {
		free(x);
		free(y);
		return 0;
	}
	memcpy(x, a->acc, a->nr_acc * sizeof(*x));
	memcpy(y, b->acc, b->nr_acc * sizeof(*y));
	for (uint32_t i = 0; i < a->nr_acc; i++)
		x[i].phase = y[i].phase = 0;
	qsort(x, a->nr_acc, sizeof(*x), cmp_acc);
	qsort(y, b->nr_acc, sizeof(*y), cmp_acc);
	same = !memcmp(x, y, a->nr_acc * sizeof(*x));
	free(x);
	free(y);
	return same;
}

/* Host ops (END accesses) before the last backward op, and the tensor the
 * first host op after it writes last (its parameter). */
static void host_ops(const struct tc_trace *tr, uint32_t *before, uint32_t *first_after)
{
	uint32_t last_bwd = 0;

	for (uint32_t i = 0; i < tr->nr_acc; i++)
		if (tr->acc[i].phase == TC_PHASE_BWD && (tr->acc[i].flags & TC_ACC_END))
			last_bwd = i;
	*before = 0;
	*first_after = UINT32_MAX;
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];

		if (!(a->flags & TC_ACC_HOST) || !(a->flags & TC_ACC_END))
			continue;
		if (i < last_bwd)
			(*before)++;
		else if (*first_after == UINT32_MAX)
			*first_after = a->tensor;
	}
}

/* The host ops after backward go in the order the next forward reads their
 * parameters (the END access of an Adam op writes the parameter). */
static int forward_order(const struct tc_trace *tr)
{
	uint32_t *first = malloc(tr->nr_tensors * sizeof(*first)), last_bwd = 0, prev = 0;
	int ok = 1;

	if (!first)
		return 0;
	for (uint32_t t = 0; t < tr->nr_tensors; t++)
		first[t] = UINT32_MAX;
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		if (first[tr->acc[i].tensor] == UINT32_MAX)
			first[tr->acc[i].tensor] = i;
		if (tr->acc[i].phase == TC_PHASE_BWD && (tr->acc[i].flags & TC_ACC_END))
			last_bwd = i;
	}
	for (uint32_t i = last_bwd; i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];

		if (!(a->flags & TC_ACC_HOST) || !(a->flags & TC_ACC_END))
			continue;
		if (first[a->tensor] < prev)
			ok = 0;
		prev = first[a->tensor];
	}
	free(first);
	return ok;
}

static void generator(void)
{
	struct tc_gen_cfg g;
	struct tc_model m;
	struct tc_trace s, o, all, none;
	uint32_t before, first, nhost = 0;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	tc_trace_init(&s);
	tc_trace_init(&o);
	tc_trace_init(&all);
	T_EQ(tc_model_trace(&m, &g, &s), 0);
	g.opt_overlap = true;
	T_EQ(tc_model_trace(&m, &g, &o), 0);
	g.opt_split = m.layers;
	T_EQ(tc_model_trace(&m, &g, &all), 0);
	g.opt_split = 0;
	tc_trace_init(&none);
	T_EQ(tc_model_trace(&m, &g, &none), 0);
	T_EQ(tc_trace_validate(&o), 0);
	T_CHECK(same_accesses(&s, &o), "overlap: not the serial step's accesses reordered");
	T_CHECK(same_accesses(&s, &all), "opt_split = layers: not the serial accesses");
	T_CHECK(same_accesses(&s, &none), "opt_split = 0: not the serial accesses");
	for (uint32_t i = 0; i < s.nr_acc; i++)
		if ((s.acc[i].flags & TC_ACC_HOST) && (s.acc[i].flags & TC_ACC_END))
			nhost++;

	host_ops(&s, &before, &first);
	T_CHECK(before == 0, "serial: %u host ops before backward ends", before);
	/* the first access of the step reads the embedding: its Adam goes
	 * first once backward is over */
	host_ops(&o, &before, &first);
	T_CHECK(before > 0 && before < nhost, "overlap (auto split): %u of %u host ops in backward",
		before, nhost);
	T_CHECK(first == s.acc[0].tensor, "overlap: the first host op after backward writes "
		"tensor %u, not the embedding (%u)", first, s.acc[0].tensor);
	printf("opt-1.3b, batch 2: %u Adam ops, %u of them inside backward (auto split)\n",
	       nhost, before);
	host_ops(&all, &before, &first);
	/* each layer's Adam waits behind the next layer's backward: layer 0's
	 * has none, and goes after backward with the embeddings' */
	T_CHECK(before == nhost - 4 - (nhost - 4) / m.layers, "opt_split = layers: %u of %u "
		"host ops in backward (all but the embeddings', the final norm's, the head's "
		"and layer 0's)", before, nhost);

	/* none inside backward: all after it, still in forward order */
	host_ops(&none, &before, &first);
	T_CHECK(before == 0 && first == s.acc[0].tensor, "opt_split = 0: %u host ops in "
		"backward, the first after it writes tensor %u, not the embedding (%u)", before,
		first, s.acc[0].tensor);
	T_CHECK(forward_order(&o) && forward_order(&none) && forward_order(&all),
		"overlap: the Adam ops after backward are not in forward order");
	T_CHECK(!forward_order(&s), "serial: the check of the forward order cannot fail");

	/* on the GPU the optimizer stays where it was */
	g.opt_on_gpu = true;
	tc_trace_free(&o);
	tc_trace_init(&o);
	T_EQ(tc_model_trace(&m, &g, &o), 0);
	host_ops(&o, &before, &first);
	T_CHECK(before == 0 && first == UINT32_MAX, "opt_on_gpu with opt_overlap: host ops");
	tc_trace_free(&s);
	tc_trace_free(&o);
	tc_trace_free(&all);
	tc_trace_free(&none);
}

/* Whether a layer's Adam waits for after backward while a layer above it
 * (read later in forward) had its Adam inside backward: the worker passed
 * over it. Only parameters first read in forward count (the head's and the
 * final norm's are read in the head's op). Also checks each op inside
 * backward comes after its gradient's write. */
static int passed_over(const struct tc_trace *tr, int *grad_first)
{
	uint32_t *first = malloc(tr->nr_tensors * sizeof(*first)), last_bwd = 0;
	uint32_t min_in = UINT32_MAX, max_after = 0;
	uint8_t *written = calloc(tr->nr_tensors, 1);

	*grad_first = 1;
	if (!first || !written) {
		free(first);
		free(written);
		return -1;
	}
	for (uint32_t t = 0; t < tr->nr_tensors; t++)
		first[t] = UINT32_MAX;
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		if (first[tr->acc[i].tensor] == UINT32_MAX && tr->acc[i].phase == TC_PHASE_FWD)
			first[tr->acc[i].tensor] = i;
		if (tr->acc[i].phase == TC_PHASE_BWD && (tr->acc[i].flags & TC_ACC_END))
			last_bwd = i;
	}
	for (uint32_t i = 0; i < tr->nr_acc; i++) {
		const struct tc_access *a = &tr->acc[i];

		if (a->phase == TC_PHASE_BWD && (a->flags & TC_ACC_WRITE))
			written[a->tensor] = 1;
		if (!(a->flags & TC_ACC_HOST))
			continue;
		/* an Adam op: gradient, master, moments, then the parameter (END) */
		if (i < last_bwd && tr->tensors[a->tensor].role == TC_ROLE_GRAD && !written[a->tensor])
			*grad_first = 0;
		if (!(a->flags & TC_ACC_END) || first[a->tensor] == UINT32_MAX || first[a->tensor] < 4)
			continue;	/* not first read in forward, or the embeddings */
		if (i < last_bwd && first[a->tensor] < min_in)
			min_in = first[a->tensor];
		if (i > last_bwd && first[a->tensor] > max_after)
			max_after = first[a->tensor];
	}
	free(first);
	free(written);
	return min_in != UINT32_MAX && max_after > min_in;
}

/* The worker's order (opt_pace_ns): the serial step's accesses; each op
 * inside backward after its gradient's write; with Adam slower than
 * backward the worker passes over layers it takes after backward (the
 * split cannot); the rest in forward order. */
static void worker(void)
{
	struct tc_gen_cfg g;
	struct tc_model m;
	struct tc_trace s, o, h;
	uint32_t before, first;
	int grad_first;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	g.adam_params_per_s = 5e8;	/* a layer's Adam: ~100 ms, its backward: 10 ms here */
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	tc_trace_init(&s);
	tc_trace_init(&o);
	tc_trace_init(&h);
	T_EQ(tc_model_trace(&m, &g, &s), 0);
	g.opt_overlap = true;
	g.opt_split = m.layers / 2;
	T_EQ(tc_model_trace(&m, &g, &h), 0);
	g.opt_pace_ns = 10 * MS;
	T_EQ(tc_model_trace(&m, &g, &o), 0);
	T_EQ(tc_trace_validate(&o), 0);
	T_CHECK(same_accesses(&s, &o), "worker order: not the serial step's accesses reordered");
	T_CHECK(forward_order(&o), "worker order: the Adam ops after backward are not in forward order");
	host_ops(&o, &before, &first);
	T_CHECK(before > 0 && first == s.acc[0].tensor, "worker order: %u host ops in backward, "
		"the first after it writes tensor %u, not the embedding (%u)", before, first,
		s.acc[0].tensor);
	T_EQ(passed_over(&o, &grad_first), 1);
	T_CHECK(grad_first, "worker order: an Adam op in backward before its gradient's write");
	T_EQ(passed_over(&h, &grad_first), 0);	/* the split: the check can fail */
	T_CHECK(grad_first, "split: an Adam op in backward before its gradient's write");
	printf("opt-1.3b, Adam ~10x its backward: %u of the Adam ops in backward in the worker's "
	       "order\n", before);
	tc_trace_free(&s);
	tc_trace_free(&o);
	tc_trace_free(&h);
}

/* GPU op A (10 ms), host op H (30 ms), GPU op B (10 ms) on tensors of
 * their own. Serial: 50 ms a step. With the host lane H runs beside B,
 * but the host needs h again one step later: max(20, 30) = 30 ms. */
static void lane(void)
{
	struct tc_plan_cfg cfg;
	struct tc_sim_result r;
	struct tc_trace tr;
	struct tc_plan pl;
	int x, y, h;

	tc_trace_init(&tr);
	x = tc_trace_add_tensor(&tr, 1 << 20, TC_ROLE_ACTIVATION);
	y = tc_trace_add_tensor(&tr, 1 << 20, TC_ROLE_ACTIVATION);
	h = tc_trace_add_tensor(&tr, 1 << 20, TC_ROLE_OPT_STATE);
	T_CHECK(x >= 0 && y >= 0 && h >= 0, "tensors");
	T_EQ(tc_trace_add_access(&tr, x, TC_PHASE_FWD, TC_ACC_WRITE | TC_ACC_END, 10 * MS), 0);
	T_EQ(tc_trace_add_access(&tr, h, TC_PHASE_OPT, TC_ACC_HOST | TC_ACC_READ | TC_ACC_WRITE |
				 TC_ACC_END, 30 * MS), 0);
	T_EQ(tc_trace_add_access(&tr, y, TC_PHASE_FWD, TC_ACC_WRITE | TC_ACC_END, 10 * MS), 0);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = 4 << 20;
	cfg.pinned_bytes = 8 << 20;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
	T_EQ(tc_sim_run(&tr, &cfg, &pl, 4, &r), 0);
	T_CHECK(r.step_ns == 50 * MS && r.host_ns == 0 && r.compute_ns == 50 * MS,
		"serial: step %llu ns, compute %llu, host %llu", (unsigned long long)r.step_ns,
		(unsigned long long)r.compute_ns, (unsigned long long)r.host_ns);
	tc_plan_free(&pl);

	cfg.flags |= TC_PLAN_HOST_ASYNC;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), 0);
	T_EQ(tc_sim_run(&tr, &cfg, &pl, 4, &r), 0);
	T_CHECK(r.step_ns == 30 * MS && r.host_ns == 30 * MS && r.compute_ns == 20 * MS,
		"host lane: step %llu ns, compute %llu, host %llu (want 30 ms, 20, 30)",
		(unsigned long long)r.step_ns, (unsigned long long)r.compute_ns,
		(unsigned long long)r.host_ns);
	tc_plan_free(&pl);

	/* a flag the planner does not know is refused */
	cfg.flags = 0x80;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	tc_trace_free(&tr);
}

/* OPT-6.7B at 25%: the CPU Adam beside backward shortens the simulated
 * step, and the step still covers the host's work. */
static void opt67(void)
{
	struct tc_plan_cfg cfg;
	struct tc_sim_result rs, ro;
	struct tc_gen_cfg g;
	struct tc_model m;
	struct tc_trace s, o;
	struct tc_plan pl;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	g.adam_params_per_s = 5e9;
	T_EQ(tc_model_builtin("opt-6.7b", &m), 0);
	tc_trace_init(&s);
	tc_trace_init(&o);
	T_EQ(tc_model_trace(&m, &g, &s), 0);
	g.opt_overlap = true;
	T_EQ(tc_model_trace(&m, &g, &o), 0);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = tc_trace_bytes(&s, TC_ROLE_PARAM_FP16) / 4;
	cfg.pinned_bytes = 2 * tc_trace_bytes(&s, -1);
	T_EQ(tc_plan_build(&s, &cfg, &pl), 0);
	T_EQ(tc_sim_run(&s, &cfg, &pl, 3, &rs), 0);
	tc_plan_free(&pl);
	cfg.flags |= TC_PLAN_HOST_ASYNC;
	T_EQ(tc_plan_build(&o, &cfg, &pl), 0);
	T_EQ(tc_plan_check(&o, &cfg, &pl, NULL, 0), 0);
	T_EQ(tc_sim_run(&o, &cfg, &pl, 3, &ro), 0);
	tc_plan_free(&pl);
	printf("opt-6.7b, 25%%, CPU Adam at 5e9 params/s: serial step %.1f ms (compute %.1f), "
	       "overlapped %.1f ms (GPU %.1f, host %.1f): x%.3f\n", rs.step_ns / 1e6,
	       rs.compute_ns / 1e6, ro.step_ns / 1e6, ro.compute_ns / 1e6, ro.host_ns / 1e6,
	       (double)ro.step_ns / rs.step_ns);
	T_CHECK(ro.step_ns < rs.step_ns * 0.9, "overlap: step %llu ns, serial %llu",
		(unsigned long long)ro.step_ns, (unsigned long long)rs.step_ns);
	T_CHECK(ro.step_ns >= ro.host_ns && ro.step_ns >= ro.compute_ns &&
		ro.host_ns + ro.compute_ns == rs.compute_ns,
		"overlap: step %llu below its host %llu or GPU %llu work, or work lost",
		(unsigned long long)ro.step_ns, (unsigned long long)ro.host_ns,
		(unsigned long long)ro.compute_ns);
	tc_trace_free(&s);
	tc_trace_free(&o);
}

static uint64_t model_step(const struct tc_model *m, const struct tc_gen_cfg *g,
			   struct tc_plan_cfg *cfg, bool tenth)
{
	struct tc_sim_result r = { 0 };
	struct tc_trace tr;
	struct tc_plan pl;

	tc_trace_init(&tr);
	T_EQ(tc_model_trace(m, g, &tr), 0);
	if (tenth) {
		cfg->gpu_bytes = tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) / 10;
		cfg->pinned_bytes = 2 * tc_trace_bytes(&tr, -1);
	}
	T_EQ(tc_plan_build(&tr, cfg, &pl), 0);
	T_EQ(tc_sim_run(&tr, cfg, &pl, 3, &r), 0);
	tc_plan_free(&pl);
	tc_trace_free(&tr);
	return r.step_ns;
}

/* OPT-6.7B at 10%, where backward waits on copies: the worker's order
 * (at a backward of 12 ms a layer) models a shorter step than any split of
 * 1/16 .. all of the layers: with the split the next forward walks the
 * last layers only after the host's final update (results/h200-replay.md,
 * session 13). */
static void worker_vs_split(void)
{
	struct tc_plan_cfg cfg;
	struct tc_gen_cfg g;
	struct tc_model m;
	uint64_t split = UINT64_MAX, w, ns;

	tc_gen_cfg_default(&g);
	g.batch = 2;
	g.adam_params_per_s = 5e9;
	g.opt_overlap = true;
	T_EQ(tc_model_builtin("opt-6.7b", &m), 0);
	tc_plan_cfg_default(&cfg);
	cfg.flags |= TC_PLAN_HOST_ASYNC;
	model_step(&m, &g, &cfg, true);
	for (uint32_t j = 0; j <= 16; j++) {
		g.opt_split = (int32_t)(m.layers * j / 16);
		ns = model_step(&m, &g, &cfg, false);
		split = ns < split ? ns : split;
	}
	g.opt_pace_ns = 12 * MS;
	w = model_step(&m, &g, &cfg, false);
	printf("opt-6.7b, 10%%: the best split's modelled step %.1f ms, the worker's order %.1f ms\n",
	       split / 1e6, w / 1e6);
	/* 1394.3 against 1423.8 ms: 2.1% (5% before sim.c's busy_place kept
	 * a link's work from overlapping where it filled a gap) */
	T_CHECK(w < split * 0.99, "worker order: %.1f ms, the best split %.1f", w / 1e6, split / 1e6);
}

int main(void)
{
	generator();
	worker();
	lane();
	opt67();
	worker_vs_split();
	return t_exit();
}
