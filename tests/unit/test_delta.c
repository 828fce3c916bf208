/* SPDX-License-Identifier: MIT */
/*
 * Delta blocks (common/delta.h): a delta rebuilds its content from its prefix and from
 * no other, and every input that is not exactly one frame of the right length, or that
 * asks for a wider window than it may, is refused rather than decoded.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "delta.h"

#include "check.h"
#include "golden.h"

#define LEN (256u << 10)

/* Bytes that compress poorly on their own: a xorshift stream. */
static void noise(uint8_t *p, size_t len, uint64_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)seed;
	}
}

static uint8_t prefix[2 * LEN], content[LEN], out[LEN + 1], delta[LEN], frame[2 * LEN];

/* CONTENT: the second half of the prefix with a few bytes changed and a run moved. */
static void make_pair(void)
{
	noise(prefix, sizeof(prefix), 42);
	memcpy(content, prefix + LEN + 1000, LEN - 1000);
	memcpy(content + LEN - 1000, prefix, 1000);
	for (size_t i = 0; i < LEN; i += 4096)
		content[i] ^= 0x5a;
}

static void test_roundtrip(void)
{
	size_t dlen = 0;

	make_pair();
	CHECK_EQ(stp_delta_make(content, LEN, prefix, sizeof(prefix), 3, delta, sizeof(delta),
				&dlen), 0);
	/* the content shares all but 64 bytes with the prefix: the delta is small */
	CHECK(dlen < LEN / 16, "%zu bytes", dlen);
	memset(out, 0, sizeof(out));
	CHECK_EQ(stp_delta_apply(delta, dlen, prefix, sizeof(prefix), out, LEN), 0);
	CHECK(!memcmp(out, content, LEN));
	/* too small a room: said so, not cut */
	CHECK_EQ(stp_delta_make(content, LEN, prefix, sizeof(prefix), 3, delta, 16, &dlen),
		 -ENOSPC);
}

static void test_apply_refuses(void)
{
	size_t dlen = 0;
	uint8_t other[2 * LEN];

	make_pair();
	CHECK_EQ(stp_delta_make(content, LEN, prefix, sizeof(prefix), 3, delta, sizeof(delta),
				&dlen), 0);
	/* another length than the content's: refused, both ways */
	CHECK_EQ(stp_delta_apply(delta, dlen, prefix, sizeof(prefix), out, LEN - 1), -EUCLEAN);
	CHECK_EQ(stp_delta_apply(delta, dlen, prefix, sizeof(prefix), out, LEN + 1), -EUCLEAN);
	/* cut short, or with a byte after the frame */
	CHECK_EQ(stp_delta_apply(delta, dlen - 1, prefix, sizeof(prefix), out, LEN), -EUCLEAN);
	delta[dlen] = 0;
	CHECK_EQ(stp_delta_apply(delta, dlen + 1, prefix, sizeof(prefix), out, LEN), -EUCLEAN);
	/* a window wider than prefix and content: a short prefix cannot vouch for it */
	CHECK_EQ(stp_delta_apply(delta, dlen, prefix, 1000, out, LEN), -EUCLEAN);
	/* another prefix: other bytes or a refusal, never the content */
	memcpy(other, prefix, sizeof(other));
	other[LEN + 5000] ^= 1;
	if (!stp_delta_apply(delta, dlen, other, sizeof(other), out, LEN))
		CHECK(memcmp(out, content, LEN));
}

static void test_content(void)
{
	size_t n, got = 0;

	noise(content, LEN, 7);
	memset(content, 'a', LEN / 2);
	n = ZSTD_compress(frame, sizeof(frame), content, LEN, 3);
	CHECK(!ZSTD_isError(n));
	CHECK_EQ(stp_delta_content(frame, n, out, LEN, &got), 0);
	CHECK_EQ(got, LEN);
	CHECK(!memcmp(out, content, LEN));
	CHECK_EQ(stp_delta_content(frame, n, out, LEN - 1, &got), -EUCLEAN);
	CHECK_EQ(stp_delta_content(frame, n - 1, out, LEN, &got), -EUCLEAN);
	CHECK_EQ(stp_delta_content(frame, n + 1, out, LEN, &got), -EUCLEAN);
	CHECK_EQ(stp_delta_content(content, 64, out, LEN, &got), -EUCLEAN);
}

/* One frame has a content; one followed by a skippable frame (which readers accept in a
 * block) has none a delta could rebuild, so signing hashes it as zeros. */
static void test_one_frame(void)
{
	static const uint8_t skippable[12] = { 0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4 };
	size_t n;

	noise(content, LEN, 9);
	n = ZSTD_compress(frame, sizeof(frame) - sizeof(skippable), content, LEN, 1);
	CHECK(!ZSTD_isError(n));
	CHECK(stp_delta_one_frame(frame, n));
	CHECK(!stp_delta_one_frame(frame, n - 1));
	memcpy(frame + n, skippable, sizeof(skippable));
	CHECK(!stp_delta_one_frame(frame, n + sizeof(skippable)));
	CHECK(!stp_delta_one_frame(skippable, sizeof(skippable)));
}

/* What a step saw: each N larger than the last, its bytes already the content's. */
static size_t steps, last_step, steps_wrong;

static void step_seen(void *ctx, size_t n)
{
	(void)ctx;
	steps++;
	if (n <= last_step && !(n == LEN && last_step == LEN))
		steps_wrong++;
	if (memcmp(out, content, n))
		steps_wrong++;
	last_step = n;
}

static void test_apply_steps(void)
{
	size_t dlen = 0;

	make_pair();
	/* a prefix that begins as a zstd dictionary does is still raw content */
	prefix[0] = 0x37, prefix[1] = 0xa4, prefix[2] = 0x30, prefix[3] = 0xec;
	memcpy(content + 100, prefix, 64);
	CHECK_EQ(stp_delta_make(content, LEN, prefix, sizeof(prefix), 3, delta, sizeof(delta),
				&dlen), 0);
	memset(out, 0, sizeof(out));
	steps = last_step = steps_wrong = 0;
	CHECK_EQ(stp_delta_apply_steps(delta, dlen, prefix, sizeof(prefix), out, LEN, step_seen,
				       NULL), 0);
	CHECK(!memcmp(out, content, LEN));
	CHECK_EQ(last_step, (size_t)LEN);
	CHECK(steps >= 2 && !steps_wrong, "%zu steps, %zu wrong", steps, steps_wrong);
	/* refused: no step claims the whole */
	last_step = 0;
	CHECK_EQ(stp_delta_apply_steps(delta, dlen - 1, prefix, sizeof(prefix), out, LEN,
				       step_seen, NULL), -EUCLEAN);
	CHECK(last_step < LEN, "%zu", last_step);
}

int main(void)
{
	RUN(test_roundtrip);
	RUN(test_apply_refuses);
	RUN(test_content);
	RUN(test_one_frame);
	RUN(test_apply_steps);
	return tap_done();
}
