/* SPDX-License-Identifier: MIT */
/*
 * One mount, as the FUSE operations see it: the session's userdata. The daemon owns it and
 * everything it points to, fills it before the loop starts, and frees it after; the
 * operations only read it, except where noted. Only the daemon and fuseops.c include this:
 * warming, recording and status take what they need as arguments.
 */
#ifndef STP_FS_H
#define STP_FS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct stp_image;
struct stp_cache;
struct stp_mount_opts;
struct stp_warmer;
struct stp_filler;
struct stp_recorder;
struct stp_readfail;
struct stp_inodes;
struct fuse_session;

struct stp_fs {
	const struct stp_image *img;
	struct stp_cache *cache;
	const struct stp_mount_opts *opts;
	struct fuse_session *se;   /* set before the loop starts */
	struct stp_warmer *warmer; /* warming at mount; NULL when off or done with */
	struct stp_filler *filler; /* page-cache filling from reads' blocks; NULL when off */
	struct stp_recorder *recorder; /* --record: the reads to list; NULL when off */
	struct stp_readfail *readfail; /* failed reads: counted and logged; NULL: neither */
	struct stp_inodes *inodes; /* the inodes the kernel knows; NULL: none counted */
	/* Written by the init handler, which runs before any other request. */
	bool no_open;              /* the kernel opens files without asking: no round trip */
	bool no_xattrs;            /* the image stores none: getxattr says EOPNOTSUPP */
	/* Written by any request: a hint whether walkers stat the entries they list, which
	 * decides the attributes of a directory's first READDIRPLUS reply (fuseops.c). */
	atomic_uint stat_walk;
	/* A bit per image inode: a directory opened before, whose listing the kernel keeps
	 * from now on (fuseops.c). Owned by the daemon; NULL: every listing is kept. */
	atomic_uchar *opened_dirs;
	uint32_t inode_count;
};

#endif
