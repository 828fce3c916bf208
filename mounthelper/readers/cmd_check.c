/* SPDX-License-Identifier: MIT */
/*
 * `stipple check`: verify an image completely. Opening it checks the superblock, the
 * metadata and the dictionary against their checksums; then every data block is read
 * and decoded, and the tree is walked to check what the checksums cannot: that every
 * inode is reached as many times as its link count says, that directories are sorted
 * and point back to their parent, that extents are ordered and inside their file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "image.h"

static const struct stp_cli check_cli = {
	.name = "check",
	.synopsis = "IMAGE",
	.summary = "Verify every checksum of IMAGE, decode every data block, and check that\n"
		   "the metadata is consistent. Exits 1 and names each problem if any.",
	.options = NULL,
};

struct check {
	const struct stp_image *img;
	const char *image;
	const struct stp_superblock *sb;
	uint32_t *names;       /* per inode: directory entries naming it */
	uint32_t *subdirs;     /* per directory inode: its subdirectories */
	uint8_t *bad_block;    /* per block: failed to decode */
	struct last_name *last; /* per depth */
	uint64_t blocks_bad, entries;
	unsigned long problems; /* found outside the walk */
};

static void check_problem(struct check *c, const char *what)
{
	stp_cli_problem(&check_cli, c->image, NULL, "%s", what);
	c->problems++;
}

static void check_file_size(struct check *c)
{
	struct stat st;

	if (fstat(stp_image_fd(c->img), &st))
		return;
	if ((uint64_t)st.st_size < c->sb->image_size)
		check_problem(c, "the file is shorter than the image: truncated");
	else if ((uint64_t)st.st_size > c->sb->image_size)
		check_problem(c, "the file has bytes past the end of the image");
	if (c->sb->hot_size > c->sb->data_size)
		check_problem(c, "the hot region is larger than the data");
}

static void check_blocks(struct check *c)
{
	void *buf = malloc(stp_image_block_buffer_size(c->img));

	if (!buf) {
		check_problem(c, "out of memory for a block");
		return;
	}
	for (uint64_t b = 0; b < c->sb->block_count; b++) {
		struct stp_blockent be;
		int err = stp_image_block(c->img, b, &be);

		if (!err && (be.offset < STP_SB_SIZE || be.offset > c->sb->image_size ||
			     be.stored_size > c->sb->image_size - be.offset))
			err = -EUCLEAN;
		if (!err)
			err = stp_image_decode_block(c->img, b, buf);
		if (err) {
			stp_cli_problem(&check_cli, c->image, NULL, "data block %" PRIu64 ": %s",
					b, stp_cli_strerror(err));
			c->bad_block[b] = 1;
			c->blocks_bad++;
		}
	}
	free(buf);
}

/* The last name seen at each depth, to check that a directory's entries ascend. */
struct last_name {
	uint32_t dir;
	uint16_t len;
	char name[STP_NAME_MAX];
};
#define CHECK_DEPTH_MAX (STP_WALK_PATH_MAX / 2 + 1)

/* Entry E against its previous sibling, and its type against its inode's. */
static void check_dirent(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct check *c = w->ctx;
	struct last_name *last = &c->last[e->depth];

	if (e->index > 0 && last->dir == e->dir &&
	    stp_name_cmp(last->name, last->len, e->name, e->name_len) >= 0)
		stp_walk_problem(w, e->path, "entry %u is out of order or a duplicate", e->index);
	last->dir = e->dir;
	last->len = (uint16_t)e->name_len;
	memcpy(last->name, e->name, e->name_len);
	if (stp_mode_dtype(e->inode.mode) != e->dtype)
		stp_walk_problem(w, e->path, "the directory entry's type differs from the inode's");
}

static void check_directory(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct check *c = w->ctx;

	if (e->inode.parent != e->dir)
		stp_walk_problem(w, e->path, "parent is inode %u, but it is listed in inode %u",
				 e->inode.parent, e->dir);
	if (e->inode.size != e->inode.count)
		stp_walk_problem(w, e->path, "size %" PRIu64 " differs from the entry count %u",
				 e->inode.size, e->inode.count);
	if (e->depth > 0)
		c->subdirs[e->dir]++;
}

static void check_extent_blocks(struct stp_walk *w, const struct stp_walk_entry *e,
				const struct stp_extent *x)
{
	struct check *c = w->ctx;
	uint32_t bs = stp_image_block_size(c->img);

	if (!x->length)
		return;
	for (uint64_t b = x->stream_off / bs; b <= (x->stream_off + x->length - 1) / bs; b++)
		if (b < c->sb->block_count && c->bad_block[b])
			stp_walk_problem(w, e->path, "its data lies in damaged block %" PRIu64, b);
}

static void check_extents(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct check *c = w->ctx;
	uint64_t end = 0;

	for (uint32_t i = 0; i < e->inode.count; i++) {
		struct stp_extent x;
		int err = stp_image_extent(c->img, &e->inode, i, &x);

		if (err) {
			stp_walk_problem(w, e->path, "extent %u: %s", i, stp_cli_strerror(err));
			return;
		}
		if (!x.length)
			stp_walk_problem(w, e->path, "extent %u is empty", i);
		if (x.file_off < end)
			stp_walk_problem(w, e->path, "extent %u overlaps or precedes extent %u", i,
					 i - 1);
		if (x.file_off > e->inode.size || x.length > e->inode.size - x.file_off)
			stp_walk_problem(w, e->path, "extent %u ends past the file's size", i);
		if (x.stream_off > c->sb->data_size || x.length > c->sb->data_size - x.stream_off)
			stp_walk_problem(w, e->path, "extent %u ends past the data stream", i);
		else
			check_extent_blocks(w, e, &x);
		end = x.file_off + x.length;
	}
}

static void check_symlink(struct stp_walk *w, const struct stp_walk_entry *e)
{
	const char *target;
	size_t len;
	int err = stp_image_readlink(w->img, &e->inode, &target, &len);

	if (err)
		stp_walk_problem(w, e->path, "symlink target: %s", stp_cli_strerror(err));
	else if (len == 0 || memchr(target, '\0', len))
		stp_walk_problem(w, e->path, "symlink target is empty or holds a NUL byte");
}

static void check_xattrs(struct stp_walk *w, const struct stp_walk_entry *e)
{
	for (uint32_t i = 0; i < e->inode.xattr_count; i++) {
		const char *name;
		const void *value;
		size_t nlen, vlen;
		int err = stp_image_xattr(w->img, &e->inode, i, &name, &nlen, &value, &vlen);

		if (err)
			stp_walk_problem(w, e->path, "extended attribute %u: %s", i,
					 stp_cli_strerror(err));
		else if (!nlen || nlen > STP_NAME_MAX || memchr(name, '\0', nlen))
			stp_walk_problem(w, e->path, "extended attribute %u has a bad name", i);
	}
}

/* What an inode holds, checked the first time a name reaches it. */
static void check_inode(struct stp_walk *w, const struct stp_walk_entry *e)
{
	if (e->inode.mtime_nsec >= 1000000000u)
		stp_walk_problem(w, e->path, "mtime nanoseconds out of range");
	check_xattrs(w, e);
	switch (e->inode.mode & S_IFMT) {
	case S_IFDIR:
		check_directory(w, e);
		break;
	case S_IFREG:
		check_extents(w, e);
		break;
	case S_IFLNK:
		check_symlink(w, e);
		break;
	case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		break;
	default:
		stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
	}
}

static int check_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct check *c = w->ctx;

	if (e->depth > 0) {
		c->names[e->ino]++;
		c->entries++;
		check_dirent(w, e);
	}
	if (c->names[e->ino] <= 1)
		check_inode(w, e);
	return 0;
}

/* A directory's link count: 2 plus its subdirectories, or 1 from a filesystem that
 * does not count them (btrfs). Anything else: as many as the names reaching it. */
static int link_count_ok(const struct check *c, uint32_t ino, const struct stp_inode *inode)
{
	if (S_ISDIR(inode->mode))
		return inode->nlink == 1 || inode->nlink == 2 + c->subdirs[ino];
	return inode->nlink == c->names[ino];
}

/* Second walk, only when link counts are wrong: name each such inode once. */
static int report_link_count(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct check *c = w->ctx;

	if (!c->names[e->ino] && e->ino != STP_ROOT_INO)
		return 0; /* reported already */
	if (!link_count_ok(c, e->ino, &e->inode))
		stp_walk_problem(w, e->path, "link count %u, but %u %s", e->inode.nlink,
				 S_ISDIR(e->inode.mode) ? c->subdirs[e->ino] : c->names[e->ino],
				 S_ISDIR(e->inode.mode) ? "subdirectories" : "names");
	c->names[e->ino] = 0;
	return 0;
}

/* Unreachable inodes, and whether any link count is wrong. */
static int check_reachability(struct check *c, unsigned long *problems)
{
	int wrong = 0;

	for (uint32_t i = 0; i < c->sb->inode_count; i++) {
		struct stp_inode inode;

		if (i == STP_ROOT_INO || c->names[i]) {
			if (!stp_image_inode(c->img, i, &inode) && !link_count_ok(c, i, &inode))
				wrong = 1;
			continue;
		}
		stp_cli_problem(&check_cli, c->image, NULL, "inode %u is not reached from the root",
				i);
		(*problems)++;
	}
	return wrong;
}

static int check_tree(struct check *c, unsigned long *problems)
{
	uint32_t n = c->sb->inode_count ? c->sb->inode_count : 1;
	struct stp_walk walk = { .cli = &check_cli, .img = c->img, .image = c->image,
				 .enter = check_entry, .ctx = c };
	int err;

	c->names = calloc(n, sizeof(*c->names));
	c->subdirs = calloc(n, sizeof(*c->subdirs));
	c->last = calloc(CHECK_DEPTH_MAX, sizeof(*c->last));
	if (!c->names || !c->subdirs || !c->last)
		return -ENOMEM;
	err = stp_walk_tree(&walk);
	if (err)
		return err;
	*problems += walk.problems;
	if (!walk.problems && check_reachability(c, problems)) {
		walk.enter = report_link_count;
		err = stp_walk_tree(&walk);
		*problems += walk.problems;
	}
	return err;
}

static void print_summary(const struct check *c)
{
	printf("%s: OK: %u inodes, %" PRIu64 " entries, %" PRIu64 " blocks, %" PRIu64
	       " bytes of data verified\n", c->image, c->sb->inode_count, c->entries,
	       c->sb->block_count, c->sb->data_size);
}

static int check_run(const char *image)
{
	struct check c = { .image = image };
	struct stp_image *img;
	unsigned long problems = 0;
	int err;

	if (stp_cli_open(&check_cli, image, &img))
		return STP_EXIT_FAIL;
	c.img = img;
	c.sb = stp_image_sb(img);
	c.bad_block = calloc(c.sb->block_count ? c.sb->block_count : 1, 1);
	err = c.bad_block ? 0 : -ENOMEM;
	if (!err) {
		check_file_size(&c);
		check_blocks(&c);
		err = check_tree(&c, &problems);
	}
	problems += c.problems + c.blocks_bad;
	if (err)
		stp_cli_problem(&check_cli, image, NULL, "check stopped: %s", stp_cli_strerror(err));
	else if (problems)
		stp_cli_problem(&check_cli, image, NULL, "%lu problems found", problems);
	else
		print_summary(&c);
	free(c.names);
	free(c.subdirs);
	free(c.last);
	free(c.bad_block);
	stp_image_close(img);
	return err || problems ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_check(int argc, char **argv)
{
	static const struct option longopts[] = { STP_CLI_LONGOPTS, { 0 } };
	int opt, status;

	stp_cli_init(&check_cli, argv);
	while ((opt = getopt_long(argc, argv, STP_CLI_SHORTOPTS, longopts, NULL)) != -1)
		return stp_cli_other_option(&check_cli, opt);
	if ((status = stp_cli_operands(&check_cli, argc, 1, 1)))
		return status;
	return check_run(argv[optind]);
}
