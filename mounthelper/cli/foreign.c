/* SPDX-License-Identifier: MIT */
#include "foreign.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "util.h"

/* The bytes read: enough for erofs's superblock magic at 1024 and tar's at 257. */
#define SNIFF_LEN 1028

struct magic {
	size_t off, len;
	const char *bytes, *what;
	int kind;
};

enum { ARCHIVE, COMPRESSED, SQUASHFS, EROFS };

static const struct magic magics[] = {
	{ 257, 5, "ustar", "a tar archive", ARCHIVE },
	{ 0, 6, "070701", "a cpio archive", ARCHIVE },
	{ 0, 6, "070702", "a cpio archive", ARCHIVE },
	{ 0, 6, "070707", "a cpio archive", ARCHIVE },
	{ 0, 4, "PK\3\4", "a zip archive", ARCHIVE },
	{ 0, 2, "\x1f\x8b", "a gzip-compressed file", COMPRESSED },
	{ 0, 4, "\x28\xb5\x2f\xfd", "a zstd-compressed file", COMPRESSED },
	{ 0, 6, "\xfd" "7zXZ\0", "an xz-compressed file", COMPRESSED },
	{ 0, 3, "BZh", "a bzip2-compressed file", COMPRESSED },
	{ 0, 4, "hsqs", "a squashfs image", SQUASHFS },
	{ 1024, 4, "\xe2\xe1\xf5\xe0", "an erofs image", EROFS }, /* 0xE0F5E1E2, LE */
};

static void advise(const struct magic *m, const char *path, char *msg, size_t len)
{
	switch (m->kind) {
	case ARCHIVE:
		snprintf(msg, len, "%s, not a stipple image; build one with mkstipple %s OUT.stp",
			 m->what, path);
		break;
	case COMPRESSED:
		snprintf(msg, len, "%s, not a stipple image; if it holds a tar, cpio or zip "
			 "archive, build one with mkstipple %s OUT.stp", m->what, path);
		break;
	case SQUASHFS:
		snprintf(msg, len, "%s, not a stipple image; mount it with mount -t squashfs, or "
			 "unsquashfs -d DIR %s and build one with mkstipple DIR OUT.stp", m->what,
			 path);
		break;
	default:
		snprintf(msg, len, "%s, not a stipple image; mount it with mount -t erofs, or "
			 "fsck.erofs --extract=DIR %s and build one with mkstipple DIR OUT.stp",
			 m->what, path);
		break;
	}
}

int stp_foreign_describe_fd(int fd, const char *path, char *msg, size_t len)
{
	uint8_t buf[SNIFF_LEN];
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return 0;
	n = pread(fd, buf, sizeof(buf), 0);
	if (n >= STP_MAGIC_LEN && !memcmp(buf, STP_MAGIC, STP_MAGIC_LEN))
		return 0; /* an image, even one whose later bytes look like another's magic */
	if (n == 0 && st.st_size == 0) {
		snprintf(msg, len, "an empty file, not a stipple image (an interrupted build or "
			 "copy?); build one with mkstipple DIR %s", path);
		return 1;
	}
	for (size_t i = 0; n > 0 && i < sizeof(magics) / sizeof(magics[0]); i++) {
		const struct magic *m = &magics[i];

		if ((size_t)n >= m->off + m->len && !memcmp(buf + m->off, m->bytes, m->len)) {
			advise(m, path, msg, len);
			return 1;
		}
	}
	return 0;
}

int stp_foreign_describe(const char *path, char *msg, size_t len)
{
	int fd = stp_open_if(path, O_RDONLY | O_NOCTTY, stp_node_is_image), r;

	if (fd < 0)
		return 0;
	r = stp_foreign_describe_fd(fd, path, msg, len);
	close(fd);
	return r;
}
