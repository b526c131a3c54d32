/* cache_disk_rates.c - the disk's time in flight (st.disk_busy_ns,
 * disk_both_ns) and the warning for a disk slower than planned (cache.c
 * slow_disk_check), in host mode with NVMe on a real swap file and a
 * random step (step_gen.h) whose plan moves values both ways:
 * - given rates far above any disk's (1000 GB/s), the planned steps' reads
 *   and writes each spend time in flight, their bytes over it are a real
 *   disk's rate (under 1000 GB/s), never both at once (the disk takes
 *   turns at these rates), and the cache warns once, naming the rates;
 * - given rates far below (0.02 GB/s), it does not warn, and the values
 *   read are the ones last written either way. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "step_gen.h"
#include "test.h"

#define NT	24
#define NOPS	48

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];
static int warned;

static void log_line(void *arg, int level, const char *msg)
{
	if (strstr(msg, "the disk read at") && strstr(msg, "sustained rates")) {
		warned++;
		T_EQ(level, TENCACHE_LOG_WARN);
		printf("  logged: %s\n", msg);
	}
}

static void run(struct tencache *tc, const char *swap, double rate)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE,
					   .policy = TENCACHE_POLICY_OURS, .nvme_path = swap,
					   .bw = { 50e9, 50e9, rate, rate },
					   .duplex_bw = { 85e9, rate } };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	double got[2];
	bool fast = rate > 100e9;

	warned = 0;
	T_EQ(t_nvme_steps(tc, &p, &c, NT, bytes, version, ops, NOPS, 8), 0);
	if (!c)
		return;
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	for (int w = 0; w < 2; w++)
		got[w] = st.disk_busy_ns[w] ? (double)st.link_bytes[2 + w] / st.disk_busy_ns[w] : 0;
	printf("given %.2f GB/s: %llu MB read in %.1f ms (%.2f GB/s), %llu MB written in %.1f ms (%.2f GB/s), both at once %.1f ms; %llu of %llu planned steps slow, %d warnings\n",
	       rate / 1e9, (unsigned long long)st.link_bytes[2] >> 20, st.disk_busy_ns[0] / 1e6,
	       got[0], (unsigned long long)st.link_bytes[3] >> 20, st.disk_busy_ns[1] / 1e6, got[1],
	       st.disk_both_ns / 1e6, (unsigned long long)st.disk_slow_steps,
	       (unsigned long long)st.planned_steps, warned);
	T_CHECK(st.planned_steps > 0, "no planned step");
	T_CHECK(st.link_bytes[2] > 0 && st.link_bytes[3] > 0, "NVMe read %llu, written %llu bytes",
		(unsigned long long)st.link_bytes[2], (unsigned long long)st.link_bytes[3]);
	for (int w = 0; w < 2; w++)
		T_CHECK(st.disk_busy_ns[w] > 0 && got[w] < 1000, "%s: %llu ns in flight, %.2f GB/s",
			w ? "writes" : "reads", (unsigned long long)st.disk_busy_ns[w], got[w]);
	T_EQ(st.disk_both_ns, 0);	/* in turn */
	if (fast) {
		T_CHECK(st.disk_slow_steps > 0, "no step was slow at %.0f GB/s", rate / 1e9);
		T_EQ(warned, 1);
	} else {
		T_EQ(st.disk_slow_steps, 0);
		T_EQ(warned, 0);
	}
	tencache_cache_destroy(c);
}

int main(void)
{
	char dir[] = "/var/tmp/tencache-rates.XXXXXX", swap[256];
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_INFO,
				      .log_fn = log_line, .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;
	int r = t_swap_dir(dir, swap, sizeof(swap));

	if (r)
		return r;
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	t_gen_step(7, NT, bytes, 4096, NOPS, ops);	/* up to 16 MiB each */
	run(tc, swap, 1000e9);
	run(tc, swap, 0.02e9);
	unlink(swap);
	rmdir(dir);
	tencache_exit(tc);
	return t_exit();
}
