/* SPDX-License-Identifier: MIT */
#include "archive_open.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* How far from its end a zip's end record may begin: the record (22 bytes) and the
 * longest comment it may carry. */
#define ZIP_END_REACH (22u + 65535u)

void archive_input_init(struct archive_input *in, int fd, bool seekable)
{
	*in = (struct archive_input){ .fd = fd, .seekable = seekable };
}

void archive_input_free(struct archive_input *in)
{
	free(in->block);
	in->block = NULL;
}

/* A local header, or the end record of an empty zip. */
static bool zip_magic(const uint8_t *m, size_t len)
{
	return len >= 4 && m[0] == 'P' && m[1] == 'K' &&
	       ((m[2] == 3 && m[3] == 4) || (m[2] == 5 && m[3] == 6));
}

static ssize_t read_full(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = read(fd, buf + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return got ? (ssize_t)got : n;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Whether the last ZIP_END_REACH bytes of the file hold an end record's signature. */
static bool ends_as_zip(int fd)
{
	static const uint8_t sig[4] = { 'P', 'K', 5, 6 };
	struct stat st;
	uint8_t *tail;
	size_t len;
	ssize_t n;
	bool found;

	if (fstat(fd, &st) || st.st_size < 22)
		return false;
	len = st.st_size < ZIP_END_REACH ? (size_t)st.st_size : ZIP_END_REACH;
	tail = malloc(len);
	n = tail ? pread(fd, tail, len, st.st_size - (off_t)len) : -1;
	found = n == (ssize_t)len && memmem(tail, len, sig, sizeof(sig));
	free(tail);
	return found;
}

static struct archive *new_reader(void)
{
	struct archive *a = archive_read_new();

	if (!a)
		return NULL;
	archive_read_support_filter_gzip(a);
	archive_read_support_filter_bzip2(a);
	archive_read_support_filter_xz(a);
	archive_read_support_filter_lzma(a);
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	archive_read_support_format_gnutar(a);
	archive_read_support_format_cpio(a);
	archive_read_support_format_zip(a);
	return a;
}

/* Whether libarchive, bidding with every format it is given, reads the file as a zip:
 * a tar whose last member is a zip ends as one too. The file is read again from its
 * start afterwards. */
static bool bids_as_zip(int fd)
{
	struct archive *a = new_reader();
	struct archive_entry *e;
	bool zip = false;

	if (a && archive_read_open_fd(a, fd, ARCHIVE_OPEN_BLOCK) == ARCHIVE_OK) {
		int got = archive_read_next_header(a, &e);

		zip = (got == ARCHIVE_OK || got == ARCHIVE_WARN) &&
		      (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP;
	}
	if (a)
		archive_read_free(a);
	return lseek(fd, 0, SEEK_SET) == 0 && zip;
}

bool archive_input_is_zip(struct archive_input *in)
{
	uint8_t m[4];

	if (in->seekable) {
		if (pread(in->fd, m, sizeof(m), 0) == (ssize_t)sizeof(m) && zip_magic(m, sizeof(m)))
			return true;
		return ends_as_zip(in->fd) && bids_as_zip(in->fd);
	}
	ssize_t n = read_full(in->fd, in->head, sizeof(in->head));

	in->head_len = n > 0 ? (size_t)n : 0;
	return zip_magic(in->head, in->head_len);
}

/* libarchive's read callback for a stream: the bytes read to tell its format, then the
 * rest. */
static la_ssize_t read_stream(struct archive *a, void *arg, const void **buf)
{
	struct archive_input *in = arg;
	ssize_t n;

	if (in->head_given < in->head_len) {
		*buf = in->head + in->head_given;
		n = (ssize_t)(in->head_len - in->head_given);
		in->head_given = in->head_len;
		return n;
	}
	do
		n = read(in->fd, in->block, ARCHIVE_OPEN_BLOCK);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		archive_set_error(a, errno, "read: %s", strerror(errno));
	*buf = in->block;
	return n;
}

int archive_input_open(struct archive_input *in, struct archive **out)
{
	struct archive *a = new_reader();
	int got;

	*out = a;
	if (!a)
		return -ENOMEM;
	if (in->seekable || !in->head_len) {
		got = archive_read_open_fd(a, in->fd, ARCHIVE_OPEN_BLOCK);
	} else {
		in->block = malloc(ARCHIVE_OPEN_BLOCK);
		if (!in->block)
			return -ENOMEM;
		got = archive_read_open(a, in, NULL, read_stream, NULL);
	}
	return got == ARCHIVE_OK ? 0 : -EINVAL;
}
