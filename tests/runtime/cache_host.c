/* cache_host.c - the tensor cache in host mode (CPU-only), end to end: a
 * random cyclic step of ops is run through profiling and planned steps for
 * every policy, with and without an NVMe tier, and every value read is
 * checked against a model of what was last written, including plans whose
 * GPU allocations are laid out ahead (static_layouts) and ours laid out by
 * the planner (planner_layouts, forced by TENCACHE_CACHE_LAYOUT on one run
 * in two, and never with TENCACHE_CACHE_NO_LAYOUT). Also an order change
 * (re-profiling), flush, and every bad input of the cache API; one policy
 * again with the issuer thread (TENCACHE_CACHE_ISSUER). With NVMe, a
 * staging worker starts the next tensor's transfer while earlier ones are
 * in flight (tc_exec_test_fly_max). Rates given in the params, each way
 * and both ways at once, are the ones the plans use. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/exec.h"	/* tc_exec_test_fly_max */
#include "step_gen.h"
#include "test.h"

#define NT	40
#define NOPS	60
#define KiB	1024ULL

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];

static void fill(uint32_t *p, uint64_t len, uint32_t v)
{
	for (uint64_t i = 0; i < len / 4; i++)
		p[i] = v ^ (uint32_t)(i * 2654435761u);
}

static int check(const uint32_t *p, uint64_t len, uint32_t v)
{
	for (uint64_t i = 0; i < len / 4; i++)
		if (p[i] != (v ^ (uint32_t)(i * 2654435761u)))
			return 0;
	return 1;
}

static uint32_t val(int id)
{
	return (uint32_t)id * 100000u + version[id];
}

static void gen(unsigned seed)
{
	t_gen_step(seed, NT, bytes, 64, NOPS, ops);
}

/* One step; ops o and o+1 swapped when swap >= 0. Returns 0 or a failure. */
static int step(struct tencache_cache *c, int swap)
{
	int ret = tencache_step_begin(c);

	if (ret)
		return ret;
	for (int oi = 0; oi < NOPS; oi++) {
		const struct t_op *op = &ops[oi == swap ? oi + 1 : oi == swap + 1 && swap >= 0 ? swap : oi];
		void *p[3];

		for (int k = 0; k < op->n; k++) {
			unsigned fl = op->a[k].flags | (op->host ? TENCACHE_ACQ_HOST : 0);

			ret = tencache_acquire(c, op->a[k].id, fl, NULL, &p[k]);
			if (ret) {
				fprintf(stderr, "acquire %d: %d\n", op->a[k].id, ret);
				return ret;
			}
		}
		/* host mode: the "kernels" run in this thread */
		for (int k = 0; k < op->n; k++) {
			int id = op->a[k].id;

			if ((op->a[k].flags & TENCACHE_ACQ_READ) && !check(p[k], bytes[id], val(id))) {
				fprintf(stderr, "tensor %d: stale value (op %d, want version %u)\n",
					id, oi, version[id]);
				return -EIO;
			}
			if (op->a[k].flags & TENCACHE_ACQ_WRITE) {
				version[id]++;
				fill(p[k], bytes[id], val(id));
			}
		}
		for (int k = 0; k < op->n; k++) {
			ret = tencache_release(c, op->a[k].id, NULL, k ? 0 : 20000);
			if (ret)
				return ret;
		}
	}
	return tencache_step_end(c);
}

/* plans laid out ahead (setup.c plan_place): the path must be exercised */
static uint64_t static_layouts, planner_layouts;
static unsigned fly_rd, fly_wr;	/* the most NVMe jobs in flight at once */
static unsigned extra_flags;	/* TENCACHE_CACHE_ISSUER: copies by a thread; the layout */

static int run(struct tencache *tc, unsigned policy, int nvme, const char *dir)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE |
					   TENCACHE_CACHE_TIMELINE | extra_flags, .policy = policy };
	struct tencache_cache_stats st;
	struct tencache_cache *c;
	uint64_t total = 0;
	char path[512], tl[512];
	int ret, s;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 4;
	if (p.gpu_budget < 3 * 256 * KiB)
		p.gpu_budget = 3 * 256 * KiB;
	if (nvme) {
		snprintf(path, sizeof(path), "%s/tencache-cache-test.swap", dir);
		p.pinned_budget = total / 2;
		p.nvme_budget = total * 2;
		p.nvme_path = path;
	}
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	for (int i = 0; i < NT; i++)
		T_EQ(tencache_tensor_register(c, bytes[i], TENCACHE_ROLE_PARAM_FP16), i);
	for (int i = 0; i < NT; i++) {
		void *h;

		version[i] = 0;
		ret = tencache_tensor_host(c, i, &h);
		if (ret) {
			fprintf(stderr, "tensor_host(%d): %d\n", i, ret);
			tencache_cache_destroy(c);
			return ret;
		}
		fill(h, bytes[i], val(i));
	}
	/* 1 profiled + 4 planned, an order change, 1 re-profiled + 2 planned */
	for (s = 0; s < 8; s++) {
		ret = step(c, s == 5 ? 10 : -1);
		if (ret) {
			fprintf(stderr, "policy %u nvme %d: step %d failed: %d\n", policy, nvme, s, ret);
			tencache_cache_destroy(c);
			return ret;
		}
		/* host mode: the compute's clock is the host's */
		T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
		T_CHECK(st.last_gpu_hits == st.last_hits && st.last_gpu_stall_ns == st.last_stall_ns,
			"step %d: GPU-timeline hits %llu stall %llu ns, host %llu, %llu ns", s,
			(unsigned long long)st.last_gpu_hits, (unsigned long long)st.last_gpu_stall_ns,
			(unsigned long long)st.last_hits, (unsigned long long)st.last_stall_ns);
	}
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(st.gpu_hits, st.hits);
	T_EQ(st.gpu_stall_ns, st.stall_ns);
	T_CHECK(st.stall_ns > 0, "no acquire waited in 8 steps at a quarter budget");
	T_EQ(st.steps, 8);
	T_EQ(st.reprofiles, 1);
	T_EQ(st.planned_steps, 5);	/* steps 1-4 and 7 (5 broke, 6 re-profiled) */
	T_CHECK(st.acquires > 0 && st.hits <= st.acquires, "hits %llu of %llu",
		(unsigned long long)st.hits, (unsigned long long)st.acquires);
	if (nvme) {
		unsigned rd, wr;
		uint64_t wl;

		T_CHECK(st.link_bytes[2] > 0 && st.link_bytes[3] > 0, "no NVMe traffic");
		T_EQ(tc_exec_test_fly_max(c, &rd, &wr), 0);
		T_EQ(tc_exec_test_fly_max(NULL, &rd, &wr), -EINVAL);
		T_EQ(tc_exec_test_fly_max(c, NULL, &wr), -EINVAL);
		T_EQ(tc_exec_test_fly_max(c, &rd, NULL), -EINVAL);
		/* the workers never make or destroy a device event (sev_get) */
		T_EQ(tc_exec_test_worker_lifecycle(c, &wl), 0);
		T_CHECK(wl == 0, "%llu device events made or destroyed on a staging worker",
			(unsigned long long)wl);
		T_EQ(tc_exec_test_worker_lifecycle(NULL, &wl), -EINVAL);
		T_EQ(tc_exec_test_worker_lifecycle(c, NULL), -EINVAL);
		fly_rd = rd > fly_rd ? rd : fly_rd;
		fly_wr = wr > fly_wr ? wr : fly_wr;
	}
	snprintf(tl, sizeof(tl), "%s/tencache-timeline-%d.json", dir, getpid());
	T_EQ(tencache_cache_timeline(c, tl), 0);
	unlink(tl);
	/*
	 * flush: every live value back home, readable from the host. A value
	 * the step overwrites before it reads it again is dead between steps
	 * and need not be kept.
	 */
	T_EQ(tencache_cache_flush(c), 0);
	for (int i = 0; i < NT; i++) {
		int live = 0, seen = 0;
		void *h;

		for (int o = 0; o < NOPS && !seen; o++)
			for (int k = 0; k < ops[o].n; k++)
				if (ops[o].a[k].id == i && !seen) {
					seen = 1;
					live = !!(ops[o].a[k].flags & TENCACHE_ACQ_READ);
				}
		T_EQ(tencache_tensor_host(c, i, &h), 0);
		if (live)
			T_CHECK(check(h, bytes[i], val(i)), "tensor %d after flush", i);
	}
	printf("policy %u nvme %d: hits %llu/%llu, static layouts %llu, planner's %llu, H2D %llu KiB, D2H %llu KiB, NVMe %llu/%llu KiB\n",
	       policy, nvme, (unsigned long long)st.hits, (unsigned long long)st.acquires,
	       (unsigned long long)st.static_layouts, (unsigned long long)st.planner_layouts,
	       (unsigned long long)st.link_bytes[0] / 1024, (unsigned long long)st.link_bytes[1] / 1024,
	       (unsigned long long)st.link_bytes[2] / 1024, (unsigned long long)st.link_bytes[3] / 1024);
	static_layouts += st.static_layouts;
	planner_layouts += st.planner_layouts;
	if (policy != TENCACHE_POLICY_OURS || (p.flags & TENCACHE_CACHE_NO_LAYOUT))
		T_CHECK(!st.planner_layouts, "policy %u ran a plan laid out by the planner", policy);
	if (policy == TENCACHE_POLICY_OURS && (p.flags & TENCACHE_CACHE_LAYOUT))
		T_CHECK(st.planner_layouts, "ours did not run the laid-out plan");
	tencache_cache_destroy(c);
	return 0;
}

static void bad_input(struct tencache *tc)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE, .gpu_budget = 1 << 20 };
	struct tencache_cache *c;
	void *ptr;

	T_EQ(tencache_cache_create(NULL, &c, &p), -EINVAL);
	T_EQ(tencache_cache_create(tc, &c, NULL), -EINVAL);
	p.gpu_budget = 0;
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.gpu_budget = 1 << 20;
	p.__reserved[3] = 1;
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.__reserved[3] = 0;
	p.flags = 0x100;
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.flags = TENCACHE_CACHE_HOST_MODE | TENCACHE_CACHE_DETACH_FIFO << 1;	/* the next bit */
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.flags = TENCACHE_CACHE_HOST_MODE | TENCACHE_CACHE_LAYOUT | TENCACHE_CACHE_NO_LAYOUT;
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.flags = TENCACHE_CACHE_HOST_MODE;
	p.policy = 99;
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.policy = 0;
	/* rates: negative, NaN or infinite, each way and both at once */
	for (int i = 0; i < 6; i++) {
		double *v = i < 4 ? &p.bw[i] : &p.duplex_bw[i - 4];
		const double bad[3] = { -1.0, NAN, INFINITY };

		for (int k = 0; k < 3; k++) {
			*v = bad[k];
			T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
		}
		*v = 0;
	}
	p.nvme_budget = 1 << 20;	/* without a path and a pinned budget */
	T_EQ(tencache_cache_create(tc, &c, &p), -EINVAL);
	p.nvme_budget = 0;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	T_EQ(tencache_tensor_register(c, 0, TENCACHE_ROLE_GRAD), -EINVAL);
	T_EQ(tencache_tensor_register(c, 4096, 77), -EINVAL);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &ptr), -EINVAL); /* no step */
	T_EQ(tencache_step_begin(c), -EINVAL);	/* no tensors */
	T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_GRAD), 0);
	T_EQ(tencache_tensor_register(c, 8192, TENCACHE_ROLE_GRAD), 1);
	T_EQ(tencache_step_begin(c), 0);
	T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_GRAD), -EBUSY);
	T_EQ(tencache_step_begin(c), -EINVAL);	/* already in a step */
	T_EQ(tencache_acquire(c, 2, TENCACHE_ACQ_READ, NULL, &ptr), -EINVAL);
	T_EQ(tencache_acquire(c, -1, TENCACHE_ACQ_READ, NULL, &ptr), -EINVAL);
	T_EQ(tencache_acquire(c, 0, 0, NULL, &ptr), -EINVAL);
	T_EQ(tencache_acquire(c, 0, 0x80 | TENCACHE_ACQ_READ, NULL, &ptr), -EINVAL);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, NULL), -EINVAL);
	T_EQ(tencache_release(c, 0, NULL, 0), -ENOENT);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &ptr), 0);
	T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &ptr), -EBUSY);
	/* an op is all host or all GPU */
	T_EQ(tencache_acquire(c, 1, TENCACHE_ACQ_READ | TENCACHE_ACQ_HOST, NULL, &ptr), -EINVAL);
	T_EQ(tencache_step_end(c), -EBUSY);	/* tensor 0 still held */
	T_EQ(tencache_tensor_host(c, 0, &ptr), -EINVAL);	/* inside a step */
	T_EQ(tencache_release(c, 0, NULL, 0), 0);
	T_EQ(tencache_step_end(c), 0);
	T_EQ(tencache_step_end(c), -EINVAL);
	T_EQ(tencache_cache_timeline(c, "/tmp/x.json"), -ENODATA);
	tencache_cache_destroy(c);

	/*
	 * a tensor larger than the GPU budget: fine for host ops (fp32
	 * masters, optimizer states), a clear -ENOSPC for a GPU acquire
	 */
	p.gpu_budget = 4096;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	T_EQ(tencache_tensor_register(c, 8192, TENCACHE_ROLE_OPT_STATE), 0);
	T_EQ(tencache_step_begin(c), 0);
	{
		void *ptr;

		T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ, NULL, &ptr), -ENOSPC);
		T_EQ(tencache_acquire(c, 0, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE |
				      TENCACHE_ACQ_HOST, NULL, &ptr), 0);
		T_EQ(tencache_release(c, 0, NULL, 0), 0);
	}
	T_EQ(tencache_step_end(c), 0);
	tencache_cache_destroy(c);
}

/*
 * Rates given in the params are the ones the plans use: each way, and both
 * ways at once (PCIe; the disk, its two ways given or measured).
 */
static void given_rates(struct tencache *tc, const char *dir, int odirect)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/tencache-rates-test.swap", dir);
	for (int k = 0; k < (odirect ? 3 : 1); k++) {
		struct tencache_cache_params p = {
			.flags = TENCACHE_CACHE_HOST_MODE, .gpu_budget = 4 << 20,
			.bw = { 10e9, 11e9, 2e9, 3e9 }, .duplex_bw = { 17e9, 2.2e9 },
		};
		struct tencache_cache_stats st;
		struct tencache_cache *c;
		void *h;

		if (k) {	/* an NVMe tier: the disk's ways given (1), measured (2) */
			p.pinned_budget = 16 << 20;
			p.nvme_budget = 64 << 20;
			p.nvme_path = path;
		}
		if (k == 2)
			p.bw[2] = p.bw[3] = 0;
		T_EQ(tencache_cache_create(tc, &c, &p), 0);
		if (t_failures)
			return;
		T_EQ(tencache_tensor_register(c, 4096, TENCACHE_ROLE_PARAM_FP16), 0);
		T_EQ(tencache_tensor_host(c, 0, &h), 0);	/* calibrates */
		T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
		T_CHECK(st.link_bw[0] == 10e9 && st.link_bw[1] == 11e9 && st.duplex_bw[0] == 17e9,
			"PCIe rates %.3g %.3g, both at once %.3g: not those given", st.link_bw[0],
			st.link_bw[1], st.duplex_bw[0]);
		/* no NVMe tier: the disk has no both-at-once rate */
		T_CHECK(st.duplex_bw[1] == (k ? 2.2e9 : 0), "case %d: disk both at once %.3g", k,
			st.duplex_bw[1]);
		if (k == 1)
			T_CHECK(st.link_bw[2] == 2e9 && st.link_bw[3] == 3e9,
				"disk rates %.3g %.3g: not those given", st.link_bw[2], st.link_bw[3]);
		if (k == 2)	/* measured, the given both-at-once rate kept */
			T_CHECK(st.link_bw[2] > 0 && st.link_bw[3] > 0,
				"disk rates %.3g %.3g: not measured", st.link_bw[2], st.link_bw[3]);
		tencache_cache_destroy(c);
	}
}

int main(int argc, char **argv)
{
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_WARN,
				      .pool_backend = TENCACHE_POOL_THP };
	const char *dir = getenv("TEST_DIR") ? getenv("TEST_DIR") : "/var/tmp";
	struct tencache *tc;
	int odirect;

	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	bad_input(tc);
	odirect = t_odirect_ok(dir);
	given_rates(tc, dir, odirect);
	for (unsigned seed = 1; seed <= 3; seed++) {
		gen(seed);
		for (unsigned pol = TENCACHE_POLICY_OURS; pol <= TENCACHE_POLICY_10CACHE; pol++) {
			T_EQ(run(tc, pol, 0, dir), 0);
			if (odirect)
				T_EQ(run(tc, pol, 1, dir), 0);
		}
		/* ours laid out by the planner, whatever the timing model
		 * says, then never */
		for (int k = 0; k < 2; k++) {
			extra_flags = k ? TENCACHE_CACHE_NO_LAYOUT : TENCACHE_CACHE_LAYOUT;
			T_EQ(run(tc, TENCACHE_POLICY_OURS, 0, dir), 0);
			if (odirect && !k)
				T_EQ(run(tc, TENCACHE_POLICY_OURS, 1, dir), 0);
		}
		extra_flags = 0;
	}
	/* with the issuer thread (the default has none) */
	extra_flags = TENCACHE_CACHE_ISSUER;
	gen(1);
	T_EQ(run(tc, TENCACHE_POLICY_OURS, 0, dir), 0);
	if (odirect)
		T_EQ(run(tc, TENCACHE_POLICY_OURS, 1, dir), 0);
	if (!odirect) {
		printf("NVMe tier not tested: %s refuses O_DIRECT\n", dir);
	} else {
		/* the next tensor's transfer starts while one is in flight, at
		 * most 4 at once (stage_main's SJ_FLY) */
		printf("NVMe jobs in flight at once, at most: %u reads, %u writes\n", fly_rd, fly_wr);
		T_CHECK(fly_rd >= 2 && fly_rd <= 4 && fly_wr <= 4,
			"NVMe jobs in flight at once: %u reads, %u writes (want 2-4 reads, at most 4 writes)",
			fly_rd, fly_wr);
	}
	/* at these budgets about a third of the plans fragment the arena */
	T_CHECK(static_layouts > 0, "no plan was laid out ahead: that path went untested");
	T_CHECK(planner_layouts > 0, "no plan laid out by the planner ran: that path went untested");
	tencache_exit(tc);
	return t_exit();
}
