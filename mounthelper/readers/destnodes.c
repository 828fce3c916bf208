/* SPDX-License-Identifier: MIT */
/* The nodes extract made and reaches again (destnodes.h). */
#include "destnodes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

int stp_destnodes_init(struct stp_destnodes *t, int rootfd, uint32_t root_ino)
{
	struct stat st;
	uint32_t rec;

	*t = (struct stp_destnodes){ .rootfd = rootfd };
	if (fstat(rootfd, &st))
		return -errno;
	return stp_destnodes_add(t, STP_DESTNODES_ROOT, "", root_ino, &st, &rec);
}

static uint32_t slot_of(const struct stp_destnodes *t, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino ^ ((uint64_t)dev << 32 | (uint64_t)dev >> 32)) *
		     0x9e3779b97f4a7c15ull;

	return (uint32_t)(h >> 32) & (t->slots - 1);
}

/* The slot of (DEV, INO): its record's, or the free one where it would go. */
static uint32_t find_slot(const struct stp_destnodes *t, dev_t dev, ino_t ino)
{
	uint32_t s = slot_of(t, dev, ino);

	while (t->slot[s]) {
		const struct stp_destnode *n = &t->node[t->slot[s] - 1];

		if (n->dev == dev && n->st_ino == ino)
			break;
		s = (s + 1) & (t->slots - 1);
	}
	return s;
}

/* Keeps the table at most half full: doubles it and places every record again. */
static int grow_slots(struct stp_destnodes *t)
{
	uint32_t *old = t->slot, n = t->slots;

	if (t->slots / 2 > t->count)
		return 0;
	if (t->slots >= UINT32_MAX / 2 + 1)
		return -EOVERFLOW;
	t->slots = t->slots ? t->slots * 2 : 128;
	t->slot = calloc(t->slots, sizeof(*t->slot));
	if (!t->slot) {
		t->slot = old;
		t->slots = n;
		return -ENOMEM;
	}
	for (uint32_t r = 0; r < t->count; r++)
		t->slot[find_slot(t, t->node[r].dev, t->node[r].st_ino)] = r + 1;
	free(old);
	return 0;
}

int stp_destnodes_has(const struct stp_destnodes *t, dev_t dev, ino_t ino)
{
	return t->slots && t->slot[find_slot(t, dev, ino)] != 0;
}

int stp_destnodes_add(struct stp_destnodes *t, uint32_t parent, const char *name,
		      uint32_t ino, const struct stat *st, uint32_t *rec)
{
	int err;

	if (t->count == UINT32_MAX)
		return -EOVERFLOW;
	if ((err = grow_slots(t)))
		return err;
	if (t->count == t->cap) {
		uint32_t cap = t->cap < UINT32_MAX / 2 ? (t->cap ? t->cap * 2 : 64) : UINT32_MAX;
		struct stp_destnode *n = reallocarray(t->node, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->node = n;
		t->cap = cap;
	}
	t->node[t->count] = (struct stp_destnode){ .parent = parent, .ino = ino,
		.dev = st->st_dev, .st_ino = st->st_ino, .uid = st->st_uid,
		.type = st->st_mode & S_IFMT, .is_dir = S_ISDIR(st->st_mode),
		.name = strdup(name) };
	if (!t->node[t->count].name)
		return -ENOMEM;
	t->slot[find_slot(t, st->st_dev, st->st_ino)] = t->count + 1;
	*rec = t->count++;
	return 0;
}

/* Built from the end: each name, then its parent's, up to DIR. */
int stp_destnodes_path(const struct stp_destnodes *t, uint32_t rec, char *out, size_t len)
{
	size_t at = len;

	if (rec == STP_DESTNODES_ROOT)
		return len >= 2 ? (memcpy(out, ".", 2), 0) : -ENAMETOOLONG;
	if (!at--)
		return -ENAMETOOLONG;
	out[at] = '\0';
	for (uint32_t r = rec; r != STP_DESTNODES_ROOT; r = t->node[r].parent) {
		size_t n = strlen(t->node[r].name);

		if (at < n + (r != rec))
			return -ENAMETOOLONG;
		if (r != rec)
			out[--at] = '/';
		at -= n;
		memcpy(out + at, t->node[r].name, n);
	}
	memmove(out, out + at, len - at);
	return 0;
}

/* Whether FD is the node of record REC; -ESTALE when not. */
static int check_node(const struct stp_destnodes *t, uint32_t rec, int fd)
{
	struct stat st;

	const struct stp_destnode *n = &t->node[rec];

	if (fstat(fd, &st))
		return -errno;
	return st.st_dev == n->dev && st.st_ino == n->st_ino && st.st_uid == n->uid &&
	       (st.st_mode & S_IFMT) == n->type ? 0 : -ESTALE;
}

static int walk_open(const struct stp_destnodes *t, uint32_t rec, int flags, int *fd);

/* REC's parent directory into *FD: opened (O_PATH) by the walk below, or DIR itself,
 * which is not ours to close (*OWNED 0). */
static int walk_parent(const struct stp_destnodes *t, uint32_t rec, int *fd, int *owned)
{
	uint32_t parent = t->node[rec].parent;

	*owned = parent != STP_DESTNODES_ROOT;
	if (!*owned) {
		*fd = t->rootfd;
		return 0;
	}
	return walk_open(t, parent, O_PATH | O_DIRECTORY, fd);
}

/* Without openat2: each name opened with O_NOFOLLOW from its parent, each node checked
 * to be its record's. The depth is bounded by the paths the walk allows (PATH_MAX). */
static int walk_open(const struct stp_destnodes *t, uint32_t rec, int flags, int *fd)
{
	int parent, owned, err = walk_parent(t, rec, &parent, &owned);

	if (err)
		return err;
	*fd = openat(parent, t->node[rec].name, flags | O_NOFOLLOW | O_CLOEXEC);
	err = *fd < 0 ? -errno : check_node(t, rec, *fd);
	if (owned)
		close(parent);
	if (err && *fd >= 0) {
		close(*fd);
		*fd = -1;
	}
	/* a directory on the way that is now a symlink: O_DIRECTORY|O_NOFOLLOW says so */
	return err == -ENOTDIR && (flags & O_DIRECTORY) ? -ELOOP : err;
}

/* openat2 of PATH beneath ROOTFD, following no symlink, with RESOLVE's further bits. */
static int openat2_beneath(int rootfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | resolve,
	};

	return (int)syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* Without openat2: PATH's names opened one at a time from ROOTFD with O_NOFOLLOW. */
static int open_by_names(int rootfd, const char *path, int flags, int *fd)
{
	char *copy = strdup(path), *name, *next;
	int dir = rootfd, err = 0;

	*fd = -1;
	if (!copy)
		return -ENOMEM;
	for (name = copy; !err && (next = strchr(name, '/')); name = next + 1) {
		int sub;

		*next = '\0';
		if (!strcmp(name, ".."))
			err = -EXDEV; /* as RESOLVE_BENEATH */
		else if ((sub = openat(dir, *name ? name : ".",
				       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
			err = errno == ENOTDIR ? -ELOOP : -errno;
		if (dir != rootfd)
			close(dir);
		dir = err ? rootfd : sub;
	}
	if (!err && !strcmp(name, ".."))
		err = -EXDEV;
	if (!err && (*fd = openat(dir, *name ? name : ".", flags | O_NOFOLLOW | O_CLOEXEC)) < 0)
		err = -errno;
	if (dir != rootfd)
		close(dir);
	free(copy);
	return err;
}

int stp_beneath_open(int rootfd, const char *path, int flags, int *fd)
{
	*fd = openat2_beneath(rootfd, path, flags, 0);
	if (*fd < 0 && (errno == ENOSYS || errno == EPERM))
		return open_by_names(rootfd, path, flags, fd);
	return *fd < 0 ? -errno : 0;
}

/* Without /proc: PATH opened again by name, kept only if it is still ST's node. */
static int open_again_beneath(int rootfd, const char *path, int flags, const struct stat *st,
			      int *fd)
{
	struct stat again;
	int err = stp_beneath_open(rootfd, path, flags, fd);

	if (!err && (fstat(*fd, &again) || again.st_dev != st->st_dev || again.st_ino != st->st_ino))
		err = -EAGAIN;
	return err;
}

int stp_beneath_open_file(int rootfd, const char *path, int *fd, struct stat *st)
{
	const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY;
	int node, err = stp_beneath_open(rootfd, path, O_PATH, &node);

	*fd = -1;
	if (err)
		return err;
	if (fstat(node, st))
		err = -errno;
	else if (!S_ISREG(st->st_mode))
		err = -EINVAL;
	else if ((*fd = stp_reopen(node, flags)) == -ENOSYS)
		err = open_again_beneath(rootfd, path, flags, st, fd);
	else if (*fd < 0)
		err = *fd;
	close(node);
	if (err && *fd >= 0)
		close(*fd);
	if (err)
		*fd = -1;
	return err;
}

int stp_destnodes_open(const struct stp_destnodes *t, uint32_t rec, int flags, int *fd)
{
	char path[PATH_MAX];
	int err = stp_destnodes_path(t, rec, path, sizeof(path));

	if (err)
		return err;
	*fd = openat2_beneath(t->rootfd, path, flags, RESOLVE_NO_XDEV);
	if (*fd < 0 && (errno == ENOSYS || errno == EPERM))
		err = walk_open(t, rec, flags, fd);
	else if (*fd < 0)
		return -errno;
	else
		err = check_node(t, rec, *fd);
	if (err) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
	return err;
}

void stp_destnodes_free(struct stp_destnodes *t)
{
	for (uint32_t i = 0; i < t->count; i++)
		free(t->node[i].name);
	free(t->node);
	free(t->slot);
	*t = (struct stp_destnodes){ .rootfd = -1 };
}
