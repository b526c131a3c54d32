// SPDX-License-Identifier: GPL-2.0
/*
 * pool.c - the pool of pinned 2 MiB blocks, one free list per NUMA node.
 *
 * A block is an order-9 __GFP_COMP page owned by the module: it is never on
 * the LRU and never swapped, so it is pinned for as long as we hold it. Blocks
 * that come back are kept on their node's free list while the module holds no
 * more than the reservation, and are returned to the kernel otherwise. The
 * module never holds more than the cap.
 */
#include <linux/gfp.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/nodemask.h>
#include <linux/slab.h>
#include "internal.h"

static unsigned int pool_mb;
module_param(pool_mb, uint, 0444);
MODULE_PARM_DESC(pool_mb,
	"MiB of 2 MiB blocks to reserve at load, spread over the NUMA nodes; kept when freed. Default 0 (grow on demand). Change at run time through sysfs reserved_mb.");

static unsigned int max_pool_mb;
module_param(max_pool_mb, uint, 0444);
MODULE_PARM_DESC(max_pool_mb,
	"Hard cap in MiB on the blocks the module holds. Default 0 = half of RAM.");

struct tc_pool_stats tc_stats;

static struct tc_node *tc_nodes;	/* indexed by node id, nr_node_ids long */
static atomic_long_t tc_held;		/* blocks held, all nodes */
static unsigned long tc_max_blocks;
static unsigned long tc_reserve_blocks;
/* Serializes changes of the reservation (growing or trimming the pool). */
static DEFINE_MUTEX(tc_reserve_lock);

struct tc_node *tc_pool_node(int nid)
{
	return &tc_nodes[nid];
}

unsigned long tc_pool_reserve_blocks(void)
{
	return READ_ONCE(tc_reserve_blocks);
}

unsigned long tc_pool_max_blocks(void)
{
	return tc_max_blocks;
}

unsigned long tc_pool_held_blocks(void)
{
	return atomic_long_read(&tc_held);
}

unsigned long tc_pool_free_blocks(void)
{
	unsigned long n = 0;
	int nid;

	for_each_node_state(nid, N_MEMORY)
		n += READ_ONCE(tc_nodes[nid].nr_free);
	return n;
}

unsigned long tc_pool_used_blocks(void)
{
	unsigned long n = 0;
	int nid;

	for_each_node_state(nid, N_MEMORY)
		n += atomic_long_read(&tc_nodes[nid].nr_used);
	return n;
}

static struct page *tc_pop_free(int nid)
{
	struct tc_node *node = &tc_nodes[nid];
	struct page *head = NULL;

	spin_lock(&node->lock);
	if (node->nr_free) {
		head = list_first_entry(&node->free, struct page, lru);
		list_del(&head->lru);
		node->nr_free--;
	}
	spin_unlock(&node->lock);
	return head;
}

static void tc_push_free(struct page *head)
{
	struct tc_node *node = &tc_nodes[page_to_nid(head)];

	spin_lock(&node->lock);
	list_add(&head->lru, &node->free);
	node->nr_free++;
	spin_unlock(&node->lock);
}

/* A new block from the kernel, counted against the cap. */
static struct page *tc_alloc_block(int nid, bool thisnode)
{
	gfp_t gfp = GFP_KERNEL | __GFP_COMP | __GFP_ZERO | __GFP_NOWARN |
		    __GFP_RETRY_MAYFAIL;
	struct page *head;

	if (atomic_long_inc_return(&tc_held) > tc_max_blocks)
		goto undo_count;
	if (thisnode)
		gfp |= __GFP_THISNODE;
	head = alloc_pages_node(nid, gfp, TC_BLOCK_ORDER);
	if (!head)
		goto undo_count;
	atomic_long_inc(&tc_nodes[page_to_nid(head)].nr_held);
	return head;

undo_count:
	atomic_long_dec(&tc_held);
	return NULL;
}

static void tc_free_block(struct page *head)
{
	atomic_long_dec(&tc_nodes[page_to_nid(head)].nr_held);
	atomic_long_dec(&tc_held);
	__free_pages(head, TC_BLOCK_ORDER);
}

/*
 * Get a zeroed block, preferably on @nid (NUMA_NO_NODE: the caller's node).
 * Order: @nid's free list, a new block on @nid, then (unless @strict) any
 * node's free list and a new block anywhere.
 */
struct page *tc_pool_get(int nid, bool strict)
{
	struct page *head;
	int other;

	if (nid == NUMA_NO_NODE)
		nid = numa_node_id();
	head = tc_pop_free(nid);
	if (head)
		goto recycled;
	head = tc_alloc_block(nid, true);
	if (head)
		goto fresh;
	if (strict)
		return NULL;
	for_each_node_state(other, N_MEMORY) {
		head = tc_pop_free(other);
		if (head)
			goto recycled;
	}
	head = tc_alloc_block(nid, false);
	if (!head)
		return NULL;
	goto fresh;

recycled:
	/* Never hand out a previous user's bytes. */
	memset(page_address(head), 0, TENCACHE_BLOCK_SIZE);
	atomic64_inc(&tc_stats.blocks_recycled);
fresh:
	atomic_long_inc(&tc_nodes[page_to_nid(head)].nr_used);
	return head;
}

/*
 * Take a block back from a released buffer. A block that someone else still
 * references (a long-term GUP pin that outlived its mapping, say) is never
 * recycled: we drop our reference and the kernel frees it after the last pin.
 */
void tc_pool_put(struct page *head)
{
	atomic_long_dec(&tc_nodes[page_to_nid(head)].nr_used);
	if (page_count(head) != 1) {
		atomic64_inc(&tc_stats.blocks_released_pinned);
		tc_free_block(head);
		return;
	}
	if (atomic_long_read(&tc_held) <= READ_ONCE(tc_reserve_blocks))
		tc_push_free(head);
	else
		tc_free_block(head);
}

/*
 * Set the reservation to @blocks. Growing allocates the missing blocks
 * round-robin over the nodes; shrinking returns free blocks to the kernel
 * (blocks in use are returned when they are freed).
 */
int tc_pool_set_reserve(unsigned long blocks)
{
	struct page *head;
	int nid = first_node(node_states[N_MEMORY]);
	int ret = 0;

	if (blocks > tc_max_blocks)
		return -EINVAL;
	mutex_lock(&tc_reserve_lock);
	WRITE_ONCE(tc_reserve_blocks, blocks);
	while (atomic_long_read(&tc_held) < blocks) {
		head = tc_alloc_block(nid, true);
		if (!head)
			head = tc_alloc_block(nid, false);
		if (!head) {
			ret = -ENOMEM;
			break;
		}
		tc_push_free(head);
		nid = next_node_in(nid, node_states[N_MEMORY]);
	}
	for_each_node_state(nid, N_MEMORY) {
		while (atomic_long_read(&tc_held) > blocks) {
			head = tc_pop_free(nid);
			if (!head)
				break;
			tc_free_block(head);
		}
	}
	mutex_unlock(&tc_reserve_lock);
	return ret;
}

int tc_pool_init(void)
{
	unsigned long ram_mb = totalram_pages() >> (20 - PAGE_SHIFT);
	int nid, ret;

	tc_nodes = kcalloc(nr_node_ids, sizeof(*tc_nodes), GFP_KERNEL);
	if (!tc_nodes)
		return -ENOMEM;
	for (nid = 0; nid < nr_node_ids; nid++) {
		spin_lock_init(&tc_nodes[nid].lock);
		INIT_LIST_HEAD(&tc_nodes[nid].free);
	}
	if (!max_pool_mb)
		max_pool_mb = ram_mb / 2;
	tc_max_blocks = max_pool_mb >> (TENCACHE_BLOCK_SHIFT - 20);
	if (pool_mb > max_pool_mb) {
		pr_err("tencache: pool_mb=%u is above max_pool_mb=%u\n",
		       pool_mb, max_pool_mb);
		ret = -EINVAL;
		goto free_nodes;
	}
	ret = tc_pool_set_reserve(pool_mb >> (TENCACHE_BLOCK_SHIFT - 20));
	if (ret) {
		pr_err("tencache: cannot reserve pool_mb=%u: only %lu MiB of free 2 MiB blocks\n",
		       pool_mb, tc_pool_held_blocks() << (TENCACHE_BLOCK_SHIFT - 20));
		goto trim_pool;
	}
	return 0;

trim_pool:
	tc_pool_exit();
	return ret;
free_nodes:
	kfree(tc_nodes);
	return ret;
}

void tc_pool_exit(void)
{
	struct page *head;
	int nid;

	for_each_node_state(nid, N_MEMORY)
		while ((head = tc_pop_free(nid)))
			tc_free_block(head);
	if (atomic_long_read(&tc_held))
		pr_err("tencache: %ld blocks still held at exit\n",
		       atomic_long_read(&tc_held));
	kfree(tc_nodes);
	tc_nodes = NULL;
}
