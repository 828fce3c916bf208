/* SPDX-License-Identifier: MIT */
/*
 * Pseudo definitions, as mksquashfs(1) takes them with -p and -pf: one a line,
 * "PATH TYPE ...". mkstipple takes the "m" type, which sets the mode and owners of an
 * entry that SOURCE holds: "PATH m MODE UID GID", MODE in octal (the permission bits,
 * 07777 at most: the type stays), UID and GID numbers or names of this host's users and
 * groups. PATH is from the image's root ("/" in front or not); it may be in double
 * quotes, and a backslash takes the next byte as it is (a space in a name). Blank lines
 * and lines beginning with '#' are skipped. A definition applies to the inode, so to
 * every hard link of it, and wins over --all-root, --uid and --gid. The caller owns a
 * struct pseudo, zeroed to begin with, released with pseudo_free. Not thread-safe.
 */
#ifndef MKSTP_PSEUDO_H
#define MKSTP_PSEUDO_H

#include <stddef.h>
#include <sys/types.h>

#include "tree.h"

struct pseudo_def {
	char *path;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	struct node *node; /* set by pseudo_resolve */
};

struct pseudo {
	struct pseudo_def *v;
	size_t n;
};

/* Parses the definition LINE, from WHERE (an option or a file) at line LINENO (0: none
 * to name). Returns 0, or -EINVAL / -ENOMEM after reporting it. */
int pseudo_add(struct pseudo *p, const char *line, const char *where, unsigned lineno);
/* Adds the definitions of FILE; 0 or -errno after reporting every bad line. */
int pseudo_load(struct pseudo *p, const char *file);
/* Finds each definition's entry in T; reports every path T does not hold, and then
 * returns -ENOENT; else 0. */
int pseudo_resolve(struct pseudo *p, const struct tree *t);
/* Sets the modes and owners on the entries found (after pseudo_resolve). */
void pseudo_apply(const struct pseudo *p);
void pseudo_free(struct pseudo *p);

#endif
