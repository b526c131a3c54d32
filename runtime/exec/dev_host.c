/*
 * dev_host.c - the CPU-only host mode of the executor's device: "GPU"
 * memory is a host arena, each stream is a worker thread that runs its tasks
 * in order (copies are real memcpy, compute is a sleep of the trace's
 * duration), and events are host events. Also the host events themselves,
 * which the CUDA mode uses for staging and host ops.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "exec/dev.h"

uint64_t tc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* ---- host events --------------------------------------------------------- */

void tc_dev_hinit(struct tc_dev *d)
{
	d->hdev = d;
	pthread_mutex_init(&d->hlock, NULL);
	pthread_cond_init(&d->hcond, NULL);
}

uint64_t tc_hev_arm(struct tc_dev *d, struct tc_hev *h)
{
	uint64_t inst;

	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	inst = ++h->rec;
	pthread_mutex_unlock(&d->hlock);
	return inst;
}

void tc_hev_signal(struct tc_dev *d, struct tc_hev *h, uint64_t inst)
{
	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	if (h->done < inst) {
		h->done = inst;
		if (h->word)	/* a stream may be polling it */
			__atomic_store_n(h->word, inst, __ATOMIC_RELEASE);
	}
	pthread_cond_broadcast(&d->hcond);
	pthread_mutex_unlock(&d->hlock);
}

uint64_t tc_hev_latest(struct tc_dev *d, struct tc_hev *h)
{
	uint64_t inst;

	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	inst = h->rec;
	pthread_mutex_unlock(&d->hlock);
	return inst;
}

void tc_hev_wait(struct tc_dev *d, struct tc_hev *h, uint64_t inst)
{
	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	while (h->done < inst)
		pthread_cond_wait(&d->hcond, &d->hlock);
	pthread_mutex_unlock(&d->hlock);
}

int tc_hev_reached(struct tc_dev *d, struct tc_hev *h, uint64_t inst)
{
	int done;

	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	done = h->done >= inst;
	pthread_mutex_unlock(&d->hlock);
	return done;
}

int tc_hev_done(struct tc_dev *d, struct tc_hev *h)
{
	int done;

	d = d->hdev;
	pthread_mutex_lock(&d->hlock);
	done = h->done >= h->rec;
	pthread_mutex_unlock(&d->hlock);
	return done;
}

/* ---- host streams ------------------------------------------------------- */

struct hevent {
	struct tc_hev h;
	uint64_t t_done;	/* when the latest instance completed */
};

enum { T_COPY, T_SPIN, T_SIGNAL, T_WAIT, T_EXIT };

struct task {
	int kind;
	struct tc_dev *d;
	void *dst;
	const void *src;
	uint64_t len;		/* bytes, ns, or instance */
	struct tc_hev *h;
	struct hevent *ev;
	struct task *next;
};

struct tc_hstream {
	struct tc_dev *d;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct task *head, *tail;
};

static void task_run(struct tc_dev *d, struct task *t)
{
	switch (t->kind) {
	case T_COPY:
		memcpy(t->dst, t->src, t->len);
		break;
	case T_SPIN: {
		struct timespec ts = { t->len / 1000000000ULL, t->len % 1000000000ULL };

		while (nanosleep(&ts, &ts))
			;
		break;
	}
	case T_SIGNAL:
		if (t->ev)
			t->ev->t_done = tc_now_ns();
		tc_hev_signal(d, t->h, t->len);
		break;
	case T_WAIT:
		tc_hev_wait(d, t->h, t->len);
		break;
	}
}

static void *hstream_main(void *arg)
{
	struct tc_hstream *s = arg;
	struct task *t;

	for (;;) {
		pthread_mutex_lock(&s->lock);
		while (!s->head)
			pthread_cond_wait(&s->cond, &s->lock);
		t = s->head;
		s->head = t->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->lock);
		if (t->kind == T_EXIT) {
			free(t);
			return NULL;
		}
		task_run(s->d, t);
		free(t);
	}
}

static int hstream_push(struct tc_hstream *s, struct task *t)
{
	struct task *n;

	if (!s) {
		task_run(t->d, t);
		return 0;
	}
	n = malloc(sizeof(*n));

	if (!n)
		return -ENOMEM;
	*n = *t;
	n->next = NULL;
	pthread_mutex_lock(&s->lock);
	if (s->tail)
		s->tail->next = n;
	else
		s->head = n;
	s->tail = n;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int host_open(struct tencache *tc, uint64_t bytes, struct tc_dev **dp)
{
	struct tc_dev *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->ops = &tc_dev_host_ops;
	d->tc = tc;
	d->bytes = bytes;
	d->base = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (d->base == MAP_FAILED) {
		free(d);
		return -ENOMEM;
	}
	tc_dev_hinit(d);
	*dp = d;
	return 0;
}

static void host_close(struct tc_dev *d)
{
	munmap(d->base, d->bytes ? d->bytes : 1);
	free(d);
}

static int host_stream_create(struct tc_dev *d, void **sp)
{
	struct tc_hstream *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->d = d;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->thread, NULL, hstream_main, s)) {
		free(s);
		return -EAGAIN;
	}
	*sp = s;
	return 0;
}

static void host_stream_destroy(struct tc_dev *d, void *sp)
{
	struct tc_hstream *s = sp;
	struct task t = { .kind = T_EXIT, .d = d };

	if (!s)
		return;
	while (hstream_push(s, &t))
		;	/* must not leak the thread; malloc of 48 bytes */
	pthread_join(s->thread, NULL);
	free(s);
}

static int host_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src,
		     uint64_t len)
{
	struct task t = { .kind = T_COPY, .d = d, .dst = dst, .src = src, .len = len };

	return hstream_push(s, &t);
}

/* One task per copy: the host stream runs them in order anyway. */
static int host_copy_batch(struct tc_dev *d, void *s, int dir, void *const *dst,
			   const void *const *src, const uint64_t *len, uint32_t n)
{
	int ret = 0;

	for (uint32_t i = 0; i < n && !ret; i++)
		ret = host_copy(d, s, dir, dst[i], src[i], len[i]);
	return ret;
}

static int host_spin(struct tc_dev *d, void *s, uint64_t ns)
{
	struct task t = { .kind = T_SPIN, .d = d, .len = ns };

	return ns ? hstream_push(s, &t) : 0;
}

__thread int tc_dev_on_worker;

static int host_event_create(struct tc_dev *d, int timing, void **e)
{
	tc_dev_lifecycle_check(d);
	*e = calloc(1, sizeof(struct hevent));
	return *e ? 0 : -ENOMEM;
}

static void host_event_destroy(struct tc_dev *d, void *e)
{
	tc_dev_lifecycle_check(d);
	free(e);
}

static int host_record(struct tc_dev *d, void *e, void *s)
{
	struct hevent *ev = e;
	struct task t = { .kind = T_SIGNAL, .d = d, .h = &ev->h, .ev = ev };

	t.len = tc_hev_arm(d, &ev->h);
	return hstream_push(s, &t);
}

static int host_stream_wait_host(struct tc_dev *d, void *s, struct tc_hev *h,
				 uint64_t target)
{
	struct task t = { .kind = T_WAIT, .d = d, .h = h, .len = target };

	return hstream_push(s, &t) ?: 1;
}

static int host_signal_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst)
{
	struct task t = { .kind = T_SIGNAL, .d = d, .h = h, .len = inst };

	return hstream_push(s, &t);
}

static int host_stream_wait(struct tc_dev *d, void *s, void *e)
{
	struct hevent *ev = e;
	int ret = host_stream_wait_host(d, s, &ev->h, tc_hev_latest(d, &ev->h));

	return ret < 0 ? ret : 0;	/* queued (1): done, for stream_wait */
}

static int host_query(struct tc_dev *d, void *e)
{
	return tc_hev_done(d, &((struct hevent *)e)->h);
}

static int host_sync(struct tc_dev *d, void *e)
{
	struct hevent *ev = e;

	tc_hev_wait(d, &ev->h, tc_hev_latest(d, &ev->h));
	return 0;
}

static int host_elapsed(struct tc_dev *d, void *a, void *b, uint64_t *ns)
{
	struct hevent *x = a, *y = b;

	*ns = y->t_done > x->t_done ? y->t_done - x->t_done : 0;
	return 0;
}

static int host_stream_sync(struct tc_dev *d, void *s)
{
	struct hevent ev = { 0 };
	int ret = host_record(d, &ev, s);

	if (!ret)
		host_sync(d, &ev);
	return ret;
}

const struct tc_dev_ops tc_dev_host_ops = {
	.name = "host",
	.open = host_open,
	.close = host_close,
	.stream_create = host_stream_create,
	.stream_destroy = host_stream_destroy,
	.copy = host_copy,
	.copy_batch = host_copy_batch,
	.spin = host_spin,
	.event_create = host_event_create,
	.event_destroy = host_event_destroy,
	.record = host_record,
	.stream_wait = host_stream_wait,
	.query = host_query,
	.sync = host_sync,
	.elapsed = host_elapsed,
	.stream_sync = host_stream_sync,
	.stream_wait_host = host_stream_wait_host,
	.signal_host = host_signal_host,
};
