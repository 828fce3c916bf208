/* SPDX-License-Identifier: MIT */
/*
 * Priming: once a mount with warming is live, the process that mounted it looks up every
 * file of the hot region through the mount, in the order the files come in the region.
 * The kernel then knows those files before the application starts: the application's
 * lookups of them are answered from the dentry cache without a round trip, and the
 * warmer can push their pages into the page cache as soon as their blocks are decoded
 * (the kernel takes pages only for inodes it knows), instead of after the application
 * has already asked for them.
 *
 * This runs in the mounting process, not in the daemon: the confined daemon has no path
 * to its own mount (its root is an empty tmpfs) and, running as another user, may not be
 * let in. Only lookups are made (openat2 with O_PATH, then fstat), never a read. The
 * image is untrusted: each path is resolved beneath the mount's root with no symlink,
 * ".." or other mount followed, the file found must carry the inode the plan expects,
 * and the lookups run in a child that is killed after 10 s, so a damaged image or a
 * daemon that stops answering can neither lead the (often privileged) caller outside the
 * mount nor hold mount(8) up.
 *
 * Not thread-safe: one call at a time per image. Returns 0 or a negative errno.
 */
#ifndef STP_PRIME_H
#define STP_PRIME_H

struct stp_image;

/* Looks up the files of IMG's hot region under MOUNTPOINT, where IMG is mounted (nothing
 * to do without a hot region). -ENOMEM; an error opening MOUNTPOINT; -ESTALE when
 * MOUNTPOINT is not the root of a FUSE mount; -ETIMEDOUT when the lookups took too long.
 * A lookup that fails is not an error (priming only saves time): it ends the lookups
 * when it shows the mount gone or not the image's. */
int stp_prime_mount(const struct stp_image *img, const char *mountpoint);

#endif
