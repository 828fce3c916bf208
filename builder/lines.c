/* SPDX-License-Identifier: MIT */
/* The list-file reader (lines.h). */
#include "lines.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "report.h"
#include "util.h"

/* Reads one record of F into *REC (grown as needed, up to LINES_RECORD_MAX bytes):
 * its length, -1 at the end of F, -E2BIG past the bound (nothing more is read). */
static ssize_t get_record(char **rec, size_t *cap, int delim, FILE *f)
{
	size_t len = 0;
	int c = EOF;

	while ((c = getc_unlocked(f)) != EOF) {
		if (len == LINES_RECORD_MAX)
			return -E2BIG;
		if (len + 2 > *cap && stp_room_for_n(rec, cap, len, 2, LINES_RECORD_MAX + 1))
			return -ENOMEM;
		(*rec)[len++] = (char)c;
		if (c == delim)
			break;
	}
	if (!len)
		return -1;
	(*rec)[len] = 0;
	return (ssize_t)len;
}

int lines_each(FILE *f, const char *name, int delim, lines_fn each, void *arg)
{
	char *rec = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned number = 0;
	int rc = 0;

	while (!rc && (len = get_record(&rec, &cap, delim, f)) >= 0) {
		if (len && rec[len - 1] == (char)delim)
			rec[--len] = 0;
		rc = each(arg, rec, (size_t)len, ++number);
	}
	if (!rc && len == -E2BIG) {
		report_error(name, "record %u is longer than %u MiB: not a list file", number + 1,
			     LINES_RECORD_MAX >> 20);
		rc = -E2BIG;
	}
	if (!rc && len == -ENOMEM)
		rc = -ENOMEM;
	if (!rc && ferror(f))
		rc = -EIO;
	free(rec);
	return rc;
}

/* Whether S is PREFIX then a descriptor's number, and nothing more: "/dev/fd/../x"
 * names any file. */
static bool fd_name(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	return !strncmp(s, prefix, n) && s[n] && strspn(s + n, "0123456789") == strlen(s + n);
}

/* A regular file, or a pipe named by a descriptor of ours: only our caller can have
 * made it. */
static int list_node(const char *path, const struct stat *st)
{
	return S_ISREG(st->st_mode) ||
	       (S_ISFIFO(st->st_mode) && (fd_name(path, "/dev/fd/") ||
					  fd_name(path, "/proc/self/fd/") ||
					  !strcmp(path, "/dev/stdin")));
}

FILE *lines_open_regular(const char *path)
{
	/* opened without blocking so that a FIFO cannot hang us; reads then wait as usual */
	int fd = stp_open_if(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, list_node), err;
	FILE *f;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) || !(f = fdopen(fd, "re"))) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	return f;
}

const char *lines_strerror(int err)
{
	return err == EINVAL ? "not a regular file (a pipe is taken only as /dev/fd/N)"
			     : strerror(err);
}
