/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says is mounted where: /proc/self/mountinfo, read through libmount,
 * without touching the mount itself (a stat or statfs of a FUSE mount is a request its
 * daemon may never answer). The monitor uses it to refuse a mount point that is one
 * already, and to make sure that what it is about to unmount is the mount it made.
 *
 * Paths are compared as given: pass absolute, resolved paths. Not thread-safe; functions
 * return 0 or a negative errno.
 */
#ifndef STP_MOUNTINFO_H
#define STP_MOUNTINFO_H

#include <stddef.h>
#include <sys/types.h>

/* Counts the fuse.stipple mounts of SOURCE stacked at MOUNTPOINT into *COUNT, and sets
 * *TOP when the last mount made at MOUNTPOINT, the one a path lookup reaches, is one of
 * them. */
int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top);

/* Whether the mount of device DEV is a fuse.stipple mount of SOURCE made for UID (its
 * superblock's user_id=, which fusermount3 sets to the caller's uid whatever the options
 * say): 0 when it is, -ESTALE when not or when no mount has that device. */
int stp_mountinfo_made_for(dev_t dev, const char *source, uid_t uid);

#define STP_MOUNTINFO_SELF "/proc/self/mountinfo"

/* The top mount at MOUNTPOINT, of any kind but autofs: its source and file system type
 * into SOURCE and FSTYPE (CAP bytes each, cut to fit). -ENOENT when nothing is mounted
 * there, or when the top mount is an automounter's autofs trigger (the real mount goes
 * on top of it, as mount(8) does). */
int stp_mountinfo_top(const char *mountpoint, char *source, char *fstype, size_t cap);

/* The same, read from the mountinfo file TABLE (for tests). */
int stp_mountinfo_top_from_file(const char *table, const char *mountpoint, char *source,
				char *fstype, size_t cap);

#endif
