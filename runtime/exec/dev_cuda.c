/*
 * dev_cuda.c - the executor's device on a CUDA GPU, through the driver API
 * loaded at run time (dlopen libcuda.so.1): one cuMemAlloc region for the
 * cached tensors, streams, events, async copies, and a spin kernel (PTX,
 * JIT-compiled by the driver) that stands for a trace's compute time.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/dev.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_NON_BLOCKING		0x1
#define CU_STREAM_WAIT_VALUE_GEQ	0x0
#define CU_MEMHOSTALLOC_PORTABLE	0x1
#define CU_MEMHOSTALLOC_DEVICEMAP	0x2
#define CU_EVENT_BLOCKING_SYNC		0x1
#define CU_EVENT_DISABLE_TIMING		0x2
#define CUDA_ERROR_NOT_READY		600

/* spins for ns of %globaltimer: the stand-in for a layer's kernels */
static const char spin_ptx[] =
	".version 7.0\n"
	".target sm_70\n"
	".address_size 64\n"
	".visible .entry tc_spin(.param .u64 ns)\n"
	"{\n"
	"  .reg .u64 %t0, %t1, %ns, %d;\n"
	"  .reg .pred %p;\n"
	"  ld.param.u64 %ns, [ns];\n"
	"  mov.u64 %t0, %globaltimer;\n"
	"SPIN:\n"
	"  mov.u64 %t1, %globaltimer;\n"
	"  sub.u64 %d, %t1, %t0;\n"
	"  setp.lt.u64 %p, %d, %ns;\n"
	"  @%p bra SPIN;\n"
	"  ret;\n"
	"}\n";

/* CUmemcpyAttributes: srcAccessOrder, srcLocHint, dstLocHint, flags */
struct cu_memcpy_attrs {
	int src_access_order;
	int src_loc[2], dst_loc[2];	/* CUmemLocation: type, id */
	unsigned flags;
};
#define CU_MEMCPY_SRC_ACCESS_ORDER_STREAM	1
#define CU_BATCH_MAX	64	/* copies per driver call (stack arrays) */

static const struct tc_dev_ops tc_dev_cuda_timed_ops;

/* a host signal: ev, recorded on the stream, then h's instance inst */
struct cu_sig {
	CUevent ev;
	struct tc_hev *h;
	uint64_t inst;
	struct cu_sig *next;
};

/* the caller's driver calls, by kind (slow_note; at the debug log level) */
enum { SL_COPY, SL_BATCH, SL_SPIN, SL_EVENT, SL_RECORD, SL_WAIT, SL_WAIT_HOST, SL_SIGNAL, SL_NR };

struct cudev {
	struct tc_dev d;
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr mem;
	CUmodule mod;
	CUfunction spin;
	CUresult (*cuInit)(unsigned);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxGetCurrent)(CUcontext *);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuStreamCreate)(CUstream *, unsigned);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*cuEventCreate)(CUevent *, unsigned);
	CUresult (*cuEventDestroy)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventQuery)(CUevent);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*cuModuleLoadData)(CUmodule *, const void *);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
				   unsigned, unsigned, unsigned, CUstream, void **, void **);
	CUresult (*cuGetErrorString)(CUresult, const char **);
	/* optional (CUDA 13 drivers); NULL: copy_batch loops over copies */
	CUresult (*cuMemcpyBatchAsync)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t,
				       struct cu_memcpy_attrs *, size_t *, size_t, CUstream);
	/* optional: streams wait for host events on the device (hev_map) */
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
	CUresult (*cuStreamWaitValue64)(CUstream, CUdeviceptr, uint64_t, unsigned);
	int wait_value_off;	/* a wait failed once: the host waits from then on */
	uint64_t slow_ns[SL_NR], slow_nr[SL_NR];	/* slow_note */
	/* host signals (cuda_signal_host): queued in order for sig_main */
	pthread_mutex_t sig_lock;
	pthread_cond_t sig_cond;
	pthread_t sig_thread;
	int sig_on, sig_exit, sig_err;
	struct cu_sig *sig_head, *sig_tail, *sig_free;
};

#define CU(d) ((struct cudev *)(d))

static int cu_fail(struct cudev *c, const char *what, CUresult r)
{
	const char *s = "unknown error";

	if (c->cuGetErrorString)
		c->cuGetErrorString(r, &s);
	tc_err(c->d.tc, "cuda: %s: %s (%d)", what, s, r);
	return -EIO;
}

/*
 * Every thread that calls into the driver needs the context current. Inside
 * an entered call (cuda_enter .. cuda_leave) the thread's context was made
 * current once: the caller cannot change it before the call returns.
 */
static __thread struct cudev *cu_entered;

static void cu_ctx(struct cudev *c)
{
	CUcontext cur = NULL;

	if (cu_entered == c)
		return;
	if (c->cuCtxGetCurrent(&cur) || cur != c->ctx)
		c->cuCtxSetCurrent(c->ctx);
}

static void cuda_enter(struct tc_dev *d)
{
	cu_entered = NULL;
	cu_ctx(CU(d));
	cu_entered = CU(d);
}

static void cuda_leave(struct tc_dev *d)
{
	cu_entered = NULL;
}

static int cuda_open(struct tencache *tc, uint64_t bytes, struct tc_dev **dp)
{
	static const struct { const char *name; size_t off; } syms[] = {
#define SYM(f, n) { n, offsetof(struct cudev, f) }
		SYM(cuInit, "cuInit"), SYM(cuDeviceGet, "cuDeviceGet"),
		SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
		SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
		SYM(cuCtxGetCurrent, "cuCtxGetCurrent"), SYM(cuCtxSetCurrent, "cuCtxSetCurrent"),
		SYM(cuMemAlloc, "cuMemAlloc_v2"), SYM(cuMemFree, "cuMemFree_v2"),
		SYM(cuStreamCreate, "cuStreamCreate"), SYM(cuStreamDestroy, "cuStreamDestroy_v2"),
		SYM(cuStreamSynchronize, "cuStreamSynchronize"),
		SYM(cuStreamWaitEvent, "cuStreamWaitEvent"),
		SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
		SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
		SYM(cuEventCreate, "cuEventCreate"), SYM(cuEventDestroy, "cuEventDestroy_v2"),
		SYM(cuEventRecord, "cuEventRecord"), SYM(cuEventQuery, "cuEventQuery"),
		SYM(cuEventSynchronize, "cuEventSynchronize"),
		SYM(cuEventElapsedTime, "cuEventElapsedTime"),
		SYM(cuModuleLoadData, "cuModuleLoadData"), SYM(cuModuleUnload, "cuModuleUnload"),
		SYM(cuModuleGetFunction, "cuModuleGetFunction"),
		SYM(cuLaunchKernel, "cuLaunchKernel"), SYM(cuGetErrorString, "cuGetErrorString"),
#undef SYM
	};
	struct cudev *c = calloc(1, sizeof(*c));
	CUresult r;
	unsigned i;
	int ret = -ENODEV;

	if (!c)
		return -ENOMEM;
	/* at the debug log level, the caller's slow driver calls are timed */
	c->d.ops = tc->p.log_level == TENCACHE_LOG_DEBUG ? &tc_dev_cuda_timed_ops : &tc_dev_cuda_ops;
	c->d.tc = tc;
	c->d.bytes = bytes;
	tc_dev_hinit(&c->d);
	pthread_mutex_init(&c->sig_lock, NULL);
	pthread_cond_init(&c->sig_cond, NULL);
	c->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!c->lib)
		goto free_dev;
	for (i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(c->lib, syms[i].name);

		if (!f) {
			tc_err(tc, "cuda: libcuda.so.1 lacks %s", syms[i].name);
			goto close_lib;
		}
		memcpy((char *)c + syms[i].off, &f, sizeof(f));
	}
	c->cuMemcpyBatchAsync = dlsym(c->lib, "cuMemcpyBatchAsync_v2");
	c->cuMemHostAlloc = dlsym(c->lib, "cuMemHostAlloc");
	c->cuMemFreeHost = dlsym(c->lib, "cuMemFreeHost");
	c->cuMemHostGetDevicePointer = dlsym(c->lib, "cuMemHostGetDevicePointer_v2");
	c->cuStreamWaitValue64 = dlsym(c->lib, "cuStreamWaitValue64_v2");
	if (!c->cuStreamWaitValue64)
		c->cuStreamWaitValue64 = dlsym(c->lib, "cuStreamWaitValue64");
	if (c->cuInit(0) || c->cuDeviceGet(&c->dev, tc->p.gpu) ||
	    c->cuDevicePrimaryCtxRetain(&c->ctx, c->dev))
		goto close_lib;
	cu_ctx(c);
	r = c->cuMemAlloc(&c->mem, bytes ? bytes : 1);
	if (r) {
		ret = cu_fail(c, "cuMemAlloc of the cache region", r) ? -ENOMEM : 0;
		goto release_ctx;
	}
	r = c->cuModuleLoadData(&c->mod, spin_ptx);
	if (!r)
		r = c->cuModuleGetFunction(&c->spin, c->mod, "tc_spin");
	if (r) {
		ret = cu_fail(c, "loading the spin kernel", r);
		goto free_mem;
	}
	c->d.base = (void *)(uintptr_t)c->mem;
	*dp = &c->d;
	return 0;

free_mem:
	c->cuMemFree(c->mem);
release_ctx:
	c->cuDevicePrimaryCtxRelease(c->dev);
close_lib:
	dlclose(c->lib);
free_dev:
	pthread_mutex_destroy(&c->sig_lock);
	pthread_cond_destroy(&c->sig_cond);
	free(c);
	return ret;
}

static void slow_say(struct cudev *c);
static void sig_stop(struct cudev *c);

static void cuda_close(struct tc_dev *d)
{
	struct cudev *c = CU(d);

	slow_say(c);
	cu_ctx(c);
	sig_stop(c);
	c->cuModuleUnload(c->mod);
	c->cuMemFree(c->mem);
	c->cuDevicePrimaryCtxRelease(c->dev);
	dlclose(c->lib);
	free(c);
}

static int cuda_stream_create(struct tc_dev *d, void **s)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuStreamCreate((CUstream *)s, CU_STREAM_NON_BLOCKING);
	return r ? cu_fail(c, "cuStreamCreate", r) : 0;
}

static void cuda_stream_destroy(struct tc_dev *d, void *s)
{
	if (s)
		CU(d)->cuStreamDestroy(s);
}

static int cuda_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
		     uint64_t len)
{
	struct cudev *c = CU(d);
	uint64_t off, n;
	CUresult r = 0;

	cu_ctx(c);
	/* a tensor may straddle two pool segments: one copy per registration */
	for (off = 0; off < len && !r; off += n) {
		if (dir == TENCACHE_COPY_H2D) {
			n = tc_cuda_host_span((const char *)src + off, len - off);
			r = c->cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)dst + off,
						 (const char *)src + off, n, s);
		} else {
			n = tc_cuda_host_span((char *)dst + off, len - off);
			r = c->cuMemcpyDtoHAsync((char *)dst + off,
						 (CUdeviceptr)(uintptr_t)src + off, n, s);
		}
	}
	return r ? cu_fail(c, "async copy", r) : 0;
}

/*
 * Up to CU_BATCH_MAX copies (after splitting at pool segments, as
 * cuda_copy does) per cuMemcpyBatchAsync_v2, in stream order on s. A
 * driver that refuses the call (not supported there) gets the copies one by
 * one from then on; pieces already queued are copied again, harmlessly.
 */
static int cuda_copy_batch(struct tc_dev *d, void *s, int dir, void *const *dst,
			   const void *const *src, const uint64_t *len, uint32_t n)
{
	struct cudev *c = CU(d);
	struct cu_memcpy_attrs attr = { .src_access_order = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
	CUdeviceptr dsts[CU_BATCH_MAX], srcs[CU_BATCH_MAX];
	size_t sizes[CU_BATCH_MAX], first = 0, nb = 0;
	uint32_t i = 0, from = 0;
	uint64_t off = 0;
	CUresult r;

	if (!c->cuMemcpyBatchAsync) {
		int ret = 0;

		for (i = 0; i < n && !ret; i++)
			ret = cuda_copy(d, s, dir, dst[i], src[i], len[i]);
		return ret;
	}
	cu_ctx(c);
	while (i < n) {
		const char *host = dir == TENCACHE_COPY_H2D ? src[i] : dst[i];
		uint64_t m = tc_cuda_host_span(host + off, len[i] - off);

		dsts[nb] = (CUdeviceptr)(uintptr_t)dst[i] + off;
		srcs[nb] = (CUdeviceptr)(uintptr_t)src[i] + off;
		sizes[nb++] = m;
		off += m;
		if (off >= len[i]) {
			i++;
			off = 0;
		}
		if (nb < CU_BATCH_MAX && i < n)
			continue;
		r = c->cuMemcpyBatchAsync(dsts, srcs, sizes, nb, &attr, &first, 1, s);
		if (r) {
			tc_info(d->tc, "cuda: cuMemcpyBatchAsync_v2 refused a batch (%d): copies go one by one",
				r);
			c->cuMemcpyBatchAsync = NULL;
			return cuda_copy_batch(d, s, dir, dst + from, src + from, len + from,
					       n - from);
		}
		nb = 0;
		from = i;	/* a fallback redoes copy i whole: the same bytes again */
	}
	return 0;
}

static int cuda_spin(struct tc_dev *d, void *s, uint64_t ns)
{
	struct cudev *c = CU(d);
	void *args[] = { &ns };
	CUresult r;

	if (!ns)
		return 0;
	cu_ctx(c);
	r = c->cuLaunchKernel(c->spin, 1, 1, 1, 1, 1, 1, 0, s, args, NULL);
	return r ? cu_fail(c, "launching the spin kernel", r) : 0;
}

static int cuda_event_create(struct tc_dev *d, int timing, void **e)
{
	struct cudev *c = CU(d);
	CUresult r;

	tc_dev_lifecycle_check(d);
	cu_ctx(c);
	r = c->cuEventCreate((CUevent *)e, timing ? 0 : CU_EVENT_DISABLE_TIMING);
	return r ? cu_fail(c, "cuEventCreate", r) : 0;
}

static void cuda_event_destroy(struct tc_dev *d, void *e)
{
	tc_dev_lifecycle_check(d);
	if (e)
		CU(d)->cuEventDestroy(e);
}

static int cuda_record(struct tc_dev *d, void *e, void *s)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuEventRecord(e, s);
	return r ? cu_fail(c, "cuEventRecord", r) : 0;
}

static int cuda_stream_wait(struct tc_dev *d, void *s, void *e)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuStreamWaitEvent(s, e, 0);
	return r ? cu_fail(c, "cuStreamWaitEvent", r) : 0;
}

static int cuda_query(struct tc_dev *d, void *e)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuEventQuery(e);
	if (r == CUDA_ERROR_NOT_READY)
		return 0;
	return r ? cu_fail(c, "cuEventQuery", r) : 1;
}

static int cuda_sync(struct tc_dev *d, void *e)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuEventSynchronize(e);
	return r ? cu_fail(c, "cuEventSynchronize", r) : 0;
}

static int cuda_elapsed(struct tc_dev *d, void *a, void *b, uint64_t *ns)
{
	struct cudev *c = CU(d);
	float ms = 0;
	CUresult r;

	cu_ctx(c);
	r = c->cuEventElapsedTime(&ms, a, b);
	if (r)
		return -EINVAL;
	*ns = ms > 0 ? (uint64_t)(ms * 1e6) : 0;
	return 0;
}

static int cuda_stream_sync(struct tc_dev *d, void *s)
{
	struct cudev *c = CU(d);
	CUresult r;

	cu_ctx(c);
	r = c->cuStreamSynchronize(s);
	return r ? cu_fail(c, "cuStreamSynchronize", r) : 0;
}

/*
 * A host event with a mapped word (cuda_hev_map): the stream waits on the
 * device until the word reaches target, and the caller goes on. Otherwise
 * the host waits, then queues.
 */
static int cuda_stream_wait_host(struct tc_dev *d, void *s, struct tc_hev *h,
				 uint64_t target)
{
	struct cudev *c = CU(d);
	CUresult r;

	if (h->word && !c->wait_value_off && !tc_hev_reached(d, h, target)) {
		cu_ctx(c);
		r = c->cuStreamWaitValue64(s, (CUdeviceptr)(uintptr_t)h->word, target,
					   CU_STREAM_WAIT_VALUE_GEQ);
		if (!r)
			return 1;
		c->wait_value_off = 1;
		cu_fail(c, "cuStreamWaitValue64 (from now on the host waits for host events)", r);
	}
	tc_hev_wait(d, h, target);
	return 0;
}

/* Mapped pinned words, at the same address on the device (UVA). */
static int cuda_hev_map(struct tc_dev *d, uint32_t n, uint64_t **words)
{
	struct cudev *c = CU(d);
	CUdeviceptr dp = 0;
	void *p = NULL;
	CUresult r;

	if (!c->cuMemHostAlloc || !c->cuMemFreeHost || !c->cuMemHostGetDevicePointer ||
	    !c->cuStreamWaitValue64 || c->wait_value_off || !n)
		return -ENOTSUP;
	cu_ctx(c);
	r = c->cuMemHostAlloc(&p, (size_t)n * sizeof(uint64_t),
			      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
	if (r)
		return cu_fail(c, "cuMemHostAlloc", r);
	r = c->cuMemHostGetDevicePointer(&dp, p, 0);
	if (r || dp != (CUdeviceptr)(uintptr_t)p) {
		c->cuMemFreeHost(p);
		return -ENOTSUP;
	}
	memset(p, 0, (size_t)n * sizeof(uint64_t));
	*words = p;
	return 0;
}

static void cuda_hev_unmap(struct tc_dev *d, uint64_t *words)
{
	struct cudev *c = CU(d);

	if (!words)
		return;
	cu_ctx(c);
	c->cuMemFreeHost(words);
}

/*
 * Host signals: an event recorded on the stream, which a thread of the
 * device's own (sig_main) waits for, in the order queued, before it signals
 * the host event. Not cuLaunchHostFunc: on an H100 the replay's caller spent
 * 55% of its time inside that call, where the driver waited for earlier
 * host functions (OPT-13B: 170 calls of 100 us or more, 69.6 s in all), and
 * queued nothing else meanwhile. The events sync by blocking: the thread
 * sleeps, no core spins. A failed sync is logged, kept for the next signal
 * to return, and signals anyway: a waiter must not hang on it.
 */
static void *sig_main(void *arg)
{
	struct cudev *c = arg;

	c->cuCtxSetCurrent(c->ctx);
	pthread_mutex_lock(&c->sig_lock);
	for (;;) {
		struct cu_sig *g;
		CUresult r;

		while (!c->sig_head && !c->sig_exit)
			pthread_cond_wait(&c->sig_cond, &c->sig_lock);
		g = c->sig_head;	/* the queue is drained before exit */
		if (!g)
			break;
		pthread_mutex_unlock(&c->sig_lock);
		r = c->cuEventSynchronize(g->ev);
		if (r)
			cu_fail(c, "cuEventSynchronize (a host signal)", r);
		tc_hev_signal(&c->d, g->h, g->inst);
		pthread_mutex_lock(&c->sig_lock);
		if (r)
			c->sig_err = -EIO;
		c->sig_head = g->next;
		if (!c->sig_head)
			c->sig_tail = NULL;
		g->next = c->sig_free;
		c->sig_free = g;
	}
	pthread_mutex_unlock(&c->sig_lock);
	return NULL;
}

/* Every queued signal made, the thread joined, the events freed. */
static void sig_stop(struct cudev *c)
{
	struct cu_sig *g;

	pthread_mutex_lock(&c->sig_lock);
	c->sig_exit = 1;
	pthread_cond_broadcast(&c->sig_cond);
	pthread_mutex_unlock(&c->sig_lock);
	if (c->sig_on)
		pthread_join(c->sig_thread, NULL);
	c->sig_on = 0;
	while ((g = c->sig_free)) {
		c->sig_free = g->next;
		c->cuEventDestroy(g->ev);
		free(g);
	}
	pthread_mutex_destroy(&c->sig_lock);
	pthread_cond_destroy(&c->sig_cond);
}

static int cuda_signal_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst)
{
	struct cudev *c = CU(d);
	struct cu_sig *g;
	CUresult r;
	int ret;

	pthread_mutex_lock(&c->sig_lock);
	ret = c->sig_err;
	g = c->sig_free;
	if (g)
		c->sig_free = g->next;
	if (!ret && !c->sig_on) {
		ret = -pthread_create(&c->sig_thread, NULL, sig_main, c);
		c->sig_on = !ret;
	}
	if (ret && g) {
		g->next = c->sig_free;
		c->sig_free = g;
	}
	pthread_mutex_unlock(&c->sig_lock);
	if (ret)
		return ret;
	cu_ctx(c);
	if (!g) {
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		r = c->cuEventCreate(&g->ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC);
		if (r) {
			free(g);
			return cu_fail(c, "cuEventCreate (a host signal)", r);
		}
	}
	r = c->cuEventRecord(g->ev, s);
	pthread_mutex_lock(&c->sig_lock);
	if (r) {
		g->next = c->sig_free;
		c->sig_free = g;
	} else {
		*g = (struct cu_sig){ .ev = g->ev, .h = h, .inst = inst };
		if (c->sig_tail)
			c->sig_tail->next = g;
		else
			c->sig_head = g;
		c->sig_tail = g;
		pthread_cond_signal(&c->sig_cond);
	}
	pthread_mutex_unlock(&c->sig_lock);
	return r ? cu_fail(c, "cuEventRecord (a host signal)", r) : 0;
}

/*
 * The caller's driver calls that took SLOW_NS or more, by kind, said at
 * close (tc_dev_cuda_timed_ops, at the debug log level: two clock reads a
 * call stay off the decisions' path otherwise). On a GPU the caller also
 * issues the plan's NVMe jobs: one held up in the driver (a full stream, a
 * host wait) issues none, and OPT-13B's replays spent 0.9-1.2 ms per
 * acquire or release outside their waits (results/h200-replay.md, session
 * 30).
 */
#define SLOW_NS	100000

static void slow_note(struct tc_dev *d, int k, uint64_t t0)
{
	uint64_t ns = tc_now_ns() - t0;

	if (ns >= SLOW_NS) {
		__atomic_add_fetch(&CU(d)->slow_ns[k], ns, __ATOMIC_RELAXED);
		__atomic_add_fetch(&CU(d)->slow_nr[k], 1, __ATOMIC_RELAXED);
	}
}

static void slow_say(struct cudev *c)
{
	static const char *const names[SL_NR] = {
		"copy", "batched copy", "spin kernel", "event create", "event record",
		"stream wait", "wait for a host event", "host signal",
	};
	char line[512];
	int n = 0;

	for (int k = 0; k < SL_NR && n < (int)sizeof(line) - 64; k++)
		if (c->slow_nr[k])
			n += snprintf(line + n, sizeof(line) - n, "%s %s %llu (%.1f ms)",
				      n ? "," : "", names[k], (unsigned long long)c->slow_nr[k],
				      c->slow_ns[k] / 1e6);
	if (n)
		tc_dbg(c->d.tc, "cuda: driver calls of 100 us or more:%s", line);
}

#define TIMED(k, call) ({ uint64_t t0_ = tc_now_ns(); int r_ = (call); slow_note(d, k, t0_); r_; })

static int timed_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
		      uint64_t len)
{
	return TIMED(SL_COPY, cuda_copy(d, s, dir, dst, src, len));
}

static int timed_copy_batch(struct tc_dev *d, void *s, int dir, void *const *dst,
			    const void *const *src, const uint64_t *len, uint32_t n)
{
	return TIMED(SL_BATCH, cuda_copy_batch(d, s, dir, dst, src, len, n));
}

static int timed_spin(struct tc_dev *d, void *s, uint64_t ns)
{
	return TIMED(SL_SPIN, cuda_spin(d, s, ns));
}

static int timed_event_create(struct tc_dev *d, int timing, void **e)
{
	return TIMED(SL_EVENT, cuda_event_create(d, timing, e));
}

static int timed_record(struct tc_dev *d, void *e, void *s)
{
	return TIMED(SL_RECORD, cuda_record(d, e, s));
}

static int timed_stream_wait(struct tc_dev *d, void *s, void *e)
{
	return TIMED(SL_WAIT, cuda_stream_wait(d, s, e));
}

static int timed_stream_wait_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t target)
{
	return TIMED(SL_WAIT_HOST, cuda_stream_wait_host(d, s, h, target));
}

static int timed_signal_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst)
{
	return TIMED(SL_SIGNAL, cuda_signal_host(d, s, h, inst));
}

const struct tc_dev_ops tc_dev_cuda_ops = {
	.name = "cuda",
	.open = cuda_open,
	.close = cuda_close,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.copy = cuda_copy,
	.copy_batch = cuda_copy_batch,
	.spin = cuda_spin,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.record = cuda_record,
	.stream_wait = cuda_stream_wait,
	.query = cuda_query,
	.sync = cuda_sync,
	.elapsed = cuda_elapsed,
	.stream_sync = cuda_stream_sync,
	.stream_wait_host = cuda_stream_wait_host,
	.signal_host = cuda_signal_host,
	.hev_map = cuda_hev_map,
	.hev_unmap = cuda_hev_unmap,
	.enter = cuda_enter,
	.leave = cuda_leave,
};

static const struct tc_dev_ops tc_dev_cuda_timed_ops = {
	.name = "cuda",
	.open = cuda_open,
	.close = cuda_close,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.copy = timed_copy,
	.copy_batch = timed_copy_batch,
	.spin = timed_spin,
	.event_create = timed_event_create,
	.event_destroy = cuda_event_destroy,
	.record = timed_record,
	.stream_wait = timed_stream_wait,
	.query = cuda_query,
	.sync = cuda_sync,
	.elapsed = cuda_elapsed,
	.stream_sync = cuda_stream_sync,
	.stream_wait_host = timed_stream_wait_host,
	.signal_host = timed_signal_host,
	.hev_map = cuda_hev_map,
	.hev_unmap = cuda_hev_unmap,
	.enter = cuda_enter,
	.leave = cuda_leave,
};
