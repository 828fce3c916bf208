/* SPDX-License-Identifier: MIT */
/* The disk cache's folder (cachedir.h): what the monitor does in it, and in which order;
 * each call made there with its privilege is monitor.c's. */
#include "cachedir.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "monitor.h"
#include "util.h"

#define SECRET "secret"
#define FILES_MAX 4096
#define PAGE 4096u

/* Makes DIR's missing parents, as mkdir -p, private to their owner (as the XDG base
 * directories ask). */
static int make_dirs(const char *dir)
{
	char *p = strdup(dir);
	int err = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; !err; s++) {
		bool last = !*s;

		if (*s != '/' && !last)
			continue;
		if (last)
			break; /* made by stp_cachedir_open_sub */
		*s = '\0';
		err = stp_monitor_cache_mkdir(AT_FDCWD, p);
		*s = '/';
	}
	free(p);
	return err;
}

struct entry {
	char name[80];
	int64_t mtime;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Whether NAME is one stp_diskcache_key makes: 64 lowercase hex digits and STP_DISKCACHE_SUFFIX. The
 * directory may be one the user keeps other files in (~/.cache): nothing else goes. */
static bool is_cache_name(const char *name)
{
	for (int i = 0; i < 64; i++)
		if (!isdigit((unsigned char)name[i]) && (name[i] < 'a' || name[i] > 'f'))
			return false;
	return !strcmp(name + 64, STP_DISKCACHE_SUFFIX);
}

/* Removes DIRFD's least recently used cache files (not KEEP, none in use: an exclusive
 * lock must be had at once) until the rest holds at most LIMIT bytes. */
static void evict_files(int dirfd, const char *keep, uint64_t limit)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct entry *e = calloc(FILES_MAX, sizeof(*e));
	struct dirent *de;
	uint64_t total = 0;
	size_t n = 0;

	while (d && e && n < FILES_MAX && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		struct stat st;

		if (!is_cache_name(de->d_name) || !strcmp(de->d_name, keep) ||
		    fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		memcpy(e[n].name, de->d_name, len + 1);
		e[n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		e[n].bytes = (uint64_t)st.st_blocks * 512;
		total += e[n++].bytes;
	}
	qsort(e, n, sizeof(*e), by_age);
	for (size_t i = 0; i < n && total > limit; i++)
		if (!stp_monitor_cache_remove_unused(dirfd, e[i].name))
			total -= e[i].bytes;
	free(e);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
}

int stp_cachedir_open_sub(int at, const char *name)
{
	int err = stp_monitor_cache_mkdir(at, name);
	int fd = err ? err : stp_monitor_cache_open_dir(at, name);
	struct stat st;

	if (fd < 0)
		return fd == -ELOOP ? -ENOTDIR : fd;
	err = fstat(fd, &st) ? -errno : st.st_uid != geteuid() || (st.st_mode & 022) ? -EPERM : 0;
	if (err)
		close(fd);
	return err ? err : fd;
}

/* The directory, when it is one that only its owner, the mounting user, may change. */
static int open_dir(const char *dir, int *out)
{
	int err = make_dirs(dir);
	int fd = err ? err : stp_cachedir_open_sub(AT_FDCWD, dir);

	*out = fd < 0 ? -1 : fd;
	return fd < 0 ? fd : 0;
}

/* Whether FD is a file of ours that no one else reaches: regular, owned by the mounting
 * user, mode 0600 (as made), one link (not also a name elsewhere), SIZE bytes (0: any).
 * Its bytes into *LEN (LEN may be NULL). */
static bool private_file(int fd, uint64_t size, uint64_t *len)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 07777) != 0600 || st.st_nlink != 1 ||
	    (size && (uint64_t)st.st_size != size))
		return false;
	if (len)
		*len = (uint64_t)st.st_size;
	return true;
}

/* NAME at DIRFD, opened with FLAGS when it is private_file (its bytes into *LEN), else
 * removed and, with O_CREAT in FLAGS, made anew (O_EXCL: never someone else's; *LEN 0):
 * without, -ENOENT. */
static int open_private(int dirfd, const char *name, int flags, uint64_t size, bool *made,
			uint64_t *len)
{
	int fd = stp_monitor_cache_open(dirfd, name, flags & ~O_CREAT), err;

	*made = false;
	if (fd >= 0 && private_file(fd, size, len))
		return fd;
	if (fd != -ENOENT) {
		if (fd >= 0)
			close(fd);
		err = stp_monitor_cache_remove(dirfd, name);
		if (err && err != -ENOENT)
			return err;
	}
	if (!(flags & O_CREAT))
		return -ENOENT;
	fd = stp_monitor_cache_open(dirfd, name, flags);
	if (fd < 0)
		return fd;
	*made = true;
	if (len)
		*len = 0;
	return fd;
}

/* The directory's secret, made on first use; the directory's lock is held. */
static int read_secret(int dirfd, uint8_t secret[32])
{
	bool made;
	int fd = open_private(dirfd, SECRET, O_RDWR | O_CREAT, 32, &made, NULL), err;

	if (fd < 0)
		return fd;
	if (made)
		err = getrandom(secret, 32, 0) != 32 ? -EIO : stp_pwrite_full(fd, secret, 32, 0);
	else
		err = stp_pread_full(fd, secret, 32, 0);
	if (made && (err || fsync(fd))) {
		err = err ? err : -errno;
		stp_monitor_cache_remove(dirfd, SECRET);
	}
	close(fd);
	return err;
}

/* The image's file, sized for its bytes and its tags; the directory's lock is held. */
static int open_cache_file(int dirfd, const char *name, const struct stp_diskcache_file *f,
			   int *out)
{
	uint64_t size = stp_diskcache_file_size(f);
	bool made;
	struct stat st;
	int fd = open_private(dirfd, name, O_RDWR | O_CREAT, 0, &made, NULL), err = 0;

	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_SH) || fstat(fd, &st))
		err = -errno;
	if (!err && (uint64_t)st.st_size != size && ftruncate(fd, (off_t)size))
		err = -errno;
	if (!err)
		stp_monitor_cache_touch(fd); /* the directory's LRU order */
	if (err)
		close(fd);
	*out = err ? -1 : fd;
	return err;
}

/* Where the tags begin, and room for one per range the image can ask the cache for: the
 * metadata, the dictionary, each metadata page and each block, the blocks bounded by
 * one per 32 bytes of the image (more, claimed by a forged table, are not cached). */
static void size_tags(const struct stp_superblock *sb, struct stp_diskcache_file *f)
{
	uint64_t blocks = sb->block_count < sb->image_size / 32 ? sb->block_count :
			  sb->image_size / 32;

	f->tags_at = (sb->image_size + PAGE - 1) / PAGE * PAGE;
	f->slots = 2 + sb->meta_stored_size / 24 + blocks;
}

static const char *dir_error(int err)
{
	return err == -EPERM ? "not owned by this user, or writable by others (not used)" :
	       err == -ENOTDIR ? "not a directory, or a symbolic link (not used)" :
	       stp_strerror(err);
}

int stp_cachedir_open_file(const char *dir, const struct stp_diskcache_id *id, uint64_t limit,
			   const char *prog, struct stp_diskcache_file *out)
{
	char name[72];
	uint8_t secret[32];
	int dirfd, err = open_dir(dir, &dirfd);

	out->fd = -1;
	if (err) {
		fprintf(stderr, "%s: warning: disk cache %s: %s; going on without it\n", prog, dir,
			dir_error(err));
		return err;
	}
	size_tags(id->sb, out);
	/* files are made and removed under the directory's lock, never half there */
	flock(dirfd, LOCK_EX);
	err = read_secret(dirfd, secret);
	if (!err)
		err = stp_diskcache_key(secret, id, name, out->tag_key);
	explicit_bzero(secret, sizeof(secret));
	if (!err) {
		evict_files(dirfd, name, limit);
		err = open_cache_file(dirfd, name, out, &out->fd);
	}
	flock(dirfd, LOCK_UN);
	close(dirfd);
	if (err)
		fprintf(stderr, "%s: warning: disk cache %s: %s; going on without it\n", prog, dir,
			stp_strerror(err));
	return err;
}

int stp_cachedir_open_dir(const char *dir, int *out)
{
	return open_dir(dir, out);
}

int stp_cachedir_open_private(int dirfd, const char *name, int flags, uint64_t *len)
{
	bool made;

	return open_private(dirfd, name, flags, 0, &made, len);
}

const char *stp_cachedir_dir_error(int err)
{
	return dir_error(err);
}
