/* SPDX-License-Identifier: MIT */
/* The list-file reader (lines.h). */
#include "lines.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/types.h>

int lines_each(FILE *f, int delim, lines_fn each, void *arg)
{
	char *rec = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned number = 0;
	int rc = 0;

	while (!rc && (len = getdelim(&rec, &cap, delim, f)) >= 0) {
		if (len && rec[len - 1] == (char)delim)
			rec[--len] = 0;
		rc = each(arg, rec, (size_t)len, ++number);
	}
	if (!rc && ferror(f))
		rc = -EIO;
	free(rec);
	return rc;
}
