/* SPDX-License-Identifier: MIT */
/* Patterns of paths left out of the image. */
#include "exclude.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "report.h"

struct exclude_pat {
	char *buf;      /* the pattern's components, each NUL-terminated, back to back */
	char **comps;   /* into buf */
	size_t ncomps;
	int dir_only;   /* written with a trailing "/" */
	int anchored;   /* has a "/" before its end: matched against the whole path */
};

/* Splits P (owned by PAT afterwards) at '/', dropping empty and "." components at its
 * head, and empty ones elsewhere; runs of "**" count as one. */
static int split(struct exclude_pat *pat, char *p)
{
	size_t len = strlen(p), n = 0, end = len;

	while (end && p[end - 1] == '/')
		end--;
	pat->dir_only = end < len;
	pat->anchored = memchr(p, '/', end) != NULL;
	pat->comps = malloc((len / 2 + 1) * sizeof(*pat->comps));
	if (!pat->comps)
		return -ENOMEM;
	for (char *save = NULL, *c = strtok_r(p, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (!n && !strcmp(c, "."))
			continue;
		if (n && !strcmp(c, "**") && !strcmp(pat->comps[n - 1], "**"))
			continue;
		pat->comps[n++] = c;
	}
	pat->ncomps = n;
	pat->buf = p;
	return n ? 0 : -EINVAL;
}

int exclude_add(struct exclude *ex, const char *pattern)
{
	struct exclude_pat pat = { 0 }, *grown;
	char *copy = strdup(pattern);
	int rc = copy ? split(&pat, copy) : -ENOMEM;

	if (!rc) {
		grown = realloc(ex->pats, (ex->count + 1) * sizeof(*grown));
		rc = grown ? 0 : -ENOMEM;
		if (grown) {
			ex->pats = grown;
			ex->pats[ex->count++] = pat;
			return 0;
		}
	}
	free(pat.comps);
	free(copy);
	return rc;
}

struct exclude_file {
	struct exclude *ex;
	const char *name;
};

/* One line of an --exclude-from file: a pattern, unless empty or a comment. */
static int exclude_line(void *arg, char *line, size_t len, unsigned lineno)
{
	const struct exclude_file *x = arg;
	int rc;

	if (!len || line[0] == '#')
		return 0;
	rc = exclude_add(x->ex, line);
	if (rc == -EINVAL)
		report_error(NULL, "--exclude-from %s:%u: %s: matches no path", x->name, lineno,
			     line);
	return rc;
}

int exclude_load(struct exclude *ex, const char *file)
{
	struct exclude_file x = { ex, file };
	FILE *f = lines_open_regular(file); /* a FIFO or a device: refused, not waited on */
	int rc;

	if (!f) {
		rc = -errno;
		report_error(NULL, "--exclude-from %s: %s", file, lines_strerror(-rc));
		return rc;
	}
	rc = lines_each(f, file, '\n', exclude_line, &x);
	if (rc == -EIO && ferror(f))
		report_error(NULL, "--exclude-from %s: %s", file, strerror(EIO));
	fclose(f);
	return rc;
}

/* The component of PATH that begins at P, copied into NAME (a file name fits in 256
 * bytes on Linux); 0 when it is longer, which no pattern then matches. */
static int component(const char *p, char name[256], const char **next)
{
	size_t len = strcspn(p, "/");

	*next = p[len] ? p + len + 1 : p + len;
	if (len >= 256)
		return 0;
	memcpy(name, p, len);
	name[len] = 0;
	return 1;
}

/* Components COMPS[0..N) against PATH (the rest of a relative path; "" when done). */
static int match_comps(char *const *comps, size_t n, const char *path)
{
	char name[256];
	const char *next;

	if (!n)
		return !*path;
	if (!strcmp(comps[0], "**")) {
		if (n == 1) /* what a directory holds, not itself (as git has it) */
			return *path != 0;
		for (;;) {
			if (match_comps(comps + 1, n - 1, path))
				return 1;
			if (!*path)
				return 0;
			path += strcspn(path, "/");
			path += *path == '/';
		}
	}
	if (!*path || !component(path, name, &next) || fnmatch(comps[0], name, 0))
		return 0;
	return match_comps(comps + 1, n - 1, next);
}

static int match_one(const struct exclude_pat *pat, const char *relpath, int is_dir)
{
	const char *base = strrchr(relpath, '/');

	if (pat->dir_only && !is_dir)
		return 0;
	if (!pat->anchored) /* one component */
		return !fnmatch(pat->comps[0], base ? base + 1 : relpath, 0);
	return match_comps(pat->comps, pat->ncomps, relpath);
}

int exclude_match(const struct exclude *ex, const char *relpath, int is_dir)
{
	for (size_t i = 0; ex && i < ex->count; i++)
		if (match_one(&ex->pats[i], relpath, is_dir))
			return 1;
	return 0;
}

void exclude_free(struct exclude *ex)
{
	for (size_t i = 0; i < ex->count; i++) {
		free(ex->pats[i].comps);
		free(ex->pats[i].buf);
	}
	free(ex->pats);
	ex->pats = NULL;
	ex->count = 0;
}
