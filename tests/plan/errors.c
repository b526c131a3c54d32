/* errors.c - bad inputs give -errno, never a crash or an assert. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "test.h"
#include "plan/plan.h"

static void small_trace(struct tc_trace *tr)
{
	tc_trace_init(tr);
	tc_trace_add_tensor(tr, 100, TC_ROLE_PARAM_FP16);
	tc_trace_add_tensor(tr, 100, TC_ROLE_GRAD);
	tc_trace_add_access(tr, 0, TC_PHASE_FWD, TC_ACC_READ, 0);
	tc_trace_add_access(tr, 1, TC_PHASE_FWD, TC_ACC_WRITE | TC_ACC_END, 10);
}

int main(void)
{
	struct tc_plan_cfg cfg;
	struct tc_sim_result sr;
	struct tc_trace tr;
	struct tc_plan pl;
	struct tc_model m;
	struct tc_gen_cfg g;

	/* trace building */
	T_EQ(tc_trace_init(NULL), -EINVAL);
	tc_trace_init(&tr);
	T_EQ(tc_trace_add_tensor(NULL, 1, TC_ROLE_GRAD), -EINVAL);
	T_EQ(tc_trace_add_tensor(&tr, 0, TC_ROLE_GRAD), -EINVAL);
	T_EQ(tc_trace_add_tensor(&tr, 1, TC_ROLE_NR), -EINVAL);
	T_EQ(tc_trace_add_tensor(&tr, 1, TC_ROLE_GRAD), 0);
	T_EQ(tc_trace_add_access(&tr, 1, TC_PHASE_FWD, TC_ACC_READ, 0), -EINVAL);   /* no tensor 1 */
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_NR, TC_ACC_READ, 0), -EINVAL);
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_FWD, 0x40, 0), -EINVAL);          /* unknown flag */
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_FWD, TC_ACC_END, 0), -EINVAL);     /* neither R nor W */
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_FWD, TC_ACC_READ, 5), -EINVAL);    /* compute not on END */
	T_EQ(tc_trace_validate(&tr), -EINVAL);                                       /* empty */
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_FWD, TC_ACC_READ, 0), 0);
	T_EQ(tc_trace_validate(&tr), -EINVAL);                                       /* last op open */
	T_EQ(tc_trace_add_access(&tr, 0, TC_PHASE_FWD, TC_ACC_READ | TC_ACC_END, 1), 0);
	T_EQ(tc_trace_validate(&tr), -EINVAL);                                       /* tensor twice in an op */
	tc_trace_free(&tr);
	tc_trace_init(&tr);
	tc_trace_add_tensor(&tr, 1, TC_ROLE_GRAD);
	tc_trace_add_tensor(&tr, 1, TC_ROLE_GRAD);
	tc_trace_add_access(&tr, 0, TC_PHASE_FWD, TC_ACC_READ, 0);
	tc_trace_add_access(&tr, 1, TC_PHASE_OPT, TC_ACC_READ | TC_ACC_HOST | TC_ACC_END, 1);
	T_EQ(tc_trace_validate(&tr), -EINVAL);                                       /* mixed host/GPU op */
	tc_trace_free(&tr);

	/* planning */
	small_trace(&tr);
	T_EQ(tc_trace_validate(&tr), 0);
	tc_plan_cfg_default(&cfg);
	cfg.gpu_bytes = 200;
	cfg.pinned_bytes = 1000;
	T_EQ(tc_plan_build(NULL, &cfg, &pl), -EINVAL);
	T_EQ(tc_plan_build(&tr, NULL, &pl), -EINVAL);
	T_EQ(tc_plan_build(&tr, &cfg, NULL), -EINVAL);
	cfg.policy = TC_POLICY_NR;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	cfg.policy = TC_POLICY_OURS;
	cfg.flags = 0x80;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	cfg.flags = 0;
	cfg.bw[TC_LINK_H2D] = 0;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	tc_plan_cfg_default(&cfg);
	cfg.pinned_bytes = 1000;
	cfg.gpu_bytes = 0;
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	cfg.gpu_bytes = 199;		/* one op needs 200 */
	for (int p = 0; p < TC_POLICY_NR; p++) {
		cfg.policy = p;
		T_EQ(tc_plan_build(&tr, &cfg, &pl), -ENOSPC);
	}
	cfg.policy = TC_POLICY_OURS;
	cfg.gpu_bytes = 200;
	cfg.reserve_bytes = 200;	/* a reserve that leaves nothing */
	T_EQ(tc_plan_build(&tr, &cfg, &pl), -EINVAL);
	cfg.reserve_bytes = 0;
	cfg.pinned_bytes = 50;		/* no NVMe and too little pinned memory */
	cfg.gpu_bytes = 200;
	{
		struct tc_trace t2;

		/* the grad is read on the host: it must leave the GPU */
		tc_trace_init(&t2);
		tc_trace_add_tensor(&t2, 100, TC_ROLE_GRAD);
		tc_trace_add_access(&t2, 0, TC_PHASE_BWD, TC_ACC_WRITE | TC_ACC_END, 1);
		tc_trace_add_access(&t2, 0, TC_PHASE_OPT, TC_ACC_READ | TC_ACC_HOST | TC_ACC_END, 1);
		T_EQ(tc_plan_build(&t2, &cfg, &pl), -ENOSPC);
		cfg.pinned_bytes = 100;
		T_EQ(tc_plan_build(&t2, &cfg, &pl), 0);
		T_EQ(tc_plan_check(&t2, &cfg, &pl, NULL, 0), 0);
		/* checker and timing model refuse a plan of another trace */
		T_EQ(tc_plan_check(&tr, &cfg, &pl, NULL, 0), -EINVAL);
		T_EQ(tc_sim_run(&tr, &cfg, &pl, 3, &sr), -EINVAL);
		T_EQ(tc_sim_run(&t2, &cfg, &pl, 1, &sr), -EINVAL);
		T_EQ(tc_sim_run(&t2, &cfg, &pl, 2, NULL), -EINVAL);
		T_EQ(tc_sim_run(&t2, &cfg, &pl, 2, &sr), 0);
		{	/* the same with the step's spans */
			struct tc_sim_spans sp = { 0 };
			struct tc_sim_result s2;

			T_EQ(tc_sim_run_spans(&t2, &cfg, &pl, 2, &s2, NULL), -EINVAL);
			T_EQ(tc_sim_run_spans(&tr, &cfg, &pl, 3, &s2, &sp), -EINVAL);
			T_EQ(sp.nr, 0);
			T_EQ(tc_sim_run_spans(&t2, &cfg, &pl, 2, &s2, &sp), 0);
			T_EQ(s2.step_ns, sr.step_ns);
			T_CHECK(sp.nr >= 2, "%u spans: no compute or host op", sp.nr);
			free(sp.v);
		}
		tc_plan_free(&pl);
		tc_trace_free(&t2);
	}
	tc_plan_free(NULL);
	tc_trace_free(&tr);

	/* models */
	tc_gen_cfg_default(&g);
	T_EQ(tc_model_builtin(NULL, &m), -EINVAL);
	T_EQ(tc_model_builtin("opt-1.3b", NULL), -EINVAL);
	T_EQ(tc_model_builtin("gpt-5", &m), -ENOENT);
	T_EQ(tc_model_from_hf_json(NULL, &m), -EINVAL);
	T_EQ(tc_model_from_hf_json("{", &m), -EINVAL);
	T_EQ(tc_model_from_hf_json("[]", &m), -EINVAL);
	T_EQ(tc_model_from_hf_json("{\"model_type\":\"bert\"}", &m), -EOPNOTSUPP);
	T_EQ(tc_model_from_hf_json("{\"model_type\":\"llama\",\"hidden_size\":4096}", &m), -EINVAL);
	T_EQ(tc_model_from_hf_json("{\"model_type\":\"llama\",\"hidden_size\":-1,"
				   "\"intermediate_size\":1,\"num_hidden_layers\":1,"
				   "\"num_attention_heads\":1,\"vocab_size\":1}", &m), -EINVAL);
	T_EQ(tc_model_from_hf_json("{\"model_type\":\"llama\",\"hidden_size\":100,"
				   "\"intermediate_size\":1,\"num_hidden_layers\":1,"
				   "\"num_attention_heads\":3,\"vocab_size\":1}", &m), -EINVAL);
	T_EQ(tc_model_from_hf_file(NULL, &m), -EINVAL);
	T_EQ(tc_model_from_hf_file("/nonexistent/config.json", &m), -ENOENT);
	T_EQ(tc_model_builtin("opt-1.3b", &m), 0);
	tc_trace_init(&tr);
	T_EQ(tc_model_trace(NULL, &g, &tr), -EINVAL);
	T_EQ(tc_model_trace(&m, NULL, &tr), -EINVAL);
	g.tflops = 0;
	T_EQ(tc_model_trace(&m, &g, &tr), -EINVAL);
	tc_gen_cfg_default(&g);
	m.heads = 7;		/* hidden not divisible */
	T_EQ(tc_model_trace(&m, &g, &tr), -EINVAL);
	T_EQ(tc_model_params(&m), 0);
	T_EQ(tr.nr_acc, 0);
	return t_exit();
}
