/*
 * tencache-ctl.c - administration of tencache's persistent state:
 *   reserve SIZE   make, grow or shrink the caller's reservation (huge pages
 *                  on a hugetlbfs mount, faulted and zeroed once, that later
 *                  pools map at once: tencache_reserve)
 *   release        give the reservation's pages back (tencache_reserve_release)
 *   status         reservations, huge page counters, the module's counters
 * Exit 0 done, 1 error, 2 usage.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tencache.h"
#include "internal.h"	/* tc_hugetlbfs_mounts, tc_hugetlb_count */

#define MiB (1ULL << 20)

static const char *prog = "tencache-ctl";
static int quiet;

static int usage(FILE *f)
{
	fprintf(f,
		"usage: %s reserve SIZE [--node N] [--dir DIR] [--zero] [--quiet]\n"
		"       %s release [--node N] [--dir DIR]\n"
		"       %s status [--dir DIR]\n"
		"\n"
		"reserve  make, grow or shrink your reservation to SIZE (K, M, G or T suffix,\n"
		"         powers of 1024; at least 2M, rounded up to 2M): a file of 2 MiB huge\n"
		"         pages on a hugetlbfs mount, faulted and zeroed now, once, so that later\n"
		"         tencache pools map them instead of faulting and zeroing new pages.\n"
		"         --node N  pages on NUMA node N (one file per node); default any node\n"
		"         --dir D   the hugetlbfs mount (default: where the reservation is, else\n"
		"                   the first writable 2 MiB hugetlbfs mount in /proc/mounts)\n"
		"         --zero    also zero the pages kept (pages are NOT zeroed between runs:\n"
		"                   a run sees what your previous run left)\n"
		"release  remove your reservation; its pages go back to the kernel\n"
		"status   hugetlbfs mounts, reservations, huge page counters, module counters\n"
		"\n"
		"Setup (root), e.g. for 32 GiB:\n"
		"  mkdir -p /dev/hugepages; mount -t hugetlbfs -o pagesize=2M none /dev/hugepages\n"
		"  echo 16400 > /proc/sys/vm/nr_hugepages\n"
		"Exit status: 0 done, 1 error, 2 usage.\n",
		prog, prog, prog);
	return 2;
}

static void log_fn(void *arg, int level, const char *msg)
{
	(void)arg;
	if (level <= TENCACHE_LOG_WARN)
		fprintf(stderr, "%s: %s%s\n", prog, level == TENCACHE_LOG_ERR ? "" : "warning: ",
			msg);
	else if (!quiet)
		fprintf(stderr, "%s: %s\n", prog, msg);
}

/* "32G", "512M", "1.5T", "4194304"; 0 on a bad size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	uint64_t mul = 1;

	if (end == s || v <= 0)
		return 0;
	switch (*end) {
	case 'k': case 'K': mul = 1ULL << 10; end++; break;
	case 'm': case 'M': mul = 1ULL << 20; end++; break;
	case 'g': case 'G': mul = 1ULL << 30; end++; break;
	case 't': case 'T': mul = 1ULL << 40; end++; break;
	}
	if (mul > 1 && (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "ib")))
		end += strlen(end);
	if (*end || v * mul > (double)(1ULL << 56))
		return 0;
	return (uint64_t)(v * mul);
}

static void fmt(char *buf, size_t n, uint64_t b)
{
	tc_fmt_bytes(buf, n, b);
}

static int parse_opts(int argc, char **argv, int *node, const char **dir, int *zero)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "dir", required_argument, NULL, 'd' },
		{ "zero", no_argument, NULL, 'z' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "n:d:zqh", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			*node = strtol(optarg, &end, 10);
			if (end == optarg || *end || *node < -1) {
				fprintf(stderr, "%s: --node %s: not a node number\n", prog, optarg);
				return 2;
			}
			break;
		case 'd': *dir = optarg; break;
		case 'z':
			if (!zero)
				return usage(stderr);
			*zero = 1;
			break;
		case 'q': quiet = 1; break;
		case 'h': usage(stdout); return 3;
		default: return usage(stderr);
		}
	}
	return 0;
}

static const char *explain(int err)
{
	switch (err) {
	case -EINVAL: return "invalid argument";
	case -EBUSY: return "in use by a running tencache pool";
	case -EPERM: return "not yours to use";
	case -ENOMEM: return "too few free huge pages";
	default: return strerror(-err);
	}
}

static int cmd_reserve(int argc, char **argv)
{
	struct tencache_params p = { .log_fn = log_fn, .log_level = TENCACHE_LOG_INFO,
				     .flags = TENCACHE_F_NO_CUDA };
	struct tencache_reservation r;
	struct tencache *tc;
	const char *dir = NULL;
	int node = -1, zero = 0, ret;
	uint64_t bytes;
	struct timespec t0, t1;
	char a[32], b[32], nd[16];
	double s;

	ret = parse_opts(argc, argv, &node, &dir, &zero);
	if (ret)
		return ret == 3 ? 0 : ret;
	if (optind + 1 != argc) {
		fprintf(stderr, "%s reserve: give one SIZE, e.g. 32G\n", prog);
		return usage(stderr);
	}
	bytes = parse_size(argv[optind]);
	if (!bytes) {
		fprintf(stderr, "%s reserve: %s: not a size (e.g. 512M, 32G)\n", prog, argv[optind]);
		return 2;
	}
	if (bytes < 2 * MiB) {
		fprintf(stderr, "%s reserve: %s is below one 2 MiB page (did you mean %sG?)\n",
			prog, argv[optind], argv[optind]);
		return 2;
	}
	if (tencache_init(&tc, &p)) {
		fprintf(stderr, "%s: tencache_init failed\n", prog);
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = tencache_reserve(tc, dir, bytes, node, zero ? TENCACHE_RESERVE_ZERO : 0, &r);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	tencache_exit(tc);
	if (ret) {
		fprintf(stderr, "%s reserve: failed: %s\n", prog, explain(ret));
		return 1;
	}
	s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
	fmt(a, sizeof(a), r.size);
	fmt(b, sizeof(b), r.allocated);
	snprintf(nd, sizeof(nd), "%d", r.node);
	printf("%s: %s reserved (%s of 2 MiB pages held), node %s, in %.2f s\n", r.path, a, b,
	       r.node < 0 ? "any" : nd, s);
	return 0;
}

static int cmd_release(int argc, char **argv)
{
	struct tencache_params p = { .log_fn = log_fn, .log_level = TENCACHE_LOG_INFO,
				     .flags = TENCACHE_F_NO_CUDA };
	struct tencache *tc;
	const char *dir = NULL;
	int node = -1, ret;

	ret = parse_opts(argc, argv, &node, &dir, NULL);
	if (ret)
		return ret == 3 ? 0 : ret;
	if (optind != argc)
		return usage(stderr);
	if (tencache_init(&tc, &p))
		return 1;
	ret = tencache_reserve_release(tc, dir, node);
	tencache_exit(tc);
	if (ret == -ENOENT) {
		fprintf(stderr, "%s release: you hold no reservation%s%s%s\n", prog,
			node >= 0 ? " on that node" : "", dir ? " in " : "", dir ? dir : "");
		return 1;
	}
	if (ret) {
		fprintf(stderr, "%s release: failed: %s\n", prog, explain(ret));
		return 1;
	}
	return 0;
}

static void print_counters(const char *what, int node)
{
	static const char *names[] = { "nr_hugepages", "free_hugepages", "resv_hugepages",
				       "surplus_hugepages" };
	long v[4];
	unsigned i;

	for (i = 0; i < 4; i++)
		v[i] = tc_hugetlb_count(names[i], node);
	if (v[0] < 0)
		return;
	printf("  %-8s total %6ld  free %6ld  promised %6ld  surplus %ld  (%.2f GiB free)\n",
	       what, v[0], v[1], v[2] < 0 ? 0 : v[2], v[3] < 0 ? 0 : v[3],
	       v[1] * 2.0 / 1024);
}

/* Every tencache-uid* file in a mount (any user's, as far as we can see). */
static int list_mount(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d) {
		printf("  %s: %s\n", dir, strerror(errno));
		return 0;
	}
	while ((e = readdir(d))) {
		char path[4400], a[32], b[32];
		struct stat st;
		int fd, busy = 0;

		if (strncmp(e->d_name, "tencache-uid", 12))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (lstat(path, &st))
			continue;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			busy = flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
			close(fd);
		}
		fmt(a, sizeof(a), st.st_size);
		fmt(b, sizeof(b), (uint64_t)st.st_blocks * 512);
		printf("  %-44s %10s  held %10s  uid %-6u mode %04o%s%s\n", path, a, b,
		       (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
		       busy ? "  IN USE" : "", st.st_uid != geteuid() ? "  (not yours)" : "");
		n++;
	}
	closedir(d);
	return n;
}

static void module_status(void)
{
	static const char *names[] = { "max_bytes", "reserved_bytes", "pool_bytes",
				       "used_bytes", "free_bytes", "buffers_live",
				       "alloc_failures" };
	unsigned i;

	if (access("/dev/tencache", F_OK)) {
		printf("module: /dev/tencache absent (tencache.ko not loaded)\n");
		return;
	}
	printf("module: /dev/tencache\n");
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char path[128], a[32];
		long v;

		snprintf(path, sizeof(path), "/sys/class/misc/tencache/%s", names[i]);
		v = tc_read_sysfs_long(path, -1);
		if (v < 0)
			continue;
		if (strstr(names[i], "bytes")) {
			fmt(a, sizeof(a), v);
			printf("  %-16s %s\n", names[i], a);
		} else {
			printf("  %-16s %ld\n", names[i], v);
		}
	}
}

static int cmd_status(int argc, char **argv)
{
	char dirs[16][256];
	const char *dir = NULL;
	int node = -1, n, i, total = 0, ret;

	ret = parse_opts(argc, argv, &node, &dir, NULL);
	if (ret)
		return ret == 3 ? 0 : ret;
	if (optind != argc)
		return usage(stderr);
	if (dir) {
		snprintf(dirs[0], sizeof(dirs[0]), "%s", dir);
		n = 1;
	} else {
		n = tc_hugetlbfs_mounts(dirs, 16);
	}
	printf("hugetlbfs mounts with 2 MiB pages: %d%s\n", n,
	       n ? "" : " (as root: mkdir -p /dev/hugepages; "
			"mount -t hugetlbfs -o pagesize=2M none /dev/hugepages)");
	for (i = 0; i < n; i++)
		printf("  %s%s\n", dirs[i], access(dirs[i], W_OK) ? " (not writable by you)" : "");
	printf("reservations:\n");
	for (i = 0; i < n; i++)
		total += list_mount(dirs[i]);
	if (!total)
		printf("  none (tencache-ctl reserve SIZE makes one)\n");
	printf("2 MiB huge pages (vm.nr_hugepages):\n");
	print_counters("machine", -1);
	for (i = 0; i < 4096; i++) {
		char name[16], path[64];

		snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", i);
		if (access(path, F_OK)) {
			if (i > 64)
				break;
			continue;
		}
		snprintf(name, sizeof(name), "node%d", i);
		print_counters(name, i);
	}
	module_status();
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "reserve"))
		return cmd_reserve(argc - 1, argv + 1);
	if (!strcmp(argv[1], "release"))
		return cmd_release(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 1, argv + 1);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, argv[1]);
	return usage(stderr);
}
