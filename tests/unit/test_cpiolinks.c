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
	RUN(single_links_are_not_listed);
	RUN(an_inode_met_again_rejoins);
	return tap_done();
}
