/* SPDX-License-Identifier: MIT */
/* Opening the source tree beneath directory descriptors checked against the scan. */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC)
#define FILE_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

static int root_fd = -1;
static int archive_fd = -1; /* an archive's descriptors, not owned here */
static int spool_fd = -1;
static int from_archive;
/* The last directory reached: files are read in runs from one directory. */
static const struct node *cached_dir;
static int cached_fd = -1;

int source_same(const struct node_stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino &&
	       (a->st_mode & S_IFMT) == (b->st_mode & S_IFMT) && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

int source_open_root(const char *source, struct stat *st)
{
	/* SOURCE itself may be a symlink (/lib64 on merged /usr), as tar -C follows one */
	int fd = open(source, DIR_FLAGS & ~O_NOFOLLOW);

	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
		report_error(source, "not a directory");
		return -ENOTDIR;
	}
	if (fd < 0)
		return report_errno(source, errno, "opening directory");
	if (fstat(fd, st)) {
		int err = errno;

		close(fd);
		return report_errno(source, err, "stat");
	}
	source_close();
	root_fd = fd;
	return fd;
}

/* Opens directory D beneath PARENT and checks it is the one scanned. */
static int open_dir_at(int parent, const struct node *d)
{
	int fd = openat(parent, d->name, DIR_FLAGS);
	struct stat st;

	if (fd < 0) {
		if (errno == ENOTDIR || errno == ELOOP) {
			report_error(tree_path(d), "changed during the build: no longer a "
				   "directory (a symlink is not followed)");
			return -EAGAIN;
		}
		return report_errno(tree_path(d), errno, "opening directory");
	}
	if (fstat(fd, &st)) {
		int err = errno;

		close(fd);
		return report_errno(tree_path(d), err, "stat");
	}
	if (st.st_dev != d->st.st_dev || st.st_ino != d->st.st_ino) {
		close(fd);
		return report_changed(tree_path(d));
	}
	return fd;
}

static void set_cache(const struct node *dir, int fd)
{
	if (cached_fd >= 0)
		close(cached_fd);
	cached_dir = dir;
	cached_fd = fd;
}

int source_dir_fd(const struct node *dir)
{
	const struct node **chain;
	const struct node *n;
	size_t depth = 0, i;
	int fd;

	if (root_fd < 0)
		return -EBADF;
	if (!dir->parent)
		return root_fd;
	if (dir == cached_dir)
		return cached_fd;
	/* walk down from the root or from the cached directory when it is an ancestor */
	for (n = dir; n->parent && n != cached_dir; n = n->parent)
		depth++;
	chain = malloc(depth * sizeof(*chain));
	if (!chain)
		return -ENOMEM;
	i = depth;
	for (n = dir; i > 0; n = n->parent)
		chain[--i] = n;
	fd = n == cached_dir && n->parent ? cached_fd : root_fd;
	for (i = 0; i < depth; i++) {
		int next = open_dir_at(fd, chain[i]);

		if (fd != root_fd && fd != cached_fd)
			close(fd);
		if (next < 0) {
			fd = next;
			break;
		}
		fd = next;
	}
	free(chain);
	if (fd < 0)
		return fd;
	set_cache(dir, fd);
	return fd;
}

int source_openat_file(int dirfd, const struct node *f, struct stat *st)
{
	int fd = openat(dirfd, f->name, FILE_FLAGS), err = errno;

	if (fd < 0 && err == ELOOP) {
		report_error(tree_path(f), "changed during the build: now a symbolic link, "
			   "not followed");
		return -EAGAIN;
	}
	if (fd < 0)
		return report_errno(tree_path(f), err, "opening");
	if (fstat(fd, st)) {
		err = errno;
		close(fd);
		return report_errno(tree_path(f), err, "stat");
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		report_error(tree_path(f), "changed during the build: no longer a regular "
			   "file");
		return -EAGAIN;
	}
	if (st->st_dev != f->st.st_dev || st->st_ino != f->st.st_ino) {
		close(fd);
		report_error(tree_path(f), "changed during the build: replaced by another file");
		return -EAGAIN;
	}
	/* reads must block as for any file; O_NONBLOCK only kept a FIFO's open from hanging */
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		err = errno;
		close(fd);
		return report_errno(tree_path(f), err, "opening");
	}
	return fd;
}


int source_stat(const struct node *n, struct stat *st)
{
	if (from_archive) {
		*st = (struct stat){ .st_dev = n->st.st_dev, .st_ino = n->st.st_ino,
				     .st_mode = n->st.st_mode, .st_nlink = n->st.st_nlink,
				     .st_uid = n->st.st_uid, .st_gid = n->st.st_gid,
				     .st_rdev = n->st.st_rdev, .st_size = n->st.st_size,
				     .st_mtim = n->st.st_mtim, .st_ctim = n->st.st_ctim };
		return 0;
	}
	int dirfd = n->parent ? source_dir_fd(n->parent) : root_fd;

	if (dirfd < 0)
		return dirfd;
	if (!n->parent ? fstat(dirfd, st) : fstatat(dirfd, n->name, st, AT_SYMLINK_NOFOLLOW))
		return report_errno(tree_path(n), errno, "stat");
	return 0;
}

void source_use_archive(int archive, int spool)
{
	source_close();
	archive_fd = archive;
	spool_fd = spool;
	from_archive = 1;
}

/* Opens F beneath its directory into SF; a change since the scan is -ESTALE, or when
 * RETAKE is F, taken into F. */
static int open_owned(const struct node *f, struct source_file *sf, struct node *retake)
{
	int dirfd = f->parent ? source_dir_fd(f->parent) : -EISDIR;
	struct stat now;

	sf->fd = dirfd < 0 ? dirfd : source_openat_file(dirfd, f, &now);
	if (sf->fd < 0)
		return sf->fd;
	sf->owned = 1;
	if (retake) {
		tree_set_stat(retake, &now);
		sf->size = (uint64_t)now.st_size;
	} else if (!source_same(&f->st, &now)) {
		source_file_close(sf);
		return -ESTALE;
	}
	return 0;
}

int source_file_open(const struct node *f, struct source_file *sf)
{
	*sf = (struct source_file){ .node = f, .fd = archive_fd, .size = (uint64_t)f->st.st_size };
	if (from_archive) {
		sf->fd = f->in_spool ? spool_fd : archive_fd;
		sf->base = f->data_off;
		return sf->fd < 0 ? -EBADF : 0;
	}
	return open_owned(f, sf, NULL);
}

int source_file_reopen(struct node *f, struct source_file *sf)
{
	*sf = (struct source_file){ .node = f, .fd = archive_fd, .size = (uint64_t)f->st.st_size };
	if (from_archive)
		return source_file_open(f, sf);
	return open_owned(f, sf, f);
}

ssize_t source_file_pread(const struct source_file *sf, void *buf, size_t len, uint64_t off)
{
	if (!sf->owned) {
		if (off >= sf->size)
			return 0;
		if (len > sf->size - off)
			len = (size_t)(sf->size - off);
	}
	return pread(sf->fd, buf, len, (off_t)(sf->base + off));
}

uint64_t source_file_data(const struct source_file *sf, uint64_t off, uint64_t end)
{
	off_t at;

	if (off >= end)
		return end;
	at = lseek(sf->fd, (off_t)(sf->base + off), SEEK_DATA);
	if (at < 0)
		return errno == ENXIO ? end : off; /* ENXIO: no data up to the descriptor's end */
	if ((uint64_t)at <= sf->base + off)
		return off;
	return (uint64_t)at - sf->base < end ? (uint64_t)at - sf->base : end;
}

int source_file_unchanged(const struct source_file *sf)
{
	struct stat now;
	char probe;

	if (!sf->owned)
		return 1;
	return !fstat(sf->fd, &now) && source_same(&sf->node->st, &now) &&
	       pread(sf->fd, &probe, 1, sf->node->st.st_size) <= 0;
}

void source_file_close(struct source_file *sf)
{
	if (sf->owned && sf->fd >= 0)
		close(sf->fd);
	sf->fd = -1;
}

void source_close(void)
{
	archive_fd = spool_fd = -1;
	from_archive = 0;
	set_cache(NULL, -1);
	if (root_fd >= 0)
		close(root_fd);
	root_fd = -1;
}
