/* pool_hugetlb.c - the memfd_create(MFD_HUGETLB) pool. Needs 2 MiB huge pages:
 * as root it reserves a few for the test (and gives them back), otherwise it
 * skips when too few are free. */
#include <errno.h>
#include <string.h>

#include "tencache.h"
#include "test.h"

#define MiB (1ULL << 20)
#define NR "/proc/sys/vm/nr_hugepages"
#define FREE "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
#define RESV "/sys/kernel/mm/hugepages/hugepages-2048kB/resv_hugepages"
#define PAGES 16

static int write_long(const char *path, long v)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return -1;
	ok = fprintf(f, "%ld\n", v) > 0;
	return (fclose(f) == 0 && ok) ? 0 : -1;
}

int main(void)
{
	struct tencache_params p = { .pool_backend = TENCACHE_POOL_HUGETLB,
				     .flags = TENCACHE_F_NO_CUDA };
	struct tencache *tc;
	struct tencache_pool *pool = NULL;
	struct tencache_pool_info info;
	long nr0 = t_read_long(NR), avail = t_read_long(FREE) - t_read_long(RESV);
	int raised = 0;
	char *buf;

	if (avail < PAGES) {
		if (nr0 < 0 || write_long(NR, nr0 + PAGES - avail) ||
		    t_read_long(FREE) - t_read_long(RESV) < PAGES) {
			if (nr0 >= 0)
				write_long(NR, nr0);
			printf("fewer than %d free 2 MiB huge pages, and cannot reserve them\n", PAGES);
			return T_EXIT_SKIP;
		}
		raised = 1;
	}

	T_EQ(tencache_init(&tc, &p), 0);
	/* More pages than are free: a clear refusal naming the limit. */
	T_CHECK(tencache_pool_create(tc, &pool, (1ULL << 40), NULL, 0) < 0, "too big");
	pool = NULL;
	T_EQ(tencache_pool_create(tc, &pool, PAGES * 2 * MiB, NULL, 0), 0);
	if (pool) {
		T_EQ(tencache_pool_info(pool, &info), 0);
		T_EQ(info.backend, TENCACHE_POOL_HUGETLB);
		T_EQ(info.size, PAGES * 2 * MiB);
		T_CHECK(strstr(info.reason, "hugetlb") != NULL, "reason: %s", info.reason);
		/* The pages are taken at creation, not at first touch. */
		T_CHECK(t_read_long(FREE) - t_read_long(RESV) <= avail + (raised ? PAGES - avail : 0) - PAGES,
			"free pages did not drop");
		T_EQ(tencache_pool_alloc(pool, 3 * MiB, (void **)&buf), 0);
		memset(buf, 0xa5, 3 * MiB);
		T_CHECK(buf[3 * MiB - 1] == (char)0xa5, "memory is usable");
		T_EQ(tencache_pool_free(pool, buf), 0);
		tencache_pool_destroy(pool);
	}
	tencache_exit(tc);
	if (raised)
		write_long(NR, nr0);
	return t_exit();
}
