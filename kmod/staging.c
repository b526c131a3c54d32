// SPDX-License-Identifier: GPL-2.0
/*
 * staging.c - batched async direct I/O between pool buffers and files or
 * block devices (SUBMIT/REAP ioctls, poll).
 *
 * Each request is a kiocb over a bvec iterator that points straight at the
 * buffer's blocks: no get_user_pages(), the pages are ours. The bio takes no
 * page references (BIO_NO_PAGE_REF), so the request holds a buffer reference
 * (and the buffer's inflight count blocks FREE) until it completes. A kiocb
 * may complete inline (the call returns the result) or later through
 * ->ki_complete, possibly in IRQ context: completion only queues the request
 * and wakes waiters; files and buffers are put at REAP, in process context.
 */
#include <linux/blkdev.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/ioprio.h>
#include <linux/module.h>
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/workqueue.h>
#include "internal.h"

unsigned int tc_max_inflight = 256;
module_param_named(max_inflight, tc_max_inflight, uint, 0644);
MODULE_PARM_DESC(max_inflight,
	"Staging requests one open file may have submitted and not yet reaped (SUBMIT fails with EAGAIN beyond). Default 256.");

/*
 * Fault injection: writing N > 0 makes the Nth request submitted from then on
 * (any file) complete with -EIO instead of doing its I/O; it fires once.
 */
static atomic_t tc_fail_count = ATOMIC_INIT(0);
static unsigned int tc_fail_nth;

static int tc_fail_nth_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_uint(val, kp);

	if (!ret)
		atomic_set(&tc_fail_count, 0);
	return ret;
}

static const struct kernel_param_ops tc_fail_nth_ops = {
	.set = tc_fail_nth_set,
	.get = param_get_uint,
};
module_param_cb(fail_nth, &tc_fail_nth_ops, &tc_fail_nth, 0644);
MODULE_PARM_DESC(fail_nth,
	"Fault injection: the Nth staging request submitted after this is written completes with -EIO (once). Default 0 (off).");

/*
 * Fault injection for lifetime tests: issue each request this many ms late
 * (from a workqueue), so that "I/O in flight" can be produced at will.
 */
static unsigned int tc_delay_ms;
module_param_named(delay_ms, tc_delay_ms, uint, 0644);
MODULE_PARM_DESC(delay_ms,
	"Fault injection: delay the issue of every staging request by this many ms. Default 0 (off).");

struct tc_io_stats tc_io_stats;
static struct workqueue_struct *tc_wq;	/* runs FSYNC/FDATASYNC requests */

struct tc_req {
	struct kiocb iocb;
	struct list_head node;		/* on tf->cq once complete */
	struct delayed_work work;	/* FSYNC/FDATASYNC, or delay_ms */
	struct tc_file *tf;
	struct tc_buffer *buf;		/* NULL for syncs */
	struct file *file;
	u64 user_data;
	u64 length;
	s64 result;
	u32 op;
	ktime_t start;
	unsigned int nr_bvec;
	struct bio_vec bvec[];
};

static int tc_op_dir(u32 op)
{
	return op == TENCACHE_OP_READ ? TC_DIR_READ :
	       op == TENCACHE_OP_WRITE ? TC_DIR_WRITE : TC_DIR_SYNC;
}

static void tc_account(struct tc_req *req)
{
	int dir = tc_op_dir(req->op);
	u64 us = ktime_us_delta(ktime_get(), req->start);
	int bucket = us ? min(ilog2(us), TC_LAT_BUCKETS - 1) : 0;

	atomic64_inc(&tc_io_stats.lat[dir][bucket]);
	atomic64_inc(dir == TC_DIR_READ ? &tc_io_stats.reads :
		     dir == TC_DIR_WRITE ? &tc_io_stats.writes :
		     &tc_io_stats.syncs);
	if (req->result < 0)
		atomic64_inc(&tc_io_stats.errors);
	else if (dir != TC_DIR_SYNC && (u64)req->result < req->length)
		atomic64_inc(&tc_io_stats.shorts);
	if (req->result > 0)
		atomic64_add(req->result, dir == TC_DIR_READ ?
			     &tc_io_stats.read_bytes : &tc_io_stats.write_bytes);
	atomic64_dec(&tc_io_stats.inflight);
}

/* Any context, IRQ included: record, queue for REAP, wake. */
static void tc_req_done(struct tc_req *req, s64 result)
{
	struct tc_file *tf = req->tf;
	unsigned long flags;

	req->result = result;
	tc_account(req);
	if (req->buf)
		atomic_dec(&req->buf->inflight);
	spin_lock_irqsave(&tf->cq_lock, flags);
	list_add_tail(&req->node, &tf->cq);
	tf->cq_ready++;
	/* under cq_lock, so that REAP sees running and cq_ready move together */
	atomic_dec(&tf->running);
	/* inside the lock: release() may free tf once it can take cq_lock */
	wake_up_all(&tf->wait);
	spin_unlock_irqrestore(&tf->cq_lock, flags);
}

static void tc_rw_complete(struct kiocb *iocb, long res)
{
	struct tc_req *req = container_of(iocb, struct tc_req, iocb);

	if (iocb->ki_flags & IOCB_WRITE) {
		struct inode *inode = file_inode(iocb->ki_filp);

		/* take over the freeze protection handed off at submit (aio.c) */
		if (S_ISREG(inode->i_mode))
			__sb_writers_acquired(inode->i_sb, SB_FREEZE_WRITE);
		file_end_write(iocb->ki_filp);
	}
	tc_req_done(req, res);
}

static void tc_req_start(struct tc_req *req);

static void tc_req_work(struct work_struct *work)
{
	struct tc_req *req = container_of(to_delayed_work(work), struct tc_req, work);

	tc_req_start(req);
}

static void tc_req_free(struct tc_req *req)
{
	fput(req->file);
	if (req->buf)
		tc_buffer_put(req->buf);
	atomic_dec(&req->tf->queued);
	kfree(req);
}

static unsigned int tc_logical_block_size(struct file *file)
{
	struct inode *inode = file_inode(file);

	if (S_ISBLK(inode->i_mode))
		return bdev_logical_block_size(I_BDEV(file->f_mapping->host));
	if (inode->i_sb->s_bdev)
		return bdev_logical_block_size(inode->i_sb->s_bdev);
	return 512;
}

/* Check one descriptor; on success *reqp holds a ready, unsubmitted request. */
static int tc_req_prepare(struct tc_file *tf, const struct tencache_io *io,
			  struct tc_req **reqp)
{
	bool rw = io->op == TENCACHE_OP_READ || io->op == TENCACHE_OP_WRITE;
	struct tc_buffer *buf = NULL;
	struct tc_req *req;
	struct file *file;
	unsigned int lbs, nr_bvec = 0;
	umode_t mode;
	int ret;

	if (io->flags)
		return -EINVAL;
	if (!rw && io->op != TENCACHE_OP_FSYNC && io->op != TENCACHE_OP_FDATASYNC)
		return -EINVAL;
	if (!rw && (io->handle || io->buf_offset || io->file_offset || io->length))
		return -EINVAL;
	file = fget(io->fd);
	if (!file)
		return -EBADF;
	mode = file_inode(file)->i_mode;
	ret = -EOPNOTSUPP;
	if (!S_ISREG(mode) && !S_ISBLK(mode))
		goto put_file;
	if (rw && !(file->f_mode & FMODE_CAN_ODIRECT))
		goto put_file;
	ret = -EBADF;
	if (io->op == TENCACHE_OP_READ && !(file->f_mode & FMODE_READ))
		goto put_file;
	if (io->op == TENCACHE_OP_WRITE && !(file->f_mode & FMODE_WRITE))
		goto put_file;
	if (rw) {
		lbs = tc_logical_block_size(file);
		ret = -EINVAL;
		if (!io->length || !IS_ALIGNED(io->length | io->buf_offset |
					       io->file_offset, lbs))
			goto put_file;
		if (io->file_offset > LLONG_MAX - io->length)
			goto put_file;
		ret = -ENOENT;
		buf = tc_buffer_lookup(tf, io->handle);
		if (!buf)
			goto put_file;
		ret = -EINVAL;
		if (io->buf_offset > buf->length ||
		    io->length > buf->length - io->buf_offset)
			goto put_buf;
		nr_bvec = ((io->buf_offset + io->length - 1) >> TENCACHE_BLOCK_SHIFT) -
			  (io->buf_offset >> TENCACHE_BLOCK_SHIFT) + 1;
	}
	ret = -ENOMEM;
	req = kzalloc(struct_size(req, bvec, nr_bvec), GFP_KERNEL);
	if (!req)
		goto put_buf;
	req->tf = tf;
	req->buf = buf;
	req->file = file;
	req->op = io->op;
	req->user_data = io->user_data;
	req->length = io->length;
	req->nr_bvec = nr_bvec;
	if (rw) {
		/* one multi-page bvec per 2 MiB block touched */
		u64 off = io->buf_offset, end = io->buf_offset + io->length;
		unsigned int i;

		for (i = 0; i < nr_bvec; i++) {
			u64 boff = off & (TENCACHE_BLOCK_SIZE - 1);
			u64 n = min_t(u64, end - off, TENCACHE_BLOCK_SIZE - boff);

			req->bvec[i].bv_page = nth_page(buf->blocks[off >> TENCACHE_BLOCK_SHIFT],
							boff >> PAGE_SHIFT);
			req->bvec[i].bv_offset = boff & ~PAGE_MASK;
			req->bvec[i].bv_len = n;
			off += n;
		}
		init_sync_kiocb(&req->iocb, file);
		req->iocb.ki_pos = io->file_offset;
		req->iocb.ki_flags = (req->iocb.ki_flags & ~IOCB_APPEND) | IOCB_DIRECT;
		req->iocb.ki_complete = tc_rw_complete;
	}
	INIT_DELAYED_WORK(&req->work, tc_req_work);
	*reqp = req;
	return 0;

put_buf:
	if (buf)
		tc_buffer_put(buf);
put_file:
	fput(file);
	return ret;
}

/* Do the I/O of a request; its completion always goes through tc_req_done. */
static void tc_req_start(struct tc_req *req)
{
	struct file *file = req->file;
	struct iov_iter iter;
	ssize_t ret;

	if (!req->buf) {
		tc_req_done(req, vfs_fsync(file, req->op == TENCACHE_OP_FDATASYNC));
		return;
	}
	if (req->op == TENCACHE_OP_READ) {
		iov_iter_bvec(&iter, ITER_DEST, req->bvec, req->nr_bvec, req->length);
		ret = vfs_iocb_iter_read(file, &req->iocb, &iter);
	} else {
		struct inode *inode = file_inode(file);

		iov_iter_bvec(&iter, ITER_SOURCE, req->bvec, req->nr_bvec, req->length);
		req->iocb.ki_flags |= IOCB_WRITE;
		file_start_write(file);
		/* the completion may run elsewhere: hand freeze protection over */
		if (S_ISREG(inode->i_mode))
			__sb_writers_release(inode->i_sb, SB_FREEZE_WRITE);
		ret = vfs_iocb_iter_write(file, &req->iocb, &iter);
	}
	/* -EIOCBQUEUED: ->ki_complete owns req now (it may be gone already) */
	if (ret != -EIOCBQUEUED)
		tc_rw_complete(&req->iocb, ret);
}

/* Account a prepared request as in flight and start it (or schedule it). */
static void tc_req_issue(struct tc_req *req)
{
	unsigned int delay = READ_ONCE(tc_delay_ms);
	s64 peak, now;

	atomic_inc(&req->tf->running);
	if (req->buf)
		atomic_inc(&req->buf->inflight);
	now = atomic64_inc_return(&tc_io_stats.inflight);
	peak = atomic64_read(&tc_io_stats.inflight_peak);
	while (now > peak && !atomic64_try_cmpxchg(&tc_io_stats.inflight_peak,
						  &peak, now))
		;
	req->start = ktime_get();

	if (READ_ONCE(tc_fail_nth) &&
	    atomic_inc_return(&tc_fail_count) == READ_ONCE(tc_fail_nth)) {
		WRITE_ONCE(tc_fail_nth, 0);
		tc_req_done(req, -EIO);
		return;
	}
	/* syncs block: never in the caller's SUBMIT */
	if (delay || !req->buf)
		queue_delayed_work(tc_wq, &req->work, msecs_to_jiffies(delay));
	else
		tc_req_start(req);
}

long tencache_ioctl_submit(struct tc_file *tf, void __user *uarg)
{
	struct tencache_submit sub;
	struct tencache_io io;
	struct tc_req *req;
	u32 i;
	int ret;

	ret = tc_copy_struct_from_user(&sub, sizeof(sub), sizeof(sub), uarg);
	if (ret)
		return ret;
	if (sub.flags || sub.__reserved || !sub.nr || sub.nr > TENCACHE_BATCH_MAX ||
	    sub.entry_size < sizeof(io) || sub.entry_size > PAGE_SIZE ||
	    !IS_ALIGNED(sub.entry_size, 8))
		return -EINVAL;

	mutex_lock(&tf->lock);	/* FREE must not pass a buffer being queued */
	for (i = 0; i < sub.nr; i++) {
		ret = copy_struct_from_user(&io, sizeof(io),
			u64_to_user_ptr(sub.ios + (u64)i * sub.entry_size),
			sub.entry_size);
		if (ret)
			break;
		if (atomic_inc_return(&tf->queued) > READ_ONCE(tc_max_inflight)) {
			atomic_dec(&tf->queued);
			ret = -EAGAIN;
			break;
		}
		ret = tc_req_prepare(tf, &io, &req);
		if (ret) {
			atomic_dec(&tf->queued);
			break;
		}
		tc_req_issue(req);
	}
	mutex_unlock(&tf->lock);
	if (!i)
		return ret;
	sub.queued = i;
	return copy_to_user(uarg, &sub, min_t(size_t, sizeof(sub), sub.size)) ?
	       -EFAULT : 0;
}

static bool tc_reap_ready(struct tc_file *tf, u32 min_nr)
{
	unsigned long flags;
	bool ready;

	/* never wait for completions that cannot come */
	spin_lock_irqsave(&tf->cq_lock, flags);
	ready = tf->cq_ready >= min_nr || !atomic_read(&tf->running);
	spin_unlock_irqrestore(&tf->cq_lock, flags);
	return ready;
}

long tencache_ioctl_reap(struct tc_file *tf, void __user *uarg)
{
	struct tencache_reap rp;
	struct tencache_cqe cqe;
	struct tc_req *req, *tmp;
	struct tencache_cqe __user *ucqe;
	LIST_HEAD(batch);
	unsigned long flags;
	long ret;
	u32 nr = 0, taken = 0;

	ret = tc_copy_struct_from_user(&rp, sizeof(rp), sizeof(rp), uarg);
	if (ret)
		return ret;
	if (rp.flags || !rp.max_nr || rp.max_nr > TENCACHE_BATCH_MAX ||
	    rp.min_nr > rp.max_nr || rp.entry_size != sizeof(cqe))
		return -EINVAL;

	if (rp.min_nr) {
		if (rp.timeout_ns)
			ret = wait_event_interruptible_hrtimeout(tf->wait,
					tc_reap_ready(tf, rp.min_nr),
					ns_to_ktime(min_t(u64, rp.timeout_ns, KTIME_MAX)));
		else
			ret = wait_event_interruptible(tf->wait,
					tc_reap_ready(tf, rp.min_nr));
		/*
		 * Nothing was taken yet, so the call can be restarted after a
		 * signal (or io_uring task work: TIF_NOTIFY_SIGNAL); a signal
		 * without SA_RESTART gives userspace EINTR.
		 */
		if (ret == -ERESTARTSYS)
			return ret;
	}

	spin_lock_irqsave(&tf->cq_lock, flags);
	list_for_each_entry_safe(req, tmp, &tf->cq, node) {
		if (taken == rp.max_nr)
			break;
		list_move_tail(&req->node, &batch);
		taken++;
	}
	tf->cq_ready -= taken;
	spin_unlock_irqrestore(&tf->cq_lock, flags);

	ucqe = u64_to_user_ptr(rp.cqes);
	ret = 0;
	list_for_each_entry_safe(req, tmp, &batch, node) {
		memset(&cqe, 0, sizeof(cqe));
		cqe.user_data = req->user_data;
		cqe.result = req->result;
		if (req->buf && req->result >= 0 && (u64)req->result < req->length)
			cqe.flags |= TENCACHE_CQE_SHORT;
		if (copy_to_user(&ucqe[nr], &cqe, sizeof(cqe))) {
			ret = -EFAULT;
			break;
		}
		list_del(&req->node);
		tc_req_free(req);
		nr++;
	}
	if (!list_empty(&batch)) {
		/* not delivered: put back at the head, nothing is lost */
		spin_lock_irqsave(&tf->cq_lock, flags);
		tf->cq_ready += taken - nr;
		list_splice(&batch, &tf->cq);
		spin_unlock_irqrestore(&tf->cq_lock, flags);
	}
	if (ret && !nr)
		return ret;
	rp.nr = nr;
	return copy_to_user(uarg, &rp, min_t(size_t, sizeof(rp), rp.size)) ?
	       -EFAULT : 0;
}

__poll_t tc_staging_poll(struct tc_file *tf, struct file *file, poll_table *pt)
{
	poll_wait(file, &tf->wait, pt);
	return READ_ONCE(tf->cq_ready) ? EPOLLIN | EPOLLRDNORM : 0;
}

void tc_staging_init_file(struct tc_file *tf)
{
	spin_lock_init(&tf->cq_lock);
	INIT_LIST_HEAD(&tf->cq);
	init_waitqueue_head(&tf->wait);
}

/* On close or process death: wait for in-flight I/O, drop completions. */
void tc_staging_release_file(struct tc_file *tf)
{
	struct tc_req *req, *tmp;

	wait_event(tf->wait, !atomic_read(&tf->running));
	spin_lock_irq(&tf->cq_lock);	/* the last completer has left */
	spin_unlock_irq(&tf->cq_lock);
	list_for_each_entry_safe(req, tmp, &tf->cq, node) {
		list_del(&req->node);
		tc_req_free(req);
	}
	tf->cq_ready = 0;
}

int tc_staging_init(void)
{
	tc_wq = alloc_workqueue("tencache", WQ_UNBOUND, 0);
	return tc_wq ? 0 : -ENOMEM;
}

void tc_staging_exit(void)
{
	destroy_workqueue(tc_wq);
}
