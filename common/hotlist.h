/* SPDX-License-Identifier: MIT */
/*
 * The hot list's text, written by the mount's recorder and read by mkstipple --hot-list:
 * one file a line, its path with backslash escapes for backslash, tab and newline
 * ("\\", "\t", "\n"), then optionally a tab and the byte ranges read, START-END (END
 * exclusive) separated by commas. Any path without a NUL byte survives the round trip.
 * A line whose path is followed by a tab and the word "lookup" names a path the
 * start-up looked up, found or not, without reading it: its last name in its directory
 * (older lists have no such line; an older mkstipple reads it as malformed ranges).
 *
 * Pure functions, thread-safe; they return 0 or a negative errno. Whatever they
 * allocate belongs to the caller.
 */
#ifndef STP_HOTLIST_H
#define STP_HOTLIST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct stp_hot_range {
	uint64_t start, end;
};

/* How far mkstipple widens a recorded range on each side by default (--hot-margin). A
 * recording asks the kernel for no readahead, so its ranges are the pages touched; at run
 * time the kernel reads up to its readahead around and beyond them, and whatever falls
 * outside the hot region costs the decode of a cold block. Twice the mount's readahead
 * covers both a fault's window around its page and a read's window after its own. */
#define STP_HOT_MARGIN_DEFAULT (32u << 10)
#define STP_HOT_MARGIN_MAX (16u << 20)

/* Writes one line to F: PATH escaped, then the N ranges R (none: the path alone), then
 * a newline. -EIO when F reports an error. */
int stp_hotlist_put(FILE *f, const char *path, const struct stp_hot_range *r, size_t n);

#define STP_HOTLIST_LOOKUP "lookup"

/* Writes a lookup line for PATH to F. -EIO when F reports an error. */
int stp_hotlist_put_lookup(FILE *f, const char *path);

/* Whether REST, what stp_hotlist_split returned, marks a lookup line. */
int stp_hotlist_is_lookup(const char *rest);

/* Splits LINE (its newline already cut) in place: the path part is unescaped and ended
 * with a NUL at LINE. Returns what follows the tab (the ranges), or NULL when the line
 * has none. A backslash before any other byte stands for that byte; one at the end of
 * the path is kept. */
char *stp_hotlist_split(char *line);

/* Parses the ranges text S ("0-4096,8192-12288"; "" is no range) into *out (malloc'ed,
 * NULL when *n is 0), in the order written. -EINVAL when S is malformed: not decimal
 * digits, END before START, a number past 2^64 - 1, an empty item (a single comma at the
 * end is allowed); -ENOMEM. */
int stp_hotlist_parse_ranges(const char *s, struct stp_hot_range **out, size_t *n);

#endif
