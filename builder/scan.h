/* SPDX-License-Identifier: MIT */
/*
 * Scanning the source tree into memory: every entry with its attributes, link target and
 * extended attributes, children sorted by name, hard links folded onto one inode. Not
 * thread-safe; the tree is owned by the caller (tree_free).
 */
#ifndef MKSTP_SCAN_H
#define MKSTP_SCAN_H

#include <stddef.h>
#include <sys/stat.h>

#include "exclude.h"
#include "select.h"
#include "tree.h"

/* What the scan leaves out, for a directory and an archive alike; all zero: nothing.
 * EXCLUDE: entries whose path from the source root it matches (exclude.h) are not in the
 * tree, and an excluded directory is never opened, so its contents go with it.
 * SELECT: only the paths it lists and what lies below them, with the directories that lead to
 * them (select.h). ONE_FILE_SYSTEM: a directory on another device than the source root is kept, with its
 * attributes and no entries (as tar --one-file-system keeps a mount point); other types
 * are kept whatever their device. NO_XATTRS: no extended attribute is read or stored. */
struct scan_opts {
	const struct exclude *exclude;
	struct select *select;
	int one_file_system;
	int no_xattrs;
	int ignore_failed_read;
};

/* Scans SOURCE (a directory, or a symlink to one: only SOURCE itself is followed),
 * leaving out the files SKIP[0..NSKIP) name by device and inode (the image being written,
 * when it lies inside SOURCE) and what OPTS says (NULL: nothing; read during the call
 * only). Every entry is reached beneath its parent's descriptor; SOURCE's stays open in
 * source.h for reading the files later. An entry that cannot be read (or changed while
 * it was looked at) is reported with its path and left out, with what lies below it, and
 * the scan goes on: scan_tree_dropped counts them, and a path -T lists that is not met
 * counts as one too. With OPTS->ignore_failed_read those reports count as warnings
 * (report.h). Returns 0, or -errno when SOURCE itself cannot be read or memory runs out. */
int scan_tree(const char *source, const struct stat *skip, size_t nskip,
	      const struct scan_opts *opts, struct tree *out);
/* The entries the last scan_tree left out because they could not be read. */
size_t scan_tree_dropped(void);
/* Sets N's filter and code span from its bytes, which begin at BASE in FD (a regular
 * file of at least 64 bytes). Errors are printed with N's path; 0 or -errno. */
int scan_read_filter(struct node *n, int fd, uint64_t base);

#endif
