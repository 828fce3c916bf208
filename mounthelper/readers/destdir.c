/* SPDX-License-Identifier: MIT */
/* The directory extract fills (destdir.h). */
#include "destdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "trustpath.h"
#include "util.h"

/* DEST opened as a directory, made 0700 when absent (*MADE), its links followed only
 * when trusted (trustpath.h). Returns the descriptor or -1 (reported). */
static int open_dest_dir(const struct stp_cli *cli, const char *dest, int *made)
{
	struct stp_trustpath w;
	int fd = stp_trustpath_open_dir(&w, dest, 0700, made);

	if (fd >= 0)
		return fd;
	if (w.refused)
		stp_cli_error(cli, "%s: %s", dest, stp_trustpath_why(&w, dest));
	else
		stp_cli_error(cli, "cannot open %s: %s", dest, stp_strerror(fd));
	return -1;
}

int stp_destdir_open(const struct stp_cli *cli, const char *dest, int *made)
{
	struct dirent *d = NULL;
	DIR *dir;
	int fd = open_dest_dir(cli, dest, made);

	if (fd < 0)
		return -1;
	dir = fdopendir(dup(fd));
	while (dir && (d = readdir(dir)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			break;
	if (!dir || d) {
		stp_cli_error(cli, "%s: %s", dest,
			      dir ? "exists and is not empty" : stp_strerror(-errno));
		close(fd);
		fd = -1;
	}
	if (dir)
		closedir(dir);
	return fd;
}

int stp_destdir_probe_owner(int dirfd, uid_t *owner)
{
	unsigned char r[8];
	char name[40];
	struct stat st;
	int fd, err = 0;

	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	snprintf(name, sizeof(name), ".stipple-probe-%02x%02x%02x%02x%02x%02x%02x%02x",
		 r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st))
		err = -errno;
	else
		*owner = st.st_uid;
	unlinkat(dirfd, name, 0);
	close(fd);
	return err;
}
