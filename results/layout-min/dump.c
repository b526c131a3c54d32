/* dump a model trace as a tencache-table JSON: dump NAME SPLIT OUT [batch] [adam_rate] */
#include <stdio.h>
#include <stdlib.h>
#include "plan/plan.h"
#include "exec/table_file.h"
int main(int argc, char **argv)
{
	struct tc_model m; struct tc_gen_cfg g; struct tc_trace tr;
	if (argc < 4) return 2;
	if (tc_model_builtin(argv[1], &m)) { fprintf(stderr, "model\n"); return 1; }
	tc_gen_cfg_default(&g);
	g.batch = argc > 4 ? atoi(argv[4]) : 2;
	g.adam_params_per_s = argc > 5 ? atof(argv[5]) : 5e9;
	g.opt_overlap = 1;
	g.opt_split = atoi(argv[2]);
	tc_trace_init(&tr);
	int r = tc_model_trace(&m, &g, &tr);
	if (r) { fprintf(stderr, "trace %d\n", r); return 1; }
	uint32_t in = 0, all = 0, lastbwd = 0;
	for (uint32_t i = 0; i < tr.nr_acc; i++) if (!(tr.acc[i].flags & TC_ACC_HOST) && tr.acc[i].phase == TC_PHASE_BWD) lastbwd = i;
	for (uint32_t i = 0; i < tr.nr_acc; i++) if ((tr.acc[i].flags & (TC_ACC_HOST|TC_ACC_END)) == (TC_ACC_HOST|TC_ACC_END)) { all++; if (i < lastbwd) in++; }
	printf("%u tensors %u accesses; host ops %u of %u before the last bwd GPU access\n", tr.nr_tensors, tr.nr_acc, in, all);
	r = tc_table_save(argv[3], tc_table_signature(&tr), &tr);
	printf("save %d\n", r);
	return r != 0;
}
