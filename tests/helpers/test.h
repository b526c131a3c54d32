/* test.h - shared helpers for the userspace test programs (liburing style). */
#ifndef TENCACHE_TEST_H
#define TENCACHE_TEST_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Exit codes understood by tests/runner.sh. */
enum t_test_result {
	T_EXIT_PASS = 0,
	T_EXIT_FAIL = 1,
	T_EXIT_SKIP = 77,
};

/* A number from a sysfs/procfs file, -1 if it cannot be read. */
static inline long t_read_long(const char *path)
{
	FILE *f = fopen(path, "r");
	long v = -1;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

#ifdef O_DIRECT	/* _GNU_SOURCE */
/* Whether files in dir take O_DIRECT, which the NVMe tier's swap file needs. */
static inline int t_odirect_ok(const char *dir)
{
	char probe[512];
	int fd;

	snprintf(probe, sizeof(probe), "%s/tencache-odirect-probe-%d", dir, (int)getpid());
	fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
	if (fd < 0)
		return 0;
	close(fd);
	unlink(probe);
	return 1;
}

/* A fresh directory from template dir (mkdtemp) for a swap file, its path
 * into swap: 0, else the test's exit code (T_EXIT_SKIP, said and removed,
 * where it takes no O_DIRECT). */
static inline int t_swap_dir(char *dir, char *swap, size_t n)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return T_EXIT_FAIL;
	}
	if (!t_odirect_ok(dir)) {
		printf("# %s takes no O_DIRECT: skipped\n", dir);
		rmdir(dir);
		return T_EXIT_SKIP;
	}
	snprintf(swap, n, "%s/swap", dir);
	return 0;
}
#endif

/* Print a failure with its location and remember it; tests end with t_exit(). */
static int t_failures;
#define T_CHECK(cond, ...)                                                   \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			t_failures++;                                        \
		}                                                            \
	} while (0)
#define T_EQ(a, b)                                                           \
	T_CHECK((long long)(a) == (long long)(b), "%s = %lld, expected %lld", \
		#a, (long long)(a), (long long)(b))

/*
 * A tensor's contents at a version: word i of tensor id, so that a stale
 * copy, another tensor's bytes or a shifted range all fail t_tensor_check.
 */
static inline uint32_t t_tensor_word(int id, uint32_t version, uint64_t i)
{
	return ((uint32_t)id * 100000u + version) ^ (uint32_t)(i * 2654435761u);
}

static inline void t_tensor_fill(uint32_t *p, uint64_t bytes, int id, uint32_t version)
{
	for (uint64_t i = 0; i < bytes / 4; i++)
		p[i] = t_tensor_word(id, version, i);
}

static inline int t_tensor_check(const uint32_t *p, uint64_t bytes, int id, uint32_t version)
{
	for (uint64_t i = 0; i < bytes / 4; i++)
		if (p[i] != t_tensor_word(id, version, i))
			return 0;
	return 1;
}

static inline int t_exit(void)
{
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}

#endif
