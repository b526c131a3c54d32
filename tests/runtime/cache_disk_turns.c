/* cache_disk_turns.c - NVMe reads and writes in turn (cache.c disk_turn),
 * in host mode with NVMe on, a random step (step_gen.h) whose plan moves
 * values both ways:
 * - with rates where both at once is no faster than in turn (1.8 GB/s
 *   reading, 2.6 writing, 2.0 both: an H100 machine's disk), the cache
 *   says so, its workers never start a job while the other's are in
 *   flight, reads and writes both ran, every value read is the one last
 *   written, and the timeline shows a worker's wait for its turn;
 * - where both at once is faster (4.0 GB/s), they do not take turns, and
 *   the values hold as well. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tencache.h"
#include "exec/exec.h"	/* disk_turns, disk_both */
#include "step_gen.h"
#include "test.h"

#define NT	32
#define NOPS	60

static uint64_t bytes[NT];
static uint32_t version[NT];
static struct t_op ops[NOPS];
static int said_turns;

static void log_line(void *arg, int level, const char *msg)
{
	if (strstr(msg, "NVMe reads and writes take turns"))
		said_turns = 1;
}

/* how many NVMe waits in the timeline at path waited for their turn */
static int turn_waits(const char *path)
{
	char line[4096];
	FILE *f = fopen(path, "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, "\"waited for\":\"its turn on the disk\"") != NULL;
	fclose(f);
	return n;
}

static void run(struct tencache *tc, const char *swap, const char *tl, double both)
{
	struct tencache_cache_params p = { .flags = TENCACHE_CACHE_HOST_MODE | TENCACHE_CACHE_TIMELINE,
					   .policy = TENCACHE_POLICY_OURS, .nvme_path = swap,
					   .bw = { 50e9, 50e9, 1.8e9, 2.6e9 },
					   .duplex_bw = { 85e9, both } };
	struct tencache_cache_stats st;
	struct tencache_cache *c = NULL;
	int waits;
	bool turns = both <= tc_disk_turns_rate(1.8e9, 2.6e9);

	said_turns = 0;
	T_EQ(t_nvme_steps(tc, &p, &c, NT, bytes, version, ops, NOPS, 8), 0);
	if (!c)
		return;
	T_EQ(tencache_cache_stats(c, &st, sizeof(st)), 0);
	T_EQ(tencache_cache_timeline(c, tl), 0);	/* the last step's */
	waits = turn_waits(tl);
	printf("both at once %.1f GB/s: %s; %llu MB read and %llu MB written; %llu jobs started beside the other's; %d waits for a turn in the last step\n",
	       both / 1e9, c->disk_turns ? "in turn" : "both at once",
	       (unsigned long long)st.link_bytes[2] >> 20, (unsigned long long)st.link_bytes[3] >> 20,
	       (unsigned long long)c->disk_both, waits);
	T_EQ(c->disk_turns, turns);
	T_EQ(said_turns, turns);
	T_CHECK(c->have_plan, "no plan ran");
	T_CHECK(st.link_bytes[2] > 0 && st.link_bytes[3] > 0, "NVMe read %llu, written %llu bytes",
		(unsigned long long)st.link_bytes[2], (unsigned long long)st.link_bytes[3]);
	if (turns)
		T_EQ(c->disk_both, 0);
	T_CHECK(turns ? waits > 0 : waits == 0, "%d waits for a turn in the timeline", waits);
	tencache_cache_destroy(c);
}

int main(void)
{
	char dir[] = "/var/tmp/tencache-turns.XXXXXX", swap[256], tl[256];
	struct tencache_params tp = { .flags = TENCACHE_F_NO_CUDA, .log_level = TENCACHE_LOG_INFO,
				      .log_fn = log_line, .pool_backend = TENCACHE_POOL_THP };
	struct tencache *tc;
	int r = t_swap_dir(dir, swap, sizeof(swap));

	if (r)
		return r;
	snprintf(tl, sizeof(tl), "%s/timeline.json", dir);
	T_EQ(tencache_init(&tc, &tp), 0);
	if (t_failures)
		return T_EXIT_FAIL;
	t_gen_step(5, NT, bytes, 32, NOPS, ops);
	run(tc, swap, tl, 2.0e9);
	run(tc, swap, tl, 4.0e9);
	unlink(swap);
	unlink(tl);
	rmdir(dir);
	tencache_exit(tc);
	return t_exit();
}
