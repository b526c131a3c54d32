/*
 * arena.c - the size-class allocator, over an abstract range [0, capacity).
 *
 * Layout: one slab per histogram size, laid out in increasing size order from
 * offset 0, each with a stack of free slot indices (O(1) alloc and free once
 * the class is found; finding it is a binary search over the few classes).
 * The rest of the range is a best-fit region: free extents kept in two sorted
 * arrays (by offset, to coalesce; by size, for best fit) and live extents in
 * a third (by offset). Arrays, not trees: inserts are a memmove, which is
 * cheap at the thousands of extents a training step has. One mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define TC_MAX_CLASSES	4096

struct tc_class {
	uint64_t size;
	uint64_t base;		/* offset of slot 0 */
	uint64_t slots;
	uint64_t used;
	uint64_t high_water;
	uint64_t overflows;
	uint32_t *free_stack;	/* free slot indices; the top is free_stack[nfree-1] */
	uint64_t nfree;
	uint64_t *req;		/* requested bytes per slot; 0 = free */
};

struct tc_ext {
	uint64_t off;
	uint64_t len;
	uint64_t req;		/* live extents: bytes asked for */
};

struct tc_extv {
	struct tc_ext *v;
	size_t n, cap;
};

struct tencache_arena {
	pthread_mutex_t lock;
	uint64_t capacity, align;
	unsigned nr_classes;
	struct tc_class *classes;
	uint64_t class_bytes, class_used;
	uint64_t gbase, glen, gused, gfree;
	struct tc_extv by_off, by_size, live;
	uint64_t used, requested, high_water, allocs, failed;
	uint64_t high_min;	/* sizes >= this go to the high end (0: none) */
};

/* ---- sorted extent arrays ---- */

static int ext_cmp_off(const struct tc_ext *a, const struct tc_ext *b)
{
	return a->off < b->off ? -1 : a->off > b->off;
}

static int ext_cmp_size(const struct tc_ext *a, const struct tc_ext *b)
{
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	return ext_cmp_off(a, b);
}

typedef int (*ext_cmp_fn)(const struct tc_ext *, const struct tc_ext *);

/* Index of the first element >= key. */
static size_t extv_lower(const struct tc_extv *ev, const struct tc_ext *key, ext_cmp_fn cmp)
{
	size_t lo = 0, hi = ev->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp(&ev->v[mid], key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int extv_insert(struct tc_extv *ev, const struct tc_ext *e, ext_cmp_fn cmp)
{
	size_t i;

	if (ev->n == ev->cap) {
		size_t cap = ev->cap ? ev->cap * 2 : 64;
		struct tc_ext *v = realloc(ev->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ev->v = v;
		ev->cap = cap;
	}
	i = extv_lower(ev, e, cmp);
	memmove(&ev->v[i + 1], &ev->v[i], (ev->n - i) * sizeof(*e));
	ev->v[i] = *e;
	ev->n++;
	return 0;
}

static void extv_remove_at(struct tc_extv *ev, size_t i)
{
	memmove(&ev->v[i], &ev->v[i + 1], (ev->n - i - 1) * sizeof(ev->v[0]));
	ev->n--;
}

static void extv_remove(struct tc_extv *ev, const struct tc_ext *e, ext_cmp_fn cmp)
{
	size_t i = extv_lower(ev, e, cmp);

	if (i < ev->n && !cmp(&ev->v[i], e))
		extv_remove_at(ev, i);
}

/* Make room for total elements, so that later inserts cannot fail. */
static int extv_reserve(struct tc_extv *ev, size_t total)
{
	while (total > ev->cap) {
		size_t cap = ev->cap ? ev->cap * 2 : 64;
		struct tc_ext *v = realloc(ev->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		ev->v = v;
		ev->cap = cap;
	}
	return 0;
}

/* ---- classes ---- */

static int size_cmp(const void *a, const void *b)
{
	const struct tencache_size_count *x = a, *y = b;

	return x->size < y->size ? -1 : x->size > y->size;
}

static struct tc_class *class_by_size(struct tencache_arena *a, uint64_t size)
{
	unsigned lo = 0, hi = a->nr_classes;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;

		if (a->classes[mid].size == size)
			return &a->classes[mid];
		if (a->classes[mid].size < size)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct tc_class *class_by_off(struct tencache_arena *a, uint64_t off)
{
	unsigned lo = 0, hi = a->nr_classes;

	if (off >= a->class_bytes)
		return NULL;
	while (hi - lo > 1) {	/* last class with base <= off */
		unsigned mid = (lo + hi) / 2;

		if (a->classes[mid].base <= off)
			lo = mid;
		else
			hi = mid;
	}
	return &a->classes[lo];
}

static void arena_free_all(struct tencache_arena *a)
{
	unsigned i;

	for (i = 0; i < a->nr_classes; i++) {
		free(a->classes[i].free_stack);
		free(a->classes[i].req);
	}
	free(a->classes);
	free(a->by_off.v);
	free(a->by_size.v);
	free(a->live.v);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

TENCACHE_API int tencache_arena_create(struct tencache_arena **ap, uint64_t capacity,
				       uint64_t align, const struct tencache_size_count *hist,
				       unsigned nr)
{
	struct tencache_size_count *h = NULL;
	struct tencache_arena *a;
	unsigned i, n = 0;
	uint64_t off = 0;
	int ret;

	if (!align)
		align = 4096;
	if (!ap || (align & (align - 1)) || (nr && !hist))
		return -EINVAL;
	capacity = TC_ALIGN_DOWN(capacity, align);
	if (!capacity)
		return -EINVAL;
	if (nr > TC_MAX_CLASSES)
		return -E2BIG;

	/* Sort and merge the histogram by rounded size. */
	if (nr) {
		h = malloc(nr * sizeof(*h));
		if (!h)
			return -ENOMEM;
		for (i = 0; i < nr; i++) {
			if (!hist[i].size || !hist[i].count || hist[i].size > capacity) {
				ret = hist[i].size > capacity ? -ENOSPC : -EINVAL;
				goto err_hist;
			}
			h[i].size = TC_ALIGN_UP(hist[i].size, align);
			h[i].count = hist[i].count;
		}
		qsort(h, nr, sizeof(*h), size_cmp);
		for (i = 0; i < nr; i++) {
			if (n && h[n - 1].size == h[i].size) {
				h[n - 1].count += h[i].count;
				if (h[n - 1].count < h[i].count) {
					ret = -EOVERFLOW;
					goto err_hist;
				}
			} else {
				h[n++] = h[i];
			}
		}
		for (i = 0; i < n; i++) {
			if (h[i].count > UINT32_MAX) {
				ret = -E2BIG;
				goto err_hist;
			}
			if (h[i].count > (capacity - off) / h[i].size) {
				ret = -ENOSPC;
				goto err_hist;
			}
			off += h[i].size * h[i].count;
		}
	}

	a = calloc(1, sizeof(*a));
	if (!a) {
		ret = -ENOMEM;
		goto err_hist;
	}
	pthread_mutex_init(&a->lock, NULL);
	a->capacity = capacity;
	a->align = align;
	a->classes = calloc(n ? n : 1, sizeof(*a->classes));
	if (!a->classes)
		goto err_nomem;
	off = 0;
	for (i = 0; i < n; i++) {
		struct tc_class *c = &a->classes[i];
		uint64_t s;

		a->nr_classes = i + 1;
		c->size = h[i].size;
		c->slots = h[i].count;
		c->base = off;
		c->free_stack = malloc(c->slots * sizeof(*c->free_stack));
		c->req = calloc(c->slots, sizeof(*c->req));
		if (!c->free_stack || !c->req)
			goto err_nomem;
		/* Slot 0 on top, so that a fresh arena hands out ascending offsets. */
		for (s = 0; s < c->slots; s++)
			c->free_stack[s] = c->slots - 1 - s;
		c->nfree = c->slots;
		off += c->size * c->slots;
	}
	a->class_bytes = off;
	a->gbase = off;
	a->glen = capacity - off;
	a->gfree = a->glen;
	if (a->glen) {
		struct tc_ext e = { .off = a->gbase, .len = a->glen };

		if (extv_insert(&a->by_off, &e, ext_cmp_off) ||
		    extv_insert(&a->by_size, &e, ext_cmp_size))
			goto err_nomem;
	}
	free(h);
	*ap = a;
	return 0;

err_nomem:
	arena_free_all(a);
	ret = -ENOMEM;
err_hist:
	free(h);
	return ret;
}

TENCACHE_API void tencache_arena_destroy(struct tencache_arena *a)
{
	if (a)
		arena_free_all(a);
}

static void account_alloc(struct tencache_arena *a, uint64_t len, uint64_t req)
{
	a->used += len;
	a->requested += req;
	a->allocs++;
	if (a->used > a->high_water)
		a->high_water = a->used;
}

static int general_alloc(struct tencache_arena *a, uint64_t len, uint64_t req, uint64_t *off)
{
	struct tc_ext key = { .off = 0, .len = len }, e, live;
	size_t i;

	i = extv_lower(&a->by_size, &key, ext_cmp_size);
	if (i == a->by_size.n)
		return -ENOMEM;
	/*
	 * Free extents never outnumber live ones + 1, so room for live.n + 2
	 * of each lets every later free insert without allocating.
	 */
	if (extv_reserve(&a->live, a->live.n + 1) ||
	    extv_reserve(&a->by_off, a->live.n + 2) ||
	    extv_reserve(&a->by_size, a->live.n + 2))
		return -ENOMEM;
	if (a->high_min && len >= a->high_min) {
		/* big: the highest extent that fits, carved from its end */
		for (i = a->by_off.n; i-- > 0;)
			if (a->by_off.v[i].len >= len)
				break;
		e = a->by_off.v[i];
		extv_remove_at(&a->by_off, i);
		extv_remove(&a->by_size, &e, ext_cmp_size);
		if (e.len > len) {
			struct tc_ext rest = { .off = e.off, .len = e.len - len };

			extv_insert(&a->by_off, &rest, ext_cmp_off);
			extv_insert(&a->by_size, &rest, ext_cmp_size);
		}
		live = (struct tc_ext){ .off = e.off + e.len - len, .len = len, .req = req };
		extv_insert(&a->live, &live, ext_cmp_off);
		a->gused += len;
		a->gfree -= len;
		*off = live.off;
		return 0;
	}
	if (a->high_min) {
		/*
		 * two-ended: small ones pack from the low end (the lowest extent
		 * that fits), so a held small tensor does not split the space
		 * the big ones come down into
		 */
		for (i = 0; i < a->by_off.n; i++)
			if (a->by_off.v[i].len >= len)
				break;
		e = a->by_off.v[i];
		extv_remove_at(&a->by_off, i);
		extv_remove(&a->by_size, &e, ext_cmp_size);
	} else {
		e = a->by_size.v[i];
		extv_remove_at(&a->by_size, i);
		extv_remove(&a->by_off, &e, ext_cmp_off);
	}
	if (e.len > len) {
		struct tc_ext rest = { .off = e.off + len, .len = e.len - len };

		extv_insert(&a->by_off, &rest, ext_cmp_off);
		extv_insert(&a->by_size, &rest, ext_cmp_size);
	}
	live = (struct tc_ext){ .off = e.off, .len = len, .req = req };
	extv_insert(&a->live, &live, ext_cmp_off);
	a->gused += len;
	a->gfree -= len;
	*off = e.off;
	return 0;
}

TENCACHE_API int tencache_arena_alloc_at(struct tencache_arena *a, uint64_t size, uint64_t off)
{
	struct tc_ext key, e, live;
	uint64_t len;
	size_t i;
	int ret = 0;

	if (!a || !size || off % a->align)
		return -EINVAL;
	len = TC_ALIGN_UP(size, a->align);
	pthread_mutex_lock(&a->lock);
	if (off < a->gbase || off + len > a->gbase + a->glen || off + len < off) {
		ret = -EINVAL;	/* outside the best-fit region */
		goto out;
	}
	/* the free extent that starts at or before off must hold the range */
	key = (struct tc_ext){ .off = off + 1 };
	i = extv_lower(&a->by_off, &key, ext_cmp_off);
	if (!i || a->by_off.v[i - 1].off + a->by_off.v[i - 1].len < off + len) {
		ret = -EBUSY;
		goto out;
	}
	if (extv_reserve(&a->live, a->live.n + 1) ||
	    extv_reserve(&a->by_off, a->live.n + 3) ||
	    extv_reserve(&a->by_size, a->live.n + 3)) {
		ret = -ENOMEM;
		goto out;
	}
	e = a->by_off.v[i - 1];
	extv_remove_at(&a->by_off, i - 1);
	extv_remove(&a->by_size, &e, ext_cmp_size);
	if (off > e.off) {
		struct tc_ext lo = { .off = e.off, .len = off - e.off };

		extv_insert(&a->by_off, &lo, ext_cmp_off);
		extv_insert(&a->by_size, &lo, ext_cmp_size);
	}
	if (e.off + e.len > off + len) {
		struct tc_ext hi = { .off = off + len, .len = e.off + e.len - off - len };

		extv_insert(&a->by_off, &hi, ext_cmp_off);
		extv_insert(&a->by_size, &hi, ext_cmp_size);
	}
	live = (struct tc_ext){ .off = off, .len = len, .req = size };
	extv_insert(&a->live, &live, ext_cmp_off);
	a->gused += len;
	a->gfree -= len;
	account_alloc(a, len, size);
out:
	if (ret)
		a->failed++;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

TENCACHE_API int tencache_arena_set_high(struct tencache_arena *a, uint64_t min_size)
{
	if (!a)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	a->high_min = min_size ? TC_ALIGN_UP(min_size, a->align) : 0;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

TENCACHE_API int tencache_arena_alloc(struct tencache_arena *a, uint64_t size, uint64_t *off)
{
	struct tc_class *c;
	uint64_t len;
	int ret = 0;

	if (!a || !off || !size)
		return -EINVAL;
	if (size > a->capacity)
		return -ENOMEM;
	len = TC_ALIGN_UP(size, a->align);

	pthread_mutex_lock(&a->lock);
	c = class_by_size(a, len);
	if (c && c->nfree) {
		uint32_t slot = c->free_stack[--c->nfree];

		c->req[slot] = size;
		if (++c->used > c->high_water)
			c->high_water = c->used;
		a->class_used += len;
		*off = c->base + slot * c->size;
	} else {
		if (c)
			c->overflows++;
		ret = general_alloc(a, len, size, off);
	}
	if (!ret)
		account_alloc(a, len, size);
	else
		a->failed++;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

static int general_free(struct tencache_arena *a, uint64_t off)
{
	struct tc_ext key = { .off = off }, e;
	size_t i;

	i = extv_lower(&a->live, &key, ext_cmp_off);
	if (i == a->live.n || a->live.v[i].off != off)
		return -ENOENT;
	e = a->live.v[i];
	extv_remove_at(&a->live, i);
	a->gused -= e.len;
	a->gfree += e.len;
	a->used -= e.len;
	a->requested -= e.req;
	e.req = 0;

	/* Coalesce with the free neighbours. */
	i = extv_lower(&a->by_off, &e, ext_cmp_off);
	if (i < a->by_off.n && a->by_off.v[i].off == e.off + e.len) {
		struct tc_ext next = a->by_off.v[i];

		extv_remove_at(&a->by_off, i);
		extv_remove(&a->by_size, &next, ext_cmp_size);
		e.len += next.len;
	}
	if (i > 0 && a->by_off.v[i - 1].off + a->by_off.v[i - 1].len == e.off) {
		struct tc_ext prev = a->by_off.v[i - 1];

		extv_remove_at(&a->by_off, i - 1);
		extv_remove(&a->by_size, &prev, ext_cmp_size);
		e.off = prev.off;
		e.len += prev.len;
	}
	/* Cannot fail: room was reserved by the allocation. */
	extv_insert(&a->by_off, &e, ext_cmp_off);
	extv_insert(&a->by_size, &e, ext_cmp_size);
	return 0;
}

TENCACHE_API int tencache_arena_free(struct tencache_arena *a, uint64_t off)
{
	struct tc_class *c;
	int ret = 0;

	if (!a)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	c = class_by_off(a, off);
	if (c) {
		uint64_t slot = (off - c->base) / c->size;

		if ((off - c->base) % c->size || !c->req[slot]) {
			ret = -ENOENT;
		} else {
			a->requested -= c->req[slot];
			c->req[slot] = 0;
			c->free_stack[c->nfree++] = slot;
			c->used--;
			a->class_used -= c->size;
			a->used -= c->size;
		}
	} else {
		ret = general_free(a, off);
	}
	if (!ret)
		a->allocs--;
	pthread_mutex_unlock(&a->lock);
	return ret;
}

TENCACHE_API int tencache_arena_stats(struct tencache_arena *a, struct tencache_arena_stats *st)
{
	if (!a || !st)
		return -EINVAL;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&a->lock);
	st->capacity = a->capacity;
	st->alignment = a->align;
	st->used = a->used;
	st->requested = a->requested;
	st->high_water = a->high_water;
	st->allocs = a->allocs;
	st->nr_classes = a->nr_classes;
	st->class_bytes = a->class_bytes;
	st->class_used = a->class_used;
	st->general_bytes = a->glen;
	st->general_used = a->gused;
	st->general_free = a->gfree;
	st->largest_free = a->by_size.n ? a->by_size.v[a->by_size.n - 1].len : 0;
	st->free_extents = a->by_off.n;
	st->fragmentation = a->gfree ?
		(uint32_t)(1000 - (1000 * (unsigned __int128)st->largest_free) / a->gfree) : 0;
	st->failed = a->failed;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

TENCACHE_API int tencache_arena_class_stats(struct tencache_arena *a, unsigned idx,
					    struct tencache_class_stats *cs)
{
	struct tc_class *c;

	if (!a || !cs || idx >= a->nr_classes)
		return -EINVAL;
	pthread_mutex_lock(&a->lock);
	c = &a->classes[idx];
	cs->size = c->size;
	cs->slots = c->slots;
	cs->used = c->used;
	cs->high_water = c->high_water;
	cs->overflows = c->overflows;
	pthread_mutex_unlock(&a->lock);
	return 0;
}
