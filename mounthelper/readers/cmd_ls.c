/* SPDX-License-Identifier: MIT */
/* `stipple ls`: list a directory of the image, or one entry, like ls -ln; with -R the
 * tree below it, as ls -R orders it; with --json one document of every entry. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "jsonout.h"
#include "treewalk.h"
#include "util.h"

static const struct stp_cli ls_cli = {
	.name = "ls",
	.synopsis = "[-lRh] [--blocks] [--json] IMAGE [PATH]",
	.summary = "List directory PATH of IMAGE (default: the root), or the entry PATH itself.",
	.options = "  -l, --long             mode, links, uid, gid, size, mtime, name and link\n"
		   "                         target; a + after the mode marks POSIX ACLs\n"
		   "  -R, --recursive        list the directories below too, as ls -R does\n"
		   "  -h, --human-readable   sizes as 1.5K, 20M, as ls -h (help is --help)\n"
		   "      --blocks           first the bytes each file takes stored and the\n"
		   "                         data blocks it lies in (12-14,20; - for none)\n"
		   "      --json             one JSON document instead (stipple(1))\n",
	.own_h = 1,
};

struct ls_opts {
	int long_format, recursive, human, blocks, json;
};

struct ls_state {
	const struct stp_image *img;
	const char *image;
	struct ls_opts o;
	int acl_column;     /* the listing has an ACL: the others get a space there */
	unsigned long json_entries; /* --json: entries written so far */
	uint8_t *seen;      /* -R: directory inodes listed, one bit each */
	unsigned long listed; /* -R: directories listed so far */
	int failed;
};

/* Inclusive runs of block numbers a file lies in, and its share of their stored bytes. */
struct block_runs {
	uint64_t (*run)[2];
	size_t n, cap;
	double stored;
};

/* ls -h: powers of 1024, rounded up, one decimal below 10 ("1.0K", "9.8K", "98K"). */
static const char *human_size(uint64_t n, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	uint64_t base = 1024, whole, tenths;
	int u = 0;

	if (n < 1024) {
		snprintf(buf, len, "%" PRIu64, n);
		return buf;
	}
	while (u < 5 && n / base >= 1024) {
		base *= 1024;
		u++;
	}
	whole = n / base;
	if (whole < 10) {
		tenths = ((n % base) * 10 + base - 1) / base;
		whole += tenths / 10;
		if (whole < 10) {
			snprintf(buf, len, "%" PRIu64 ".%" PRIu64 "%c", whole, tenths % 10, units[u]);
			return buf;
		}
	} else if (n % base && ++whole == 1024 && u < 5) {
		snprintf(buf, len, "1.0%c", units[u + 1]);
		return buf;
	}
	snprintf(buf, len, "%" PRIu64 "%c", whole, units[u]);
	return buf;
}

static void print_size(const struct ls_state *st, uint64_t n, int width)
{
	char buf[32];

	if (st->o.human)
		printf(" %*s", width, human_size(n, buf, sizeof(buf)));
	else
		printf(" %*" PRIu64, width, n);
}

static void print_time(int64_t sec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	char buf[32];

	if (!localtime_r(&t, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M", &tm))
		strcpy(buf, "?");
	printf(" %s", buf);
}

static void print_size_field(const struct ls_state *st, const struct stp_inode *inode)
{
	if (S_ISCHR(inode->mode) || S_ISBLK(inode->mode))
		printf(" %4u, %4u", stp_cli_rdev_major(inode), stp_cli_rdev_minor(inode));
	else
		print_size(st, inode->size, st->o.human ? 5 : 10);
}

/* Whether INODE has a POSIX ACL (system.posix_acl_access or _default), as ls -l's +. */
static int has_acl(const struct stp_image *img, const struct stp_inode *inode)
{
	struct stp_xattr x;

	/* bisected (names are sorted): ls -l stays O(log n) per file. A damaged
	 * attribute is reported by the library; no + for what cannot be read. */
	return !stp_image_xattr_find(img, inode, "system.posix_acl_access", &x) ||
	       !stp_image_xattr_find(img, inode, "system.posix_acl_default", &x);
}

static int add_block(struct block_runs *r, uint64_t b)
{
	if (r->n && (r->run[r->n - 1][1] + 1 == b || r->run[r->n - 1][1] == b)) {
		r->run[r->n - 1][1] = b;
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;
		void *p = realloc(r->run, cap * sizeof(*r->run));

		if (!p)
			return -ENOMEM;
		r->run = p;
		r->cap = cap;
	}
	r->run[r->n][0] = r->run[r->n][1] = b;
	r->n++;
	return 0;
}

/* The blocks under stream bytes [OFF, OFF + LEN), and the stored bytes of each in
 * proportion to the decoded bytes of it that the range covers. */
static int add_stream_range(const struct stp_image *img, struct block_runs *r, uint64_t off,
			    uint64_t len)
{
	const struct stp_superblock *sb = stp_image_sb(img);

	while (len) {
		uint64_t b = stp_sb_block_of(sb, off), blen = stp_sb_block_len(sb, b);
		uint64_t in = stp_sb_block_end(sb, b) - off, part = in < len ? in : len;
		struct stp_blockent be;
		int err = stp_image_block(img, b, &be);

		if (err)
			return err;
		r->stored += blen ? (double)be.stored_size * (double)part / (double)blen : 0;
		if ((err = add_block(r, b)))
			return err;
		off += part;
		len -= part;
	}
	return 0;
}

static int file_blocks(const struct stp_image *img, const struct stp_inode *inode,
		       struct block_runs *r)
{
	if (!S_ISREG(inode->mode))
		return 0;
	for (uint32_t i = 0; i < inode->count; i++) {
		struct stp_extent e;
		int err = stp_image_extent(img, inode, i, &e);

		if (!err && e.length)
			err = add_stream_range(img, r, e.stream_off, e.length);
		if (err)
			return err;
	}
	return 0;
}

static void print_block_runs(const struct block_runs *r)
{
	if (!r->n)
		fputs(" -", stdout);
	for (size_t i = 0; i < r->n; i++) {
		printf("%c%" PRIu64, i ? ',' : ' ', r->run[i][0]);
		if (r->run[i][1] != r->run[i][0])
			printf("-%" PRIu64, r->run[i][1]);
	}
}

static json_t *json_block_runs(const struct block_runs *r)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < r->n; i++)
		json_array_append_new(a, json_pack("[I,I]", (json_int_t)r->run[i][0],
						   (json_int_t)r->run[i][1]));
	return a;
}

static void print_link_target(struct ls_state *st, const struct stp_inode *inode)
{
	char target[STP_LINK_MAX + 1];
	size_t tlen;

	fputs(" -> ", stdout);
	if (stp_image_readlink(st->img, inode, target, &tlen)) {
		fputs("?", stdout);
		st->failed = 1;
	} else {
		stp_cli_put_escaped(stdout, target, tlen);
	}
}

static void print_long_fields(struct ls_state *st, const struct stp_inode *inode)
{
	char mode[11];

	stp_cli_mode_string(inode->mode, mode);
	fputs(mode, stdout);
	if (has_acl(st->img, inode))
		putchar('+');
	else if (st->acl_column)
		putchar(' ');
	printf(" %3u %5u %5u", inode->nlink, inode->uid, inode->gid);
	print_size_field(st, inode);
	print_time(inode->mtime_sec);
	putchar(' ');
}

static void add_json_entry(struct ls_state *st, const char *path, size_t len,
			   const struct stp_inode *inode, const struct block_runs *r)
{
	char rooted[STP_WALK_PATH_MAX + 1];
	json_t *o;

	if (path[0] != '/' && len < sizeof(rooted) - 1) { /* PATH given as "a/b": "/a/b" */
		rooted[0] = '/';
		memcpy(rooted + 1, path, len + 1);
		path = rooted;
		len++;
	}
	o = stp_json_inode(st->img, path, len, inode, &st->failed);

	if (o) {
		json_object_set_new(o, "acl", json_boolean(has_acl(st->img, inode)));
		if (st->o.blocks && S_ISREG(inode->mode)) {
			json_object_set_new(o, "stored", json_integer((json_int_t)(r->stored + 0.5)));
			json_object_set_new(o, "blocks", json_block_runs(r));
		}
	}
	/* written as it comes: a listing of millions of entries is not held in memory */
	if (st->json_entries++)
		putchar(',');
	if (stp_json_put(o))
		st->failed = 1;
}

/* One entry: SHOWN (LEN bytes, maybe straight from the image's metadata, no NUL) is the
 * name printed, PATH the entry's path in the image. Names and targets are escaped
 * (stp_cli_put_escaped): the image chose their bytes. */
static void print_entry(struct ls_state *st, const char *path, const char *shown, size_t len,
			const struct stp_inode *inode)
{
	struct block_runs r = { 0 };

	if (st->o.blocks && file_blocks(st->img, inode, &r) < 0) {
		stp_cli_problem(&ls_cli, st->image, path, "its blocks cannot be read");
		st->failed = 1;
	}
	if (st->o.json) {
		add_json_entry(st, path, strlen(path), inode, &r);
		free(r.run);
		return;
	}
	if (st->o.blocks) {
		print_size(st, (uint64_t)(r.stored + 0.5), st->o.human ? 5 : 10);
		print_block_runs(&r);
		putchar(' ');
	}
	free(r.run);
	if (st->o.long_format)
		print_long_fields(st, inode);
	stp_cli_put_escaped(stdout, shown, len);
	if (st->o.long_format && S_ISLNK(inode->mode))
		print_link_target(st, inode);
	putchar('\n');
}

/* Entry I of DIR: its name (NUL-terminated) into NAME, its inode into *INODE. */
static int read_entry(struct ls_state *st, const char *path, const struct stp_inode *dir,
		      uint32_t i, char name[STP_NAME_MAX + 1], uint32_t *ino,
		      struct stp_inode *inode)
{
	struct stp_dirent d;
	int err = stp_image_dirent(st->img, dir, i, &d, name);

	if (!err)
		err = stp_image_inode(st->img, d.ino, inode);
	if (err) {
		stp_cli_problem(&ls_cli, st->image, path, "entry %u: %s", i, stp_strerror(err));
		st->failed = 1;
	}
	*ino = d.ino;
	return err;
}

/* "/a" + "b" = "/a/b" into OUT (STP_WALK_PATH_MAX); -ENAMETOOLONG. */
static int child_path(const char *dir, const char *name, char *out)
{
	int n = snprintf(out, STP_WALK_PATH_MAX, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", name);

	return n < 0 || (size_t)n >= STP_WALK_PATH_MAX ? -ENAMETOOLONG : 0;
}

static int listing_has_acl(struct ls_state *st, const char *path, const struct stp_inode *dir)
{
	for (uint32_t i = 0; i < dir->count; i++) {
		char name[STP_NAME_MAX + 1];
		struct stp_inode inode;
		uint32_t ino;

		if (!read_entry(st, path, dir, i, name, &ino, &inode) && has_acl(st->img, &inode))
			return 1;
	}
	return 0;
}

/* -R: whether directory DINO is met for the first time (a hostile image may hold a
 * directory in itself or in two places: the second time is reported and skipped). */
static int first_visit(struct ls_state *st, const char *path, uint32_t dino)
{
	if (st->seen[dino / 8] & (1u << (dino % 8))) {
		stp_cli_problem(&ls_cli, st->image, path, "directory reached twice: skipped");
		st->failed = 1;
		return 0;
	}
	st->seen[dino / 8] |= (uint8_t)(1u << (dino % 8));
	return 1;
}

/* The entries of directory PATH; with -R, first a heading, as ls -R prints. */
static void list_directory(struct ls_state *st, const char *path, const struct stp_inode *dir)
{
	if (st->seen && !st->o.json) {
		fputs(st->listed++ ? "\n" : "", stdout);
		stp_cli_put_escaped(stdout, path, strlen(path));
		fputs(":\n", stdout);
	}
	st->acl_column = st->o.long_format && !st->o.json && listing_has_acl(st, path, dir);
	for (uint32_t i = 0; i < dir->count; i++) {
		char name[STP_NAME_MAX + 1], sub[STP_WALK_PATH_MAX];
		struct stp_inode inode;
		uint32_t ino;

		if (read_entry(st, path, dir, i, name, &ino, &inode))
			continue;
		if (child_path(path, name, sub)) {
			stp_cli_problem(&ls_cli, st->image, path, "a path below is too long");
			st->failed = 1;
			continue;
		}
		print_entry(st, sub, name, strlen(name), &inode);
	}
}

/* -R: a directory being listed, and the next of its entries to look at for
 * subdirectories; its path is the first LEN bytes of the walk's one path buffer. */
struct ls_frame {
	struct stp_inode dir;
	uint32_t next;
	size_t len;
};

struct ls_stack {
	struct ls_frame *frame;
	size_t n, cap;
};

static int push_frame(struct ls_stack *k, const struct stp_inode *dir, size_t len)
{
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		struct ls_frame *f = realloc(k->frame, cap * sizeof(*f));

		if (!f)
			return -ENOMEM;
		k->frame = f;
		k->cap = cap;
	}
	k->frame[k->n++] = (struct ls_frame){ .dir = *dir, .len = len };
	return 0;
}

/* -R from directory PATH: each directory's listing, then each of its subdirectories the
 * same way, in entry order, as ls -R does. Depth-first with a stack on the heap and the
 * path in one buffer: a tree thousands of directories deep needs no deep C stack. */
static int list_tree(struct ls_state *st, const char *path, uint32_t dino,
		     const struct stp_inode *dir)
{
	struct ls_stack k = { 0 };
	char *buf = malloc(STP_WALK_PATH_MAX);
	int err = buf ? 0 : -ENOMEM;

	if (!err && first_visit(st, path, dino)) {
		snprintf(buf, STP_WALK_PATH_MAX, "%s", path);
		list_directory(st, buf, dir);
		err = push_frame(&k, dir, strlen(buf));
	}
	while (!err && k.n) {
		struct ls_frame *f = &k.frame[k.n - 1];
		char name[STP_NAME_MAX + 1], *parent;
		struct stp_inode inode;
		uint32_t ino;

		buf[f->len] = '\0';
		if (f->next == f->dir.count) {
			k.n--;
			continue;
		}
		if (read_entry(st, buf, &f->dir, f->next++, name, &ino, &inode) ||
		    !S_ISDIR(inode.mode))
			continue;
		if (!(parent = strdup(buf))) {
			err = -ENOMEM;
		} else if (child_path(parent, name, buf)) {
			stp_cli_problem(&ls_cli, st->image, parent, "a path below is too long");
			st->failed = 1;
		} else if (first_visit(st, buf, ino)) {
			list_directory(st, buf, &inode);
			err = push_frame(&k, &inode, strlen(buf));
		}
		free(parent);
	}
	free(k.frame);
	free(buf);
	return err;
}

static int ls_output(struct ls_state *st, const char *path, uint32_t ino,
		     const struct stp_inode *inode)
{
	int err = 0;

	if (st->o.json) {
		fputs("{\"image\":", stdout);
		if (stp_json_put(stp_json_bytes(st->image, strlen(st->image))))
			return -ENOMEM;
		fputs(",\"entries\":[", stdout);
	}
	if (st->o.recursive && S_ISDIR(inode->mode) &&
	    !(st->seen = calloc(stp_image_sb(st->img)->inode_count / 8 + 1, 1)))
		return -ENOMEM;
	if (S_ISDIR(inode->mode) && st->seen)
		err = list_tree(st, path, ino, inode);
	else if (S_ISDIR(inode->mode))
		list_directory(st, path, inode);
	else
		print_entry(st, path, path, strlen(path), inode);
	free(st->seen);
	if (st->o.json)
		fputs("]}\n", stdout);
	return err;
}

static int ls_run(const char *image, const char *path, const struct ls_opts *o)
{
	struct ls_state st = { .image = image, .o = *o };
	struct stp_image *img;
	struct stp_inode inode;
	uint32_t ino;
	int err;

	if (stp_cli_open(&ls_cli, image, &img))
		return STP_EXIT_FAIL;
	st.img = img;
	err = stp_cli_resolve(&ls_cli, img, path, &ino);
	if (!err) {
		err = stp_image_inode(img, ino, &inode);
		if (err)
			stp_cli_problem(&ls_cli, image, path, "%s", stp_strerror(err));
	}
	/* directories sharing entry records would make -R quadratic: refused first, as
	 * every walker of the whole image does (reported by the library) */
	if (!err && o->recursive && S_ISDIR(inode.mode))
		err = stp_treewalk_files(img, NULL, NULL);
	if (!err && (err = ls_output(&st, path, ino, &inode)) == -ENOMEM)
		stp_cli_error(&ls_cli, "out of memory");
	if (fflush(stdout) || ferror(stdout)) {
		stp_cli_error(&ls_cli, "writing to standard output: %s", stp_strerror(-errno));
		st.failed = 1;
	}
	stp_image_close(img);
	return err || st.failed ? STP_EXIT_FAIL : STP_EXIT_OK;
}

int stp_cmd_ls(int argc, char **argv)
{
	enum { OPT_BLOCKS = 0x200, OPT_JSON };
	static const struct option longopts[] = {
		{ "long", no_argument, NULL, 'l' }, { "recursive", no_argument, NULL, 'R' },
		{ "human-readable", no_argument, NULL, 'h' },
		{ "blocks", no_argument, NULL, OPT_BLOCKS }, { "json", no_argument, NULL, OPT_JSON },
		STP_CLI_LONGOPTS_OWN_H, { 0 },
	};
	struct ls_opts o = { 0 };
	int opt, status;

	stp_cli_init(&ls_cli, argv);
	while ((opt = getopt_long(argc, argv, "lRhV", longopts, NULL)) != -1) {
		if (opt == 'l')
			o.long_format = 1;
		else if (opt == 'R')
			o.recursive = 1;
		else if (opt == 'h')
			o.human = 1;
		else if (opt == OPT_BLOCKS)
			o.blocks = 1;
		else if (opt == OPT_JSON)
			o.json = 1;
		else
			return stp_cli_other_option(&ls_cli, opt);
	}
	if ((status = stp_cli_operands(&ls_cli, argc, 1, 2)))
		return status;
	return ls_run(argv[optind], optind + 1 < argc ? argv[optind + 1] : "/", &o);
}
