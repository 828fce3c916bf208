/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for the parts of libfuse's low-level API that mounthelper/mount/fuseops.c
 * and warm.c call, so that a fuzz target can run the FUSE operations without a kernel.
 *
 * The caller fills a struct fuse_req, calls one handler of stp_fuseops with it, then
 * shim_finish(). Every reply is checked as the kernel (or libfuse) would check it, and a
 * reply the kernel would refuse or misread aborts: two replies to one request, none, a
 * buffer longer than the request asked for, an entry or attributes with an impossible
 * mode or size, a link target the kernel cannot take, a directory listing it would call
 * corrupt, an xattr answer that does not fit the size asked. The reply is kept in
 * req->reply for the caller's own checks.
 *
 * Not thread-safe: one request at a time.
 */
#ifndef STP_FUSE_SHIM_H
#define STP_FUSE_SHIM_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <fuse_lowlevel.h>

#define STP_SHIM_NAME_MAX 255 /* STP_NAME_MAX: longer names are a broken promise */

enum shim_op {
	SHIM_LOOKUP, SHIM_GETATTR, SHIM_READLINK, SHIM_OPEN, SHIM_READ, SHIM_RELEASE,
	SHIM_OPENDIR, SHIM_READDIR, SHIM_READDIRPLUS, SHIM_STATFS, SHIM_GETXATTR, SHIM_LISTXATTR,
	SHIM_LSEEK,
};

enum shim_kind {
	SHIM_NONE, SHIM_ERR, SHIM_ENTRY, SHIM_ATTR, SHIM_LINK, SHIM_OPENED, SHIM_DATA,
	SHIM_XATTR_SIZE, SHIM_STATFS_REPLY, SHIM_OFFSET,
};

/* One parsed directory entry of a readdir or readdirplus reply. */
struct shim_dirent {
	uint64_t ino, off;
	unsigned type;             /* DT_* */
	char name[STP_SHIM_NAME_MAX + 1];
};

struct shim_reply {
	enum shim_kind kind;
	int err;                   /* SHIM_ERR */
	struct fuse_entry_param entry;
	struct stat attr;          /* SHIM_ATTR */
	struct statvfs statfs;
	size_t xattr_size;         /* SHIM_XATTR_SIZE */
	off_t offset;              /* SHIM_OFFSET */
	uint8_t *data;             /* SHIM_DATA and SHIM_LINK (NUL-terminated): a copy */
	size_t len;
	struct shim_dirent *dirents; /* SHIM_DATA of readdir(plus), parsed */
	size_t ndirents;
};

struct fuse_req {
	enum shim_op op;
	fuse_ino_t ino;            /* the inode the request is about */
	size_t size;               /* read, readdir(plus), getxattr, listxattr: bytes asked */
	void *userdata;            /* the struct stp_fs */
	unsigned replies;
	int fail;                  /* what reply functions return: nonzero, a send that failed */
	struct shim_reply reply;
};

/* Checks that exactly one reply was sent; the reply stays in REQ until shim_clear(). */
void shim_finish(struct fuse_req *req);
/* Frees what the reply holds and makes REQ ready for reuse. */
void shim_clear(struct fuse_req *req);

#endif
