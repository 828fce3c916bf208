/* SPDX-License-Identifier: MIT */
/*
 * Paths left out of the image (--exclude, --exclude-from): shell globs (fnmatch(3), no
 * FNM_PERIOD, backslash escapes) matched against an entry's path from the source root,
 * written without a leading "/" or "./". A pattern without "/" (trailing ones aside) is
 * matched against the last component, at any depth; one with "/" against the whole path,
 * component by component, so "*" never crosses a "/". A component "**" matches any
 * number of components, none included, except as the last one, where it needs one at
 * least: "dir" followed by "/" and "**" leaves out what dir holds and keeps dir itself
 * (as git has it). A leading "/" or "./" anchors a single name at the root ("/build");
 * a trailing "/" makes a pattern match directories only. The caller owns a struct
 * exclude, zeroed to begin with and released with exclude_free; matching only reads it
 * and is thread-safe.
 */
#ifndef MKSTP_EXCLUDE_H
#define MKSTP_EXCLUDE_H

#include <stddef.h>

struct exclude_pat;

struct exclude {
	struct exclude_pat *pats;
	size_t count;
};

/* Adds PATTERN. Returns 0, -EINVAL when nothing is left of it (empty, "/", "./"), or
 * -ENOMEM. Prints nothing. */
int exclude_add(struct exclude *ex, const char *pattern);
/* Adds the patterns of FILE, one a line, taken as written (no trimming); blank lines and
 * lines beginning with '#' are skipped. Returns 0 or -errno after printing a message
 * naming the file (and the line of a bad pattern). */
int exclude_load(struct exclude *ex, const char *file);
/* 1 when RELPATH (an entry's path from the source root, no leading "/"; IS_DIR when it is
 * a directory) is to be left out, else 0, or -ENOMEM. EX may be NULL or empty: nothing
 * matches. A path of D components costs each pattern of N at most N x D fnmatch calls,
 * however many "**" it holds. */
int exclude_match(const struct exclude *ex, const char *relpath, int is_dir);
/* The same, or 1 when a directory above RELPATH is to be left out: for paths met in any
 * order (an archive's), at the cost of one exclude_match. */
int exclude_match_path(const struct exclude *ex, const char *relpath, int is_dir);
void exclude_free(struct exclude *ex);

#endif
