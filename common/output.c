/* SPDX-License-Identifier: MIT */
/* A temporary file beside the file a name leads to, its removal on failure or signal, and
 * standard output through a spool. */
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "trustpath.h"
#include "util.h"

#define MAX_LINKS 40 /* as many as the kernel follows in one path */
/* cp(1) will not write through such a link either; /proc/self/fd/N of a pipe is one */
#define DANGLING "a symlink that leads to no file: not written through"

/* The temporary file a signal handler removes: its name in PENDING_DIRFD, set only while
 * the file exists. */
static volatile int pending_dirfd = -1;
static const char *volatile pending_name;

static void on_signal(int sig)
{
	const char *name = pending_name;

	if (name)
		unlinkat(pending_dirfd, name, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
	signal(SIGXFSZ, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
}

void stp_output_guard_temp(int dirfd, const char *name)
{
	static int caught;

	if (!caught) {
		catch_signals();
		caught = 1;
	}
	pending_name = NULL;
	pending_dirfd = dirfd;
	pending_name = name;
}

static int fail(const char **step, const char *what, int err)
{
	if (step)
		*step = what;
	return err;
}

/* A refusal of what the path names: WHY is the whole message. */
static int refuse(struct stp_output *o, const char **step, const char *why, int err)
{
	o->refused = 1;
	return fail(step, why, err);
}

/* The directory of PATH, as a new string ("." when PATH has no slash), and in *BASE its
 * last component, inside PATH: "" when PATH ends with a slash. */
static char *dir_of(const char *path, const char **base)
{
	const char *slash = strrchr(path, '/');

	if (!slash) {
		*base = path;
		return strdup(".");
	}
	*base = slash + 1;
	return strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* The path the symlink BASE in O's directory leads to, in *NEXT (new string). */
static int read_link(const struct stp_output *o, const char *base, char **next)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(o->dirfd, base, target, sizeof(target) - 1);

	if (n < 0)
		return -errno;
	target[n] = '\0';
	if (target[0] == '/')
		*next = strdup(target);
	else if (asprintf(next, "%s/%s", o->dir, target) < 0)
		*next = NULL;
	return *next ? 0 : -ENOMEM;
}

/* O's directory, o->dir, walked as trustpath.h says. */
static int open_dir(struct stp_output *o, const char **step)
{
	struct stp_trustpath w;
	struct stat st;
	int fd = stp_trustpath_open(&w, o->dir);

	if (fd >= 0 && !fstat(fd, &st) && !S_ISDIR(st.st_mode)) {
		close(fd);
		fd = -ENOTDIR;
	}
	if (fd >= 0) {
		o->dirfd = fd;
		return 0;
	}
	if (w.refused) {
		snprintf(o->why, sizeof(o->why), "%s", stp_trustpath_why(&w, ""));
		return refuse(o, step, o->why, fd);
	}
	return fail(step, "cannot create", fd);
}

/* The links followed to the file replaced must be root's, the caller's or that file
 * owner's (trustpath.h): OWNER is the one other owner met on the way, MIXED says two
 * were. */
static int trusted_chain(struct stp_output *o, const char **step, uid_t owner, int mixed)
{
	if (owner == (uid_t)-1 || (!mixed && o->dest.st_uid == owner))
		return 0;
	snprintf(o->why, sizeof(o->why), "a symlink owned by uid %u leads to a file of uid %u: "
		 "not followed (only root's links, yours, or those leading to what their "
		 "owner owns are)", (unsigned)owner, (unsigned)o->dest.st_uid);
	return refuse(o, step, o->why, -EACCES);
}

/* Follows o->final's symlinks one at a time, each from a descriptor of its directory,
 * until it names something else or nothing. Then o->dir and o->dirfd are its directory,
 * o->name its last component, and o->dest what is there, if anything. */
static int follow_links(struct stp_output *o, const char **step)
{
	const char **base = &o->name;
	uid_t owner = (uid_t)-1; /* of the links followed, not root's nor ours */
	int mixed = 0;

	for (int hops = 0;; hops++) {
		char *next;
		int err;

		free(o->dir);
		if (o->dirfd >= 0)
			close(o->dirfd);
		o->dirfd = -1;
		o->dir = dir_of(o->final, base);
		if (!o->dir)
			return fail(step, "cannot create", -ENOMEM);
		if ((err = open_dir(o, step)))
			return hops && err == -ENOENT ? refuse(o, step, DANGLING, err) : err;
		if (!**base)
			return refuse(o, step, "is a directory", -EISDIR);
		o->dest_exists = !fstatat(o->dirfd, *base, &o->dest, AT_SYMLINK_NOFOLLOW);
		if (!o->dest_exists && errno != ENOENT)
			return fail(step, "cannot create", -errno);
		if (!o->dest_exists && hops)
			return refuse(o, step, DANGLING, -ENOENT);
		if (!o->dest_exists || !S_ISLNK(o->dest.st_mode))
			return hops ? trusted_chain(o, step, owner, mixed) : 0;
		if (hops == MAX_LINKS)
			return fail(step, "cannot follow its symlinks", -ELOOP);
		if (stp_trustpath_planted(o->dirfd, &o->dest))
			return refuse(o, step, "a symlink in a sticky world-writable directory, "
				      "owned by someone else: not followed", -EACCES);
		if (o->dest.st_uid && o->dest.st_uid != geteuid()) {
			mixed |= owner != (uid_t)-1 && owner != o->dest.st_uid;
			owner = o->dest.st_uid;
		}
		if ((err = read_link(o, *base, &next)))
			return fail(step, "cannot read the symlink", err);
		free(o->final);
		o->final = next;
	}
}

static const char *not_regular(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFIFO: return "a FIFO, not a regular file: not replaced";
	case S_IFCHR: return "a character device, not a regular file: not replaced";
	case S_IFBLK: return "a block device, not a regular file: not replaced";
	case S_IFSOCK: return "a socket, not a regular file: not replaced";
	case S_IFLNK: return "a symlink, not a regular file: not replaced";
	}
	return "not a regular file: not replaced";
}

/* Only a new name or a regular file is replaced. */
static int check_dest(struct stp_output *o, const char **step)
{
	if (!o->dest_exists)
		return 0;
	if (S_ISREG(o->dest.st_mode) && stp_trustpath_planted(o->dirfd, &o->dest))
		return refuse(o, step, "a file in a sticky world-writable directory, owned by "
			      "someone else: not replaced", -EACCES);
	if (S_ISREG(o->dest.st_mode))
		return 0;
	if (S_ISDIR(o->dest.st_mode))
		return refuse(o, step, "is a directory", -EISDIR);
	return refuse(o, step, not_regular(o->dest.st_mode), -EEXIST);
}

static const char *temp_name(const struct stp_output *o)
{
	return o->temp + strlen(o->dir) + 1;
}

/* Creates BASE.tmp.XXXXXX in O's directory, with a random suffix, as mkostemp does. */
static int create_temp(struct stp_output *o, const char *base)
{
	static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

	for (int tries = 0; tries < 100; tries++) {
		uint8_t r[6];
		char *x;

		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -errno;
		free(o->temp);
		if (asprintf(&o->temp, "%s/%s.tmp.XXXXXX", o->dir, base) < 0) {
			o->temp = NULL;
			return -ENOMEM;
		}
		x = o->temp + strlen(o->temp) - sizeof(r);
		for (size_t i = 0; i < sizeof(r); i++)
			x[i] = letters[r[i] % (sizeof(letters) - 1)];
		o->fd = openat(o->dirfd, temp_name(o), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (o->fd >= 0) {
			pending_dirfd = o->dirfd;
			pending_name = temp_name(o);
			return 0;
		}
		if (errno != EEXIST)
			break;
	}
	free(o->temp);
	o->temp = NULL;
	return -errno;
}

/* An unnamed file in $TMPDIR (else /tmp): a named one unlinked at once where the file
 * system has no O_TMPFILE. */
static int create_spool(struct stp_output *o)
{
	const char *tmp = getenv("TMPDIR");
	char *name;

	o->dir = strdup(tmp && *tmp ? tmp : "/tmp");
	if (!o->dir)
		return -ENOMEM;
	o->fd = open(o->dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
	if (o->fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return o->fd >= 0 ? 0 : -errno;
	if (asprintf(&name, "%s/.stipple-spool.XXXXXX", o->dir) < 0)
		return -ENOMEM;
	o->fd = mkostemp(name, O_CLOEXEC);
	if (o->fd >= 0)
		unlink(name);
	free(name);
	return o->fd >= 0 ? 0 : -errno;
}

static int open_stdout(struct stp_output *o, const char **step)
{
	int err;

	if (isatty(STDOUT_FILENO))
		return refuse(o, step, "standard output is a terminal: not written to", -ENOTTY);
	if (fstat(STDOUT_FILENO, &o->dest))
		return fail(step, "standard output", -errno);
	o->dest_exists = S_ISREG(o->dest.st_mode);
	o->to_stdout = 1;
	catch_signals();
	err = create_spool(o);
	return err ? fail(step, "cannot create a spool in $TMPDIR", err) : 0;
}

int stp_output_open(const char *path, struct stp_output *o, const char **step)
{
	int err;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->dirfd = -1;
	o->final = strdup(path);
	if (!o->final)
		return fail(step, "cannot create", -ENOMEM);
	if (!strcmp(path, "-"))
		return open_stdout(o, step);
	if (!*path)
		return fail(step, "cannot create", -ENOENT);
	if ((err = follow_links(o, step)) || (err = check_dest(o, step)))
		return err;
	catch_signals();
	err = create_temp(o, o->name);
	return err ? fail(step, "cannot create", err) : 0;
}

mode_t stp_output_default_mode(void)
{
	mode_t mask = umask(0);

	umask(mask);
	return 0666 & ~mask;
}

mode_t stp_output_mode(const struct stp_output *o)
{
	/* another user's modes are not ours to inherit: 0666 of theirs would be a hole */
	if (!o->to_stdout && o->dest_exists && S_ISREG(o->dest.st_mode) &&
	    o->dest.st_uid == geteuid())
		return o->dest.st_mode & 0777;
	return stp_output_default_mode();
}

/* Copies the spool FD from OFF to END onto standard output by read and write. */
static int copy_by_hand(int fd, off_t off, off_t end)
{
	static char buf[1 << 16];

	while (off < end) {
		size_t want = end - off < (off_t)sizeof(buf) ? (size_t)(end - off) : sizeof(buf);
		int err = stp_pread_full(fd, buf, want, (uint64_t)off);

		if (!err)
			err = stp_write_full(STDOUT_FILENO, buf, want);
		if (err)
			return err;
		off += (off_t)want;
	}
	return 0;
}

/* Copies the whole spool onto standard output. */
static int copy_spool(int fd)
{
	struct stat st;
	off_t off = 0;

	if (fstat(fd, &st))
		return -errno;
	while (off < st.st_size) {
		ssize_t n = sendfile(STDOUT_FILENO, fd, &off, (size_t)(st.st_size - off));

		if (n > 0 || (n < 0 && errno == EINTR))
			continue;
		if (n == 0)
			return -EIO; /* the spool shrank */
		if (errno == EINVAL || errno == ENOSYS) /* O_APPEND, or an old kernel */
			return copy_by_hand(fd, off, st.st_size);
		return -errno;
	}
	return 0;
}

/* A file on standard output is synced like an image written by name. */
static int sync_stdout(void)
{
	struct stat st;
	int err = 0;

	if (!fstat(STDOUT_FILENO, &st) && S_ISREG(st.st_mode) && fsync(STDOUT_FILENO) &&
	    errno != EINVAL && errno != EROFS)
		err = -errno;
	return err;
}

static int commit_stdout(struct stp_output *o, const char **step)
{
	int err = copy_spool(o->fd) ?: sync_stdout();

	close(o->fd);
	o->fd = -1;
	return err ? fail(step, "cannot write to standard output", err) : 0;
}

/* Syncs the directory, through a descriptor that can be synced. */
static int sync_dir(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;

	if (fd < 0 || (fsync(fd) && errno != EINVAL && errno != EROFS))
		err = -errno;
	if (fd >= 0)
		close(fd);
	return err;
}

int stp_output_commit(struct stp_output *o, mode_t mode, const char **step)
{
	int err = 0;

	if (o->to_stdout)
		return commit_stdout(o, step);
	if (fchmod(o->fd, mode) || fsync(o->fd))
		err = -errno;
	if (close(o->fd) && !err)
		err = -errno;
	o->fd = -1;
	if (err)
		return fail(step, "cannot write", err);
	/* what was checked at open may have been swapped since */
	o->dest_exists = !fstatat(o->dirfd, o->name, &o->dest, AT_SYMLINK_NOFOLLOW);
	if ((err = check_dest(o, step)))
		return err;
	if (renameat(o->dirfd, temp_name(o), o->dirfd, o->name))
		return fail(step, "cannot rename into place", -errno);
	pending_name = NULL;
	free(o->temp);
	o->temp = NULL;
	err = sync_dir(o->dirfd);
	return err ? fail(step, "in place, but syncing its directory failed", err) : 0;
}

void stp_output_abort(struct stp_output *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->temp) {
		pending_name = NULL;
		unlinkat(o->dirfd, temp_name(o), 0);
		free(o->temp);
		o->temp = NULL;
	}
	if (o->dirfd >= 0)
		close(o->dirfd);
	o->dirfd = -1;
	free(o->final);
	free(o->dir);
	o->final = o->dir = NULL;
}
