/* SPDX-License-Identifier: MIT */
/* The paths of -T, sorted, matched against the scan's entries. */
#include "select.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lines.h"
#include "report.h"

/* Rewrites P in place as a path from the root: no empty or "." components, no leading
 * or trailing "/". Returns -EINVAL when a component is "..". */
static int normalise(char *p)
{
	char *out = p, *in = p;

	while (*in) {
		char *end = strchrnul(in, '/');
		size_t len = (size_t)(end - in);

		if (len == 2 && in[0] == '.' && in[1] == '.')
			return -EINVAL;
		if (len && !(len == 1 && in[0] == '.')) {
			if (out != p)
				*out++ = '/';
			memmove(out, in, len);
			out += len;
		}
		in = *end ? end + 1 : end;
	}
	*out = 0;
	return 0;
}

static int add_path(struct select *s, const char *name)
{
	char *p = strdup(name), **grown;

	if (!p)
		return -ENOMEM;
	if (normalise(p)) {
		report_error(s->file, "%s: a path with \"..\" leads out of SOURCE", name);
		free(p);
		return -EINVAL;
	}
	grown = reallocarray(s->paths, s->n + 1, sizeof(*grown));
	if (!grown) {
		free(p);
		return -ENOMEM;
	}
	s->paths = grown;
	s->paths[s->n++] = p;
	return 0;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the paths and drops repeats. */
static int finish(struct select *s)
{
	size_t k = 0;

	qsort(s->paths, s->n, sizeof(*s->paths), cmp_path);
	for (size_t i = 0; i < s->n; i++) {
		if (k && !strcmp(s->paths[k - 1], s->paths[i]))
			free(s->paths[i]);
		else
			s->paths[k++] = s->paths[i];
	}
	s->n = k;
	s->found = calloc(s->n ? s->n : 1, 1);
	return s->found ? 0 : -ENOMEM;
}

/* One name of a -T list; empty ones are skipped. */
static int select_name(void *arg, char *name, size_t len, unsigned number)
{
	return len ? add_path(arg, name) : 0;
}

int select_load(struct select *s, const char *file, int nul)
{
	/* a FIFO or a device: refused, not waited on */
	FILE *f = strcmp(file, "-") ? lines_open_regular(file) : stdin;
	int rc;

	s->file = file;
	if (!f) {
		rc = -errno;
		report_error(file, "--files-from: %s", lines_strerror(-rc));
		return rc;
	}
	rc = lines_each(f, file, nul ? '\0' : '\n', select_name, s);
	if (rc == -EIO && ferror(f))
		report_errno(file, EIO, "--files-from");
	if (f != stdin)
		fclose(f);
	return rc ? rc : finish(s);
}

/* The first path not below "REL/" in byte order: lower bound of REL followed by "/". */
static size_t lower_bound_dir(const struct select *s, const char *rel, size_t len)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *p = s->paths[mid];
		int c = strncmp(p, rel, len);

		if (!c)
			c = (unsigned char)p[len] - (unsigned char)'/';
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

enum select_match select_match(struct select *s, const char *rel)
{
	size_t len = strlen(rel), i;

	if (!len) {
		for (i = 0; i < s->n && !s->paths[i][0]; i++)
			s->found[i] = 1;
		return i ? SELECT_IN : s->n ? SELECT_ABOVE : SELECT_OUT;
	}
	char **hit = bsearch(&rel, s->paths, s->n, sizeof(*s->paths), cmp_path);

	if (hit) {
		s->found[hit - s->paths] = 1;
		return SELECT_IN;
	}
	i = lower_bound_dir(s, rel, len);
	if (i < s->n && !strncmp(s->paths[i], rel, len) && s->paths[i][len] == '/')
		return SELECT_ABOVE;
	return SELECT_OUT;
}

size_t select_report_missing(const struct select *s)
{
	size_t missing = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (s->found[i])
			continue;
		report_error(s->paths[i], "listed in %s but not found in SOURCE", s->file);
		missing++;
	}
	return missing;
}

void select_free(struct select *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->paths[i]);
	free(s->paths);
	free(s->found);
	memset(s, 0, sizeof(*s));
}
