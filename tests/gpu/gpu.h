/* gpu.h - shared setup for the CUDA tests: skip (77) without a usable GPU. */
#ifndef TENCACHE_TEST_GPU_H
#define TENCACHE_TEST_GPU_H

#include <cuda_runtime.h>

#include "tencache.h"
#include "test.h"

#define CK(call)                                                              \
	do {                                                                  \
		cudaError_t e_ = (call);                                      \
		if (e_ != cudaSuccess) {                                      \
			fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, \
				cudaGetErrorString(e_));                      \
			exit(T_EXIT_FAIL);                                    \
		}                                                             \
	} while (0)

/* A kernel that spins for cycles: work queued ahead of the test's. */
static __global__ void gpu_busy(long long cycles)
{
	long long t0 = clock64();

	while (clock64() - t0 < cycles)
		;
}

/* Writes p's n words as a pattern of v. */
static __global__ void gpu_fill(uint32_t *p, uint64_t n, uint32_t v)
{
	for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (uint64_t)gridDim.x * blockDim.x)
		p[i] = v ^ (uint32_t)(i * 2654435761u);
}

/* Exit 77 unless both cudart and libtencache see a GPU. */
static inline struct tencache *gpu_setup(struct tencache_params *p)
{
	struct tencache *tc = NULL;
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
		printf("no CUDA GPU\n");
		exit(T_EXIT_SKIP);
	}
	CK(cudaSetDevice(0));
	CK(cudaFree(0));	/* create the primary context, as an application would */
	if (tencache_init(&tc, p) || tencache_cuda_available(tc)) {
		printf("cudart sees a GPU but libtencache cannot load libcuda.so.1\n");
		exit(T_EXIT_FAIL);
	}
	return tc;
}

#endif
