/* SPDX-License-Identifier: MIT */
/*
 * `stipple extract --tar` (tarout.h). Each entry is built from the image's inode and
 * handed to libarchive's pax writer, which does all the tar encoding. A regular file's
 * extents are walked once, into the sparse map its header needs; its data is then sent
 * one pinned block at a time, and its holes as zeros the writer drops, so memory stays
 * bounded whatever the file's size.
 */
#include "tarout.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <locale.h>
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
#include "util.h"

#define TAR_CACHE_BLOCKS 4
#define ZERO_CHUNK (1u << 20)
#define TAR_BLOCK 10240 /* tar's record, as GNU tar pads to */

struct tarout {
	const struct stp_cli *cli;
	const struct stp_image *img;
	const char *image;
	const char *dest;          /* for messages: FILE or "standard output" */
	struct stp_output out;     /* FILE while it is written */
	int to_file;
	int fd;
	int out_err;               /* the output's first write error (negative errno) */
	struct stp_cache *cache;
	struct archive *a;
	struct archive_entry *entry;
	char **first_name;         /* per inode with nlink > 1: the tar name it was written as */
	struct stp_file_piece *pieces; /* the current file's stored pieces, one per block */
	size_t npieces, cap;
	int holes;                 /* the current file has a hole */
	void *zeros;               /* ZERO_CHUNK zero bytes: holes, which the writer skips */
	int list;                  /* -v: each name on stderr as it goes out */
	uint8_t xattr_value[STP_XATTR_VALUE_MAX]; /* the attribute being added */
};

static la_ssize_t write_out(struct archive *a, void *ctx, const void *buf, size_t len)
{
	struct tarout *t = ctx;
	int err = t->out_err ? t->out_err : stp_write_full(t->fd, buf, len);

	if (!err)
		return (la_ssize_t)len;
	t->out_err = err;
	archive_set_error(a, -err, "%s", stp_strerror(err));
	return -1;
}

/* After a libarchive call failed for entry PATH: reports it (an output error is reported
 * once, at the end) and returns the error that stops the walk. */
static int archive_failed(struct stp_walk *w, const char *path)
{
	struct tarout *t = w->ctx;

	if (t->out_err)
		return t->out_err;
	stp_walk_problem(w, path, "cannot write its tar entry: %s", archive_error_string(t->a));
	return -EIO;
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

static int archive_acl_tag(uint16_t tag)
{
	switch (tag) {
	case K_USER_OBJ: return ARCHIVE_ENTRY_ACL_USER_OBJ;
	case K_USER: return ARCHIVE_ENTRY_ACL_USER;
	case K_GROUP_OBJ: return ARCHIVE_ENTRY_ACL_GROUP_OBJ;
	case K_GROUP: return ARCHIVE_ENTRY_ACL_GROUP;
	case K_MASK: return ARCHIVE_ENTRY_ACL_MASK;
	case K_OTHER: return ARCHIVE_ENTRY_ACL_OTHER;
	}
	return 0;
}

/*
 * Decodes the ACL xattr XNAME (VALUE, LEN bytes) into ACL entries of TYPE on the entry.
 * Refused, as the kernel refuses it, unless each tag is known, the permissions are rwx at
 * most, the entries come in the kernel's order (by tag, named ones by id, none twice),
 * and a non-empty ACL has its owner, group and other entries and a mask beside named
 * ones. A header alone is an empty ACL. Must follow archive_entry_set_mode(): libarchive
 * keeps the owner, group and other entries of an access ACL in its copy of the mode.
 */
static int add_acl(struct stp_walk *w, const struct stp_walk_entry *e, const char *xname,
		   int type, const uint8_t *value, size_t len)
{
	struct tarout *t = w->ctx;
	unsigned seen = 0, last_tag = 0;
	uint32_t last_id = 0;
	size_t i = 0;
	const char *why = NULL;

	if (len < ACL_XATTR_HEADER || (len - ACL_XATTR_HEADER) % ACL_XATTR_ENTRY)
		why = "its length is not a header and whole entries";
	else if (le32(value) != ACL_XATTR_VERSION)
		why = "unknown version";
	for (size_t off = ACL_XATTR_HEADER; !why && off < len; off += ACL_XATTR_ENTRY, i++) {
		uint16_t tag = le16(value + off), perm = le16(value + off + 2);
		uint32_t id = le32(value + off + 4);
		int named = (tag & ACL_NAMED) != 0;

		if (!archive_acl_tag(tag))
			why = "unknown tag";
		else if (perm & ~7u)
			why = "unknown permission bits";
		else if (tag < last_tag || (tag == last_tag && (!named || id <= last_id)))
			why = "out of order or repeated";
		else if (named && id > INT_MAX)
			why = "id too large for tar";
		else if (archive_entry_acl_add_entry(t->entry, type, perm, archive_acl_tag(tag),
						  named ? (int)id : -1, NULL) != ARCHIVE_OK)
			why = "refused by libarchive";
		seen |= tag;
		last_tag = tag;
		last_id = id;
	}
	if (!why && seen && (seen & ACL_BASE) != ACL_BASE)
		why = "no owner, group or other entry";
	else if (!why && (seen & ACL_NAMED) && !(seen & K_MASK))
		why = "named entries without a mask";
	if (!why)
		return 0;
	if (i)
		stp_walk_problem(w, e->path, "extended attribute %s: malformed ACL (entry %zu: %s)",
				 xname, i - 1, why);
	else
		stp_walk_problem(w, e->path, "extended attribute %s: malformed ACL (%s)",
				 xname, why);
	return -EUCLEAN;
}

/* The extended attributes, the POSIX ACLs among them as ACL entries. */
static int add_xattrs(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	char name[STP_XATTR_NAME_MAX + 1];

	for (uint32_t i = 0; i < e->inode.xattr_count; i++) {
		const void *value = t->xattr_value;
		struct stp_xattr a;
		size_t vlen;
		int err = stp_image_xattr(t->img, &e->inode, i, &a, name);

		if (!err)
			err = stp_image_xattr_value(t->img, &a, t->xattr_value);
		if (err) {
			stp_walk_problem(w, e->path, "extended attribute %u: %s", i,
					 stp_strerror(err));
			return err;
		}
		vlen = a.value_len;
		if (!strcmp(name, "system.posix_acl_access"))
			err = add_acl(w, e, name, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, value, vlen);
		else if (!strcmp(name, "system.posix_acl_default"))
			err = add_acl(w, e, name, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, value, vlen);
		else
			archive_entry_xattr_add_entry(t->entry, name, value, vlen);
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

/* The sparse map: one run per stored run, the pieces a block edge cut joined again. */
static void add_sparse_map(struct tarout *t, uint64_t size)
{
	for (size_t i = 0, j; i < t->npieces; i = j) {
		uint64_t end = t->pieces[i].file_off + t->pieces[i].len;

		for (j = i + 1; j < t->npieces && t->pieces[j].file_off == end &&
				t->pieces[j].stream_off == t->pieces[j - 1].stream_off +
							   t->pieces[j - 1].len; j++)
			end += t->pieces[j].len;
		archive_entry_sparse_add_entry(t->entry, (la_int64_t)t->pieces[i].file_off,
					       (la_int64_t)(end - t->pieces[i].file_off));
	}
	if (!t->npieces) /* holes alone: the empty run at the end marks it sparse */
		archive_entry_sparse_add_entry(t->entry, (la_int64_t)size, 0);
}

/* The one walk of a regular file's extents: its stored pieces, and its sparse map when it
 * has holes. */
static int map_file(struct stp_walk *w, const struct stp_walk_entry *e)
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
	if (t->holes)
		add_sparse_map(t, e->inode.size);
	return 0;
}

static int put_data(struct stp_walk *w, const struct stp_walk_entry *e, const void *buf,
		    size_t len)
{
	struct tarout *t = w->ctx;
	la_ssize_t n = archive_write_data(t->a, buf, len);

	if (n < 0)
		return archive_failed(w, e->path);
	if ((size_t)n != len) {
		stp_walk_problem(w, e->path, "the tar writer took %zd of %zu bytes", n, len);
		return -EIO;
	}
	return 0;
}

/* A hole: zeros, which the writer counts against its sparse map and does not store. */
static int put_hole(struct stp_walk *w, const struct stp_walk_entry *e, uint64_t len)
{
	struct tarout *t = w->ctx;

	while (len) {
		size_t n = len < ZERO_CHUNK ? (size_t)len : ZERO_CHUNK;
		int err = put_data(w, e, t->zeros, n);

		if (err)
			return err;
		len -= n;
	}
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
	for (size_t at = 0, n; !err && at < p->len; at += n) {
		const uint8_t *b = stp_cache_bytes(&ref, (size_t)(p->in_block + at),
						   (size_t)p->len - at, &n);

		err = put_data(w, e, b, n);
	}
	stp_cache_release(t->cache, &ref);
	return err;
}

static int put_file(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	uint64_t off = 0;
	int err = 0;

	for (size_t i = 0; !err && i < t->npieces; i++) {
		err = put_hole(w, e, t->pieces[i].file_off - off);
		if (!err)
			err = put_piece(w, e, &t->pieces[i]);
		off = t->pieces[i].file_off + t->pieces[i].len;
	}
	return err ? err : put_hole(w, e, e->inode.size - off);
}

static int set_symlink(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	char *target;
	int err = stp_walk_link_target(w, e, &target);

	if (err)
		return err;
	archive_entry_copy_symlink(t->entry, target);
	free(target);
	return 0;
}

/* What the entry's type adds to its header: a target, a device number, a size and map. */
static int set_type_fields(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;

	switch (e->inode.mode & S_IFMT) {
	case S_IFREG:
		archive_entry_set_size(t->entry, (la_int64_t)e->inode.size);
		return map_file(w, e);
	case S_IFLNK:
		return set_symlink(w, e);
	case S_IFCHR: case S_IFBLK:
		archive_entry_set_rdevmajor(t->entry, stp_cli_rdev_major(&e->inode));
		archive_entry_set_rdevminor(t->entry, stp_cli_rdev_minor(&e->inode));
		return 0;
	case S_IFDIR: case S_IFIFO:
		return 0;
	}
	stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
	return -EUCLEAN;
}

static int write_header(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	int r = archive_write_header(t->a, t->entry);

	if (r == ARCHIVE_WARN) /* a name or target that is not UTF-8 */
		stp_cli_problem(t->cli, t->image, e->path, "warning: %s; written as its bytes "
				"(hdrcharset=BINARY)", archive_error_string(t->a));
	else if (r != ARCHIVE_OK)
		return archive_failed(w, e->path);
	return 0;
}

static int enter_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tarout *t = w->ctx;
	const struct stp_inode *in = &e->inode;
	char name[STP_WALK_PATH_MAX + 2];
	char **first = !S_ISDIR(in->mode) && in->nlink > 1 ? &t->first_name[e->ino] : NULL;
	int err;

	if (S_ISSOCK(in->mode)) {
		stp_cli_problem(t->cli, t->image, e->path, "socket left out: tar cannot hold one");
		return 0;
	}
	snprintf(name, sizeof(name), ".%s", e->path); /* "./", "./a/b" */
	if (t->list) { /* tar -tv's names; stdout holds the archive */
		stp_progress_clear();
		stp_cli_put_escaped(stderr, name, strlen(name));
		fputs(S_ISDIR(in->mode) && e->depth ? "/\n" : "\n", stderr);
	}
	archive_entry_clear(t->entry);
	archive_entry_copy_pathname(t->entry, name);
	archive_entry_set_mode(t->entry, in->mode);
	archive_entry_set_uid(t->entry, in->uid);
	archive_entry_set_gid(t->entry, in->gid);
	archive_entry_set_mtime(t->entry, in->mtime_sec, in->mtime_nsec);
	if (first && *first) {
		archive_entry_copy_hardlink(t->entry, *first);
		archive_entry_set_size(t->entry, 0);
		return write_header(w, e);
	}
	err = set_type_fields(w, e);
	if (!err)
		err = add_xattrs(w, e);
	if (!err)
		err = write_header(w, e);
	if (!err && S_ISREG(in->mode))
		err = put_file(w, e);
	if (!err && first && !(*first = strdup(name)))
		err = -ENOMEM;
	return err;
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
		stp_cli_error(t->cli, "%s: %s: %s", dest, step, stp_strerror(err));
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
		stp_cli_error(t->cli, "%s: %s: %s", t->dest, step, stp_strerror(err));
	return err;
}

static void abort_output(struct tarout *t)
{
	if (t->to_file)
		stp_output_abort(&t->out);
	t->fd = -1;
}

/* BINARY: names as their bytes, whatever the locale, when C.UTF-8 is missing. */
static struct archive *new_writer(struct tarout *t, int binary)
{
	struct archive *a = archive_write_new();

	if (!a)
		return NULL;
	/* xattrs as SCHILY.xattr alone: GNU tar reads those and warns on LIBARCHIVE.xattr */
	if (archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    archive_write_set_format_option(a, "pax", "xattrheader", "SCHILY") != ARCHIVE_OK ||
	    (binary && archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY")
		    != ARCHIVE_OK) ||
	    archive_write_set_bytes_per_block(a, TAR_BLOCK) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, TAR_BLOCK) != ARCHIVE_OK ||
	    archive_write_open2(a, t, NULL, write_out, NULL, NULL) != ARCHIVE_OK) {
		stp_cli_error(t->cli, "cannot set up the tar writer: %s", archive_error_string(a));
		archive_write_free(a);
		return NULL;
	}
	return a;
}

static void free_names(char **names, uint32_t count)
{
	for (uint32_t i = 0; names && i < count; i++)
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
	else if (!t->a && err == -EIO)
		return; /* the writer could not be set up: said already */
	else if (!problems && err == -EIO)
		stp_cli_error(t->cli, "%s: %s", t->dest, archive_error_string(t->a));
	else if (problems)
		stp_cli_problem(t->cli, t->image, NULL, "tar export failed: %lu problem%s; %s %s",
				problems, problems == 1 ? "" : "s", left, t->dest);
	else
		stp_cli_problem(t->cli, t->image, NULL, "tar export failed: %s; %s %s",
				stp_strerror(err), left, t->dest);
}

/* The walk and the archive's end; returns 0 when every entry was written. */
static int write_tree(struct tarout *t, int binary)
{
	uint32_t inodes = stp_image_sb(t->img)->inode_count;
	struct stp_walk walk = { .cli = t->cli, .img = t->img, .image = t->image,
				 .enter = enter_entry, .ctx = t };
	int err;

	t->first_name = calloc(inodes ? inodes : 1, sizeof(*t->first_name));
	t->zeros = calloc(1, ZERO_CHUNK);
	t->entry = archive_entry_new();
	if (!t->first_name || !t->zeros || !t->entry)
		err = -ENOMEM;
	else
		err = stp_cache_new(t->img, TAR_CACHE_BLOCKS, 1, &t->cache);
	if (!err)
		err = (t->a = new_writer(t, binary)) ? 0 : -EIO;
	if (!err)
		err = stp_orderwalk_run(&walk);
	if (!err && !walk.problems && archive_write_close(t->a) != ARCHIVE_OK)
		err = t->out_err ? t->out_err : -EIO;
	if (err || walk.problems)
		report_failure(t, err, walk.problems);
	if (t->a) {
		t->out_err = t->out_err ? t->out_err : -ECANCELED; /* nothing more goes out */
		archive_write_free(t->a);
	}
	archive_entry_free(t->entry);
	if (t->cache)
		stp_cache_free(t->cache);
	free(t->zeros);
	free(t->pieces);
	free_names(t->first_name, inodes);
	return err ? err : walk.problems ? -EUCLEAN : 0;
}

int stp_tarout_run(const struct stp_cli *cli, const char *image, const char *dest, int list)
{
	struct tarout t = { .cli = cli, .image = image, .fd = -1, .list = list };
	struct stp_image *img;
	locale_t utf8, old = 0;
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
	/* names go out as UTF-8 when they are, as raw bytes (hdrcharset) when not */
	utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (utf8)
		old = uselocale(utf8);
	err = write_tree(&t, !utf8);
	if (utf8) {
		uselocale(old);
		freelocale(utf8);
	}
	if (!err)
		err = commit_output(&t);
	abort_output(&t);
	stp_image_close(img);
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}
