/*
 * dev_count.c - a device backend that forwards to another and counts each
 * call (tc_dev_count): how many driver calls a cache decision makes, and
 * optionally the wall time spent inside them, for the decide benchmark. Not
 * on any default path.
 */
#include <errno.h>
#include <time.h>

#include "exec/dev.h"

static uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* counts the call; when timed, the statement's wall time goes to call_ns[k] */
#define COUNTED(d, k, stmt)						\
	do {								\
		uint64_t t0_ = (d)->call_ns ? mono_ns() : 0;		\
									\
		__atomic_add_fetch(&(d)->calls[k], 1, __ATOMIC_RELAXED); \
		stmt;							\
		if (t0_)						\
			__atomic_add_fetch(&(d)->call_ns[k], mono_ns() - t0_, \
					   __ATOMIC_RELAXED);		\
	} while (0)

static int c_copy(struct tc_dev *d, void *s, int dir, void *dst, const void *src, uint64_t len)
{
	int ret;

	COUNTED(d, TC_DC_COPY, ret = d->counted->copy(d, s, dir, dst, src, len));
	return ret;
}

/* one call for the caller, whether the wrapped ops batch or loop */
static int c_copy_batch(struct tc_dev *d, void *s, int dir, void *const *dst,
			const void *const *src, const uint64_t *len, uint32_t n)
{
	int ret = 0;

	COUNTED(d, TC_DC_COPY,
		if (d->counted->copy_batch)
			ret = d->counted->copy_batch(d, s, dir, dst, src, len, n);
		else
			for (uint32_t i = 0; i < n && !ret; i++)
				ret = d->counted->copy(d, s, dir, dst[i], src[i], len[i]));
	return ret;
}

static int c_spin(struct tc_dev *d, void *s, uint64_t ns)
{
	int ret;

	COUNTED(d, TC_DC_SPIN, ret = d->counted->spin(d, s, ns));
	return ret;
}

static int c_event_create(struct tc_dev *d, int timing, void **e)
{
	int ret;

	COUNTED(d, TC_DC_EVENT, ret = d->counted->event_create(d, timing, e));
	return ret;
}

/* set-up calls, not counted */
static int c_hev_map(struct tc_dev *d, uint32_t n, uint64_t **words)
{
	return d->counted->hev_map ? d->counted->hev_map(d, n, words) : -ENOTSUP;
}

static void c_hev_unmap(struct tc_dev *d, uint64_t *words)
{
	if (d->counted->hev_unmap)
		d->counted->hev_unmap(d, words);
}

static void c_event_destroy(struct tc_dev *d, void *e)
{
	COUNTED(d, TC_DC_EVENT, d->counted->event_destroy(d, e));
}

static int c_record(struct tc_dev *d, void *e, void *s)
{
	int ret;

	COUNTED(d, TC_DC_RECORD, ret = d->counted->record(d, e, s));
	return ret;
}

static int c_stream_wait(struct tc_dev *d, void *s, void *e)
{
	int ret;

	COUNTED(d, TC_DC_WAIT, ret = d->counted->stream_wait(d, s, e));
	return ret;
}

static int c_query(struct tc_dev *d, void *e)
{
	int ret;

	COUNTED(d, TC_DC_QUERY, ret = d->counted->query(d, e));
	return ret;
}

static int c_sync(struct tc_dev *d, void *e)
{
	int ret;

	COUNTED(d, TC_DC_SYNC, ret = d->counted->sync(d, e));
	return ret;
}

static int c_elapsed(struct tc_dev *d, void *a, void *b, uint64_t *ns)
{
	int ret;

	COUNTED(d, TC_DC_EVENT, ret = d->counted->elapsed(d, a, b, ns));
	return ret;
}

static int c_stream_sync(struct tc_dev *d, void *s)
{
	int ret;

	COUNTED(d, TC_DC_STREAM_SYNC, ret = d->counted->stream_sync(d, s));
	return ret;
}

static int c_stream_wait_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t target)
{
	int ret;

	COUNTED(d, TC_DC_WAIT_HOST, ret = d->counted->stream_wait_host(d, s, h, target));
	return ret;
}

/* counted as a record: a place on the stream */
static int c_signal_host(struct tc_dev *d, void *s, struct tc_hev *h, uint64_t inst)
{
	int ret;

	COUNTED(d, TC_DC_RECORD, ret = d->counted->signal_host(d, s, h, inst));
	return ret;
}

static void c_enter(struct tc_dev *d)
{
	COUNTED(d, TC_DC_ENTER, d->counted->enter(d));
}

static void c_leave(struct tc_dev *d)
{
	d->counted->leave(d);
}

static int c_stream_create(struct tc_dev *d, void **s)
{
	return d->counted->stream_create(d, s);
}

static void c_stream_destroy(struct tc_dev *d, void *s)
{
	d->counted->stream_destroy(d, s);
}

static void c_close(struct tc_dev *d)
{
	const struct tc_dev_ops *o = d->counted;

	d->ops = o;
	d->counted = NULL;
	d->calls = NULL;
	d->call_ns = NULL;
	o->close(d);
}

#define COUNT_OPS							\
	.name = "counted",						\
	.close = c_close,						\
	.stream_create = c_stream_create,				\
	.stream_destroy = c_stream_destroy,				\
	.copy = c_copy,							\
	.copy_batch = c_copy_batch,					\
	.spin = c_spin,							\
	.event_create = c_event_create,					\
	.event_destroy = c_event_destroy,				\
	.record = c_record,						\
	.stream_wait = c_stream_wait,					\
	.query = c_query,						\
	.sync = c_sync,							\
	.elapsed = c_elapsed,						\
	.stream_sync = c_stream_sync,					\
	.stream_wait_host = c_stream_wait_host,				\
	.signal_host = c_signal_host,					\
	.hev_map = c_hev_map,						\
	.hev_unmap = c_hev_unmap

/* enter and leave are optional: absent where the wrapped ops lack them */
static const struct tc_dev_ops count_ops = { COUNT_OPS, .enter = c_enter, .leave = c_leave };
static const struct tc_dev_ops count_ops_plain = { COUNT_OPS };

int tc_dev_count(struct tc_dev *d, uint64_t *calls, uint64_t *ns)
{
	if (!d || !calls)
		return -EINVAL;
	if (d->counted)
		return -EBUSY;
	d->calls = calls;
	d->call_ns = ns;
	d->counted = d->ops;
	d->ops = d->ops->enter ? &count_ops : &count_ops_plain;
	return 0;
}
