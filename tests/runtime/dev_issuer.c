/* dev_issuer.c - the issuer (runtime/exec/dev_issuer.c) over the host
 * backend: under churn, values copied through chains of copy-stream copies,
 * copy-stream waits and caller-stream waits and records must be the ones
 * written before; events handed to another thread (as the staging worker
 * gets them) are synced and destroyed there; a backend error made by the
 * issuer reaches the caller at its next call and sticks. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tencache.h"
#include "exec/dev.h"
#include "test.h"

#define SLOTS	16
#define LEN	(64 * 1024)
#define ROUNDS	6000

static uint32_t word(uint32_t v, uint32_t i)
{
	return v * 2654435761u ^ i;
}

static void fill(void *p, uint32_t v)
{
	for (uint32_t i = 0; i < LEN / 4; i++)
		((uint32_t *)p)[i] = word(v, i);
}

static int check(const void *p, uint32_t v)
{
	for (uint32_t i = 0; i < LEN / 4; i++)
		if (((const uint32_t *)p)[i] != word(v, i))
			return 0;
	return 1;
}

/* events handed to the other thread, with what their copy must have brought */
struct handoff {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct { void *e; const void *p; uint32_t v; } q[64];
	unsigned head, tail, done;
	struct tc_dev *d;
	int bad;
};

static void *receiver(void *arg)
{
	struct handoff *h = arg;

	for (;;) {
		void *e;
		const void *p;
		uint32_t v;

		pthread_mutex_lock(&h->lock);
		while (h->head == h->tail && !h->done)
			pthread_cond_wait(&h->cond, &h->lock);
		if (h->head == h->tail) {
			pthread_mutex_unlock(&h->lock);
			return NULL;
		}
		e = h->q[h->head % 64].e;
		p = h->q[h->head % 64].p;
		v = h->q[h->head % 64].v;
		pthread_mutex_unlock(&h->lock);
		if (h->d->ops->sync(h->d, e) || !check(p, v))
			h->bad++;
		h->d->ops->event_destroy(h->d, e);
		free((void *)p);
		pthread_mutex_lock(&h->lock);
		h->head++;
		pthread_cond_broadcast(&h->cond);
		pthread_mutex_unlock(&h->lock);
	}
}

static void handoff_push(struct handoff *h, void *e, const void *p, uint32_t v)
{
	pthread_mutex_lock(&h->lock);
	while (h->tail - h->head == 64)
		pthread_cond_wait(&h->cond, &h->lock);
	h->q[h->tail % 64].e = e;
	h->q[h->tail % 64].p = p;
	h->q[h->tail % 64].v = v;
	h->tail++;
	pthread_cond_broadcast(&h->cond);
	pthread_mutex_unlock(&h->lock);
}

/*
 * Each round: host src[k] (value v) -> "GPU" slot k on stream a, then slot k
 * -> host dst[k] on stream b after b waits for a's event. A slot is reused
 * only after its last round's events say so: the caller syncs, queries, or
 * (half the time) its own stream waits. Events are recorded on the caller's
 * stream too, and copy streams wait for those.
 */
static void churn(struct tencache *tc)
{
	const struct tc_dev_ops *o;
	struct tc_dev *d;
	void *a, *b, *ea[SLOTS], *eb[SLOTS], *ec;
	char *src, *dst;
	uint32_t ver[SLOTS] = { 0 };
	struct handoff h = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER };
	pthread_t th;
	unsigned seed = 1, stale = 0, waits = 0, queried = 0;

	T_EQ(tc_dev_host_ops.open(tc, SLOTS * LEN, &d), 0);
	T_EQ(tc_dev_issuer_wrap(&d), 0);
	if (t_failures)
		return;
	o = d->ops;
	src = malloc(SLOTS * LEN);
	dst = malloc(SLOTS * LEN);
	T_CHECK(src && dst, "no memory");
	T_EQ(o->stream_create(d, &a), 0);
	T_EQ(o->stream_create(d, &b), 0);
	T_EQ(o->event_create(d, 0, &ec), 0);
	for (int k = 0; k < SLOTS; k++) {
		T_EQ(o->event_create(d, 0, &ea[k]), 0);
		T_EQ(o->event_create(d, 0, &eb[k]), 0);
	}
	h.d = d;
	T_EQ(pthread_create(&th, NULL, receiver, &h), 0);
	for (uint32_t r = 1; r <= ROUNDS && !t_failures; r++) {
		int k = rand_r(&seed) % SLOTS, how = rand_r(&seed) % 4;
		char *g = (char *)d->base + (size_t)k * LEN;
		char *s = src + (size_t)k * LEN, *t = dst + (size_t)k * LEN;

		/* the slot's previous round: its value arrived, its buffers are free */
		if (ver[k]) {
			if (how == 0) {
				int q;

				while (!(q = o->query(d, eb[k])))
					;	/* the issuer's poll must see it */
				T_EQ(q, 1);
				queried++;
			} else {
				T_EQ(o->sync(d, eb[k]), 0);
			}
			T_EQ(o->query(d, eb[k]), 1);
			if (!check(t, ver[k]))
				stale++;
		}
		ver[k] = r;
		fill(s, r);
		T_EQ(o->copy(d, a, TENCACHE_COPY_H2D, g, s, LEN), 0);
		T_EQ(o->record(d, ea[k], a), 0);
		if (how == 1) {
			/* the caller's stream waits: the value is there on return */
			T_EQ(o->stream_wait(d, NULL, ea[k]), 0);
			if (!check(g, r))
				stale++;
			waits++;
		}
		if (how == 2) {
			/* a record on the caller's stream that b waits for */
			T_EQ(o->record(d, ec, NULL), 0);
			T_EQ(o->stream_wait(d, b, ec), 0);
		}
		T_EQ(o->stream_wait(d, b, ea[k]), 0);
		T_EQ(o->copy(d, b, TENCACHE_COPY_D2H, t, g, LEN), 0);
		T_EQ(o->record(d, eb[k], b), 0);
		if (how == 3 && r % 8 == 3) {
			/* one more copy, its fresh event synced and destroyed
			 * by another thread, as staging jobs' events are */
			void *e, *x = malloc(LEN);

			T_CHECK(x, "no memory");
			T_EQ(o->event_create(d, 0, &e), 0);
			T_EQ(o->copy(d, b, TENCACHE_COPY_D2H, x, g, LEN), 0);
			T_EQ(o->record(d, e, b), 0);
			T_EQ(o->record(d, eb[k], b), 0);	/* g is read until here */
			handoff_push(&h, e, x, r);
		}
	}
	pthread_mutex_lock(&h.lock);
	h.done = 1;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	pthread_join(th, NULL);
	T_EQ(o->stream_sync(d, a), 0);
	T_EQ(o->stream_sync(d, b), 0);
	for (int k = 0; k < SLOTS; k++)
		if (ver[k] && !check(dst + (size_t)k * LEN, ver[k]))
			stale++;
	T_EQ(stale, 0);
	T_EQ(h.bad, 0);
	T_CHECK(waits > 0 && queried > 0, "waits %u queried %u", waits, queried);
	printf("churn: %u rounds, %u caller waits, %u completions seen by query, %u handed off\n",
	       ROUNDS, waits, queried, h.tail);
	for (int k = 0; k < SLOTS; k++) {
		o->event_destroy(d, ea[k]);
		o->event_destroy(d, eb[k]);
	}
	o->event_destroy(d, ec);
	o->stream_destroy(d, a);
	o->stream_destroy(d, b);
	o->close(d);
	free(src);
	free(dst);
}

/* The host backend, but its nth copy fails. */
static struct tc_dev_ops failing;
static int copies, fail_at;

static int failing_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
			uint64_t len)
{
	if (__atomic_add_fetch(&copies, 1, __ATOMIC_RELAXED) == fail_at)
		return -EIO;
	return tc_dev_host_ops.copy(d, s, dir, dst, src, len);
}

static void sticky_error(struct tencache *tc)
{
	struct tc_dev *d;
	void *a, *e;
	char buf[4096];

	failing = tc_dev_host_ops;
	failing.copy = failing_copy;
	fail_at = 3;
	T_EQ(tc_dev_host_ops.open(tc, 1 << 20, &d), 0);
	if (t_failures)
		return;
	d->ops = &failing;
	T_EQ(tc_dev_issuer_wrap(&d), 0);
	if (t_failures)
		return;
	T_EQ(d->ops->stream_create(d, &a), 0);
	T_EQ(d->ops->event_create(d, 0, &e), 0);
	for (int i = 0; i < 3; i++)	/* queued: the third fails in the issuer */
		T_EQ(d->ops->copy(d, a, TENCACHE_COPY_H2D, d->base, buf, sizeof(buf)), 0);
	T_EQ(d->ops->record(d, e, a), 0);
	T_EQ(d->ops->stream_sync(d, a), -EIO);
	/* sticky: every later call says it */
	T_EQ(d->ops->copy(d, a, TENCACHE_COPY_H2D, d->base, buf, sizeof(buf)), -EIO);
	T_EQ(d->ops->record(d, e, a), -EIO);
	T_EQ(d->ops->query(d, e), -EIO);
	T_EQ(d->ops->sync(d, e), -EIO);
	d->ops->event_destroy(d, e);
	d->ops->stream_destroy(d, a);
	d->ops->close(d);
}

int main(void)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN };
	struct tencache *tc;

	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	churn(tc);
	sticky_error(tc);
	tencache_exit(tc);
	return t_exit();
}
