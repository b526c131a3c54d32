/*
 * kmod.c - staging backend on tencache.ko: TENCACHE_SUBMIT batches of
 * struct tencache_io (buffer = segment handle + offset), TENCACHE_REAP for
 * completions. Needs a module-backed pool; the fd need not be O_DIRECT.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <uapi/tencache.h>

#include "internal.h"

struct kmod {
	struct tencache_io *ios;	/* prepared, not yet accepted by SUBMIT */
	unsigned nr;
	struct tencache_cqe *cqes;
};

static int kmod_init(struct tencache_stage *s)
{
	struct kmod *k;

	if (s->pool->backend != TENCACHE_POOL_MODULE) {
		tc_err(s->tc, "stage: the module backend needs a module-backed pool");
		return -EOPNOTSUPP;
	}
	if (!(s->pool->module_features & TENCACHE_FEAT_STAGING)) {
		tc_err(s->tc, "stage: the module has no staging I/O (TENCACHE_FEAT_STAGING)");
		return -EOPNOTSUPP;
	}
	if (s->qd > TENCACHE_BATCH_MAX)
		return -EINVAL;
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	k->ios = calloc(s->qd, sizeof(*k->ios));
	k->cqes = calloc(s->qd, sizeof(*k->cqes));
	if (!k->ios || !k->cqes) {
		free(k->ios);
		free(k->cqes);
		free(k);
		return -ENOMEM;
	}
	s->priv = k;
	return 0;
}

static void kmod_exit(struct tencache_stage *s)
{
	struct kmod *k = s->priv;

	free(k->ios);
	free(k->cqes);
	free(k);
}

static void kmod_prep(struct tencache_stage *s, struct tc_chunk *c)
{
	struct kmod *k = s->priv;

	k->ios[k->nr++] = (struct tencache_io){
		.op = c->op,
		.fd = c->fd,
		.handle = c->seg->handle,
		.buf_offset = c->buf - c->seg->addr,
		.file_offset = c->file_off,
		.length = c->len,
		.user_data = (uintptr_t)c,
	};
}

static int kmod_submit(struct tencache_stage *s)
{
	struct kmod *k = s->priv;
	int total = 0;

	while (k->nr) {
		struct tencache_submit sub = {
			.size = sizeof(sub),
			.nr = k->nr,
			.entry_size = sizeof(struct tencache_io),
			.ios = (uintptr_t)k->ios,
		};
		unsigned done;

		if (ioctl(s->pool->fd, TENCACHE_SUBMIT, &sub)) {
			if (errno == EAGAIN || errno == EINTR)
				break;	/* in-flight cap: reap first, then retry */
			/* The first request was refused: complete it with the error. */
			tc_stage_complete(s, (struct tc_chunk *)(uintptr_t)k->ios[0].user_data,
					  -errno);
			done = 1;
		} else {
			done = sub.queued;
			total += done;
		}
		memmove(k->ios, k->ios + done, (k->nr - done) * sizeof(*k->ios));
		k->nr -= done;
	}
	return total;
}

static int kmod_reap(struct tencache_stage *s, unsigned min_nr, uint64_t timeout_ns)
{
	struct kmod *k = s->priv;
	struct tencache_reap r = {
		.size = sizeof(r),
		.min_nr = min_nr,
		.max_nr = s->qd,
		.timeout_ns = timeout_ns,
		.cqes = (uintptr_t)k->cqes,
		.entry_size = sizeof(struct tencache_cqe),
	};
	unsigned i;

	if (ioctl(s->pool->fd, TENCACHE_REAP, &r))
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < r.nr; i++)
		tc_stage_complete(s, (struct tc_chunk *)(uintptr_t)k->cqes[i].user_data,
				  k->cqes[i].result);
	return r.nr;
}

const struct tc_stage_ops tc_stage_module_ops = {
	.name = "module",
	.init = kmod_init,
	.exit = kmod_exit,
	.prep = kmod_prep,
	.submit = kmod_submit,
	.reap = kmod_reap,
};
