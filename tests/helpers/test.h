/* test.h - shared helpers for the userspace test programs (liburing style). */
#ifndef TENCACHE_TEST_H
#define TENCACHE_TEST_H

#include <stdio.h>
#include <stdlib.h>

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

static inline int t_exit(void)
{
	return t_failures ? T_EXIT_FAIL : T_EXIT_PASS;
}

#endif
