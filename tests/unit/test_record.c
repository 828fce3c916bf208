/* SPDX-License-Identifier: MIT */
/*
 * The hot-list recorder (mounthelper/mount/record.c) through its API, over an image made
 * in memory (memimage.h): reads are rounded out to pages and merged with the ranges they
 * touch or meet (keeping the earliest's place), ranges come out in the order of their
 * first read, a line per run of one file's, and paths are escaped; names looked up come
 * after them, each once, in the order of their first lookup, the first STP_LOOKUP_MAX.
 * Each expected list is written out by hand.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "format.h"
#include "hotlist.h"
#include "image.h"
#include "log.h"
#include "record.h"

#include "check.h"
#include "memimage.h"

static const struct mem_file files[] = {
	{ "a", 1 << 20, NULL, 0 },
	{ "b\tc", 1 << 20, NULL, 0 },
	{ "d", 1 << 20, NULL, 0 },
	{ "unread", 100, NULL, 0 },
};
enum { A = 1, BC = 2, D = 3 }; /* "unread" is never read: never listed */

static struct stp_image *img;

/* What recorder R writes, R freed. */
static char *list_of(struct stp_recorder *r)
{
	int fd = memfd_create("hot-list", MFD_CLOEXEC);
	off_t len;
	char *text;

	if (fd < 0)
		abort();
	CHECK(stp_record_write(r, fd, STP_RECORD_MAX) == 0);
	stp_record_free(r);
	len = lseek(fd, 0, SEEK_END);
	text = calloc(1, (size_t)len + 1);
	if (!text || stp_pread_full(fd, text, (size_t)len, 0))
		abort();
	close(fd);
	return text;
}

/* The list a recorder writes after READS (inode, offset, length, ...; inode 0 ends). */
static char *list_after(const uint64_t *reads)
{
	struct stp_recorder *r;

	if (stp_record_new(img, &r))
		abort();
	for (; reads[0]; reads += 3)
		stp_record_read(r, (uint32_t)reads[0], reads[1], reads[2]);
	return list_of(r);
}

static void expect(const uint64_t *reads, const char *want)
{
	char *got = list_after(reads);

	CHECK(!strcmp(got, want), "list:\n%s\nexpected:\n%s", got, want);
	free(got);
}

static void test_pages(void)
{
	expect((const uint64_t[]){ A, 0, 1, 0 }, "a\t0-4096\n");
	expect((const uint64_t[]){ A, 4095, 2, 0 }, "a\t0-8192\n");
	expect((const uint64_t[]){ A, 8192, 4096, 0 }, "a\t8192-12288\n");
	/* nothing read: nothing listed; an inode past the table is ignored */
	expect((const uint64_t[]){ A, 100, 0, 99, 0, 1, 0 }, "");
}

static void test_merging(void)
{
	/* extending the last range, and a read that meets it */
	expect((const uint64_t[]){ A, 0, 4096, A, 4096, 4096, A, 6000, 10000, 0 },
	       "a\t0-16384\n");
	/* before the first, between two, after the last, kept apart, in the order read */
	expect((const uint64_t[]){ A, 40960, 1, A, 81920, 1, A, 0, 1, A, 61440, 1, A, 200000, 1, 0 },
	       "a\t40960-45056,81920-86016,0-4096,61440-65536,196608-200704\n");
	/* one read spanning three ranges and the gaps between */
	expect((const uint64_t[]){ A, 0, 1, A, 20480, 1, A, 40960, 1, A, 4096, 40000, 0 },
	       "a\t0-45056\n");
	/* one meeting the range before it and touching the one after */
	expect((const uint64_t[]){ A, 0, 4096, A, 16384, 4096, A, 4096, 12289, 0 },
	       "a\t0-20480\n");
	/* many ranges: the table grows */
	expect((const uint64_t[]){ A, 9 * 8192, 1, A, 8 * 8192, 1, A, 7 * 8192, 1, A, 6 * 8192, 1,
				   A, 5 * 8192, 1, A, 4 * 8192, 1, A, 3 * 8192, 1, A, 2 * 8192, 1,
				   A, 8192, 1, A, 0, 1, 0 },
	       "a\t73728-77824,65536-69632,57344-61440,49152-53248,40960-45056,32768-36864,"
	       "24576-28672,16384-20480,8192-12288,0-4096\n");
	/* a range that meets a later one takes it in, at the earlier one's place */
	expect((const uint64_t[]){ A, 8192, 1, A, 40960, 1, A, 4096, 1, 0 },
	       "a\t4096-12288,40960-45056\n");
	expect((const uint64_t[]){ A, 40960, 1, A, 8192, 1, A, 12288, 28672, 0 },
	       "a\t8192-45056\n");
}

static void test_order_and_escapes(void)
{
	/* d's second read meets its first; b\tc's second range is read after a's */
	expect((const uint64_t[]){ D, 0, 1, BC, 8192, 1, A, 0, 1, D, 4096, 1, BC, 0, 1, 0 },
	       "d\t0-8192\nb\\tc\t8192-12288\na\t0-4096\nb\\tc\t0-4096\n");
	/* runs of one file share a line */
	expect((const uint64_t[]){ A, 0, 1, A, 65536, 1, D, 0, 1, A, 131072, 1, A, 200704, 1, 0 },
	       "a\t0-4096,65536-69632\nd\t0-4096\na\t131072-135168,200704-204800\n");
}

/* A list longer than the most written is cut after its last whole line below it, and
 * said to be (a huge listing filled root's file system: no bound at all). */
static void test_cut_to_the_most_written(void)
{
	static const char full[] = "d\t0-8192\nb\\tc\t8192-12288\na\t0-4096\n";
	const uint64_t max[] = { sizeof(full) - 1, sizeof(full) - 2, 25, 24, 9, 8, 0 };
	const char *two = "d\t0-8192\nb\\tc\t8192-12288\n", *one = "d\t0-8192\n";
	const char *want[] = { full, two, two, one, one, "", "" };

	for (unsigned i = 0; i < 7; i++) {
		struct stp_recorder *r;
		int fd = memfd_create("hot-list", MFD_CLOEXEC), rc;
		char got[64] = "";
		off_t len;

		if (fd < 0 || stp_record_new(img, &r))
			abort();
		stp_record_read(r, D, 0, 8192);
		stp_record_read(r, BC, 8192, 1);
		stp_record_read(r, A, 0, 1);
		rc = stp_record_write(r, fd, max[i]);
		stp_record_free(r);
		len = lseek(fd, 0, SEEK_END);
		CHECK(len >= 0 && len < (off_t)sizeof(got) && !stp_pread_full(fd, got, (size_t)len, 0));
		CHECK(!strcmp(got, want[i]), "at most %llu bytes: \"%s\"", (unsigned long long)max[i],
		      got);
		CHECK(rc == (i ? -EFBIG : 0), "at most %llu bytes: %d", (unsigned long long)max[i], rc);
		close(fd);
	}
}

static void test_lookups_once_in_order(void)
{
	struct stp_recorder *r;
	char *got;

	if (stp_record_new(img, &r))
		abort();
	stp_record_read(r, A, 0, 1);
	for (const char *const *n = (const char *const[]){ "b", "a", "b", "zz", "a", "z", NULL };
	     *n; n++)
		stp_record_lookup(r, STP_ROOT_INO, *n, strlen(*n));
	stp_record_lookup(r, STP_ROOT_INO, "zzz", 1); /* LEN counts: "z" again */
	got = list_of(r);
	CHECK(!strcmp(got, "a\t0-4096\nb\t" STP_HOTLIST_LOOKUP "\na\t" STP_HOTLIST_LOOKUP
			   "\nzz\t" STP_HOTLIST_LOOKUP "\nz\t" STP_HOTLIST_LOOKUP "\n"),
	      "list:\n%s", got);
	free(got);
}

/* Many more lookups than a list holds, most of them repeats: the first STP_LOOKUP_MAX
 * names, each once, in order. */
static void test_lookups_past_the_most_kept(void)
{
	const unsigned names = STP_LOOKUP_MAX + 7, lookups = 5 * STP_LOOKUP_MAX;
	struct stp_recorder *r;
	char name[16], *got, *line, *save = NULL;
	unsigned k = 0, bad = 0;

	if (stp_record_new(img, &r))
		abort();
	for (unsigned i = 0; i < lookups; i++) {
		/* each name twice in a row, then the next: every name is first seen in order */
		snprintf(name, sizeof(name), "n%u", i / 2 % names);
		stp_record_lookup(r, STP_ROOT_INO, name, strlen(name));
	}
	got = list_of(r);
	for (line = strtok_r(got, "\n", &save); line; line = strtok_r(NULL, "\n", &save), k++) {
		snprintf(name, sizeof(name), "n%u\t", k);
		bad += strncmp(line, name, strlen(name)) != 0;
	}
	CHECK(k == STP_LOOKUP_MAX && !bad, "%u lines, %u out of order", k, bad);
	free(got);
}

int main(void)
{
	stp_log_set_handler(NULL);
	if (mem_image_open(files, 4, 0, &img)) {
		printf("Bail out! the hand-made image does not open\n");
		return 1;
	}
	RUN(test_pages);
	RUN(test_merging);
	RUN(test_order_and_escapes);
	RUN(test_cut_to_the_most_written);
	RUN(test_lookups_once_in_order);
	RUN(test_lookups_past_the_most_kept);
	stp_image_close(img);
	return tap_done();
}
