/* SPDX-License-Identifier: GPL-2.0 */
/*
 * tc_test.h - helpers shared by the module's kselftest programs: raw ioctl
 * wrappers, sysfs counters, and a local EXPECT_ERRNO (as iommufd's tests).
 */
#ifndef TC_TEST_H
#define TC_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uapi/tencache.h>

#define EXPECT_ERRNO(expected_errno, cmd)            \
	({                                           \
		ASSERT_EQ(-1, cmd);                  \
		EXPECT_EQ(expected_errno, errno);    \
	})

#define TC_SYSFS "/sys/class/misc/tencache/"
#define MiB (1ULL << 20)

static inline long long tc_sysfs(const char *name)
{
	char path[256], buf[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), TC_SYSFS "%s", name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(buf, sizeof(buf), f))
		v = strtoll(buf, NULL, 10);
	fclose(f);
	return v;
}

static inline int tc_sysfs_write(const char *name, const char *val)
{
	char path[256];
	int fd, ret;

	snprintf(path, sizeof(path), TC_SYSFS "%s", name);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ret = write(fd, val, strlen(val));
	ret = ret < 0 ? -errno : 0;
	close(fd);
	return ret;
}

static inline int tc_alloc(int fd, uint64_t len, uint32_t node, uint32_t flags,
			   struct tencache_alloc *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->length = len;
	a->node = node;
	a->flags = flags;
	return ioctl(fd, TENCACHE_ALLOC, a);
}

static inline int tc_free(int fd, uint32_t handle)
{
	struct tencache_free f = { .size = sizeof(f), .handle = handle };

	return ioctl(fd, TENCACHE_FREE, &f);
}

static inline void *tc_map(int fd, const struct tencache_alloc *a)
{
	return mmap(NULL, a->alloc_length, PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, a->mmap_offset);
}

/* Bytes of used pool blocks, from sysfs (all users). */
static inline long long tc_used(void)
{
	return tc_sysfs("used_bytes");
}

#endif
