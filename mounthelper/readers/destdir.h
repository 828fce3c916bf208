/* SPDX-License-Identifier: MIT */
/*
 * The directory `stipple extract` fills. It must be absent (it is made, 0700) or an
 * empty directory: extract never merges into a tree. The directories above it are the
 * caller's choice and are followed; its own last name, when a symlink, is followed only
 * if root, the caller or the owner of the directory holding the link owns it, as the
 * kernel's protected_symlinks rule has it in sticky directories: anyone else may have
 * planted it to send root's extraction elsewhere.
 *
 * Single-threaded (prints through cli.h).
 */
#ifndef STP_DESTDIR_H
#define STP_DESTDIR_H

#include <sys/types.h>

struct stp_cli;

/* Opens DEST (O_RDONLY|O_DIRECTORY) as above. Returns the descriptor, or -1 after a
 * message naming DEST (through CLI). */
int stp_destdir_open(const struct stp_cli *cli, const char *dest);

/* The owner the filesystem of DIR (open as DIRFD) gives what this process makes there,
 * into *OWNER: not always the effective uid (NFS root_squash, vfat's uid=). Found by
 * making a file of a random name with O_EXCL and removing it. 0 or a negative errno. */
int stp_destdir_probe_owner(int dirfd, uid_t *owner);

#endif
