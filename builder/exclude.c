/* SPDX-License-Identifier: MIT */
/* Patterns of paths left out of the image. */
#include "exclude.h"

#include <errno.h>
#include <fnmatch.h>
#include <stdint.h>
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

/* A path cut into its components (where each begins, and its length), with the two rows
 * of match_prefixes, of C->n + 1 bytes each: one allocation. */
struct comps {
	const char **at;
	size_t *len;
	size_t n;
	uint8_t *hit, *next;
};

/* Cuts PATH ("a/b/c", not empty) into C. -ENOMEM. */
static int cut(const char *path, struct comps *c)
{
	size_t max = 1;

	for (const char *p = path; *p; p++)
		max += *p == '/';
	c->n = 0;
	c->at = malloc(max * (sizeof(*c->at) + sizeof(*c->len)) + 2 * (max + 1));
	if (!c->at)
		return -ENOMEM;
	c->len = (size_t *)(c->at + max);
	c->hit = (uint8_t *)(c->len + max);
	c->next = c->hit + max + 1;
	for (const char *p = path; *p; c->n++) {
		c->at[c->n] = p;
		c->len[c->n] = strcspn(p, "/");
		p += c->len[c->n] + (p[c->len[c->n]] == '/');
	}
	return 0;
}

/* Whether glob GLOB matches component I of C (a name of 256 bytes or more, which no
 * file has on Linux, matches nothing). */
static int comp_matches(const char *glob, const struct comps *c, size_t i)
{
	char name[256];

	if (c->len[i] >= sizeof(name))
		return 0;
	memcpy(name, c->at[i], c->len[i]);
	name[c->len[i]] = 0;
	return !fnmatch(glob, name, 0);
}

/* HIT[k] for k in [0, C->n]: whether anchored pattern PAT matches the path's first k
 * components. One pass over the pattern's components, each tried against a path
 * component only where the components before it matched: the pattern's length times
 * the path's at most, where trying each place a "**" may end costs their product (or
 * more with several "**"). Into C->hit, with C->next as the row being made. */
static void match_prefixes(const struct exclude_pat *pat, const struct comps *c)
{
	uint8_t *cur = c->hit, *next = c->next;

	memset(cur, 0, c->n + 1);
	cur[0] = 1;
	for (size_t i = 0; i < pat->ncomps; i++) {
		int any = 0;

		if (!strcmp(pat->comps[i], "**")) {
			/* zero components or more; as the last, one or more (what a directory
			 * holds, not itself, as git has it) */
			int last = i + 1 == pat->ncomps;

			for (size_t j = 0; j <= c->n; j++) {
				int had = any;

				any |= cur[j];
				next[j] = last ? had : any;
			}
		} else {
			next[0] = 0;
			for (size_t j = 1; j <= c->n; j++)
				next[j] = cur[j - 1] && comp_matches(pat->comps[i], c, j - 1);
		}
		memcpy(cur, next, c->n + 1);
	}
}

/* Whether pattern PAT leaves out the path C holds in its first K components (K >= 1),
 * a directory when IS_DIR; C->hit from match_prefixes for an anchored pattern. */
static int leaves_out(const struct exclude_pat *pat, const struct comps *c, size_t k,
		      int is_dir)
{
	if (pat->dir_only && !is_dir)
		return 0;
	if (!pat->anchored) /* one component: the last */
		return comp_matches(pat->comps[0], c, k - 1);
	return c->hit[k];
}

/* Whether a pattern of EX leaves out RELPATH, or, with PARENTS, a directory above it.
 * -ENOMEM. */
static int match_relpath(const struct exclude *ex, const char *relpath, int is_dir,
			 int parents)
{
	struct comps c;
	int out;

	if (!ex || !ex->count || !*relpath)
		return 0;
	if ((out = cut(relpath, &c)))
		return out;
	for (size_t p = 0; !out && p < ex->count; p++) {
		const struct exclude_pat *pat = &ex->pats[p];

		if (pat->anchored)
			match_prefixes(pat, &c);
		for (size_t k = parents ? 1 : c.n; !out && k <= c.n; k++)
			out = leaves_out(pat, &c, k, k < c.n || is_dir);
	}
	free(c.at);
	return out;
}

int exclude_match(const struct exclude *ex, const char *relpath, int is_dir)
{
	return match_relpath(ex, relpath, is_dir, 0);
}

int exclude_match_path(const struct exclude *ex, const char *relpath, int is_dir)
{
	return match_relpath(ex, relpath, is_dir, 1);
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
