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

/* Parses S for a file of SIZE bytes; checks the result and the ranges WANT[0..N). */
static void expect(uint64_t size, const char *s, int rc_want, const struct hot_range *want,
		   size_t n)
{
	struct node node;
	int rc;

	memset(&node, 0, sizeof(node));
	node.st.st_size = (off_t)size;
	rc = order_parse_ranges(&node, s, margin);
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

int main(void)
{
	RUN(test_widened_and_page_aligned);
	RUN(test_cut_at_size);
	RUN(test_sorted_and_merged);
	RUN(test_whole_file);
	RUN(test_refused);
	RUN(test_other_margins);
	return tap_done();
}
