/*
 * uring.c - staging backend on io_uring: the pool's segments are registered
 * as fixed buffers (READ_FIXED/WRITE_FIXED); the caller's fd should be opened
 * O_DIRECT. If registration is refused (memlock accounting, module memory on
 * kernels before 6.5), plain READ/WRITE are used and a warning is logged.
 */
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <uapi/tencache.h>

#include "internal.h"

#define URING_MAX_BUF	TC_GIB	/* the kernel's limit per registered buffer */

struct uring {
	struct io_uring ring;
	int fixed;		/* segments registered: buffer index = segment index */
	unsigned queued;	/* SQEs prepared, not yet submitted */
};

static int uring_init(struct tencache_stage *s)
{
	struct tencache_pool *pool = s->pool;
	struct uring *u = calloc(1, sizeof(*u));
	struct iovec *iov;
	unsigned i;
	int ret;

	if (!u)
		return -ENOMEM;
	ret = io_uring_queue_init(s->qd, &u->ring, 0);
	if (ret) {
		tc_err(s->tc, "stage: io_uring_queue_init: %s", strerror(-ret));
		free(u);
		return ret;
	}
	iov = calloc(pool->nr_segs, sizeof(*iov));
	ret = -ENOMEM;
	if (iov) {
		for (i = 0; i < pool->nr_segs; i++) {
			iov[i].iov_base = pool->segs[i].addr;
			iov[i].iov_len = pool->segs[i].len;
		}
		ret = pool->seg_size <= URING_MAX_BUF ?
			io_uring_register_buffers(&u->ring, iov, pool->nr_segs) : -E2BIG;
		free(iov);
	}
	u->fixed = !ret;
	if (ret)
		tc_warn(s->tc, "stage: io_uring cannot register the pool (%s): using unregistered I/O",
			strerror(-ret));
	s->priv = u;
	return 0;
}

static void uring_exit(struct tencache_stage *s)
{
	struct uring *u = s->priv;

	io_uring_queue_exit(&u->ring);	/* also unregisters the buffers */
	free(u);
}

static void uring_prep(struct tencache_stage *s, struct tc_chunk *c)
{
	struct uring *u = s->priv;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	int idx = tc_pool_seg_index(s->pool, c->seg);

	/* Never NULL: the ring has queue_depth entries and at most that many chunks. */
	if (c->op == TENCACHE_OP_READ) {
		if (u->fixed)
			io_uring_prep_read_fixed(sqe, c->fd, c->buf, c->len, c->file_off, idx);
		else
			io_uring_prep_read(sqe, c->fd, c->buf, c->len, c->file_off);
	} else {
		if (u->fixed)
			io_uring_prep_write_fixed(sqe, c->fd, c->buf, c->len, c->file_off, idx);
		else
			io_uring_prep_write(sqe, c->fd, c->buf, c->len, c->file_off);
	}
	io_uring_sqe_set_data(sqe, c);
	u->queued++;
}

static int uring_submit(struct tencache_stage *s)
{
	struct uring *u = s->priv;
	int ret;

	if (!u->queued)
		return 0;
	ret = io_uring_submit(&u->ring);
	if (ret < 0)
		return ret;
	u->queued -= ret < (int)u->queued ? ret : (int)u->queued;
	return ret;
}

static int uring_reap(struct tencache_stage *s, unsigned min_nr, uint64_t timeout_ns)
{
	struct uring *u = s->priv;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = {
		.tv_sec = timeout_ns / 1000000000ULL,
		.tv_nsec = timeout_ns % 1000000000ULL,
	};
	unsigned head, n = 0;
	int ret;

	ret = io_uring_wait_cqes(&u->ring, &cqe, min_nr, timeout_ns ? &ts : NULL, NULL);
	if (ret == -ETIME || ret == -EINTR)
		return 0;
	if (ret < 0)
		return ret;
	io_uring_for_each_cqe(&u->ring, head, cqe) {
		tc_stage_complete(s, io_uring_cqe_get_data(cqe), cqe->res);
		n++;
	}
	io_uring_cq_advance(&u->ring, n);
	return n;
}

const struct tc_stage_ops tc_stage_uring_ops = {
	.name = "io_uring",
	.init = uring_init,
	.exit = uring_exit,
	.prep = uring_prep,
	.submit = uring_submit,
	.reap = uring_reap,
};
