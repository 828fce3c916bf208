/* SPDX-License-Identifier: MIT */
/* Checksums recomputed over a mutated image, and the images behind the targets (fuzz.h). */
#include "fuzz.h"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "format.h"
#include "log.h"

int fuzz_reseal(uint8_t *buf, size_t size)
{
	struct stp_superblock sb;
	uint64_t bad;

	if (size < STP_SB_SIZE)
		return 0;
	stp_put64(buf + STP_SB_SIZE - 8, stp_checksum(buf, STP_SB_SIZE - 8));
	if (stp_sb_decode(buf, &sb, &bad))
		return 0;
	if (sb.meta_offset <= size && sb.meta_stored_size <= size - sb.meta_offset)
		sb.meta_checksum = stp_checksum(buf + sb.meta_offset, sb.meta_stored_size);
	if (sb.dict_offset <= size && sb.dict_size <= size - sb.dict_offset)
		sb.dict_checksum = stp_checksum(buf + sb.dict_offset, sb.dict_size);
	stp_sb_encode(&sb, buf);
	return 1;
}

int fuzz_image_fd(const uint8_t *data, size_t size)
{
	int fd = memfd_create("stipple-fuzz", MFD_CLOEXEC);

	if (fd < 0)
		abort();
	for (size_t done = 0; done < size;) {
		ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);

		if (n <= 0)
			abort();
		done += (size_t)n;
	}
	return fd;
}

void fuzz_as_given_and_resealed(const uint8_t *data, size_t size, fuzz_image_fn fn)
{
	uint8_t *copy;

	stp_log_set_handler(NULL);
	fn(data, size);
	copy = malloc(size ? size : 1);
	if (!copy)
		return;
	memcpy(copy, data, size);
	if (fuzz_reseal(copy, size) && memcmp(copy, data, size))
		fn(copy, size);
	free(copy);
}
