/* SPDX-License-Identifier: MIT */
/*
 * The mirror of libarchive's cpio link list (builder/cpiolinks.c): an entry with more
 * than one link joins the list until its inode's other links have come, every such
 * entry walks the list as it stands, and directories, which nothing pairs, stay on it.
 */
#include <errno.h>
#include <stdint.h>

#include "cpiolinks.h"

#include "check.h"

static void unpaired_entries_cost_the_square(void)
{
	struct cpio_links l = { 0 };

	for (uint64_t i = 0; i < 1000; i++)
		CHECK(cpio_links_note(&l, 0, i, 2) == 0);
	CHECK(l.live == 1000, "%llu on the list", (unsigned long long)l.live);
	CHECK(l.steps == 999ull * 1000 / 2, "%llu steps", (unsigned long long)l.steps);
	cpio_links_free(&l);
}

static void paired_links_leave_the_list(void)
{
	struct cpio_links l = { 0 };

	for (uint64_t i = 0; i < 100000; i++) /* three links an inode, one after another */
		for (int k = 0; k < 3; k++)
			CHECK(cpio_links_note(&l, 7, i, 3) == 0);
	CHECK(l.live == 0, "%llu left on the list", (unsigned long long)l.live);
	CHECK(l.steps == 200000, "%llu steps", (unsigned long long)l.steps);
	CHECK(l.nslots <= 1024, "%llu slots for a list of 2 at most", (unsigned long long)l.nslots);
	cpio_links_free(&l);
}

/* Entries joining and leaving in a mixed order, against a plain count per inode: the
 * table's deletions (moving entries back) must keep every inode findable. */
static void mixed_order_against_a_count(void)
{
	enum { INODES = 3000 };
	static uint32_t left[INODES];
	struct cpio_links l = { 0 };
	uint64_t x = 88172645463325252ull, live = 0, steps = 0;

	for (int op = 0; op < 200000; op++) {
		uint64_t ino;
		uint32_t nlink;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		ino = x % INODES;
		nlink = 2 + (uint32_t)(ino % 3);
		steps += live;
		if (left[ino]) {
			live -= !--left[ino];
		} else {
			left[ino] = nlink - 1;
			live++;
		}
		CHECK(cpio_links_note(&l, 3, ino, nlink) == 0);
		if (l.live != live || l.steps != steps) {
			CHECK(0, "op %d: %llu live, %llu steps; %llu and %llu expected", op,
			      (unsigned long long)l.live, (unsigned long long)l.steps,
			      (unsigned long long)live, (unsigned long long)steps);
			break;
		}
	}
	cpio_links_free(&l);
}

static void single_links_are_not_listed(void)
{
	struct cpio_links l = { 0 };

	for (uint64_t i = 0; i < 100; i++)
		CHECK(cpio_links_note(&l, 0, 5, 1) == 0);
	CHECK(l.live == 0 && l.steps == 0);
	cpio_links_free(&l);
}

/* An inode met again after all its links came joins the list again, as libarchive's
 * reader, which forgot it, adds it anew; the device tells inodes apart. */
static void an_inode_met_again_rejoins(void)
{
	struct cpio_links l = { 0 };

	CHECK(cpio_links_note(&l, 1, 9, 2) == 0 && cpio_links_note(&l, 1, 9, 2) == 0);
	CHECK(l.live == 0);
	CHECK(cpio_links_note(&l, 1, 9, 2) == 0 && l.live == 1);
	CHECK(cpio_links_note(&l, 2, 9, 2) == 0 && l.live == 2);
	CHECK(l.steps == 0 + 1 + 0 + 1, "%llu steps", (unsigned long long)l.steps);
	cpio_links_free(&l);
}

int main(void)
{
	RUN(unpaired_entries_cost_the_square);
	RUN(paired_links_leave_the_list);
	RUN(mixed_order_against_a_count);
	RUN(single_links_are_not_listed);
	RUN(an_inode_met_again_rejoins);
	return tap_done();
}
