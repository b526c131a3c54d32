/*
 * dev.h - the executor's "device": streams that run copies and compute in
 * order, events that order streams, and the memory the cache calls "GPU".
 * Two backends behind one interface: CUDA (dev_cuda.c, driver API loaded at
 * run time) and the CPU-only host mode (dev_host.c: worker threads, memcpy,
 * a host arena). The executor (cache.c) is the same code over both.
 *
 * Events ("latest instance" semantics, like CUDA events): recording an event
 * again replaces what a later wait waits for; a wait captures the instance
 * recorded at the time of the call. Host-domain events (tc_hev) are signalled
 * by host code (staging, host ops); device events by a stream.
 *
 * The issuer (dev_issuer.c) wraps either backend: a thread per device makes
 * the calls that put work on the device's own streams (copies, their event
 * records and waits), so the caller's thread only queues them. Calls that
 * order a caller's stream (its records and waits) stay on the caller, after
 * the issuer has made the record they name; query answers from what the
 * issuer saw complete, without a driver call (0 may be stale: "not yet seen").
 */
#ifndef TENCACHE_EXEC_DEV_H
#define TENCACHE_EXEC_DEV_H

#include <pthread.h>
#include <stdint.h>

#include "internal.h"

/* A host-domain event: rec counts records, done the completed ones. */
struct tc_hev {
	uint64_t rec, done;
	uint64_t *word;		/* done, mirrored where a stream can wait on it (hev_map) */
};

struct tc_dev;

struct tc_dev_ops {
	const char *name;
	/* "GPU" memory: one region of bytes at *base (device address). */
	int (*open)(struct tencache *tc, uint64_t bytes, struct tc_dev **dp);
	void (*close)(struct tc_dev *d);
	/* streams are CUstream (CUDA) or struct tc_hstream * (host) */
	int (*stream_create)(struct tc_dev *d, void **s);
	void (*stream_destroy)(struct tc_dev *d, void *s);
	/* dir: TENCACHE_COPY_H2D / D2H; asynchronous on s */
	int (*copy)(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
		    uint64_t len);
	/*
	 * Optional: n copies of one direction on s as one call (CUDA:
	 * cuMemcpyBatchAsync_v2, one driver call for all); they complete in
	 * any order among themselves, all in stream order after what s ran
	 * before. NULL: the cache calls copy n times.
	 */
	int (*copy_batch)(struct tc_dev *d, void *s, int dir, void *const *dst,
			  const void *const *src, const uint64_t *len, uint32_t n);
	/* simulated compute of ns nanoseconds on s (a spin kernel / a sleep) */
	int (*spin)(struct tc_dev *d, void *s, uint64_t ns);
	/* device events: opaque handles */
	int (*event_create)(struct tc_dev *d, int timing, void **e);
	void (*event_destroy)(struct tc_dev *d, void *e);
	int (*record)(struct tc_dev *d, void *e, void *s);
	int (*stream_wait)(struct tc_dev *d, void *s, void *e);
	int (*query)(struct tc_dev *d, void *e);	/* 1 done, 0 pending, -errno */
	int (*sync)(struct tc_dev *d, void *e);		/* host waits */
	/* ns between two completed timing events (b after a) */
	int (*elapsed)(struct tc_dev *d, void *a, void *b, uint64_t *ns);
	int (*stream_sync)(struct tc_dev *d, void *s);
	/* make s wait for a host event's instance target (host mode queues it;
	 * CUDA on the device where the event has a mapped word, else the
	 * host waits): 1 queued on s, 0 the caller waited (or it was reached) */
	int (*stream_wait_host)(struct tc_dev *d, void *s, struct tc_hev *h,
				uint64_t target);
	/* when s reaches this point, signal host event h's instance inst
	 * (host mode queues it; CUDA records an event on s that a thread of
	 * its own syncs) */
	int (*signal_host)(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst);
	/*
	 * Optional: n words of host memory a stream can wait on (CUDA: mapped
	 * pinned memory, cuStreamWaitValue64), zeroed; a host event given one
	 * (tc_hev.word) is waited for by its stream_wait_host on the device,
	 * not on the host. -ENOTSUP: none here.
	 */
	int (*hev_map)(struct tc_dev *d, uint32_t n, uint64_t **words);
	void (*hev_unmap)(struct tc_dev *d, uint64_t *words);
	/*
	 * Optional: brackets a hot API call (acquire, release) on the calling
	 * thread; the ops between need not check the thread's device context
	 * each (CUDA: one cuCtxGetCurrent per call instead of one per op).
	 */
	void (*enter)(struct tc_dev *d);
	void (*leave)(struct tc_dev *d);
};

struct tc_dev {
	const struct tc_dev_ops *ops;
	struct tencache *tc;
	void *base;			/* the "GPU" region */
	uint64_t bytes;
	struct tc_dev *hdev;		/* whose lock host events use: itself, or
					 * the issuer's backend (its streams wait) */
	/* host events: one lock and condition for all of them */
	pthread_mutex_t hlock;
	pthread_cond_t hcond;
	/* events made or destroyed on a staging worker's thread: must stay 0
	 * (tc_dev_on_worker) */
	uint64_t worker_lifecycle;
	/* tc_dev_count (dev_count.c): the ops it wraps, and its counters */
	const struct tc_dev_ops *counted;
	uint64_t *calls;
	uint64_t *call_ns;		/* NULL: not timed */
};

/* What tc_dev_count counts: the device calls of the cache's hot paths. */
enum tc_devcall {
	TC_DC_COPY, TC_DC_SPIN, TC_DC_RECORD, TC_DC_WAIT, TC_DC_WAIT_HOST, TC_DC_QUERY,
	TC_DC_SYNC, TC_DC_STREAM_SYNC, TC_DC_EVENT, TC_DC_ENTER, TC_DC_NR,
};

/*
 * Counts every call of d's ops into calls[TC_DC_*] (relaxed atomics: the
 * issuer and staging threads call too), until the device is closed; with ns
 * non-NULL also adds the wall ns spent inside each call to ns[TC_DC_*] (two
 * clock reads per call). For benchmarks (tools/decide.c), not the API. 0,
 * -EINVAL for NULL d or calls, or -EBUSY when counted already.
 */
int tc_dev_count(struct tc_dev *d, uint64_t *calls, uint64_t *ns);

/*
 * Set on the cache's staging workers (cache.c stage_main). They may query
 * and sync events but never make or destroy one: on CUDA that takes a
 * driver lock a thread blocked in the driver may hold (cache.c sev_get).
 * The backends count such calls into d->worker_lifecycle.
 */
extern __thread int tc_dev_on_worker;

static inline void tc_dev_lifecycle_check(struct tc_dev *d)
{
	if (tc_dev_on_worker)
		__atomic_add_fetch(&d->worker_lifecycle, 1, __ATOMIC_RELAXED);
}

extern const struct tc_dev_ops tc_dev_host_ops;
extern const struct tc_dev_ops tc_dev_cuda_ops;

/*
 * Wraps the open device *dp in an issuer (dev_issuer.c): on success *dp is
 * the wrapper, which closes the backend at its close; on failure *dp is
 * left as it was. The issuer's errors are sticky: every later call returns
 * the first one.
 */
int tc_dev_issuer_wrap(struct tc_dev **dp);

/* host events (dev_host.c) */
void tc_dev_hinit(struct tc_dev *d);
uint64_t tc_hev_arm(struct tc_dev *d, struct tc_hev *h);	/* new instance */
void tc_hev_signal(struct tc_dev *d, struct tc_hev *h, uint64_t inst);
uint64_t tc_hev_latest(struct tc_dev *d, struct tc_hev *h);
void tc_hev_wait(struct tc_dev *d, struct tc_hev *h, uint64_t inst);
int tc_hev_done(struct tc_dev *d, struct tc_hev *h);
int tc_hev_reached(struct tc_dev *d, struct tc_hev *h, uint64_t inst);	/* done up to inst */

uint64_t tc_now_ns(void);

#endif
