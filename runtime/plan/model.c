/* model.c - transformer configs (built-in and HF config.json via cJSON) and
 * the generator of one training step's trace: per layer fp16/bf16 params,
 * their gradients, fp32 master weights and Adam states, and one activation
 * checkpoint per layer; compute time from FLOPs at a given TFLOP/s. The only
 * file of the planner that touches the file system (tc_model_from_hf_file). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

#include "plan/plan.h"

/* --overlap: a layer's Adam op waits behind this many later layers'
 * backward (more: the host starts later; the timing model's best is 1) */
#define ADAM_LAG 1u

static const struct tc_model builtins[] = {
	{ "opt-1.3b", TC_ARCH_OPT, 1, 0, 50272, 2048, 24, 32, 32, 8192, 2048 },
	{ "opt-6.7b", TC_ARCH_OPT, 1, 0, 50272, 4096, 32, 32, 32, 16384, 2048 },
	{ "opt-13b", TC_ARCH_OPT, 1, 0, 50272, 5120, 40, 40, 40, 20480, 2048 },
	{ "llama-2-7b", TC_ARCH_LLAMA, 0, 1, 32000, 4096, 32, 32, 32, 11008, 4096 },
	{ "llama-2-13b", TC_ARCH_LLAMA, 0, 1, 32000, 5120, 40, 40, 40, 13824, 4096 },
};

const char *const *tc_model_builtin_names(void)
{
	static const char *const names[] = {
		"opt-1.3b", "opt-6.7b", "opt-13b", "llama-2-7b", "llama-2-13b", NULL,
	};

	return names;
}

int tc_model_builtin(const char *name, struct tc_model *m)
{
	if (!name || !m)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++)
		if (!strcasecmp(name, builtins[i].name)) {
			*m = builtins[i];
			return 0;
		}
	return -ENOENT;
}

static int get_u32(const cJSON *o, const char *key, uint32_t *v, bool required)
{
	const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);

	if (!it)
		return required ? -EINVAL : 0;
	if (!cJSON_IsNumber(it) || it->valuedouble < 1 || it->valuedouble > 1e9 ||
	    it->valuedouble != (double)(uint32_t)it->valuedouble)
		return -EINVAL;
	*v = (uint32_t)it->valuedouble;
	return 0;
}

int tc_model_from_hf_json(const char *json, struct tc_model *m)
{
	const cJSON *type, *tie, *name, *dt;
	struct tc_model x = { 0 };
	cJSON *root;
	int ret;

	if (!json || !m)
		return -EINVAL;
	root = cJSON_Parse(json);
	if (!root)
		return -EINVAL;
	ret = -EINVAL;
	if (!cJSON_IsObject(root))
		goto out;
	type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
	if (!cJSON_IsString(type))
		goto out;
	if (!strcmp(type->valuestring, "opt")) {
		uint32_t proj = 0;

		x.arch = TC_ARCH_OPT;
		x.tied = 1;
		if (get_u32(root, "ffn_dim", &x.ffn, true) ||
		    get_u32(root, "word_embed_proj_dim", &proj, false))
			goto out;
		x.max_pos = 2048;
		if (get_u32(root, "max_position_embeddings", &x.max_pos, false))
			goto out;
		if (proj && proj != 0 && get_u32(root, "hidden_size", &x.hidden, true) == 0 &&
		    proj != x.hidden) {
			ret = -EOPNOTSUPP;	/* OPT-350m's projected embeddings */
			goto out;
		}
	} else if (!strcmp(type->valuestring, "llama") || !strcmp(type->valuestring, "mistral")) {
		x.arch = TC_ARCH_LLAMA;
		x.bf16 = 1;
		if (get_u32(root, "intermediate_size", &x.ffn, true))
			goto out;
		x.max_pos = 4096;
		if (get_u32(root, "max_position_embeddings", &x.max_pos, false))
			goto out;
	} else {
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (get_u32(root, "hidden_size", &x.hidden, true) ||
	    get_u32(root, "num_hidden_layers", &x.layers, true) ||
	    get_u32(root, "num_attention_heads", &x.heads, true) ||
	    get_u32(root, "vocab_size", &x.vocab, true))
		goto out;
	x.kv_heads = x.heads;
	if (get_u32(root, "num_key_value_heads", &x.kv_heads, false))
		goto out;
	if (x.hidden % x.heads || x.heads % x.kv_heads)
		goto out;
	tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
	if (tie) {
		if (!cJSON_IsBool(tie))
			goto out;
		x.tied = cJSON_IsTrue(tie);
	}
	dt = cJSON_GetObjectItemCaseSensitive(root, "torch_dtype");
	if (cJSON_IsString(dt))
		x.bf16 = !strcmp(dt->valuestring, "bfloat16");
	name = cJSON_GetObjectItemCaseSensitive(root, "_name_or_path");
	snprintf(x.name, sizeof(x.name), "%s",
		 cJSON_IsString(name) ? name->valuestring : type->valuestring);
	*m = x;
	ret = 0;
out:
	cJSON_Delete(root);
	return ret;
}

int tc_model_from_hf_file(const char *path, struct tc_model *m)
{
	char *buf = NULL;
	long len;
	FILE *f;
	int ret;

	if (!path || !m)
		return -EINVAL;
	f = fopen(path, "rb");
	if (!f)
		return -errno;
	ret = -EIO;
	if (fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || len > (1 << 24) ||
	    fseek(f, 0, SEEK_SET))
		goto out;
	ret = -ENOMEM;
	buf = malloc(len + 1);
	if (!buf)
		goto out;
	ret = -EIO;
	if (fread(buf, 1, len, f) != (size_t)len)
		goto out;
	buf[len] = 0;
	ret = tc_model_from_hf_json(buf, m);
out:
	free(buf);
	fclose(f);
	return ret;
}

/* ---- layer shapes --------------------------------------------------------- */

#define MAX_LAYER_TENSORS 16

struct shape {
	const char *name;
	uint64_t numel;
	bool matmul;	/* counts toward the 2 * params FLOPs per token */
};

static int layer_shapes(const struct tc_model *m, struct shape *s)
{
	uint64_t h = m->hidden, f = m->ffn, kv = h / m->heads * m->kv_heads;
	int n = 0;

	if (m->arch == TC_ARCH_OPT) {
		s[n++] = (struct shape){ "ln1.w", h, 0 };
		s[n++] = (struct shape){ "ln1.b", h, 0 };
		s[n++] = (struct shape){ "q.w", h * h, 1 };
		s[n++] = (struct shape){ "q.b", h, 0 };
		s[n++] = (struct shape){ "k.w", h * h, 1 };
		s[n++] = (struct shape){ "k.b", h, 0 };
		s[n++] = (struct shape){ "v.w", h * h, 1 };
		s[n++] = (struct shape){ "v.b", h, 0 };
		s[n++] = (struct shape){ "o.w", h * h, 1 };
		s[n++] = (struct shape){ "o.b", h, 0 };
		s[n++] = (struct shape){ "ln2.w", h, 0 };
		s[n++] = (struct shape){ "ln2.b", h, 0 };
		s[n++] = (struct shape){ "fc1.w", h * f, 1 };
		s[n++] = (struct shape){ "fc1.b", f, 0 };
		s[n++] = (struct shape){ "fc2.w", f * h, 1 };
		s[n++] = (struct shape){ "fc2.b", h, 0 };
	} else {
		s[n++] = (struct shape){ "in_norm", h, 0 };
		s[n++] = (struct shape){ "q", h * h, 1 };
		s[n++] = (struct shape){ "k", h * kv, 1 };
		s[n++] = (struct shape){ "v", h * kv, 1 };
		s[n++] = (struct shape){ "o", h * h, 1 };
		s[n++] = (struct shape){ "post_norm", h, 0 };
		s[n++] = (struct shape){ "gate", h * f, 1 };
		s[n++] = (struct shape){ "up", h * f, 1 };
		s[n++] = (struct shape){ "down", f * h, 1 };
	}
	return n;
}

/* embedding-side tensors: token embedding, positions (OPT), final norm, lm_head */
static int outer_shapes(const struct tc_model *m, struct shape *s)
{
	uint64_t h = m->hidden;
	int n = 0;

	s[n++] = (struct shape){ "embed", (uint64_t)m->vocab * h, 0 };
	if (m->arch == TC_ARCH_OPT) {
		s[n++] = (struct shape){ "pos", (uint64_t)(m->max_pos + 2) * h, 0 };
		s[n++] = (struct shape){ "final_ln.w", h, 0 };
		s[n++] = (struct shape){ "final_ln.b", h, 0 };
	} else {
		s[n++] = (struct shape){ "final_norm", h, 0 };
	}
	if (!m->tied)
		s[n++] = (struct shape){ "lm_head", (uint64_t)m->vocab * h, 1 };
	return n;
}

static int model_check(const struct tc_model *m)
{
	if (!m || !m->hidden || !m->layers || !m->heads || !m->vocab || !m->ffn ||
	    !m->kv_heads || m->hidden % m->heads || m->heads % m->kv_heads ||
	    m->arch > TC_ARCH_LLAMA || (m->arch == TC_ARCH_OPT && !m->max_pos))
		return -EINVAL;
	return 0;
}

uint64_t tc_model_params(const struct tc_model *m)
{
	struct shape s[MAX_LAYER_TENSORS];
	uint64_t sum = 0, layer = 0;
	int n;

	if (model_check(m))
		return 0;
	n = layer_shapes(m, s);
	for (int i = 0; i < n; i++)
		layer += s[i].numel;
	n = outer_shapes(m, s);
	for (int i = 0; i < n; i++)
		sum += s[i].numel;
	return sum + layer * m->layers;
}

void tc_gen_cfg_default(struct tc_gen_cfg *g)
{
	memset(g, 0, sizeof(*g));
	g->batch = 8;
	g->seq = 1024;
	g->tflops = 400;
	g->adam_params_per_s = 2e9;	/* CPU Adam, AVX-512 on 16 cores */
	g->opt_split = -1;
}

/* ---- trace generation ----------------------------------------------------- */

struct ptensor {
	uint32_t param, grad, master, m, v;
	uint64_t numel;
};

struct gen {
	struct tc_trace *tr;
	const struct tc_gen_cfg *g;
	struct ptensor *p;
	uint32_t np, cap;
	int ret;
};

static uint32_t add_tensor(struct gen *G, uint64_t bytes, enum tc_role role)
{
	int id;

	if (G->ret)
		return 0;
	id = tc_trace_add_tensor(G->tr, bytes, role);
	if (id < 0) {
		G->ret = id;
		return 0;
	}
	return id;
}

static void acc(struct gen *G, uint32_t t, enum tc_phase ph, unsigned flags, uint64_t ns)
{
	if (!G->ret)
		G->ret = tc_trace_add_access(G->tr, t, ph, flags, ns);
}

static uint32_t add_param(struct gen *G, const struct tc_model *m, uint64_t numel)
{
	struct ptensor *p;

	if (G->ret)
		return 0;
	if (G->np == G->cap) {
		uint32_t nc = G->cap ? G->cap * 2 : 64;
		struct ptensor *nv = realloc(G->p, nc * sizeof(*nv));

		if (!nv) {
			G->ret = -ENOMEM;
			return 0;
		}
		G->p = nv;
		G->cap = nc;
	}
	p = &G->p[G->np];
	p->numel = numel;
	p->param = add_tensor(G, numel * 2, m->bf16 ? TC_ROLE_PARAM_BF16 : TC_ROLE_PARAM_FP16);
	p->grad = add_tensor(G, numel * 2, TC_ROLE_GRAD);
	p->master = add_tensor(G, numel * 4, TC_ROLE_MASTER_FP32);
	p->m = add_tensor(G, numel * 4, TC_ROLE_OPT_STATE);
	p->v = add_tensor(G, numel * 4, TC_ROLE_OPT_STATE);
	return G->np++;
}

static uint64_t flops_ns(const struct tc_gen_cfg *g, double flops)
{
	return (uint64_t)(flops / (g->tflops * 1e12) * 1e9);
}

static uint64_t adam_ns(const struct tc_gen_cfg *g, uint64_t numel)
{
	return (uint64_t)(numel / g->adam_params_per_s * 1e9) + 1;
}

/* One Adam op over parameter k: gradient, master and moments in, the
 * compute copy out; on the host unless opt_on_gpu. */
static void adam_op(struct gen *G, uint32_t k)
{
	unsigned h = G->g->opt_on_gpu ? 0 : TC_ACC_HOST;
	struct ptensor *p = &G->p[k];

	acc(G, p->grad, TC_PHASE_OPT, h | TC_ACC_READ, 0);
	acc(G, p->master, TC_PHASE_OPT, h | TC_ACC_READ | TC_ACC_WRITE, 0);
	acc(G, p->m, TC_PHASE_OPT, h | TC_ACC_READ | TC_ACC_WRITE, 0);
	acc(G, p->v, TC_PHASE_OPT, h | TC_ACC_READ | TC_ACC_WRITE, 0);
	acc(G, p->param, TC_PHASE_OPT, h | TC_ACC_WRITE | TC_ACC_END, adam_ns(G->g, p->numel));
}

/* A layer's Adam inside backward: after which layer's backward it goes. */
struct adam_at {
	uint32_t after, layer;
};

/*
 * The order tencache.offload's worker runs the layers' Adam in (overlap.py):
 * layer l's op is queued ADAM_LAG layers' backward after its own, and the
 * worker, when free, takes the lowest queued layer. With the GPU's backward
 * at pace ns per layer, the ops it starts before backward ends go in at[]
 * in the order it runs them, each after the last layer's backward done
 * when it starts.
 */
static void greedy_order(struct gen *G, const uint32_t *lp, uint32_t nl, uint32_t L,
			 uint64_t pace, struct adam_at *at, uint32_t *nat)
{
	uint64_t w = 0, end = (uint64_t)L * pace;
	uint8_t *done = calloc(L, 1);

	*nat = 0;
	if (!done) {
		G->ret = -ENOMEM;
		return;
	}
	while (w < end) {
		int64_t pick = -1;
		uint64_t next = UINT64_MAX;

		/* layer l is queued at (L - l + ADAM_LAG) * pace */
		for (uint32_t l = ADAM_LAG; l < L; l++) {
			uint64_t q = (uint64_t)(L - l + ADAM_LAG) * pace;

			if (done[l])
				continue;
			if (q <= w) {
				pick = l;
				break;
			}
			if (q < next)
				next = q;
		}
		if (pick < 0) {	/* idle until the next one is queued */
			w = next;
			continue;
		}
		done[pick] = 1;
		/* at w < end, the last backward done is layer L - w / pace's */
		at[(*nat)++] = (struct adam_at){ (uint32_t)(L - w / pace), (uint32_t)pick };
		for (uint32_t i = 0; i < nl; i++)
			w += adam_ns(G->g, G->p[lp[pick] + i].numel);
	}
	free(done);
}

int tc_model_trace(const struct tc_model *m, const struct tc_gen_cfg *g, struct tc_trace *tr)
{
	struct shape ls[MAX_LAYER_TENSORS], os[MAX_LAYER_TENSORS];
	struct gen G = { .tr = tr, .g = g };
	uint32_t nl, no, L, *act = NULL, *lp = NULL, nat = 0, op0, head = 0, split = 0;
	struct adam_at *at = NULL;
	bool greedy;
	double tokens, layer_flops = 0, head_flops;
	uint64_t act_bytes;
	int ret;

	ret = model_check(m);
	if (ret)
		return ret;
	if (!g || !tr || !g->batch || !g->seq || !(g->tflops > 0) ||
	    !(g->adam_params_per_s > 0) || tr->nr_acc || tr->nr_tensors)
		return -EINVAL;
	L = m->layers;
	nl = layer_shapes(m, ls);
	no = outer_shapes(m, os);
	tokens = (double)g->batch * g->seq;
	act_bytes = (uint64_t)g->batch * g->seq * m->hidden * 2;
	for (uint32_t i = 0; i < nl; i++)
		if (ls[i].matmul)
			layer_flops += 2.0 * ls[i].numel * tokens;
	layer_flops += 4.0 * tokens * g->seq * m->hidden;	/* QK^T and AV */
	head_flops = 2.0 * tokens * m->hidden * m->vocab;

	act = malloc((L + 1) * sizeof(*act));
	lp = malloc(L * sizeof(*lp));
	if (!act || !lp) {
		ret = -ENOMEM;
		goto out;
	}
	/* tensors: outer params, per-layer params, activation checkpoints */
	op0 = G.np;
	for (uint32_t i = 0; i < no; i++)
		add_param(&G, m, os[i].numel);
	for (uint32_t l = 0; l < L; l++) {
		lp[l] = G.np;
		for (uint32_t i = 0; i < nl; i++)
			add_param(&G, m, ls[i].numel);
	}
	for (uint32_t l = 0; l <= L; l++)
		act[l] = add_tensor(&G, act_bytes, TC_ROLE_ACTIVATION);
	if (G.ret)
		goto fail;
	/* outer params: [0] embed, [1] pos (OPT), then final norm(s), lm_head */
	head = m->tied ? op0 : op0 + no - 1;

	/* opt_pace_ns: the worker's order; at[]: its ops inside backward */
	at = calloc(L, sizeof(*at));
	if (!at) {
		ret = -ENOMEM;
		goto out;
	}
	greedy = g->opt_overlap && !g->opt_on_gpu && g->opt_pace_ns;
	if (greedy)
		greedy_order(&G, lp, nl, L, g->opt_pace_ns, at, &nat);

	/* overlap: layers split..L-1 get their Adam op during backward: as many
	 * as the host finishes (one at a time, each from its layer's backward
	 * on) within the GPU's backward of the layers */
	split = L;
	if (g->opt_overlap && !g->opt_on_gpu && g->opt_split >= 0) {
		split = L - (g->opt_split < (int32_t)L ? (uint32_t)g->opt_split : L);
	} else if (g->opt_overlap && !g->opt_on_gpu) {
		uint64_t b = flops_ns(g, 3 * layer_flops), end = (uint64_t)L * b, host = 0;

		while (split > 0) {
			/* layer split-1's gradients are ready after L-split+1 layers */
			uint64_t ready = (uint64_t)(L - split + 1) * b, st = host > ready ? host : ready;

			for (uint32_t i = 0; i < nl; i++)
				st += adam_ns(g, G.p[lp[split - 1] + i].numel);
			if (st > end)
				break;
			host = st;
			split--;
		}
	}

	/* forward: embedding, layers, head (+loss) */
	acc(&G, G.p[op0].param, TC_PHASE_FWD, TC_ACC_READ, 0);
	if (m->arch == TC_ARCH_OPT)
		acc(&G, G.p[op0 + 1].param, TC_PHASE_FWD, TC_ACC_READ, 0);
	acc(&G, act[0], TC_PHASE_FWD, TC_ACC_WRITE | TC_ACC_END, flops_ns(g, tokens * m->hidden * 4));
	for (uint32_t l = 0; l < L; l++) {
		for (uint32_t i = 0; i < nl; i++)
			acc(&G, G.p[lp[l] + i].param, TC_PHASE_FWD, TC_ACC_READ, 0);
		acc(&G, act[l], TC_PHASE_FWD, TC_ACC_READ, 0);
		acc(&G, act[l + 1], TC_PHASE_FWD, TC_ACC_WRITE | TC_ACC_END, flops_ns(g, layer_flops));
	}
	/* head forward + backward in one op (logits are not kept) */
	for (uint32_t i = (m->arch == TC_ARCH_OPT ? 2 : 1); i < no; i++)
		acc(&G, G.p[op0 + i].param, TC_PHASE_BWD, TC_ACC_READ, 0);
	if (m->tied)
		acc(&G, G.p[head].param, TC_PHASE_BWD, TC_ACC_READ, 0);
	for (uint32_t i = (m->arch == TC_ARCH_OPT ? 2 : 1); i < no; i++)
		acc(&G, G.p[op0 + i].grad, TC_PHASE_BWD, TC_ACC_WRITE, 0);
	acc(&G, act[L], TC_PHASE_BWD, TC_ACC_READ | TC_ACC_END, flops_ns(g, 3 * head_flops));
	/* backward: recompute the layer from its checkpoint, then 2x forward */
	for (uint32_t l = L; l-- > 0;) {
		for (uint32_t i = 0; i < nl; i++)
			acc(&G, G.p[lp[l] + i].param, TC_PHASE_BWD, TC_ACC_READ, 0);
		for (uint32_t i = 0; i < nl; i++)
			acc(&G, G.p[lp[l] + i].grad, TC_PHASE_BWD, TC_ACC_WRITE, 0);
		acc(&G, act[l], TC_PHASE_BWD, TC_ACC_READ | TC_ACC_END, flops_ns(g, 3 * layer_flops));
		/* a layer's Adam goes ADAM_LAG layers' backward later: the
		 * caller, which waits there for the gradients' copies, has
		 * queued those backwards first, so the GPU goes on meanwhile */
		for (uint32_t i = 0; !greedy && l + ADAM_LAG < L && l + ADAM_LAG >= split &&
				     g->opt_overlap && !g->opt_on_gpu && i < nl; i++)
			adam_op(&G, lp[l + ADAM_LAG] + i);
		for (uint32_t k = 0; greedy && k < nat; k++)
			for (uint32_t i = 0; at[k].after == l && i < nl; i++)
				adam_op(&G, lp[at[k].layer] + i);
	}
	/* embedding (and positions) gradient; the tied head's grad is accumulated here */
	acc(&G, G.p[op0].grad, TC_PHASE_BWD, TC_ACC_WRITE, 0);
	if (m->arch == TC_ARCH_OPT)
		acc(&G, G.p[op0 + 1].grad, TC_PHASE_BWD, TC_ACC_WRITE, 0);
	acc(&G, act[0], TC_PHASE_BWD, TC_ACC_READ | TC_ACC_END, flops_ns(g, tokens * m->hidden * 4));
	/* optimizer: Adam per param tensor, on the host or the GPU; with
	 * overlap the rest in forward order: embeddings, layers 0..split-1,
	 * then the final norm(s) and the head */
	if (!g->opt_overlap || g->opt_on_gpu) {
		for (uint32_t k = 0; k < G.np; k++)
			adam_op(&G, k);
	} else {
		uint32_t o1 = m->arch == TC_ARCH_OPT ? 2 : 1;

		for (uint32_t i = 0; i < o1; i++)
			adam_op(&G, op0 + i);
		/* layers below ADAM_LAG have no backward that late to wait behind */
		for (uint32_t l = 0; l < L; l++) {
			bool in_bwd = false;

			for (uint32_t k = 0; greedy && k < nat; k++)
				in_bwd |= at[k].layer == l;
			if (greedy ? in_bwd : !(l < split || l < ADAM_LAG))
				continue;
			for (uint32_t i = 0; i < nl; i++)
				adam_op(&G, lp[l] + i);
		}
		for (uint32_t i = o1; i < no; i++)
			adam_op(&G, op0 + i);
	}
	if (G.ret)
		goto fail;
	ret = tc_trace_validate(tr);
	if (ret)
		goto fail;
	goto out;
fail:
	ret = G.ret ? G.ret : ret;
	tc_trace_free(tr);
	tc_trace_init(tr);
out:
	free(G.p);
	free(act);
	free(lp);
	free(at);
	return ret;
}
