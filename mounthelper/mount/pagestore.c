/* SPDX-License-Identifier: MIT */
/* Stores into the kernel's page cache, with the one retry rule. */
#include "pagestore.h"

#include <errno.h>
#include <time.h>

#include "cache.h"
#include "fuseapi.h"
#include "fuseino.h"
#include "inodes.h"
#include "util.h"

void stp_pagestore_init(struct stp_pagestore *ps, struct fuse_session *se,
			const struct stp_inodes *inodes)
{
	*ps = (struct stp_pagestore){ .se = se, .inodes = inodes };
}

void stp_pagestore_span(uint64_t file_off, uint64_t len, uint64_t file_size, uint64_t *a,
			uint64_t *b)
{
	uint64_t end = file_off + len;

	*a = (file_off + STP_PAGESTORE_PAGE - 1) & ~(uint64_t)(STP_PAGESTORE_PAGE - 1);
	*b = end == file_size ? end : end & ~(uint64_t)(STP_PAGESTORE_PAGE - 1);
	if (*b < *a)
		*b = *a;
}

static void count(uint64_t *field, uint64_t n)
{
	__atomic_add_fetch(field, n, __ATOMIC_RELAXED);
}

/* One message: N bytes at OFF, tried up to TRIES times by the rule above. */
static int store(struct stp_pagestore *ps, uint32_t ino, uint64_t off, const uint8_t *data,
		 size_t n, unsigned tries)
{
	struct timespec nap = { 0, STP_PAGESTORE_NAP_MS * 1000000L };
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(n);
	uint64_t t0 = stp_now_ns();
	int rc;

	bv.buf[0].mem = (void *)data;
	rc = fuse_lowlevel_notify_store(ps->se, stp_fuseino_of(ino), (off_t)off, &bv, 0);
	for (unsigned i = 1; rc == -ENOENT && i < tries && stp_inodes_known(ps->inodes, ino);
	     i++) {
		count(&ps->st.retries, 1);
		nanosleep(&nap, NULL);
		t0 = stp_now_ns();
		rc = fuse_lowlevel_notify_store(ps->se, stp_fuseino_of(ino), (off_t)off, &bv, 0);
	}
	count(&ps->st.ns, stp_now_ns() - t0);
	return rc;
}

/* Pushes [A, B) a message at a time, each tried up to TRIES times; AGAIN (when not NULL)
 * is set when the last store met an inode the kernel does not hold yet. */
static uint64_t push(struct stp_pagestore *ps, uint32_t ino, uint64_t a, uint64_t b,
		     const struct stp_block_ref *ref, size_t in, unsigned tries, int *again)
{
	uint64_t done = 0;

	if (!ps->se)
		return 0;
	while (a + done < b) {
		size_t n = b - a - done < STP_PAGESTORE_CHUNK ? (size_t)(b - a - done)
							      : STP_PAGESTORE_CHUNK;
		const uint8_t *data = stp_cache_bytes(ref, in + (size_t)done, n, &n);
		int rc = store(ps, ino, a + done, data, n, tries);

		if (rc && again && rc == -ENOENT && stp_inodes_known(ps->inodes, ino)) {
			*again = 1;
			count(&ps->st.retries, 1);
			break;
		}
		if (rc) { /* a refusal the caller retries is counted when it gives up */
			if (rc != -ENOENT || !stp_inodes_known(ps->inodes, ino))
				count(&ps->st.failures, 1);
			break;
		}
		done += n;
		count(&ps->st.stored_bytes, n);
	}
	return done;
}

uint64_t stp_pagestore_push(struct stp_pagestore *ps, uint32_t ino, uint64_t a, uint64_t b,
			    const struct stp_block_ref *ref, size_t in)
{
	return push(ps, ino, a, b, ref, in, STP_PAGESTORE_TRIES, NULL);
}

uint64_t stp_pagestore_push_once(struct stp_pagestore *ps, uint32_t ino, uint64_t a,
				 uint64_t b, const struct stp_block_ref *ref, size_t in,
				 int *again)
{
	*again = 0;
	return push(ps, ino, a, b, ref, in, 1, again);
}

void stp_pagestore_give_up(struct stp_pagestore *ps)
{
	count(&ps->st.failures, 1);
}

void stp_pagestore_stats(const struct stp_pagestore *ps, struct stp_pagestore_stats *out)
{
	out->stored_bytes = __atomic_load_n(&ps->st.stored_bytes, __ATOMIC_RELAXED);
	out->retries = __atomic_load_n(&ps->st.retries, __ATOMIC_RELAXED);
	out->failures = __atomic_load_n(&ps->st.failures, __ATOMIC_RELAXED);
	out->ns = __atomic_load_n(&ps->st.ns, __ATOMIC_RELAXED);
}
