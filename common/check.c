/* SPDX-License-Identifier: MIT */
/* The strict mode: every block decoded, the whole tree walked (check.h). */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "image.h"
#include "log.h"
#include "treewalk.h"
#include "util.h"

/* Paths as the readers print them: "/a/b", below PATH_MAX (4096) bytes with the NUL. */
#define CHECK_PATH_MAX (STP_LINK_MAX + 1)
/* A path of CHECK_PATH_MAX bytes has at most half as many components. */
#define CHECK_DEPTH_MAX (CHECK_PATH_MAX / 2 + 1)

/* The last name seen at each depth, to check that a directory's entries ascend. */
struct last_name {
	uint32_t dir;
	uint16_t len;
	char name[STP_NAME_MAX];
};

struct checker {
	const struct stp_image *img;
	const struct stp_superblock *sb;
	stp_check_report_fn fn;
	void *ctx;
	struct stp_check_counts *counts;
	uint64_t walk_problems;
	uint32_t *names;       /* per inode: directory entries naming it */
	uint32_t *subdirs;     /* per directory inode: its subdirectories */
	uint8_t *bad_block;    /* per block: failed to decode */
	uint8_t *xattr_owned;  /* per extended attribute record: an inode's (a bit each) */
	struct last_name *last; /* per depth */
};

const char *stp_check_tree_problem(const struct stp_tree_problem *p, char *buf, size_t len)
{
	switch (p->what) {
	case STP_TREE_BAD_ENTRY:
		snprintf(buf, len, "entry %u: %s", p->index,
			 p->err == -EUCLEAN ? "damaged or unsafe name" : stp_strerror(p->err));
		break;
	case STP_TREE_TOO_LONG:
		snprintf(buf, len, "entry %u: path longer than %u bytes", p->index, CHECK_PATH_MAX);
		break;
	case STP_TREE_BAD_INODE:
		snprintf(buf, len, "inode %u: %s", p->ino, stp_strerror(p->err));
		break;
	case STP_TREE_REVISIT:
		snprintf(buf, len, "directory inode %u reached twice (a cycle)", p->ino);
		break;
	case STP_TREE_ABANDONED:
		snprintf(buf, len, "skipping the rest of the directory");
		break;
	}
	return buf;
}

static void __attribute__((format(printf, 3, 4)))
report(struct checker *c, const char *path, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->fn(c->ctx, path, msg);
	c->counts->problems++;
	if (path)
		c->walk_problems++;
}

/* Every metadata page, those no record is read from too. */
static void check_meta_pages(struct checker *c)
{
	for (uint64_t p = 0; p < stp_meta_pages(c->sb); p++) {
		int err = stp_image_check_meta_page(c->img, p);

		if (err)
			report(c, NULL, "metadata page %" PRIu64 ": %s", p, stp_strerror(err));
	}
}

/* The lookup table's records: each a name in a directory (found there or not). */
static void check_lookups(struct checker *c)
{
	char name[STP_NAME_MAX + 1];
	uint32_t dir;

	for (uint32_t i = 0; i < stp_image_meta_header(c->img)->lookup_count; i++) {
		int err = stp_image_lookup_name(c->img, i, &dir, name);

		if (err)
			report(c, NULL, "lookup %" PRIu32 ": %s", i, stp_strerror(err));
	}
}

static void check_blocks(struct checker *c, void *buf)
{
	for (uint64_t b = 0; b < c->sb->block_count; b++) {
		int err = stp_image_decode_block(c->img, b, buf);

		if (!err)
			err = stp_image_check_content(c->img, b);
		if (err) {
			report(c, NULL, "data block %" PRIu64 ": %s", b, stp_strerror(err));
			c->bad_block[b] = 1;
		}
	}
}

/* Each extent record belongs to one file, each entry record to one directory, in inode
 * order (stipple(5)): one pass, nothing held. */
static void check_ownership(struct checker *c)
{
	struct stp_range_order order = { 0 };

	for (uint32_t i = 0; i < c->sb->inode_count; i++) {
		struct stp_inode in;
		uint32_t prev;

		if (!stp_image_inode(c->img, i, &in) && stp_range_order_next(&order, i, &in, &prev))
			report(c, NULL, "inode %u: its %s records overlap or precede those of inode %u",
			       i, S_ISREG(in.mode) ? "extent" : "directory entry", prev);
	}
}

/* Entry E against its previous sibling, and its type against its inode's. */
static void check_dirent(struct checker *c, const struct stp_tree_entry *e)
{
	struct last_name *last = &c->last[e->depth];

	if (e->index > 0 && last->dir == e->dir &&
	    stp_name_cmp(last->name, last->len, e->name, e->name_len) >= 0)
		report(c, e->rooted, "entry %u is out of order or a duplicate", e->index);
	last->dir = e->dir;
	last->len = (uint16_t)e->name_len;
	memcpy(last->name, e->name, e->name_len);
	if (stp_mode_dtype(e->inode->mode) != e->dtype)
		report(c, e->rooted, "the directory entry's type differs from the inode's");
}

static void check_extent_blocks(struct checker *c, const char *path, const struct stp_extent *x)
{
	const struct stp_superblock *sb = stp_image_sb(c->img);
	uint64_t last = stp_sb_block_of(sb, x->stream_off + x->length - 1);

	for (uint64_t b = stp_sb_block_of(sb, x->stream_off); b <= last; b++)
		if (c->bad_block[b])
			report(c, path, "its data lies in damaged block %" PRIu64, b);
}

/* stp_image_extent checked each extent's bounds; the order is left. */
static void check_extents(struct checker *c, const char *path, const struct stp_inode *in)
{
	uint64_t end = 0;

	for (uint32_t i = 0; i < in->count; i++) {
		struct stp_extent x;
		int err = stp_image_extent(c->img, in, i, &x);

		if (err) {
			report(c, path, "extent %u: %s", i, stp_strerror(err));
			return;
		}
		if (x.file_off < end)
			report(c, path, "extent %u overlaps or precedes extent %u", i, i - 1);
		check_extent_blocks(c, path, &x);
		end = x.file_off + x.length;
	}
}

static void check_symlink(struct checker *c, const char *path, const struct stp_inode *in)
{
	char target[STP_LINK_MAX + 1];
	size_t len;
	int err = stp_image_readlink(c->img, in, target, &len);

	if (err)
		report(c, path, "symlink target: %s", stp_strerror(err));
}

/* IN's attributes: each sound, names sorted and within XATTR_LIST_MAX (stipple(5)), and
 * none of its records another inode's too, which would let an image make every file
 * claim one large table (each reader walking it per file). */
static void check_xattrs(struct checker *c, const char *path, const struct stp_inode *in)
{
	uint64_t values;
	int err = stp_image_xattr_sizes(c->img, in, &values);

	if (err) {
		report(c, path, "extended attributes: %s", stp_strerror(err));
		return;
	}
	for (uint32_t i = 0; i < in->xattr_count; i++) {
		uint32_t n = in->xattr_first + i;
		uint8_t bit = (uint8_t)(1u << (n % 8));

		if (c->xattr_owned[n / 8] & bit) {
			report(c, path, "extended attribute %u: another inode's too", n);
			return;
		}
		c->xattr_owned[n / 8] |= bit;
	}
}

/* What inode IN holds, checked the first time a name reaches it; DIR lists it. */
static void check_inode(struct checker *c, const char *path, uint32_t dir,
			const struct stp_inode *in)
{
	check_xattrs(c, path, in);
	if (S_ISDIR(in->mode) && in->parent != dir)
		report(c, path, "parent is inode %u, but it is listed in inode %u", in->parent,
		       dir);
	else if (S_ISREG(in->mode))
		check_extents(c, path, in);
	else if (S_ISLNK(in->mode))
		check_symlink(c, path, in);
}

static int check_entry(void *ctx, const struct stp_tree_entry *e)
{
	struct checker *c = ctx;

	c->names[e->ino]++;
	c->counts->entries++;
	check_dirent(c, e);
	if (S_ISDIR(e->inode->mode))
		c->subdirs[e->dir]++;
	if (c->names[e->ino] <= 1)
		check_inode(c, e->rooted, e->dir, e->inode);
	return 0;
}

static int tree_problem(void *ctx, const struct stp_tree_problem *p)
{
	struct checker *c = ctx;
	char msg[128];

	stp_check_tree_problem(p, msg, sizeof(msg));
	if (p->what == STP_TREE_ABANDONED) {
		c->fn(c->ctx, p->rooted, msg);
		return 0;
	}
	report(c, p->rooted, "%s", msg);
	return 0;
}

static int link_count_ok(const struct checker *c, uint32_t ino, const struct stp_inode *in)
{
	if (S_ISDIR(in->mode))
		return in->nlink == 1 || in->nlink == 2 + c->subdirs[ino];
	return in->nlink == c->names[ino];
}

/* The second walk, only when link counts are wrong: name each such inode once. */
static void report_link_count(struct checker *c, const char *path, uint32_t ino,
			      const struct stp_inode *in)
{
	if (!c->names[ino] && ino != STP_ROOT_INO)
		return; /* reported already */
	if (!link_count_ok(c, ino, in))
		report(c, path, "link count %u, but %u %s", in->nlink,
		       S_ISDIR(in->mode) ? c->subdirs[ino] : c->names[ino],
		       S_ISDIR(in->mode) ? "subdirectories" : "names");
	c->names[ino] = 0;
}

static int link_count_entry(void *ctx, const struct stp_tree_entry *e)
{
	report_link_count(ctx, e->rooted, e->ino, e->inode);
	return 0;
}

/* Unreachable inodes; returns whether any link count is wrong. */
static int check_reachability(struct checker *c)
{
	int wrong = 0;

	for (uint32_t i = 0; i < c->sb->inode_count; i++) {
		struct stp_inode in;

		if (i == STP_ROOT_INO || c->names[i]) {
			if (!stp_image_inode(c->img, i, &in) && !link_count_ok(c, i, &in))
				wrong = 1;
			continue;
		}
		report(c, NULL, "inode %u is not reached from the root", i);
	}
	return wrong;
}

static int check_tree(struct checker *c)
{
	struct stp_treewalk_ops ops = { .enter = check_entry, .problem = tree_problem,
					.path_max = CHECK_PATH_MAX - 1, .inodes = 1 };
	struct stp_inode root;
	int err = stp_image_inode(c->img, STP_ROOT_INO, &root); /* checked at open */

	if (err)
		return err;
	check_inode(c, "/", STP_ROOT_INO, &root);
	err = stp_treewalk(c->img, &ops, c);
	if (err || c->walk_problems || !check_reachability(c))
		return err;
	report_link_count(c, "/", STP_ROOT_INO, &root);
	ops.enter = link_count_entry;
	return stp_treewalk(c->img, &ops, c);
}

int stp_image_check_all(const struct stp_image *img, stp_check_report_fn fn, void *ctx,
			struct stp_check_counts *counts)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	struct checker c = { .img = img, .sb = sb, .fn = fn, .ctx = ctx, .counts = counts };
	void *buf = malloc(stp_image_block_buffer_size(img));
	int err = -ENOMEM;

	*counts = (struct stp_check_counts){ 0 };
	c.names = calloc(sb->inode_count, sizeof(*c.names));
	c.subdirs = calloc(sb->inode_count, sizeof(*c.subdirs));
	c.bad_block = calloc(sb->block_count + 1, 1);
	c.last = calloc(CHECK_DEPTH_MAX, sizeof(*c.last));
	c.xattr_owned = calloc(stp_image_meta_header(img)->xattr_count / 8 + 1, 1);
	if (buf && c.names && c.subdirs && c.bad_block && c.last && c.xattr_owned) {
		check_meta_pages(&c);
		check_blocks(&c, buf);
		check_ownership(&c);
		check_lookups(&c);
		err = check_tree(&c);
	}
	free(buf);
	free(c.names);
	free(c.subdirs);
	free(c.bad_block);
	free(c.last);
	free(c.xattr_owned);
	return err;
}
