/* SPDX-License-Identifier: MIT */
/*
 * How mkstipple takes the ranges of a hot-list line (builder/order.c): each range is
 * widened by the margin (128 KiB in most cases here) on each side, its start rounded
 * down to a page, cut at the file's
 * size, and the ranges sorted and merged; ranges that come to the whole file mean the
 * whole file, and a line whose ranges all lie past the end is refused. Expected values
 * are worked out by hand from that rule.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "order_internal.h"

#include "hotlist.h"

#include "check.h"

#define KiB 1024ull
#define M (128 * KiB) /* the margin, unless a test sets another */

static uint64_t margin = M;

/* Adds S for a file of SIZE bytes and resolves; checks the result and the ranges
 * WANT[0..N). */
static void expect(uint64_t size, const char *s, int rc_want, const struct hot_range *want,
		   size_t n)
{
	struct hot_set h = { 0 };
	struct node node;
	int rc;

	memset(&node, 0, sizeof(node));
	node.st.st_size = (off_t)size;
	rc = order_add_ranges(&h, &node, s, margin);
	if (!rc)
		CHECK(order_resolve_ranges(&h) == 0, "'%s': resolve", s);
	CHECK(rc == rc_want, "'%s' in %llu bytes: %d, expected %d", s, (unsigned long long)size,
	      rc, rc_want);
	CHECK(node.nhot_ranges == n, "'%s': %zu ranges, expected %zu", s, (size_t)node.nhot_ranges, n);
	CHECK((node.hot_ranges == NULL) == (n == 0), "'%s': ranges array", s);
	for (size_t i = 0; i < n && i < node.nhot_ranges; i++)
		CHECK(node.hot_ranges[i].start == want[i].start && node.hot_ranges[i].end == want[i].end,
		      "'%s' range %zu: [%llu, %llu), expected [%llu, %llu)", s, i,
		      (unsigned long long)node.hot_ranges[i].start,
		      (unsigned long long)node.hot_ranges[i].end,
		      (unsigned long long)want[i].start, (unsigned long long)want[i].end);
	free(node.hot_ranges);
	order_hot_free(&h);
}

static void test_widened_and_page_aligned(void)
{
	const uint64_t size = 4096 * KiB;

	expect(size, "0-4096", 0, (struct hot_range[]){ { 0, 4096 + M } }, 1);
	/* 1000000 - 131072 = 868928, down to a page: 868352 */
	expect(size, "1000000-1000001", 0, (struct hot_range[]){ { 868352, 1000001 + M } }, 1);
	expect(size, "3000-5000", 0, (struct hot_range[]){ { 0, 5000 + M } }, 1);
}

static void test_cut_at_size(void)
{
	/* 900000 - M = 768928, down to a page: 765952; the end is the size */
	expect(1000000, "900000-2000000", 0, (struct hot_range[]){ { 765952, 1000000 } }, 1);
	/* the end comes within the margin of the size: the size */
	expect(1000000, "600000-900000", 0,
	       (struct hot_range[]){ { (600000 - M) & ~4095ull, 1000000 } }, 1);
	/* one past the end is dropped, one inside kept */
	expect(1000000, "2000000-3000000,700000-700001", 0,
	       (struct hot_range[]){ { (700000 - M) & ~4095ull, 700001 + M } }, 1);
}

static void test_sorted_and_merged(void)
{
	const uint64_t size = 8192 * KiB;

	/* overlapping once widened */
	expect(size, "0-4096,200000-204096", 0, (struct hot_range[]){ { 0, 204096 + M } }, 1);
	/* apart even widened, given out of order */
	expect(size, "4000000-4000001,0-1", 0,
	       (struct hot_range[]){ { 0, 1 + M }, { (4000000 - M) & ~4095ull, 4000001 + M } }, 2);
	/* one inside another */
	expect(size, "1000000-3000000,2000000-2000001", 0,
	       (struct hot_range[]){ { (1000000 - M) & ~4095ull, 3000000 + M } }, 1);
}

static void test_whole_file(void)
{
	expect(100000, "0-100000", 0, NULL, 0);
	expect(100000, "0-10", 0, NULL, 0);            /* widened to the whole file */
	expect(1000000, "0-4096,999000-999001", 0,
	       (struct hot_range[]){ { 0, 4096 + M }, { (999000 - M) & ~4095ull, 1000000 } }, 2);
}

static void test_refused(void)
{
	expect(1000, "2000-3000", -ERANGE, NULL, 0);   /* the file shrank since recording */
	expect(1000, "1000-1001", -ERANGE, NULL, 0);
	expect(1000, "5-5", -ERANGE, NULL, 0);         /* empty */
	expect(1000, "", -ERANGE, NULL, 0);
	expect(1000, "5-3", -EINVAL, NULL, 0);
	expect(1000, "1-2,x", -EINVAL, NULL, 0);
	expect(1000, " 1-2", -EINVAL, NULL, 0);
}

/* --hot-margin 0 keeps the pages recorded (starts still rounded down to a page); the
 * default is twice the mount's readahead. */
static void test_other_margins(void)
{
	margin = 0;
	expect(1000000, "5000-9000,9000-9001", 0, (struct hot_range[]){ { 4096, 9001 } }, 1);
	expect(1000000, "0-4096,8192-12288", 0,
	       (struct hot_range[]){ { 0, 4096 }, { 8192, 12288 } }, 2);
	margin = STP_HOT_MARGIN_DEFAULT;
	CHECK(STP_HOT_MARGIN_DEFAULT == 32 * KiB, "default margin %u", STP_HOT_MARGIN_DEFAULT);
	expect(1000000, "100000-100001", 0,
	       (struct hot_range[]){ { (100000 - 32 * KiB) & ~4095ull, 100001 + 32 * KiB } }, 1);
	/* 64 KiB apart: merged at 32 KiB on each side, not at 16 */
	expect(1000000, "100000-100001,165537-165538", 0,
	       (struct hot_range[]){ { (100000 - 32 * KiB) & ~4095ull, 165538 + 32 * KiB } }, 1);
	margin = M;
}

/* Lines of several files, in list order: LINES[i] is a file index and its ranges text
 * (NULL: whole). Checks the hot region's pieces (file index, start, end) against WANT. */
struct line {
	int file;
	const char *ranges;
};
struct want_piece {
	int file;
	uint64_t start, end;
};

static void expect_order(const uint64_t *sizes, int nfiles, const struct line *lines,
			 int nlines, const struct want_piece *want, size_t n)
{
	struct hot_set h = { 0 };
	struct node nodes[4];

	memset(nodes, 0, sizeof(nodes));
	for (int i = 0; i < nfiles; i++)
		nodes[i].st.st_size = (off_t)sizes[i];
	for (int i = 0; i < nlines; i++)
		CHECK(order_add_ranges(&h, &nodes[lines[i].file], lines[i].ranges, margin) == 0,
		      "line %d", i);
	CHECK(order_resolve_ranges(&h) == 0, "resolve");
	CHECK(h.n == n, "%zu pieces, expected %zu", h.n, n);
	for (size_t i = 0; i < n && i < h.n; i++)
		CHECK(h.v[i].file == &nodes[want[i].file] && h.v[i].start == want[i].start &&
		      h.v[i].end == want[i].end, "piece %zu: file %d [%llu, %llu), expected %d [%llu, %llu)",
		      i, (int)(h.v[i].file - nodes), (unsigned long long)h.v[i].start,
		      (unsigned long long)h.v[i].end, want[i].file, (unsigned long long)want[i].start,
		      (unsigned long long)want[i].end);
	for (int i = 0; i < nlines; i++)
		CHECK(nodes[lines[i].file].hot, "file %d hot", lines[i].file);
	for (int i = 0; i < nfiles; i++)
		free(nodes[i].hot_ranges);
	order_hot_free(&h);
}

/* The hot region follows the list: a file listed again has its new ranges there, and a
 * byte two ranges cover goes with the earlier. */
static void test_list_order(void)
{
	const uint64_t sizes[] = { 4096 * KiB, 1024 * KiB, 100000, 0 };

	margin = 0;
	expect_order(sizes, 2, (struct line[]){ { 0, "0-4096" }, { 1, "0-4096" },
						{ 0, "1048576-1052672" } }, 3,
		     (struct want_piece[]){ { 0, 0, 4096 }, { 1, 0, 4096 },
					    { 0, 1048576, 1052672 } }, 3);
	/* within a line, in the line's order; an overlap goes with the earlier range */
	expect_order(sizes, 1, (struct line[]){ { 0, "8192-16384,0-12288" } }, 1,
		     (struct want_piece[]){ { 0, 8192, 16384 }, { 0, 0, 8192 } }, 2);
	/* the whole file after a range: the rest follows; a range after it adds nothing */
	expect_order(sizes, 3, (struct line[]){ { 2, "4096-8192" }, { 1, "0-4096" }, { 2, NULL },
						{ 1, "0-8192" } }, 4,
		     (struct want_piece[]){ { 2, 4096, 8192 }, { 1, 0, 4096 }, { 2, 0, 4096 },
					    { 2, 8192, 100000 }, { 1, 4096, 8192 } }, 5);
	/* an empty file is one empty piece; where widened ranges overlap, the earlier wins */
	margin = 8 * KiB;
	expect_order(sizes, 4, (struct line[]){ { 3, NULL }, { 0, "16384-20480,24576-28672" } }, 2,
		     (struct want_piece[]){ { 3, 0, 0 }, { 0, 8192, 28672 }, { 0, 28672, 36864 } }, 3);
	margin = M;
}

int main(void)
{
	RUN(test_widened_and_page_aligned);
	RUN(test_cut_at_size);
	RUN(test_sorted_and_merged);
	RUN(test_whole_file);
	RUN(test_refused);
	RUN(test_other_margins);
	RUN(test_list_order);
	return tap_done();
}
