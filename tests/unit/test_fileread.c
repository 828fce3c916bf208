/* SPDX-License-Identifier: MIT */
/*
 * stp_file_walk and stp_file_read over extent tables written by hand (memimage.h): the
 * pieces come in file order, holes between, before and after the extents are reported
 * as holes, a range is cut at the file's size and a stored run at each block edge,
 * extents out of order are refused, and the bytes read are the stream's where an extent
 * maps them and zeros elsewhere.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cache.h"
#include "fileread.h"
#include "log.h"

#include "check.h"
#include "memimage.h"

#define H STP_FILE_HOLE
#define MAX_PIECES 16

struct piece {
	uint64_t file_off, stream_off, len;
};

struct walk {
	struct piece got[MAX_PIECES];
	unsigned n;
	unsigned fail_at; /* the piece whose callback fails (-EINTR), 0: none */
	unsigned bad;     /* pieces whose block and offset in it are not their stream's */
};

static int note(void *ctx, const struct stp_file_piece *p)
{
	struct walk *w = ctx;
	int hole = p->block == STP_FILE_HOLE;

	if (w->n == MAX_PIECES)
		return -E2BIG;
	if (hole ? p->in_block || p->stream_off
		 : p->block != p->stream_off / MEM_BLOCK || p->in_block != p->stream_off % MEM_BLOCK ||
		   p->in_block + p->len > MEM_BLOCK)
		w->bad++;
	w->got[w->n++] = (struct piece){ p->file_off, hole ? H : p->stream_off, p->len };
	return w->n == w->fail_at ? -EINTR : 0;
}

/* Walks [OFF, OFF + LEN) of image inode INO and compares the pieces with WANT[0..N). */
static int walk_is(const struct stp_image *img, uint32_t ino, uint64_t off, uint64_t len,
		   const struct piece *want, unsigned n, unsigned fail_at)
{
	struct stp_inode in;
	struct walk w = { .fail_at = fail_at };
	int rc = stp_image_inode(img, ino, &in);

	if (!rc)
		rc = stp_file_walk(img, &in, off, len, note, &w);
	CHECK(!w.bad, "inode %u: %u pieces name another block than their stream's", ino, w.bad);
	CHECK(w.n == n, "inode %u [%llu, +%llu): %u pieces, expected %u", ino,
	      (unsigned long long)off, (unsigned long long)len, w.n, n);
	for (unsigned i = 0; i < n && i < w.n; i++)
		CHECK(!memcmp(&w.got[i], &want[i], sizeof(want[i])),
		      "inode %u piece %u: (%llu, %lld, %llu), expected (%llu, %lld, %llu)", ino, i,
		      (unsigned long long)w.got[i].file_off, (long long)w.got[i].stream_off,
		      (unsigned long long)w.got[i].len, (unsigned long long)want[i].file_off,
		      (long long)want[i].stream_off, (unsigned long long)want[i].len);
	return rc;
}

/* inode 1: extents with holes before, between and after them */
static const struct stp_extent holey[] = {
	{ .file_off = 1000, .stream_off = 0, .length = 1000 },
	{ .file_off = 5000, .stream_off = 2000, .length = 1000 },
	{ .file_off = 90000, .stream_off = 10000, .length = 5000 },
};
/* inode 3: the same extents, the first two swapped */
static const struct stp_extent swapped[] = {
	{ .file_off = 5000, .stream_off = 2000, .length = 1000 },
	{ .file_off = 1000, .stream_off = 0, .length = 1000 },
};
static const struct mem_file files[] = {
	{ "holey", 100000, holey, 3 },
	{ "sparse", 5000, NULL, 0 },
	{ "swapped", 8000, swapped, 2 },
};

static struct stp_image *img;

/* A run across three blocks of a 200000-byte stream: cut at 65536 and 131072. */
static const struct stp_extent across[] = {
	{ .file_off = 100, .stream_off = 60000, .length = 80000 },
	{ .file_off = 80100, .stream_off = 196608, .length = 3392 },
};
static const struct mem_file wide[] = { { "across", 90000, across, 2 } };

static void test_cut_at_block_edges(void)
{
	const struct piece want[] = {
		{ 0, H, 100 }, { 100, 60000, 5536 }, { 5636, 65536, 65536 },
		{ 71172, 131072, 8928 }, { 80100, 196608, 3392 }, { 83492, H, 6508 },
	};
	const struct piece inside[] = { { 5000, 64900, 636 }, { 5636, 65536, 64 } };
	struct stp_image *w;

	CHECK(mem_image_open(wide, 1, 200000, &w) == 0);
	CHECK(walk_is(w, 1, 0, 90000, want, 6, 0) == 0);
	CHECK(walk_is(w, 1, 5000, 700, inside, 2, 0) == 0);
	stp_image_close(w);
}

static void test_whole_file_in_order(void)
{
	const struct piece want[] = {
		{ 0, H, 1000 }, { 1000, 0, 1000 }, { 2000, H, 3000 }, { 5000, 2000, 1000 },
		{ 6000, H, 84000 }, { 90000, 10000, 5000 }, { 95000, H, 5000 },
	};

	CHECK(walk_is(img, 1, 0, 100000, want, 7, 0) == 0);
	/* a length past the end is cut at the size */
	CHECK(walk_is(img, 1, 0, UINT64_MAX, want, 7, 0) == 0);
}

static void test_ranges_inside(void)
{
	const struct piece mid[] = { { 1500, 500, 500 }, { 2000, H, 3000 }, { 5000, 2000, 500 } };
	const struct piece in_hole[] = { { 2500, H, 1000 } };
	const struct piece in_extent[] = { { 91000, 11000, 10 } };
	const struct piece tail[] = { { 94999, 14999, 1 }, { 95000, H, 4000 } };

	CHECK(walk_is(img, 1, 1500, 4000, mid, 3, 0) == 0);
	CHECK(walk_is(img, 1, 2500, 1000, in_hole, 1, 0) == 0);
	CHECK(walk_is(img, 1, 91000, 10, in_extent, 1, 0) == 0);
	CHECK(walk_is(img, 1, 94999, 4001, tail, 2, 0) == 0);
	CHECK(walk_is(img, 1, 100000, 10, NULL, 0, 0) == 0);  /* at the end: nothing */
	CHECK(walk_is(img, 1, 200000, 10, NULL, 0, 0) == 0);  /* past it */
	CHECK(walk_is(img, 1, 10, 0, NULL, 0, 0) == 0);       /* empty */
}

static void test_no_extents_is_one_hole(void)
{
	const struct piece want[] = { { 0, H, 5000 } };

	CHECK(walk_is(img, 2, 0, 5000, want, 1, 0) == 0);
}

static void test_out_of_order_refused(void)
{
	const struct piece before[] = { { 0, H, 5000 }, { 5000, 2000, 1000 } };

	CHECK(walk_is(img, 3, 0, 8000, before, 2, 0) == -EUCLEAN);
}

static void test_callback_error_ends_walk(void)
{
	const struct piece want[] = { { 0, H, 1000 }, { 1000, 0, 1000 } };

	CHECK(walk_is(img, 1, 0, 100000, want, 2, 2) == -EINTR);
}

/* lseek's answers and the stored pages, from the extent table written above. */
static void test_seek_and_stored_pages(void)
{
	static const struct { uint64_t off; bool data; int rc; uint64_t at; } want[] = {
		{ 0, true, 0, 1000 }, { 1500, true, 0, 1500 }, { 2000, true, 0, 5000 },
		{ 94999, true, 0, 94999 }, { 95000, true, -ENXIO, 0 }, { 100000, true, -ENXIO, 0 },
		{ 0, false, 0, 0 }, { 1000, false, 0, 2000 }, { 90000, false, 0, 95000 },
		{ 99999, false, 0, 99999 }, { 100000, false, -ENXIO, 0 },
	};
	struct stp_inode in;
	uint64_t at, pages;

	CHECK(stp_image_inode(img, 1, &in) == 0);
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int rc = stp_file_seek(img, &in, want[i].off, want[i].data, &at);

		CHECK(rc == want[i].rc && (rc || at == want[i].at), "%s from %llu: %d, %llu",
		      want[i].data ? "data" : "hole", (unsigned long long)want[i].off, rc,
		      (unsigned long long)at);
	}
	/* pages 0, 1 and 21 to 23 hold stored bytes */
	CHECK(stp_file_stored_pages(img, &in, &pages) == 0 && pages == 5, "%llu pages",
	      (unsigned long long)pages);
	CHECK(stp_image_inode(img, 2, &in) == 0);
	CHECK(stp_file_seek(img, &in, 0, true, &at) == -ENXIO);
	CHECK(stp_file_seek(img, &in, 10, false, &at) == 0 && at == 10);
	CHECK(stp_file_stored_pages(img, &in, &pages) == 0 && pages == 0);
}

/* The bytes, compared with the stream through the extent table written above. */
static void test_read_matches_extents(void)
{
	static uint8_t buf[100000];
	struct stp_cache *cache;
	struct stp_inode in;
	ssize_t n;
	size_t bad = SIZE_MAX;

	CHECK(stp_cache_new(img, 2, 1, &cache) == 0);
	CHECK(stp_image_inode(img, 1, &in) == 0);
	memset(buf, 0xee, sizeof(buf));
	n = stp_file_read(img, cache, &in, 0, sizeof(buf) + 10, buf);
	CHECK(n == 100000, "read %zd bytes", n);
	for (size_t i = 0; i < sizeof(buf) && bad == SIZE_MAX; i++) {
		uint8_t want = 0;

		for (unsigned k = 0; k < 3; k++)
			if (i >= holey[k].file_off && i < holey[k].file_off + holey[k].length)
				want = mem_byte(holey[k].stream_off + (i - holey[k].file_off));
		if (buf[i] != want)
			bad = i;
	}
	CHECK(bad == SIZE_MAX, "byte %zu differs", bad);
	CHECK(stp_file_read(img, cache, &in, 100000, 10, buf) == 0);
	stp_cache_free(cache);
}

int main(void)
{
	stp_log_set_handler(NULL);
	if (mem_image_open(files, 3, 20000, &img)) {
		printf("Bail out! the hand-made image does not open\n");
		return 1;
	}
	RUN(test_whole_file_in_order);
	RUN(test_cut_at_block_edges);
	RUN(test_ranges_inside);
	RUN(test_no_extents_is_one_hole);
	RUN(test_out_of_order_refused);
	RUN(test_callback_error_ends_walk);
	RUN(test_seek_and_stored_pages);
	RUN(test_read_matches_extents);
	stp_image_close(img);
	return tap_done();
}
