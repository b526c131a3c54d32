/*
 * stage.c - the staging engine, common to both backends: requests are split
 * into io_size chunks that never cross a pool segment, at most queue_depth
 * chunks are in flight, and each request completes once, with the byte count
 * or the first error. Short chunks are -EIO unless TENCACHE_STAGE_SHORT_OK
 * (reads at EOF).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uapi/tencache.h>

#include "internal.h"

struct tc_req {
	uint64_t user_data;
	unsigned flags;
	int op;
	int fd;
	char *buf;		/* next byte to issue */
	uint64_t left;		/* bytes not yet issued */
	uint64_t file_off;	/* of the next byte to issue */
	uint64_t done;		/* bytes transferred */
	unsigned inflight;	/* chunks issued, not complete */
	int64_t err;
	struct tc_req *next;
};

TENCACHE_API const char *tencache_stage_backend_name(unsigned backend)
{
	switch (backend) {
	case TENCACHE_STAGE_AUTO: return "auto";
	case TENCACHE_STAGE_MODULE: return "module";
	case TENCACHE_STAGE_URING: return "io_uring";
	}
	return "unknown";
}

TENCACHE_API int tencache_stage_create(struct tencache *tc, struct tencache_pool *pool,
				       struct tencache_stage **sp)
{
	struct tencache_stage *s;
	unsigned i, b;
	int ret;

	if (!tc || !pool || !sp)
		return -EINVAL;
	b = tc->p.stage_backend;
	if (!b)	/* io_uring cannot register module memory before 6.5: use the module */
		b = pool->backend == TENCACHE_POOL_MODULE ? TENCACHE_STAGE_MODULE
							  : TENCACHE_STAGE_URING;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->tc = tc;
	s->pool = pool;
	s->backend = b;
	s->ops = b == TENCACHE_STAGE_MODULE ? &tc_stage_module_ops : &tc_stage_uring_ops;
	s->qd = tc->p.queue_depth;
	s->io_size = tc->p.io_size;
	s->chunks = calloc(s->qd, sizeof(*s->chunks));
	s->reqs = calloc(s->qd, sizeof(*s->reqs));
	if (!s->chunks || !s->reqs) {
		ret = -ENOMEM;
		goto err_free;
	}
	for (i = 0; i < s->qd; i++) {
		s->chunks[i].next = s->free_chunks;
		s->free_chunks = &s->chunks[i];
		s->reqs[i].next = s->free_reqs;
		s->free_reqs = &s->reqs[i];
	}
	ret = s->ops->init(s);
	if (ret)
		goto err_free;
	tc_info(tc, "stage: backend %s, queue depth %u, %llu KiB requests", s->ops->name, s->qd,
		(unsigned long long)s->io_size >> 10);
	*sp = s;
	return 0;

err_free:
	free(s->chunks);
	free(s->reqs);
	free(s);
	return ret;
}

TENCACHE_API void tencache_stage_destroy(struct tencache_stage *s)
{
	if (!s)
		return;
	/* Drain: the kernel must not write into the pool after we return. */
	s->ops->submit(s);
	while (s->chunks_inflight && s->ops->reap(s, 1, 0) > 0)
		;
	s->ops->exit(s);
	free(s->chunks);
	free(s->reqs);
	free(s);
}

TENCACHE_API unsigned tencache_stage_backend(struct tencache_stage *s)
{
	return s ? s->backend : 0;
}

TENCACHE_API unsigned tencache_stage_inflight(struct tencache_stage *s)
{
	return s ? s->nr_reqs : 0;
}

static int stage_queue(struct tencache_stage *s, int op, int fd, const void *buf, uint64_t len,
		       uint64_t file_off, uint64_t user_data, unsigned flags)
{
	struct tc_req *r;
	uint64_t off;

	if (!s || fd < 0 || !buf || !len || (flags & ~TENCACHE_STAGE_SHORT_OK) ||
	    file_off + len < file_off)
		return -EINVAL;
	/* The whole buffer must be pool memory. */
	if (!tc_pool_find(s->pool, buf, &off) ||
	    !tc_pool_find(s->pool, (const char *)buf + len - 1, &off))
		return -EFAULT;
	r = s->free_reqs;
	if (!r)
		return -EAGAIN;
	s->free_reqs = r->next;
	memset(r, 0, sizeof(*r));
	r->user_data = user_data;
	r->flags = flags;
	r->op = op;
	r->fd = fd;
	r->buf = (char *)buf;
	r->left = len;
	r->file_off = file_off;
	if (s->pend_tail)
		s->pend_tail->next = r;
	else
		s->pend_head = r;
	s->pend_tail = r;
	s->nr_reqs++;
	return 0;
}

TENCACHE_API int tencache_stage_read(struct tencache_stage *s, int fd, void *buf, uint64_t len,
				     uint64_t file_off, uint64_t user_data, unsigned flags)
{
	return stage_queue(s, TENCACHE_OP_READ, fd, buf, len, file_off, user_data, flags);
}

TENCACHE_API int tencache_stage_write(struct tencache_stage *s, int fd, const void *buf,
				      uint64_t len, uint64_t file_off, uint64_t user_data,
				      unsigned flags)
{
	if (flags & TENCACHE_STAGE_SHORT_OK)	/* a short write is always an error */
		return -EINVAL;
	return stage_queue(s, TENCACHE_OP_WRITE, fd, buf, len, file_off, user_data, flags);
}

static void req_finish(struct tencache_stage *s, struct tc_req *r)
{
	r->next = NULL;
	if (s->done_tail)
		s->done_tail->next = r;
	else
		s->done_head = r;
	s->done_tail = r;
}

/* Issue chunks of pending requests while there is room. */
static void stage_fill(struct tencache_stage *s)
{
	while (s->pend_head && s->free_chunks) {
		struct tc_req *r = s->pend_head;
		struct tc_chunk *c = s->free_chunks;
		uint64_t segoff, n;

		s->free_chunks = c->next;
		c->req = r;
		c->op = r->op;
		c->fd = r->fd;
		c->buf = r->buf;
		c->file_off = r->file_off;
		c->seg = tc_pool_find(s->pool, r->buf, &segoff);
		n = r->left < s->io_size ? r->left : s->io_size;
		if (n > c->seg->len - segoff)
			n = c->seg->len - segoff;
		c->len = n;
		r->buf += n;
		r->file_off += n;
		r->left -= n;
		r->inflight++;
		s->chunks_inflight++;
		if (!r->left) {
			s->pend_head = r->next;
			if (!s->pend_head)
				s->pend_tail = NULL;
		}
		s->ops->prep(s, c);
	}
}

void tc_stage_complete(struct tencache_stage *s, struct tc_chunk *c, int64_t res)
{
	struct tc_req *r = c->req;

	if (res < 0) {
		if (!r->err)
			r->err = res;
	} else {
		r->done += res;
		if ((uint64_t)res < c->len && !r->err &&
		    !(r->op == TENCACHE_OP_READ && (r->flags & TENCACHE_STAGE_SHORT_OK))) {
			tc_dbg(s->tc, "stage: short %s: %lld of %llu bytes at %llu",
			       r->op == TENCACHE_OP_READ ? "read" : "write", (long long)res,
			       (unsigned long long)c->len, (unsigned long long)c->file_off);
			r->err = -EIO;
		}
	}
	c->next = s->free_chunks;
	s->free_chunks = c;
	s->chunks_inflight--;
	r->inflight--;
	/* After an error, issue nothing more of this request. */
	if (r->err && r->left) {
		struct tc_req **pp = &s->pend_head, *prev = NULL;

		while (*pp && *pp != r) {
			prev = *pp;
			pp = &(*pp)->next;
		}
		if (*pp) {
			*pp = r->next;
			if (s->pend_tail == r)
				s->pend_tail = prev;
		}
		r->left = 0;
	}
	if (!r->inflight && !r->left)
		req_finish(s, r);
}

TENCACHE_API int tencache_stage_submit(struct tencache_stage *s)
{
	if (!s)
		return -EINVAL;
	stage_fill(s);
	return s->ops->submit(s);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

TENCACHE_API int tencache_stage_wait(struct tencache_stage *s, unsigned min_nr,
				     struct tencache_stage_cqe *cqes, unsigned max_nr,
				     uint64_t timeout_ns)
{
	uint64_t deadline = timeout_ns ? now_ns() + timeout_ns : 0;
	unsigned n = 0;
	int ret;

	if (!s || !cqes || !max_nr || min_nr > max_nr)
		return -EINVAL;
	for (;;) {
		while (s->done_head && n < max_nr) {
			struct tc_req *r = s->done_head;

			s->done_head = r->next;
			if (!s->done_head)
				s->done_tail = NULL;
			cqes[n].user_data = r->user_data;
			cqes[n].res = r->err ? r->err : (int64_t)r->done;
			n++;
			r->next = s->free_reqs;
			s->free_reqs = r;
			s->nr_reqs--;
		}
		if (n >= min_nr || n == max_nr)
			break;
		stage_fill(s);
		ret = s->ops->submit(s);
		if (ret < 0)
			return n ? (int)n : ret;
		if (!s->chunks_inflight)
			break;	/* nothing left that could complete */
		uint64_t left = 0;
		if (deadline) {
			uint64_t t = now_ns();

			if (t >= deadline)
				break;
			left = deadline - t;
		}
		ret = s->ops->reap(s, 1, left);
		if (ret < 0)
			return n ? (int)n : ret;
		if (!ret && deadline && now_ns() >= deadline)
			break;
	}
	return n;
}
