/* model.c - the trace generator: parameter counts of the built-in configs
 * against published figures, HF config.json parsing (string and file)
 * matching the built-ins, and the shape of the generated step. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "plan/plan.h"

static const char llama7b_json[] =
	"{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
	"\"hidden_size\":4096,\"intermediate_size\":11008,\"num_attention_heads\":32,"
	"\"num_hidden_layers\":32,\"num_key_value_heads\":32,\"vocab_size\":32000,"
	"\"max_position_embeddings\":4096,\"tie_word_embeddings\":false,"
	"\"torch_dtype\":\"float16\",\"rms_norm_eps\":1e-05}";

static const char opt67_json[] =
	"{\"_name_or_path\":\"facebook/opt-6.7b\",\"model_type\":\"opt\",\"hidden_size\":4096,"
	"\"ffn_dim\":16384,\"num_attention_heads\":32,\"num_hidden_layers\":32,"
	"\"vocab_size\":50272,\"max_position_embeddings\":2048,\"word_embed_proj_dim\":4096,"
	"\"torch_dtype\":\"float16\",\"do_layer_norm_before\":true}";

static void near(const char *name, double nominal, double tol)
{
	struct tc_model m;
	double p;

	T_EQ(tc_model_builtin(name, &m), 0);
	p = (double)tc_model_params(&m);
	T_CHECK(fabs(p - nominal) <= tol * nominal, "%s: %.4g params, nominal %.4g", name, p, nominal);
	printf("%-12s %.4f B params\n", name, p / 1e9);
}

int main(void)
{
	struct tc_model a, b;
	struct tc_gen_cfg g;
	struct tc_trace tr;
	char path[] = "/tmp/tc-plan-model-XXXXXX";
	int fd;

	near("opt-6.7b", 6.7e9, 0.01);
	near("opt-1.3b", 1.3e9, 0.02);
	near("opt-13b", 12.85e9, 0.01);		/* HF: 12.85B */
	near("llama-2-13b", 13.016e9, 0.001);	/* 13,015,864,320 */
	T_EQ(tc_model_builtin("llama-2-7b", &a), 0);
	T_EQ(tc_model_params(&a), 6738415616ull);	/* the published exact count */

	/* HF configs give the same shapes as the built-ins */
	T_EQ(tc_model_from_hf_json(llama7b_json, &b), 0);
	T_EQ(tc_model_params(&b), tc_model_params(&a));
	T_EQ(b.bf16, 0);	/* torch_dtype float16 overrides Llama's bf16 default */
	T_EQ(tc_model_builtin("opt-6.7b", &a), 0);
	fd = mkstemp(path);
	T_CHECK(fd >= 0, "mkstemp");
	T_CHECK(write(fd, opt67_json, sizeof(opt67_json) - 1) == (ssize_t)sizeof(opt67_json) - 1, "write");
	close(fd);
	T_EQ(tc_model_from_hf_file(path, &b), 0);
	unlink(path);
	T_EQ(tc_model_params(&b), tc_model_params(&a));
	T_EQ(b.tied, 1);
	T_CHECK(!strcmp(b.name, "facebook/opt-6.7b"), "name %s", b.name);

	/* the step: bytes per role, every param read in fwd and bwd, FLOPs */
	tc_gen_cfg_default(&g);
	for (const char *const *n = tc_model_builtin_names(); *n; n++) {
		uint64_t P, reads_fwd = 0, reads_bwd = 0, nparams = 0;
		double flops6;

		T_EQ(tc_model_builtin(*n, &a), 0);
		tc_trace_init(&tr);
		T_EQ(tc_model_trace(&a, &g, &tr), 0);
		T_EQ(tc_trace_validate(&tr), 0);
		P = tc_model_params(&a);
		T_EQ(tc_trace_bytes(&tr, TC_ROLE_PARAM_FP16) + tc_trace_bytes(&tr, TC_ROLE_PARAM_BF16), 2 * P);
		T_EQ(tc_trace_bytes(&tr, TC_ROLE_GRAD), 2 * P);
		T_EQ(tc_trace_bytes(&tr, TC_ROLE_MASTER_FP32), 4 * P);
		T_EQ(tc_trace_bytes(&tr, TC_ROLE_OPT_STATE), 8 * P);
		T_EQ(tc_trace_bytes(&tr, TC_ROLE_ACTIVATION),
		     (uint64_t)(a.layers + 1) * g.batch * g.seq * a.hidden * 2);
		{
			uint8_t *seen = calloc(tr.nr_tensors, 1);
			uint32_t both = 0, none = 0;

			for (uint32_t i = 0; i < tr.nr_acc; i++) {
				const struct tc_access *x = &tr.acc[i];
				uint8_t role = tr.tensors[x->tensor].role;

				if (role != TC_ROLE_PARAM_FP16 && role != TC_ROLE_PARAM_BF16)
					continue;
				if (x->phase == TC_PHASE_OPT) {
					nparams++;
					T_CHECK((x->flags & (TC_ACC_HOST | TC_ACC_WRITE)) ==
						(TC_ACC_HOST | TC_ACC_WRITE), "CPU Adam writes params");
				} else {
					T_CHECK(!(x->flags & TC_ACC_HOST) && (x->flags & TC_ACC_READ),
						"params are read on the GPU");
					seen[x->tensor] |= x->phase == TC_PHASE_FWD ? 1 : 2;
				}
			}
			for (uint32_t t = 0; t < tr.nr_tensors; t++) {
				uint8_t role = tr.tensors[t].role;

				if (role != TC_ROLE_PARAM_FP16 && role != TC_ROLE_PARAM_BF16)
					continue;
				both += seen[t] == 3;
				none += !seen[t];
			}
			/* every layer param is used forward and backward; none unused */
			T_CHECK(both >= a.layers * (a.arch == TC_ARCH_OPT ? 16u : 9u), "%s: %u", *n, both);
			T_EQ(none, 0);
			free(seen);
			(void)reads_fwd;
			(void)reads_bwd;
		}
		/* GPU compute ~ 6 * params * tokens + 2 * params * tokens for the
		 * recompute of checkpointed layers, within 25% (attention and the
		 * head are extra); the host ops are Adam at the given rate */
		{
			uint64_t gpu_ns = 0, host_ns = 0;

			for (uint32_t i = 0; i < tr.nr_acc; i++)
				*(tr.acc[i].flags & TC_ACC_HOST ? &host_ns : &gpu_ns) += tr.acc[i].compute_ns;
			flops6 = 8.0 * P * g.batch * g.seq;
			T_CHECK(fabs(gpu_ns * 1e-9 * g.tflops * 1e12 - flops6) < 0.25 * flops6,
				"%s: GPU compute %.3f s vs %.3f s", *n, gpu_ns * 1e-9,
				flops6 / (g.tflops * 1e12));
			T_CHECK(fabs(host_ns * 1e-9 - P / g.adam_params_per_s) < 0.01 * P / g.adam_params_per_s,
				"%s: Adam %.3f s", *n, host_ns * 1e-9);
		}
		printf("%-12s %u tensors, %u accesses, %.3f s compute/step, %llu param tensors\n", *n,
		       tr.nr_tensors, tr.nr_acc, tc_trace_compute_ns(&tr) * 1e-9,
		       (unsigned long long)nparams);
		tc_trace_free(&tr);
	}
	return t_exit();
}
