// SPDX-License-Identifier: GPL-2.0
/*
 * main.c - tencache.ko: module init/exit, the /dev/tencache misc device and
 * its ioctl switch. Mechanism only: userspace decides what to cache where.
 */
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include "internal.h"

static unsigned int dev_mode = 0600;
module_param(dev_mode, uint, 0444);
MODULE_PARM_DESC(dev_mode,
	"Permission bits of /dev/tencache (owner root). Default 0600; grant a group with the shipped udev rule.");

/*
 * Copy a command struct that starts with "__u32 size": sizes from @min_size
 * up are accepted, bytes beyond @ksize must be zero (E2BIG), a short struct
 * is EINVAL. @dst is zero-filled past what userspace passed.
 */
int tc_copy_struct_from_user(void *dst, size_t ksize, size_t min_size,
			     const void __user *src)
{
	u32 usize;

	if (get_user(usize, (const u32 __user *)src))
		return -EFAULT;
	if (usize < min_size)
		return -EINVAL;
	return copy_struct_from_user(dst, ksize, src, usize);
}

/* Copy a result back, no more than the caller's struct holds. */
static int tc_copy_struct_to_user(void __user *dst, const void *src,
				  size_t ksize)
{
	u32 usize = *(const u32 *)src;

	return copy_to_user(dst, src, min_t(size_t, ksize, usize)) ? -EFAULT : 0;
}

static long tencache_ioctl_info(struct tc_file *tf, void __user *uarg)
{
	struct tencache_info info;
	int ret;

	ret = tc_copy_struct_from_user(&info, sizeof(info), sizeof(info), uarg);
	if (ret)
		return ret;
	if (info.flags)
		return -EINVAL;
	info.abi_version = TENCACHE_ABI_VERSION;
	info.nr_nodes = num_node_state(N_MEMORY);
	info.features = TENCACHE_FEAT_POOL | TENCACHE_FEAT_PMD_MAP |
			TENCACHE_FEAT_STAGING;
	info.block_size = TENCACHE_BLOCK_SIZE;
	info.reserved_bytes = (u64)tc_pool_reserve_blocks() << TENCACHE_BLOCK_SHIFT;
	info.max_bytes = (u64)tc_pool_max_blocks() << TENCACHE_BLOCK_SHIFT;
	info.pool_bytes = (u64)tc_pool_held_blocks() << TENCACHE_BLOCK_SHIFT;
	info.used_bytes = (u64)tc_pool_used_blocks() << TENCACHE_BLOCK_SHIFT;
	info.free_bytes = (u64)tc_pool_free_blocks() << TENCACHE_BLOCK_SHIFT;
	info.file_bytes = atomic64_read(&tf->bytes);
	info.file_buffers = atomic_read(&tf->nr_buffers);
	info.max_inflight = tc_max_inflight;
	return tc_copy_struct_to_user(uarg, &info, sizeof(info));
}

static long tencache_ioctl_alloc(struct tc_file *tf, void __user *uarg)
{
	struct tencache_alloc req;
	struct tc_buffer *buf;
	int ret;

	ret = tc_copy_struct_from_user(&req, sizeof(req), sizeof(req), uarg);
	if (ret)
		return ret;
	ret = tc_buffer_alloc(tf, req.length, req.node, req.flags, &buf);
	if (ret)
		return ret;
	req.handle = buf->handle;
	req.mmap_offset = (u64)buf->handle << TENCACHE_MMAP_SHIFT;
	req.alloc_length = buf->length;
	ret = tc_copy_struct_to_user(uarg, &req, sizeof(req));
	if (ret)	/* nobody learnt the handle: undo */
		tc_buffer_free(tf, req.handle);
	return ret;
}

static long tencache_ioctl_free(struct tc_file *tf, void __user *uarg)
{
	struct tencache_free req;
	int ret;

	ret = tc_copy_struct_from_user(&req, sizeof(req), sizeof(req), uarg);
	if (ret)
		return ret;
	if (req.flags || req.__reserved)
		return -EINVAL;
	return tc_buffer_free(tf, req.handle);
}

static long tc_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct tc_file *tf = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case TENCACHE_INFO:
		return tencache_ioctl_info(tf, uarg);
	case TENCACHE_ALLOC:
		return tencache_ioctl_alloc(tf, uarg);
	case TENCACHE_FREE:
		return tencache_ioctl_free(tf, uarg);
	case TENCACHE_SUBMIT:
		return tencache_ioctl_submit(tf, uarg);
	case TENCACHE_REAP:
		return tencache_ioctl_reap(tf, uarg);
	default:
		return -ENOTTY;
	}
}

static int tc_open(struct inode *inode, struct file *file)
{
	struct tc_file *tf;

	tf = kzalloc(sizeof(*tf), GFP_KERNEL);
	if (!tf)
		return -ENOMEM;
	xa_init_flags(&tf->buffers, XA_FLAGS_ALLOC1);
	mutex_init(&tf->lock);
	tc_staging_init_file(tf);
	file->private_data = tf;
	return 0;
}

static int tc_release(struct inode *inode, struct file *file)
{
	struct tc_file *tf = file->private_data;

	tc_staging_release_file(tf);	/* waits for in-flight I/O */
	tc_buffer_release_all(tf);
	mutex_destroy(&tf->lock);
	kfree(tf);
	return 0;
}

static int tc_mmap(struct file *file, struct vm_area_struct *vma)
{
	return tc_buffer_mmap(file->private_data, vma);
}

static __poll_t tc_poll(struct file *file, poll_table *pt)
{
	return tc_staging_poll(file->private_data, file, pt);
}

static const struct file_operations tc_fops = {
	.owner = THIS_MODULE,
	.open = tc_open,
	.release = tc_release,
	.unlocked_ioctl = tc_ioctl,
	.compat_ioctl = compat_ptr_ioctl,	/* same layout on 32 and 64 bit */
	.mmap = tc_mmap,
	.get_unmapped_area = thp_get_unmapped_area,	/* 2 MiB-aligned VMAs */
	.poll = tc_poll,
	.llseek = noop_llseek,
};

static struct miscdevice tc_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "tencache",
	.fops = &tc_fops,
};

static int __init tc_init(void)
{
	int ret;

	if (dev_mode & ~0777) {
		pr_err("tencache: dev_mode=%#o has bits beyond 0777\n", dev_mode);
		return -EINVAL;
	}
	ret = tc_pool_init();
	if (ret)
		return ret;
	ret = tc_staging_init();
	if (ret)
		goto exit_pool;
	ret = tc_sysfs_init();
	if (ret)
		goto exit_staging;
	tc_misc.mode = dev_mode;
	tc_misc.groups = tc_sysfs_groups;
	ret = misc_register(&tc_misc);
	if (ret)
		goto exit_sysfs;
	pr_info("tencache: /dev/tencache ready, ABI %u, reserved %lu MiB, cap %lu MiB\n",
		TENCACHE_ABI_VERSION, tc_pool_reserve_blocks() * 2,
		tc_pool_max_blocks() * 2);
	return 0;

exit_sysfs:
	tc_sysfs_exit();
exit_staging:
	tc_staging_exit();
exit_pool:
	tc_pool_exit();
	return ret;
}

static void __exit tc_exit(void)
{
	misc_deregister(&tc_misc);
	tc_sysfs_exit();
	tc_staging_exit();
	tc_pool_exit();
	pr_info("tencache: unloaded\n");
}

module_init(tc_init);
module_exit(tc_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("tencache: pinned 2 MiB block pool and NVMe staging for tensor offload");
MODULE_VERSION("0.1");
