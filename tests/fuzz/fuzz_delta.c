/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: delta blocks (delta.h), which a hostile server can craft together with an
 * index that vouches for them. Bytes 0..3 are the content length asked (WANT, at most
 * 1 MiB), bytes 4..7 the prefix's length (at most what follows); then the prefix, then
 * the delta. The rebuild must write exactly WANT bytes or fail with -EUCLEAN, tell its
 * steps in order and never past WANT, and read nothing outside its buffers (the output is
 * allocated to WANT exactly, so the sanitizer sees a byte past it). The delta's bytes
 * are also decoded as a stored block (stp_delta_content). Last, a delta made of the
 * prefix's second half against its first half must rebuild it exactly.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "format.h"
#include "fuzz.h"
#include "log.h"

#define WANT_MAX ((size_t)1 << 20)

struct steps {
	size_t last, want;
	unsigned calls;
};

static void step(void *ctx, size_t n)
{
	struct steps *s = ctx;

	FUZZ_ASSERT(n >= s->last && n <= s->want);
	s->last = n;
	s->calls++;
}

static void rebuild(const uint8_t *delta, size_t dlen, const uint8_t *prefix, size_t plen,
		    size_t want)
{
	uint8_t *out = malloc(want ? want : 1);
	struct steps s = { 0, want, 0 };
	int rc;

	if (!out)
		return;
	rc = stp_delta_apply_steps(delta, dlen, prefix, plen, out, want, step, &s);
	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN || rc == -ENOMEM);
	if (rc == 0)
		FUZZ_ASSERT(s.calls && s.last == want);
	free(out);
}

static void as_block(const uint8_t *stored, size_t len, size_t cap)
{
	uint8_t *out = malloc(cap ? cap : 1);
	size_t n = 0;
	int rc;

	if (!out)
		return;
	rc = stp_delta_content(stored, len, out, cap, &n);
	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN || rc == -ENOMEM);
	if (rc == 0)
		FUZZ_ASSERT(n <= cap);
	free(out);
}

/* The promise the other way: what make writes, apply gives back. */
static void round_trip(const uint8_t *prefix, size_t plen)
{
	size_t half = plen / 2, len = plen - half, cap = len + 1024, dlen = 0;
	uint8_t *delta = malloc(cap), *out = malloc(len ? len : 1);

	if (delta && out &&
	    !stp_delta_make(prefix + half, len, prefix, half, 1, delta, cap, &dlen)) {
		FUZZ_ASSERT(stp_delta_apply(delta, dlen, prefix, half, out, len) == 0);
		FUZZ_ASSERT(!memcmp(out, prefix + half, len));
	}
	free(delta);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t want, plen;

	stp_log_set_handler(NULL);
	if (size < 8)
		return 0;
	want = stp_le32(data) % (WANT_MAX + 1);
	plen = stp_le32(data + 4);
	data += 8;
	size -= 8;
	if (plen > size)
		plen = size;
	rebuild(data + plen, size - plen, data, plen, want);
	as_block(data + plen, size - plen, want);
	if (plen <= 4096)
		round_trip(data, plen);
	return 0;
}
