/* SPDX-License-Identifier: MIT */
/*
 * A published index on the local disk (stipple(5), PUBLISHED INDEX) read as the image it
 * stands for: its superblock copy and tail from the index, each block from the block
 * file beside it (DIR/blocks/HH/H64), read whole and checked against its SHA-256 before
 * a byte of it is used (a mismatch reads as -EIO). For `stipple publish --base
 * DIR/OLD.stp`, whose release pipeline keeps the published directory, not the image.
 *
 * The index is untrusted: checked whole (stp_pubindex_check) and bounded by its length.
 * Block files are opened beneath the directory's descriptor, with no link on the way and
 * no wait at the open. One block is held at a time, under a lock: pread is thread-safe.
 */
#ifndef STP_LOCALINDEX_H
#define STP_LOCALINDEX_H

#include <stdbool.h>
#include <stddef.h>

struct stp_imgsrc;

/* Whether the file at PATH starts with an index's magic. */
bool stp_localindex_is(const char *path);

/* The image source of the index at PATH; *OUT the caller's (stp_imgsrc_close). On
 * failure *WHY says why in words (static). -EUCLEAN, -EPROTONOSUPPORT, -EFBIG, -errno. */
int stp_localindex_open(const char *path, struct stp_imgsrc **out, const char **why);

#endif
