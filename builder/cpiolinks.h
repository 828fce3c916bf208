/* SPDX-License-Identifier: MIT */
/*
 * What libarchive's cpio reader spends pairing hard links. cpio names no link target:
 * libarchive keeps the entries whose inode has more than one link (directories among
 * them, which nothing ever pairs) in a list, walked for each new such entry and left
 * only when all an inode's links were met. The walks cost the square of the list's
 * length. This mirrors the list by (device, inode) and adds up the steps, at most the
 * list's length a walk (libarchive stops at a match), so that the reader can refuse an
 * archive before they pass a budget, whatever mix of directories and links makes them.
 * Its own cost is within those steps: it holds only the inodes on the list. The caller
 * owns a struct cpio_links, zeroed to begin with and released with cpio_links_free. Not
 * thread-safe.
 */
#ifndef MKSTP_CPIOLINKS_H
#define MKSTP_CPIOLINKS_H

#include <stdint.h>

struct cpio_link;

struct cpio_links {
	struct cpio_link *slots; /* open addressing, at most half full */
	uint64_t nslots;
	uint64_t live;           /* entries libarchive's list holds now, the slots used */
	uint64_t steps;          /* list entries its walks have passed, at most */
};

/* Notes an entry of inode (DEV, INO) with NLINK links, as libarchive's reader has just
 * paired it or added it to its list. 0, or -ENOMEM. */
int cpio_links_note(struct cpio_links *l, uint64_t dev, uint64_t ino, uint32_t nlink);

void cpio_links_free(struct cpio_links *l);

#endif
