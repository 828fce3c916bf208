/* SPDX-License-Identifier: MIT */
/*
 * Telling a zip before libarchive reads it (archive_open.h). libarchive caches the
 * locale's charset at its first name conversion, so the locale must be right before the
 * first header: the format has to be known from the input itself.
 */
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

int archive_input_init(struct archive_input *in, int fd)
{
	struct stat st;

	*in = (struct archive_input){ .fd = fd };
	if (fstat(fd, &st))
		return -errno;
	in->can_seek = S_ISREG(st.st_mode);
	if (in->can_seek && (in->start = lseek(fd, 0, SEEK_CUR)) < 0)
		return -errno;
	return 0;
}

void archive_input_free(struct archive_input *in)
{
	free(in->block);
	in->block = NULL;
}

/* The signatures libarchive's streaming zip reader bids on (3.6): a local header, the
 * central directory, the end records, a data descriptor, a split archive's marker. */
static bool zip_magic(const uint8_t *m, size_t len)
{
	static const char pairs[][2] = { { 1, 2 }, { 3, 4 }, { 5, 6 }, { 6, 6 }, { 7, 8 },
					 { '0', '0' } };

	if (len < 4 || m[0] != 'P' || m[1] != 'K')
		return false;
	for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
		if (m[2] == pairs[i][0] && m[3] == pairs[i][1])
			return true;
	return false;
}

#define TAR_SUM_AT 148
#define TAR_SUM_LEN 8

/* Whether H is a tar header whose checksum holds, as libarchive's tar reader checks it:
 * the field only spaces, NULs and octal digits, its value the sum of the header's bytes
 * (the field counted as spaces) taken unsigned or, as some old tars wrote it, signed. */
static bool tar_header(const uint8_t *h, size_t len)
{
	long usum = 0, ssum = 0, want = 0;
	size_t i;

	if (len < ARCHIVE_OPEN_HEAD)
		return false;
	for (i = TAR_SUM_AT; i < TAR_SUM_AT + TAR_SUM_LEN; i++)
		if (h[i] != ' ' && h[i] && (h[i] < '0' || h[i] > '7'))
			return false;
	for (i = TAR_SUM_AT; i < TAR_SUM_AT + TAR_SUM_LEN && h[i] == ' '; i++)
		;
	for (; i < TAR_SUM_AT + TAR_SUM_LEN && h[i] >= '0' && h[i] <= '7'; i++)
		want = want * 8 + (h[i] - '0');
	for (i = 0; i < ARCHIVE_OPEN_HEAD; i++) {
		bool field = i >= TAR_SUM_AT && i < TAR_SUM_AT + TAR_SUM_LEN;

		usum += field ? ' ' : h[i];
		ssum += field ? ' ' : (int8_t)h[i];
	}
	return want == usum || want == ssum;
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

/* Whether the last ZIP_END_REACH bytes of the input hold an end record's signature. */
static bool ends_as_zip(const struct archive_input *in)
{
	static const uint8_t sig[4] = { 'P', 'K', 5, 6 };
	struct stat st;
	uint8_t *tail;
	off_t size;
	size_t len;
	ssize_t n;
	bool found;

	if (fstat(in->fd, &st) || st.st_size - in->start < 22)
		return false;
	size = st.st_size - in->start;
	len = size < ZIP_END_REACH ? (size_t)size : ZIP_END_REACH;
	tail = malloc(len);
	n = tail ? pread(in->fd, tail, len, st.st_size - (off_t)len) : -1;
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

/* Whether libarchive, bidding with every format, reads the input as a zip. The input is
 * read again from its start afterwards. */
static bool bids_as_zip(const struct archive_input *in)
{
	struct archive *a = new_reader();
	struct archive_entry *e;
	bool zip = false;

	if (a && archive_read_open_fd(a, in->fd, ARCHIVE_OPEN_BLOCK) == ARCHIVE_OK) {
		int got = archive_read_next_header(a, &e);

		zip = (got == ARCHIVE_OK || got == ARCHIVE_WARN) &&
		      (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP;
	}
	if (a)
		archive_read_free(a);
	return lseek(in->fd, in->start, SEEK_SET) == in->start && zip;
}

/* A zip's signature that is not a tar header: no other format libarchive is given here
 * begins as a zip does, and only a tar's first bytes are a name, which may be anything. */
static bool begins_as_zip(const uint8_t *head, size_t len)
{
	return zip_magic(head, len) && !tar_header(head, len);
}

/* A file that begins as a zip is one (its first bytes tell, as a stream's do); one that
 * only ends as one is a zip behind a program, or a tar whose last member is a zip, which
 * only libarchive's bid tells apart. */
static bool file_is_zip(const struct archive_input *in)
{
	uint8_t head[ARCHIVE_OPEN_HEAD];
	ssize_t n = pread(in->fd, head, sizeof(head), in->start);

	if (n > 0 && zip_magic(head, (size_t)n))
		return begins_as_zip(head, (size_t)n);
	return ends_as_zip(in) && bids_as_zip(in);
}

static bool stream_is_zip(struct archive_input *in)
{
	ssize_t n = read_full(in->fd, in->head, sizeof(in->head));

	in->head_len = n > 0 ? (size_t)n : 0;
	return begins_as_zip(in->head, in->head_len);
}

bool archive_input_is_zip(struct archive_input *in)
{
	return in->can_seek ? file_is_zip(in) : stream_is_zip(in);
}

/* libarchive's read callback for a stream: the bytes read to tell its format, then the
 * rest. A block handed out stays valid until the next call, as libarchive asks. */
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
	if (in->can_seek || !in->head_len) {
		got = archive_read_open_fd(a, in->fd, ARCHIVE_OPEN_BLOCK);
	} else {
		in->block = malloc(ARCHIVE_OPEN_BLOCK);
		if (!in->block)
			return -ENOMEM;
		got = archive_read_open(a, in, NULL, read_stream, NULL);
	}
	return got == ARCHIVE_OK ? 0 : -EINVAL;
}
