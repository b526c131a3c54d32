// SPDX-License-Identifier: GPL-2.0
/*
 * buffer.c - pool buffers: blocks handed to one open file, their memlock
 * accounting, and their mmap.
 *
 * Mapping: a ->fault handler returns subpages of the compound blocks. In a
 * VMA whose start is 2 MiB-aligned with its offset (thp_get_unmapped_area
 * gives that) the core maps each block with one PMD; otherwise with PTEs.
 * Either way the PTEs point at ordinary struct pages, so GUP (O_DIRECT,
 * io_uring, cudaHostRegister) accepts them. No VM_MIXEDMAP/VM_PFNMAP: with
 * VM_MIXEDMAP a PMD-mapped block is never unmapped properly (zap_huge_pmd
 * treats it as special) and leaks.
 *
 * Accounting: a buffer is charged to the allocating mm's pinned_vm (VmPin)
 * against RLIMIT_MEMLOCK unless CAP_IPC_LOCK, like RDMA umem. pinned_vm is
 * atomic, so the charge can be dropped from any context, including the last
 * munmap, where account_locked_vm() would deadlock on mmap_lock.
 */
#include <linux/capability.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include "internal.h"

#define TC_HANDLE_MAX	((1U << 20) - 1)
#define TC_PGOFF_SHIFT	(TENCACHE_MMAP_SHIFT - PAGE_SHIFT)

static unsigned long tc_buffer_pages(const struct tc_buffer *buf)
{
	return (unsigned long)buf->nr_blocks << TC_BLOCK_ORDER;
}

static int tc_charge(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

static void tc_buffer_release(struct kref *ref)
{
	struct tc_buffer *buf = container_of(ref, struct tc_buffer, ref);
	u32 i;

	for (i = 0; i < buf->nr_blocks; i++)
		tc_pool_put(buf->blocks[i]);
	atomic64_sub(tc_buffer_pages(buf), &buf->mm->pinned_vm);
	mmdrop(buf->mm);
	atomic64_dec(&tc_stats.buffers_live);
	atomic64_inc(&tc_stats.frees);
	kvfree(buf);
}

void tc_buffer_put(struct tc_buffer *buf)
{
	kref_put(&buf->ref, tc_buffer_release);
}

int tc_buffer_alloc(struct tc_file *tf, u64 length, u32 node, u32 flags,
		    struct tc_buffer **out)
{
	bool strict = flags & TENCACHE_ALLOC_NODE_STRICT;
	struct mm_struct *mm = current->mm;
	struct tc_buffer *buf;
	u64 nr;
	int nid = NUMA_NO_NODE;
	int ret;
	u32 i;

	if (flags & ~TENCACHE_ALLOC_FLAGS_ALL)
		return -EINVAL;
	if (!length || length > (u64)tc_pool_max_blocks() << TENCACHE_BLOCK_SHIFT)
		return -EINVAL;
	if (node != TENCACHE_NODE_ANY) {
		if (node >= nr_node_ids || !node_state(node, N_MEMORY))
			return -ENODEV;
		nid = node;
	} else if (strict) {
		return -EINVAL;
	}
	if (!mm)
		return -EINVAL;
	nr = DIV_ROUND_UP(length, TENCACHE_BLOCK_SIZE);

	buf = kvzalloc(struct_size(buf, blocks, nr), GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	kref_init(&buf->ref);
	buf->length = nr << TENCACHE_BLOCK_SHIFT;
	ret = tc_charge(mm, nr << TC_BLOCK_ORDER);
	if (ret)
		goto free_buf;
	buf->mm = mm;
	mmgrab(mm);
	for (i = 0; i < nr; i++) {
		if (fatal_signal_pending(current)) {
			ret = -EINTR;
			goto put_blocks;
		}
		buf->blocks[i] = tc_pool_get(nid, strict);
		if (!buf->blocks[i]) {
			ret = -ENOMEM;
			goto put_blocks;
		}
		buf->nr_blocks = i + 1;
		cond_resched();
	}
	ret = xa_alloc(&tf->buffers, &buf->handle, buf,
		       XA_LIMIT(1, TC_HANDLE_MAX), GFP_KERNEL);
	if (ret) {
		ret = ret == -EBUSY ? -ENOSPC : ret;
		goto put_blocks;
	}
	atomic64_add(buf->length, &tf->bytes);
	atomic_inc(&tf->nr_buffers);
	atomic64_inc(&tc_stats.buffers_live);
	atomic64_inc(&tc_stats.allocs);
	*out = buf;
	return 0;

put_blocks:
	for (i = 0; i < buf->nr_blocks; i++)
		tc_pool_put(buf->blocks[i]);
	atomic64_sub(nr << TC_BLOCK_ORDER, &mm->pinned_vm);
	mmdrop(mm);
free_buf:
	kvfree(buf);
	if (ret == -ENOMEM)
		atomic64_inc(&tc_stats.alloc_failures);
	return ret;
}

/* Drop the handle's reference; the memory lives on while mapped. */
static void tc_buffer_unlink(struct tc_file *tf, struct tc_buffer *buf)
{
	atomic64_sub(buf->length, &tf->bytes);
	atomic_dec(&tf->nr_buffers);
	tc_buffer_put(buf);
}

int tc_buffer_free(struct tc_file *tf, u32 handle)
{
	struct tc_buffer *buf;
	int ret = 0;

	mutex_lock(&tf->lock);
	buf = xa_load(&tf->buffers, handle);
	if (!buf)
		ret = -ENOENT;
	else if (atomic_read(&buf->inflight))
		ret = -EBUSY;
	else
		xa_erase(&tf->buffers, handle);
	mutex_unlock(&tf->lock);
	if (!ret)
		tc_buffer_unlink(tf, buf);
	return ret;
}

/* The buffer @handle with a reference taken, or NULL. */
struct tc_buffer *tc_buffer_lookup(struct tc_file *tf, u32 handle)
{
	struct tc_buffer *buf;

	xa_lock(&tf->buffers);
	buf = xa_load(&tf->buffers, handle);
	if (buf)
		kref_get(&buf->ref);
	xa_unlock(&tf->buffers);
	return buf;
}

/* On close: every buffer still allocated goes (staging I/O is done by now). */
void tc_buffer_release_all(struct tc_file *tf)
{
	struct tc_buffer *buf;
	unsigned long index;

	xa_for_each(&tf->buffers, index, buf) {
		xa_erase(&tf->buffers, index);
		tc_buffer_unlink(tf, buf);
	}
	xa_destroy(&tf->buffers);
}

static void tc_vm_open(struct vm_area_struct *vma)
{
	struct tc_buffer *buf = vma->vm_private_data;

	kref_get(&buf->ref);
}

static void tc_vm_close(struct vm_area_struct *vma)
{
	tc_buffer_put(vma->vm_private_data);
}

static vm_fault_t tc_vm_fault(struct vm_fault *vmf)
{
	struct tc_buffer *buf = vmf->vma->vm_private_data;
	unsigned long idx = vmf->pgoff & ((1UL << TC_PGOFF_SHIFT) - 1);
	struct page *page;

	if (idx >= tc_buffer_pages(buf))
		return VM_FAULT_SIGBUS;
	page = nth_page(buf->blocks[idx >> TC_BLOCK_ORDER],
			idx & (TC_BLOCK_PAGES - 1));
	get_page(page);
	vmf->page = page;
	return 0;
}

static const struct vm_operations_struct tc_vm_ops = {
	.open = tc_vm_open,
	.close = tc_vm_close,
	.fault = tc_vm_fault,
};

int tc_buffer_mmap(struct tc_file *tf, struct vm_area_struct *vma)
{
	unsigned long first = vma->vm_pgoff & ((1UL << TC_PGOFF_SHIFT) - 1);
	unsigned long npages = vma_pages(vma);
	struct tc_buffer *buf;

	if (!(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_pgoff >> TC_PGOFF_SHIFT > TC_HANDLE_MAX)
		return -EINVAL;
	buf = tc_buffer_lookup(tf, vma->vm_pgoff >> TC_PGOFF_SHIFT);
	if (!buf)
		return -EINVAL;
	if (first > tc_buffer_pages(buf) ||
	    npages > tc_buffer_pages(buf) - first) {
		tc_buffer_put(buf);
		return -EINVAL;
	}
	/*
	 * VM_DONTCOPY: a child of fork() does not inherit the mapping, so it
	 * cannot keep the parent's blocks alive. VM_DONTEXPAND also makes
	 * mlock() skip the VMA: the blocks are pinned already.
	 */
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP | VM_DONTCOPY;
	vma->vm_private_data = buf;	/* the reference taken by lookup */
	vma->vm_ops = &tc_vm_ops;
	return 0;
}
