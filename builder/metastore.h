/* SPDX-License-Identifier: MIT */
/*
 * Storing the encoded metadata as pages (stipple(5), METADATA PAGES): cut into pages of
 * STP_META_PAGE_SIZE, each compressed on its own, on several threads, then written in
 * order followed by the page table. The result does not depend on the thread count.
 */
#ifndef MKSTP_METASTORE_H
#define MKSTP_METASTORE_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Writes the LEN bytes of metadata at META to FD from offset POS, compressing at zstd
 * LEVEL (at most 14: more finds little in a page) with up to THREADS threads, and fills
 * in SB's metadata fields and feature bit; *END is where the written bytes end. 0,
 * -ENOMEM, or a write error. */
int meta_store(const uint8_t *meta, size_t len, int level, unsigned threads, int fd,
	       uint64_t pos, struct stp_superblock *sb, uint64_t *end);

/* The same, the metadata stored whole as one zstd frame (raw when that is no smaller),
 * as images were before paged metadata: every reader can read it, and decodes it all
 * when it opens the image. */
int meta_store_whole(const uint8_t *meta, size_t len, int fd, uint64_t pos,
		     struct stp_superblock *sb, uint64_t *end);

#endif
