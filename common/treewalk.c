/* SPDX-License-Identifier: MIT */
#include "treewalk.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "log.h"

int stp_treewalk_files(const struct stp_image *img, stp_files_fn fn, void *ctx)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint64_t budget = stp_image_meta_header(img)->extent_count;

	for (uint32_t i = 0; i < sb->inode_count; i++) {
		struct stp_inode in;
		int rc;

		if (stp_image_inode(img, i, &in) || !S_ISREG(in.mode))
			continue;
		if (in.count > budget)
			return STP_CORRUPT(stp_image_path(img),
					   "inode %u: files share extent records", i);
		budget -= in.count;
		rc = fn(ctx, i, &in);
		if (rc)
			return rc;
	}
	return 0;
}

/* A directory being walked: its inode, the next entry, where its path ends. */
struct frame {
	struct stp_inode dir;
	uint32_t ino, next;
	size_t path_len;
};

struct tree {
	const struct stp_image *img;
	uint8_t *seen;        /* one bit per inode: directories entered */
	struct frame *stack;
	size_t depth, cap;
	uint64_t budget;      /* directory entries left to visit */
	char path[PATH_MAX];
};

static int seen_once(struct tree *t, uint32_t ino)
{
	uint8_t bit = (uint8_t)(1u << (ino & 7));

	if (t->seen[ino >> 3] & bit)
		return 0;
	t->seen[ino >> 3] |= bit;
	return 1;
}

/* Pushes directory INO, whose path is the first PATH_LEN bytes of t->path. */
static int push(struct tree *t, uint32_t ino, size_t path_len)
{
	struct frame *f;

	if (!seen_once(t, ino))
		return 0;
	if (t->depth == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct frame *grown = reallocarray(t->stack, cap, sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		t->stack = grown;
		t->cap = cap;
	}
	f = &t->stack[t->depth];
	if (stp_image_inode(t->img, ino, &f->dir) || !S_ISDIR(f->dir.mode))
		return 0;
	f->ino = ino;
	f->next = 0;
	f->path_len = path_len;
	t->depth++;
	return 0;
}

/* The next entry of the top directory into E; 1 when there was one, 0 when the
 * directory is done, or a negative errno. */
static int next_entry(struct tree *t, struct stp_tree_entry *e)
{
	struct frame *f = &t->stack[t->depth - 1];
	struct stp_dirent de;
	const char *name;
	size_t len;

	while (f->next < f->dir.count) {
		if (!t->budget--)
			return STP_CORRUPT(stp_image_path(t->img),
					   "directories share entry records");
		if (stp_image_dirent(t->img, &f->dir, f->next++, &de, &name))
			continue;
		len = f->path_len + (f->path_len > 0) + de.name_len;
		if (len >= sizeof(t->path))
			continue;
		if (f->path_len)
			t->path[f->path_len] = '/';
		memcpy(t->path + len - de.name_len, name, de.name_len);
		t->path[len] = '\0';
		*e = (struct stp_tree_entry){ t->path, len, de.ino, f->ino, de.dtype,
					      (unsigned)t->depth };
		return 1;
	}
	return 0;
}

int stp_treewalk_tree(const struct stp_image *img, stp_tree_fn fn, void *ctx)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct tree t = { .img = img,
			  .budget = stp_image_meta_header(img)->dirent_count };
	int rc;

	t.seen = calloc(sb->inode_count / 8 + 1, 1);
	rc = t.seen ? push(&t, STP_ROOT_INO, 0) : -ENOMEM;
	while (!rc && t.depth) {
		struct stp_tree_entry e;

		rc = next_entry(&t, &e);
		if (rc == 0) {
			t.depth--;
			continue;
		}
		if (rc < 0)
			break;
		rc = fn(ctx, &e);
		if (!rc && e.dtype == DT_DIR)
			rc = push(&t, e.ino, e.path_len);
	}
	free(t.seen);
	free(t.stack);
	return rc;
}
