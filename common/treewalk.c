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

int stp_range_order_next(struct stp_range_order *o, uint32_t ino, const struct stp_inode *in,
			 uint32_t *prev)
{
	uint64_t *end = S_ISREG(in->mode) ? &o->file_end : S_ISDIR(in->mode) ? &o->dir_end : NULL;
	uint32_t *last = S_ISREG(in->mode) ? &o->file_ino : &o->dir_ino;

	if (!end || !in->count)
		return 0;
	if (in->data < *end) {
		*prev = *last;
		return -EUCLEAN;
	}
	*end = in->data + in->count;
	*last = ino;
	return 0;
}

int stp_treewalk_files(const struct stp_image *img, stp_files_fn fn, void *ctx)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct stp_range_order order = { 0 };

	for (uint32_t i = 0; i < sb->inode_count; i++) {
		struct stp_inode in;
		uint32_t prev;
		int rc;

		if (stp_image_inode(img, i, &in))
			continue;
		if (stp_range_order_next(&order, i, &in, &prev))
			return STP_CORRUPT(stp_image_path(img), "inode %u: its %s records overlap "
					   "or precede those of inode %u", i,
					   S_ISREG(in.mode) ? "extent" : "directory entry", prev);
		if (!S_ISREG(in.mode) || !fn)
			continue;
		rc = fn(ctx, i, &in);
		if (rc)
			return rc;
	}
	return 0;
}

/* A directory being walked: its inode, the next entry, and what its own entry said. */
struct frame {
	struct stp_inode dir;
	uint32_t ino, next;
	uint32_t parent, index; /* the directory listing it, its entry's index there */
	uint32_t bad;           /* entries in a row that did not decode */
	uint8_t dtype;
	size_t path_len, name_len;
};

struct tree {
	const struct stp_image *img;
	const struct stp_treewalk_ops *ops;
	void *ctx;
	uint8_t *seen;        /* one bit per inode: directories entered */
	struct frame *stack;
	size_t depth, cap;
	uint64_t budget;      /* directory entries left to visit */
	uint64_t extents;     /* extent records left to the files not visited yet */
	size_t path_max;
	char buf[PATH_MAX + 1]; /* "/" and then the relative path */
};

#define PATH(t) ((t)->buf + 1)

static int seen_once(struct tree *t, uint32_t ino)
{
	uint8_t bit = (uint8_t)(1u << (ino & 7));

	if (t->seen[ino >> 3] & bit)
		return 0;
	t->seen[ino >> 3] |= bit;
	return 1;
}

/* Grows the stack for one more frame. */
static int reserve(struct tree *t)
{
	struct frame *grown;
	size_t cap;

	if (t->depth < t->cap)
		return 0;
	if (__builtin_mul_overflow(t->cap ? t->cap : 8, 2, &cap))
		return -ENOMEM;
	grown = reallocarray(t->stack, cap, sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	t->stack = grown;
	t->cap = cap;
	return 0;
}

/* Pushes directory E (the root when E is NULL), whose inode is IN or, when IN is NULL,
 * decoded here; a non-directory is not pushed. */
static int push(struct tree *t, const struct stp_tree_entry *e, const struct stp_inode *in)
{
	struct frame *f;
	int rc = reserve(t);

	if (rc)
		return rc;
	f = &t->stack[t->depth];
	if (in)
		f->dir = *in;
	else if (stp_image_inode(t->img, e ? e->ino : STP_ROOT_INO, &f->dir))
		return 0;
	if (!S_ISDIR(f->dir.mode))
		return 0;
	*f = (struct frame){ .dir = f->dir, .ino = e ? e->ino : STP_ROOT_INO };
	if (e) {
		f->parent = e->dir;
		f->index = e->index;
		f->dtype = e->dtype;
		f->path_len = e->path_len;
		f->name_len = e->name_len;
	}
	t->depth++;
	return 0;
}

/* Terminates the path at LEN bytes and describes the entry of frame F. */
static void frame_entry(struct tree *t, const struct frame *f, struct stp_tree_entry *e)
{
	PATH(t)[f->path_len] = '\0';
	*e = (struct stp_tree_entry){
		.path = PATH(t), .path_len = f->path_len, .ino = f->ino, .dir = f->parent,
		.dtype = f->dtype, .depth = (unsigned)t->depth - 1, .rooted = t->buf,
		.name = PATH(t) + f->path_len - f->name_len, .name_len = f->name_len,
		.index = f->index, .inode = t->ops->inodes ? &f->dir : NULL,
	};
}

static int problem(struct tree *t, enum stp_tree_damage what, uint32_t ino, int err)
{
	const struct frame *f = &t->stack[t->depth - 1];
	struct stp_tree_problem p = { what, PATH(t), t->buf, f->ino, f->next - 1, ino, err };

	if (what == STP_TREE_BAD_ENTRY || what == STP_TREE_TOO_LONG || what == STP_TREE_ABANDONED)
		PATH(t)[f->path_len] = '\0';
	return t->ops->problem ? t->ops->problem(t->ctx, &p) : 0;
}

/* Pops the top directory, after its leave call. */
static int pop(struct tree *t)
{
	struct stp_tree_entry e;
	int rc = 0;

	if (t->depth > 1 && t->ops->leave) {
		frame_entry(t, &t->stack[t->depth - 1], &e);
		rc = t->ops->leave(t->ctx, &e);
	}
	t->depth--;
	return rc;
}

/* next_entry found no entry to visit, and the walk goes on. */
#define ENTRY_SKIPPED 2

/* The next entry of the top directory, named in the path buffer, into E: 0 when there
 * was one, ENTRY_SKIPPED, or what the problem callback said. */
static int next_entry(struct tree *t, struct stp_tree_entry *e)
{
	struct frame *f = &t->stack[t->depth - 1];
	struct stp_dirent de;
	char name[STP_NAME_MAX + 1];
	size_t len;
	int rc;

	if (!t->budget--)
		return STP_CORRUPT(stp_image_path(t->img), "directories share entry records");
	rc = stp_image_dirent(t->img, &f->dir, f->next++, &de, name);
	if (rc) {
		rc = problem(t, STP_TREE_BAD_ENTRY, 0, rc);
		if (rc || !t->ops->problem || ++f->bad < STP_TREEWALK_BAD_RUN)
			return rc ?: ENTRY_SKIPPED;
		return problem(t, STP_TREE_ABANDONED, 0, 0) ?: STP_TREEWALK_SKIP;
	}
	f->bad = 0;
	len = f->path_len + (f->path_len > 0) + de.name_len;
	if (len >= t->path_max)
		return problem(t, STP_TREE_TOO_LONG, de.ino, -ENAMETOOLONG) ?: ENTRY_SKIPPED;
	if (f->path_len)
		PATH(t)[f->path_len] = '/';
	memcpy(PATH(t) + len - de.name_len, name, de.name_len);
	PATH(t)[len] = '\0';
	*e = (struct stp_tree_entry){ PATH(t), len, de.ino, f->ino, de.dtype,
				      (unsigned)t->depth, t->buf, PATH(t) + len - de.name_len,
				      de.name_len, f->next - 1, NULL };
	return 0;
}

/* Visits entry E of the top directory: its inode, the once-only rule, enter, descent. */
static int visit(struct tree *t, struct stp_tree_entry *e)
{
	struct stp_inode in;
	int is_dir = e->dtype == DT_DIR, rc;

	if (t->ops->inodes) {
		rc = stp_image_inode(t->img, e->ino, &in);
		if (rc)
			return problem(t, STP_TREE_BAD_INODE, e->ino, rc);
		e->inode = &in;
		is_dir = S_ISDIR(in.mode);
		/* a file's extents are read once per inode, whatever its names */
		if (S_ISREG(in.mode) && seen_once(t, e->ino)) {
			if (in.count > t->extents)
				return STP_CORRUPT(stp_image_path(t->img), "inode %u: files share "
						   "extent records", e->ino);
			t->extents -= in.count;
		}
	}
	if (is_dir && !seen_once(t, e->ino))
		return problem(t, STP_TREE_REVISIT, e->ino, 0);
	rc = t->ops->enter(t->ctx, e);
	if (rc == STP_TREEWALK_SKIP)
		return 0;
	if (!rc && is_dir)
		rc = push(t, e, e->inode);
	return rc;
}

int stp_treewalk(const struct stp_image *img, const struct stp_treewalk_ops *ops, void *ctx)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct tree *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	*t = (struct tree){ .img = img, .ops = ops, .ctx = ctx,
			    .budget = stp_image_meta_header(img)->dirent_count,
			    .extents = stp_image_meta_header(img)->extent_count,
			    .path_max = ops->path_max && ops->path_max < PATH_MAX ? ops->path_max
										  : PATH_MAX };
	t->buf[0] = '/';
	t->seen = calloc(sb->inode_count / 8 + 1, 1);
	rc = t->seen ? 0 : -ENOMEM;
	if (!rc && seen_once(t, STP_ROOT_INO))
		rc = push(t, NULL, NULL);
	while (!rc && t->depth) {
		struct frame *f = &t->stack[t->depth - 1];
		struct stp_tree_entry e;

		if (f->next >= f->dir.count) {
			rc = pop(t);
			continue;
		}
		rc = next_entry(t, &e);
		if (rc == 0)
			rc = visit(t, &e);
		if (rc == ENTRY_SKIPPED)
			rc = 0;
		if (rc == STP_TREEWALK_SKIP) {
			t->stack[t->depth - 1].next = t->stack[t->depth - 1].dir.count;
			rc = 0;
		}
	}
	free(t->seen);
	free(t->stack);
	free(t);
	return rc;
}

int stp_treewalk_tree(const struct stp_image *img, stp_tree_fn fn, void *ctx)
{
	const struct stp_treewalk_ops ops = { .enter = fn };

	return stp_treewalk(img, &ops, ctx);
}
