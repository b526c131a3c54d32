/* SPDX-License-Identifier: GPL-2.0 */
/*
 * internal.h - types and functions shared by the files of tencache.ko.
 *
 * Layers: pool.c owns the 2 MiB blocks (per-node free lists, reservation,
 * cap); buffer.c owns buffers (blocks handed to one open file, refcounted,
 * mmap); staging.c moves bytes between buffers and files; sysfs.c shows the
 * counters; main.c is the misc device and the ioctl switch.
 */
#ifndef TENCACHE_INTERNAL_H
#define TENCACHE_INTERNAL_H

#include <linux/kref.h>
#include <linux/mm_types.h>
#include <linux/mutex.h>
#include <linux/poll.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/xarray.h>
#include <linux/atomic.h>
#include <linux/miscdevice.h>
#include <uapi/tencache.h>

#define TC_BLOCK_ORDER	(TENCACHE_BLOCK_SHIFT - PAGE_SHIFT)
#define TC_BLOCK_PAGES	(1UL << TC_BLOCK_ORDER)

/* ---- pool.c ---------------------------------------------------------- */

/* Per-node counters and free list; the free list is protected by lock. */
struct tc_node {
	spinlock_t lock;
	struct list_head free;		/* head pages, linked by page->lru */
	unsigned long nr_free;
	atomic_long_t nr_held;		/* blocks of this node the module holds */
	atomic_long_t nr_used;		/* blocks of this node in buffers */
};

struct tc_pool_stats {
	atomic64_t allocs;		/* successful ALLOCs */
	atomic64_t frees;		/* buffers released (last reference) */
	atomic64_t alloc_failures;	/* ALLOCs that failed with ENOMEM */
	atomic64_t buffers_live;
	atomic64_t blocks_recycled;	/* handed out again from a free list */
	atomic64_t blocks_released_pinned; /* returned while still pinned */
};

extern struct tc_pool_stats tc_stats;

int tc_pool_init(void);
void tc_pool_exit(void);
struct tc_node *tc_pool_node(int nid);
unsigned long tc_pool_reserve_blocks(void);
unsigned long tc_pool_max_blocks(void);
unsigned long tc_pool_held_blocks(void);
unsigned long tc_pool_free_blocks(void);
unsigned long tc_pool_used_blocks(void);
int tc_pool_set_reserve(unsigned long blocks);
struct page *tc_pool_get(int nid, bool strict);
void tc_pool_put(struct page *head);

/* ---- buffer.c -------------------------------------------------------- */

struct tc_file;

/*
 * A buffer: blocks given to one open file. The handle (in tc_file->buffers)
 * holds one reference, each VMA mapping it holds one, each in-flight staging
 * request holds one. The blocks go back to the pool with the last reference.
 */
struct tc_buffer {
	struct kref ref;
	u32 handle;
	u32 nr_blocks;
	u64 length;
	struct mm_struct *mm;		/* charged (pinned_vm); mmgrab'ed */
	atomic_t inflight;		/* staging requests in flight */
	struct page *blocks[];		/* head pages of order-9 compound blocks */
};

/* An open /dev/tencache. */
struct tc_file {
	struct xarray buffers;		/* handle -> struct tc_buffer */
	struct mutex lock;		/* serializes FREE against SUBMIT */
	atomic64_t bytes;		/* allocated through this file */
	atomic_t nr_buffers;
	/* staging (staging.c) */
	spinlock_t cq_lock;
	struct list_head cq;		/* completed requests, oldest first */
	unsigned int cq_ready;
	atomic_t queued;		/* submitted, not yet reaped */
	atomic_t running;		/* submitted, not yet completed */
	wait_queue_head_t wait;		/* REAP, poll and release wait here */
};

int tc_buffer_alloc(struct tc_file *tf, u64 length, u32 node, u32 flags,
		    struct tc_buffer **out);
int tc_buffer_free(struct tc_file *tf, u32 handle);
struct tc_buffer *tc_buffer_lookup(struct tc_file *tf, u32 handle);
void tc_buffer_put(struct tc_buffer *buf);
void tc_buffer_release_all(struct tc_file *tf);
int tc_buffer_mmap(struct tc_file *tf, struct vm_area_struct *vma);

/* ---- staging.c ------------------------------------------------------- */

enum { TC_DIR_READ, TC_DIR_WRITE, TC_DIR_SYNC, TC_DIRS };
#define TC_LAT_BUCKETS	24	/* log2 microseconds: 1 us .. 8 s and above */

struct tc_io_stats {
	atomic64_t reads, writes, syncs;	/* completed requests */
	atomic64_t read_bytes, write_bytes;	/* bytes transferred */
	atomic64_t errors;			/* completions with -errno */
	atomic64_t shorts;			/* fewer bytes than asked */
	atomic64_t inflight, inflight_peak;	/* all files */
	atomic64_t lat[TC_DIRS][TC_LAT_BUCKETS];
};

extern struct tc_io_stats tc_io_stats;

void tc_staging_init_file(struct tc_file *tf);
void tc_staging_release_file(struct tc_file *tf);
long tencache_ioctl_submit(struct tc_file *tf, void __user *uarg);
long tencache_ioctl_reap(struct tc_file *tf, void __user *uarg);
__poll_t tc_staging_poll(struct tc_file *tf, struct file *file, poll_table *pt);
int tc_staging_init(void);
void tc_staging_exit(void);
extern unsigned int tc_max_inflight;

/* ---- sysfs.c --------------------------------------------------------- */

extern const struct attribute_group **tc_sysfs_groups;
int tc_sysfs_init(void);
void tc_sysfs_exit(void);

/* ---- main.c ---------------------------------------------------------- */

/* Copy a user struct that starts with __u32 size (iommufd rules). */
int tc_copy_struct_from_user(void *dst, size_t ksize, size_t min_size,
			     const void __user *src);

#endif
