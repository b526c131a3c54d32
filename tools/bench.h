/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what tencache-bench.c shares with its subcommands (replay.c,
 * decide.c: results-file output) and its CUDA part. The CUDA part
 * (gpu/bench-cuda.cu, built with nvcc when present) holds everything that
 * needs the CUDA runtime: the copy benchmark and the cudaHostAlloc /
 * cudaHostRegister pin baselines. Without nvcc, bench-nocuda.c stands in and
 * every entry returns -ENOSYS.
 */
#ifndef TENCACHE_BENCH_H
#define TENCACHE_BENCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

/* tencache-bench.c */
double now(void);
/* A line to stdout and to the results file (-o). */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The replay and decide subcommands (replay.c, decide.c); exit codes. */
int bench_replay(int argc, char **argv);
int bench_decide(int argc, char **argv);
/* Appends later say() lines to path too; 0 or -errno. */
int bench_set_out(const char *path);
/* The "# command:" and "# machine:" lines every results file starts with. */
void bench_header(int argc, char **argv);
struct option;
/* "CMD: bad value for --NAME: ARG" for getopt value c of options lo; returns 2. */
int bench_bad_value(const char *cmd, const struct option *lo, int c, const char *arg);

/* 1 when this build has the CUDA part. */
extern const int bench_have_cudart;

/*
 * Set up cudart on GPU gpu (context created, as an application would).
 * 0, -ENODEV without a usable GPU, -ENOSYS without the CUDA part.
 */
int cb_init(int gpu);

struct cb_copy_opts {
	int gpu;
	unsigned reps;		/* repetitions per figure; the median is reported */
	uint64_t chunk;		/* copy_chunk for the main table (0: the library's default) */
	int sweep;		/* also sweep copy_chunk */
};
/* The copy benchmark: prints its tables with say(); 0 or -errno. */
int cb_copy(const struct cb_copy_opts *o);

/* cudaHostAlloc(bytes): seconds to allocate and to free. */
int cb_pin_hostalloc(uint64_t bytes, double *t_alloc, double *t_free);
/*
 * malloc(bytes) (4 KiB pages), first touch by one memset, cudaHostRegister:
 * seconds for the touch, the register and the unregister.
 */
int cb_pin_register(uint64_t bytes, double *t_touch, double *t_reg, double *t_unreg);

#ifdef __cplusplus
}
#endif

#endif
