/* SPDX-License-Identifier: MIT */
/*
 * Paths resolved for a writer that may be root, in directories other users own.
 *
 * Every component is opened from its directory's descriptor with O_NOFOLLOW; a symlink is
 * read by hand and followed only if the kernel's protected_symlinks rule would follow it
 * (not another user's link in a sticky world-writable directory, unless that user owns
 * the directory) and its owner is root, the caller (effective uid), or the owner of what
 * it leads to (Apache's SymLinksIfOwnerMatch). So the owner of a directory on the way
 * cannot send the writer to a file or directory of someone else's: a link of hers leads
 * only to what she owns, and could write herself.
 *
 * Functions return a descriptor (>= 0) or -errno. -EACCES with w->refused set is a link
 * not followed: w->link names it (as the path spelled it, through the links before it),
 * w->link_uid and w->target_uid say whose. Not thread-safe per struct; no globals.
 */
#ifndef STP_TRUSTPATH_H
#define STP_TRUSTPATH_H

#include <limits.h>
#include <sys/stat.h>
#include <sys/types.h>

struct stp_trustpath {
	int hops;            /* links followed so far: at most 40, as the kernel */
	int refused;         /* the last -EACCES was a link not followed */
	uid_t link_uid;      /* when refused: the link's owner */
	uid_t target_uid;    /* ... and the owner of what it leads to */
	char link[PATH_MAX]; /* ... and its name */
};

/* Opens PATH (O_PATH, relative to the working directory unless absolute), following its
 * links by the rule above, the last one too. */
int stp_trustpath_open(struct stp_trustpath *w, const char *path);

/* The kernel's protected_symlinks and protected_regular rules, which a link read by hand
 * and a rename over a file escape: whether NODE, found in the directory DIRFD, is owned by
 * neither the caller nor the directory's owner in a sticky world-writable directory, so
 * someone else's to plant (1) or not (0). */
int stp_trustpath_planted(int dirfd, const struct stat *node);

/* Whether a symlink LINK, found in the directory DIRFD, may lead to a node owned by
 * TARGET_UID (the rule above; the sticky clause needs DIRFD). */
int stp_trustpath_may_follow(int dirfd, const struct stat *link, uid_t target_uid);

/* PATH as a directory: made with MODE when absent (its last name, if it is absent),
 * never followed when it is a link made after the walk looked. Returns an
 * O_RDONLY|O_DIRECTORY descriptor; *MADE says whether it was made. */
int stp_trustpath_open_dir(struct stp_trustpath *w, const char *path, mode_t mode, int *made);

/* The message for a refusal of a link on the way to PATH: "LINK: a symlink owned by uid
 * N, ...: not followed", without "LINK: " when it is PATH itself (static storage,
 * overwritten by the next call). */
const char *stp_trustpath_why(const struct stp_trustpath *w, const char *path);

#endif
