/* SPDX-License-Identifier: MIT */
/*
 * The hot list's line format (common/hotlist.h): lines written for awkward paths are
 * compared with text written out by hand, then split and parsed back to what was written;
 * malformed ranges are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotlist.h"

#include "check.h"

/* The line stp_hotlist_put writes, in a malloc'ed string. */
static char *line_of(const char *path, const struct stp_hot_range *r, size_t n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	CHECK(stp_hotlist_put(f, path, r, n) == 0);
	fclose(f);
	return text;
}

/* Splits and parses LINE (its newline cut); checks it gives PATH and R[0..N) back. */
static void check_reads_back(char *line, const char *path, const struct stp_hot_range *r,
			     size_t n)
{
	struct stp_hot_range *got;
	size_t ngot = 0;
	char *ranges = stp_hotlist_split(line);

	CHECK(!strcmp(line, path), "path read back as '%s'", line);
	CHECK((ranges != NULL) == (n != 0));
	if (!ranges)
		return;
	CHECK(stp_hotlist_parse_ranges(ranges, &got, &ngot) == 0);
	CHECK(ngot == n, "%zu ranges, expected %zu", ngot, n);
	for (size_t i = 0; i < n && i < ngot; i++)
		CHECK(got[i].start == r[i].start && got[i].end == r[i].end, "range %zu", i);
	free(got);
}

static void round_trip(const char *path, const char *want, const struct stp_hot_range *r,
		       size_t n)
{
	char *line = line_of(path, r, n);
	size_t len = strlen(line);

	CHECK(!strcmp(line, want), "'%s' written as '%s'", path, line);
	CHECK(len && line[len - 1] == '\n');
	line[len - 1] = 0;
	check_reads_back(line, path, r, n);
	free(line);
}

static void test_plain_paths(void)
{
	const struct stp_hot_range r[] = { { 0, 4096 }, { 8192, 16384 } };

	round_trip("usr/bin/true", "usr/bin/true\n", NULL, 0);
	round_trip("lib/libc.so.6", "lib/libc.so.6\t0-4096,8192-16384\n", r, 2);
	round_trip("a b/ü", "a b/ü\t0-4096\n", r, 1);
}

static void test_escaped_paths(void)
{
	const struct stp_hot_range r[] = { { 4096, UINT64_MAX } };

	round_trip("tab\there", "tab\\there\t4096-18446744073709551615\n", r, 1);
	round_trip("new\nline", "new\\nline\n", NULL, 0);
	round_trip("back\\slash", "back\\\\slash\n", NULL, 0);
	round_trip("\\t", "\\\\t\n", NULL, 0);  /* a backslash then a t, not a tab */
	round_trip("end\\", "end\\\\\n", NULL, 0);
	round_trip("\t\n\\", "\\t\\n\\\\\n", NULL, 0);
}

/* What a person may write by hand: other escapes stand for their byte, a backslash at the
 * end stays. */
static void test_split_by_hand(void)
{
	char a[] = "x\\yz", b[] = "tail\\", c[] = "p\t", d[] = "q\t0-1\t2-3";

	CHECK(stp_hotlist_split(a) == NULL && !strcmp(a, "xyz"));
	CHECK(stp_hotlist_split(b) == NULL && !strcmp(b, "tail\\"));
	CHECK(!strcmp(stp_hotlist_split(c), "") && !strcmp(c, "p"));
	CHECK(!strcmp(stp_hotlist_split(d), "0-1\t2-3") && !strcmp(d, "q"));
}

static int parse(const char *s, size_t *n)
{
	struct stp_hot_range *r = (void *)1;
	int rc = stp_hotlist_parse_ranges(s, &r, n);

	CHECK(rc || *n || r == NULL, "'%s': no ranges but an array", s);
	CHECK(!rc || r == NULL, "'%s': refused but an array", s);
	free(r);
	return rc;
}

static void test_ranges(void)
{
	static const char *const bad[] = {
		"1", "1-", "-1", "a-b", "5-3", " 1-2", "1-2 ", "+1-2", "1--2", "1-2,,3-4",
		",1-2", "1-2;3-4", "0x10-0x20", "18446744073709551616-18446744073709551617",
		"1-18446744073709551616", "1-2,3",
	};
	size_t n = 99;

	CHECK(parse("", &n) == 0 && n == 0);
	CHECK(parse("7-7", &n) == 0 && n == 1);
	CHECK(parse("9-10,0-4096", &n) == 0 && n == 2); /* any order: the reader sorts */
	CHECK(parse("1-2,", &n) == 0 && n == 1);        /* one comma at the end, as before */
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &n);

		CHECK(rc == -EINVAL, "'%s' not refused (%d)", bad[i], rc);
	}
}

/* A lookup line: the path escaped as any other, then a TAB and "lookup"; read back, the
 * path is whole and the rest marks it. A range line is never taken for one. */
static void test_lookup_lines(void)
{
	static const char *const paths[] = { "lib/node_modules", "a\tb/c\nd\\e", "lookup" };
	char line[64], *text = NULL, *rest;
	size_t len = 0, i = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	for (size_t k = 0; k < sizeof(paths) / sizeof(*paths); k++)
		CHECK(stp_hotlist_put_lookup(f, paths[k]) == 0);
	fclose(f);
	CHECK(!strcmp(text, "lib/node_modules\tlookup\na\\tb/c\\nd\\\\e\tlookup\nlookup\tlookup\n"),
	      "written as '%s'", text);
	for (char *p = text, *nl; i < 3 && (nl = strchr(p, '\n')); p = nl + 1, i++) {
		*nl = 0;
		rest = stp_hotlist_split(p);
		CHECK(stp_hotlist_is_lookup(rest));
		CHECK(!strcmp(p, paths[i]), "path read back as '%s'", p);
	}
	CHECK(i == 3);
	free(text);
	strcpy(line, "lookup\t0-4096");
	CHECK(!stp_hotlist_is_lookup(stp_hotlist_split(line)));
	strcpy(line, "lookup");
	CHECK(!stp_hotlist_is_lookup(stp_hotlist_split(line)));
	strcpy(line, "x\tlookups");
	CHECK(!stp_hotlist_is_lookup(stp_hotlist_split(line)));
}

int main(void)
{
	RUN(test_plain_paths);
	RUN(test_escaped_paths);
	RUN(test_split_by_hand);
	RUN(test_ranges);
	RUN(test_lookup_lines);
	return tap_done();
}
