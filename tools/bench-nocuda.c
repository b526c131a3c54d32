/* SPDX-License-Identifier: MIT */
/* bench-nocuda.c - stands in for gpu/bench-cuda.cu when nvcc is absent. */
#include <errno.h>

#include "bench.h"

const int bench_have_cudart = 0;

int cb_init(int gpu)
{
	(void)gpu;
	return -ENOSYS;
}

int cb_copy(const struct cb_copy_opts *o)
{
	(void)o;
	return -ENOSYS;
}

int cb_pin_hostalloc(uint64_t bytes, double *t_alloc, double *t_free)
{
	(void)bytes;
	(void)t_alloc;
	(void)t_free;
	return -ENOSYS;
}

int cb_pin_register(uint64_t bytes, double *t_touch, double *t_reg, double *t_unreg)
{
	(void)bytes;
	(void)t_touch;
	(void)t_reg;
	(void)t_unreg;
	return -ENOSYS;
}
