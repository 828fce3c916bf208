/* SPDX-License-Identifier: MIT */
/*
 * Owners and times set at build time, whatever the source: a pass over the scanned tree
 * that forces owners (--all-root, --uid, --gid), sets every mtime (--mtime) or clamps
 * mtimes to SOURCE_DATE_EPOCH. The packer checks each file against the stat the scan
 * saw, mtime included, so attrs_apply runs after the data is packed and before the
 * metadata is built. Not thread-safe; nothing here allocates.
 */
#ifndef MKSTP_ATTRS_H
#define MKSTP_ATTRS_H

#include <stdint.h>

#include "tree.h"

struct attr_opts {
	int64_t uid, gid;   /* >= 0: every entry gets it; -1: kept */
	int set_mtime;      /* every mtime becomes mtime (nanoseconds 0) */
	int64_t mtime;
	int clamp;          /* every mtime later than clamp_to becomes clamp_to */
	int64_t clamp_to;
};

/* No forcing: owners and times as scanned. */
#define ATTR_OPTS_NONE ((struct attr_opts){ .uid = -1, .gid = -1 })

/* Parses an --mtime value as GNU tar takes its commonest forms: @SECONDS (or SECONDS), an
 * ISO 8601 date YYYY-MM-DD[(T| )HH:MM[:SS[.F]]][[ ]ZONE] (ZONE: Z, UTC, GMT, +HH, +HHMM,
 * +HH:MM; none is UTC, not the host's zone; a fraction is dropped), or, when it starts
 * with / or ., the path of a file whose mtime is taken (whole seconds). Returns 0 and
 * sets *OUT; -EINVAL for a malformed value, -errno when the file cannot be stat'ed. */
int attrs_parse_time(const char *s, int64_t *out);
/* Reads SOURCE_DATE_EPOCH into O (unset or empty: no clamp). Returns 0, or -EINVAL
 * after printing a message naming the variable and its value. */
int attrs_load_env(struct attr_opts *o);
/* Applies O to every inode of T (hard links share theirs). */
void attrs_apply(struct tree *t, const struct attr_opts *o);

#endif
