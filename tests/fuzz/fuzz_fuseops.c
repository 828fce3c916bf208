/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: an image opened from arbitrary bytes and served through the FUSE
 * operations of mounthelper/mount/fuseops.c, as the daemon serves it, with fuse_shim.c
 * standing in for libfuse and the kernel (it checks every reply).
 *
 * From the root, breadth-first over at most MAX_NODES inodes: getattr; listxattr and
 * getxattr with size 0, a short buffer, the exact size and a large one; for directories
 * readdir and readdirplus whole, in small buffers from each returned offset and from odd
 * offsets, then a lookup of every name listed (the children are the next inodes to
 * visit) and of names that are not there; for files reads at offsets and sizes around
 * block edges and the end, each compared with stp_file_read, and lseek's SEEK_DATA and
 * SEEK_HOLE from those offsets, compared with the extent table; for links readlink, whose
 * target must be as long as getattr said. Operations on the wrong type of inode, on
 * inode numbers out of range, statfs, the mount status attribute and the read recorder's
 * hot list are tried too. Each input is tried as given and resealed (fuzz.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache.h"
#include "fileread.h"
#include "format.h"
#include "fuse_shim.h"
#include "fuseops.h"
#include "fuzz.h"
#include "image.h"
#include "log.h"
#include "mountopts.h"
#include "mountstatus.h"
#include "record.h"

#define MAX_NODES 256u             /* inodes visited */
#define MAX_NAMES 64u              /* names of one directory or xattr list looked up */
#define MAX_PAGES 64u              /* readdir calls to list one directory piecewise */
#define MAX_BLOCK_SIZE (4u << 20)  /* images with larger blocks are opened, not served */
#define READ_BUDGET (16u << 20)    /* bytes read through op_read per image */
#define BIG (128u << 10)           /* a large readdir or xattr buffer */
#define XATTR_MAX 65536u           /* the largest size the kernel asks with */

struct walker {
	struct stp_fs *fs;
	struct fuse_req req;
	fuse_ino_t queue[MAX_NODES];
	unsigned head, len;
	uint64_t read_left;
	uint32_t block_size;
};

static uint8_t oracle[STP_MAX_READ];

static struct shim_reply *begin(struct walker *w, enum shim_op op, fuse_ino_t ino, size_t size)
{
	shim_clear(&w->req);
	w->req.op = op;
	w->req.ino = ino;
	w->req.size = size;
	w->req.userdata = w->fs;
	return &w->req.reply;
}

static struct shim_reply *end(struct walker *w)
{
	shim_finish(&w->req);
	return &w->req.reply;
}

static int is_err(const struct shim_reply *r, int err)
{
	return r->kind == SHIM_ERR && r->err == err;
}

static struct shim_reply *do_getattr(struct walker *w, fuse_ino_t ino)
{
	begin(w, SHIM_GETATTR, ino, 0);
	stp_fuseops.getattr(&w->req, ino, NULL);
	return end(w);
}

static struct shim_reply *do_lookup(struct walker *w, fuse_ino_t parent, const char *name)
{
	begin(w, SHIM_LOOKUP, parent, 0);
	stp_fuseops.lookup(&w->req, parent, name);
	return end(w);
}

static struct shim_reply *do_readdir(struct walker *w, fuse_ino_t ino, size_t size, off_t off,
				     int plus)
{
	struct fuse_file_info fi = { .flags = O_RDONLY };

	begin(w, plus ? SHIM_READDIRPLUS : SHIM_READDIR, ino, size);
	(plus ? stp_fuseops.readdirplus : stp_fuseops.readdir)(&w->req, ino, size, off, &fi);
	return end(w);
}

static struct shim_reply *do_getxattr(struct walker *w, fuse_ino_t ino, const char *name,
				      size_t size)
{
	begin(w, SHIM_GETXATTR, ino, size);
	stp_fuseops.getxattr(&w->req, ino, name, size);
	return end(w);
}

static struct shim_reply *do_listxattr(struct walker *w, fuse_ino_t ino, size_t size)
{
	begin(w, SHIM_LISTXATTR, ino, size);
	stp_fuseops.listxattr(&w->req, ino, size);
	return end(w);
}

static struct shim_reply *do_open(struct walker *w, fuse_ino_t ino, int flags, int dir)
{
	struct fuse_file_info fi = { .flags = flags };

	begin(w, dir ? SHIM_OPENDIR : SHIM_OPEN, ino, 0);
	(dir ? stp_fuseops.opendir : stp_fuseops.open)(&w->req, ino, &fi);
	return end(w);
}

static void do_release(struct walker *w, fuse_ino_t ino, int dir)
{
	struct fuse_file_info fi = { .flags = O_RDONLY };

	begin(w, SHIM_RELEASE, ino, 0);
	(dir ? stp_fuseops.releasedir : stp_fuseops.release)(&w->req, ino, &fi);
	end(w);
}

static struct shim_reply *do_read(struct walker *w, fuse_ino_t ino, size_t size, off_t off)
{
	struct fuse_file_info fi = { .flags = O_RDONLY };

	begin(w, SHIM_READ, ino, size);
	stp_fuseops.read(&w->req, ino, size, off, &fi);
	return end(w);
}

static struct shim_reply *do_lseek(struct walker *w, fuse_ino_t ino, off_t off, int whence)
{
	struct fuse_file_info fi = { .flags = O_RDONLY };

	begin(w, SHIM_LSEEK, ino, 0);
	stp_fuseops.lseek(&w->req, ino, off, whence, &fi);
	return end(w);
}

static void enqueue(struct walker *w, fuse_ino_t ino)
{
	for (unsigned i = 0; i < w->len; i++)
		if (w->queue[i] == ino)
			return;
	if (w->len < MAX_NODES)
		w->queue[w->len++] = ino;
}

/* A failure the kernel may see from a damaged image: EIO, or ENOMEM. */
static void check_damage(const struct shim_reply *r)
{
	FUZZ_ASSERT(r->kind == SHIM_ERR);
	FUZZ_ASSERT(r->err == EIO || r->err == ENOMEM);
}

static void xattr_value(struct walker *w, fuse_ino_t ino, const char *name)
{
	struct shim_reply *r = do_getxattr(w, ino, name, 0);
	size_t len;

	if (r->kind != SHIM_XATTR_SIZE) {
		FUZZ_ASSERT(r->kind == SHIM_ERR);
		return;
	}
	len = r->xattr_size;
	if (len > XATTR_MAX)
		return;
	r = do_getxattr(w, ino, name, XATTR_MAX);
	FUZZ_ASSERT(r->kind == SHIM_DATA && r->len == len);
	if (len) {
		r = do_getxattr(w, ino, name, len - 1);
		FUZZ_ASSERT(is_err(r, ERANGE));
		r = do_getxattr(w, ino, name, len);
		FUZZ_ASSERT(r->kind == SHIM_DATA && r->len == len);
	}
}

static void xattrs(struct walker *w, fuse_ino_t ino)
{
	struct shim_reply *r = do_listxattr(w, ino, 0);
	size_t total, names = 0;
	char *list;

	if (r->kind == SHIM_ERR) {
		check_damage(r);
		return;
	}
	FUZZ_ASSERT(r->kind == SHIM_XATTR_SIZE);
	total = r->xattr_size;
	if (total > XATTR_MAX)
		return;
	if (total) {
		r = do_listxattr(w, ino, total - 1);
		FUZZ_ASSERT(is_err(r, ERANGE));
	}
	r = do_listxattr(w, ino, XATTR_MAX);
	FUZZ_ASSERT(r->kind == SHIM_DATA && r->len == total);
	list = malloc(total + 1);
	if (!list)
		abort();
	memcpy(list, r->data, total + 1);
	r = do_listxattr(w, ino, total ? total : 1);
	FUZZ_ASSERT(r->kind == SHIM_DATA && r->len == total && !memcmp(r->data, list, total));
	for (size_t at = 0; at < total && names < MAX_NAMES; at += strlen(list + at) + 1, names++)
		xattr_value(w, ino, list + at);
	free(list);
	r = do_getxattr(w, ino, "user.stipple-fuzz.missing", 0);
	FUZZ_ASSERT(r->kind == SHIM_ERR);
	r = do_getxattr(w, ino, "user.stipple-fuzz.missing", 16);
	FUZZ_ASSERT(r->kind == SHIM_ERR);
}

/* The listing of directory INO in one large buffer: *N entries, the caller's to free. */
static struct shim_dirent *listing(struct walker *w, fuse_ino_t ino, int plus, size_t *n)
{
	struct shim_reply *r = do_readdir(w, ino, BIG, 0, plus);
	struct shim_dirent *d;

	*n = 0;
	if (r->kind != SHIM_DATA) {
		check_damage(r);
		return NULL;
	}
	d = r->dirents;
	*n = r->ndirents;
	r->dirents = NULL; /* the caller's now */
	if (*n) {
		FUZZ_ASSERT(!strcmp(d[0].name, ".") && d[0].off == 1 && d[0].ino == ino);
		FUZZ_ASSERT(*n < 2 || (!strcmp(d[1].name, "..") && d[1].off == 2));
	}
	return d;
}

static int same_entry(const struct shim_dirent *a, const struct shim_dirent *b, int plus)
{
	/* readdirplus gives the inode's own type, readdir the directory entry's */
	return a->ino == b->ino && a->off == b->off && !strcmp(a->name, b->name) &&
	       (plus || a->type == b->type);
}

/* Lists INO (COUNT entries besides "." and "..") again in buffers of SIZE bytes, each
 * call going on from the offset the last entry gave: the same entries as the one-buffer
 * listing ALL (N of them), as far as that one went. */
static void list_piecewise(struct walker *w, fuse_ino_t ino, uint64_t count, int plus,
			   size_t size, const struct shim_dirent *all, size_t n)
{
	off_t off = 0;

	for (unsigned page = 0; page < MAX_PAGES; page++) {
		struct shim_reply *r = do_readdir(w, ino, size, off, plus);

		if (r->kind != SHIM_DATA) {
			check_damage(r);
			return;
		}
		/* a page holds any entry: empty means the end */
		if (!r->ndirents) {
			FUZZ_ASSERT(size < 4096 || (uint64_t)off >= count + 2);
			return;
		}
		for (size_t i = 0; i < r->ndirents; i++) {
			const struct shim_dirent *d = &r->dirents[i];

			FUZZ_ASSERT(d->off > (uint64_t)off);
			if (d->off - 1 < n)
				FUZZ_ASSERT(same_entry(d, &all[d->off - 1], plus));
		}
		off = (off_t)r->dirents[r->ndirents - 1].off;
	}
}

/* Listings from offsets the kernel does not send but a reader may seek to. */
static void list_odd(struct walker *w, fuse_ino_t ino, uint64_t count)
{
	const off_t offs[] = { -1, 1, 2, 3, (off_t)count + 1, (off_t)count + 2,
			       (off_t)count + 3, INT64_MAX };

	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++)
		for (int plus = 0; plus < 2; plus++) {
			struct shim_reply *r = do_readdir(w, ino, 4096, offs[i], plus);

			if (r->kind != SHIM_DATA)
				check_damage(r);
			else if (offs[i] >= (off_t)count + 2)
				FUZZ_ASSERT(r->ndirents == 0);
		}
}

static void lookup_missing(struct walker *w, fuse_ino_t dir, const char *near)
{
	static char longname[1025];
	char name[STP_NAME_MAX + 2];
	const char *names[] = { "", ".", "..", "a/b", longname, longname + 1024 - 256, name };
	struct shim_reply *r;

	memset(longname, 'z', sizeof(longname) - 1);
	snprintf(name, sizeof(name), "%s~", near);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		r = do_lookup(w, dir, names[i]);
		if (r->kind == SHIM_ENTRY && r->entry.ino)
			enqueue(w, r->entry.ino);
		else if (r->kind == SHIM_ERR)
			FUZZ_ASSERT(r->err == EIO || r->err == ENOTDIR || r->err == ESTALE);
	}
}

static void visit_dir(struct walker *w, fuse_ino_t ino)
{
	struct shim_dirent *all, *plus;
	struct stp_inode in;
	size_t n, nplus;
	struct shim_reply *r;

	if (stp_image_inode(w->fs->img, (uint32_t)(ino - 1), &in))
		abort(); /* getattr just found it */
	r = do_open(w, ino, O_RDONLY | O_DIRECTORY, 1);
	FUZZ_ASSERT(r->kind == SHIM_OPENED);
	all = listing(w, ino, 0, &n);
	plus = listing(w, ino, 1, &nplus);
	for (size_t i = 0; all && plus && i < n && i < nplus; i++)
		FUZZ_ASSERT(same_entry(&all[i], &plus[i], 1));
	r = do_readdir(w, ino, 1, 0, 0); /* too small for any entry */
	FUZZ_ASSERT(r->kind != SHIM_DATA || r->len == 0);
	if (all) {
		list_piecewise(w, ino, in.count, 0, 48, all, n);
		list_piecewise(w, ino, in.count, 0, 4096, all, n);
		list_piecewise(w, ino, in.count, 1, 200, all, n);
		list_piecewise(w, ino, in.count, 1, 4096, all, n);
	}
	list_odd(w, ino, in.count);
	for (size_t i = 2; all && i < n && i < MAX_NAMES + 2; i++) {
		r = do_lookup(w, ino, all[i].name);
		if (r->kind == SHIM_ENTRY && r->entry.ino)
			enqueue(w, r->entry.ino);
		else
			FUZZ_ASSERT(r->kind == SHIM_ENTRY || r->kind == SHIM_ERR);
	}
	lookup_missing(w, ino, all && n > 2 ? all[2].name : "a");
	do_release(w, ino, 1);
	free(all);
	free(plus);
}

/* One read: as many bytes as are there (short only at the end), the bytes stp_file_read
 * gives. */
static void read_at(struct walker *w, fuse_ino_t ino, const struct stp_inode *in, off_t off,
		    size_t size)
{
	uint64_t want;
	struct shim_reply *r;
	ssize_t got;

	if (size > w->read_left)
		return;
	w->read_left -= size;
	r = do_read(w, ino, size, off);
	if (r->kind == SHIM_ERR) {
		check_damage(r);
		return;
	}
	FUZZ_ASSERT(r->kind == SHIM_DATA);
	want = off < 0 || (uint64_t)off >= in->size ? 0 : in->size - (uint64_t)off;
	want = want < size ? want : size;
	FUZZ_ASSERT(r->len == want);
	if (!want)
		return;
	got = stp_file_read(w->fs->img, w->fs->cache, in, (uint64_t)off, (size_t)want, oracle);
	if (got >= 0)
		FUZZ_ASSERT((uint64_t)got == want && !memcmp(oracle, r->data, (size_t)want));
}

/* What lseek should answer from OFF, read from the extent table alone: *AT, or -ENXIO;
 * -EUCLEAN when an extent does not decode or the extents are out of order. */
static int seek_oracle(const struct stp_image *img, const struct stp_inode *in, uint64_t off,
		       int data, uint64_t *at)
{
	uint64_t hole = off, first = UINT64_MAX, prev_end = 0;

	if (off >= in->size)
		return -ENXIO;
	for (uint32_t i = 0; i < in->count; i++) {
		struct stp_extent e;
		uint64_t end;

		if (stp_image_extent(img, in, i, &e) || e.file_off < prev_end)
			return -EUCLEAN; /* out of order: stipple(5) makes it damage */
		prev_end = e.file_off + e.length;
		end = e.file_off + e.length < in->size ? e.file_off + e.length : in->size;
		if (end > off && e.file_off < end && first == UINT64_MAX)
			first = e.file_off > off ? e.file_off : off;
		if (e.file_off <= hole && end > hole)
			hole = end;
	}
	if (data && first == UINT64_MAX)
		return -ENXIO;
	*at = data ? first : hole;
	return 0;
}

/* SEEK_DATA and SEEK_HOLE from OFF: the extent table's answer, or a damaged image's. */
static void seek_at(struct walker *w, fuse_ino_t ino, const struct stp_inode *in, off_t off)
{
	for (int data = 0; data < 2; data++) {
		struct shim_reply *r = do_lseek(w, ino, off, data ? SEEK_DATA : SEEK_HOLE);
		uint64_t at = 0;
		int want = off < 0 ? -ENXIO : seek_oracle(w->fs->img, in, (uint64_t)off, data, &at);

		if (r->kind == SHIM_ERR && r->err != ENXIO) {
			check_damage(r);
			continue;
		}
		if (want == -EUCLEAN)
			continue; /* the walk may have stopped before the bad extent */
		if (want)
			FUZZ_ASSERT(r->kind == SHIM_ERR && r->err == ENXIO);
		else
			FUZZ_ASSERT(r->kind == SHIM_OFFSET && (uint64_t)r->offset == at);
	}
}

static void visit_file(struct walker *w, fuse_ino_t ino, const struct stat *st)
{
	const uint64_t bs = w->block_size, size = (uint64_t)st->st_size;
	const uint64_t offs[] = { 0, 1, bs - 1, bs - 5, bs, 2 * bs - 3, size / 2, size - 1,
				  size, size + 1, size + bs, UINT64_C(1) << 62, INT64_MAX,
				  (uint64_t)-1 };
	const size_t sizes[] = { 4096, 1, 7, 65537, STP_MAX_READ };
	struct stp_inode in;
	struct shim_reply *r;

	if (stp_image_inode(w->fs->img, (uint32_t)(ino - 1), &in))
		abort(); /* getattr just found it */
	r = do_open(w, ino, O_WRONLY, 0);
	FUZZ_ASSERT(is_err(r, EROFS));
	r = do_open(w, ino, O_RDONLY, 0);
	FUZZ_ASSERT(r->kind == SHIM_OPENED);
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		read_at(w, ino, &in, (off_t)offs[i], sizes[0]);
		read_at(w, ino, &in, (off_t)offs[i], sizes[1 + i % 4]);
		seek_at(w, ino, &in, (off_t)offs[i]);
	}
	do_release(w, ino, 0);
}

static void visit_link(struct walker *w, fuse_ino_t ino, const struct stat *st)
{
	struct shim_reply *r = begin(w, SHIM_READLINK, ino, 0);

	stp_fuseops.readlink(&w->req, ino);
	r = end(w);
	if (r->kind == SHIM_ERR) {
		check_damage(r);
		return;
	}
	FUZZ_ASSERT(r->kind == SHIM_LINK);
	/* the whole target: a NUL inside would cut it short */
	FUZZ_ASSERT(r->len == (uint64_t)st->st_size);
}

/* Operations on an inode of the wrong type are refused with the errno the VFS expects. */
static void wrong_type(struct walker *w, fuse_ino_t ino, const struct stat *st)
{
	struct shim_reply *r;

	if (!S_ISDIR(st->st_mode)) {
		r = do_readdir(w, ino, 4096, 0, 0);
		FUZZ_ASSERT(is_err(r, ENOTDIR));
		r = do_lookup(w, ino, "x");
		FUZZ_ASSERT(is_err(r, ENOTDIR));
	}
	if (!S_ISREG(st->st_mode)) {
		r = do_read(w, ino, 4096, 0);
		FUZZ_ASSERT(is_err(r, EISDIR));
	}
	if (!S_ISLNK(st->st_mode)) {
		begin(w, SHIM_READLINK, ino, 0);
		stp_fuseops.readlink(&w->req, ino);
		r = end(w);
		FUZZ_ASSERT(is_err(r, EINVAL));
	}
}

static void visit(struct walker *w, fuse_ino_t ino)
{
	struct shim_reply *r = do_getattr(w, ino);
	struct stat st;

	if (r->kind == SHIM_ERR) {
		check_damage(r);
		return;
	}
	st = r->attr;
	xattrs(w, ino);
	wrong_type(w, ino, &st);
	if (S_ISDIR(st.st_mode))
		visit_dir(w, ino);
	else if (S_ISREG(st.st_mode))
		visit_file(w, ino, &st);
	else if (S_ISLNK(st.st_mode))
		visit_link(w, ino, &st);
}

/* The hidden status attribute of the root, and statfs. */
static void mount_wide(struct walker *w)
{
	struct shim_reply *r = do_getxattr(w, FUSE_ROOT_ID, STP_STATUS_XATTR, 0);
	size_t len;

	FUZZ_ASSERT(r->kind == SHIM_XATTR_SIZE && r->xattr_size > 0);
	len = r->xattr_size;
	r = do_getxattr(w, FUSE_ROOT_ID, STP_STATUS_XATTR, len - 1);
	FUZZ_ASSERT(is_err(r, ERANGE));
	r = do_getxattr(w, FUSE_ROOT_ID, STP_STATUS_XATTR, STP_STATUS_MAX);
	FUZZ_ASSERT(r->kind == SHIM_DATA && r->len == len);
	begin(w, SHIM_STATFS, FUSE_ROOT_ID, 0);
	stp_fuseops.statfs(&w->req, FUSE_ROOT_ID);
	r = end(w);
	FUZZ_ASSERT(r->kind == SHIM_STATFS_REPLY);
	FUZZ_ASSERT(r->statfs.f_files == stp_image_sb(w->fs->img)->inode_count);
}

/* Inode numbers the kernel never had from us: ESTALE or EIO, never a crash. */
static void out_of_range(struct walker *w)
{
	const fuse_ino_t inos[] = { 0, (fuse_ino_t)stp_image_sb(w->fs->img)->inode_count + 1,
				    (fuse_ino_t)UINT32_MAX + 1, (fuse_ino_t)UINT32_MAX + 2,
				    UINT64_MAX };
	struct shim_reply *r;

	for (size_t i = 0; i < sizeof(inos) / sizeof(inos[0]); i++) {
		r = do_getattr(w, inos[i]);
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
		r = do_lookup(w, inos[i], "a");
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
		r = do_readdir(w, inos[i], 4096, 0, 1);
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
		r = do_read(w, inos[i], 4096, 0);
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
		r = do_listxattr(w, inos[i], 0);
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
		r = do_getxattr(w, inos[i], "user.a", 0);
		FUZZ_ASSERT(is_err(r, ESTALE) || is_err(r, EIO));
	}
}

/* INIT as the kernel sends it: with every capability (the kernel opens files without
 * asking; directories are still answered), then with none, which is how the rest of the
 * walk runs. */
static void init(struct walker *w)
{
	struct fuse_conn_info conn = { .capable = ~0u };
	struct shim_reply *r;

	stp_fuseops.init(w->fs, &conn);
	FUZZ_ASSERT(conn.max_read == STP_MAX_READ && w->fs->no_open);
	r = do_open(w, FUSE_ROOT_ID, O_RDONLY | O_DIRECTORY, 1);
	FUZZ_ASSERT(r->kind == SHIM_OPENED);
	memset(&conn, 0, sizeof(conn));
	stp_fuseops.init(w->fs, &conn);
	FUZZ_ASSERT(!w->fs->no_open);
}

static void serve(struct stp_image *img)
{
	struct stp_mount_opts opts = { .cache_budget = 2 };
	struct stp_fs fs = { .img = img, .opts = &opts };
	struct walker *w;
	int fd;

	if (stp_image_block_size(img) > MAX_BLOCK_SIZE || stp_cache_new(img, 1, 1, &fs.cache))
		return;
	if (stp_record_new(img, &fs.recorder))
		fs.recorder = NULL;
	w = calloc(1, sizeof(*w));
	if (!w)
		abort();
	w->fs = &fs;
	w->read_left = READ_BUDGET;
	w->block_size = stp_image_block_size(img);
	init(w);
	mount_wide(w);
	out_of_range(w);
	enqueue(w, FUSE_ROOT_ID);
	while (w->head < w->len)
		visit(w, w->queue[w->head++]);
	shim_clear(&w->req);
	free(w);
	fd = memfd_create("stipple-fuzz-hot", MFD_CLOEXEC);
	if (fs.recorder && fd >= 0)
		stp_record_write(fs.recorder, fd, STP_RECORD_MAX);
	if (fd >= 0)
		close(fd);
	stp_record_free(fs.recorder);
	stp_cache_free(fs.cache);
}

static void open_and_serve(const uint8_t *data, size_t size)
{
	struct stp_image *img;

	if (stp_image_open_fd(fuzz_image_fd(data, size), "fuzz-input", &img))
		return;
	serve(img);
	stp_image_close(img);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_as_given_and_resealed(data, size, open_and_serve);
	return 0;
}
