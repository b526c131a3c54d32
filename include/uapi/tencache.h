/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * tencache.h - the one ABI between tencache.ko (/dev/tencache) and userspace.
 *
 * Every command is an ioctl on an open /dev/tencache whose argument is a
 * struct that starts with "__u32 size" (iommufd style). Userspace sets size to
 * sizeof() the struct it was built with; the kernel accepts any size from the
 * first version of the struct up, and rejects bytes it does not understand
 * unless they are zero. Reserved fields and unknown flags must be zero.
 * Fields marked "output" are ignored on input. The kernel writes back no
 * more than size bytes.
 *
 * Errors, common to every command (ioctl() returns -1 with errno):
 *  ENOTTY  the ioctl number is not a tencache command
 *  EFAULT  the argument (or an array it points to) is not readable/writable
 *  EINVAL  size is smaller than the first version of the struct, a flag is
 *          unknown, a reserved field is not zero, or a value is out of range
 *  E2BIG   size is larger than the kernel's struct and the extra bytes are
 *          not all zero
 * Command-specific errors are listed with each command below.
 */
#ifndef _UAPI_TENCACHE_H
#define _UAPI_TENCACHE_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define TENCACHE_DEV_PATH	"/dev/tencache"
#define TENCACHE_ABI_VERSION	1

/* Pool blocks are physically contiguous 2 MiB (order-9) compound pages. */
#define TENCACHE_BLOCK_SHIFT	21
#define TENCACHE_BLOCK_SIZE	(1ULL << TENCACHE_BLOCK_SHIFT)

/* "Any NUMA node": the node of the calling CPU first, then any other. */
#define TENCACHE_NODE_ANY	0xffffffffu

/*
 * mmap offset of a buffer: handle << TENCACHE_MMAP_SHIFT. A mapping may cover
 * any page-aligned sub-range of one buffer; a 2 MiB-aligned offset gives
 * 2 MiB (PMD) mappings.
 */
#define TENCACHE_MMAP_SHIFT	40

#define TENCACHE_TYPE		0xCA

enum {
	TENCACHE_CMD_BASE = 0x80,
	TENCACHE_CMD_INFO = TENCACHE_CMD_BASE,
	TENCACHE_CMD_ALLOC,
	TENCACHE_CMD_FREE,
	TENCACHE_CMD_SUBMIT,
	TENCACHE_CMD_REAP,
};

/* Feature bits reported by TENCACHE_INFO. */
#define TENCACHE_FEAT_POOL	(1ULL << 0)	/* ALLOC/FREE/mmap */
#define TENCACHE_FEAT_PMD_MAP	(1ULL << 1)	/* 2 MiB page-table mappings */
#define TENCACHE_FEAT_STAGING	(1ULL << 2)	/* SUBMIT/REAP direct I/O, poll() */

/**
 * struct tencache_info - TENCACHE_INFO: ABI version, features and pool totals
 * @size: sizeof(struct tencache_info)
 * @flags: must be 0
 * @abi_version: output, TENCACHE_ABI_VERSION of the running module
 * @nr_nodes: output, number of NUMA nodes with memory (node ids may be sparse)
 * @features: output, TENCACHE_FEAT_* bits
 * @block_size: output, bytes per pool block (TENCACHE_BLOCK_SIZE)
 * @reserved_bytes: output, the reservation: blocks kept by the module when free
 * @max_bytes: output, the hard cap on blocks held by the module
 * @pool_bytes: output, bytes of blocks the module holds now (in use + free)
 * @used_bytes: output, bytes of blocks in live buffers (all users)
 * @free_bytes: output, bytes of blocks on the module's free lists
 * @file_bytes: output, bytes allocated through this open file
 * @file_buffers: output, live buffers of this open file
 * @max_inflight: output, in-flight staging I/O cap per open file
 *
 * Cannot fail except for the common errors.
 */
struct tencache_info {
	__u32 size;
	__u32 flags;
	__u32 abi_version;
	__u32 nr_nodes;
	__aligned_u64 features;
	__aligned_u64 block_size;
	__aligned_u64 reserved_bytes;
	__aligned_u64 max_bytes;
	__aligned_u64 pool_bytes;
	__aligned_u64 used_bytes;
	__aligned_u64 free_bytes;
	__aligned_u64 file_bytes;
	__u32 file_buffers;
	__u32 max_inflight;
};
#define TENCACHE_INFO		_IO(TENCACHE_TYPE, TENCACHE_CMD_INFO)

/* ALLOC flags */
#define TENCACHE_ALLOC_NODE_STRICT	(1u << 0) /* only @node, never another */
#define TENCACHE_ALLOC_FLAGS_ALL	TENCACHE_ALLOC_NODE_STRICT

/**
 * struct tencache_alloc - TENCACHE_ALLOC: allocate a zeroed, pinned buffer
 * @size: sizeof(struct tencache_alloc)
 * @flags: TENCACHE_ALLOC_* flags
 * @length: bytes wanted; rounded up to a multiple of TENCACHE_BLOCK_SIZE
 * @node: NUMA node to allocate on, or TENCACHE_NODE_ANY. Without
 *	TENCACHE_ALLOC_NODE_STRICT, other nodes are used when @node is short.
 * @handle: output, the buffer's handle (never 0)
 * @mmap_offset: output, the offset to pass to mmap(); see TENCACHE_MMAP_SHIFT
 * @alloc_length: output, the length actually allocated (@length rounded up)
 *
 * The buffer belongs to the open file: closing it (or the process dying)
 * frees every buffer it still holds. It is charged to the caller's pinned
 * memory (VmPin) against RLIMIT_MEMLOCK unless the caller has CAP_IPC_LOCK.
 *
 * Errors:
 *  EINVAL  @length is 0 or above the pool cap; TENCACHE_ALLOC_NODE_STRICT
 *          with TENCACHE_NODE_ANY
 *  ENODEV  @node is not TENCACHE_NODE_ANY and not a node with memory
 *  ENOMEM  the pool cap (max_pool_mb) would be exceeded, RLIMIT_MEMLOCK would
 *          be exceeded, or the kernel has no free 2 MiB blocks (on @node)
 *  ENOSPC  this open file has 2^20 - 1 buffers already
 */
struct tencache_alloc {
	__u32 size;
	__u32 flags;
	__aligned_u64 length;
	__u32 node;
	__u32 handle;
	__aligned_u64 mmap_offset;
	__aligned_u64 alloc_length;
};
#define TENCACHE_ALLOC		_IO(TENCACHE_TYPE, TENCACHE_CMD_ALLOC)

/**
 * struct tencache_free - TENCACHE_FREE: free a buffer
 * @size: sizeof(struct tencache_free)
 * @flags: must be 0
 * @handle: the handle ALLOC returned on this open file
 * @__reserved: must be 0
 *
 * The handle is gone at once. A buffer that is still mapped keeps its memory
 * until its last mapping goes away; then the blocks return to the pool.
 *
 * Errors:
 *  ENOENT  no buffer with this handle on this open file
 *  EBUSY   staging I/O on the buffer is in flight (reap it first); the buffer
 *          is left as it was
 */
struct tencache_free {
	__u32 size;
	__u32 flags;
	__u32 handle;
	__u32 __reserved;
};
#define TENCACHE_FREE		_IO(TENCACHE_TYPE, TENCACHE_CMD_FREE)

/* Staging operations (struct tencache_io.op) */
enum tencache_op {
	TENCACHE_OP_READ = 1,	/* file -> buffer */
	TENCACHE_OP_WRITE,	/* buffer -> file */
	TENCACHE_OP_FSYNC,	/* vfs_fsync(file); buffer fields must be 0 */
	TENCACHE_OP_FDATASYNC,	/* vfs_fsync(file, datasync) */
};

/**
 * struct tencache_io - one staging request, an element of the SUBMIT array
 * @op: enum tencache_op
 * @flags: must be 0
 * @fd: file descriptor of a regular file or block device that supports
 *	O_DIRECT (it need not be opened with O_DIRECT); READ needs it opened for
 *	reading, WRITE for writing
 * @handle: the buffer (READ/WRITE), 0 for FSYNC/FDATASYNC
 * @buf_offset: byte offset into the buffer
 * @file_offset: byte offset in the file
 * @length: bytes; @buf_offset, @file_offset and @length must be multiples of
 *	the file's logical block size, and the range must lie inside the buffer
 * @user_data: returned unchanged in the completion
 */
struct tencache_io {
	__u32 op;
	__u32 flags;
	__u32 fd;
	__u32 handle;
	__aligned_u64 buf_offset;
	__aligned_u64 file_offset;
	__aligned_u64 length;
	__aligned_u64 user_data;
};

/**
 * struct tencache_submit - TENCACHE_SUBMIT: queue a batch of staging requests
 * @size: sizeof(struct tencache_submit)
 * @flags: must be 0
 * @nr: number of elements in @ios (1..1024)
 * @entry_size: sizeof(struct tencache_io)
 * @ios: user pointer to an array of @nr struct tencache_io
 * @queued: output, how many requests were queued (a prefix of @ios)
 * @__reserved: must be 0
 *
 * Requests are checked and queued in order. The call stops at the first
 * request that fails its checks: it returns 0 with @queued set when at least
 * one request was queued, and -1 with the errno of the failing request when
 * none was. Each queued request gives exactly one completion (REAP).
 *
 * Errors (of the first request):
 *  EBADF   @fd is not open, or not open for reading (READ) / writing (WRITE)
 *  EOPNOTSUPP  @fd is not a regular file or block device with direct I/O
 *  ENOENT  @handle is not a buffer of this open file
 *  EINVAL  unknown @op, unaligned offset or length, length 0, range outside
 *          the buffer, buffer fields set for FSYNC/FDATASYNC
 *  EAGAIN  the open file has max_inflight requests in flight; reap first
 */
struct tencache_submit {
	__u32 size;
	__u32 flags;
	__u32 nr;
	__u32 entry_size;
	__aligned_u64 ios;
	__u32 queued;
	__u32 __reserved;
};
#define TENCACHE_SUBMIT		_IO(TENCACHE_TYPE, TENCACHE_CMD_SUBMIT)

/* Completion flags (struct tencache_cqe.flags) */
#define TENCACHE_CQE_SHORT	(1u << 0)	/* fewer bytes than asked (EOF) */

/**
 * struct tencache_cqe - one completion, an element of the REAP array
 * @user_data: the request's user_data
 * @result: bytes transferred (>= 0), or -errno of the failed I/O
 * @flags: TENCACHE_CQE_* flags
 * @__reserved: 0
 */
struct tencache_cqe {
	__aligned_u64 user_data;
	__s64 result;
	__u32 flags;
	__u32 __reserved;
};

/**
 * struct tencache_reap - TENCACHE_REAP: collect completions
 * @size: sizeof(struct tencache_reap)
 * @flags: must be 0
 * @min_nr: wait until at least this many completions are ready (0: don't wait)
 * @max_nr: room in @cqes (1..1024); at most this many are returned
 * @timeout_ns: give up waiting after this long; 0 waits without limit
 * @cqes: user pointer to an array of @max_nr struct tencache_cqe
 * @nr: output, completions written to @cqes
 * @entry_size: sizeof(struct tencache_cqe)
 *
 * Returns 0 with @nr completions, also when the timeout expired with fewer
 * than @min_nr (then @nr may be 0). poll() on the file reports POLLIN while
 * completions are ready.
 *
 * Errors:
 *  EINVAL  @min_nr > @max_nr, @max_nr 0 or above 1024
 *  EINTR   a signal arrived before @min_nr completions (none were taken)
 */
struct tencache_reap {
	__u32 size;
	__u32 flags;
	__u32 min_nr;
	__u32 max_nr;
	__aligned_u64 timeout_ns;
	__aligned_u64 cqes;
	__u32 nr;
	__u32 entry_size;
};
#define TENCACHE_REAP		_IO(TENCACHE_TYPE, TENCACHE_CMD_REAP)

#define TENCACHE_BATCH_MAX	1024

#endif /* _UAPI_TENCACHE_H */
