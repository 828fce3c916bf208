/* SPDX-License-Identifier: MIT */
/*
 * The mount point, pinned: the monitor checks a directory and mounts on that directory,
 * not on whatever its path names by then. A user who owns a directory on the path
 * could otherwise swap the mount point for a symlink between the check and root's
 * mount(2), and have root mount over a directory of the user's choosing.
 *
 * Thread-safe; the caller owns the descriptors returned.
 */
#ifndef STP_MOUNTPOINT_H
#define STP_MOUNTPOINT_H

#include <stddef.h>
#include <sys/types.h>

/* Opens PATH (absolute, without symlinks: realpath made it so when the options were
 * read) one component at a time, following no symlink: *DIR_FD is the directory, O_PATH,
 * and *PARENT_FD the directory that holds it (PATH itself for "/"), both close on exec.
 * -ELOOP when a component is a symlink now (the path changed since), -ENOTDIR when the
 * last one is not a directory, -EINVAL for a relative PATH, else the open's -errno. */
int stp_mountpoint_open(const char *path, int *dir_fd, int *parent_fd);

/* "/proc/self/fd/DIR_FD" in BUF (LEN bytes): the directory itself, for mount(2), which
 * follows that link to the directory open on DIR_FD and to nothing else. */
const char *stp_mountpoint_fd_path(int dir_fd, char *buf, size_t len);

/* The device of what FD is open on, as stat gives it, with no request to a FUSE mount
 * (statx asks for no attribute and not to sync). 0 or -errno. */
int stp_mountpoint_dev(int fd, dev_t *dev);

/* The device of the mount on top of DIR_FD's directory, whatever its name is by now:
 * the mount tree there is cloned, detached, and ".." from the clone's root reaches the
 * top of its mounts (the only lookup that enters a mount without naming it). Needs
 * CAP_SYS_ADMIN (-EPERM without); -ENOSYS before Linux 5.2. Sends no FUSE request.
 * The clone goes with its last descriptor, and that close waits for an RCU grace period
 * (milliseconds): with CLONE_FD, the caller takes the clone (-1 on failure) to close
 * where nothing waits for it; NULL: it is closed here. */
int stp_mountpoint_top_dev(int dir_fd, dev_t *dev, int *clone_fd);

#endif
