/* SPDX-License-Identifier: MIT */
/*
 * common/util.h's growth of arrays: stp_room_for_n keeps the bytes already held, grows
 * by doubling until the bytes asked for fit, never past its bound, and refuses a request
 * past the bound without touching the buffer.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "util.h"

static void test_room_grows_and_keeps(void)
{
	char *v = NULL;
	size_t cap = 0, used = 0;

	CHECK(stp_room_for_n(&v, &cap, 0, 10, SIZE_MAX) == 0 && v && cap == 1024, "%zu", cap);
	memset(v, 'a', 10);
	used = 10;
	CHECK(stp_room_for_n(&v, &cap, used, cap - used, SIZE_MAX) == 0 && cap == 1024,
	      "a request that fits does not grow: %zu", cap);
	CHECK(stp_room_for_n(&v, &cap, used, 5000, SIZE_MAX) == 0 && cap == 8192, "%zu", cap);
	CHECK(!memcmp(v, "aaaaaaaaaa", 10), "the bytes held are kept");
	free(v);
}

static void test_room_stops_at_the_bound(void)
{
	char *v = NULL, *before;
	size_t cap = 0;

	CHECK(stp_room_for_n(&v, &cap, 0, 100, 300) == 0 && cap == 300, "a first size past the "
	      "bound is cut to it: %zu", cap);
	CHECK(stp_room_for_n(&v, &cap, 290, 10, 300) == 0 && cap == 300, "%zu", cap);
	before = v;
	CHECK(stp_room_for_n(&v, &cap, 290, 11, 300) == -ENOMEM && v == before && cap == 300,
	      "past the bound: refused, unchanged");
	free(v);
	v = NULL;
	cap = 0;
	CHECK(stp_room_for_n(&v, &cap, 0, 1500, 3000) == 0 && cap == 2048, "%zu", cap);
	CHECK(stp_room_for_n(&v, &cap, 2048, 900, 3000) == 0 && cap == 3000,
	      "doubling past the bound stops at it: %zu", cap);
	CHECK(stp_room_for_n(&v, &cap, 0, SIZE_MAX, SIZE_MAX / 2) == -ENOMEM, "no overflow");
	free(v);
}

int main(void)
{
	RUN(test_room_grows_and_keeps);
	RUN(test_room_stops_at_the_bound);
	return tap_done();
}
