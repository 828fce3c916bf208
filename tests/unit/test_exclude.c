/* SPDX-License-Identifier: MIT */
/*
 * Which paths a --exclude pattern leaves out (builder/exclude.c), and how --mtime values
 * are read (builder/attrs.c). The expected answers follow the rules of mkstipple(1):
 * a pattern without '/' matches the last component at any depth, one with '/' the whole
 * path from the root, '*' never crossing a '/' there and a "**" component matching any
 * number of components (at least one when it ends the pattern); a trailing '/' matches
 * directories only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attrs.h"
#include "exclude.h"
#include "lines.h"

#include "check.h"

/* 1 when PATTERN leaves out PATH (a directory when IS_DIR). */
static int leaves_out(const char *pattern, const char *path, int is_dir)
{
	struct exclude ex = { 0 };
	int rc = exclude_add(&ex, pattern), m;

	CHECK(rc == 0, "exclude_add '%s': %d", pattern, rc);
	m = exclude_match(&ex, path, is_dir);
	exclude_free(&ex);
	return m;
}

#define OUT(p, path) CHECK(leaves_out(p, path, 0) == 1, "'%s' should leave out %s", p, path)
#define IN(p, path) CHECK(leaves_out(p, path, 0) == 0, "'%s' should keep %s", p, path)

static void test_basename(void)
{
	OUT("*.o", "x.o");
	OUT("*.o", "a/b/x.o");
	IN("*.o", "a/b/x.oo");
	IN("*.o", "x.o/y"); /* the directory x.o is left out, not checked here */
	OUT("*", ".hidden");          /* no FNM_PERIOD, as tar */
	OUT("[ab]?", "dir/b1");
	OUT("\\*", "d/*");
	IN("\\*", "d/x");
	OUT("a b", "x/a b");
}

static void test_path(void)
{
	OUT("usr/share", "usr/share");
	IN("usr/share", "x/usr/share");   /* anchored at the root */
	IN("usr/share", "usr/share2");
	OUT("usr/*/doc", "usr/share/doc");
	IN("usr/*/doc", "usr/a/b/doc");   /* '*' does not cross '/' */
	OUT("/.git", ".git");
	IN("/.git", "sub/.git");
	OUT("./.git", ".git");
	OUT("usr//share", "usr/share");
	OUT("*/x", "a/x");
	IN("*/x", "x");
}

static void test_double_star(void)
{
	OUT("**/x", "x");
	OUT("**/x", "a/b/c/x");
	OUT("a/**/x", "a/x");
	OUT("a/**/x", "a/b/c/x");
	IN("a/**/x", "b/a/x");
	OUT("a/**", "a/b");
	OUT("a/**", "a/b/c");
	IN("a/**", "a");           /* the directory stays, empty */
	OUT("**", "a");            /* no '/': any last component */
	OUT("a/**/**/x", "a/q/x");
	OUT("a/**b/x", "a/cb/x"); /* "**" inside a component is two '*' */
	IN("a/**b/x", "a/c/b/x");
}

/* A path of 2,000 names against patterns with several "**": each "**" may end at any of
 * them, which a matcher trying each ending pays for with the depth to the power of the
 * "**"s (hours here); matching name by name costs the pattern's length times the depth. */
static void test_many_stars_deep(void)
{
	enum { DEPTH = 2000 };
	static char path[DEPTH * 2 + 2];
	struct exclude ex = { 0 };

	for (int i = 0; i < DEPTH; i++)
		memcpy(path + 2 * i, "a/", 2);
	strcpy(path + 2 * DEPTH, "c");
	CHECK(exclude_add(&ex, "**/a/**/a/**/a/**/b") == 0);
	CHECK(exclude_add(&ex, "/a/**/a/**/a/**/a/**/d/**") == 0);
	CHECK(exclude_match(&ex, path, 0) == 0);
	CHECK(exclude_match_path(&ex, path, 0) == 0);
	path[2 * DEPTH] = 'b';
	CHECK(exclude_match(&ex, path, 0) == 1);
	exclude_free(&ex);
}

/* exclude_match_path is exclude_match on the path and on each directory above it. */
static void test_path_and_parents(void)
{
	static const char *const pats[] = { "x", "a/b", "a/**", "**/c/", "/a", "b/**/d", "*.o" };
	static const char *const paths[] = { "a", "a/b", "a/b/c", "a/b/c/d", "q/x/y", "b/z/d/e",
					     "q/c/r", "q/c", "m/n.o/p", "b", "r/a/b" };

	for (size_t p = 0; p < sizeof(pats) / sizeof(pats[0]); p++) {
		struct exclude ex = { 0 };

		CHECK(exclude_add(&ex, pats[p]) == 0);
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
			for (int is_dir = 0; is_dir < 2; is_dir++) {
				char buf[64];
				int want = exclude_match(&ex, paths[i], is_dir);

				strcpy(buf, paths[i]);
				for (char *s = strchr(buf, '/'); s && !want; s = strchr(s + 1, '/')) {
					*s = 0;
					want = exclude_match(&ex, buf, 1);
					*s = '/';
				}
				CHECK(exclude_match_path(&ex, paths[i], is_dir) == want,
				      "'%s' on '%s' (%s)", pats[p], paths[i], is_dir ? "dir" : "file");
			}
		exclude_free(&ex);
	}
}

static void test_dir_only(void)
{
	CHECK(leaves_out("build/", "a/build", 1), "build/ on a directory");
	CHECK(!leaves_out("build/", "a/build", 0), "build/ on a file");
	CHECK(leaves_out("a/build/", "a/build", 1), "a/build/ on a directory");
	CHECK(!leaves_out("a/build/", "a/build", 0), "a/build/ on a file");
	CHECK(leaves_out("build", "a/build", 1), "build on a directory");
}

static void test_refused_and_many(void)
{
	struct exclude ex = { 0 };

	CHECK(exclude_add(&ex, "") == -EINVAL);
	CHECK(exclude_add(&ex, "/") == -EINVAL);
	CHECK(exclude_add(&ex, "./") == -EINVAL);
	CHECK(ex.count == 0);
	CHECK(!exclude_match(&ex, "x", 0), "empty list");
	CHECK(!exclude_match(NULL, "x", 0), "no list");
	CHECK(exclude_add(&ex, "*.o") == 0);
	CHECK(exclude_add(&ex, "doc/*") == 0);
	CHECK(exclude_match(&ex, "a.o", 0));
	CHECK(exclude_match(&ex, "doc/a", 0));
	CHECK(!exclude_match(&ex, "doc", 1));
	exclude_free(&ex);
	CHECK(ex.count == 0 && ex.pats == NULL);
}

static void test_load(void)
{
	char path[] = "/tmp/test_exclude.XXXXXX";
	struct exclude ex = { 0 };
	int fd = mkstemp(path);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

	CHECK(f != NULL);
	if (!f)
		return;
	fputs("# comment\n\n*.tmp\n#*.c\ncache/\n", f);
	fclose(f);
	CHECK(exclude_load(&ex, path) == 0);
	unlink(path);
	CHECK(ex.count == 2, "%zu patterns", ex.count);
	CHECK(exclude_match(&ex, "a/b.tmp", 0));
	CHECK(!exclude_match(&ex, "b.c", 0), "a comment is no pattern");
	CHECK(!exclude_match(&ex, "# comment", 0));
	CHECK(exclude_match(&ex, "x/cache", 1));
	exclude_free(&ex);
	CHECK(exclude_load(&ex, "/nonexistent/exclude-list") == -ENOENT);
}

struct seen {
	char recs[4][16];
	unsigned numbers[4], n, stop_at;
};

static int keep(void *arg, char *rec, size_t len, unsigned number)
{
	struct seen *s = arg;

	CHECK(strlen(rec) == len, "the record is NUL-terminated at LEN");
	snprintf(s->recs[s->n], sizeof(s->recs[0]), "%s", rec);
	s->numbers[s->n++] = number;
	return number == s->stop_at ? -ECANCELED : 0;
}

/* The one list reader (builder/lines.c): records without their delimiter, numbered from
 * 1, the last one without a delimiter too; EACH's error stops it; a FILE that cannot be
 * read is -EIO with ferror set. */
static void test_lines(void)
{
	static const char nul_list[] = "a\0\0b c\0last";
	struct seen s = { .stop_at = 0 };
	FILE *f = fmemopen((void *)nul_list, sizeof(nul_list) - 1, "r");

	CHECK(lines_each(f, "list", '\0', keep, &s) == 0);
	CHECK(s.n == 4 && !strcmp(s.recs[0], "a") && !strcmp(s.recs[1], "") &&
	      !strcmp(s.recs[2], "b c") && !strcmp(s.recs[3], "last") && s.numbers[3] == 4);
	fclose(f);
	s = (struct seen){ .stop_at = 2 };
	f = fmemopen("x\ny\nz\n", 6, "r");
	CHECK(lines_each(f, "list", '\n', keep, &s) == -ECANCELED && s.n == 2, "stopped by EACH");
	fclose(f);
	s = (struct seen){ .stop_at = 0 };
	f = fopen("/", "re");
	CHECK(f && lines_each(f, "list", '\n', keep, &s) == -EIO && ferror(f) && s.n == 0,
	      "a directory cannot be read");
	fclose(f);
}

/* A record is bounded: one of exactly LINES_RECORD_MAX bytes with its delimiter is read,
 * one byte more is -E2BIG, after the records before it. */
static void test_lines_bounded(void)
{
	size_t len = LINES_RECORD_MAX + 3;
	char *buf = malloc(len);
	struct seen s = { .stop_at = 0 };
	FILE *f;

	memset(buf, 'x', len);
	buf[0] = 'a';
	buf[1] = '\n';
	buf[len - 1] = '\n';
	f = fmemopen(buf, len - 1, "r"); /* "a\n", then LINES_RECORD_MAX + 0 bytes of x */
	CHECK(lines_each(f, "list", '\n', keep, &s) == 0 && s.n == 2, "at the bound");
	fclose(f);
	s = (struct seen){ .stop_at = 0 };
	f = fmemopen(buf, len, "r");     /* one more byte: x... and its newline */
	CHECK(lines_each(f, "list", '\n', keep, &s) == -E2BIG && s.n == 1, "past the bound");
	fclose(f);
	free(buf);
}

static void test_mtime(void)
{
	int64_t t = -1;

	CHECK(attrs_parse_time("0", &t) == 0 && t == 0);
	CHECK(attrs_parse_time("1700000000", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("@1700000000", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14", &t) == 0 && t == 1699920000, "%lld", (long long)t);
	CHECK(attrs_parse_time("2023-11-14T22:13:20", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14T22:13:20Z", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2024-02-29", &t) == 0 && t == 1709164800);
	CHECK(attrs_parse_time("2023-02-29", &t) == -EINVAL);
	CHECK(attrs_parse_time("1969-12-31", &t) == -EINVAL);
	CHECK(attrs_parse_time("2023-11-14T25:00:00", &t) == -EINVAL);
	/* GNU tar's forms (issue 29): minutes without seconds, a fraction, a zone */
	CHECK(attrs_parse_time("2023-11-14T22:13", &t) == 0 && t == 1700000000 - 20);
	CHECK(attrs_parse_time("2023-11-14 22:13:20.9", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14 23:13:20 +0100", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14T17:13:20-05:00", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14 22:13:20 UTC", &t) == 0 && t == 1700000000);
	CHECK(attrs_parse_time("2023-11-14 22:13:20 +2400", &t) == -EINVAL);
	CHECK(attrs_parse_time("2023-11-14 22:13:20 CET", &t) == -EINVAL);
	CHECK(attrs_parse_time("2023-11-14T22", &t) == -EINVAL);
	CHECK(attrs_parse_time("2023-11-14Z", &t) == -EINVAL); /* a zone needs a time */
	CHECK(attrs_parse_time("/nonexistent/ref", &t) == -ENOENT);
	CHECK(attrs_parse_time("-1", &t) == -EINVAL);
	CHECK(attrs_parse_time("1.5", &t) == -EINVAL);
	CHECK(attrs_parse_time("", &t) == -EINVAL);
	CHECK(attrs_parse_time("@", &t) == -EINVAL);
	CHECK(attrs_parse_time(" 5", &t) == -EINVAL);
}

int main(void)
{
	RUN(test_basename);
	RUN(test_path);
	RUN(test_double_star);
	RUN(test_dir_only);
	RUN(test_many_stars_deep);
	RUN(test_path_and_parents);
	RUN(test_refused_and_many);
	RUN(test_load);
	RUN(test_lines);
	RUN(test_lines_bounded);
	RUN(test_mtime);
	return tap_done();
}
