/*
 * dev_issuer.c - the issuer: a device layer over either backend (CUDA or
 * host) that takes the driver calls of the device's own streams (copies,
 * event records and stream waits on the H2D / D2H / staging streams) off the
 * caller's thread. The caller queues them (a ring under a mutex, a few tens
 * of ns) and a thread per device makes them in order. The issuer also
 * watches the events it and the caller record (the oldest pending one per
 * stream, with the backend's query) and publishes what completed, so that
 * query costs the caller no driver call.
 *
 * Ordering: calls on a caller's stream (the compute stream: records, waits)
 * are made by the caller, ordered with its kernels; before one names an
 * event, the event's latest queued record must have been made (iss_reach),
 * so "a wait captures the instance recorded at the time of the call" holds
 * as in dev.h. A caller's own record of an event first has every queued
 * command that names it made. Commands run in order under one lock, by the
 * issuer or by a thread that needs one made and finds the issuer behind: it
 * makes them itself (at worst the cost without an issuer), never sleeps on
 * the issuer, and a command that blocks (CUDA's wait for a host event)
 * blocks the thread that runs it, as it blocked the caller before.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "exec/dev.h"

#define ISS_RING	4096	/* queued commands at most (a power of two) */
#define ISS_STREAMS	6	/* the issuer's streams (the cache makes 5) */
#define ISS_LISTS	8	/* watch lists: one per stream, the last shared */
/*
 * The issuer spins (a core) this long after its last command, so that a
 * caller in a step rarely pays a futex wake; then it sleeps, waking every
 * ISS_POLL_NS while events are pending. While spinning it polls events every
 * ISS_SPIN_POLL_NS (each poll is a driver call per pending stream).
 */
#define ISS_SPIN_NS	50000
#define ISS_SPIN_POLL_NS 2000
#define ISS_POLL_NS	20000
#define ISS_BATCH	8	/* commands the issuer makes per hold of the lock */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax()	__builtin_ia32_pause()
#elif defined(__aarch64__)
#define cpu_relax()	__asm__ __volatile__("yield" ::: "memory")
#else
#define cpu_relax()	__asm__ __volatile__("" ::: "memory")
#endif

enum { C_COPY, C_SPIN, C_RECORD, C_WAIT, C_WAIT_HOST, C_SIGNAL_HOST, C_WATCH, C_S_DESTROY, C_EXIT };

struct iss_stream {
	void *b;			/* the backend's stream */
};

struct iss_ev {
	void *b;			/* the backend's event */
	/* the recording threads' (the caller's; a staging job's event is
	 * read by the worker after the job's push) */
	uint64_t inst;			/* records asked for */
	uint64_t rec_seq;		/* the command of the latest queued record */
	uint64_t use_seq;		/* of the latest queued command naming it */
	uint64_t done;			/* atomic: the newest instance seen complete */
	/* the issuer's: its place in a watch list */
	struct iss_ev *prev, *next;
	int list;			/* -1: none */
	uint64_t winst;			/* the instance it waits to see complete */
	/* destroyed: freed once the commands queued before are made */
	struct iss_ev *dead_next;
	uint64_t dead_seq;
};

struct iss_cmd {
	int kind, dir;
	void *s;			/* backend stream; WATCH: the caller's */
	struct iss_ev *e;
	void *dst;
	const void *src;
	uint64_t len;			/* bytes, ns, or an instance */
	struct tc_hev *h;
	struct iss_stream *ws;
};

struct iss_list {
	void *key;			/* the stream */
	int used;
	struct iss_ev *head, *tail;
};

struct iss_dev {
	struct tc_dev d;
	struct tc_dev *b;		/* the backend */
	const struct tc_dev_ops *bo;
	pthread_t thread;
	int thread_on;
	int exit;			/* atomic: C_EXIT was made */
	/* the queue: producers under qlock; runners read it without */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	int sleeping;			/* under qlock: the issuer waits on qcond */
	uint64_t tail;			/* atomic: commands queued (the last one's seq) */
	struct iss_ev *dead;		/* under qlock: destroyed events */
	/* rlock: running commands, the watch lists */
	pthread_mutex_t rlock;
	uint64_t head;			/* atomic: commands made */
	int err;			/* atomic: the first error, sticky */
	struct iss_stream *streams[ISS_STREAMS];
	struct iss_list lists[ISS_LISTS];
	uint32_t nwatch;		/* atomic: events in them */
	struct iss_cmd ring[ISS_RING];
};

#define W(d) ((struct iss_dev *)(d))

static int iss_err(struct iss_dev *w)
{
	return __atomic_load_n(&w->err, __ATOMIC_ACQUIRE);
}

static void iss_fail(struct iss_dev *w, int err)
{
	int zero = 0;

	__atomic_compare_exchange_n(&w->err, &zero, err, 0, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
}

static int ev_done(struct iss_ev *e)
{
	return __atomic_load_n(&e->done, __ATOMIC_ACQUIRE) >= e->inst;
}

static void ev_publish(struct iss_ev *e, uint64_t inst)
{
	uint64_t cur = __atomic_load_n(&e->done, __ATOMIC_RELAXED);

	while (cur < inst && !__atomic_compare_exchange_n(&e->done, &cur, inst, 1,
							  __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static void iss_reach(struct iss_dev *w, uint64_t seq);

/* Queues a command (any thread); returns its seq. */
static uint64_t iss_push(struct iss_dev *w, const struct iss_cmd *c)
{
	uint64_t seq;

	pthread_mutex_lock(&w->qlock);
	while (w->tail - __atomic_load_n(&w->head, __ATOMIC_ACQUIRE) >= ISS_RING) {
		uint64_t need = w->tail - ISS_RING + 1;

		pthread_mutex_unlock(&w->qlock);
		iss_reach(w, need);	/* full: make the oldest */
		pthread_mutex_lock(&w->qlock);
	}
	w->ring[w->tail & (ISS_RING - 1)] = *c;
	seq = w->tail + 1;
	__atomic_store_n(&w->tail, seq, __ATOMIC_RELEASE);
	if (w->sleeping)
		pthread_cond_signal(&w->qcond);
	pthread_mutex_unlock(&w->qlock);
	return seq;
}

static struct iss_stream *iss_stream_of(struct iss_dev *w, void *s)
{
	for (int i = 0; i < ISS_STREAMS; i++)
		if (s && w->streams[i] == s)
			return s;
	return NULL;
}

/* ---- the issuer thread ---------------------------------------------------- */

static void unwatch(struct iss_dev *w, struct iss_ev *e)
{
	struct iss_list *l;

	if (e->list < 0)
		return;
	l = &w->lists[e->list];
	if (e->prev)
		e->prev->next = e->next;
	else
		l->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		l->tail = e->prev;
	e->prev = e->next = NULL;
	e->list = -1;
	__atomic_store_n(&w->nwatch, w->nwatch - 1, __ATOMIC_RELAXED);
}

/* Work on one stream completes in order: a list per stream, polled at its head. */
static void watch(struct iss_dev *w, struct iss_ev *e, void *key, uint64_t inst)
{
	struct iss_list *l;
	int i;

	unwatch(w, e);
	for (i = 0; i < ISS_LISTS - 1; i++)
		if (!w->lists[i].used || w->lists[i].key == key)
			break;
	l = &w->lists[i];
	l->used = 1;
	l->key = key;
	e->winst = inst;
	e->list = i;
	e->prev = l->tail;
	e->next = NULL;
	if (l->tail)
		l->tail->next = e;
	else
		l->head = e;
	l->tail = e;
	__atomic_store_n(&w->nwatch, w->nwatch + 1, __ATOMIC_RELAXED);
}

/*
 * Publishes what completed; returns how many. One query per hold of rlock:
 * a thread that needs a command made waits for one driver call at most.
 */
static int iss_poll(struct iss_dev *w)
{
	int n = 0, r;

	for (int i = 0; i < ISS_LISTS; i++) {
		do {
			struct iss_ev *e;

			pthread_mutex_lock(&w->rlock);
			e = w->lists[i].head;
			/*
			 * A caller may record e again meanwhile (then a watch
			 * of the new instance is queued): complete then means
			 * the old or the new one, and winst is the old one.
			 */
			r = e ? w->bo->query(w->b, e->b) : 0;
			if (r) {
				if (r < 0)
					iss_fail(w, r);
				else
					ev_publish(e, e->winst);
				unwatch(w, e);
				n++;
			}
			pthread_mutex_unlock(&w->rlock);
		} while (r);
	}
	return n;
}

static void iss_run(struct iss_dev *w, struct iss_cmd *c)
{
	int r = 0;

	switch (c->kind) {
	case C_COPY:
		r = w->bo->copy(w->b, c->s, c->dir, c->dst, c->src, c->len);
		break;
	case C_SPIN:
		r = w->bo->spin(w->b, c->s, c->len);
		break;
	case C_RECORD:
		r = w->bo->record(w->b, c->e->b, c->s);
		if (!r)
			watch(w, c->e, c->s, c->len);
		break;
	case C_WAIT:
		r = w->bo->stream_wait(w->b, c->s, c->e->b);
		break;
	case C_WAIT_HOST:	/* queued or waited for here: both done */
		r = w->bo->stream_wait_host(w->b, c->s, c->h, c->len);
		r = r > 0 ? 0 : r;
		break;
	case C_SIGNAL_HOST:
		r = w->bo->signal_host(w->b, c->s, c->h, c->len);
		break;
	case C_WATCH:
		watch(w, c->e, c->s, c->len);
		break;
	case C_S_DESTROY:
		w->bo->stream_destroy(w->b, c->ws->b);
		free(c->ws);
		break;
	}
	if (r)
		iss_fail(w, r);
}

/* Frees the destroyed events that no queued command names; under rlock. */
static void iss_reap(struct iss_dev *w)
{
	struct iss_ev *keep = NULL, *e, *n;

	pthread_mutex_lock(&w->qlock);
	e = w->dead;
	w->dead = NULL;
	pthread_mutex_unlock(&w->qlock);
	for (; e; e = n) {
		n = e->dead_next;
		if (e->dead_seq > w->head) {
			e->dead_next = keep;
			keep = e;
			continue;
		}
		unwatch(w, e);
		w->bo->event_destroy(w->b, e->b);
		free(e);
	}
	if (!keep)
		return;
	pthread_mutex_lock(&w->qlock);
	for (e = keep; e; e = n) {
		n = e->dead_next;
		e->dead_next = w->dead;
		w->dead = e;
	}
	pthread_mutex_unlock(&w->qlock);
}

/* Makes the next queued command; under rlock, with one queued. */
static void iss_step(struct iss_dev *w)
{
	struct iss_cmd *c = &w->ring[w->head & (ISS_RING - 1)];

	if (c->kind == C_EXIT)
		__atomic_store_n(&w->exit, 1, __ATOMIC_RELAXED);
	else
		iss_run(w, c);
	__atomic_store_n(&w->head, w->head + 1, __ATOMIC_RELEASE);
}

/* Returns once command seq (0: none) and those before it are made. */
static void iss_reach(struct iss_dev *w, uint64_t seq)
{
	if (__atomic_load_n(&w->head, __ATOMIC_ACQUIRE) >= seq)
		return;
	pthread_mutex_lock(&w->rlock);
	while (w->head < seq)
		iss_step(w);
	pthread_mutex_unlock(&w->rlock);
}

static void *iss_main(void *arg)
{
	struct iss_dev *w = arg;
	uint64_t idle0 = tc_now_ns(), polled = 0;

	/* its sleeps between polls are short: the default 50 us slack is not */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	/* the issuer makes every call on this device: its context once */
	if (w->bo->enter)
		w->bo->enter(w->b);
	for (;;) {
		uint64_t now;
		int worked = 0, spinning;

		if (__atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) >
		    __atomic_load_n(&w->head, __ATOMIC_ACQUIRE)) {
			pthread_mutex_lock(&w->rlock);
			for (int n = 0; n < ISS_BATCH &&
			     w->head < __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE); n++)
				iss_step(w);
			pthread_mutex_unlock(&w->rlock);
			worked = 1;
		}
		if (__atomic_load_n(&w->dead, __ATOMIC_RELAXED)) {
			pthread_mutex_lock(&w->rlock);
			iss_reap(w);
			pthread_mutex_unlock(&w->rlock);
		}
		if (__atomic_load_n(&w->exit, __ATOMIC_RELAXED))
			break;
		now = tc_now_ns();
		if (worked)
			idle0 = now;
		spinning = now - idle0 < ISS_SPIN_NS;
		if (__atomic_load_n(&w->nwatch, __ATOMIC_RELAXED) &&
		    now - polled >= (spinning ? ISS_SPIN_POLL_NS : ISS_POLL_NS)) {
			if (iss_poll(w)) {
				idle0 = now;
				spinning = 1;
			}
			polled = now;
		}
		if (spinning) {
			for (int i = 0; i < 64; i++)
				cpu_relax();
			continue;
		}
		pthread_mutex_lock(&w->qlock);
		w->sleeping = 1;
		if (__atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&w->head, __ATOMIC_ACQUIRE) && !w->dead) {
			if (__atomic_load_n(&w->nwatch, __ATOMIC_RELAXED)) {
				struct timespec ts;

				clock_gettime(CLOCK_REALTIME, &ts);
				ts.tv_nsec += ISS_POLL_NS;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				pthread_cond_timedwait(&w->qcond, &w->qlock, &ts);
			} else {
				pthread_cond_wait(&w->qcond, &w->qlock);
			}
		}
		w->sleeping = 0;
		pthread_mutex_unlock(&w->qlock);
	}
	if (w->bo->leave)
		w->bo->leave(w->b);
	return NULL;
}

/* ---- the device ops, called by the cache ------------------------------ */

static void iss_close(struct tc_dev *d)
{
	struct iss_dev *w = W(d);
	struct iss_cmd c = { .kind = C_EXIT };

	if (w->thread_on) {
		iss_push(w, &c);	/* after every queued command */
		pthread_join(w->thread, NULL);
	}
	iss_reap(w);
	w->bo->close(w->b);
	pthread_mutex_destroy(&w->qlock);
	pthread_cond_destroy(&w->qcond);
	pthread_mutex_destroy(&w->rlock);
	free(w);
}

static int iss_stream_create(struct tc_dev *d, void **s)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws;
	int i, ret;

	for (i = 0; i < ISS_STREAMS && w->streams[i]; i++)
		;
	if (i == ISS_STREAMS)
		return -ENOSPC;
	ws = calloc(1, sizeof(*ws));
	if (!ws)
		return -ENOMEM;
	ret = w->bo->stream_create(w->b, &ws->b);
	if (ret) {
		free(ws);
		return ret;
	}
	w->streams[i] = ws;
	*s = ws;
	return 0;
}

static void iss_stream_destroy(struct tc_dev *d, void *s)
{
	struct iss_dev *w = W(d);
	struct iss_cmd c = { .kind = C_S_DESTROY, .ws = s };

	if (!iss_stream_of(w, s))
		return;
	for (int i = 0; i < ISS_STREAMS; i++)
		if (w->streams[i] == s)
			w->streams[i] = NULL;
	iss_push(w, &c);	/* after the commands queued on it */
}

static int iss_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
		    uint64_t len)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_cmd c = { .kind = C_COPY, .dir = dir, .dst = dst, .src = src, .len = len };
	int ret = iss_err(w);

	if (ret)
		return ret;
	if (!ws)
		return w->bo->copy(w->b, s, dir, dst, src, len);
	c.s = ws->b;
	iss_push(w, &c);
	return 0;
}

static int iss_spin(struct tc_dev *d, void *s, uint64_t ns)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_cmd c = { .kind = C_SPIN, .len = ns };
	int ret = iss_err(w);

	if (ret)
		return ret;
	if (!ws)
		return w->bo->spin(w->b, s, ns);
	c.s = ws->b;
	iss_push(w, &c);
	return 0;
}

static int iss_event_create(struct tc_dev *d, int timing, void **ep)
{
	struct iss_dev *w = W(d);
	struct iss_ev *e = calloc(1, sizeof(*e));
	int ret;

	if (!e)
		return -ENOMEM;
	e->list = -1;
	ret = w->bo->event_create(w->b, timing, &e->b);
	if (ret) {
		free(e);
		return ret;
	}
	*ep = e;
	return 0;
}

/*
 * Any thread (the staging worker destroys its jobs' events): the issuer frees
 * it once the commands queued before are made. Never waits for the issuer,
 * which may be blocked (CUDA: a stream's wait for a host event that the
 * destroying thread is about to signal) with the ring full.
 */
static void iss_event_destroy(struct tc_dev *d, void *ep)
{
	struct iss_dev *w = W(d);
	struct iss_ev *e = ep;

	if (!e)
		return;
	pthread_mutex_lock(&w->qlock);
	e->dead_seq = w->tail;
	e->dead_next = w->dead;
	__atomic_store_n(&w->dead, e, __ATOMIC_RELAXED);
	if (w->sleeping)
		pthread_cond_signal(&w->qcond);
	pthread_mutex_unlock(&w->qlock);
}

static int iss_record(struct tc_dev *d, void *ep, void *s)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_ev *e = ep;
	struct iss_cmd c = { .kind = C_RECORD, .e = e };
	int ret = iss_err(w);

	if (ret)
		return ret;
	if (ws) {
		c.s = ws->b;
		c.len = ++e->inst;
		e->rec_seq = e->use_seq = iss_push(w, &c);
		return 0;
	}
	/* the caller's stream: no queued command may see the new instance */
	iss_reach(w, e->use_seq);
	ret = w->bo->record(w->b, e->b, s);
	if (ret)
		return ret;
	c.kind = C_WATCH;
	c.s = s;
	c.len = ++e->inst;
	iss_push(w, &c);
	return 0;
}

static int iss_stream_wait(struct tc_dev *d, void *s, void *ep)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_ev *e = ep;
	struct iss_cmd c = { .kind = C_WAIT, .e = e };
	int ret = iss_err(w);

	if (ret || ev_done(e))
		return ret;
	if (ws) {
		c.s = ws->b;
		e->use_seq = iss_push(w, &c);
		return 0;
	}
	iss_reach(w, e->rec_seq);
	return w->bo->stream_wait(w->b, s, e->b);
}

static int iss_stream_wait_host(struct tc_dev *d, void *s, struct tc_hev *h,
				uint64_t target)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_cmd c = { .kind = C_WAIT_HOST, .h = h, .len = target };
	int ret = iss_err(w);

	if (ret)
		return ret;
	if (!ws)
		return w->bo->stream_wait_host(w->b, s, h, target);
	c.s = ws->b;
	iss_push(w, &c);
	return 1;	/* on the issuer's thread: the caller goes on */
}

static int iss_signal_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	struct iss_cmd c = { .kind = C_SIGNAL_HOST, .h = h, .len = inst };
	int ret = iss_err(w);

	if (ret)
		return ret;
	if (!ws)
		return w->bo->signal_host(w->b, s, h, inst);
	c.s = ws->b;
	iss_push(w, &c);
	return 0;
}

/* What the issuer has seen: no driver call; 0 until it has seen it complete. */
static int iss_query(struct tc_dev *d, void *ep)
{
	int ret = iss_err(W(d));

	return ret ? ret : ev_done(ep);
}

static int iss_sync(struct tc_dev *d, void *ep)
{
	struct iss_dev *w = W(d);
	struct iss_ev *e = ep;
	uint64_t inst = e->inst;
	int ret = iss_err(w);

	if (ret || ev_done(e))
		return ret;
	iss_reach(w, e->rec_seq);
	ret = w->bo->sync(w->b, e->b);
	if (ret)
		return ret;
	ev_publish(e, inst);
	return iss_err(w);
}

static int iss_elapsed(struct tc_dev *d, void *ap, void *bp, uint64_t *ns)
{
	struct iss_dev *w = W(d);
	struct iss_ev *a = ap, *b = bp;

	iss_reach(w, a->rec_seq > b->rec_seq ? a->rec_seq : b->rec_seq);
	return w->bo->elapsed(w->b, a->b, b->b, ns);
}

static int iss_stream_sync(struct tc_dev *d, void *s)
{
	struct iss_dev *w = W(d);
	struct iss_stream *ws = iss_stream_of(w, s);
	int ret;

	if (!ws)
		return w->bo->stream_sync(w->b, s);
	iss_reach(w, __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE));
	ret = iss_err(w);
	return ret ? ret : w->bo->stream_sync(w->b, ws->b);
}

static void iss_enter(struct tc_dev *d)
{
	if (W(d)->bo->enter)
		W(d)->bo->enter(W(d)->b);
}

static int iss_hev_map(struct tc_dev *d, uint32_t n, uint64_t **words)
{
	struct iss_dev *w = W(d);

	return w->bo->hev_map ? w->bo->hev_map(w->b, n, words) : -ENOTSUP;
}

static void iss_hev_unmap(struct tc_dev *d, uint64_t *words)
{
	struct iss_dev *w = W(d);

	if (w->bo->hev_unmap)
		w->bo->hev_unmap(w->b, words);
}

static void iss_leave(struct tc_dev *d)
{
	if (W(d)->bo->leave)
		W(d)->bo->leave(W(d)->b);
}

static const struct tc_dev_ops tc_dev_issuer_ops = {
	.name = "issuer",
	.close = iss_close,
	.stream_create = iss_stream_create,
	.stream_destroy = iss_stream_destroy,
	.copy = iss_copy,
	.spin = iss_spin,
	.event_create = iss_event_create,
	.event_destroy = iss_event_destroy,
	.record = iss_record,
	.stream_wait = iss_stream_wait,
	.query = iss_query,
	.sync = iss_sync,
	.elapsed = iss_elapsed,
	.stream_sync = iss_stream_sync,
	.stream_wait_host = iss_stream_wait_host,
	.signal_host = iss_signal_host,
	.hev_map = iss_hev_map,
	.hev_unmap = iss_hev_unmap,
	.enter = iss_enter,
	.leave = iss_leave,
};

int tc_dev_issuer_wrap(struct tc_dev **dp)
{
	struct tc_dev *b = *dp;
	struct iss_dev *w = calloc(1, sizeof(*w));
	pthread_mutexattr_t ma;

	if (!w)
		return -ENOMEM;
	w->d.ops = &tc_dev_issuer_ops;
	w->d.tc = b->tc;
	w->d.base = b->base;
	w->d.bytes = b->bytes;
	w->d.hdev = b->hdev;	/* the backend's streams wait for host events */
	w->b = b;
	w->bo = b->ops;
	pthread_mutex_init(&w->qlock, NULL);
	pthread_cond_init(&w->qcond, NULL);
	/* adaptive: a runner holds it for one driver call or a few */
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(&w->rlock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (pthread_create(&w->thread, NULL, iss_main, w)) {
		free(w);
		return -EAGAIN;
	}
	w->thread_on = 1;
	*dp = &w->d;
	return 0;
}
