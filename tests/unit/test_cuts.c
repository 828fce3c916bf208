/* SPDX-License-Identifier: MIT */
/* The stable layout's cut rule (builder/cuts.c): when a block ends before or after a
 * piece, that the draw after a piece depends on its path and start alone, and that it
 * comes with about the chance the rule promises. */
#include <stdio.h>
#include <string.h>

#include "cuts.h"
#include "tree.h"

#include "check.h"

#define NFILES 4000

static struct tree t;
static struct node *files[NFILES];

static void make_tree(void)
{
	size_t cap = 0;

	t.root = tree_root_new(&t, "/src");
	CHECK(t.root != NULL, "root");
	for (int i = 0; i < NFILES && t.root; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%05d", i);
		CHECK(tree_add_child(&t, t.root, name, &cap) == 0, "child %d", i);
		files[i] = t.root->children[i];
	}
}

static void test_before(void)
{
	struct cut_rule r;

	cuts_rule(&r, 20); /* 1 MiB */
	CHECK(r.min_fill > r.block / 2 && r.min_fill < r.block, "min_fill %llu",
	      (unsigned long long)r.min_fill);
	CHECK(!cuts_before(&r, 0, r.block * 3), "a block already starts here");
	CHECK(cuts_before(&r, 1, r.block), "a piece of a block starts one");
	CHECK(!cuts_before(&r, r.min_fill - 1, r.block - r.min_fill + 2),
	      "below the minimum a piece spills into the next block");
	CHECK(cuts_before(&r, r.min_fill, r.block - r.min_fill + 1),
	      "past the minimum a piece that overflows starts a block");
	CHECK(!cuts_before(&r, r.min_fill, r.block - r.min_fill), "a piece that fits");
	CHECK(!cuts_before(&r, r.min_fill, 0), "an empty piece");
}

/* Cuts after pieces of LEN bytes at the minimum fill, among the test files. */
static unsigned count_after(const struct cut_rule *r, uint64_t len, uint64_t start)
{
	unsigned n = 0;

	for (int i = 0; i < NFILES; i++) {
		struct piece pc = { files[i], start, start + len, 0 };

		n += (unsigned)cuts_after(r, r->min_fill, &pc, len);
	}
	return n;
}

static void test_after(void)
{
	struct cut_rule r;
	struct piece pc = { files[0], 0, 100, 0 };
	unsigned eighth, again, moved, half;

	cuts_rule(&r, 20);
	CHECK(!cuts_after(&r, r.min_fill - 1, &pc, r.block), "no cut below the minimum");
	CHECK(!cuts_after(&r, 0, &pc, 100), "none on a block's edge");
	CHECK(cuts_after(&r, r.min_fill, &pc, r.mean_gap), "always after mean_gap bytes");
	/* a chance of len / mean_gap: 1/8 of 4000 draws is 500, sd about 21 */
	eighth = count_after(&r, r.mean_gap / 8, 0);
	CHECK(eighth > 400 && eighth < 600, "%u cuts after 4000 pieces of 1/8 gap", eighth);
	half = count_after(&r, r.mean_gap / 2, 0);
	CHECK(half > 1850 && half < 2150, "%u cuts after 4000 pieces of 1/2 gap", half);
	/* the same pieces decide the same; other starts draw anew */
	again = count_after(&r, r.mean_gap / 8, 0);
	CHECK(again == eighth, "%u then %u", eighth, again);
	moved = count_after(&r, r.mean_gap / 8, 4096);
	CHECK(moved > 400 && moved < 600 && moved != eighth, "%u cuts at start 4096", moved);
}

static void test_copies_add_nothing(void)
{
	struct piece pc = { files[1], 0, 5000, 0 };

	CHECK(cuts_piece_len(&pc) == 5000, "an original counts its bytes");
	files[1]->same_as = files[0];
	CHECK(cuts_piece_len(&pc) == 0, "a copy counts none");
	files[1]->same_as = NULL;
}

int main(void)
{
	make_tree();
	RUN(test_before);
	RUN(test_after);
	RUN(test_copies_add_nothing);
	tree_free(&t);
	return tap_done();
}
