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

struct stp_cli;

/* Opens DEST (O_RDONLY|O_DIRECTORY) as above. Returns the descriptor, or -1 after a
 * message naming DEST (through CLI). */
int stp_destdir_open(const struct stp_cli *cli, const char *dest);

#endif
