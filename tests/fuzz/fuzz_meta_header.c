/* SPDX-License-Identifier: MIT */
/* Fuzz target: the metadata header decoder, the input standing for the whole metadata. */
#include <errno.h>
#include <string.h>

#include "format.h"
#include "fuzz.h"
#include "log.h"

/* The table of COUNT records of SIZE bytes at OFF ends inside LEN bytes. */
static int inside(uint64_t off, uint64_t count, uint64_t size, size_t len)
{
	return off >= STP_META_HDR_SIZE && off <= len && count <= (len - off) / size;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stp_meta_header h, h2;
	uint8_t again[STP_META_HDR_SIZE];
	int rc;

	stp_log_set_handler(NULL);
	memset(&h, 0, sizeof(h)); /* padding too: the two are compared with memcmp */
	memset(&h2, 0, sizeof(h2));
	rc = stp_meta_header_decode(data, size, &h);
	FUZZ_ASSERT(rc == 0 || rc == -EUCLEAN);
	if (rc)
		return 0;
	FUZZ_ASSERT(inside(h.inode_off, h.inode_count, STP_INODE_SIZE, size));
	FUZZ_ASSERT(inside(h.dirent_off, h.dirent_count, STP_DIRENT_SIZE, size));
	FUZZ_ASSERT(inside(h.extent_off, h.extent_count, STP_EXTENT_SIZE, size));
	FUZZ_ASSERT(inside(h.xattr_off, h.xattr_count, STP_XATTR_SIZE, size));
	FUZZ_ASSERT(inside(h.block_off, h.block_count, STP_BLOCKENT_SIZE, size));
	FUZZ_ASSERT(inside(h.strings_off, h.strings_size, 1, size));
	/* no lookup table (both 0), or one of at most STP_LOOKUP_MAX records inside */
	FUZZ_ASSERT((!h.lookup_count && !h.lookup_off) ||
		    (h.lookup_count <= STP_LOOKUP_MAX &&
		     inside(h.lookup_off, h.lookup_count, STP_LOOKUP_SIZE, size)));
	stp_meta_header_encode(&h, again);
	FUZZ_ASSERT(stp_meta_header_decode(again, size, &h2) == 0);
	FUZZ_ASSERT(!memcmp(&h, &h2, sizeof(h)));
	return 0;
}
