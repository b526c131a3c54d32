/* arena.c - size-class allocator: bad inputs, classes, best fit, coalescing,
 * fragmentation, a randomized run against a reference model, and threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tencache.h"
#include "test.h"

#define A 4096ULL

static void test_bad_inputs(void)
{
	struct tencache_size_count h[2] = { { 8192, 2 }, { 4096, 1 } };
	struct tencache_arena *a = NULL;
	struct tencache_arena_stats st;
	struct tencache_class_stats cs;
	uint64_t off;

	T_EQ(tencache_arena_create(NULL, 1 << 20, A, NULL, 0), -EINVAL);
	T_EQ(tencache_arena_create(&a, 0, A, NULL, 0), -EINVAL);
	T_EQ(tencache_arena_create(&a, A - 1, A, NULL, 0), -EINVAL);	/* rounds to 0 */
	T_EQ(tencache_arena_create(&a, 1 << 20, 3000, NULL, 0), -EINVAL);
	T_EQ(tencache_arena_create(&a, 1 << 20, A, NULL, 2), -EINVAL);
	h[0].size = 0;
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 2), -EINVAL);
	h[0] = (struct tencache_size_count){ 8192, 0 };
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 2), -EINVAL);
	h[0] = (struct tencache_size_count){ 8192, 1000 };	/* 8 MB > 1 MiB */
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 2), -ENOSPC);
	h[0] = (struct tencache_size_count){ 2 << 20, 1 };	/* one size > capacity */
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 2), -ENOSPC);
	h[0] = (struct tencache_size_count){ A, UINT64_MAX };
	h[1] = (struct tencache_size_count){ A, 2 };		/* merged count overflows */
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 2), -EOVERFLOW);
	h[0] = (struct tencache_size_count){ A, 1ULL << 33 };
	T_EQ(tencache_arena_create(&a, 1ULL << 50, A, h, 1), -E2BIG);
	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 5000), -E2BIG);
	T_CHECK(a == NULL, "failed creates must not set *ap");

	h[0] = (struct tencache_size_count){ 8192, 2 };
	h[1] = (struct tencache_size_count){ 4096, 1 };
	T_EQ(tencache_arena_create(&a, 1 << 20, 0, h, 2), 0);	/* 0: default 4096 */
	T_EQ(tencache_arena_alloc(NULL, 1, &off), -EINVAL);
	T_EQ(tencache_arena_alloc(a, 1, NULL), -EINVAL);
	T_EQ(tencache_arena_alloc(a, 0, &off), -EINVAL);
	T_EQ(tencache_arena_alloc(a, (1 << 20) + 1, &off), -ENOMEM);
	T_EQ(tencache_arena_alloc(a, UINT64_MAX, &off), -ENOMEM);
	T_EQ(tencache_arena_free(NULL, 0), -EINVAL);
	T_EQ(tencache_arena_free(a, 0), -ENOENT);		/* never allocated */
	T_EQ(tencache_arena_alloc(a, 8192, &off), 0);
	T_EQ(tencache_arena_free(a, off + 4096), -ENOENT);	/* inside a slot */
	T_EQ(tencache_arena_free(a, off), 0);
	T_EQ(tencache_arena_free(a, off), -ENOENT);		/* double free */
	T_EQ(tencache_arena_alloc(a, 100000, &off), 0);	/* general path */
	T_EQ(tencache_arena_free(a, off + 4096), -ENOENT);
	T_EQ(tencache_arena_free(a, 1ULL << 40), -ENOENT);	/* out of range */
	T_EQ(tencache_arena_free(a, off), 0);
	T_EQ(tencache_arena_free(a, off), -ENOENT);
	T_EQ(tencache_arena_stats(a, NULL), -EINVAL);
	T_EQ(tencache_arena_stats(NULL, &st), -EINVAL);
	T_EQ(tencache_arena_class_stats(a, 2, &cs), -EINVAL);
	T_EQ(tencache_arena_class_stats(a, 0, NULL), -EINVAL);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.allocs, 0);
	T_EQ(st.used, 0);
	T_EQ(st.requested, 0);
	tencache_arena_destroy(a);
	tencache_arena_destroy(NULL);
}

static void test_classes(void)
{
	/* Unsorted, repeated and unaligned sizes: 5000 rounds to 8192. */
	struct tencache_size_count h[] = { { 16384, 2 }, { 5000, 2 }, { 8192, 1 } };
	struct tencache_arena *a;
	struct tencache_arena_stats st;
	struct tencache_class_stats cs;
	uint64_t off[4], o;

	T_EQ(tencache_arena_create(&a, 1 << 20, A, h, 3), 0);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.nr_classes, 2);
	T_EQ(st.class_bytes, 3 * 8192 + 2 * 16384);
	T_EQ(st.general_bytes, (1 << 20) - st.class_bytes);
	T_EQ(tencache_arena_class_stats(a, 0, &cs), 0);
	T_EQ(cs.size, 8192);
	T_EQ(cs.slots, 3);

	/* Three 8 KiB slots in the first slab, then overflow to best fit. */
	for (int i = 0; i < 3; i++) {
		T_EQ(tencache_arena_alloc(a, 8000, &off[i]), 0);
		T_CHECK(off[i] < 3 * 8192 && off[i] % 8192 == 0, "off %llu",
			(unsigned long long)off[i]);
	}
	T_EQ(tencache_arena_alloc(a, 8192, &off[3]), 0);
	T_CHECK(off[3] >= st.class_bytes, "overflow went to the general region");
	T_EQ(tencache_arena_class_stats(a, 0, &cs), 0);
	T_EQ(cs.used, 3);
	T_EQ(cs.high_water, 3);
	T_EQ(cs.overflows, 1);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.used, 4 * 8192);
	T_EQ(st.requested, 3 * 8000 + 8192);
	T_EQ(st.class_used, 3 * 8192);
	T_EQ(st.general_used, 8192);
	T_EQ(tencache_arena_free(a, off[1]), 0);
	T_EQ(tencache_arena_alloc(a, 8192, &o), 0);		/* the freed slot, O(1) */
	T_EQ(o, off[1]);
	T_EQ(tencache_arena_class_stats(a, 0, &cs), 0);
	T_EQ(cs.used, 3);
	/* A size that is not a class never takes class slots. */
	T_EQ(tencache_arena_alloc(a, 12288, &o), 0);
	T_CHECK(o >= st.class_bytes, "non-class size in the general region");
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.high_water, 4 * 8192 + 12288);
	tencache_arena_destroy(a);
}

static void test_best_fit_and_coalesce(void)
{
	struct tencache_arena *a;
	struct tencache_arena_stats st;
	uint64_t o[8], x;
	int i;

	T_EQ(tencache_arena_create(&a, 64 * A, A, NULL, 0), 0);
	for (i = 0; i < 8; i++)
		T_EQ(tencache_arena_alloc(a, (i + 1) * A, &o[i]), 0);	/* 36 pages */
	/* Holes of 2, 4 and 6 pages (plus the 28-page tail). */
	T_EQ(tencache_arena_free(a, o[1]), 0);
	T_EQ(tencache_arena_free(a, o[3]), 0);
	T_EQ(tencache_arena_free(a, o[5]), 0);
	T_EQ(tencache_arena_alloc(a, 3 * A, &x), 0);
	T_EQ(x, o[3]);				/* best fit: the 4-page hole */
	T_EQ(tencache_arena_alloc(a, 6 * A, &x), 0);
	T_EQ(x, o[5]);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.free_extents, 3);		/* 2 pages, 1 page, the tail */
	/* Free everything: one extent again. */
	T_EQ(tencache_arena_free(a, x), 0);
	T_EQ(tencache_arena_free(a, o[3]), 0);
	for (i = 0; i < 8; i++)
		if (i != 1 && i != 3 && i != 5)
			T_EQ(tencache_arena_free(a, o[i]), 0);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.free_extents, 1);
	T_EQ(st.largest_free, 64 * A);
	T_EQ(st.fragmentation, 0);
	T_EQ(st.used, 0);
	tencache_arena_destroy(a);
}

/* alloc_at: exact ranges, split and coalesced like any other. */
static void test_alloc_at(void)
{
	struct tencache_arena *a;
	struct tencache_arena_stats st;
	uint64_t x;

	T_EQ(tencache_arena_create(&a, 64 * A, A, NULL, 0), 0);
	T_EQ(tencache_arena_alloc_at(NULL, A, 0), -EINVAL);
	T_EQ(tencache_arena_alloc_at(a, 0, 0), -EINVAL);
	T_EQ(tencache_arena_alloc_at(a, A, 1), -EINVAL);		/* not aligned */
	T_EQ(tencache_arena_alloc_at(a, 2 * A, 63 * A), -EINVAL);	/* past the end */
	T_EQ(tencache_arena_alloc_at(a, 4 * A, 10 * A), 0);		/* the middle */
	T_EQ(tencache_arena_alloc_at(a, A, 12 * A), -EBUSY);	/* inside it */
	T_EQ(tencache_arena_alloc_at(a, 4 * A, 8 * A), -EBUSY);	/* overlaps its start */
	T_EQ(tencache_arena_alloc_at(a, 2 * A, 8 * A), 0);		/* just below */
	T_EQ(tencache_arena_alloc_at(a, A - 1, 63 * A), 0);		/* the last page */
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.used, 7 * A);
	T_EQ(st.free_extents, 2);		/* [0, 8) and [14, 63) */
	T_EQ(st.largest_free, 49 * A);
	T_EQ(tencache_arena_alloc(a, 8 * A, &x), 0);	/* best fit: the 8-page hole */
	T_EQ(x, 0);
	T_EQ(tencache_arena_free(a, 10 * A), 0);
	T_EQ(tencache_arena_free(a, 8 * A), 0);
	T_EQ(tencache_arena_free(a, 63 * A), 0);
	T_EQ(tencache_arena_free(a, 0), 0);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.free_extents, 1);
	T_EQ(st.largest_free, 64 * A);
	T_EQ(st.used, 0);
	tencache_arena_destroy(a);
}

static void test_fragmentation(void)
{
	struct tencache_arena *a;
	struct tencache_arena_stats st;
	uint64_t o[100], x;
	int i;

	T_EQ(tencache_arena_create(&a, 100 * A, A, NULL, 0), 0);
	for (i = 0; i < 100; i++)
		T_EQ(tencache_arena_alloc(a, A, &o[i]), 0);
	T_EQ(tencache_arena_alloc(a, A, &x), -ENOMEM);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.failed, 1);
	T_EQ(st.fragmentation, 0);		/* nothing free */
	for (i = 0; i < 100; i += 2)
		T_EQ(tencache_arena_free(a, o[i]), 0);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.general_free, 50 * A);
	T_EQ(st.largest_free, A);
	T_EQ(st.free_extents, 50);
	T_EQ(st.fragmentation, 980);		/* 1000 * (1 - 1/50) */
	T_EQ(st.high_water, 100 * A);
	/* 50 pages free, but no 2 pages in a row. */
	T_EQ(tencache_arena_alloc(a, 2 * A, &x), -ENOMEM);
	tencache_arena_destroy(a);
}

/* Randomized run against a reference model: a list of live ranges. */
struct live { uint64_t off, len, req; };

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static void test_random_model(void)
{
	enum { MAXLIVE = 2000 };
	static struct live live[MAXLIVE];
	struct tencache_size_count h[] = { { 3 * A, 200 }, { 16 * A, 50 }, { A, 300 } };
	const uint64_t cap = 8192 * A;
	struct tencache_arena *a;
	struct tencache_arena_stats st;
	uint64_t used = 0, req = 0, hw = 0, off;
	int n = 0, step, i, bad = 0;

	T_EQ(tencache_arena_create(&a, cap, A, h, 3), 0);
	for (step = 0; step < 200000 && !bad; step++) {
		if (n && (n == MAXLIVE || rnd() % 100 < 45)) {
			i = rnd() % n;
			if (tencache_arena_free(a, live[i].off)) {
				bad++;
				T_CHECK(0, "free of a live allocation failed");
			}
			used -= live[i].len;
			req -= live[i].req;
			live[i] = live[--n];
			continue;
		}
		uint64_t size;
		switch (rnd() % 4) {
		case 0: size = h[rnd() % 3].size - rnd() % A; break;	/* class sizes */
		case 1: size = 1 + rnd() % (64 * A); break;
		case 2: size = 1 + rnd() % A; break;
		default: size = (1 + rnd() % 8) * A; break;
		}
		int ret = tencache_arena_alloc(a, size, &off);
		uint64_t len = (size + A - 1) / A * A;
		if (ret == -ENOMEM) {
			/* Legal only when no free extent and no class slot fits. */
			struct tencache_class_stats cs;
			T_EQ(tencache_arena_stats(a, &st), 0);
			if (st.largest_free >= len) {
				bad++;
				T_CHECK(0, "ENOMEM for %llu with a %llu extent free",
					(unsigned long long)len, (unsigned long long)st.largest_free);
			}
			for (i = 0; i < (int)st.nr_classes; i++) {
				tencache_arena_class_stats(a, i, &cs);
				if (cs.size == len && cs.used < cs.slots) {
					bad++;
					T_CHECK(0, "ENOMEM with a free slot of class %llu",
						(unsigned long long)len);
				}
			}
			continue;
		}
		if (ret) {
			bad++;
			T_CHECK(0, "alloc returned %d", ret);
			continue;
		}
		if (off % A || off + len > cap) {
			bad++;
			T_CHECK(0, "bad offset %llu len %llu", (unsigned long long)off,
				(unsigned long long)len);
		}
		for (i = 0; i < n; i++)
			if (off < live[i].off + live[i].len && live[i].off < off + len) {
				bad++;
				T_CHECK(0, "overlap at step %d", step);
				break;
			}
		live[n++] = (struct live){ off, len, size };
		used += len;
		req += size;
		if (used > hw)
			hw = used;
		if (step % 997 == 0) {
			T_EQ(tencache_arena_stats(a, &st), 0);
			T_EQ(st.used, used);
			T_EQ(st.requested, req);
			T_EQ(st.allocs, n);
			T_EQ(st.high_water, hw);
			T_EQ(st.class_used + st.general_used, used);
			T_EQ(st.general_used + st.general_free, st.general_bytes);
		}
	}
	while (n)
		T_EQ(tencache_arena_free(a, live[--n].off), 0);
	T_EQ(tencache_arena_stats(a, &st), 0);
	T_EQ(st.used, 0);
	T_EQ(st.free_extents, 1);
	T_EQ(st.largest_free, st.general_bytes);
	T_EQ(st.high_water, hw);
	tencache_arena_destroy(a);
}

/* Threads: every page carries its owner; an overlap shows as a taken page. */
enum { NTHREADS = 4, PAGES = 4096 };
static struct tencache_arena *shared;
static int owner[PAGES];
static int thread_errors;

static void *thread_fn(void *arg)
{
	int id = (int)(intptr_t)arg, k, p;
	uint64_t offs[64], lens[64], seed = 0x1234567ULL * (id + 1);
	int n = 0;

	for (k = 0; k < 20000; k++) {
		seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
		if (n && (n == 64 || seed % 2)) {
			n--;
			for (p = offs[n] / A; p < (int)((offs[n] + lens[n]) / A); p++)
				__atomic_store_n(&owner[p], 0, __ATOMIC_RELAXED);
			if (tencache_arena_free(shared, offs[n]))
				__atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
			continue;
		}
		uint64_t len = (seed % 3 == 0) ? 2 * A : (1 + seed % 5) * A;
		if (tencache_arena_alloc(shared, len, &offs[n]))
			continue;
		lens[n] = len;
		for (p = offs[n] / A; p < (int)((offs[n] + len) / A); p++) {
			int zero = 0;
			if (!__atomic_compare_exchange_n(&owner[p], &zero, id + 1, 0,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				__atomic_add_fetch(&thread_errors, 1, __ATOMIC_RELAXED);
		}
		n++;
	}
	while (n--) {
		for (p = offs[n] / A; p < (int)((offs[n] + lens[n]) / A); p++)
			__atomic_store_n(&owner[p], 0, __ATOMIC_RELAXED);
		tencache_arena_free(shared, offs[n]);
	}
	return NULL;
}

static void test_threads(void)
{
	struct tencache_size_count h[] = { { 2 * A, 256 } };
	struct tencache_arena_stats st;
	pthread_t t[NTHREADS];
	int i;

	T_EQ(tencache_arena_create(&shared, PAGES * A, A, h, 1), 0);
	for (i = 0; i < NTHREADS; i++)
		T_EQ(pthread_create(&t[i], NULL, thread_fn, (void *)(intptr_t)i), 0);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	T_EQ(thread_errors, 0);
	T_EQ(tencache_arena_stats(shared, &st), 0);
	T_EQ(st.used, 0);
	T_EQ(st.allocs, 0);
	T_EQ(st.free_extents, 1);
	tencache_arena_destroy(shared);
}

int main(void)
{
	test_bad_inputs();
	test_classes();
	test_best_fit_and_coalesce();
	test_alloc_at();
	test_fragmentation();
	test_random_model();
	test_threads();
	return t_exit();
}
