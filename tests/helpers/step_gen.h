/* step_gen.h - a random cyclic training step for the cache's end-to-end
 * tests (tests/runtime/cache_host.c, cache_replan.c, tests/gpu/cache.cu):
 * tensors of random sizes, and ops of 1-3 distinct tensors each, some of
 * them host ops. */
#ifndef TENCACHE_TEST_STEP_GEN_H
#define TENCACHE_TEST_STEP_GEN_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "tencache.h"
#include "test.h"	/* t_tensor_check, t_tensor_fill */

struct t_acc { int id; unsigned flags; };
struct t_op { int n, host; struct t_acc a[3]; };

/*
 * nt tensors of 1..max_pages 4 KiB pages into bytes[]; nops ops into ops[]:
 * 15% host ops; each access reads (70%), reads and writes (20%) or only
 * writes (10%). The same seed gives the same step.
 */
static inline void t_gen_step(unsigned seed, int nt, uint64_t *bytes, unsigned max_pages,
			      int nops, struct t_op *ops)
{
	srand(seed);
	for (int i = 0; i < nt; i++)
		bytes[i] = (1 + rand() % max_pages) * 4096ULL;
	for (int o = 0; o < nops; o++) {
		ops[o].n = 1 + rand() % 3;
		ops[o].host = rand() % 100 < 15;
		for (int k = 0; k < ops[o].n; k++) {
			int r = rand() % 100, dup;

			do {	/* distinct tensors within an op */
				ops[o].a[k].id = rand() % nt;
				dup = 0;
				for (int j = 0; j < k; j++)
					dup |= ops[o].a[j].id == ops[o].a[k].id;
			} while (dup);
			ops[o].a[k].flags = r < 70 ? TENCACHE_ACQ_READ :
					    r < 90 ? TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE :
						     TENCACHE_ACQ_WRITE;
		}
	}
}

/*
 * Registers tensors 0..nt-1 of bytes[] with role and writes each one's first
 * value (version 0) through tencache_tensor_host, which ends registration.
 * 0 or the first failing call's -errno (-EIO: an unexpected id).
 */
static inline int t_register_fill(struct tencache_cache *c, int nt, const uint64_t *bytes,
				  uint32_t *version, unsigned role)
{
	for (int i = 0; i < nt; i++) {
		int id = tencache_tensor_register(c, bytes[i], role);

		if (id != i)
			return id < 0 ? id : -EIO;
	}
	for (int i = 0; i < nt; i++) {
		void *h;
		int ret = tencache_tensor_host(c, i, &h);

		if (ret)
			return ret;
		version[i] = 0;
		t_tensor_fill((uint32_t *)h, bytes[i], i, 0);
	}
	return 0;
}

/*
 * The "kernels" of op oi on host pointers p[]: a read checks the tensor's
 * last version, a write fills the next. -EIO (and a message) on a stale value.
 */
static inline int t_op_values(const struct t_op *op, int oi, void *const *p,
			      const uint64_t *bytes, uint32_t *version)
{
	for (int k = 0; k < op->n; k++) {
		int id = op->a[k].id;

		if ((op->a[k].flags & TENCACHE_ACQ_READ) &&
		    !t_tensor_check((const uint32_t *)p[k], bytes[id], id, version[id])) {
			fprintf(stderr, "tensor %d: stale value (op %d)\n", id, oi);
			return -EIO;
		}
		if (op->a[k].flags & TENCACHE_ACQ_WRITE) {
			version[id]++;
			t_tensor_fill((uint32_t *)p[k], bytes[id], id, version[id]);
		}
	}
	return 0;
}

/*
 * One step of ops[] through c in host mode: each op's tensors acquired, its
 * values checked and written (t_op_values), then released; after_op (NULL:
 * none) runs after each op. 0, -EIO on a stale value, or the failing call's.
 */
static inline int t_run_step(struct tencache_cache *c, const struct t_op *ops, int nops,
			     const uint64_t *bytes, uint32_t *version,
			     void (*after_op)(struct tencache_cache *c))
{
	int ret = tencache_step_begin(c);

	for (int oi = 0; oi < nops && !ret; oi++) {
		const struct t_op *op = &ops[oi];
		void *p[3];

		for (int k = 0; k < op->n && !ret; k++)
			ret = tencache_acquire(c, op->a[k].id, op->a[k].flags |
					       (op->host ? TENCACHE_ACQ_HOST : 0), NULL, &p[k]);
		if (!ret && t_op_values(op, oi, p, bytes, version))
			return -EIO;
		for (int k = 0; k < op->n && !ret; k++)
			ret = tencache_release(c, op->a[k].id, NULL, 0);
		if (after_op)
			after_op(c);
	}
	return ret ?: tencache_step_end(c);
}

/*
 * A cache with NVMe on (p's flags, policy, path and rates as given) over nt
 * tensors of bytes[]: a third of their bytes on the GPU, a third pinned,
 * room for all twice on NVMe; the tensors registered and filled, then
 * steps steps of ops[], each value checked as read (cache_disk_turns.c,
 * cache_disk_rates.c). 0 or the first failure's -errno; *c is the cache
 * where one was made (NULL if not).
 */
static inline int t_nvme_steps(struct tencache *tc, struct tencache_cache_params *p,
			       struct tencache_cache **c, int nt, const uint64_t *bytes,
			       uint32_t *version, const struct t_op *ops, int nops, int steps)
{
	uint64_t total = 0;
	int ret;

	for (int i = 0; i < nt; i++)
		total += bytes[i];
	p->gpu_budget = total / 3;
	p->pinned_budget = total / 3;
	p->nvme_budget = total * 2;
	*c = NULL;
	ret = tencache_cache_create(tc, c, p);
	ret = ret ?: t_register_fill(*c, nt, bytes, version, TENCACHE_ROLE_PARAM_FP16);
	for (int s = 0; s < steps && !ret; s++)
		ret = t_run_step(*c, ops, nops, bytes, version, NULL);
	return ret;
}

#endif
