/* SPDX-License-Identifier: MIT */
#include "diffside.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "destnodes.h"
#include "fileread.h"
#include "image.h"
#include "treewalk.h"

struct visited {
	uint64_t dev, ino;
};

struct stp_side {
	struct stp_image *img;  /* an image, or NULL */
	struct stp_cache *cache; /* its decoded blocks, shared by its files: small files share
				  * blocks, and one cache per file decoded each block anew */
	int rootfd;             /* a directory: what lies below is opened beneath it */
	struct visited *seen;   /* directories entered, as (dev, ino + 1): ino 0 is free */
	size_t seen_count, seen_slots; /* open addressing; slots a power of two */
};

struct stp_side_file {
	struct stp_side *side;
	struct stp_cache *cache;  /* image: the side's */
	struct stp_inode inode;
	uint64_t off;
	int fd;                   /* directory */
};

int stp_side_open(const struct stp_cli *cli, const char *arg, struct stp_side **out)
{
	struct stp_side *s = calloc(1, sizeof(*s));
	struct stat st;
	int err;

	if (!s)
		return -ENOMEM;
	s->rootfd = -1;
	if (!stat(arg, &st) && S_ISDIR(st.st_mode)) {
		/* the root itself is the caller's to name, symlinks and all */
		if ((s->rootfd = open(arg, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
			err = -errno;
			stp_cli_problem(cli, arg, NULL, "cannot open: %s", stp_strerror(err));
			free(s);
			return err;
		}
	} else if ((err = stp_cli_open(cli, arg, &s->img)) ||
		   (err = stp_treewalk_files(s->img, NULL, NULL))) {
		/* the rule of every whole-image walker (reported by the library): directories
		 * sharing entry records would make the diff quadratic */
		stp_image_close(s->img);
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

void stp_side_close(struct stp_side *side)
{
	if (side && side->cache)
		stp_cache_free(side->cache);
	if (side && side->img)
		stp_image_close(side->img);
	if (side && side->rootfd >= 0)
		close(side->rootfd);
	if (side)
		free(side->seen);
	free(side);
}

const struct stp_image *stp_side_image(const struct stp_side *side)
{
	return side->img;
}

static struct visited *visit_slot(struct visited *t, size_t slots, uint64_t dev, uint64_t ino)
{
	size_t i = (size_t)((dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xff51afd7ed558ccdull));

	for (i &= slots - 1; t[i].ino && (t[i].dev != dev || t[i].ino != ino + 1);
	     i = (i + 1) & (slots - 1))
		;
	return &t[i];
}

/* Doubles the table once it is half full. */
static int visit_grow(struct stp_side *s)
{
	size_t slots = s->seen_slots ? s->seen_slots * 2 : 64;
	struct visited *t = calloc(slots, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < s->seen_slots; i++)
		if (s->seen[i].ino)
			*visit_slot(t, slots, s->seen[i].dev, s->seen[i].ino - 1) = s->seen[i];
	free(s->seen);
	s->seen = t;
	s->seen_slots = slots;
	return 0;
}

int stp_side_first_visit(struct stp_side *side, const struct stp_side_node *node)
{
	struct visited *v;

	if (2 * (side->seen_count + 1) > side->seen_slots && visit_grow(side))
		return -ENOMEM;
	v = visit_slot(side->seen, side->seen_slots, node->dev, node->ino);
	if (v->ino)
		return 0;
	*v = (struct visited){ node->dev, node->ino + 1 };
	side->seen_count++;
	return 1;
}

/* Image path PATH of a directory side opened beneath its root with FLAGS (and
 * O_NONBLOCK: a FIFO put in a file's place does not block the open), following no
 * symlink on the way nor at the end; what it opens is in *ST. */
static int open_beneath(const struct stp_side *s, const char *path, int flags, int *fd,
			struct stat *st)
{
	int extra = flags & O_PATH ? 0 : O_NONBLOCK | O_NOCTTY; /* openat2: O_PATH takes none */
	const char *rel = strcmp(path, "/") ? path + 1 : ".";
	int err;

	if (flags == O_RDONLY) /* a file's bytes: a device swapped in is never opened */
		return stp_beneath_open_file(s->rootfd, rel, fd, st);
	err = stp_beneath_open(s->rootfd, rel, flags | extra, fd);
	if (!err && fstat(*fd, st))
		err = -errno;
	if (err && *fd >= 0)
		close(*fd);
	if (err)
		*fd = -1;
	return err;
}

/* As open_beneath, refusing anything but NODE, the very node stp_side_stat found there
 * (same type, device and inode number): one swapped in since is -ESTALE. */
static int open_node(const struct stp_side *s, const char *path,
		     const struct stp_side_node *node, int flags, int *fd)
{
	struct stat st;
	int err = open_beneath(s, path, flags, fd, &st);

	if (err == -EINVAL && flags == O_RDONLY)
		err = -ESTALE; /* no longer a regular file */
	if (!err && ((st.st_mode & S_IFMT) != (node->mode & S_IFMT) ||
		     (uint64_t)st.st_dev != node->dev || (uint64_t)st.st_ino != node->ino)) {
		close(*fd);
		*fd = -1;
		err = -ESTALE;
	}
	return err;
}

int stp_side_stat(struct stp_side *side, const char *path, struct stp_side_node *node)
{
	struct stat st;
	uint32_t ino;
	int err, fd;

	memset(node, 0, sizeof(*node));
	if (side->img) {
		struct stp_inode *in = &node->inode;

		if ((err = stp_image_resolve(side->img, path, &ino)) ||
		    (err = stp_image_inode(side->img, ino, in)))
			return err;
		*node = (struct stp_side_node){ .mode = in->mode, .uid = in->uid, .gid = in->gid,
						.size = in->size, .ino = ino, .inode = *in };
		if (S_ISCHR(in->mode) || S_ISBLK(in->mode)) {
			node->rdev_major = stp_cli_rdev_major(in);
			node->rdev_minor = stp_cli_rdev_minor(in);
		}
		return 0;
	}
	if ((err = open_beneath(side, path, O_PATH, &fd, &st)))
		return err;
	close(fd);
	*node = (struct stp_side_node){ .mode = st.st_mode, .uid = st.st_uid, .gid = st.st_gid,
					.size = (uint64_t)st.st_size,
					.dev = st.st_dev, .ino = st.st_ino,
					.rdev_major = major(st.st_rdev),
					.rdev_minor = minor(st.st_rdev) };
	return 0;
}

static int name_order(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int push_name(char ***names, size_t *n, size_t *cap, const char *name)
{
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		char **p = realloc(*names, c * sizeof(*p));

		if (!p)
			return -ENOMEM;
		*names = p;
		*cap = c;
	}
	if (!((*names)[*n] = strdup(name)))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int list_image(struct stp_side *side, const struct stp_inode *dir, char ***names,
		      size_t *n, size_t *cap)
{
	for (uint32_t i = 0; i < dir->count; i++) {
		char name[STP_NAME_MAX + 1];
		struct stp_dirent d;
		int err = stp_image_dirent(side->img, dir, i, &d, name);

		if (err || (err = push_name(names, n, cap, name)))
			return err;
	}
	return 0;
}

static int list_dir(const struct stp_side *s, const char *path,
		    const struct stp_side_node *node, char ***names, size_t *n, size_t *cap)
{
	struct dirent *e;
	DIR *d = NULL;
	int fd, err = open_node(s, path, node, O_RDONLY | O_DIRECTORY, &fd);

	if (!err && !(d = fdopendir(fd))) {
		err = -errno;
		close(fd);
	}
	if (err)
		return err;
	errno = 0;
	while (!err && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			err = push_name(names, n, cap, e->d_name);
	if (!err && errno)
		err = -errno;
	closedir(d);
	return err;
}

int stp_side_list(struct stp_side *side, const char *path, const struct stp_side_node *node,
		  char ***names, size_t *count)
{
	size_t cap = 0;
	int err;

	*names = NULL;
	*count = 0;
	if (side->img)
		err = list_image(side, &node->inode, names, count, &cap);
	else
		err = list_dir(side, path, node, names, count, &cap);
	if (err) {
		stp_side_free_names(*names, *count);
		return err;
	}
	if (*count)
		qsort(*names, *count, sizeof(**names), name_order);
	return 0;
}

void stp_side_free_names(char **names, size_t count)
{
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
}

int stp_side_readlink(struct stp_side *side, const char *path, const struct stp_side_node *node,
		      char target[STP_LINK_MAX + 1], size_t *len)
{
	ssize_t n;
	int err, fd;

	if (side->img)
		return stp_image_readlink(side->img, &node->inode, target, len);
	if ((err = open_node(side, path, node, O_PATH, &fd)))
		return err;
	n = readlinkat(fd, "", target, STP_LINK_MAX + 1);
	err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	if (n > STP_LINK_MAX)
		return -ENAMETOOLONG;
	target[n] = 0;
	*len = (size_t)n;
	return 0;
}

static int xattr_order(const void *a, const void *b)
{
	return strcmp(((const struct stp_side_xattr *)a)->name,
		      ((const struct stp_side_xattr *)b)->name);
}

static int image_xattr(struct stp_side *side, const struct stp_inode *in, uint32_t i,
		       struct stp_side_xattr *x)
{
	char name[STP_XATTR_NAME_MAX + 1];
	struct stp_xattr rec;
	int err = stp_image_xattr(side->img, in, i, &rec, name);

	if (err)
		return err;
	x->name = strdup(name);
	x->value = malloc(rec.value_len ? rec.value_len : 1);
	x->len = rec.value_len;
	if (!x->name || !x->value)
		return -ENOMEM;
	return stp_image_xattr_value(side->img, &rec, x->value);
}

static int file_xattr(const char *full, const char *name, struct stp_side_xattr *x)
{
	ssize_t n = getxattr(full, name, NULL, 0);

	x->name = strdup(name);
	if (n < 0)
		return -errno;
	x->value = malloc((size_t)n + 1);
	if (!x->name || !x->value)
		return -ENOMEM;
	n = getxattr(full, name, x->value, (size_t)n);
	if (n < 0)
		return -errno;
	x->len = (size_t)n;
	return 0;
}

static int file_xattrs(const char *full, struct stp_side_xattr **xs, size_t *count)
{
	ssize_t len = listxattr(full, NULL, 0);
	char *list;
	int err = 0;

	if (len <= 0)
		return len < 0 && errno != ENOTSUP ? -errno : 0;
	if (!(list = malloc((size_t)len)) || (len = listxattr(full, list, (size_t)len)) < 0) {
		err = list ? -errno : -ENOMEM;
		free(list);
		return err;
	}
	for (char *p = list; p < list + len; p += strlen(p) + 1)
		(*count)++;
	*xs = calloc(*count ? *count : 1, sizeof(**xs));
	*count = 0;
	for (char *p = list; *xs && !err && p < list + len; p += strlen(p) + 1)
		err = file_xattr(full, p, &(*xs)[(*count)++]);
	free(list);
	return *xs ? err : -ENOMEM;
}

int stp_side_xattrs(struct stp_side *side, const char *path, const struct stp_side_node *node,
		    struct stp_side_xattr **xattrs, size_t *count)
{
	char full[40];
	int err = 0, fd;

	*xattrs = NULL;
	*count = 0;
	if (side->img) {
		uint32_t n = node->inode.xattr_count;
		uint64_t total;

		/* all of them are held at once: a total the format allows may be too much */
		if ((err = stp_image_xattr_sizes(side->img, &node->inode, &total)))
			return err;
		if (total > STP_XATTR_HELD_MAX)
			return -EFBIG;
		if (n && !(*xattrs = calloc(n, sizeof(**xattrs))))
			return -ENOMEM;
		for (; !err && *count < n; (*count)++)
			err = image_xattr(side, &node->inode, (uint32_t)*count, &(*xattrs)[*count]);
	} else {
		/* through /proc: an O_PATH descriptor has no fgetxattr, and a symlink or a
		 * device is not to be opened for reading */
		if ((err = open_node(side, path, node, O_PATH, &fd)))
			return err;
		snprintf(full, sizeof(full), "/proc/self/fd/%d", fd);
		err = file_xattrs(full, xattrs, count);
		close(fd);
	}
	if (!err && *count)
		qsort(*xattrs, *count, sizeof(**xattrs), xattr_order);
	return err;
}

void stp_side_free_xattrs(struct stp_side_xattr *xattrs, size_t count)
{
	for (size_t i = 0; xattrs && i < count; i++) {
		free(xattrs[i].name);
		free(xattrs[i].value);
	}
	free(xattrs);
}

int stp_side_file_open(struct stp_side *side, const char *path,
		       const struct stp_side_node *node, struct stp_side_file **out)
{
	struct stp_side_file *f = calloc(1, sizeof(*f));
	int err = 0;

	if (!f)
		return -ENOMEM;
	*f = (struct stp_side_file){ .side = side, .inode = node->inode, .fd = -1 };
	if (side->img && !side->cache)
		err = stp_cache_new(side->img, 2, 1, &side->cache);
	if (side->img)
		f->cache = side->cache;
	else
		err = open_node(side, path, node, O_RDONLY, &f->fd);
	if (err) {
		stp_side_file_close(f);
		return err;
	}
	*out = f;
	return 0;
}

ssize_t stp_side_file_read(struct stp_side_file *f, void *buf, size_t len)
{
	ssize_t n;

	if (f->cache)
		n = stp_file_read(f->side->img, f->cache, &f->inode, f->off, len, buf);
	else
		do
			n = read(f->fd, buf, len);
		while (n < 0 && errno == EINTR);
	if (n < 0)
		return f->cache ? n : -errno;
	f->off += (uint64_t)n;
	return n;
}

void stp_side_file_close(struct stp_side_file *f)
{
	if (!f)
		return;
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}
