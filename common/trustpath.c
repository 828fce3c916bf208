/* SPDX-License-Identifier: MIT */
/* Paths walked one component at a time, symlinks followed only when trusted (trustpath.h). */
#include "trustpath.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HOPS 40 /* as many links as the kernel follows in one path */

int stp_trustpath_planted(int dirfd, const struct stat *node)
{
	struct stat d;

	if (fstat(dirfd, &d))
		return 1;
	if ((d.st_mode & (S_ISVTX | S_IWOTH)) != (S_ISVTX | S_IWOTH))
		return 0;
	return node->st_uid != geteuid() && node->st_uid != d.st_uid;
}

int stp_trustpath_may_follow(int dirfd, const struct stat *link, uid_t target_uid)
{
	uid_t owner = link->st_uid;

	if (stp_trustpath_planted(dirfd, link))
		return 0;
	return owner == 0 || owner == geteuid() || owner == target_uid;
}

/* How the user would name a path being walked, kept as pieces and formatted only when a
 * link is refused: LEN bytes of PATH, after the name of WHERE (the directory PATH is
 * relative to; NULL: the working directory) unless PATH is absolute. */
struct shown {
	const struct shown *where;
	const char *path;
	size_t len;
};

/* Appends LEN bytes of S to OUT (CAP bytes, *AT used), cut to fit, always terminated. */
static void put(char *out, size_t cap, size_t *at, const char *s, size_t len)
{
	if (len > cap - 1 - *at)
		len = cap - 1 - *at;
	memcpy(out + *at, s, len);
	*at += len;
	out[*at] = '\0';
}

static void show(char *out, size_t cap, size_t *at, const struct shown *s)
{
	if (s->where && s->path[0] != '/') {
		show(out, cap, at, s->where);
		put(out, cap, at, "/", 1);
	}
	put(out, cap, at, s->path, s->len);
}

static int refuse(struct stp_trustpath *w, const struct shown *link, uid_t link_uid,
		  uid_t target)
{
	size_t at = 0;

	w->refused = 1;
	w->link_uid = link_uid;
	w->target_uid = target;
	w->link[0] = '\0';
	show(w->link, sizeof(w->link), &at, link);
	return -EACCES;
}

/* PATH's first LEN bytes, after WHERE, as the user names them: without trailing slashes. */
static struct shown prefix(const struct shown *where, const char *path, size_t len)
{
	while (len > 1 && path[len - 1] == '/')
		len--;
	return (struct shown){ where, path, len };
}

static int walk(struct stp_trustpath *w, int at, const struct shown *where, const char *path);

/* The target of the symlink open as LFD (stat LS), NAME in DIRFD: walked from DIRFD, whose
 * name is WHERE, and kept only if the rule allows. SHOWN names the link. */
static int follow(struct stp_trustpath *w, int dirfd, const struct shown *where, int lfd,
		  const struct stat *ls, const struct shown *shown)
{
	struct stat ts;
	char *text = malloc(PATH_MAX);
	ssize_t n = text ? readlinkat(lfd, "", text, PATH_MAX - 1) : -1;
	int target, err = text ? -errno : -ENOMEM;

	if (n < 0) {
		free(text);
		return err;
	}
	text[n] = '\0';
	target = n ? walk(w, dirfd, where, text) : -ENOENT;
	free(text);
	if (target < 0)
		return target;
	if (fstat(target, &ts)) {
		err = -errno;
		close(target);
		return err;
	}
	if (!stp_trustpath_may_follow(dirfd, ls, ts.st_uid)) {
		close(target);
		return refuse(w, shown, ls->st_uid, ts.st_uid);
	}
	return target;
}

/* NAME in DIRFD (WHERE names DIRFD, SHOWN names NAME), its link followed if trusted. */
static int step(struct stp_trustpath *w, int dirfd, const struct shown *where,
		const char *name, const struct shown *shown)
{
	struct stat ls;
	int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), target;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &ls)) {
		target = -errno;
		close(fd);
		return target;
	}
	if (!S_ISLNK(ls.st_mode))
		return fd;
	if (++w->hops > MAX_HOPS)
		target = -ELOOP;
	else if (stp_trustpath_planted(dirfd, &ls)) /* before its target is looked at */
		target = refuse(w, shown, ls.st_uid, (uid_t)-1);
	else
		target = follow(w, dirfd, where, fd, &ls, shown);
	close(fd);
	return target;
}

/* Where a walk of PATH from AT starts: "/", or AT (AT_FDCWD: the working directory). */
static int start(int at, const char *path)
{
	if (path[0] == '/')
		return open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (at == AT_FDCWD)
		return open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fcntl(at, F_DUPFD_CLOEXEC, 0);
}

static int walk(struct stp_trustpath *w, int at, const struct shown *where, const char *path)
{
	char name[NAME_MAX + 1];
	int cur = start(at, path);

	if (cur < 0)
		return -errno;
	for (const char *p = path; *p; ) {
		size_t len = strcspn(p, "/"), off = (size_t)(p - path);
		struct shown dir = prefix(where, path, off), shown = prefix(where, path, off + len);
		int next;

		if (!len) {
			p++;
			continue;
		}
		if (len > NAME_MAX) {
			close(cur);
			return -ENAMETOOLONG;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		next = step(w, cur, off ? &dir : where, name, &shown);
		close(cur);
		if (next < 0)
			return next;
		cur = next;
		p += len;
	}
	return cur;
}

int stp_trustpath_open(struct stp_trustpath *w, const char *path)
{
	w->hops = 0;
	w->refused = 0;
	if (!*path)
		return -ENOENT;
	return walk(w, AT_FDCWD, NULL, path);
}

/* PATH's last name as a directory in PARENT: opened if there, else made with MODE. */
static int open_or_make(struct stp_trustpath *w, int parent, const char *where,
			const char *name, const char *path, mode_t mode, int *made)
{
	const struct shown dir = { NULL, where, where ? strlen(where) : 0 };
	const struct shown shown = { NULL, path, strlen(path) };

	for (int tries = 0; tries < 3; tries++) {
		int fd = step(w, parent, where ? &dir : NULL, name, &shown);

		if (fd != -ENOENT)
			return fd;
		if (!mkdirat(parent, name, mode)) {
			*made = 1;
			/* not step(): a link put there since is someone's swap, not a choice */
			fd = openat(parent, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
			return fd >= 0 ? fd : -errno;
		}
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int stp_trustpath_open_dir(struct stp_trustpath *w, const char *path, mode_t mode, int *made)
{
	char *copy = strdup(path), *slash, *name;
	const char *parent;
	int pfd, fd, rfd;
	size_t len;

	*made = 0;
	w->hops = 0;
	w->refused = 0;
	if (!copy)
		return -ENOMEM;
	for (len = strlen(copy); len > 1 && copy[len - 1] == '/'; )
		copy[--len] = '\0';
	slash = strrchr(copy, '/');
	name = slash ? slash + 1 : copy;
	if (slash)
		*slash = '\0';
	parent = !slash ? "." : *copy ? copy : "/";
	if (!*path)
		fd = -ENOENT;
	else if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) /* nothing to make */
		fd = walk(w, AT_FDCWD, NULL, path);
	else if ((pfd = walk(w, AT_FDCWD, NULL, parent)) < 0)
		fd = pfd;
	else {
		fd = open_or_make(w, pfd, slash ? parent : NULL, name, path, mode, made);
		close(pfd);
	}
	free(copy);
	if (fd < 0)
		return fd;
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		rfd = -errno;
	close(fd);
	return rfd;
}

const char *stp_trustpath_why(const struct stp_trustpath *w, const char *path)
{
	static char why[PATH_MAX + 200];
	int len = strcmp(w->link, path) ? snprintf(why, sizeof(why), "%s: ", w->link) : 0;

	if (w->target_uid == (uid_t)-1)
		snprintf(why + len, sizeof(why) - len, "a symlink owned by uid %u in a sticky "
			 "world-writable directory of another: not followed",
			 (unsigned)w->link_uid);
	else
		snprintf(why + len, sizeof(why) - len, "a symlink owned by uid %u, leading to "
			 "what uid %u owns: not followed (only root's links, yours, or those "
			 "leading to what their owner owns are)", (unsigned)w->link_uid,
			 (unsigned)w->target_uid);
	return why;
}
