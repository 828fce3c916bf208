/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says is mounted where: /proc/self/mountinfo, read without touching the
 * mount itself (a stat or statfs of a FUSE mount is a request its daemon may never
 * answer). The monitor uses it to make sure that what it is about to unmount is the
 * mount it made.
 *
 * Not thread-safe (it reads a file with stdio); returns 0 or a negative errno.
 */
#ifndef STP_MOUNTINFO_H
#define STP_MOUNTINFO_H

/* Counts the fuse.stipple mounts of SOURCE stacked at MOUNTPOINT (both absolute paths, as
 * given to the mount) into *COUNT, and sets *TOP when the last mount made at MOUNTPOINT,
 * the one a path lookup reaches, is one of them. */
int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top);

#endif
