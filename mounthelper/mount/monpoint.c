/* SPDX-License-Identifier: MIT */
/* The mount point's checks, made by the monitor (monpoint.h). */
#include "monpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "monitor.h"
#include "monlog.h"
#include "monstate.h"
#include "mountopts.h"
#include "mountinfo.h"
#include "mountpoint.h"
#include "util.h"

/* Whether the directory pinned may be a mount point: not when the kernel says it is no
 * mount's root (statx, Linux 5.8; DONT_SYNC: no request to a FUSE daemon there). Then
 * nothing is mounted on it, and the mount table (all of it, twice, on every mount's way
 * to live) need not be read. */
static bool may_be_mounted_on(int fd)
{
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0, &stx) ||
	    !(stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
		return true;
	return stx.stx_attributes & STATX_ATTR_MOUNT_ROOT;
}

/* A second mount on a directory hides the first without a word: refused, naming what is
 * there, unless -o stack asks for it. */
static int check_not_mounted(const struct stp_mon *m)
{
	char source[256], fstype[256];
	int err = m->o->stack || !m->mp_mounted ? -ENOENT :
		  stp_mountinfo_top(m->o->mountpoint, source, fstype, sizeof(source));

	if (err == -ENOENT)
		return 0;
	if (err)
		stp_monlog_say(m->prog, "mount point %s: /proc/self/mountinfo: %s",
			       m->o->mountpoint, stp_strerror(err));
	else
		stp_monlog_say(m->prog, "mount point %s: already a mount point (%s, type %s); "
			       "unmount it first, or mount on top of it with -o stack",
			       m->o->mountpoint, source, fstype);
	return err ? err : -EBUSY;
}

/* The mount point is opened here, once, and pinned: what is checked is what is mounted on
 * (mountpoint.h). */
int stp_monpoint_check(struct stp_mon *m)
{
	const char *mp = m->o->mountpoint;
	int err = stp_mountpoint_open(mp, &m->mp_fd, &m->parent_fd);

	if (err == -ENOTDIR)
		stp_monlog_say(m->prog, "mount point %s: not a directory", mp);
	else if (err == -ELOOP)
		stp_monlog_say(m->prog, "mount point %s: a symlink on its path, where there was "
			       "none when the options were read: refused", mp);
	else if (err)
		stp_monlog_say(m->prog, "mount point %s: %s", mp, stp_strerror(err));
	if (err)
		return err;
	m->mp_mounted = may_be_mounted_on(m->mp_fd);
	return check_not_mounted(m);
}

/* Where an unmount will look: beneath the parent pinned with the mount point (a path
 * swapped later for a symlink cannot redirect root's umount2), and what is mounted there
 * already. */
void stp_monpoint_remember(struct stp_mon *m)
{
	const char *mp = m->o->mountpoint, *slash = strrchr(mp, '/');
	int top;

	m->base = slash ? slash + 1 : mp;
	if (m->mp_mounted)
		stp_mountinfo_ours(mp, m->o->image_path, &m->mounts_before, &top);
}

/* Whether there is a mount of ours to undo: the daemon said so, or (killed between
 * mount(2) and its message) mountinfo shows one more than before. Either way only when
 * the top mount at the mount point is ours. */
bool stp_monpoint_ours(const struct stp_mon *m)
{
	unsigned count;
	int top;

	if (stp_mountinfo_ours(m->o->mountpoint, m->o->image_path, &count, &top) || !top)
		return false;
	return m->mounted || count > m->mounts_before;
}

/* Whether the mount at the mount point is dead: the top mount there is ours, and its
 * connection answers nothing (ENOTCONN: the daemon and its /dev/fuse are gone). A live
 * mount made there since, of the same image, answers statfs and is left alone. */
bool stp_monpoint_dead(const struct stp_mon *m)
{
	struct statfs st;
	bool dead;
	int fd;

	if (!stp_monpoint_ours(m))
		return false;
	fd = stp_monitor_open_dir(m->parent_fd, m->base);
	if (fd < 0)
		return fd == -ENOTCONN;
	dead = fstatfs(fd, &st) < 0 && errno == ENOTCONN;
	close(fd);
	return dead;
}
