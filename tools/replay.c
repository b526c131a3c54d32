/* replay.c - tencache-bench replay: a transformer training step's tensor
 * trace replayed through the tensor cache, one run per policy. */
#include <stdio.h>

int bench_replay(int argc, char **argv);

int bench_replay(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "replay: needs the tensor-cache executor (runtime/exec), not built yet\n");
	return 1;
}
