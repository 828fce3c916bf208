/* SPDX-License-Identifier: MIT */
/*
 * The paths -T (--files-from) names, as tar takes them: each is a path relative to
 * SOURCE ("/" and "./" in front, "/" behind and "." components are dropped; ".." is
 * refused), one a line or, with --null, one per NUL-terminated name. A listed entry goes
 * into the image with everything below it; the directories above it go in too (their
 * attributes, and of their entries only those that lead to a listed path). The caller
 * owns a struct select, zeroed to begin with, released with select_free. Not
 * thread-safe (the scan marks what it found).
 */
#ifndef MKSTP_SELECT_H
#define MKSTP_SELECT_H

#include <stddef.h>
#include <stdint.h>

struct select {
	char **paths;      /* sorted by bytes, no duplicates */
	uint8_t *found;    /* per path: the scan met it */
	size_t n;
	const char *file;  /* the list's name, for messages */
};

enum select_match { SELECT_OUT, SELECT_ABOVE, SELECT_IN };

/* Reads the list FILE ("-": standard input); NUL: names end with NUL, else with a
 * newline (a trailing "\r" is kept: it may be a name's). Returns 0, or -errno after
 * reporting the file (and the name of a bad line). */
int select_load(struct select *s, const char *file, int nul);
/* Where REL, an entry's path from the root ("" for the root; no leading or trailing
 * "/"), stands: listed (and marked found), above a listed path, or neither. */
enum select_match select_match(struct select *s, const char *rel);
/* Reports, as errors, each listed path the scan did not meet; returns their count. */
size_t select_report_missing(const struct select *s);
void select_free(struct select *s);

#endif
