// SPDX-License-Identifier: GPL-2.0
/*
 * poolbench.c - time to get 256 MiB of pinned, mapped, touched memory:
 * tencache ALLOC + mmap (2 MiB PMD faults) against mmap + mlock of anonymous
 * memory, side by side in one run, as a ratio. Run in the QEMU guest by
 * tests/vm/run-vm.sh (absolute times under TCG mean little; the ratio and
 * the fault counts do). Prints TAP: one "ok" line when all runs worked.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uapi/tencache.h>

#define SIZE (256ULL << 20)
#define RUNS 5

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long minflt(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void touch(volatile char *p, size_t len, size_t step)
{
	for (size_t off = 0; off < len; off += step)
		p[off] = 1;
}

/* ALLOC + mmap + first touch of every 4 KiB page; -1 on error */
static double bench_pool(int fd, long *faults)
{
	struct tencache_alloc a = { .size = sizeof(a), .length = SIZE,
				    .node = TENCACHE_NODE_ANY };
	struct tencache_free f = { .size = sizeof(f) };
	double t0 = now(), t;
	long f0 = minflt();
	char *p;

	if (ioctl(fd, TENCACHE_ALLOC, &a))
		return -1;
	p = mmap(NULL, a.alloc_length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 a.mmap_offset);
	if (p == MAP_FAILED)
		return -1;
	touch(p, SIZE, 4096);
	t = now() - t0;
	*faults = minflt() - f0;
	munmap(p, SIZE);
	f.handle = a.handle;
	if (ioctl(fd, TENCACHE_FREE, &f))
		return -1;
	return t;
}

static double bench_mlock(long *faults)
{
	double t0 = now(), t;
	long f0 = minflt();
	char *p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mlock(p, SIZE))
		return -1;
	touch(p, SIZE, 4096);
	t = now() - t0;
	*faults = minflt() - f0;
	munmap(p, SIZE);
	return t;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int set_reserve(const char *mb)
{
	int fd = open("/sys/class/misc/tencache/reserved_mb", O_WRONLY);
	int ok = fd >= 0 && write(fd, mb, strlen(mb)) == (ssize_t)strlen(mb);

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

int main(void)
{
	double cold[RUNS], warm[RUNS], lock[RUNS];
	long fc = 0, fw = 0, fl = 0;
	char res0[32] = "0";
	int fd, i, bad = 0;
	FILE *f;

	fd = open(TENCACHE_DEV_PATH, O_RDWR);
	if (fd < 0) {
		printf("ok 1 - poolbench # SKIP %s: %s\n", TENCACHE_DEV_PATH, strerror(errno));
		return 4;
	}
	f = fopen("/sys/class/misc/tencache/reserved_mb", "r");
	if (!f || !fgets(res0, sizeof(res0), f))
		bad = 1;
	if (f)
		fclose(f);
	res0[strcspn(res0, "\n")] = 0;
	for (i = 0; i < RUNS && !bad; i++) {
		/* cold: blocks come from the kernel; warm: from the reservation */
		bad |= set_reserve("0");
		cold[i] = bench_pool(fd, &fc);
		bad |= set_reserve("256");
		warm[i] = bench_pool(fd, &fw);
		lock[i] = bench_mlock(&fl);
		bad |= cold[i] < 0 || warm[i] < 0 || lock[i] < 0;
	}
	bad |= set_reserve(res0);
	if (bad) {
		printf("not ok 1 - poolbench: a run failed (%s)\n", strerror(errno));
		return 1;
	}
	qsort(cold, RUNS, sizeof(double), cmp);
	qsort(warm, RUNS, sizeof(double), cmp);
	qsort(lock, RUNS, sizeof(double), cmp);
	printf("# poolbench: pinned + mapped + touched 256 MiB, median of %d runs\n", RUNS);
	printf("# %-34s %10s %9s %14s\n", "method", "ms", "faults", "vs mmap+mlock");
	printf("# %-34s %10.2f %9ld %13.2fx\n", "tencache ALLOC+mmap (reserved)",
	       warm[RUNS / 2] * 1e3, fw, lock[RUNS / 2] / warm[RUNS / 2]);
	printf("# %-34s %10.2f %9ld %13.2fx\n", "tencache ALLOC+mmap (from kernel)",
	       cold[RUNS / 2] * 1e3, fc, lock[RUNS / 2] / cold[RUNS / 2]);
	printf("# %-34s %10.2f %9ld %13.2fx\n", "mmap+mlock (anonymous, baseline)",
	       lock[RUNS / 2] * 1e3, fl, 1.0);
	printf("ok 1 - poolbench\n");
	return 0;
}
