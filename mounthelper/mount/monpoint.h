/* SPDX-License-Identifier: MIT */
/*
 * The mount point, as the monitor checks it before the mount and finds its mount again
 * to undo it (monstate.h): opened once and pinned (mountpoint.h), refused when it is no
 * directory, a symlink appeared on its path, or something is mounted there already
 * (unless -o stack); the mount table (mountinfo.h) is read only when the kernel says
 * the directory may be a mount's root.
 *
 * Called from the monitor's one thread; not thread-safe.
 */
#ifndef STP_MONPOINT_H
#define STP_MONPOINT_H

#include <stdbool.h>

struct stp_mon;

/* Opens and checks m->o->mountpoint into m->mp_fd and m->parent_fd. 0, or a negative
 * errno with the reason said after m->prog (-EBUSY: already a mount point). */
int stp_monpoint_check(struct stp_mon *m);

/* Before the mount: m->base, the last component (unmounts go beneath m->parent_fd), and
 * how many mounts of the image are there already (m->mounts_before). */
void stp_monpoint_remember(struct stp_mon *m);

/* Whether a mount of ours is on top at the mount point to be undone: the daemon said it
 * mounted (m->mounted), or mountinfo shows one more than before. */
bool stp_monpoint_ours(const struct stp_mon *m);

/* Whether that mount is dead: ours, and its connection answers ENOTCONN. A live mount of
 * the same image made there since is left alone. */
bool stp_monpoint_dead(const struct stp_mon *m);

#endif
