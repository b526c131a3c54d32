/* core.c - the library context (params with defaults), logging, and small
 * system helpers shared by the backends (meminfo, sysfs, prefault, NUMA). */
#include <numa.h>
#include <numaif.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

TENCACHE_API int tencache_init(struct tencache **tcp, const struct tencache_params *p)
{
	struct tencache *tc;
	unsigned i;

	if (!tcp)
		return -EINVAL;
	if (p) {
		for (i = 0; i < sizeof(p->__reserved) / sizeof(p->__reserved[0]); i++)
			if (p->__reserved[i])
				return -EINVAL;
		if (p->flags & ~(TENCACHE_F_NUMA_NODE | TENCACHE_F_NO_CUDA |
				 TENCACHE_F_NO_CUDA_REG))
			return -EINVAL;
		if (p->log_level < 0 || p->log_level > TENCACHE_LOG_DEBUG ||
		    p->pool_backend > TENCACHE_POOL_RESERVED ||
		    p->stage_backend > TENCACHE_STAGE_URING || p->gpu < 0)
			return -EINVAL;
		if (p->segment_size && p->segment_size % TC_2M)
			return -EINVAL;
		if (p->io_size && p->io_size % 4096)
			return -EINVAL;
		if ((p->flags & TENCACHE_F_NUMA_NODE) && p->numa_node < 0)
			return -EINVAL;
	}
	tc = calloc(1, sizeof(*tc));
	if (!tc)
		return -ENOMEM;
	if (p)
		tc->p = *p;
	if (!tc->p.log_level)
		tc->p.log_level = TENCACHE_LOG_INFO;
	if (!tc->p.segment_size)
		tc->p.segment_size = TC_DEF_SEGMENT;
	if (!tc->p.queue_depth)
		tc->p.queue_depth = TC_DEF_QUEUE_DEPTH;
	if (!tc->p.io_size)
		tc->p.io_size = TC_DEF_IO_SIZE;
	if (!tc->p.copy_chunk)
		tc->p.copy_chunk = TC_DEF_COPY_CHUNK;
	if (!tc->p.dev_path)
		tc->p.dev_path = "/dev/tencache";
	if (!(tc->p.flags & TENCACHE_F_NUMA_NODE))
		tc->p.numa_node = -1;
	if (tc->p.pool_file) {	/* the caller's string need not outlive init */
		tc->p.pool_file = strdup(tc->p.pool_file);
		if (!tc->p.pool_file) {
			free(tc);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&tc->lock, NULL);
	*tcp = tc;
	return 0;
}

TENCACHE_API void tencache_exit(struct tencache *tc)
{
	if (!tc)
		return;
	tc_cuda_unload(tc);
	pthread_mutex_destroy(&tc->lock);
	free((char *)tc->p.pool_file);
	free(tc);
}

void tc_log(struct tencache *tc, int level, const char *fmt, ...)
{
	static const char *names[] = { "", "", "error", "warning", "info", "debug" };
	char msg[1024];
	va_list ap;

	if (tc && (tc->p.log_level == TENCACHE_LOG_NONE || level > tc->p.log_level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (tc && tc->p.log_fn)
		tc->p.log_fn(tc->p.log_arg, level, msg);
	else
		fprintf(stderr, "tencache %s: %s\n", names[level], msg);
}

uint64_t tc_meminfo(const char *key)
{
	char line[256];
	size_t klen = strlen(key);
	unsigned long long kb;
	uint64_t ret = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':' &&
		    sscanf(line + klen + 1, "%llu", &kb) == 1) {
			ret = kb * 1024;
			break;
		}
	}
	fclose(f);
	return ret;
}

long tc_read_sysfs_long(const char *path, long dflt)
{
	FILE *f = fopen(path, "re");
	long v;

	if (!f)
		return dflt;
	if (fscanf(f, "%ld", &v) != 1)
		v = dflt;
	fclose(f);
	return v;
}

int tc_have_cap_ipc_lock(void)
{
	char line[256];
	unsigned long long caps = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &caps) == 1)
			break;
	fclose(f);
	return !!(caps & (1ULL << 14));	/* CAP_IPC_LOCK */
}

void tc_fmt_bytes(char *buf, size_t n, uint64_t b)
{
	if (b >= TC_GIB)
		snprintf(buf, n, "%.2f GiB", (double)b / TC_GIB);
	else if (b >= (1ULL << 20))
		snprintf(buf, n, "%.1f MiB", (double)b / (1 << 20));
	else
		snprintf(buf, n, "%llu B", (unsigned long long)b);
}

struct prefault_part {
	char *addr;
	uint64_t len;
	int err;
	int zero;	/* memset instead of faulting */
};

static void *prefault_thread(void *arg)
{
	struct prefault_part *pp = arg;
	uint64_t off;

	if (pp->zero) {
		memset(pp->addr, 0, pp->len);
		return NULL;
	}
	if (!madvise(pp->addr, pp->len, MADV_POPULATE_WRITE))
		return NULL;
	if (errno != EINVAL) {	/* EINVAL: kernel < 5.14 or a special mapping */
		pp->err = -errno;
		return NULL;
	}
	for (off = 0; off < pp->len; off += 4096)
		((volatile char *)pp->addr)[off] = 0;
	return NULL;
}

static int par_run(void *addr, uint64_t len, int zero)
{
	enum { MAX_THREADS = 16 };
	struct prefault_part parts[MAX_THREADS];
	pthread_t tids[MAX_THREADS];
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n, i, started = 0;
	uint64_t per;
	int ret = 0;

	/*
	 * One thread per 32 MiB, at most one per CPU: page zeroing (and, in a
	 * VM, the host's first touch) is the cost, and it scales with threads.
	 */
	n = len / (32ULL << 20);
	if (n > (unsigned)(ncpu > 0 ? ncpu : 1))
		n = ncpu > 0 ? ncpu : 1;
	if (n > MAX_THREADS)
		n = MAX_THREADS;
	if (n < 1)
		n = 1;
	per = TC_ALIGN_UP(len / n, TC_2M);
	for (i = 0; i < n; i++) {
		uint64_t off = per * i;

		parts[i].addr = (char *)addr + off;
		parts[i].len = off >= len ? 0 : (len - off < per ? len - off : per);
		parts[i].err = 0;
		parts[i].zero = zero;
	}
	for (i = 1; i < n; i++) {
		if (!parts[i].len || pthread_create(&tids[i], NULL, prefault_thread, &parts[i]))
			break;
		started = i;
	}
	for (i = started + 1; i < n; i++)	/* threads we could not start */
		prefault_thread(&parts[i]);
	prefault_thread(&parts[0]);
	for (i = 1; i <= started; i++)
		pthread_join(tids[i], NULL);
	for (i = 0; i < n; i++)
		if (parts[i].err && !ret)
			ret = parts[i].err;
	return ret;
}

int tc_prefault(void *addr, uint64_t len)
{
	return par_run(addr, len, 0);
}

/* memset(addr, 0, len) split over the same threads: one thread zeroes at a
 * few GB/s, far below what the memory takes (~100 GiB of state at start). */
void tc_par_zero(void *addr, uint64_t len)
{
	par_run(addr, len, 1);
}

int tc_bind_node(void *addr, uint64_t len, int node)
{
	unsigned long mask[16] = { 0 };

	if (node < 0)
		return 0;
	if (numa_available() < 0 || node > numa_max_node() ||
	    (size_t)node >= sizeof(mask) * 8)
		return -ENODEV;
	mask[node / (8 * sizeof(long))] |= 1UL << (node % (8 * sizeof(long)));
	if (mbind(addr, len, MPOL_PREFERRED, mask, sizeof(mask) * 8, 0))
		return -errno;
	return 0;
}

#define TC_HP_DIR "hugepages/hugepages-2048kB"

/* A 2 MiB huge page counter ("free_hugepages", ...), per node if node >= 0. */
long tc_hugetlb_count(const char *name, int node)
{
	char path[160];

	if (node >= 0)
		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/" TC_HP_DIR "/%s",
			 node, name);
	else
		snprintf(path, sizeof(path), "/sys/kernel/mm/" TC_HP_DIR "/%s", name);
	return tc_read_sysfs_long(path, -1);
}

long tc_hugetlb_free_pages(int node)
{
	long free_pages = -1, resv = tc_hugetlb_count("resv_hugepages", -1);

	if (resv < 0)
		resv = 0;
	if (node >= 0)	/* reservations are not per node: count them against this one */
		free_pages = tc_hugetlb_count("free_hugepages", node);
	if (free_pages < 0)
		free_pages = tc_hugetlb_count("free_hugepages", -1);
	return free_pages > resv ? free_pages - resv : 0;
}
