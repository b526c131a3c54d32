// SPDX-License-Identifier: GPL-2.0
/*
 * sysfs.c - statistics under /sys/class/misc/tencache/, one value per file.
 *
 * Top level: the pool and its counters, the staging counters and the
 * latency histogram; one directory node<N>/ per NUMA node with memory.
 * Attributes hang off the misc device (.groups), so they live exactly as
 * long as /dev/tencache does. Every file is documented in README.md.
 */
#include <linux/capability.h>
#include <linux/device.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include "internal.h"

#define TC_MB_SHIFT	(TENCACHE_BLOCK_SHIFT - 20)

static ssize_t tc_emit_u64(char *buf, u64 v)
{
	return sysfs_emit(buf, "%llu\n", v);
}

#define TC_ATTR_BLOCKS(name, expr)					\
static ssize_t name##_show(struct device *d, struct device_attribute *a, \
			   char *buf)					\
{									\
	return tc_emit_u64(buf, (u64)(expr));				\
}									\
static DEVICE_ATTR_RO(name)

#define TC_ATTR_COUNTER(name, counter)					\
	TC_ATTR_BLOCKS(name, atomic64_read(&(counter)))

TC_ATTR_BLOCKS(block_size, TENCACHE_BLOCK_SIZE);
TC_ATTR_BLOCKS(max_bytes, (u64)tc_pool_max_blocks() << TENCACHE_BLOCK_SHIFT);
TC_ATTR_BLOCKS(reserved_bytes, (u64)tc_pool_reserve_blocks() << TENCACHE_BLOCK_SHIFT);
TC_ATTR_BLOCKS(pool_bytes, (u64)tc_pool_held_blocks() << TENCACHE_BLOCK_SHIFT);
TC_ATTR_BLOCKS(used_bytes, (u64)tc_pool_used_blocks() << TENCACHE_BLOCK_SHIFT);
TC_ATTR_BLOCKS(free_bytes, (u64)tc_pool_free_blocks() << TENCACHE_BLOCK_SHIFT);
TC_ATTR_BLOCKS(blocks_held, tc_pool_held_blocks());
TC_ATTR_BLOCKS(blocks_used, tc_pool_used_blocks());
TC_ATTR_BLOCKS(blocks_free, tc_pool_free_blocks());
TC_ATTR_COUNTER(buffers_live, tc_stats.buffers_live);
TC_ATTR_COUNTER(allocs, tc_stats.allocs);
TC_ATTR_COUNTER(frees, tc_stats.frees);
TC_ATTR_COUNTER(alloc_failures, tc_stats.alloc_failures);
TC_ATTR_COUNTER(blocks_recycled, tc_stats.blocks_recycled);
TC_ATTR_COUNTER(blocks_released_pinned, tc_stats.blocks_released_pinned);

/* reserved_mb: read the reservation, or (root) write a new one. */
static ssize_t reserved_mb_show(struct device *d, struct device_attribute *a,
				char *buf)
{
	return tc_emit_u64(buf, (u64)tc_pool_reserve_blocks() << TC_MB_SHIFT);
}

static ssize_t reserved_mb_store(struct device *d, struct device_attribute *a,
				 const char *buf, size_t n)
{
	unsigned long mb;
	int ret;

	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	ret = kstrtoul(buf, 0, &mb);
	if (ret)
		return ret;
	if (mb & ((1UL << TC_MB_SHIFT) - 1))
		return -EINVAL;		/* whole 2 MiB blocks only */
	ret = tc_pool_set_reserve(mb >> TC_MB_SHIFT);
	return ret ? ret : n;
}
static DEVICE_ATTR_RW(reserved_mb);

/* Staging I/O (staging.c) */
TC_ATTR_COUNTER(io_reads, tc_io_stats.reads);
TC_ATTR_COUNTER(io_writes, tc_io_stats.writes);
TC_ATTR_COUNTER(io_syncs, tc_io_stats.syncs);
TC_ATTR_COUNTER(io_read_bytes, tc_io_stats.read_bytes);
TC_ATTR_COUNTER(io_write_bytes, tc_io_stats.write_bytes);
TC_ATTR_COUNTER(io_errors, tc_io_stats.errors);
TC_ATTR_COUNTER(io_short, tc_io_stats.shorts);
TC_ATTR_COUNTER(io_inflight, tc_io_stats.inflight);
TC_ATTR_COUNTER(io_inflight_peak, tc_io_stats.inflight_peak);

/*
 * io_latency_hist: one line per direction ("read", "write", "sync"), then
 * TC_LAT_BUCKETS counts: bucket i holds completions that took
 * [2^i, 2^(i+1)) microseconds (bucket 0 also holds < 1 us).
 */
static ssize_t io_latency_hist_show(struct device *d,
				    struct device_attribute *a, char *buf)
{
	static const char *const names[TC_DIRS] = { "read", "write", "sync" };
	int dir, i, len = 0;

	for (dir = 0; dir < TC_DIRS; dir++) {
		len += sysfs_emit_at(buf, len, "%s", names[dir]);
		for (i = 0; i < TC_LAT_BUCKETS; i++)
			len += sysfs_emit_at(buf, len, " %llu",
				atomic64_read(&tc_io_stats.lat[dir][i]));
		len += sysfs_emit_at(buf, len, "\n");
	}
	return len;
}
static DEVICE_ATTR_RO(io_latency_hist);

static struct attribute *tc_attrs[] = {
	&dev_attr_block_size.attr,
	&dev_attr_max_bytes.attr,
	&dev_attr_reserved_bytes.attr,
	&dev_attr_reserved_mb.attr,
	&dev_attr_pool_bytes.attr,
	&dev_attr_used_bytes.attr,
	&dev_attr_free_bytes.attr,
	&dev_attr_blocks_held.attr,
	&dev_attr_blocks_used.attr,
	&dev_attr_blocks_free.attr,
	&dev_attr_buffers_live.attr,
	&dev_attr_allocs.attr,
	&dev_attr_frees.attr,
	&dev_attr_alloc_failures.attr,
	&dev_attr_blocks_recycled.attr,
	&dev_attr_blocks_released_pinned.attr,
	&dev_attr_io_reads.attr,
	&dev_attr_io_writes.attr,
	&dev_attr_io_syncs.attr,
	&dev_attr_io_read_bytes.attr,
	&dev_attr_io_write_bytes.attr,
	&dev_attr_io_errors.attr,
	&dev_attr_io_short.attr,
	&dev_attr_io_inflight.attr,
	&dev_attr_io_inflight_peak.attr,
	&dev_attr_io_latency_hist.attr,
	NULL,
};

static const struct attribute_group tc_group = {
	.attrs = tc_attrs,
};

/* Per node: node<N>/{held_bytes,used_bytes,free_bytes} */
enum { TC_NODE_HELD, TC_NODE_USED, TC_NODE_FREE, TC_NODE_NR_ATTRS };
static const char *const tc_node_attr_names[TC_NODE_NR_ATTRS] = {
	"held_bytes", "used_bytes", "free_bytes",
};

struct tc_node_attr {
	struct device_attribute dattr;
	int nid;
	int what;
};

struct tc_node_group {
	struct attribute_group group;
	char name[16];
	struct tc_node_attr attrs[TC_NODE_NR_ATTRS];
	struct attribute *ptrs[TC_NODE_NR_ATTRS + 1];
};

static ssize_t tc_node_show(struct device *d, struct device_attribute *a,
			    char *buf)
{
	struct tc_node_attr *na = container_of(a, struct tc_node_attr, dattr);
	struct tc_node *node = tc_pool_node(na->nid);
	unsigned long blocks;

	switch (na->what) {
	case TC_NODE_HELD:
		blocks = atomic_long_read(&node->nr_held);
		break;
	case TC_NODE_USED:
		blocks = atomic_long_read(&node->nr_used);
		break;
	default:
		blocks = READ_ONCE(node->nr_free);
		break;
	}
	return tc_emit_u64(buf, (u64)blocks << TENCACHE_BLOCK_SHIFT);
}

const struct attribute_group **tc_sysfs_groups;
static struct tc_node_group *tc_node_groups;

int tc_sysfs_init(void)
{
	int nr = num_node_state(N_MEMORY), i = 0, nid, w;

	tc_node_groups = kcalloc(nr, sizeof(*tc_node_groups), GFP_KERNEL);
	tc_sysfs_groups = kcalloc(nr + 2, sizeof(*tc_sysfs_groups), GFP_KERNEL);
	if (!tc_node_groups || !tc_sysfs_groups)
		goto free_groups;
	tc_sysfs_groups[0] = &tc_group;
	for_each_node_state(nid, N_MEMORY) {
		struct tc_node_group *ng = &tc_node_groups[i];

		if (i == nr)
			break;	/* a node came online since we counted */
		snprintf(ng->name, sizeof(ng->name), "node%d", nid);
		for (w = 0; w < TC_NODE_NR_ATTRS; w++) {
			struct tc_node_attr *na = &ng->attrs[w];

			sysfs_attr_init(&na->dattr.attr);
			na->dattr.attr.name = tc_node_attr_names[w];
			na->dattr.attr.mode = 0444;
			na->dattr.show = tc_node_show;
			na->nid = nid;
			na->what = w;
			ng->ptrs[w] = &na->dattr.attr;
		}
		ng->group.name = ng->name;
		ng->group.attrs = ng->ptrs;
		tc_sysfs_groups[++i] = &ng->group;
	}
	return 0;

free_groups:
	kfree(tc_sysfs_groups);
	kfree(tc_node_groups);
	return -ENOMEM;
}

void tc_sysfs_exit(void)
{
	kfree(tc_sysfs_groups);
	kfree(tc_node_groups);
	tc_sysfs_groups = NULL;
	tc_node_groups = NULL;
}
