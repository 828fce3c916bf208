/* SPDX-License-Identifier: MIT */
/*
 * FUSE inode numbers: image inode N is FUSE inode N + 1, so that the image's root (0) is
 * FUSE_ROOT_ID (1). Every part of the mount that names an inode to the kernel (replies,
 * page-cache stores, priming's check of what a lookup found) goes through these.
 */
#ifndef STP_FUSEINO_H
#define STP_FUSEINO_H

#include <errno.h>
#include <stdint.h>

static inline uint64_t stp_fuseino_of(uint32_t image_ino)
{
	return (uint64_t)image_ino + 1;
}

/* The image inode of FUSE inode INO: 0, or -ESTALE for a number no image inode has. */
static inline int stp_fuseino_image(uint64_t ino, uint32_t *out)
{
	if (ino < 1 || ino - 1 > UINT32_MAX)
		return -ESTALE;
	*out = (uint32_t)(ino - 1);
	return 0;
}

#endif
