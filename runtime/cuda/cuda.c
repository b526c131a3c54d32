/*
 * cuda.c - the CUDA driver API, loaded at run time with dlopen("libcuda.so.1"),
 * so the library builds and runs with no CUDA. The driver API (not cudart) is
 * used because its ABI is stable across toolkits; CUstream/CUevent are the
 * same handles as cudaStream_t/cudaEvent_t. Without a driver or a GPU every
 * entry point returns -ENODEV.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;
typedef void *CUstream;
typedef void *CUevent;

#define CU_MEMHOSTREGISTER_PORTABLE	0x01
#define CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED 712

struct tc_cuda {
	void *lib;
	CUdevice dev;
	CUcontext ctx;		/* the device's primary context, retained */
	CUresult (*cuInit)(unsigned);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetPCIBusId)(char *, int, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxGetCurrent)(CUcontext *);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemHostRegister)(void *, size_t, unsigned);
	CUresult (*cuMemHostUnregister)(void *);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuGetErrorString)(CUresult, const char **);
};

static const char *cu_errstr(struct tc_cuda *cu, CUresult r)
{
	const char *s = NULL;

	if (cu->cuGetErrorString && !cu->cuGetErrorString(r, &s) && s)
		return s;
	return "unknown CUDA error";
}

static int cu_load(struct tencache *tc, struct tc_cuda **out)
{
	static const struct { const char *name; size_t off; } syms[] = {
#define SYM(field, name) { name, offsetof(struct tc_cuda, field) }
		SYM(cuInit, "cuInit"),
		SYM(cuDeviceGetCount, "cuDeviceGetCount"),
		SYM(cuDeviceGet, "cuDeviceGet"),
		SYM(cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId"),
		SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		SYM(cuCtxGetCurrent, "cuCtxGetCurrent"),
		SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
		SYM(cuMemHostRegister, "cuMemHostRegister_v2"),
		SYM(cuMemHostUnregister, "cuMemHostUnregister"),
		SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		SYM(cuEventRecord, "cuEventRecord"),
		SYM(cuMemAlloc, "cuMemAlloc_v2"),
		SYM(cuMemFree, "cuMemFree_v2"),
		SYM(cuGetErrorString, "cuGetErrorString"),
#undef SYM
	};
	struct tc_cuda *cu;
	int count = 0;
	CUresult r;
	unsigned i;

	cu = calloc(1, sizeof(*cu));
	if (!cu)
		return -ENOMEM;
	cu->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cu->lib) {
		tc_info(tc, "cuda: no CUDA driver (%s)", dlerror());
		goto err_free;
	}
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(cu->lib, syms[i].name);

		if (!f) {
			tc_warn(tc, "cuda: libcuda.so.1 lacks %s", syms[i].name);
			goto err_close;
		}
		memcpy((char *)cu + syms[i].off, &f, sizeof(f));
	}
	r = cu->cuInit(0);
	if (r) {
		tc_info(tc, "cuda: cuInit failed: %s", cu_errstr(cu, r));
		goto err_close;
	}
	r = cu->cuDeviceGetCount(&count);
	if (r || tc->p.gpu >= count) {
		tc_info(tc, "cuda: no GPU %d (%d present)", tc->p.gpu, r ? 0 : count);
		goto err_close;
	}
	r = cu->cuDeviceGet(&cu->dev, tc->p.gpu);
	if (!r)
		r = cu->cuDevicePrimaryCtxRetain(&cu->ctx, cu->dev);
	if (r) {
		tc_warn(tc, "cuda: cannot open GPU %d: %s", tc->p.gpu, cu_errstr(cu, r));
		goto err_close;
	}
	*out = cu;
	return 0;

err_close:
	dlclose(cu->lib);
err_free:
	free(cu);
	return -ENODEV;
}

int tc_cuda_get(struct tencache *tc, struct tc_cuda **cup)
{
	struct tc_cuda *cu;
	CUcontext cur = NULL;

	if (tc->p.flags & TENCACHE_F_NO_CUDA)
		return -ENODEV;
	pthread_mutex_lock(&tc->lock);
	if (!tc->cuda_tried) {
		tc->cuda_tried = 1;
		tc->cuda_err = cu_load(tc, &tc->cuda);
	}
	pthread_mutex_unlock(&tc->lock);
	if (tc->cuda_err)
		return tc->cuda_err;
	cu = tc->cuda;
	/* Use the caller's context if it has one (e.g. set by cudart). */
	if (cu->cuCtxGetCurrent(&cur) || !cur) {
		if (cu->cuCtxSetCurrent(cu->ctx))
			return -ENODEV;
	}
	*cup = cu;
	return 0;
}

void tc_cuda_unload(struct tencache *tc)
{
	struct tc_cuda *cu = tc->cuda;

	if (!cu)
		return;
	cu->cuDevicePrimaryCtxRelease(cu->dev);
	/* libcuda is not dlclose'd: the driver does not support unloading. */
	free(cu);
	tc->cuda = NULL;
}

TENCACHE_API int tencache_cuda_available(struct tencache *tc)
{
	struct tc_cuda *cu;

	if (!tc)
		return -EINVAL;
	return tc_cuda_get(tc, &cu);
}

TENCACHE_API int tencache_gpu_numa_node(struct tencache *tc, int gpu, int *node)
{
	struct tc_cuda *cu;
	char bus[32], path[128];
	CUdevice dev;
	int ret, i;

	if (!tc || !node || gpu < 0)
		return -EINVAL;
	ret = tc_cuda_get(tc, &cu);
	if (ret)
		return ret;
	if (cu->cuDeviceGet(&dev, gpu) || cu->cuDeviceGetPCIBusId(bus, sizeof(bus), dev))
		return -ENODEV;
	for (i = 0; bus[i]; i++)	/* sysfs spells the bus id in lower case */
		if (bus[i] >= 'A' && bus[i] <= 'F')
			bus[i] += 'a' - 'A';
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", bus);
	*node = (int)tc_read_sysfs_long(path, -1);
	return 0;
}

/*
 * Registered host ranges, process-wide. CUDA rejects a copy whose host range
 * spans two registrations (EINVAL), and a pool registers one segment per
 * call, so copies are split at the end of the registered range they start
 * in (tc_cuda_host_span). A handful of ranges: a sorted array suffices.
 */
static struct reg_range { uintptr_t start, end; } *regs;
static unsigned nr_regs, max_regs;
static pthread_rwlock_t regs_lock = PTHREAD_RWLOCK_INITIALIZER;

/* first range with end > a (ranges do not overlap) */
static unsigned regs_find(uintptr_t a)
{
	unsigned lo = 0, hi = nr_regs;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (regs[mid].end <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int regs_add(void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p;
	unsigned i;
	int ret = 0;

	pthread_rwlock_wrlock(&regs_lock);
	if (nr_regs == max_regs) {
		unsigned n = max_regs ? 2 * max_regs : 16;
		struct reg_range *r = realloc(regs, n * sizeof(*r));

		if (!r) {
			ret = -ENOMEM;
			goto out;
		}
		regs = r;
		max_regs = n;
	}
	i = regs_find(a);
	memmove(&regs[i + 1], &regs[i], (nr_regs - i) * sizeof(*regs));
	regs[i].start = a;
	regs[i].end = a + len;
	nr_regs++;
out:
	pthread_rwlock_unlock(&regs_lock);
	return ret;
}

static void regs_del(void *p)
{
	uintptr_t a = (uintptr_t)p;
	unsigned i;

	pthread_rwlock_wrlock(&regs_lock);
	i = regs_find(a);
	if (i < nr_regs && regs[i].start == a) {
		memmove(&regs[i], &regs[i + 1], (nr_regs - i - 1) * sizeof(*regs));
		nr_regs--;
	}
	pthread_rwlock_unlock(&regs_lock);
}

uint64_t tc_cuda_host_span(const void *p, uint64_t len)
{
	uintptr_t a = (uintptr_t)p;
	uint64_t n = len;
	unsigned i;

	pthread_rwlock_rdlock(&regs_lock);
	i = regs_find(a);
	if (i < nr_regs && regs[i].start <= a && regs[i].end - a < n)
		n = regs[i].end - a;
	pthread_rwlock_unlock(&regs_lock);
	return n;
}

int tc_cuda_host_register(struct tencache *tc, void *p, uint64_t len)
{
	struct tc_cuda *cu;
	CUresult r;
	int ret = tc_cuda_get(tc, &cu);

	if (ret)
		return ret;
	r = cu->cuMemHostRegister(p, len, CU_MEMHOSTREGISTER_PORTABLE);
	if (r && r != CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED) {
		tc_err(tc, "cuda: cuMemHostRegister(%p, %llu) failed: %s", p,
		       (unsigned long long)len, cu_errstr(cu, r));
		return -EIO;
	}
	if (!r && regs_add(p, len)) {
		cu->cuMemHostUnregister(p);
		return -ENOMEM;
	}
	return 0;
}

int tc_cuda_host_unregister(struct tencache *tc, void *p)
{
	struct tc_cuda *cu;
	int ret = tc_cuda_get(tc, &cu);

	if (ret)
		return ret;
	regs_del(p);
	return cu->cuMemHostUnregister(p) ? -EIO : 0;
}

TENCACHE_API int tencache_copy_async(struct tencache *tc, int dir, void *dst, const void *src,
				     uint64_t len, void *stream, void *event)
{
	struct tc_cuda *cu;
	uint64_t off, n, chunk;
	CUresult r = 0;
	int ret;

	if (!tc || !dst || !src || !len ||
	    (dir != TENCACHE_COPY_H2D && dir != TENCACHE_COPY_D2H))
		return -EINVAL;
	ret = tc_cuda_get(tc, &cu);
	if (ret)
		return ret;
	/*
	 * Pieces let an H2D on one stream and a D2H on another interleave
	 * instead of one whole copy holding its engine until it is done.
	 */
	chunk = tc->p.copy_chunk;
	for (off = 0; off < len && !r; off += n) {
		n = len - off < chunk ? len - off : chunk;
		n = tc_cuda_host_span((dir == TENCACHE_COPY_H2D ? (const char *)src :
				       (const char *)dst) + off, n);
		if (dir == TENCACHE_COPY_H2D)
			r = cu->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst + off,
						  (const char *)src + off, n, stream);
		else
			r = cu->cuMemcpyDtoHAsync((char *)dst + off,
						  (CUdeviceptr)(uintptr_t)src + off, n, stream);
	}
	if (!r && event)
		r = cu->cuEventRecord(event, stream);
	if (r) {
		tc_err(tc, "cuda: async copy failed: %s", cu_errstr(cu, r));
		return -EIO;
	}
	return 0;
}

/* ---- GPU arena: one cuMemAlloc with an arena over it ---- */

struct tencache_gpu_arena {
	struct tencache *tc;
	CUdeviceptr base;
	struct tencache_arena *arena;
};

TENCACHE_API int tencache_gpu_arena_create(struct tencache *tc, struct tencache_gpu_arena **gp,
					   uint64_t bytes, const struct tencache_size_count *hist,
					   unsigned nr)
{
	struct tencache_gpu_arena *g;
	struct tc_cuda *cu;
	CUresult r;
	int ret;

	if (!tc || !gp || !bytes)
		return -EINVAL;
	ret = tc_cuda_get(tc, &cu);
	if (ret)
		return ret;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->tc = tc;
	/* 512: covers every CUDA type and the 256-byte cuMemAlloc alignment. */
	ret = tencache_arena_create(&g->arena, bytes, 512, hist, nr);
	if (ret)
		goto err_free;
	r = cu->cuMemAlloc(&g->base, bytes);
	if (r) {
		tc_err(tc, "cuda: cuMemAlloc(%llu) failed: %s", (unsigned long long)bytes,
		       cu_errstr(cu, r));
		ret = -ENOMEM;
		goto err_arena;
	}
	*gp = g;
	return 0;

err_arena:
	tencache_arena_destroy(g->arena);
err_free:
	free(g);
	return ret;
}

TENCACHE_API void tencache_gpu_arena_destroy(struct tencache_gpu_arena *g)
{
	struct tc_cuda *cu;

	if (!g)
		return;
	if (!tc_cuda_get(g->tc, &cu))
		cu->cuMemFree(g->base);
	tencache_arena_destroy(g->arena);
	free(g);
}

TENCACHE_API int tencache_gpu_arena_alloc(struct tencache_gpu_arena *g, uint64_t size,
					  void **dptr)
{
	uint64_t off;
	int ret;

	if (!g || !dptr)
		return -EINVAL;
	ret = tencache_arena_alloc(g->arena, size, &off);
	if (!ret)
		*dptr = (void *)(uintptr_t)(g->base + off);
	return ret;
}

TENCACHE_API int tencache_gpu_arena_free(struct tencache_gpu_arena *g, void *dptr)
{
	uintptr_t p = (uintptr_t)dptr;

	if (!g || p < g->base)
		return -EINVAL;
	return tencache_arena_free(g->arena, p - g->base);
}

TENCACHE_API struct tencache_arena *tencache_gpu_arena_arena(struct tencache_gpu_arena *g)
{
	return g ? g->arena : NULL;
}
