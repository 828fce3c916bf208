/* SPDX-License-Identifier: MIT */
/* The file source: pread on a descriptor. */
#include "imgsrc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

/* stp_pread_full's -EIO is both the end of the file and a device's error: told apart
 * here, since only the first means a damaged image. */
static int file_pread(struct stp_imgsrc *src, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(src->fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return STP_IMGSRC_END;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static void file_close(struct stp_imgsrc *src)
{
	if (src->fd >= 0)
		close(src->fd);
	free(src->name);
	free(src);
}

/* A regular file tells its size; a block device's st_size is 0. */
static int file_size(int fd, const char *name, uint64_t *size)
{
	struct stat st;
	int err = stp_fd_stat(fd, &st); /* confined: the daemon opens its image then */

	if (err)
		return err;
	if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
		stp_log(STP_LOG_ERR, "%s: not a regular file", name);
		return -EINVAL;
	}
	*size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : STP_IMGSRC_SIZE_UNKNOWN;
	return 0;
}

int stp_imgsrc_borrow_fd(struct stp_imgsrc *src, int fd, const char *name)
{
	*src = (struct stp_imgsrc){ .pread = file_pread, .name = (char *)name, .fd = fd };
	return file_size(fd, name, &src->size);
}

int stp_imgsrc_open_fd(int fd, const char *name, struct stp_imgsrc **out)
{
	struct stp_imgsrc *src = calloc(1, sizeof(*src));
	int rc = src ? 0 : -ENOMEM;

	if (!rc && !(src->name = strdup(name)))
		rc = -ENOMEM;
	if (!rc)
		rc = file_size(fd, name, &src->size);
	if (rc) {
		if (src)
			free(src->name);
		free(src);
		close(fd);
		return rc;
	}
	src->pread = file_pread;
	src->close = file_close;
	src->fd = fd;
	*out = src;
	return 0;
}

void stp_imgsrc_close(struct stp_imgsrc *src)
{
	if (src && src->close)
		src->close(src);
}

int stp_imgsrc_is_url(const char *name)
{
	return !strncasecmp(name, "http://", 7) || !strncasecmp(name, "https://", 8);
}
