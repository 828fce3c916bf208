/* SPDX-License-Identifier: MIT */
/*
 * What mkstipple prints when it is done: the list of entries (-v, --dry-run) and the
 * summary, as one line for people or one JSON object (--json) whose shape mkstipple(1)
 * documents and keeps stable: members may be added, never renamed or retyped. Main
 * thread only.
 */
#ifndef MKSTP_SUMMARY_H
#define MKSTP_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "tree.h"

struct summary {
	const char *image;     /* as given; NULL for a dry run */
	uint64_t image_size;
	double seconds;
	size_t left_out;       /* entries that could not be read, left out */
	unsigned changed;      /* files stored as they last read while changing */
	unsigned warnings, errors;
};

/* Writes every entry of T below its root, one a line, depth first in name order: its
 * path from the root, escaped (escape.h), a directory's with a '/' after it. */
void summary_list(FILE *out, const struct tree *t);
/* Writes S and T's counts to OUT: a line, or with JSON a JSON object on one line. */
void summary_print(FILE *out, const struct summary *s, const struct tree *t, int json);

#endif
