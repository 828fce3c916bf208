/* SPDX-License-Identifier: MIT */
/*
 * The FUSE low-level operations that serve an image read-only.
 *
 * Inode numbers: image inode N is FUSE inode N + 1, so the image's root (0) is
 * FUSE_ROOT_ID. The image never changes, so every reply asks the kernel to cache it for
 * good: entries (negative ones too), attributes, file pages, directory listings and link
 * targets. Nothing is allocated per lookup or per open, so forget needs no handler.
 *
 * Every operation may run on any thread of libfuse's multithreaded loop at once: they read
 * the immutable image and the thread-safe block cache only. Handlers reply themselves and
 * return nothing; failures reach the kernel as errnos (a damaged block as EIO) and are
 * logged through stp_log.
 */
#ifndef STP_FUSEOPS_H
#define STP_FUSEOPS_H

#ifndef FUSE_USE_VERSION
#define FUSE_USE_VERSION 314
#endif

#include <stdbool.h>
#include <stdint.h>

#include <fuse_lowlevel.h>

struct stp_image;
struct stp_cache;
struct stp_mount_opts;
struct stp_warmer;
struct stp_recorder;

/* One mount: the session's userdata. The daemon fills it before the session is created and
 * owns everything it points to; the loop only reads it, except where noted. */
struct stp_fs {
	const struct stp_image *img;
	struct stp_cache *cache;
	const struct stp_mount_opts *opts;
	struct fuse_session *se;   /* set before the loop starts */
	struct stp_warmer *warmer; /* warming at mount; NULL when off or done with */
	struct stp_recorder *recorder; /* --record: the reads to list; NULL when off */
	uint32_t block_log;        /* of the image: block = stream offset >> block_log */
	/* Written by the init handler, which runs before any other request. */
	bool no_open;              /* the kernel opens files without asking: no round trip */
	bool no_opendir;           /* the same for directories */
};

extern const struct fuse_lowlevel_ops stp_fuseops;

static inline fuse_ino_t stp_fuseops_ino(uint32_t image_ino)
{
	return (fuse_ino_t)image_ino + 1;
}

#endif
