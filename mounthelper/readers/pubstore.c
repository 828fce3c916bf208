/* SPDX-License-Identifier: MIT */
/* The directory `stipple publish` writes: block files and indexes (pubstore.h). */
#include "pubstore.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "output.h"
#include "trustpath.h"
#include "util.h"

static int fail(struct stp_pubstore *s, const char *path, const char *why, int err)
{
	snprintf(s->err_path, sizeof(s->err_path), "%s", path);
	s->err_why = why;
	s->err_refused = 0;
	return err;
}

static int refuse(struct stp_pubstore *s, const char *path, const char *why, int err)
{
	fail(s, path, why, err);
	s->err_refused = 1;
	return err;
}

/* Why NAME in DIRFD, which is not what was wanted, is refused. */
static int refuse_node(struct stp_pubstore *s, int dirfd, const char *name, const char *path,
		       const char *not_what)
{
	struct stat st;

	if (!fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
		return refuse(s, path, "is a symbolic link: refusing to follow it", -ELOOP);
	return refuse(s, path, not_what, -EEXIST);
}

/* Opens directory NAME in PARENTFD (PATH for messages), made 0755 when missing, never
 * through a symbolic link. */
static int open_subdir(struct stp_pubstore *s, int parentfd, const char *name, const char *path,
		       int *fd)
{
	int made = !mkdirat(parentfd, name, 0755);
	struct stat st;

	if (!made && errno != EEXIST)
		return fail(s, path, "cannot create", -errno);
	*fd = openat(parentfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (*fd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			return refuse_node(s, parentfd, name, path, "is not a directory");
		return fail(s, path, "cannot open", -errno);
	}
	/* whatever the umask: a web server reads it (an existing one of the publisher's
	 * too; another's is left as it is) */
	if (made ? fchmod(*fd, 0755) :
	    !fstat(*fd, &st) && st.st_uid == geteuid() && (st.st_mode & 0555) != 0555 &&
	    fchmod(*fd, (st.st_mode & 07777) | 0755))
		return fail(s, path, "cannot set the mode of", -errno);
	return 0;
}

int stp_pubstore_open(struct stp_pubstore *s, const char *dir)
{
	struct stp_trustpath w;
	int made;

	s->dirfd = s->blocksfd = -1;
	for (int i = 0; i < STP_PUBSTORE_FANOUT; i++)
		s->fanfd[i] = -1;
	/* its links followed only when trusted: root must not be sent to plant files in a
	 * directory of someone else's */
	s->dirfd = stp_trustpath_open_dir(&w, dir, 0755, &made);
	if (s->dirfd < 0 && w.refused)
		return refuse(s, "", stp_trustpath_why(&w, dir), s->dirfd);
	if (s->dirfd < 0)
		return fail(s, "", "cannot open", s->dirfd);
	/* before any block is written: an index that cannot follow them is no use */
	if (faccessat(s->dirfd, ".", W_OK | X_OK, AT_EACCESS))
		return fail(s, "", "cannot write in", -errno);
	return open_subdir(s, s->dirfd, "blocks", "blocks", &s->blocksfd);
}

/* Creates a temporary file beside FINAL in DIRFD, named in TEMP, which a fatal signal
 * removes until stp_output_guard_temp(-1, NULL). */
static int create_temp(int dirfd, const char *final, char temp[NAME_MAX + 1])
{
	for (int tries = 0; tries < 100; tries++) {
		uint32_t r;
		int fd;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -EIO;
		/* hidden, and within NAME_MAX whatever FINAL's length */
		snprintf(temp, NAME_MAX + 1, ".%.200s.tmp.%08x", final, r);
		stp_output_guard_temp(dirfd, temp);
		fd = openat(dirfd, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (fd >= 0)
			return fd;
		stp_output_guard_temp(-1, NULL);
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* The LEN bytes at BUF as FINAL in DIRFD: written to a temporary file, synced, mode 0644
 * and renamed into place. PATH names FINAL for messages. */
static int write_file(struct stp_pubstore *s, int dirfd, const char *final, const char *path,
		      const void *buf, size_t len)
{
	char temp[NAME_MAX + 1];
	const char *why = "cannot write";
	int fd = create_temp(dirfd, final, temp), err;

	if (fd < 0)
		return fail(s, path, "cannot create a temporary file for", fd);
	err = stp_write_full(fd, buf, len);
	if (!err && (fchmod(fd, 0644) || fsync(fd)))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && renameat(dirfd, temp, dirfd, final)) {
		err = -errno;
		why = "cannot rename into place";
	}
	if (err)
		unlinkat(dirfd, temp, 0);
	stp_output_guard_temp(-1, NULL);
	return err ? fail(s, path, why, err) : 0;
}

/* Whether the file NAME in DIRFD holds LEN bytes that hash to SHA: 1, 0 when it is
 * missing or holds other bytes (*FOUND tells), or a negative errno. Only a regular file
 * is opened: a device or FIFO planted there is refused, as is a symbolic link. */
static int holds(struct stp_pubstore *s, int dirfd, const char *name, const char *path,
		 const uint8_t sha[STP_PUBINDEX_HASH_LEN], size_t len, void *scratch, int *found)
{
	uint8_t got[STP_SIG_HASH_SIZE];
	struct stat st, fst;
	int fd, err;

	*found = 0;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : fail(s, path, "cannot stat", -errno);
	*found = 1;
	if (!S_ISREG(st.st_mode))
		return refuse_node(s, dirfd, name, path, "is not a regular file");
	/* another's file may change later, one not world-readable is a 403, a second link
	 * may be written through: each written anew, whatever its bytes */
	if ((uint64_t)st.st_size != len || st.st_uid != geteuid() ||
	    (st.st_mode & 0444) != 0444 || st.st_nlink != 1)
		return 0;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? refuse_node(s, dirfd, name, path, "is not a regular file")
				      : fail(s, path, "cannot open", -errno);
	err = fstat(fd, &fst) ? -errno : 0;
	if (!err && (fst.st_dev != st.st_dev || fst.st_ino != st.st_ino || !S_ISREG(fst.st_mode)))
		err = refuse(s, path, "changed while it was being read", -EAGAIN);
	else if (!err && (err = stp_pread_full(fd, scratch, len, 0)))
		fail(s, path, "cannot read", err);
	else if (err)
		fail(s, path, "cannot stat", err);
	close(fd);
	if (err)
		return err;
	stp_sign_hash(scratch, len, got);
	return !memcmp(got, sha, STP_PUBINDEX_HASH_LEN);
}

int stp_pubstore_put_block(struct stp_pubstore *s, const uint8_t sha[STP_PUBINDEX_HASH_LEN],
			   const void *buf, size_t len, void *scratch, enum stp_pubstore_put *how)
{
	char name[STP_PUBINDEX_NAME_MAX], path[sizeof(s->err_path)];
	int *fan = &s->fanfd[sha[0]], found, err;

	stp_pubindex_block_name(sha, name);
	snprintf(path, sizeof(path), "blocks/%s", name);
	if (*fan < 0) {
		char fan_name[3] = { name[0], name[1], 0 };

		path[9] = '\0'; /* "blocks/HH" */
		err = open_subdir(s, s->blocksfd, fan_name, path, fan);
		if (err)
			return err;
		path[9] = '/';
	}
	err = holds(s, *fan, name + 3, path, sha, len, scratch, &found);
	if (err < 0)
		return err;
	if (err) {
		*how = STP_PUBSTORE_PRESENT;
		return 0;
	}
	*how = found ? STP_PUBSTORE_REPLACED : STP_PUBSTORE_WRITTEN;
	return write_file(s, *fan, name + 3, path, buf, len);
}

static int sync_dir(struct stp_pubstore *s, int fd, const char *path)
{
	if (fsync(fd) && errno != EINVAL && errno != EROFS)
		return fail(s, path, "cannot sync", -errno);
	return 0;
}

int stp_pubstore_sync_blocks(struct stp_pubstore *s)
{
	char path[16];
	int err;

	for (int i = 0; i < STP_PUBSTORE_FANOUT; i++) {
		if (s->fanfd[i] < 0)
			continue;
		snprintf(path, sizeof(path), "blocks/%02x", i);
		if ((err = sync_dir(s, s->fanfd[i], path)))
			return err;
	}
	return sync_dir(s, s->blocksfd, "blocks");
}

int stp_pubstore_put_file(struct stp_pubstore *s, const char *name, const void *buf,
			  size_t len)
{
	return write_file(s, s->dirfd, name, name, buf, len) ?: sync_dir(s, s->dirfd, "");
}

int stp_pubstore_is(const struct stp_pubstore *s, const char *name, dev_t dev, ino_t ino)
{
	struct stat st;

	return !fstatat(s->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) && st.st_dev == dev &&
	       st.st_ino == ino;
}

void stp_pubstore_close(struct stp_pubstore *s)
{
	for (int i = 0; i < STP_PUBSTORE_FANOUT; i++)
		if (s->fanfd[i] >= 0)
			close(s->fanfd[i]);
	if (s->blocksfd >= 0)
		close(s->blocksfd);
	if (s->dirfd >= 0)
		close(s->dirfd);
	s->dirfd = s->blocksfd = -1;
}
