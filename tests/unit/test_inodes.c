/* SPDX-License-Identifier: MIT */
/*
 * The table of the inodes the kernel knows (mount/inodes.c): an inode is known from its
 * first lookup until forgets take away every lookup, however they are batched; watchers
 * hear of each transition once, in order, with the inode's record on a lookup and NULL
 * on a forget; a count that would overflow stays known; inodes out of range are ignored.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "format.h"
#include "inodes.h"

#define MAX_EVENTS 16

struct events {
	uint32_t ino[MAX_EVENTS];
	int known[MAX_EVENTS];
	unsigned n;
};

static void note(void *ctx, uint32_t ino, const struct stp_inode *inode)
{
	struct events *ev = ctx;

	if (ev->n < MAX_EVENTS) {
		ev->ino[ev->n] = ino;
		ev->known[ev->n++] = inode != NULL;
	}
}

static const struct stp_inode file = { .mode = S_IFREG | 0644, .size = 10 };

static void test_known_until_every_lookup_is_forgotten(void)
{
	struct stp_inodes *t;
	struct events a = { 0 }, b = { 0 };

	CHECK(stp_inodes_new(8, &t) == 0);
	CHECK(stp_inodes_watch(t, note, &a) == 0 && stp_inodes_watch(t, note, &b) == 0);
	CHECK(stp_inodes_watch(t, note, &a) == -ENOSPC);
	CHECK(!stp_inodes_known(t, 3));
	stp_inodes_lookup(t, 3, &file);
	stp_inodes_lookup(t, 3, &file);
	stp_inodes_lookup(t, 5, &file);
	CHECK(stp_inodes_known(t, 3) && stp_inodes_known(t, 5) && stp_inodes_count(t) == 2);
	stp_inodes_forget(t, 3, 1);
	CHECK(stp_inodes_known(t, 3), "one lookup of two forgotten");
	stp_inodes_forget(t, 3, 1);
	CHECK(!stp_inodes_known(t, 3) && stp_inodes_count(t) == 1);
	stp_inodes_forget(t, 3, 1); /* a forget of nothing changes nothing */
	stp_inodes_forget(t, 5, 1000); /* more than it had: forgotten */
	stp_inodes_lookup(t, 3, &file); /* known again */
	CHECK(stp_inodes_known(t, 3) && !stp_inodes_known(t, 5) && stp_inodes_count(t) == 1);
	CHECK(a.n == 5 && !memcmp(&a, &b, sizeof(a)), "%u events", a.n);
	CHECK(a.ino[0] == 3 && a.known[0] && a.ino[1] == 5 && a.known[1] && a.ino[2] == 3 &&
	      !a.known[2] && a.ino[3] == 5 && !a.known[3] && a.ino[4] == 3 && a.known[4]);
	stp_inodes_free(t);
}

static void test_out_of_range_and_null(void)
{
	struct stp_inodes *t;

	CHECK(stp_inodes_new(4, &t) == 0);
	stp_inodes_lookup(t, 4, &file);
	stp_inodes_forget(t, UINT32_MAX, 1);
	CHECK(!stp_inodes_known(t, 4) && stp_inodes_count(t) == 0);
	stp_inodes_lookup(NULL, 1, &file);
	CHECK(!stp_inodes_known(NULL, 1) && stp_inodes_count(NULL) == 0);
	stp_inodes_free(t);
	stp_inodes_free(NULL);
}

int main(void)
{
	RUN(test_known_until_every_lookup_is_forgotten);
	RUN(test_out_of_range_and_null);
	return tap_done();
}
