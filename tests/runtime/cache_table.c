/* cache_table.c - table_path end to end in host mode: a run profiles and
 * saves its learnt step; a second run with the same tensors loads it and
 * runs its first step from a plan (no warm-up), with every value checked;
 * other tensors (signature mismatch), a damaged file and an unwritable path
 * are ignored with the warm-up done as usual, and the file replaced. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tencache.h"
#include "test.h"

#define NT	12
#define KiB	1024ULL

static uint64_t bytes[NT];
static uint32_t version[NT];

static void fill(uint32_t *p, int id)
{
	t_tensor_fill(p, bytes[id], id, version[id]);
}

static int check(const uint32_t *p, int id)
{
	return t_tensor_check(p, bytes[id], id, version[id]);
}

/* A step: op k reads tensor k and k+1 (mod NT) and rewrites tensor k. */
static int step(struct tencache_cache *c)
{
	int ret = tencache_step_begin(c);

	for (int k = 0; k < NT && !ret; k++) {
		int a = k, b = (k + 1) % NT;
		void *pa, *pb;

		ret = tencache_acquire(c, a, TENCACHE_ACQ_READ | TENCACHE_ACQ_WRITE, NULL, &pa);
		ret = ret ?: tencache_acquire(c, b, TENCACHE_ACQ_READ, NULL, &pb);
		if (ret)
			break;
		if (!check(pa, a) || !check(pb, b)) {
			fprintf(stderr, "op %d: stale value\n", k);
			return -EIO;
		}
		version[a]++;
		fill(pa, a);
		ret = tencache_release(c, a, NULL, 10000);
		ret = ret ?: tencache_release(c, b, NULL, 0);
	}
	return ret ?: tencache_step_end(c);
}

/* Runs nsteps; returns the stats through st. */
static int run(struct tencache *tc, const char *table, int nsteps,
	       struct tencache_cache_stats *st)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .table_path = table };
	struct tencache_cache *c;
	uint64_t total = 0;
	int ret = 0;

	for (int i = 0; i < NT; i++)
		total += bytes[i];
	p.gpu_budget = total / 3;
	T_EQ(tencache_cache_create(tc, &c, &p), 0);
	for (int i = 0; i < NT; i++)
		T_EQ(tencache_tensor_register(c, bytes[i], TENCACHE_ROLE_PARAM_FP16), i);
	for (int i = 0; i < NT && !ret; i++) {
		void *h;

		version[i] = 0;
		ret = tencache_tensor_host(c, i, &h);
		if (!ret)
			fill(h, i);
	}
	for (int s = 0; s < nsteps && !ret; s++)
		ret = step(c);
	T_EQ(tencache_cache_stats(c, st, sizeof(*st)), 0);
	tencache_cache_destroy(c);
	return ret;
}

int main(void)
{
	char dir[] = "/tmp/tc-cache-table-XXXXXX", path[256], bad[300];
	struct tencache_cache_stats st;
	struct tencache *tc;
	struct stat sb;
	FILE *f;

	T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof(path), "%s/step.json", dir);
	for (int i = 0; i < NT; i++)
		bytes[i] = (4 + (i * 7) % 13) * 4 * KiB;
	T_EQ(tencache_init(&tc, NULL), 0);

	/* 1: no file yet: profiles one step, plans the rest, saves the table */
	T_EQ(run(tc, path, 4, &st), 0);
	T_EQ(st.table_loads, 0);
	T_EQ(st.table_saves, 1);
	T_EQ(st.planned_steps, 3);
	T_CHECK(stat(path, &sb) == 0 && sb.st_size > 0, "no table saved at %s", path);

	/* 2: same tensors: the first step already runs from the plan */
	T_EQ(run(tc, path, 3, &st), 0);
	T_EQ(st.table_loads, 1);
	T_EQ(st.planned_steps, 3);
	T_EQ(st.reprofiles, 0);

	/* 3: other tensors: the signature differs; profiles and replaces it */
	bytes[3] += 4 * KiB;
	T_EQ(run(tc, path, 3, &st), 0);
	T_EQ(st.table_loads, 0);
	T_EQ(st.table_saves, 1);
	T_EQ(st.planned_steps, 2);
	T_EQ(run(tc, path, 2, &st), 0);	/* the replacement is loadable */
	T_EQ(st.table_loads, 1);
	T_EQ(st.planned_steps, 2);

	/* 4: a damaged file is ignored and replaced */
	f = fopen(path, "w");
	T_CHECK(f != NULL, "open %s", path);
	if (f) {
		fputs("{\"version\": 1, \"signature\": ", f);
		fclose(f);
	}
	T_EQ(run(tc, path, 2, &st), 0);
	T_EQ(st.table_loads, 0);
	T_EQ(st.planned_steps, 1);
	T_EQ(st.table_saves, 1);

	/* 5: a path that cannot be written: the run is fine, nothing saved */
	snprintf(bad, sizeof(bad), "%s/no-such-dir/step.json", dir);
	T_EQ(run(tc, bad, 2, &st), 0);
	T_EQ(st.table_saves, 0);
	T_EQ(st.planned_steps, 1);

	tencache_exit(tc);
	unlink(path);
	rmdir(dir);
	return t_exit();
}
