/*
 * stack-sample.c - a sampling profiler of one thread, loaded with LD_PRELOAD
 * into a program whose main thread is to be watched (the replay's caller):
 * a thread of its own sends it SIGPROF every STACK_SAMPLE_US (default 2000)
 * microseconds, the handler keeps the thread's call stack (backtrace) in a
 * ring of the last STACK_SAMPLE_N (default 16384) samples, and at exit the
 * ring and the process's mappings go to STACK_SAMPLE_OUT.PID. Only a process
 * whose name is STACK_SAMPLE_COMM (default tencache-bench) is sampled, so
 * the variable may reach a whole script. tools/gpu/stack-report.py turns
 * the file into where the thread spent its time. A debugging aid for the
 * GPU machine, where perf and gdb may be missing.
 *   gcc -O2 -shared -fPIC -o stack-sample.so tools/gpu/stack-sample.c -lpthread
 *   STACK_SAMPLE_OUT=/tmp/st LD_PRELOAD=$PWD/stack-sample.so PROGRAM ...
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define DEPTH	48

struct sample {
	uint64_t ns;
	int n;
	void *pc[DEPTH];
};

static struct sample *ring;
static uint64_t ring_n, taken;	/* taken: samples written (the ring's head) */
static pid_t pid;
static pthread_t th;
static volatile int quit;
static long period_us;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void on_prof(int sig)
{
	struct sample *s = &ring[taken % ring_n];

	(void)sig;
	s->ns = now_ns();
	s->n = backtrace(s->pc, DEPTH);
	__atomic_add_fetch(&taken, 1, __ATOMIC_RELEASE);
}

static void *ticker(void *arg)
{
	struct timespec ts = { period_us / 1000000, (period_us % 1000000) * 1000 };

	(void)arg;
	while (!quit) {
		nanosleep(&ts, NULL);
		syscall(SYS_tgkill, pid, pid, SIGPROF);	/* the main thread */
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	const char *want = getenv("STACK_SAMPLE_COMM"), *out = getenv("STACK_SAMPLE_OUT");
	char comm[64] = "";
	struct sigaction sa;
	FILE *f;
	void *warm[4];

	if (!out)
		return;
	f = fopen("/proc/self/comm", "r");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	if (strcmp(comm, want ? want : "tencache-bench"))
		return;
	period_us = getenv("STACK_SAMPLE_US") ? atol(getenv("STACK_SAMPLE_US")) : 2000;
	ring_n = getenv("STACK_SAMPLE_N") ? strtoull(getenv("STACK_SAMPLE_N"), NULL, 0) : 16384;
	if (period_us <= 0 || !ring_n)
		return;
	ring = calloc(ring_n, sizeof(*ring));
	if (!ring)
		return;
	backtrace(warm, 4);	/* loads the unwinder now, not in the handler */
	pid = getpid();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_prof;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGPROF, &sa, NULL);
	if (pthread_create(&th, NULL, ticker, NULL))
		return;
	/* the other threads leave SIGPROF to the main one */
	fprintf(stderr, "stack-sample: sampling %s (pid %d) every %ld us\n", comm, pid, period_us);
}

__attribute__((destructor)) static void stop(void)
{
	char path[4096], line[4096];
	uint64_t n, first;
	FILE *f, *m;

	if (!ring || !th)
		return;
	quit = 1;
	pthread_join(th, NULL);
	signal(SIGPROF, SIG_IGN);
	snprintf(path, sizeof(path), "%s.%d", getenv("STACK_SAMPLE_OUT"), pid);
	f = fopen(path, "w");
	if (!f)
		return;
	n = __atomic_load_n(&taken, __ATOMIC_ACQUIRE);
	first = n > ring_n ? n - ring_n : 0;
	fprintf(f, "# samples %llu of %llu, every %ld us, now %llu\n", (unsigned long long)(n - first),
		(unsigned long long)n, period_us, (unsigned long long)now_ns());
	for (uint64_t i = first; i < n; i++) {
		struct sample *s = &ring[i % ring_n];

		fprintf(f, "S %llu", (unsigned long long)s->ns);
		for (int k = 0; k < s->n; k++)
			fprintf(f, " %p", s->pc[k]);
		fputc('\n', f);
	}
	m = fopen("/proc/self/maps", "r");
	while (m && fgets(line, sizeof(line), m))
		fprintf(f, "M %s", line);
	if (m)
		fclose(m);
	fclose(f);
	fprintf(stderr, "stack-sample: %llu samples in %s\n", (unsigned long long)(n - first), path);
}
