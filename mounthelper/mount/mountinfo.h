/* SPDX-License-Identifier: MIT */
/*
 * What the kernel says is mounted where: /proc/self/mountinfo, read by a small reader of
 * our own, not libmount, whose loading would be on every mount's path (tests/bench/
 * NOTES.md, "libmount out of the mount programs"), and without touching the mount itself
 * (a stat or statfs of a FUSE mount is a request its daemon may never answer). The
 * monitor uses it to refuse a mount point that is one already, and to make sure that what
 * it is about to unmount or prime is the mount it made. tests/unit/test_mountinfo.c checks
 * the reader against libmount's parse of the same files.
 *
 * Paths are compared as given: pass absolute, resolved paths. No global state; thread-safe.
 * Functions return 0 or a negative errno: -EBADMSG for a line that is not in the kernel's
 * format, -EOVERFLOW for one longer than STP_MOUNTINFO_LINE_MAX.
 */
#ifndef STP_MOUNTINFO_H
#define STP_MOUNTINFO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Longer than any line the kernel writes: its paths, source and type are PATH_MAX at
 * most, four bytes each once escaped, its mount data a page. */
#define STP_MOUNTINFO_LINE_MAX (1u << 20)

/* One line of the table, unescaped (\040 and the like), pointing into the line read. */
struct stp_mountinfo_entry {
	dev_t dev;           /* the superblock's device (MAJOR:MINOR) */
	const char *root;    /* the folder of the file system mounted */
	const char *target;  /* the mount point */
	const char *fstype;  /* "fuse.stipple" for ours: type and subtype */
	const char *source;  /* "" when none was given */
	const char *options; /* the superblock's options (user_id=...) */
};

/* Splits LINE (one line, without its newline) in place into *E: 0, or -EINVAL. */
int stp_mountinfo_parse_line(char *line, struct stp_mountinfo_entry *e);

/* Calls FN for each mount read from TABLE (a mountinfo file, open; the caller closes it),
 * in the table's order (a mount made later comes later), until FN returns non-zero: a
 * negative errno is returned, a positive value stops the walk with 0. A line is read
 * whole before its length is checked: TABLE is the kernel's table or a test's file,
 * never one a user wrote. The functions below read /proc/self/mountinfo, opened here:
 * the monitor's one open by path outside monitor.c. */
typedef int (*stp_mountinfo_fn)(const struct stp_mountinfo_entry *e, void *ctx);
int stp_mountinfo_each(FILE *table, stp_mountinfo_fn fn, void *ctx);

/* Counts the fuse.stipple mounts of SOURCE stacked at MOUNTPOINT into *COUNT, and sets
 * *TOP when the last mount made at MOUNTPOINT, the one a path lookup reaches, is one of
 * them. */
int stp_mountinfo_ours(const char *mountpoint, const char *source, unsigned *count, int *top);

/* Whether the mount of device DEV is a fuse.stipple mount of SOURCE made for UID (its
 * superblock's user_id=, which fusermount3 sets to the caller's uid whatever the options
 * say): 0 when it is, -ESTALE when not or when no mount has that device. */
int stp_mountinfo_made_for(dev_t dev, const char *source, uid_t uid);

/* The top mount at MOUNTPOINT, of any kind but autofs: its source and file system type
 * into SOURCE and FSTYPE (CAP bytes each, cut to fit). -ENOENT when nothing is mounted
 * there, or when the top mount is an automounter's autofs trigger (the real mount goes
 * on top of it, as mount(8) does). */
int stp_mountinfo_top(const char *mountpoint, char *source, char *fstype, size_t cap);

/* The same, read from TABLE (open; for tests), or for NULL from /proc/self/mountinfo. */
int stp_mountinfo_top_in(FILE *table, const char *mountpoint, char *source, char *fstype,
			 size_t cap);

#endif
