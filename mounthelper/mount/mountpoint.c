/* SPDX-License-Identifier: MIT */
/* The mount point, pinned (mountpoint.h); its opens are the monitor's (monitor.c). */
#include "mountpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "monitor.h"

/* Component NAME beneath AT, not followed if a symlink: a directory, or -ELOOP/-ENOTDIR. */
static int open_beneath(int at, const char *name)
{
	int fd = stp_monitor_open_node(at, name);
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode)) {
		int err = S_ISLNK(st.st_mode) ? -ELOOP : -ENOTDIR;

		close(fd);
		return err;
	}
	return fd;
}

int stp_mountpoint_open(const char *path, int *dir_fd, int *parent_fd)
{
	char name[NAME_MAX + 1];
	int parent = -1, dir;

	*dir_fd = *parent_fd = -1;
	if (path[0] != '/')
		return -EINVAL;
	dir = open_beneath(AT_FDCWD, "/");
	for (const char *p = path; dir >= 0 && *p;) {
		size_t len;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (!len)
			break;
		if (len > NAME_MAX) {
			close(dir);
			dir = -ENAMETOOLONG;
			break;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;
		if (parent >= 0)
			close(parent);
		parent = dir;
		dir = open_beneath(parent, name);
	}
	if (dir < 0) {
		if (parent >= 0)
			close(parent);
		return dir;
	}
	*dir_fd = dir;
	*parent_fd = parent >= 0 ? parent : fcntl(dir, F_DUPFD_CLOEXEC, 3);
	return 0;
}

const char *stp_mountpoint_fd_path(int dir_fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", dir_fd);
	return buf;
}

int stp_mountpoint_dev(int fd, dev_t *dev)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &stx))
		return -errno;
	*dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
	return 0;
}

int stp_mountpoint_top_dev(int dir_fd, dev_t *dev, int *clone_fd)
{
	int tree = stp_monitor_clone_tree(dir_fd);
	int top, err;

	if (clone_fd)
		*clone_fd = -1;
	if (tree < 0)
		return tree;
	top = stp_monitor_open_dir(tree, "..");
	err = top < 0 ? top : stp_mountpoint_dev(top, dev);
	if (top >= 0)
		close(top);
	if (clone_fd)
		*clone_fd = tree;
	else
		close(tree);
	return err;
}
