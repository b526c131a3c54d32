/* pool_fallback.c - the userspace pools: THP + mlock, the automatic choice
 * (logged once, queryable), sizing, and the clear -ENOMEM messages. */
#include <errno.h>
#include <stdlib.h>
#include <linux/capability.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tencache.h"
#include "test.h"

#define MiB (1ULL << 20)

static char last_log[1024];
static int nr_logs, nr_pool_logs;

static void log_hook(void *arg, int level, const char *msg)
{
	(void)arg;
	nr_logs++;
	if (!strncmp(msg, "pool: ", 6) && level == TENCACHE_LOG_INFO)
		nr_pool_logs++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static struct tencache *ctx(unsigned backend, const char *dev)
{
	struct tencache_params p = { 0 };
	struct tencache *tc = NULL;

	p.log_fn = log_hook;
	p.pool_backend = backend;
	p.dev_path = dev;
	p.flags = TENCACHE_F_NO_CUDA;
	T_EQ(tencache_init(&tc, &p), 0);
	return tc;
}

static uint64_t vm_locked(void)
{
	char line[256];
	unsigned long long kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmLck: %llu", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

static void test_params(void)
{
	struct tencache_params p = { 0 };
	struct tencache *tc;

	T_EQ(tencache_init(NULL, NULL), -EINVAL);
	p.__reserved[3] = 1;
	T_EQ(tencache_init(&tc, &p), -EINVAL);
	p = (struct tencache_params){ .flags = 1u << 31 };
	T_EQ(tencache_init(&tc, &p), -EINVAL);
	p = (struct tencache_params){ .pool_backend = 99 };
	T_EQ(tencache_init(&tc, &p), -EINVAL);
	p = (struct tencache_params){ .segment_size = MiB };	/* not 2 MiB multiple */
	T_EQ(tencache_init(&tc, &p), -EINVAL);
	p = (struct tencache_params){ .flags = TENCACHE_F_NUMA_NODE, .numa_node = -2 };
	T_EQ(tencache_init(&tc, &p), -EINVAL);
	T_EQ(tencache_init(&tc, NULL), 0);
	tencache_exit(tc);
	tencache_exit(NULL);
}

static void test_thp(void)
{
	struct tencache *tc = ctx(TENCACHE_POOL_THP, NULL);
	struct tencache_pool *pool = NULL;
	struct tencache_pool_info info;
	struct tencache_arena_stats st;
	uint64_t locked0 = vm_locked(), i;
	char *a, *b;

	nr_pool_logs = 0;
	/* 64 MiB + 3 MiB asked: never more than asked, so 66 MiB. */
	T_EQ(tencache_pool_create(tc, &pool, 67 * MiB, NULL, 0), 0);
	if (!pool)
		goto out;
	T_EQ(nr_pool_logs, 1);
	T_EQ(tencache_pool_info(pool, &info), 0);
	T_EQ(info.backend, TENCACHE_POOL_THP);
	T_EQ(info.size, 66 * MiB);
	T_EQ(info.cuda_registered, 0);
	T_CHECK(((uintptr_t)info.base & (2 * MiB - 1)) == 0, "base %p not 2 MiB aligned", info.base);
	T_CHECK(strstr(info.reason, "thp") != NULL, "reason: %s", info.reason);
	T_CHECK(!strcmp(tencache_pool_backend_name(info.backend), "thp"), "name");
	T_CHECK(vm_locked() >= locked0 + 66 * MiB, "VmLck %llu", (unsigned long long)vm_locked());

	T_EQ(tencache_pool_alloc(pool, 10 * MiB, (void **)&a), 0);
	T_EQ(tencache_pool_alloc(pool, 100, (void **)&b), 0);
	T_CHECK(((uintptr_t)b & 4095) == 0, "buffers are 4 KiB aligned");
	T_CHECK(a >= (char *)info.base && a + 10 * MiB <= (char *)info.base + info.size, "in pool");
	for (i = 0; i < 10 * MiB; i += 4096)
		a[i] = (char)i;
	for (i = 0; i < 10 * MiB; i += 4096)
		if (a[i] != (char)i)
			break;
	T_EQ(i, 10 * MiB);
	T_EQ(tencache_pool_alloc(pool, 60 * MiB, (void **)&a + 0), -ENOMEM);
	T_EQ(tencache_pool_stats(pool, &st), 0);
	T_EQ(st.used, 10 * MiB + 4096);
	T_EQ(tencache_pool_free(pool, b), 0);
	T_EQ(tencache_pool_free(pool, b), -ENOENT);
	T_EQ(tencache_pool_free(pool, &st), -EINVAL);	/* not in the pool */
	T_EQ(tencache_pool_free(NULL, b), -EINVAL);
	T_EQ(tencache_pool_alloc(pool, 0, (void **)&b), -EINVAL);
	T_EQ(tencache_pool_info(pool, NULL), -EINVAL);
	tencache_pool_destroy(pool);
out:
	tencache_exit(tc);
}

static void test_auto_and_sizing(void)
{
	struct tencache *tc = ctx(TENCACHE_POOL_AUTO, "/nonexistent/tencache");
	struct tencache_pool *pool = NULL;
	struct tencache_pool_info info;
	struct tencache_size_count h[] = { { 3 * MiB, 4 } };

	T_EQ(tencache_pool_create(tc, &pool, MiB, NULL, 0), -EINVAL);	/* < 2 MiB */
	T_EQ(tencache_pool_create(tc, NULL, 8 * MiB, NULL, 0), -EINVAL);
	T_EQ(tencache_pool_create(tc, &pool, 8 * MiB, h, 1), -ENOSPC);	/* 12 MiB of classes */
	nr_pool_logs = 0;
	T_EQ(tencache_pool_create(tc, &pool, 16 * MiB, h, 1), 0);
	if (pool) {
		T_EQ(nr_pool_logs, 1);
		T_EQ(tencache_pool_info(pool, &info), 0);
		T_CHECK(info.backend == TENCACHE_POOL_HUGETLB || info.backend == TENCACHE_POOL_THP,
			"backend %u", info.backend);
		/* Why the module was passed over is part of the answer. */
		T_CHECK(strstr(info.reason, "/nonexistent/tencache") != NULL, "reason: %s",
			info.reason);
		T_CHECK(!strcmp(info.reason, last_log + 6), "the log line is the reason");
		tencache_pool_destroy(pool);
	}
	tencache_exit(tc);

	/* A forced module backend without the module is an error, not a fallback. */
	tc = ctx(TENCACHE_POOL_MODULE, "/nonexistent/tencache");
	T_EQ(tencache_pool_create(tc, &pool, 8 * MiB, NULL, 0), -ENOENT);
	tencache_exit(tc);
	/* A device that is not tencache: INFO fails, auto falls back. */
	tc = ctx(TENCACHE_POOL_AUTO, "/dev/null");
	pool = NULL;
	T_EQ(tencache_pool_create(tc, &pool, 8 * MiB, NULL, 0), 0);
	if (pool) {
		T_EQ(tencache_pool_info(pool, &info), 0);
		T_CHECK(info.backend != TENCACHE_POOL_MODULE, "backend %u", info.backend);
		T_CHECK(strstr(info.reason, "INFO") != NULL, "reason: %s", info.reason);
		tencache_pool_destroy(pool);
	}
	tencache_exit(tc);
}

static void test_memavailable_limit(void)
{
	struct tencache *tc = ctx(TENCACHE_POOL_THP, NULL);
	struct tencache_pool *pool = NULL;

	T_EQ(tencache_pool_create(tc, &pool, 1ULL << 50, NULL, 0), -ENOMEM);
	T_CHECK(strstr(last_log, "MemAvailable") != NULL, "message: %s", last_log);
	tencache_exit(tc);
}

/* In a child without CAP_IPC_LOCK and with a 4 MiB memlock limit. */
static void test_memlock_limit(void)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct data[2];
		struct rlimit rl = { 4 * MiB, 4 * MiB };
		struct tencache *tc;
		struct tencache_pool *pool = NULL;

		if (syscall(SYS_capget, &hdr, data) == 0) {
			data[0].effective &= ~(1u << CAP_IPC_LOCK);
			syscall(SYS_capset, &hdr, data);
		}
		if (setrlimit(RLIMIT_MEMLOCK, &rl))
			_exit(77);
		tc = ctx(TENCACHE_POOL_THP, NULL);
		T_EQ(tencache_pool_create(tc, &pool, 64 * MiB, NULL, 0), -ENOMEM);
		T_CHECK(strstr(last_log, "memlock") != NULL, "message: %s", last_log);
		tencache_exit(tc);
		_exit(t_exit());
	}
	T_CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
	if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 77)
		fprintf(stderr, "memlock limit check skipped (setrlimit refused)\n");
	else
		T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

int main(void)
{
	/* A reservation the machine's user made must not change the auto choice. */
	setenv("TENCACHE_POOL_FILE", "/nonexistent/tencache-pool", 1);
	test_params();
	test_thp();
	test_auto_and_sizing();
	test_memavailable_limit();
	test_memlock_limit();
	return t_exit();
}
