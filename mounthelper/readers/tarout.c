/* SPDX-License-Identifier: MIT */
/*
 * `stipple extract --tar` (tarout.h). Each entry's headers are encoded by tarhead.h from
 * the image's inode; a regular file's extents are walked once, into the stored pieces
 * its data is sent from, one pinned block at a time, so memory stays bounded whatever
 * the file's size. A file with holes becomes a GNU 1.0 sparse member: its data begins
 * with the map of the stored runs, in decimal, and holds those runs only.
 */
#include "tarout.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "commands.h"
#include "fileread.h"
#include "image.h"
#include "log.h"
#include "orderwalk.h"
#include "progress.h"
#include "output.h"
#include "tarhead.h"
#include "util.h"

#define TAR_CACHE_BLOCKS 4
#define TAR_RECORD 10240        /* tar's record, as GNU tar pads to */
#define OUT_BUFFER (64u << 10)  /* headers gathered before a write; data goes straight */

/* first_name of an inode of link count 1 once written: a second name is damage */
static char named_once[1];
#define NAMED_ONCE named_once

struct tarout {
	const struct stp_cli *cli;
	const struct stp_image *img;
	const char *image;
	const char *dest;          /* for messages: FILE or "standard output" */
	struct stp_output out;     /* FILE while it is written */
	int to_file;
	int fd;
	int out_err;               /* the output's first write error (negative errno) */
	uint64_t written;          /* bytes of the archive so far, buffered ones included */
	struct stp_tarbuf pending; /* bytes not written yet */
	struct stp_tarbuf records; /* the current entry's xattr and ACL records */
	struct stp_cache *cache;
	char **first_name;         /* per inode: the tar name it was written as (nlink > 1),
				    * or NAMED_ONCE */
	struct stp_file_piece *pieces; /* the current file's stored pieces, one per block */
	size_t npieces, cap;
	int holes;                 /* the current file has a hole */
	struct stp_tarbuf map;     /* the current sparse file's map, padded */
	int list;                  /* -v: each name on stderr as it goes out */
	uint8_t xattr_value[STP_XATTR_VALUE_MAX]; /* the attribute being added */
};

static int flush_output(struct tarout *t)
{
	if (!t->out_err && t->pending.len)
		t->out_err = stp_write_full(t->fd, t->pending.data, t->pending.len);
	t->pending.len = 0;
	return t->out_err;
}

/* LEN bytes of the archive: small ones gathered, large ones written as they are. */
static int put_out(struct tarout *t, const void *buf, size_t len)
{
	int err;

	t->written += len;
	if (len >= OUT_BUFFER) {
		if (!flush_output(t))
			t->out_err = stp_write_full(t->fd, buf, len);
		return t->out_err;
	}
	err = stp_tarbuf_put(&t->pending, buf, len);
	if (err)
		return err;
	return t->pending.len >= OUT_BUFFER ? flush_output(t) : t->out_err;
}

/* put_out as a stp_cache_sink_fn: the archive is written in order, OFF is not needed. */
static int put_bytes(void *ctx, uint64_t off, const uint8_t *b, size_t n)
{
	return put_out(ctx, b, n);
}

static int put_zeros(struct tarout *t, size_t len)
{
	static const uint8_t zeros[STP_TAR_BLOCK];
	int err = 0;

	while (!err && len) {
		size_t n = len < sizeof(zeros) ? len : sizeof(zeros);

		err = put_out(t, zeros, n);
		len -= n;
	}
	return err;
}

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The kernel's xattr form of a POSIX ACL (linux/posix_acl_xattr.h): a version header,
 * then entries of tag, permissions and id, all little-endian. */
#define ACL_XATTR_VERSION 2
#define ACL_XATTR_HEADER 4
#define ACL_XATTR_ENTRY 8
enum { K_USER_OBJ = 0x01, K_USER = 0x02, K_GROUP_OBJ = 0x04, K_GROUP = 0x08,
       K_MASK = 0x10, K_OTHER = 0x20 };
#define ACL_NAMED (K_USER | K_GROUP)
#define ACL_BASE (K_USER_OBJ | K_GROUP_OBJ | K_OTHER)

static const char *acl_tag_name(uint16_t tag)
{
	switch (tag) {
	case K_USER_OBJ: case K_USER: return "user";
	case K_GROUP_OBJ: case K_GROUP: return "group";
	case K_MASK: return "mask";
	case K_OTHER: return "other";
	}
	return NULL;
}

/* One entry of an ACL's text, as acl_to_text(3) and GNU tar write it, ids as numbers:
 * ",user:4321:r-x", "mask::rwx". 0 or -ENOMEM. */
static int put_acl_text(struct stp_tarbuf *text, uint16_t tag, uint16_t perm, uint32_t id)
{
	char entry[48];
	int n = snprintf(entry, sizeof(entry), "%s%s:", text->len ? "," : "", acl_tag_name(tag));

	if (tag & ACL_NAMED)
		n += snprintf(entry + n, sizeof(entry) - (size_t)n, "%" PRIu32, id);
	n += snprintf(entry + n, sizeof(entry) - (size_t)n, ":%c%c%c", perm & 4 ? 'r' : '-',
		      perm & 2 ? 'w' : '-', perm & 1 ? 'x' : '-');
	return stp_tarbuf_put(text, entry, (size_t)n);
}

/* Why the ACL xattr VALUE (LEN bytes) is refused, or NULL; its entries go to TEXT. The
 * kernel's rules: each tag known, permissions rwx at most, the entries in its order (by
 * tag, named ones by id, none twice), and a non-empty ACL has its owner, group and
 * other entries and a mask beside named ones. A header alone is an empty ACL. *BAD: the
 * index of the entry refused, if one was. */
static const char *decode_acl(const uint8_t *value, size_t len, struct stp_tarbuf *text,
			      long *bad)
{
	unsigned seen = 0, last_tag = 0;
	uint32_t last_id = 0;

	if (len < ACL_XATTR_HEADER || (len - ACL_XATTR_HEADER) % ACL_XATTR_ENTRY)
		return "its length is not a header and whole entries";
	if (le32(value) != ACL_XATTR_VERSION)
		return "unknown version";
	for (size_t off = ACL_XATTR_HEADER; off < len; off += ACL_XATTR_ENTRY) {
		uint16_t tag = le16(value + off), perm = le16(value + off + 2);
		uint32_t id = le32(value + off + 4);
		int named = (tag & ACL_NAMED) != 0;

		*bad = (long)((off - ACL_XATTR_HEADER) / ACL_XATTR_ENTRY);
		if (!acl_tag_name(tag))
			return "unknown tag";
		if (perm & ~7u)
			return "unknown permission bits";
		if (tag < last_tag || (tag == last_tag && (!named || id <= last_id)))
			return "out of order or repeated";
		if (named && id > INT_MAX)
			return "id too large for tar";
		if (put_acl_text(text, tag, perm, id))
			return "out of memory";
		seen |= tag;
		last_tag = tag;
		last_id = id;
	}
	*bad = -1;
	if (seen && (seen & ACL_BASE) != ACL_BASE)
		return "no owner, group or other entry";
	if ((seen & ACL_NAMED) && !(seen & K_MASK))
		return "named entries without a mask";
	return NULL;
}

/*
 * The ACL xattr XNAME (VALUE, LEN bytes) as the record KEY (SCHILY.acl.access or
 * .default), which GNU tar --acls restores; nothing for an empty ACL. A malformed one is
 * reported and refused (-EUCLEAN).
 */
static int add_acl(struct stp_walk *w, const struct stp_walk_entry *e, const char *xname,
		   const char *key, const uint8_t *value, size_t len)
{
	struct tarout *t = w->ctx;
	struct stp_tarbuf text = { 0 };
	long bad = -1;
	const char *why = decode_acl(value, len, &text, &bad);
	int err = 0;

	if (!why && text.len)
		err = stp_tarhead_record(&t->records, key, text.data, text.len);
	stp_tarbuf_free(&text);
	if (!why)
		return err;
	if (bad >= 0)
		stp_walk_problem(w, e->path, "extended attribute %s: malformed ACL (entry %ld: %s)",
				 xname, bad, why);
	else
		stp_walk_problem(w, e->path, "extended attribute %s: malformed ACL (%s)",
				 xname, why);
	return -EUCLEAN;
}

/* The extended attributes as records, the POSIX ACLs among them as ACL records. */
static int add_xattrs(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	char name[STP_XATTR_NAME_MAX + 1];
	uint64_t total;
	int err = stp_image_xattr_sizes(t->img, &e->inode, &total);

	if (err) {
		stp_walk_problem(w, e->path, "extended attributes: %s", stp_strerror(err));
		return err;
	}
	if (total > STP_XATTR_HELD_MAX) { /* the pax header holds them all */
		stp_walk_problem(w, e->path, "extended attributes of %" PRIu64 " bytes, over the "
				 "%u MiB a tar entry takes here", total, STP_XATTR_HELD_MAX >> 20);
		return -EFBIG;
	}
	for (uint32_t i = 0; i < e->inode.xattr_count; i++) {
		const uint8_t *value = t->xattr_value;
		struct stp_xattr a;

		err = stp_image_xattr(t->img, &e->inode, i, &a, name);
		if (!err)
			err = stp_image_xattr_value(t->img, &a, t->xattr_value);
		if (err) {
			stp_walk_problem(w, e->path, "extended attribute %u: %s", i,
					 stp_strerror(err));
			return err;
		}
		if (!strcmp(name, "system.posix_acl_access"))
			err = add_acl(w, e, name, "SCHILY.acl.access", value, a.value_len);
		else if (!strcmp(name, "system.posix_acl_default"))
			err = add_acl(w, e, name, "SCHILY.acl.default", value, a.value_len);
		else
			err = stp_tarhead_xattr(&t->records, name, value, a.value_len);
		if (err)
			return err;
	}
	return 0;
}

static int add_piece(void *ctx, const struct stp_file_piece *p)
{
	struct tarout *t = ctx;

	if (p->block == STP_FILE_HOLE) {
		t->holes = 1;
		return 0;
	}
	if (t->npieces == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct stp_file_piece *ps = reallocarray(t->pieces, cap, sizeof(*ps));

		if (!ps)
			return -ENOMEM;
		t->pieces = ps;
		t->cap = cap;
	}
	t->pieces[t->npieces++] = *p;
	return 0;
}

static int map_line(struct stp_tarbuf *map, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64 "\n", v);

	return stp_tarbuf_put(map, num, (size_t)n);
}

/* The run of stored bytes that begins at piece I, a block edge's cut joined again:
 * its offset and length; returns the index of the piece after it. */
static size_t next_run(const struct tarout *t, size_t i, uint64_t *off, uint64_t *len)
{
	uint64_t end = t->pieces[i].file_off + t->pieces[i].len;
	size_t j;

	for (j = i + 1; j < t->npieces && t->pieces[j].file_off == end; j++)
		end += t->pieces[j].len;
	*off = t->pieces[i].file_off;
	*len = end - *off;
	return j;
}

/* The GNU 1.0 sparse map, padded to a block: the run count, then each run's offset and
 * length, one number a line. Holes alone: one empty run at the end, which marks the
 * member sparse. */
static int make_sparse_map(struct tarout *t, uint64_t size)
{
	static const uint8_t zeros[STP_TAR_BLOCK];
	uint64_t off, len, runs = 0;
	int err;

	for (size_t i = 0; i < t->npieces; runs++)
		i = next_run(t, i, &off, &len);
	t->map.len = 0;
	err = map_line(&t->map, runs ? runs : 1);
	for (size_t i = 0; !err && i < t->npieces;) {
		i = next_run(t, i, &off, &len);
		err = map_line(&t->map, off);
		if (!err)
			err = map_line(&t->map, len);
	}
	if (!err && !runs) {
		err = map_line(&t->map, size);
		if (!err)
			err = map_line(&t->map, 0);
	}
	return err ? err : stp_tarbuf_put(&t->map, zeros, stp_tar_padding(t->map.len));
}

/* The one walk of a regular file's extents: its stored pieces, the bytes they hold, and
 * whether it has holes. */
static int map_file(struct stp_walk *w, const struct stp_walk_entry *e, uint64_t *stored)
{
	struct tarout *t = w->ctx;
	int err;

	t->npieces = 0;
	t->holes = 0;
	err = stp_file_walk(t->img, &e->inode, 0, e->inode.size, add_piece, t);
	if (err) {
		stp_walk_problem(w, e->path, "extents: %s", stp_strerror(err));
		return err;
	}
	*stored = 0;
	for (size_t i = 0; i < t->npieces; i++)
		*stored += t->pieces[i].len;
	return 0;
}

/* Stored piece P, straight from its pinned block. */
static int put_piece(struct stp_walk *w, const struct stp_walk_entry *e,
		     const struct stp_file_piece *p)
{
	struct tarout *t = w->ctx;
	struct stp_block_ref ref;
	int err = stp_cache_get(t->cache, p->block, &ref);

	if (!err) {
		err = stp_file_piece_check(t->img, p, ref.size);
		if (err)
			stp_cache_release(t->cache, &ref);
	}
	if (err) {
		stp_walk_problem(w, e->path, "cannot read block %" PRIu64 " (file offset %"
				 PRIu64 "): %s", p->block, p->file_off, stp_strerror(err));
		return err;
	}
	err = stp_cache_feed(&ref, (size_t)p->in_block, (size_t)p->len, 0, put_bytes, t);
	stp_cache_release(t->cache, &ref);
	return err;
}

/* A regular file's data: the map when sparse, the stored pieces, the block's padding. */
static int put_file(struct stp_walk *w, const struct stp_walk_entry *e, uint64_t size)
{
	struct tarout *t = w->ctx;
	int err = t->holes ? put_out(t, t->map.data, t->map.len) : 0;

	for (size_t i = 0; !err && i < t->npieces; i++)
		err = put_piece(w, e, &t->pieces[i]);
	return err ? err : put_zeros(t, stp_tar_padding(size));
}

/* What the entry's type adds to its header: a target, a device number, a size and map. */
static int set_type_fields(struct stp_walk *w, const struct stp_walk_entry *e,
			   struct stp_tarhead *h, char **target)
{
	struct tarout *t = w->ctx;
	uint64_t stored;
	int err;

	switch (e->inode.mode & S_IFMT) {
	case S_IFREG:
		h->type = STP_TAR_REG;
		err = map_file(w, e, &stored);
		if (err || !t->holes) {
			h->size = e->inode.size;
			return err;
		}
		if ((err = make_sparse_map(t, e->inode.size)))
			return err;
		h->sparse = 1;
		h->realsize = e->inode.size;
		h->size = t->map.len + stored;
		return 0;
	case S_IFLNK:
		h->type = STP_TAR_SYMLINK;
		err = stp_walk_link_target(w, e, target);
		h->linkname = *target;
		return err;
	case S_IFCHR: case S_IFBLK:
		h->type = S_ISCHR(e->inode.mode) ? STP_TAR_CHR : STP_TAR_BLK;
		h->devmajor = stp_cli_rdev_major(&e->inode);
		h->devminor = stp_cli_rdev_minor(&e->inode);
		return 0;
	case S_IFDIR:
		h->type = STP_TAR_DIR;
		return 0;
	case S_IFIFO:
		h->type = STP_TAR_FIFO;
		return 0;
	}
	stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
	return -EUCLEAN;
}

static int write_header(struct stp_walk *w, const struct stp_walk_entry *e,
			const struct stp_tarhead *h)
{
	struct tarout *t = w->ctx;
	struct stp_tarbuf head = { 0 };
	int not_utf8 = 0;
	int err = stp_tarhead_encode(h, &t->records, &head, &not_utf8);

	if (!err)
		err = put_out(t, head.data, head.len);
	stp_tarbuf_free(&head);
	if (!err && not_utf8)
		stp_cli_problem(t->cli, t->image, e->path, "warning: the name is not UTF-8; "
				"written as its bytes (hdrcharset=BINARY)");
	return err;
}

/* -v: the name on stderr, as tar -tv lists it (stdout holds the archive). */
static void list_name(const char *name)
{
	stp_progress_clear();
	stp_cli_put_escaped(stderr, name, strlen(name));
	fputc('\n', stderr);
}

/* The member's name: "./" for the root, "./a/b", a directory's with a trailing '/'. */
static void member_name(const struct stp_walk_entry *e, char name[STP_WALK_PATH_MAX + 3])
{
	snprintf(name, STP_WALK_PATH_MAX + 3, ".%s%s", e->path,
		 S_ISDIR(e->inode.mode) && e->depth ? "/" : "");
}

static int enter_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	const struct stp_inode *in = &e->inode;
	char name[STP_WALK_PATH_MAX + 3], *target = NULL;
	char **first = !S_ISDIR(in->mode) ? &t->first_name[e->ino] : NULL;
	struct stp_tarhead h = { .name = name, .mode = in->mode, .uid = in->uid,
				 .gid = in->gid, .mtime_sec = in->mtime_sec,
				 .mtime_nsec = in->mtime_nsec };
	int err = 0;

	if (S_ISSOCK(in->mode)) {
		stp_cli_problem(t->cli, t->image, e->path, "socket left out: tar cannot hold one");
		return 0;
	}
	member_name(e, name);
	if (t->list)
		list_name(name);
	t->records.len = 0;
	if (first && *first == NAMED_ONCE) {
		stp_walk_problem(w, e->path, "left out: its inode %u has a link count of 1, "
				 "but another name had it already (a damaged image)", e->ino);
		return 0;
	}
	if (first && *first) {
		h.type = STP_TAR_HARDLINK;
		h.linkname = *first;
		return write_header(w, e, &h);
	}
	err = set_type_fields(w, e, &h, &target);
	if (!err)
		err = add_xattrs(w, e);
	if (!err)
		err = write_header(w, e, &h);
	if (!err && S_ISREG(in->mode))
		err = put_file(w, e, h.size);
	if (!err && first && in->nlink <= 1)
		*first = NAMED_ONCE; /* its bytes go out once, whatever names the image gives */
	else if (!err && first && !(*first = strdup(name)))
		err = -ENOMEM;
	free(target);
	return err;
}

/* Why FILE was not written: a refusal's STEP is the whole reason. */
static void output_problem(const struct tarout *t, const char *step, int err)
{
	if (t->out.refused)
		stp_cli_error(t->cli, "%s: %s", t->dest, step);
	else
		stp_cli_error(t->cli, "%s: %s: %s", t->dest, step, stp_strerror(err));
}

/* FILE is absent or replaced; standard output must not be a terminal. */
static int open_output(struct tarout *t, const char *dest)
{
	const char *step;
	int err;

	if (!dest || !strcmp(dest, "-")) {
		if (isatty(STDOUT_FILENO)) {
			stp_cli_error(t->cli, "refusing to write a tar archive to a terminal "
				      "(give a FILE or redirect standard output)");
			return STP_EXIT_USAGE;
		}
		t->fd = STDOUT_FILENO;
		t->dest = "standard output";
		return 0;
	}
	t->dest = dest;
	err = stp_output_open(dest, &t->out, &step);
	if (err) {
		output_problem(t, step, err);
		stp_output_abort(&t->out);
		return STP_EXIT_FAIL;
	}
	t->to_file = 1;
	t->fd = t->out.fd;
	return 0;
}

/* Gives the temporary file its final name; reports and returns an error otherwise. */
static int commit_output(struct tarout *t)
{
	const char *step;
	int err;

	if (!t->to_file)
		return 0;
	err = stp_output_commit(&t->out, stp_output_default_mode(), &step);
	t->fd = -1;
	if (err)
		output_problem(t, step, err);
	return err;
}

static void abort_output(struct tarout *t)
{
	if (t->to_file)
		stp_output_abort(&t->out);
	t->fd = -1;
}

/* The archive's end: two zero blocks, then zeros to a whole record. */
static int end_archive(struct tarout *t)
{
	int err = put_zeros(t, 2 * STP_TAR_BLOCK);

	if (!err)
		err = put_zeros(t, (size_t)((TAR_RECORD - t->written % TAR_RECORD) % TAR_RECORD));
	return err ? err : flush_output(t);
}

static void free_names(char **names, uint32_t count)
{
	for (uint32_t i = 0; names && i < count; i++)
		if (names[i] != NAMED_ONCE)
			free(names[i]);
	free(names);
}

/* The last word of a failed export: the output's error, or how the walk ended and what
became of the output. Problems met on the way are reported already. */
static void report_failure(const struct tarout *t, int err, unsigned long problems)
{
	const char *left = t->out.temp ? "nothing written to" : "the archive is incomplete on";

	if (t->out_err == -EPIPE)
		stp_cli_broken_pipe(); /* `| head` has what it wanted: quiet, as cat */
	stp_cli_flush_messages(); /* the damaged blocks' lines, before the verdict */
	if (t->out_err)
		stp_cli_error(t->cli, "%s: cannot write: %s", t->dest, stp_strerror(t->out_err));
	else if (problems)
		stp_cli_problem(t->cli, t->image, NULL, "tar export failed: %lu problem%s; %s %s",
				problems, problems == 1 ? "" : "s", left, t->dest);
	else
		stp_cli_problem(t->cli, t->image, NULL, "tar export failed: %s; %s %s",
				stp_strerror(err), left, t->dest);
}

/* The walk and the archive's end; returns 0 when every entry was written. */
static int write_tree(struct tarout *t)
{
	uint32_t inodes = stp_image_sb(t->img)->inode_count;
	struct stp_walk walk = { .cli = t->cli, .img = t->img, .image = t->image,
				 .enter = enter_entry, .ctx = t };
	int err;

	t->first_name = calloc(inodes ? inodes : 1, sizeof(*t->first_name));
	err = t->first_name ? stp_cache_new(t->img, TAR_CACHE_BLOCKS, 1, &t->cache) : -ENOMEM;
	if (!err)
		err = stp_orderwalk_run(&walk);
	if (!err && !walk.problems)
		err = end_archive(t);
	if (t->out_err)
		err = t->out_err;
	if (err || walk.problems)
		report_failure(t, err, walk.problems);
	if (t->cache)
		stp_cache_free(t->cache);
	stp_tarbuf_free(&t->pending);
	stp_tarbuf_free(&t->records);
	stp_tarbuf_free(&t->map);
	free(t->pieces);
	free_names(t->first_name, inodes);
	return err ? err : walk.problems ? -EUCLEAN : 0;
}

int stp_tarout_run(const struct stp_cli *cli, const char *image, const char *dest, int list)
{
	struct tarout t = { .cli = cli, .image = image, .fd = -1, .list = list };
	struct stp_image *img;
	int status, err;

	if ((!dest || !strcmp(dest, "-")) && isatty(STDOUT_FILENO))
		return open_output(&t, dest); /* refused, before the image is read */
	if (stp_cli_open(cli, image, &img))
		return STP_EXIT_FAIL;
	t.img = img;
	signal(SIGPIPE, SIG_IGN); /* a closed pipe: a write error, reported */
	status = open_output(&t, dest);
	if (status) {
		stp_image_close(img);
		return status;
	}
	err = write_tree(&t);
	if (!err)
		err = commit_output(&t);
	abort_output(&t);
	stp_image_close(img);
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}
