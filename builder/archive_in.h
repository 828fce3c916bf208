/* SPDX-License-Identifier: MIT */
/*
 * Reading a tar (ustar, pax, GNU), cpio or zip archive, plain or compressed, into the
 * same tree a directory scan gives (tree.h), through libarchive. Entries are applied as
 * tar extracts them: a later entry for a path replaces the earlier one (a directory
 * over a directory keeps its children; in a zip, only that), leading "/" and "./" are
 * dropped, "." is the root, and a path with "..", or a hard link to a path not (yet) in
 * the archive, is refused. The bytes of a regular file stay where they are in a
 * seekable uncompressed tar or cpio; the others are copied into a spool, an unlinked
 * temporary file beside the image, holes left as holes. Not thread-safe; one archive at
 * a time.
 *
 * A crafted archive costs what its bytes cost: a path is found or made one (parent, name)
 * look-up per name; a path longer than the readers take (TREE_PATH_MAX, so at most
 * TREE_DEPTH_MAX names) is refused; hard links share their inode's attributes instead of
 * copying them; an entry's attribute names fit in 64 KiB as Linux lists them; a hole is
 * never written, nor read back.
 */
#ifndef MKSTP_ARCHIVE_IN_H
#define MKSTP_ARCHIVE_IN_H

#include <stdint.h>

#include "scan.h"

struct archive_source {
	int fd;        /* the archive, when some file is read in place there; else -1 */
	int spool_fd;  /* the spool, when some file was copied there; else -1 */
};

/* Reads archive PATH ("-": standard input, always spooled) into T, the spool (if any)
 * created in directory SPOOL_DIR. Directories the archive does not list are made 0755,
 * owned by 0:0, with mtime EPOCH. OPTS (NULL: none) leaves out what its exclude list
 * matches, an entry below an excluded directory too, and with no_xattrs stores no
 * extended attribute; one_file_system has no meaning for an archive. On
 * success *SRC holds the descriptors the files are read from (hand them to
 * source_use_archive; close with archive_source_close). Errors are printed naming the
 * archive and the entry; returns 0 or -errno (-EINVAL for a bad archive). */
int archive_tree(const char *path, const char *spool_dir, int64_t epoch,
		 const struct scan_opts *opts, struct tree *t, struct archive_source *src);
void archive_source_close(struct archive_source *src);

#endif
