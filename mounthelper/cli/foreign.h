/* SPDX-License-Identifier: MIT */
/*
 * A file named as IMAGE that is something else a user may take for one: an empty file,
 * a tar, cpio or zip archive, a compressed file, a squashfs or an erofs image. Told by
 * its magic, before the library reads it, so that the one message says what the file is
 * and what to run instead, not the library's "bad magic": the readers ask before they
 * open the file (stp_cli_open), the mount's monitor once the library refused it (the
 * monitor reads no more of an image than its superblock), holding the library's line
 * until then. A file that starts with stipple's magic is never one of those. Thread-safe.
 */
#ifndef STP_FOREIGN_H
#define STP_FOREIGN_H

#include <stddef.h>

/* When the local file PATH is one of those, writes "what it is, not a stipple image;
 * what to run instead" into MSG (LEN bytes) and returns 1; else (a stipple image, an
 * unknown kind, a file that cannot be read: the open will say) returns 0. */
int stp_foreign_describe(const char *path, char *msg, size_t len);
/* The same for the file open on FD (read with pread at offset 0), named PATH in MSG. */
int stp_foreign_describe_fd(int fd, const char *path, char *msg, size_t len);

#endif
