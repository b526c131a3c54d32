/* cache.cu - the tensor cache on a CUDA GPU, end to end: the random cyclic
 * step of tests/runtime/cache_host.c (profiling, planned steps for every
 * policy, with and without NVMe, an order change, flush), with every GPU
 * value read and written through copies on the acquiring stream; and a
 * well-prefetched step the CPU runs far ahead of, where the GPU-timeline
 * hits (copies done when the stream got there) must be at least the
 * CPU-clock ones. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu.h"
#include "step_gen.h"

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

static cudaStream_t st;
static uint32_t *hbuf;	/* pinned staging for checks, 256 KiB */

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

			ret = tencache_acquire(c, op->a[k].id, fl, st, &p[k]);
			if (ret) {
				fprintf(stderr, "acquire %d: %d\n", op->a[k].id, ret);
				return ret;
			}
		}
		/* the "kernels": copies on the stream, checked on the host */
		for (int k = 0; k < op->n; k++) {
			int id = op->a[k].id;
			const uint32_t *rd = (const uint32_t *)p[k];

			if (!op->host && (op->a[k].flags & TENCACHE_ACQ_READ)) {
				CK(cudaMemcpyAsync(hbuf, p[k], bytes[id], cudaMemcpyDeviceToHost, st));
				CK(cudaStreamSynchronize(st));
				rd = hbuf;
			}
			if ((op->a[k].flags & TENCACHE_ACQ_READ) && !check(rd, bytes[id], val(id))) {
				fprintf(stderr, "tensor %d: stale value (op %d, want version %u)\n",
					id, oi, version[id]);
				return -EIO;
			}
			if (op->a[k].flags & TENCACHE_ACQ_WRITE) {
				version[id]++;
				if (op->host) {
					fill((uint32_t *)p[k], bytes[id], val(id));
				} else {
					fill(hbuf, bytes[id], val(id));
					CK(cudaMemcpyAsync(p[k], hbuf, bytes[id], cudaMemcpyHostToDevice, st));
					CK(cudaStreamSynchronize(st));
				}
			}
		}
		for (int k = 0; k < op->n; k++) {
			ret = tencache_release(c, op->a[k].id, st, k ? 0 : 20000);
			if (ret)
				return ret;
		}
	}
	return tencache_step_end(c);
}

static int run(struct tencache *tc, unsigned policy, int nvme, const char *dir)
{
	struct tencache_cache_params p = {};
	struct tencache_cache_stats sts;
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
	p.flags = TENCACHE_CACHE_TIMELINE;
	p.policy = policy;
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
		fill((uint32_t *)h, bytes[i], val(i));
	}
	/* 1 profiled + 4 planned, an order change, 1 re-profiled + 2 planned */
	for (s = 0; s < 8; s++) {
		ret = step(c, s == 5 ? 10 : -1);
		if (ret) {
			fprintf(stderr, "policy %u nvme %d: step %d failed: %d\n", policy, nvme, s, ret);
			tencache_cache_destroy(c);
			return ret;
		}
	}
	T_EQ(tencache_cache_stats(c, &sts, sizeof(sts)), 0);
	T_EQ(sts.steps, 8);
	T_EQ(sts.reprofiles, 1);
	T_EQ(sts.planned_steps, 5);	/* steps 1-4 and 7 (5 broke, 6 re-profiled) */
	T_CHECK(sts.acquires > 0 && sts.hits <= sts.acquires, "hits %llu of %llu",
		(unsigned long long)sts.hits, (unsigned long long)sts.acquires);
	if (nvme)
		T_CHECK(sts.link_bytes[2] > 0 && sts.link_bytes[3] > 0, "no NVMe traffic");
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
			T_CHECK(check((const uint32_t *)h, bytes[i], val(i)), "tensor %d after flush", i);
	}
	printf("policy %u nvme %d: hits %llu/%llu, H2D %llu KiB, D2H %llu KiB, NVMe %llu/%llu KiB\n",
	       policy, nvme, (unsigned long long)sts.hits, (unsigned long long)sts.acquires,
	       (unsigned long long)sts.link_bytes[0] / 1024, (unsigned long long)sts.link_bytes[1] / 1024,
	       (unsigned long long)sts.link_bytes[2] / 1024, (unsigned long long)sts.link_bytes[3] / 1024);
	tencache_cache_destroy(c);
	return 0;
}

/*
 * Two passes over 32 tensors of 1 MiB a step, 100 us of compute (the spin
 * kernel) per op, a 12 MiB budget: the plan prefetches, the copies (~40 us)
 * end long before the stream needs them, and nothing waits on the host, so
 * the CPU queues the step far ahead of the stream.
 */
static int prefetched(struct tencache *tc, unsigned policy)
{
	enum { N = 32, STEPS = 6 };
	struct tencache_cache_params p = {};
	struct tencache_cache_stats sts;
	struct tencache_cache *c;
	uint64_t wall = 0;

	p.gpu_budget = 12 << 20;
	p.policy = policy;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	for (int i = 0; i < N; i++)
		T_EQ(tencache_tensor_register(c, 1 << 20, TENCACHE_ROLE_PARAM_FP16), i);
	for (int s = 0; s < STEPS; s++) {
		uint64_t t0;
		void *ptr;
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		t0 = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
		T_EQ(tencache_step_begin(c), 0);
		for (int o = 0; o < 2 * N; o++) {
			int id = o % N;

			T_EQ(tencache_acquire(c, id, TENCACHE_ACQ_READ, st, &ptr), 0);
			T_EQ(tencache_release(c, id, st, 100000), 0);
		}
		T_EQ(tencache_step_end(c), 0);
		CK(cudaStreamSynchronize(st));
		clock_gettime(CLOCK_MONOTONIC, &ts);
		wall += ts.tv_sec * 1000000000ULL + ts.tv_nsec - t0;
		T_EQ(tencache_cache_stats(c, &sts, sizeof(sts)), 0);
		T_CHECK(sts.last_gpu_hits >= sts.last_hits && sts.last_gpu_hits <= sts.last_acquires,
			"policy %u step %d: GPU-timeline hits %llu, CPU-clock %llu, of %llu", policy,
			s, (unsigned long long)sts.last_gpu_hits, (unsigned long long)sts.last_hits,
			(unsigned long long)sts.last_acquires);
		printf("policy %u prefetched step %d: hits %llu, GPU-timeline %llu of %llu; "
		       "stall %.3f ms, GPU-timeline %.3f ms\n", policy, s,
		       (unsigned long long)sts.last_hits, (unsigned long long)sts.last_gpu_hits,
		       (unsigned long long)sts.last_acquires, sts.last_stall_ns / 1e6,
		       sts.last_gpu_stall_ns / 1e6);
	}
	T_EQ(tencache_cache_stats(c, &sts, sizeof(sts)), 0);
	T_CHECK(sts.planned_steps >= STEPS - 1, "%llu planned steps",
		(unsigned long long)sts.planned_steps);
	T_CHECK(sts.gpu_hits >= sts.hits && sts.gpu_hits <= sts.acquires,
		"policy %u: GPU-timeline hits %llu, CPU-clock %llu, of %llu", policy,
		(unsigned long long)sts.gpu_hits, (unsigned long long)sts.hits,
		(unsigned long long)sts.acquires);
	/* the stream cannot have waited longer than the steps took */
	T_CHECK(sts.gpu_stall_ns < wall, "GPU-timeline stall %llu ns in %llu ns of steps",
		(unsigned long long)sts.gpu_stall_ns, (unsigned long long)wall);
	tencache_cache_destroy(c);
	return 0;
}

int main(void)
{
	struct tencache_params tp = {};
	const char *dir = getenv("TEST_DIR") ? getenv("TEST_DIR") : "/var/tmp";
	struct tencache *tc;
	int odirect;

	tp.log_level = TENCACHE_LOG_WARN;
	tc = gpu_setup(&tp);
	CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
	CK(cudaMallocHost((void **)&hbuf, 256 * KiB));
	odirect = t_odirect_ok(dir);
	for (unsigned seed = 1; seed <= 3; seed++) {
		gen(seed);
		for (unsigned pol = TENCACHE_POLICY_OURS; pol <= TENCACHE_POLICY_10CACHE; pol++) {
			T_EQ(run(tc, pol, 0, dir), 0);
			if (odirect)
				T_EQ(run(tc, pol, 1, dir), 0);
		}
	}
	for (unsigned pol = TENCACHE_POLICY_OURS; pol <= TENCACHE_POLICY_10CACHE; pol++)
		T_EQ(prefetched(tc, pol), 0);
	if (!odirect)
		printf("NVMe tier not tested: %s refuses O_DIRECT\n", dir);
	tencache_exit(tc);
	return t_exit();
}
