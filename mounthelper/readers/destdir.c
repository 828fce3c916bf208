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
#include "util.h"

/* DIR as the symlink LINK in PARENT: followed only when root, this user or the owner of
 * PARENT owns it, as the kernel's protected_symlinks rule has it for sticky directories
 * (anyone else could have put it there); its target is then resolved from PARENT.
 * Returns the open directory or -1 (reported). */
static int open_dest_link(const struct stp_cli *cli, const char *dest, int parent,
			  const char *link)
{
	struct stat ls, ps;
	char target[PATH_MAX];
	ssize_t len = -1;
	int lfd = openat(parent, link, O_PATH | O_NOFOLLOW | O_CLOEXEC), fd = -1;

	if (lfd >= 0 && !fstat(lfd, &ls) && !fstat(parent, &ps) && S_ISLNK(ls.st_mode)) {
		if (ls.st_uid && ls.st_uid != geteuid() && ls.st_uid != ps.st_uid) {
			stp_cli_error(cli, "%s: a symlink owned by uid %u, who is neither "
				      "root, you nor the owner of the directory holding it: not "
				      "followed", dest, (unsigned)ls.st_uid);
			close(lfd);
			return -1;
		}
		len = readlinkat(lfd, "", target, sizeof(target) - 1);
	}
	if (len >= 0) {
		target[len] = '\0';
		fd = openat(parent, target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		stp_cli_error(cli, "cannot open %s: %s", dest,
			      stp_strerror(len >= 0 || lfd < 0 ? -errno : -ENOTDIR));
	if (lfd >= 0)
		close(lfd);
	return fd;
}

/* DEST opened as a directory, made 0700 when absent; its last name is not followed
 * unless open_dest_link allows it. Returns the descriptor or -1 (reported). */
static int open_dest_dir(const struct stp_cli *cli, const char *dest)
{
	char *copy = strdup(dest), *slash, *base;
	const char *holder;
	int parent, fd = -1;
	size_t len;

	if (!copy) {
		stp_cli_error(cli, "%s: %s", dest, stp_strerror(-ENOMEM));
		return -1;
	}
	for (len = strlen(copy); len > 1 && copy[len - 1] == '/'; )
		copy[--len] = '\0';
	slash = strrchr(copy, '/');
	base = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	holder = !slash ? "." : *copy ? copy : "/";
	if (!*base) /* DEST is "/" */
		base = ".";
	parent = open(holder, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		stp_cli_error(cli, "cannot open the directory holding %s: %s", dest,
			      stp_strerror(-errno));
	else if (mkdirat(parent, base, 0700) && errno != EEXIST)
		stp_cli_error(cli, "cannot create %s: %s", dest, stp_strerror(-errno));
	else if ((fd = openat(parent, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 &&
		 (errno == ELOOP || errno == ENOTDIR))
		fd = open_dest_link(cli, dest, parent, base);
	else if (fd < 0)
		stp_cli_error(cli, "cannot open %s: %s", dest, stp_strerror(-errno));
	if (parent >= 0)
		close(parent);
	free(copy);
	return fd;
}

int stp_destdir_open(const struct stp_cli *cli, const char *dest)
{
	struct dirent *d = NULL;
	DIR *dir;
	int fd = open_dest_dir(cli, dest);

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
