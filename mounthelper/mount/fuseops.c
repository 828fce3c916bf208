/* SPDX-License-Identifier: MIT */
#include "fuseops.h"
#include "fuseino.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include "blocks.h"
#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "image.h"
#include "inodes.h"
#include "log.h"
#include "mountopts.h"
#include "readfail.h"
#include "record.h"
#include "status.h"
#include "util.h"

/* "Forever": libfuse and the kernel clamp it to the largest timeout they can hold. */
#define FOREVER (100.0 * 365 * 24 * 3600)
/* Pieces (slices of one block, and holes) a read is answered from without copying; more
 * than that and it is copied. */
#define READ_PIECES 32

/* Holes are answered from here. Never written, so it costs no memory. */
static uint8_t zeros[STP_MAX_READ];

static struct stp_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/* The kernel sees a damaged image as an I/O error. */
static int to_errno(int err)
{
	if (err == -EUCLEAN || err == -EPROTONOSUPPORT)
		return EIO;
	return -err;
}


static int load_inode(const struct stp_fs *fs, fuse_ino_t ino, uint32_t *n, struct stp_inode *out)
{
	int err = stp_fuseino_image(ino, n);

	return err ? err : stp_image_inode(fs->img, *n, out);
}

/* A regular file's blocks: its pages that hold stored bytes, so that du and cp --sparse
 * see its holes. */
static blkcnt_t stored_blocks(const struct stp_fs *fs, const struct stp_inode *inode)
{
	uint64_t pages;

	if (stp_file_stored_pages(fs->img, inode, &pages))
		return (blkcnt_t)((inode->size + 511) / 512); /* damaged: reads will say so */
	return (blkcnt_t)(pages * (STP_FILE_PAGE / 512));
}

static void fill_stat(const struct stp_fs *fs, uint32_t n, const struct stp_inode *inode,
		      struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = stp_fuseino_of(n);
	st->st_mode = inode->mode;
	st->st_nlink = inode->nlink;
	st->st_uid = inode->uid;
	st->st_gid = inode->gid;
	if (S_ISREG(inode->mode) || S_ISLNK(inode->mode))
		st->st_size = (off_t)inode->size;
	if (S_ISREG(inode->mode))
		st->st_blocks = stored_blocks(fs, inode);
	if (S_ISCHR(inode->mode) || S_ISBLK(inode->mode))
		st->st_rdev = makedev(stp_rdev_major(inode->data), stp_rdev_minor(inode->data));
	st->st_mtim.tv_sec = inode->mtime_sec;
	st->st_mtim.tv_nsec = inode->mtime_nsec;
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

static void fill_entry(const struct stp_fs *fs, uint32_t n, const struct stp_inode *inode,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = stp_fuseino_of(n);
	e->entry_timeout = FOREVER;
	e->attr_timeout = FOREVER;
	fill_stat(fs, n, inode, &e->attr);
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct stp_fs *fs = userdata;

	/* Must equal the max_read= mount option (stp_mountopts_finish) or INIT fails. */
	conn->max_read = STP_MAX_READ;
	/* A recording lists what the application touched, not what readahead guessed: with
	 * no readahead the kernel asks for the pages read and faulted, one at a time. Else
	 * little readahead, so that the pages asked for beside those stay within the margin
	 * mkstipple gave the hot ranges (STP_READAHEAD_DEFAULT). */
	conn->max_readahead = fs->recorder ? 0 : fs->opts->readahead;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	/* Attributes never change: cached pages must never be dropped because of them. */
	if (conn->capable & FUSE_CAP_EXPLICIT_INVAL_DATA) {
		conn->want |= FUSE_CAP_EXPLICIT_INVAL_DATA;
		conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA; /* the kernel prefers auto when both are set */
	}
	/* When the kernel can open without asking, it keeps the page cache by itself:
	 * answering ENOSYS once saves a round trip on every later open. Directories are
	 * opened by asking (op_opendir), which decides whether their listing is kept. */
	fs->no_open = conn->capable & FUSE_CAP_NO_OPEN_SUPPORT;
	fs->no_xattrs = !stp_image_meta_header(fs->img)->xattr_count;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stp_fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct stp_inode inode;
	uint32_t dir, n;
	int err = stp_fuseino_image(parent, &dir);

	if (!err)
		err = stp_image_lookup(fs->img, dir, name, strlen(name), &n);
	if (!err || err == -ENOENT) /* found or not: priming can answer it beforehand */
		stp_record_lookup(fs->recorder, dir, name, strlen(name));
	if (err == -ENOENT) {
		/* ino 0 with a timeout: the kernel remembers that NAME does not exist */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = FOREVER;
		fuse_reply_entry(req, &e);
		return;
	}
	if (!err)
		err = stp_image_inode(fs->img, n, &inode);
	if (err) {
		fuse_reply_err(req, to_errno(err));
		return;
	}
	if (!S_ISDIR(inode.mode)) /* evidence of a walker that stats: see dir_attrs_for */
		atomic_fetch_add_explicit(&fs->stat_walk, 1, memory_order_relaxed);
	fill_entry(fs, n, &inode, &e);
	stp_inodes_lookup(fs->inodes, n, &inode); /* before a forget can follow */
	if (fuse_reply_entry(req, &e))
		stp_inodes_forget(fs->inodes, n, 1); /* the kernel never got it */
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	uint32_t n;

	if (!stp_fuseino_image(ino, &n))
		stp_inodes_forget(fs_of(req)->inodes, n, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct stp_fs *fs = fs_of(req);
	uint32_t n;

	for (size_t i = 0; i < count; i++)
		if (!stp_fuseino_image(forgets[i].ino, &n))
			stp_inodes_forget(fs->inodes, n, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	struct stat st;
	uint32_t n;
	int err = load_inode(fs, ino, &n, &inode);

	if (err) {
		fuse_reply_err(req, to_errno(err));
		return;
	}
	fill_stat(fs, n, &inode, &st);
	fuse_reply_attr(req, &st, FOREVER);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	char target[STP_LINK_MAX + 1];
	size_t len;
	uint32_t n;
	int err = load_inode(fs, ino, &n, &inode);

	if (!err && !S_ISLNK(inode.mode))
		err = -EINVAL;
	if (!err)
		err = stp_image_readlink(fs->img, &inode, target, &len);
	if (err)
		fuse_reply_err(req, to_errno(err));
	else
		fuse_reply_readlink(req, target);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (fs_of(req)->no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	fi->keep_cache = 1;
	fuse_reply_open(req, fi);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0); /* nothing is held per open */
}

/* A read being answered. It pins one block at a time: while its stream bytes lie in one
 * block it points into that block (and into zeros for holes); at the first byte of
 * another block, past READ_PIECES pieces, or at bytes of a filtered block still being
 * decoded (which only a copy gives), it copies what it has into a reply buffer and goes
 * on copying, block by block. A reader never waits for a buffer while it holds a
 * pin, as stp_cache_get's rule asks. */
struct read_reply {
	struct stp_fs *fs;
	struct stp_blocks blocks; /* where its blocks come from */
	uint64_t off;             /* the file offset of the reply's first byte */
	size_t len;
	struct stp_block_ref ref; /* the pinned block, when ref.entry */
	struct iovec iov[READ_PIECES];
	unsigned niov;
	uint8_t *buf;             /* copying: the reply's LEN bytes */
	uint64_t block;           /* the block of the piece being added, for messages */
};

/* Stops pointing into the block: the pieces so far are copied into a reply buffer. */
static int reply_to_copy(struct read_reply *r)
{
	size_t at = 0;

	r->buf = malloc(r->len);
	if (!r->buf)
		return -ENOMEM;
	for (unsigned i = 0; i < r->niov; i++) {
		memcpy(r->buf + at, r->iov[i].iov_base, r->iov[i].iov_len);
		at += r->iov[i].iov_len;
	}
	r->niov = 0;
	return 0;
}

/* Adds LEN bytes from BASE, at file offset FILE_OFF of the reply (R): a stp_cache_sink_fn. */
static int reply_add(void *arg, uint64_t file_off, const uint8_t *base, size_t len)
{
	struct read_reply *r = arg;

	if (!r->buf && r->niov == READ_PIECES) {
		int err = reply_to_copy(r);

		if (err)
			return err;
	}
	if (r->buf) {
		memcpy(r->buf + (file_off - r->off), base, len);
		return 0;
	}
	r->iov[r->niov].iov_base = (void *)base;
	r->iov[r->niov].iov_len = len;
	r->niov++;
	return 0;
}

static int reply_zeros(struct read_reply *r, uint64_t file_off, size_t len)
{
	for (size_t n; len; len -= n, file_off += n) {
		int err = 0;

		n = len < sizeof(zeros) ? len : sizeof(zeros);
		if (r->buf)
			memset(r->buf + (file_off - r->off), 0, n);
		else
			err = reply_add(r, file_off, zeros, n);
		if (err)
			return err;
	}
	return 0;
}

/* Copies LEN bytes at IN of the pinned block into the reply buffer, at file offset
 * FILE_OFF, through the cache (which unfilters them if need be). */
static int reply_read(struct read_reply *r, uint64_t file_off, size_t in, size_t len)
{
	int err = r->buf ? 0 : reply_to_copy(r);

	if (!err)
		err = stp_blocks_read(&r->blocks, &r->ref, in, len, r->buf + (file_off - r->off));
	return err;
}

/* Pins BLOCK with its first END bytes final, letting go of the block pinned before: a
 * second block means copying. A read from the block's start may be reading a file's
 * cuts in order: the next is decoded ahead. */
static int reply_pin(struct read_reply *r, uint64_t block, size_t start, size_t end)
{
	int err;

	if (r->ref.entry && r->ref.block == block)
		return stp_blocks_wait(&r->blocks, &r->ref, end);
	if (r->ref.entry) {
		if (!r->buf && (err = reply_to_copy(r)))
			return err;
		stp_blocks_release(&r->blocks, &r->ref);
	}
	return stp_blocks_get(&r->blocks, block, start, end, &r->ref);
}

/* Adds piece P: zeros for a hole, else its bytes of the block, pinned. */
static int reply_piece(void *arg, const struct stp_file_piece *p)
{
	struct read_reply *r = arg;
	int err;

	if (p->block == STP_FILE_HOLE)
		return reply_zeros(r, p->file_off, (size_t)p->len);
	r->block = p->block;
	err = reply_pin(r, p->block, (size_t)p->in_block, (size_t)(p->in_block + p->len));
	if (err)
		return err;
	err = stp_file_piece_check(r->fs->img, p, r->ref.size);
	if (err)
		return err;
	stp_blocks_note_read(&r->blocks, p->stream_off, p->len);
	if (p->in_block + p->len <= r->ref.direct)
		return stp_cache_feed(&r->ref, (size_t)p->in_block, (size_t)p->len, p->file_off,
				      reply_add, r); /* in place, and zeros past its body */
	/* a filtered block still decoding: its bytes are unfiltered in a copy */
	return reply_read(r, p->file_off, (size_t)p->in_block, (size_t)p->len);
}

/* Answers [OFF, OFF + LEN) of file INODE, LEN > 0 and within the file; on an error, the
 * caller replies, and *BLOCK is the block it failed on (UINT64_MAX: none). */
static int read_reply(struct stp_fs *fs, fuse_req_t req, const struct stp_inode *inode,
		      uint64_t off, size_t len, uint64_t *block)
{
	struct read_reply r = { .fs = fs, .blocks = { fs->cache, fs->warmer, fs->filler },
				.off = off, .len = len, .block = UINT64_MAX };
	int err = stp_file_walk(fs->img, inode, off, len, reply_piece, &r);

	if (r.buf)
		stp_blocks_release(&r.blocks, &r.ref); /* copied: the reply needs no block */
	if (!err && r.buf)
		fuse_reply_buf(req, (const char *)r.buf, len);
	else if (!err)
		fuse_reply_iov(req, r.iov, (int)r.niov);
	stp_blocks_release(&r.blocks, &r.ref);
	free(r.buf);
	*block = r.block;
	return err;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	uint64_t block = UINT64_MAX;
	uint32_t n = UINT32_MAX;
	int err = load_inode(fs, ino, &n, &inode);

	if (!err && !S_ISREG(inode.mode))
		err = -EISDIR;
	if (!err && (off < 0 || (uint64_t)off >= inode.size || !size)) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (!err) {
		if (size > inode.size - (uint64_t)off)
			size = (size_t)(inode.size - (uint64_t)off);
		stp_record_read(fs->recorder, n, (uint64_t)off, size);
		err = read_reply(fs, req, &inode, (uint64_t)off, size, &block);
	}
	if (err)
		fuse_reply_err(req, to_errno(err));
	/* after the reply: finding the file's path for the message may take a moment */
	if (err && err != -EISDIR)
		stp_readfail_note(fs->readfail, fs->img, n, (uint64_t)off, size, err, block);
}

/* SEEK_DATA and SEEK_HOLE (the kernel answers the other kinds itself): where the file's
 * extents begin and end. */
static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	uint64_t at = 0;
	uint32_t n;
	int err = whence == SEEK_DATA || whence == SEEK_HOLE ? 0 : -EINVAL;

	if (!err)
		err = load_inode(fs, ino, &n, &inode);
	if (!err && !S_ISREG(inode.mode))
		err = -EINVAL;
	if (!err)
		err = off < 0 ? -ENXIO : stp_file_seek(fs->img, &inode, (uint64_t)off,
						       whence == SEEK_DATA, &at);
	if (err)
		fuse_reply_err(req, to_errno(err));
	else
		fuse_reply_lseek(req, (off_t)at);
}

/* Marks image inode N as an opened directory; true when it was already. */
static bool opened_before(struct stp_fs *fs, fuse_ino_t ino)
{
	uint32_t n;
	unsigned char bit;

	if (!fs->opened_dirs || stp_fuseino_image(ino, &n) || n >= fs->inode_count)
		return true;
	bit = (unsigned char)(1u << (n & 7));
	return atomic_fetch_or_explicit(&fs->opened_dirs[n >> 3], bit, memory_order_relaxed) & bit;
}

/* The kernel keeps a directory's listing from its second opening on. Keeping it costs
 * the reader about half as much again as the listing (the kernel copies each entry into
 * the directory's page cache: 0.15 us an entry here, a quarter of a find's time over a
 * million files), and a walker (find, du, ls -R) lists each directory once; a directory
 * opened again is likely to be opened again after that, and then costs no listing. */
static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fi->cache_readdir = opened_before(fs_of(req), ino);
	fi->keep_cache = 1; /* a listing kept earlier stays */
	fuse_reply_open(req, fi);
}

enum dir_attrs { ATTRS_NONE, ATTRS_DIRS, ATTRS_ALL };
/* Lookups of non-directories that make walkers look like they stat what they list. */
#define STAT_WALK 16u

/* The most entries ROOM bytes of a reply can take, and one more, that finds no room: each
 * entry has a name of a byte at least. A run reads no more, so that a small reply (the
 * kernel asks for as little as a page) decodes no entries it cannot send. */
static uint32_t entries_fit(bool plus, size_t room)
{
	size_t least = FUSE_DIRENT_ALIGN((plus ? FUSE_NAME_OFFSET_DIRENTPLUS : FUSE_NAME_OFFSET) + 1);
	size_t n = room / least + 1;

	return n < STP_DIR_RUN ? (uint32_t)n : STP_DIR_RUN;
}

/* Entry I of directory DIR (N): ".", "..", then the image's entries, read a run at a time
 * into RUN, as many as ROOM bytes of the reply can take. *NAME points at the name, in RUN
 * or static. */
static int dir_entry(const struct stp_fs *fs, uint32_t n, const struct stp_inode *dir, uint64_t i,
		     struct stp_dir_run *run, bool plus, size_t room, const char **name,
		     uint32_t *ino, unsigned *dtype)
{
	uint32_t k;
	int err;

	if (i < 2) {
		*name = i ? ".." : ".";
		*ino = i ? dir->parent : n;
		*dtype = DT_DIR;
		return 0;
	}
	if (i - 2 < run->first || i - 2 >= (uint64_t)run->first + run->count) {
		err = stp_image_dir_run(fs->img, dir, (uint32_t)(i - 2), entries_fit(plus, room), run);
		if (err)
			return err;
		if (!run->count)
			return -ENOENT;
	}
	k = (uint32_t)(i - 2) - run->first;
	*name = run->names + run->name_at[k];
	*ino = run->ent[k].ino;
	*dtype = run->ent[k].dtype;
	return 0;
}

/* Adds entry I to BUF; *NEED is the space it takes (more than ROOM: it did not fit). With
 * ATTRS the entry carries the inode's attributes, which makes the kernel build its inode
 * at once, and is counted as a lookup (appended to INOS[*COUNTED]); without, it is a
 * name, an inode number and a type, in either kind of reply. */
static int add_entry(const struct stp_fs *fs, fuse_req_t req, uint32_t n,
		     const struct stp_inode *dir, uint64_t i, struct stp_dir_run *run, bool plus,
		     enum dir_attrs attrs, char *buf, size_t room, size_t *need, uint32_t *inos,
		     size_t *counted)
{
	struct fuse_entry_param e;
	struct stp_inode inode;
	const char *name;
	unsigned dtype;
	uint32_t ino;
	int err = dir_entry(fs, n, dir, i, run, plus, room, &name, &ino, &dtype);

	if (err)
		return err;
	memset(&e, 0, sizeof(e));
	/* The kernel makes no inode for "." and "..", whatever the reply says. */
	if (i < 2 || attrs == ATTRS_NONE || (attrs == ATTRS_DIRS && dtype != DT_DIR)) {
		e.attr.st_ino = stp_fuseino_of(ino);
		e.attr.st_mode = DTTOIF(dtype);
		*need = plus ? fuse_add_direntry_plus(req, buf, room, name, &e, (off_t)(i + 1))
			     : fuse_add_direntry(req, buf, room, name, &e.attr, (off_t)(i + 1));
		return 0;
	}
	err = stp_image_inode(fs->img, ino, &inode);
	if (err)
		return err;
	fill_entry(fs, ino, &inode, &e);
	*need = fuse_add_direntry_plus(req, buf, room, name, &e, (off_t)(i + 1));
	if (*need <= room) {
		stp_inodes_lookup(fs->inodes, ino, &inode);
		inos[(*counted)++] = ino;
	}
	return 0;
}

/* Which entries of a READDIRPLUS reply carry attributes. An entry with them saves a
 * lookup if it is stat'ed, and costs the kernel an inode either way (some microseconds:
 * seconds over a million entries that find only names), so they go only where a walker
 * is seen to use them. The kernel (FUSE_CAP_READDIRPLUS_AUTO) asks for plus at a directory's first
 * read, a guess, and later only once an entry it was given was used or a name of the
 * directory was looked up: evidence, which a later read of a directory holding other
 * than directories (DIR's link count says: a hint, nothing more) records in
 * fs->stat_walk, as lookups of non-directories do, one by one (a runtime that stats the
 * module it found in a listing is not yet a walker that stats all it lists). At the
 * guess, directories get attributes (a walker descends into them), other entries only
 * while fs->stat_walk says that walkers stat what they list. */
static enum dir_attrs dir_attrs_for(struct stp_fs *fs, const struct stp_inode *dir, off_t off,
				    bool plus)
{
	/* recording: a name the kernel got with attributes is never looked up, so the list
	 * would lack it, and a later mount would send the lookup priming was to answer */
	if (fs->recorder)
		return ATTRS_NONE;
	if (off > 0) {
		if ((uint64_t)dir->count + 2 > dir->nlink)
			atomic_store_explicit(&fs->stat_walk, plus ? STAT_WALK : 0,
					      memory_order_relaxed);
		return plus ? ATTRS_ALL : ATTRS_NONE;
	}
	if (!plus)
		return ATTRS_NONE;
	return atomic_load_explicit(&fs->stat_walk, memory_order_relaxed) >= STAT_WALK ? ATTRS_ALL
										       : ATTRS_DIRS;
}

/* The smallest entry a reply holds (a dirent with a name of one byte, padded to 8), which
 * bounds how many entries one reply counts as lookups. */
#define DIRENT_MIN 32u

/* Takes back the lookups of the COUNT entries in INOS: the kernel never got the reply. */
static void forget_sent(struct stp_fs *fs, const uint32_t *inos, size_t count)
{
	for (size_t k = 0; k < count; k++)
		stp_inodes_forget(fs->inodes, inos[k], 1);
}

/* Offsets: entry I is followed by offset I + 1, so OFF is the next entry to send. */
static void read_dir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_dir_run *run = NULL;
	struct stp_inode dir;
	enum dir_attrs attrs;
	char *buf = NULL;
	uint32_t *inos = NULL; /* the entries counted as lookups */
	size_t used = 0, need, counted = 0;
	uint32_t n;
	int err = load_inode(fs, ino, &n, &dir);

	if (!err && !S_ISDIR(dir.mode))
		err = -ENOTDIR;
	if (!err && (!(buf = malloc(size)) || !(run = malloc(sizeof(*run))) ||
		     !(inos = malloc((size / DIRENT_MIN + 1) * sizeof(*inos)))))
		err = -ENOMEM;
	if (run)
		run->first = run->count = 0;
	attrs = err ? ATTRS_NONE : dir_attrs_for(fs, &dir, off, plus);
	for (uint64_t i = off < 0 ? 0 : (uint64_t)off; !err && i < (uint64_t)dir.count + 2; i++) {
		err = add_entry(fs, req, n, &dir, i, run, plus, attrs, buf + used, size - used,
				&need, inos, &counted);
		if (err || need > size - used)
			break;
		used += need;
	}
	if (err) {
		fuse_reply_err(req, to_errno(err));
		forget_sent(fs, inos, counted);
	} else if (fuse_reply_buf(req, buf, used)) {
		forget_sent(fs, inos, counted); /* the kernel never got them */
	}
	free(inos);
	free(run);
	free(buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, false);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	read_dir(req, ino, size, off, true);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	const struct stp_superblock *sb = stp_image_sb(fs_of(req)->img);
	struct statvfs st;

	memset(&st, 0, sizeof(st));
	st.f_bsize = 4096;
	st.f_frsize = 4096;
	st.f_blocks = (fsblkcnt_t)((sb->image_size + 4095) / 4096);
	st.f_files = sb->inode_count;
	st.f_namemax = STP_NAME_MAX;
	fuse_reply_statfs(req, &st);
}

/* The mount's status, asked by `stipple status` as a hidden attribute of the root. */
static void reply_status(struct stp_fs *fs, fuse_req_t req, size_t size)
{
	char buf[STP_STATUS_MAX];
	int len = stp_status_format(fs->img, fs->cache, fs->warmer, fs->filler, fs->inodes,
				    fs->readfail, fs->opts->warm_workers, buf, sizeof(buf));

	if (len < 0)
		fuse_reply_err(req, -len);
	else if (!size)
		fuse_reply_xattr(req, (size_t)len);
	else if (size < (size_t)len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, buf, (size_t)len);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	struct stp_xattr x;
	uint32_t n;
	void *value;
	int err = load_inode(fs, ino, &n, &inode);

	if (ino == FUSE_ROOT_ID && !strcmp(name, STP_STATUS_XATTR)) {
		reply_status(fs, req, size);
		return;
	}
	if (!err && fs->no_xattrs)
		err = -EOPNOTSUPP;
	if (!err) /* bisected: an inode's names are sorted (stipple(5)) */
		err = stp_image_xattr_find(fs->img, &inode, name, &x);
	if (err) {
		fuse_reply_err(req, to_errno(err));
	} else if (!size) {
		fuse_reply_xattr(req, x.value_len);
	} else if (size < x.value_len) {
		fuse_reply_err(req, ERANGE);
	} else if (!(value = malloc(x.value_len ? x.value_len : 1))) {
		fuse_reply_err(req, ENOMEM);
	} else {
		err = stp_image_xattr_value(fs->img, &x, value);
		if (err)
			fuse_reply_err(req, to_errno(err));
		else
			fuse_reply_buf(req, value, x.value_len);
		free(value);
	}
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct stp_fs *fs = fs_of(req);
	struct stp_inode inode;
	char xname[STP_XATTR_NAME_MAX + 1];
	struct stp_xattr x;
	size_t total = 0;
	char *buf = NULL;
	uint32_t n;
	int err = load_inode(fs, ino, &n, &inode);

	for (uint32_t i = 0; !err && i < inode.xattr_count; i++) {
		err = stp_image_xattr(fs->img, &inode, i, &x, xname);
		total += x.name_len + 1u;
	}
	if (!err && size && size < total)
		err = -ERANGE;
	if (!err && size && !(buf = malloc(total ? total : 1)))
		err = -ENOMEM;
	for (uint32_t i = 0, used = 0; !err && buf && i < inode.xattr_count; i++) {
		err = stp_image_xattr(fs->img, &inode, i, &x, xname);
		if (err)
			break;
		memcpy(buf + used, xname, x.name_len + 1u);
		used += x.name_len + 1u;
	}
	if (err)
		fuse_reply_err(req, to_errno(err));
	else if (!size)
		fuse_reply_xattr(req, total);
	else
		fuse_reply_buf(req, buf, total);
	free(buf);
}

const struct fuse_lowlevel_ops stp_fuseops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.readdirplus = op_readdirplus,
	.releasedir = op_release,
	.statfs = op_statfs,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.lseek = op_lseek,
};
