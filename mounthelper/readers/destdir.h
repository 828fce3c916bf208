/* SPDX-License-Identifier: MIT */
/*
 * The directory `stipple extract` fills. It must be absent (it is made, 0700) or an
 * empty directory: extract never merges into a tree. DEST is walked as trustpath.h says:
 * a symlink on the way, DEST's own name included, is followed only when root, the caller
 * or the owner of what it leads to owns it, so that the owner of a directory on the way
 * cannot send root's extraction (and its chown of DIR) into a directory of someone else's.
 * A link put in place of the directory extract has just made is never followed.
 *
 * Single-threaded (prints through cli.h).
 */
#ifndef STP_DESTDIR_H
#define STP_DESTDIR_H

#include <sys/types.h>

struct stp_cli;

/* Opens DEST (O_RDONLY|O_DIRECTORY) as above; *MADE says whether it was made, and so
 * holds the ACLs a default ACL on its parent gives it. Returns the descriptor, or -1
 * after a message naming DEST (through CLI). */
int stp_destdir_open(const struct stp_cli *cli, const char *dest, int *made);

/* The owner the filesystem of DIR (open as DIRFD) gives what this process makes there,
 * into *OWNER: not always the effective uid (NFS root_squash, vfat's uid=). Found by
 * making a file of a random name with O_EXCL and removing it. 0 or a negative errno. */
int stp_destdir_probe_owner(int dirfd, uid_t *owner);

#endif
