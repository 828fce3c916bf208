/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the monitor protocol's decoders (mounthelper/mount/monproto.c, setup.c).
 * The bytes are one datagram as a program the monitor execs receives it: sent on a
 * SOCK_SEQPACKET pair and taken with stp_msg_recv_fds, then, as a SETUP payload, decoded
 * field by field. What decodes must encode back to a payload that decodes to the same
 * setup (the sandbox user's ids too): nothing the decoder accepts is lost or changed on
 * the way. A BLOCKS or STORE
 * payload (a published image's store, fetcher.h) goes through its check, against a batch
 * and an image size taken from the payload's first bytes: what passes stays in bounds.
 * A SANDBOX payload decodes to a known mode or is refused. A FILTER payload decodes to
 * 1 to STP_SANDBOX_PROG_MAX whole instructions, the same bytes, or is refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fetcher.h"
#include "fuzz.h"
#include "monproto.h"
#include "setup.h"

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The fields a decode fills, compared. */
static int same_setup(const struct stp_setup *a, const struct stp_setup *b)
{
	const struct stp_mount_opts *x = &a->opts, *y = &b->opts;

	return same_str(a->prog, b->prog) && same_str(x->image, y->image) &&
	       same_str(x->mountpoint, y->mountpoint) && same_str(x->fuse_opts, y->fuse_opts) &&
	       same_str(x->record, y->record) && same_str(x->proxy, y->proxy) &&
	       x->warm_workers == y->warm_workers && x->cache_budget == y->cache_budget &&
	       x->meta_cache == y->meta_cache && x->sandbox == y->sandbox &&
	       x->foreground == y->foreground && a->mem_limit == b->mem_limit &&
	       a->nkeys == b->nkeys && a->nroles == b->nroles &&
	       a->sandbox_ids == b->sandbox_ids && a->sandbox_uid == b->sandbox_uid &&
	       a->sandbox_gid == b->sandbox_gid &&
	       !memcmp(a->keys, b->keys, a->nkeys * sizeof(a->keys[0])) &&
	       !memcmp(a->roles, b->roles, a->nroles * sizeof(a->roles[0])) &&
	       !memcmp(a->cache.tag_key, b->cache.tag_key, sizeof(a->cache.tag_key));
}

static void decode_roundtrip(const uint8_t *data, size_t size)
{
	static struct stp_setup s, again;
	uint8_t *buf = malloc(STP_MSG_MAX);
	size_t len;

	FUZZ_ASSERT(buf);
	stp_setup_init(&s);
	stp_setup_init(&again);
	if (!stp_setup_decode(data, size, &s)) {
		FUZZ_ASSERT(s.nkeys <= STP_SETUP_KEYS_MAX && s.nroles <= STP_SETUP_FDS_MAX);
		FUZZ_ASSERT(s.opts.sandbox <= STP_SANDBOX_OFF);
		FUZZ_ASSERT(stp_setup_encode(&s, buf, STP_MSG_MAX, &len) == 0);
		FUZZ_ASSERT(stp_setup_decode(buf, len, &again) == 0);
		FUZZ_ASSERT(same_setup(&s, &again));
	}
	stp_setup_free(&s);
	stp_setup_free(&again);
	free(buf);
}

/* BLOCKS as the monitor checks it, for the batch its first field names of an image of
 * BLOCKS (from its last hash's last byte). */
static void check_blocks(const uint8_t *buf, size_t len)
{
	struct stp_fetch_blocks b, in;
	uint64_t blocks = 0;

	if (len < sizeof(in))
		return;
	memcpy(&in, buf, sizeof(in));
	blocks = in.first + in.sha[STP_FETCH_BATCH - 1][31];
	if (stp_fetch_blocks_check(buf, len, in.first, blocks, &b))
		return;
	FUZZ_ASSERT(b.count >= 1 && b.count <= STP_FETCH_BATCH);
	FUZZ_ASSERT(b.first < blocks && b.count <= blocks - b.first);
	FUZZ_ASSERT(b.bases <= 1);
}

/* STORE as the fetcher checks it, against a batch of (stop field) blocks. */
static void check_store(const uint8_t *buf, size_t len)
{
	struct stp_fetch_blocks asked = { 0 };
	struct stp_fetch_store st, in;

	if (len < sizeof(in))
		return;
	memcpy(&in, buf, sizeof(in));
	asked.first = in.first;
	asked.count = in.stop % (STP_FETCH_BATCH + 1);
	if (stp_fetch_store_check(buf, len, &asked, in.nfds % (STP_FETCH_BATCH + 1), &st))
		return;
	FUZZ_ASSERT(st.nfds <= asked.count && st.stop <= 1);
	for (unsigned k = 0; k < st.nfds; k++)
		FUZZ_ASSERT(st.which[k] < asked.count);
}

/* SANDBOX as the daemon decodes it: one of the three modes, from exactly 4 bytes. */
static void check_sandbox(const uint8_t *buf, size_t len)
{
	enum stp_sandbox_mode mode = STP_SANDBOX_OFF + 1;

	if (stp_setup_decode_sandbox(buf, len, &mode))
		return;
	FUZZ_ASSERT(len == 4);
	FUZZ_ASSERT(mode == STP_SANDBOX_ON || mode == STP_SANDBOX_LOG || mode == STP_SANDBOX_OFF);
}

/* FILTER as a daemon or a fetcher decodes it: whole instructions, within the bound,
 * copied as they came; sent back, the same datagram. */
static void check_filter(const uint8_t *buf, size_t len)
{
	struct stp_sandbox_prog prog;

	if (stp_setup_decode_filter(buf, len, &prog)) {
		FUZZ_ASSERT(!prog.n && !prog.insns);
		return;
	}
	FUZZ_ASSERT(prog.n >= 1 && prog.n <= STP_SANDBOX_PROG_MAX);
	FUZZ_ASSERT(len == prog.n * sizeof(*prog.insns));
	FUZZ_ASSERT(!memcmp(prog.insns, buf, len));
	stp_sandbox_prog_free(&prog);
}

/* The datagram as the receiving end takes it: typed, bounded, no descriptor. */
static void receive(const uint8_t *data, size_t size)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int sv[2], fds[STP_SETUP_FDS_MAX];
	unsigned nfds = 1;
	uint32_t type;
	size_t len;
	int rc;

	FUZZ_ASSERT(buf);
	FUZZ_ASSERT(!socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv));
	if (size <= STP_MSG_MAX + sizeof(type) && send(sv[0], data, size, 0) == (ssize_t)size) {
		rc = stp_msg_recv_fds(sv[1], 0, &type, buf, STP_MSG_MAX, &len, fds,
				      STP_SETUP_FDS_MAX, &nfds);
		FUZZ_ASSERT(nfds == 0);
		FUZZ_ASSERT(rc == 0 || rc == -EPROTO || rc == -EPIPE);
		FUZZ_ASSERT(rc || len + sizeof(type) == size);
		if (!rc && type == STP_MSG_SETUP)
			decode_roundtrip(buf, len);
		if (!rc && type == STP_MSG_BLOCKS)
			check_blocks(buf, len);
		if (!rc && type == STP_MSG_STORE)
			check_store(buf, len);
		if (!rc && type == STP_MSG_SANDBOX)
			check_sandbox(buf, len);
		if (!rc && type == STP_MSG_FILTER)
			check_filter(buf, len);
	}
	close(sv[0]);
	close(sv[1]);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	decode_roundtrip(data, size);
	receive(data, size);
	return 0;
}
