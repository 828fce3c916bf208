/* SPDX-License-Identifier: MIT */
/*
 * `stipple extract --tar`: the image's whole tree as one pax archive, its headers encoded
 * by tarhead.h. Names are "./" and "./a/b" (directories with a trailing slash), parents
 * before children, each directory's entries in image order; the first name of an inode
 * with several carries it, later names are hard links to it. Owners are numbers only,
 * mtimes keep their nanoseconds, holes become a GNU 1.0 sparse map, xattrs become
 * SCHILY.xattr records and the POSIX ACL xattrs SCHILY.acl ones, as GNU tar writes and
 * reads them. Sockets, which tar cannot hold, are left out with a warning. Nothing
 * depends on the time, the user, the locale or the process: the same image gives the
 * same bytes, and the archive ends on a whole 10240-byte record.
 *
 * Single-threaded (it ignores SIGPIPE, and handles signals to remove its temporary
 * file).
 */
#ifndef STP_TAROUT_H
#define STP_TAROUT_H

struct stp_cli;

/* Writes the tree of IMAGE to the file DEST, or to standard output when DEST is NULL or
 * "-" (refused when that is a terminal). A file is written under a temporary name beside
 * DEST and renamed into place only once complete; on any failure it is removed and DEST
 * left as it was. Prints every problem (through CLI, naming the image and the path) and
 * returns the exit status (commands.h). LIST: each name on stderr as it is written, as
 * tar -cv lists it when the archive goes to standard output. */
int stp_tarout_run(const struct stp_cli *cli, const char *image, const char *dest, int list);

#endif
