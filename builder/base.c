/* SPDX-License-Identifier: MIT */
/*
 * Keeping the layout of a previous image. Blocks are carried in OLD's order, so blocks
 * that follow one another in OLD follow one another in the new image and a file that
 * spans them keeps its bytes contiguous; only OLD's last block, when it is short, goes
 * to the end (only a last block may be short), and a file must then lie in it alone.
 */
#include "base.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileread.h"
#include "format.h"
#include "hash.h"
#include "image.h"
#include "progress.h"
#include "report.h"
#include "source.h"
#include "treewalk.h"
#include "util.h"

#define CMP_CHUNK ((size_t)1 << 20)
#define NO_BLOCK UINT64_MAX

/* Why old_layout refused an OLD inode's extents: remembered, so that another path to
 * the inode does not read them again. */
enum rejection { NOT_REJECTED, REJECTED_UNLIKE, REJECTED_HOT };


/* One of OLD's blocks. */
struct old_block {
	uint64_t data;    /* bytes before the zeros that end it, once decoded: what
			   * its files hold, live or dead, and what earlier releases left */
	uint64_t live;    /* bytes that some kept file's extent covers */
	uint64_t stream;  /* where it lies in the new stream, once carried */
	int carried;
	int decoded;      /* by the comparison: BE and SHA say what it decoded */
	struct stp_blockent be;
	uint8_t sha[STP_SIG_HASH_SIZE]; /* of the stored bytes decoded, which alone are carried */
};

/* A file of the new tree that OLD holds with the same bytes. */
struct kept {
	struct node *file;
	struct stp_inode old;  /* its inode in OLD */
	/* OLD's extents, read once per OLD inode (b->ext_of owns them): checked, compared,
	 * counted, placed */
	struct stp_extent *ext;
	uint64_t first, last;  /* the OLD blocks its extents touch */
	uint64_t at;           /* the stream offset of its first extent in OLD */
	int dropped;           /* a block it needs is not carried */
};

/* A decoded OLD block. */
struct decoded {
	uint8_t *buf;
	uint64_t block;
	uint64_t used;   /* when last used, for eviction */
};

struct base {
	const char *path;
	struct stp_image *img;
	struct stp_superblock sb;
	uint64_t first_cold;     /* OLD's first block past its hot region */
	int hot_cut;             /* OLD's hot region was cut by content (base_hot_cut) */
	struct old_block *blocks;
	struct kept *kept;
	size_t nkept, nlive;
	/* by OLD inode: its extents, once old_layout found them laid out as mkstipple's
	 * (for a candidate or a walk for shared cuts). Paths that OLD hard-links share them:
	 * what is held is bounded by OLD's extent table, however many paths name an inode. */
	struct stp_extent **ext_of;
	uint8_t *rejected_as;    /* by OLD inode: why its extents were refused, if they were */
	uint64_t *carried;       /* OLD block numbers, in the order they are put */
	uint64_t ncarried;
	struct decoded cache[2];
	uint64_t clock;
	uint64_t decodes;        /* blocks decoded (cache misses) */
	uint64_t compare_decodes, compare_budget; /* those of the comparison, and its bound */
	uint64_t cut_decodes;    /* those of base_old_bytes, under the same bound */
	int cut_spent;           /* base_old_bytes reached it: it reads OLD no more */
	size_t unlike;           /* candidates OLD lays out unlike mkstipple: packed anew */
	uint8_t *stored;         /* a block's stored bytes, as they are copied */
	uint8_t *cmp;            /* the new file's bytes, compared with OLD's */
	struct pack_carry carry;
};

/* A problem with OLD, reported naming it. */
static int refuse(const struct base *b, int rc, const char *why)
{
	report_error(b->path, "--base: %s", why);
	return rc;
}

/* OLD could not be read where it had to be: damaged (reported above by the reader) or
 * another error, said doing WHAT. */
static int old_failed(const struct base *b, int rc, const char *what)
{
	if (rc == -EUCLEAN)
		return refuse(b, rc, "damaged (see above): cannot build on it");
	return report_errno(b->path, -rc, what);
}

static int check_features(struct base *b, const struct pack_opts *o)
{
	uint64_t f = b->sb.feat_incompat;
	uint64_t bcj = STP_FEAT_INCOMPAT_BCJ_X86 | STP_FEAT_INCOMPAT_BCJ_ARM64;
	char want[32], has[32];

	if (b->sb.block_log != o->block_log) {
		report_error(b->path, "--base: its blocks are of %s, this build's of %s: give "
			     "-b %s to build on it",
			     stp_human_size(1ull << b->sb.block_log, has, sizeof(has)),
			     stp_human_size(1ull << o->block_log, want, sizeof(want)), has);
		return -EINVAL;
	}
	if (f & STP_FEAT_INCOMPAT_DICT)
		return refuse(b, -EINVAL, "its blocks use a dictionary, which a new image "
			      "cannot share (build it with stable blocks)");
	if ((f & bcj) && !(f & STP_FEAT_INCOMPAT_BCJ_RELATIVE))
		return refuse(b, -EINVAL, "its blocks are filtered from their place in the "
			      "stream, so they cannot move (build it with stable blocks)");
	if ((f & bcj) && !o->bcj)
		return refuse(b, -EINVAL, "its blocks are BCJ-filtered and --no-bcj was given: "
			      "build without --base once to drop the filters");
	return 0;
}

/* The blocks of OLD's hot region whose last page some file's bytes lie in. */
struct hot_ends {
	const struct base *b;
	uint8_t *full;           /* by hot block */
};

static int mark_end(void *ctx, const struct stp_file_piece *p)
{
	struct hot_ends *h = ctx;
	const struct stp_superblock *sb = &h->b->sb;
	uint64_t end;

	if (p->block == STP_FILE_HOLE || p->block >= h->b->first_cold)
		return 0;
	/* a piece never crosses a block edge; blocks are whole pages (64K at least) */
	end = stp_sb_block_end(sb, p->block);
	if (p->stream_off + p->len > end - STP_HOT_PAGE)
		h->full[p->block] = 1;
	return 0;
}

static int mark_ends(void *ctx, uint32_t ino, const struct stp_inode *in)
{
	stp_file_walk(((struct hot_ends *)ctx)->b->img, in, 0, in->size, mark_end, ctx);
	return 0; /* a file that does not walk: its pages count as padding */
}

/* Whether OLD's hot region was cut by content (mkstipple --cut-inside): a hot block
 * before its last one ends in a page that no file's bytes lie in. Blocks cut at fixed
 * sizes leave none (each hot piece starts on a page, right after the one before), so a
 * release built on OLD cuts its hot region as OLD's was, and shares its hot blocks.
 * One walk over OLD's extents, without decoding. 0 or 1. */
static int old_hot_cut(const struct base *b)
{
	struct hot_ends h = { b, calloc(b->first_cold ? b->first_cold : 1, 1) };
	int cut = 0;

	if (!h.full)
		return 0;
	stp_treewalk_files(b->img, mark_ends, &h);
	for (uint64_t k = 0; k + 1 < b->first_cold && !cut; k++)
		cut = !h.full[k];
	free(h.full);
	return cut;
}

int base_hot_cut(const struct base *b)
{
	return b->hot_cut;
}

int base_open(const char *old, const struct pack_opts *o, struct base **out)
{
	struct base *b = calloc(1, sizeof(*b));
	int rc;

	*out = NULL;
	if (!b)
		return -ENOMEM;
	b->path = old;
	rc = stp_image_open(old, &b->img);
	if (rc == -EPROTONOSUPPORT)
		rc = refuse(b, rc, "an image this mkstipple cannot read (see above)");
	else if (rc)
		rc = old_failed(b, rc, "--base");
	if (!rc) {
		b->sb = *stp_image_sb(b->img);
		rc = check_features(b, o);
	}
	if (!rc) {
		b->blocks = calloc(b->sb.block_count ? b->sb.block_count : 1, sizeof(*b->blocks));
		rc = b->blocks ? 0 : -ENOMEM;
	}
	if (rc) {
		base_close(b);
		return rc;
	}
	/* a block that holds any of OLD's hot region is not carried: that region is
	 * built anew from this tree and its hot list */
	b->first_cold = b->sb.hot_size ? stp_sb_block_of(&b->sb, b->sb.hot_size - 1) + 1 : 0;
	b->hot_cut = old_hot_cut(b);
	*out = b;
	return 0;
}

/* The decoded blocks' memory back (the cut phase's walks, if any, decode anew). */
static void free_cache(struct base *b)
{
	for (int i = 0; i < 2; i++) {
		free(b->cache[i].buf);
		b->cache[i] = (struct decoded){ NULL, NO_BLOCK, 0 };
	}
}

void base_close(struct base *b)
{
	if (!b)
		return;
	free_cache(b);
	free(b->cmp);
	free(b->stored);
	free(b->carried);
	for (uint32_t i = 0; b->ext_of && i < b->sb.inode_count; i++)
		free(b->ext_of[i]);
	free(b->ext_of);
	free(b->rejected_as);
	free(b->kept);
	free(b->blocks);
	stp_image_close(b->img);
	free(b);
}

/* Bytes of BUF (LEN) before the zeros that end it. */
static uint64_t data_len(const uint8_t *buf, uint64_t len)
{
	while (len && !buf[len - 1])
		len--;
	return len;
}

/* Block BLOCK's stored bytes as OLD holds them now, read and checked into b->stored
 * with their table entry *BE and SHA-256 SHA. */
static int read_stored(struct base *b, uint64_t block, struct stp_blockent *be,
		       uint8_t sha[STP_SIG_HASH_SIZE])
{
	int rc = 0;

	if (!b->stored && !(b->stored = malloc(stp_image_stored_max(b->img))))
		return -ENOMEM;
	rc = stp_image_read_block(b->img, block, b->stored, be);
	if (rc)
		return old_failed(b, rc, "--base: reading a block");
	stp_sign_hash(b->stored, be->stored_size, sha);
	return 0;
}

/* Whether block BLOCK read as BE and SHA is what an earlier read decoded. */
static int same_stored(const struct old_block *ob, const struct stp_blockent *be,
		       const uint8_t sha[STP_SIG_HASH_SIZE])
{
	return ob->be.offset == be->offset && ob->be.stored_size == be->stored_size &&
	       ob->be.codec == be->codec && ob->be.filter == be->filter &&
	       ob->be.checksum == be->checksum && !memcmp(ob->sha, sha, STP_SIG_HASH_SIZE);
}

/* OLD changed while it was read: what was compared is not what would be carried. */
static int changed_meanwhile(const struct base *b, uint64_t block)
{
	report_error(b->path, "--base: block %" PRIu64 " changed while it was read: cannot "
		     "build on it", block);
	return -EAGAIN;
}

/* Reads block BLOCK once and decodes those bytes into OUT; the first decode keeps their
 * entry and SHA-256 (the bytes carried must be these), a later one must find them so. */
static int read_decode(struct base *b, uint64_t block, uint8_t *out)
{
	struct old_block *ob = &b->blocks[block];
	struct stp_blockent be;
	uint8_t sha[STP_SIG_HASH_SIZE];
	int rc = read_stored(b, block, &be, sha);

	if (rc)
		return rc;
	if (ob->decoded && !same_stored(ob, &be, sha))
		return changed_meanwhile(b, block);
	rc = stp_image_decode_stored(b->img, block, &be, b->stored, out);
	if (rc)
		return old_failed(b, rc, "--base: reading a block");
	ob->be = be;
	memcpy(ob->sha, sha, sizeof(sha));
	ob->decoded = 1;
	return 0;
}

/* OLD's block BLOCK decoded (and so checked), from the cache or decoded into it. */
static int decoded_block(struct base *b, uint64_t block, const uint8_t **out)
{
	struct decoded *d = &b->cache[0];
	int rc;

	for (int i = 0; i < 2; i++) {
		if (b->cache[i].buf && b->cache[i].block == block) {
			b->cache[i].used = ++b->clock;
			*out = b->cache[i].buf;
			return 0;
		}
		if (b->cache[i].used < d->used)
			d = &b->cache[i];
	}
	if (!d->buf && !(d->buf = malloc(stp_image_block_buffer_size(b->img))))
		return -ENOMEM;
	d->block = NO_BLOCK;
	rc = read_decode(b, block, d->buf);
	if (rc)
		return rc;
	b->decodes++;
	d->block = block;
	d->used = ++b->clock;
	b->blocks[block].data = data_len(d->buf, stp_sb_block_len(&b->sb, block));
	*out = d->buf;
	return 0;
}

/* One comparison of a new file with OLD's: the tree's file, read as OLD's pieces go. */
struct compare {
	struct base *b;
	struct source_file *sf;
};

/* Counts N more decodes of the comparison: refused past its bound. Files laid out as
 * mkstipple lays them out, compared in stream order, decode each block once; only files
 * that go back and forth between blocks, each on its own canonical, could do more. */
static int within_budget(struct base *b, uint64_t n)
{
	b->compare_decodes += n;
	if (b->compare_decodes <= b->compare_budget)
		return 0;
	return refuse(b, -EINVAL, "its files send the comparison back and forth between its "
		      "blocks (each decoded twice or more): cannot build on it");
}

/* 0 while the tree's bytes at piece P equal OLD's (the block's, or zeros for a hole), 1
 * at the first difference or short read, or -errno for OLD (reported). */
static int compare_piece(void *ctx, const struct stp_file_piece *p)
{
	struct compare *c = ctx;
	const uint8_t *data = NULL;
	int rc = 0;

	if (p->block != STP_FILE_HOLE) {
		uint64_t before = c->b->decodes;

		rc = decoded_block(c->b, p->block, &data);
		if (!rc)
			rc = stp_file_piece_check(c->b->img, p, stp_sb_block_len(&c->b->sb, p->block));
		if (!rc)
			rc = within_budget(c->b, c->b->decodes - before);
		if (rc)
			return rc < 0 ? rc : -EUCLEAN;
		data += p->in_block;
	}
	for (uint64_t done = 0; done < p->len;) {
		size_t want = p->len - done < CMP_CHUNK ? (size_t)(p->len - done) : CMP_CHUNK;
		ssize_t n = source_file_pread(c->sf, c->b->cmp, want, p->file_off + done);

		if (n != (ssize_t)want)
			return 1;
		/* a hole: every byte equal to the first, which is 0 */
		if (data ? memcmp(c->b->cmp, data + done, want) != 0
			 : c->b->cmp[0] || memcmp(c->b->cmp, c->b->cmp + 1, want - 1))
			return 1;
		done += want;
	}
	return 0;
}

/* 1 when K's file reads, in the tree, as OLD holds it (and did not change meanwhile),
 * 0 when not or when it cannot be read (the packer reports that), or -errno for OLD.
 * One walk of the extents old_layout read, in file and stream order: each block of the
 * file decoded once. */
static int same_as_old(struct base *b, const struct kept *k)
{
	struct source_file sf;
	struct compare c = { b, &sf };
	int rc = source_file_open(k->file, &sf);

	if (rc)
		return 0;
	rc = stp_file_walk_read(b->img, &k->old, k->ext, 0, k->old.size, compare_piece, &c);
	rc = rc < 0 ? rc : !rc && source_file_unchanged(&sf);
	source_file_close(&sf);
	return rc;
}

/* Whether [FROM, TO) of a file, in no extent, is a hole mkstipple leaves out: none, or
 * a run of zeros long enough to take no space. */
static int hole_or_none(uint64_t from, uint64_t to)
{
	return from == to || to - from >= PACK_HOLE_MIN;
}

/* Whether extent E may follow P in a file as mkstipple writes it: after P in the file
 * and in the stream, apart in one of them; and where the file goes on, only across a
 * hole it leaves out or at the start of a block it was cut to. */
static int canonical_next(const struct base *b, const struct stp_extent *p,
			  const struct stp_extent *e)
{
	uint64_t file_end = p->file_off + p->length, stream_end = p->stream_off + p->length;

	if (e->file_off < file_end || e->stream_off < stream_end)
		return 0; /* overlapping, or out of order */
	if (e->file_off > file_end)
		return hole_or_none(file_end, e->file_off);
	return e->file_off == file_end && e->stream_off > stream_end &&
	       e->stream_off == stp_sb_block_start(&b->sb, stp_sb_block_of(&b->sb, e->stream_off));
}

/* Whether E lies in K's file and in OLD's stream. */
static int extent_inside(const struct base *b, const struct kept *k, const struct stp_extent *e)
{
	return e->length && e->file_off < k->old.size && e->length <= k->old.size - e->file_off &&
	       e->stream_off < b->sb.data_size && e->length <= b->sb.data_size - e->stream_off;
}

/* K's extents in OLD are V (laid out as mkstipple's), and the blocks they touch. */
static void set_extents(const struct base *b, struct kept *k, struct stp_extent *v)
{
	const struct stp_extent *end = &v[k->old.count - 1];

	k->ext = v;
	k->at = v[0].stream_off;
	k->first = stp_sb_block_of(&b->sb, v[0].stream_off);
	k->last = stp_sb_block_of(&b->sb, end->stream_off + end->length - 1);
}

/* Reads K's extents in OLD into k->ext, and the blocks they touch: 1 when laid out as
 * mkstipple lays a file out (so that each block is decoded once per file, and the new
 * image's extents are what mkstipple writes), 0 when not, -errno when they cannot be
 * read. Before any block is decoded: OLD's count is bounded by its holes and blocks.
 * *HOT: some of the file lies in OLD's hot region (not kept: that is built anew). */
static int old_layout(struct base *b, struct kept *k, int *hot)
{
	uint64_t most = k->old.size / PACK_HOLE_MIN + b->sb.block_count + 1;
	struct stp_extent *v;
	int rc = 0, ok = k->old.count <= most;

	k->ext = NULL;
	*hot = 0;
	if (!ok)
		return 0;
	v = calloc(k->old.count, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < k->old.count && ok && !rc && !*hot; i++) {
		rc = stp_image_extent(b->img, &k->old, i, &v[i]);
		ok = !rc && extent_inside(b, k, &v[i]);
		*hot = ok && stp_sb_block_of(&b->sb, v[i].stream_off) < b->first_cold;
		ok = ok && (!i || canonical_next(b, &v[i - 1], &v[i]));
	}
	ok = ok && !*hot && hole_or_none(0, v[0].file_off) &&
	     hole_or_none(v[k->old.count - 1].file_off + v[k->old.count - 1].length, k->old.size);
	if (rc || !ok) {
		free(v);
		return rc ? rc : 0;
	}
	set_extents(b, k, v);
	return 1;
}

/* old_layout for OLD inode INO (into K), once per inode however many paths name it: its
 * extents are kept in b->ext_of, and a refusal (*HOT or not) in b->rejected_as. */
static int layout_once(struct base *b, uint32_t ino, struct kept *k, int *hot)
{
	int rc;

	*hot = b->rejected_as[ino] == REJECTED_HOT;
	if (b->ext_of[ino]) {
		set_extents(b, k, b->ext_of[ino]);
		return 1;
	}
	if (b->rejected_as[ino])
		return 0;
	rc = old_layout(b, k, hot);
	if (rc == 1)
		b->ext_of[ino] = k->ext;
	else if (!rc)
		b->rejected_as[ino] = *hot ? REJECTED_HOT : REJECTED_UNLIKE;
	return rc;
}

/* Whether piece PC is a cold file, whole, that OLD holds at its path with its size and
 * some stored bytes: a candidate *K to compare (1), or not (0); or OLD's metadata is
 * damaged (reported) or cannot be read: -errno. */
static int candidate(struct base *b, const struct piece *pc, struct kept *k)
{
	char path[TREE_PATH_MAX + 1];
	struct node *f = pc->file;
	uint32_t ino;
	int rc, hot = 0;

	if (f->hot || f->hot_ranges || pc->start || pc->end != (uint64_t)f->st.st_size ||
	    !pc->end || tree_rel_path(f, path, sizeof(path)) >= sizeof(path))
		return 0;
	rc = stp_image_resolve(b->img, path, &ino);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 0;
	if (!rc)
		rc = stp_image_inode(b->img, ino, &k->old);
	if (!rc && ((k->old.mode & S_IFMT) != S_IFREG || k->old.size != pc->end || !k->old.count))
		return 0;
	if (!rc)
		rc = layout_once(b, ino, k, &hot);
	if (rc < 0)
		return old_failed(b, rc, "--base: reading its metadata");
	b->unlike += !rc && !hot;
	k->file = f;
	k->dropped = 0;
	return rc;
}

static int cmp_kept(const void *x, const void *y)
{
	const struct kept *a = x, *b = y;

	return (a->at > b->at) - (a->at < b->at);
}

/* The kept files: candidates compared in OLD's stream order, so that each block is
 * decoded about once. */
static int find_kept(struct base *b, const struct piece *order, size_t nhot, size_t count)
{
	uint64_t total = 0, done = 0;
	size_t n = 0;
	int rc = 0;

	b->kept = calloc(count ? count : 1, sizeof(*b->kept));
	b->ext_of = calloc(b->sb.inode_count ? b->sb.inode_count : 1, sizeof(*b->ext_of));
	b->rejected_as = calloc(b->sb.inode_count ? b->sb.inode_count : 1, 1);
	b->cmp = malloc(CMP_CHUNK);
	if (!b->kept || !b->ext_of || !b->rejected_as || !b->cmp)
		return -ENOMEM;
	for (size_t i = nhot; i < count && rc >= 0; i++) {
		rc = candidate(b, &order[i], &b->kept[n]);
		n += rc > 0;
	}
	if (rc < 0)
		return rc;
	rc = 0;
	qsort(b->kept, n, sizeof(*b->kept), cmp_kept);
	for (size_t i = 0; i < n; i++)
		total += b->kept[i].old.size;
	progress_phase("compare with the base", total);
	b->compare_budget = 2 * (b->sb.block_count > b->first_cold ?
				 b->sb.block_count - b->first_cold : 0) + 2;
	b->nkept = 0;
	for (size_t i = 0; i < n; i++) {
		progress_set(done, 0);
		done += b->kept[i].old.size;
		if (!rc)
			rc = same_as_old(b, &b->kept[i]);
		if (rc == 1)
			b->kept[b->nkept++] = b->kept[i];
		rc = rc < 0 ? rc : 0;
	}
	if (b->unlike)
		report_warning(b->path, "--base: %zu files laid out unlike what mkstipple writes "
			       "(extents out of order, overlapping or cut apart): packed anew",
			       b->unlike);
	return rc;
}

/* A kept file's extent in OLD's stream, to count bytes by block with overlaps counted
 * once: all of them, sorted once by stream offset, each naming its file. */
struct range {
	uint64_t stream_off, length;
	size_t kept;
};

static int cmp_range(const void *x, const void *y)
{
	const struct range *a = x, *b = y;

	return (a->stream_off > b->stream_off) - (a->stream_off < b->stream_off);
}

/* The kept files' extents into *OUT (*N of them, the caller frees), sorted. */
static int ranges_of_kept(const struct base *b, struct range **out, size_t *n)
{
	size_t count = 0, k = 0;
	struct range *v;

	for (size_t i = 0; i < b->nkept; i++)
		count += b->kept[i].old.count;
	v = reallocarray(NULL, count ? count : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < b->nkept; i++)
		for (uint32_t j = 0; j < b->kept[i].old.count; j++)
			v[k++] = (struct range){ b->kept[i].ext[j].stream_off,
						 b->kept[i].ext[j].length, i };
	qsort(v, count, sizeof(*v), cmp_range);
	*out = v;
	*n = count;
	return 0;
}

/* Every block's live bytes: what the extents R[0..N) of the kept files that are not
 * dropped cover, each byte once. */
static void count_live(struct base *b, const struct range *r, size_t n)
{
	uint64_t at = 0; /* bytes below it are counted */

	for (uint64_t i = 0; i < b->sb.block_count; i++)
		b->blocks[i].live = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = r[i].stream_off > at ? r[i].stream_off : at;
		uint64_t end = r[i].stream_off + r[i].length;

		if (b->kept[r[i].kept].dropped)
			continue;
		while (off < end) {
			uint64_t block = stp_sb_block_of(&b->sb, off);
			uint64_t stop = stp_sb_block_end(&b->sb, block);
			uint64_t len = (end < stop ? end : stop) - off;

			b->blocks[block].live += len;
			off += len;
		}
		at = end > at ? end : at;
	}
}

/* OLD's last block, when shorter than a block: it can only go last. */
static int short_tail(const struct base *b, uint64_t block)
{
	return block + 1 == b->sb.block_count &&
	       stp_sb_block_len(&b->sb, block) < (1ull << b->sb.block_log);
}

/* Whether file K can stay: every block it touches carried, and not split between the
 * short tail and another block (they do not follow one another in the new image). */
static int kept_fits(const struct base *b, const struct kept *k)
{
	if (k->first != k->last && short_tail(b, k->last))
		return 0;
	for (uint64_t i = k->first; i <= k->last; i++)
		if (!b->blocks[i].carried)
			return 0;
	return 1;
}

/* Chooses the blocks to carry: those past OLD's hot region whose live bytes are at least
 * BASE_LIVE_NUM / BASE_LIVE_DEN of their data. Data, not the bytes OLD's files hold: a
 * block carried once holds bytes that no file of OLD refers to, and they count too, or
 * a chain of releases would carry its dead bytes for ever. Dropping a file lowers the live bytes of
 * its other blocks, so this runs until nothing more is dropped: at most once per file. */
static int choose_blocks(struct base *b)
{
	struct range *r;
	size_t n;
	int changed = 1, rc = ranges_of_kept(b, &r, &n);

	if (rc)
		return rc;
	while (changed && !rc) {
		changed = 0;
		count_live(b, r, n);
		for (uint64_t i = 0; i < b->sb.block_count && !rc; i++) {
			struct old_block *ob = &b->blocks[i];

			ob->carried = i >= b->first_cold && ob->live &&
				      ob->live * BASE_LIVE_DEN >= ob->data * BASE_LIVE_NUM;
			/* kept files are walked whole: a block they touch was decoded */
			if (ob->live && !ob->decoded)
				rc = refuse(b, -EUCLEAN, "a kept file's block was never compared");
		}
		for (size_t i = 0; i < b->nkept && !rc; i++) {
			if (!b->kept[i].dropped && !kept_fits(b, &b->kept[i])) {
				b->kept[i].dropped = 1;
				changed = 1;
			}
		}
	}
	free(r);
	return rc;
}

/* The list of blocks to put: OLD's order, the short tail last. */
static int list_carried(struct base *b)
{
	uint64_t n = 0;

	b->carried = calloc(b->sb.block_count ? b->sb.block_count : 1, sizeof(*b->carried));
	if (!b->carried)
		return -ENOMEM;
	for (uint64_t i = 0; i < b->sb.block_count; i++)
		if (b->blocks[i].carried)
			b->carried[n++] = i;
	b->ncarried = n;
	b->carry.tail = n && short_tail(b, b->carried[n - 1]);
	b->carry.nhead = n - (uint64_t)b->carry.tail;
	return 0;
}

static int cmp_node(const void *x, const void *y)
{
	const struct node *a = *(struct node *const *)x, *b = *(struct node *const *)y;

	return (a > b) - (a < b);
}

/* Removes the kept files' pieces from ORDER: they are not packed. */
static int drop_kept_pieces(struct base *b, struct piece *order, size_t nhot, size_t *count)
{
	struct node **live = malloc((b->nkept ? b->nkept : 1) * sizeof(*live));
	size_t k = nhot;

	if (!live)
		return -ENOMEM;
	b->nlive = 0;
	for (size_t i = 0; i < b->nkept; i++)
		if (!b->kept[i].dropped)
			live[b->nlive++] = b->kept[i].file;
	qsort(live, b->nlive, sizeof(*live), cmp_node);
	for (size_t i = nhot; i < *count; i++)
		if (!bsearch(&order[i].file, live, b->nlive, sizeof(*live), cmp_node))
			order[k++] = order[i];
	*count = k;
	free(live);
	return 0;
}

/* pack_carry's put: copies OLD's stored block, read again and found to be, by its
 * SHA-256 and table entry, the bytes the comparison decoded. */
static int put_block(void *ctx, uint64_t i, uint64_t stream, int fd, uint64_t pos,
		     struct stp_blockent *be, uint64_t *len)
{
	struct base *b = ctx;
	uint64_t block = b->carried[i];
	uint8_t sha[STP_SIG_HASH_SIZE];
	int rc = read_stored(b, block, be, sha);

	if (rc)
		return rc;
	if (!same_stored(&b->blocks[block], be, sha))
		return changed_meanwhile(b, block);
	rc = stp_pwrite_full(fd, b->stored, be->stored_size, pos);
	if (rc)
		return rc;
	be->offset = pos;
	b->blocks[block].stream = stream;
	*len = stp_sb_block_len(&b->sb, block);
	return 0;
}

int base_match(struct base *b, struct piece *order, size_t nhot, size_t *count,
	       struct pack_carry *carry)
{
	int rc = find_kept(b, order, nhot, *count);

	if (!rc)
		rc = choose_blocks(b);
	if (!rc)
		rc = list_carried(b);
	if (!rc) /* the comparison is over: memory back */
		free_cache(b);
	if (!rc)
		rc = drop_kept_pieces(b, order, nhot, count);
	if (rc)
		return rc;
	b->carry.put = put_block;
	b->carry.ctx = b;
	*carry = b->carry;
	return 0;
}

/* One walk of OLD's file for base_old_bytes. */
struct old_walk {
	struct base *b;
	base_bytes_fn fn;
	void *ctx;
};

static int feed_piece(void *ctx, const struct stp_file_piece *p)
{
	static const uint8_t zeros[65536];
	struct old_walk *w = ctx;
	const uint8_t *data;
	uint64_t before;
	int rc = 0;

	if (p->block == STP_FILE_HOLE) {
		for (uint64_t done = 0; done < p->len && !rc; done += sizeof(zeros))
			rc = w->fn(w->ctx, zeros, p->len - done < sizeof(zeros) ?
					   (size_t)(p->len - done) : sizeof(zeros));
		return rc;
	}
	before = w->b->decodes;
	rc = decoded_block(w->b, p->block, &data);
	if (!rc)
		rc = stp_file_piece_check(w->b->img, p, stp_sb_block_len(&w->b->sb, p->block));
	w->b->cut_decodes += w->b->decodes - before;
	if (!rc && w->b->cut_decodes > w->b->compare_budget) {
		w->b->cut_spent = 1;
		report_warning(w->b->path, "--base: its files send the search for shared cuts back "
			       "and forth between its blocks: the large files left are packed whole");
		return 1;
	}
	return rc ? rc : w->fn(w->ctx, data + p->in_block, (size_t)p->len);
}

/* Walks OLD's file OLD_INODE (inode INO) for W when OLD lays it out as mkstipple would
 * (old_layout's rule, checked once per inode: each of its blocks then decoded once by a
 * walk in stream order), stores none of its bytes, or has some in OLD's hot region (a
 * file with hot ranges, such as a JDK's lib/modules: the hot blocks its ranges lie in
 * are decoded again as the walk comes back to them, under the walks' bound): the walk's
 * result; 1 when laid out otherwise; or -errno. */
static int walk_if_ours(struct base *b, uint32_t ino, const struct stp_inode *old_inode,
			struct old_walk *w)
{
	struct kept k = { .old = *old_inode };
	int hot, rc;

	if (!k.old.count) /* zeros alone: nothing to decode */
		return stp_file_walk_read(b->img, &k.old, NULL, 0, k.old.size, feed_piece, w);
	rc = layout_once(b, ino, &k, &hot);
	if (rc == 1)
		rc = stp_file_walk_read(b->img, &k.old, k.ext, 0, k.old.size, feed_piece, w);
	else if (!rc && hot)
		rc = stp_file_walk(b->img, &k.old, 0, k.old.size, feed_piece, w);
	else if (!rc)
		rc = 1; /* laid out unlike mkstipple: nothing to share, and no decode per piece */
	return rc;
}

int base_old_bytes(struct base *b, const struct node *f, base_bytes_fn fn, void *ctx)
{
	char path[TREE_PATH_MAX + 1];
	struct stp_inode old;
	struct old_walk w = { b, fn, ctx };
	uint32_t ino;
	int rc;

	if (tree_rel_path(f, path, sizeof(path)) >= sizeof(path))
		return 1;
	rc = stp_image_resolve(b->img, path, &ino);
	if (rc == -ENOENT || rc == -ENOTDIR)
		return 1;
	if (!rc)
		rc = stp_image_inode(b->img, ino, &old);
	/* past twice the tree's file, OLD's could share little and would cost what it claims */
	if (!rc && ((old.mode & S_IFMT) != S_IFREG || b->cut_spent ||
		    old.size > 2 * (uint64_t)f->st.st_size + (1ull << b->sb.block_log)))
		return 1;
	if (!rc)
		rc = walk_if_ours(b, ino, &old, &w);
	return rc < 0 ? old_failed(b, rc, "--base: reading a file") : rc;
}

/* Kept file K's extents: OLD's, moved with their blocks. */
static int place_file(struct base *b, struct kept *k)
{
	struct node *f = k->file;
	struct stp_extent *v = calloc(k->old.count, sizeof(*v));
	uint32_t n = 0;

	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < k->old.count; i++) {
		struct stp_extent e = k->ext[i];
		uint64_t block = stp_sb_block_of(&b->sb, e.stream_off);

		/* the blocks it spans follow one another here as in OLD */
		e.stream_off = b->blocks[block].stream +
			       (e.stream_off - stp_sb_block_start(&b->sb, block));
		/* joined where they meet: mkstipple's extents are as long as they can be */
		if (n && v[n - 1].file_off + v[n - 1].length == e.file_off &&
		    v[n - 1].stream_off + v[n - 1].length == e.stream_off)
			v[n - 1].length += e.length;
		else
			v[n++] = e;
	}
	free(f->extents);
	f->extents = v;
	f->nextents = n;
	return 0;
}

int base_place(struct base *b)
{
	int rc = 0;


	for (size_t i = 0; i < b->nkept && !rc; i++)
		if (!b->kept[i].dropped)
			rc = place_file(b, &b->kept[i]);
	return rc;
}

void base_print(const struct base *b, FILE *out)
{
	uint64_t dead = 0, stored = 0;
	char a[32], c[32];

	for (uint64_t i = 0; i < b->ncarried; i++) {
		struct stp_blockent be;

		const struct old_block *ob = &b->blocks[b->carried[i]];

		/* a file that ends in zeros holds live bytes past the data */
		dead += ob->data > ob->live ? ob->data - ob->live : 0;
		if (!stp_image_block(b->img, b->carried[i], &be))
			stored += be.stored_size;
	}
	fprintf(out, "base %s: %zu files kept in %" PRIu64 " of its %" PRIu64 " blocks "
		"(%s stored, %s of them dead), %" PRIu64 " blocks decoded\n", b->path,
		b->nlive, b->ncarried, b->sb.block_count, stp_human_size(stored, a, sizeof(a)),
		stp_human_size(dead, c, sizeof(c)), b->decodes);
}
