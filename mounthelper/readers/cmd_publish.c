/* SPDX-License-Identifier: MIT */
/*
 * `stipple publish IMAGE DIR`: lay IMAGE out for a plain web server (stipple(5),
 * PUBLISHED INDEX). Each stored block becomes DIR/blocks/HH/H64, named by the SHA-256 of
 * its bytes, so that releases published into one DIR share the blocks they have in
 * common; the rest of the image goes into the index DIR/NAME.stp, written last, so that
 * a server never shows an index whose blocks are not all there.
 *
 * IMAGE is opened as `stipple check` opens it (a signed image verified, with --key its
 * signature too), and each block is read through stp_image_read_stored, which checks it
 * against its checksum or signed hash. A first pass reads and hashes every block and
 * checks the index by the rules a reader applies, before DIR is touched, so that a
 * damaged image leaves nothing there; the second reads each block again (its hash must
 * not have changed) and writes its file.
 *
 * With --base OLD, the second pass also writes, for each block OLD does not hold, a
 * delta file when one pays (pubdelta.h), and the index lists them in its delta table
 * (version 2): a mount that holds OLD's blocks fetches the delta instead of the block.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "hash.h"
#include "image.h"
#include "imgsrc.h"
#include "jsonout.h"
#include "progress.h"
#include "pubdelta.h"
#include "pubindex.h"
#include "published.h"
#include "pubstore.h"
#include "sign.h"
#include "util.h"

static const struct stp_cli publish_cli = {
	.name = "publish",
	.synopsis = "[-qj] [--key PUBKEY] [--name NAME] [--base OLD [--delta-level N] [--threads N]]\n"
		    "IMAGE DIR",
	.summary = "Publish IMAGE into DIR for a web server: each stored block as its own file\n"
		   "DIR/blocks/HH/H64, named by its SHA-256 and shared by every image published\n"
		   "there, then the index DIR/NAME.stp that a mount of its URL reads.",
	.options = "  -n, --name NAME    write the index as DIR/NAME.stp (default: IMAGE's file\n"
		   "                     name without .stp)\n"
		   "  -k, --key PUBKEY   publish only an image signed by PUBKEY\n"
		   "  -b, --base OLD     also write delta files against OLD, the previous\n"
		   "                     release's image or index, for the blocks it lacks\n"
		   "      --delta-level N  the zstd level of the deltas (1-22; default 19)\n"
		   "  -t, --threads N    make the deltas on N threads (1-1024; default 1); the\n"
		   "                     output does not depend on N\n"
		   "  -q, --quiet        no progress line on a terminal\n"
		   "  -j, --json         the summary as one JSON document (stipple(1))\n",
};

struct publish {
	const char *image, *dir;
	char index_name[NAME_MAX + 1];   /* NAME.stp */
	struct stp_image *img;
	struct stp_pubstore store;
	uint8_t *index;                  /* the whole index, built in memory */
	size_t index_len;
	uint64_t tail;                   /* tail_offset: where the blocks end */
	uint64_t count[3], bytes[3];     /* blocks and bytes by enum stp_pubstore_put */
	const char *base;                /* --base OLD */
	int level;                       /* --delta-level */
	unsigned threads;                /* --threads */
	struct pubdelta *delta;
	struct pubdelta_want *want;      /* the blocks OLD lacks, in order */
	struct stp_pubindex_delta *deltas;
	size_t ndeltas;
	uint64_t update;                 /* blocks' bytes a mount holding OLD's fetches */
	uint64_t delta_bytes, delta_full; /* the deltas', and the full blocks' they stand for */
};

/* NAME.stp from --name, or IMAGE's last component, without a ".stp" either ends with. */
static int index_name(struct publish *p, const char *name)
{
	const char *base = name;
	size_t len;

	if (!base) {
		base = strrchr(p->image, '/');
		base = base ? base + 1 : p->image;
	}
	len = strlen(base);
	if (len > 4 && !strcmp(base + len - 4, ".stp"))
		len -= 4;
	if (!len || memchr(base, '/', len) || (base[0] == '.' && (len == 1 ||
	    (len == 2 && base[1] == '.'))) || len > NAME_MAX - 4) {
		stp_cli_error(&publish_cli, "%s: not usable as the index's file name%s", base,
			      name ? "" : " (give one with --name)");
		return -EINVAL;
	}
	snprintf(p->index_name, sizeof(p->index_name), "%.*s.stp", (int)len, base);
	return 0;
}

/* The blocks' stored bytes must follow one another from byte 256 in block order, as
 * mkstipple writes them: the index then holds everything else as one tail. */
static int check_layout(struct publish *p)
{
	uint64_t n = stp_image_sb(p->img)->block_count, end = STP_SB_SIZE;

	for (uint64_t b = 0; b < n; b++) {
		struct stp_blockent be;
		int err = stp_image_block(p->img, b, &be);

		if (err)
			return err; /* reported by the library */
		if (be.offset != end) {
			stp_cli_problem(&publish_cli, p->image, NULL, "cannot be published: block %"
					PRIu64 " is stored at byte %" PRIu64 ", not right after %s "
					"(byte %" PRIu64 "); rebuild it with mkstipple", b,
					be.offset, b ? "the block before" : "the superblock", end);
			return -EINVAL;
		}
		end += be.stored_size;
	}
	p->tail = end;
	return 0;
}

/* Allocates the index and fills in what the image holds verbatim: its superblock and
 * its tail. The entries and the header follow as the blocks are published. */
static int read_verbatim(struct publish *p)
{
	const struct stp_superblock *sb = stp_image_sb(p->img);
	uint64_t n = sb->block_count, tail_len = sb->image_size - p->tail;
	uint64_t sb_at = stp_pubindex_sb_offset(n);
	struct stp_imgsrc *src = stp_image_src(p->img);
	uint64_t index_len = stp_pubindex_tail_file_offset(n) + tail_len;
	int err;

	/* before DIR is touched: no reader would fetch a larger index */
	if (index_len > STP_PUBLISHED_INDEX_MAX) {
		stp_cli_problem(&publish_cli, p->image, NULL, "cannot be published: its index "
				"would be %" PRIu64 " bytes, over the %llu MiB a mount takes; "
				"nothing written", index_len,
				(unsigned long long)(STP_PUBLISHED_INDEX_MAX >> 20));
		return -EFBIG;
	}
	p->index_len = (size_t)index_len;
	p->index = calloc(1, p->index_len);
	if (!p->index) {
		stp_cli_error(&publish_cli, "out of memory");
		return -ENOMEM;
	}
	err = stp_imgsrc_read(src, p->index + sb_at, STP_SB_SIZE, 0);
	if (!err)
		err = stp_imgsrc_read(src, p->index + sb_at + STP_SB_SIZE, tail_len, p->tail);
	if (err)
		stp_cli_problem(&publish_cli, p->image, NULL, "cannot read: %s", stp_strerror(err));
	return err;
}

/* The image the index stands for, read from memory: its superblock copy and tail from
 * the index, the blocks' bytes from IMAGE. */
struct index_src {
	struct stp_imgsrc src;
	const struct publish *p;
};

static int index_pread(struct stp_imgsrc *s, void *buf, size_t len, uint64_t off)
{
	const struct publish *p = ((struct index_src *)s)->p;
	const uint8_t *sb = p->index + stp_pubindex_sb_offset(stp_image_sb(p->img)->block_count);
	uint8_t *out = buf;

	if (off > s->size || len > s->size - off)
		return STP_IMGSRC_END;
	while (len) {
		size_t n;
		int err = 0;

		if (off < STP_SB_SIZE) {
			n = len < STP_SB_SIZE - off ? len : (size_t)(STP_SB_SIZE - off);
			memcpy(out, sb + off, n);
		} else if (off >= p->tail) {
			n = len;
			memcpy(out, sb + STP_SB_SIZE + (off - p->tail), n);
		} else {
			n = len < p->tail - off ? len : (size_t)(p->tail - off);
			err = stp_imgsrc_read(stp_image_src(p->img), out, n, off);
		}
		if (err)
			return err;
		out += n;
		off += n;
		len -= n;
	}
	return 0;
}

static void index_close(struct stp_imgsrc *s)
{
	free(s);
}

/* What the index carries verbatim was read after IMAGE was verified: opened again from
 * the index, it must verify as IMAGE did (signature, metadata and dictionary hashes), or
 * the image changed in between, and nothing is written. */
static int check_verbatim(const struct publish *p, const struct stp_pubkey *key)
{
	struct index_src *s = calloc(1, sizeof(*s));
	struct stp_image *img;
	int err;

	if (!stp_image_verified(p->img)) {
		free(s);
		return 0;
	}
	if (!s) {
		stp_cli_error(&publish_cli, "out of memory");
		return -ENOMEM;
	}
	*s = (struct index_src){ .src = { .pread = index_pread, .close = index_close,
					  .size = stp_image_sb(p->img)->image_size,
					  .name = (char *)p->image, .fd = -1 }, .p = p };
	err = stp_image_open_src_verified(&s->src, key, &img);
	if (err) {
		stp_cli_problem(&publish_cli, p->image, NULL, "changed while it was being "
				"published: its index does not verify (%s); nothing written",
				stp_strerror(err));
		return err;
	}
	stp_image_close(img);
	return 0;
}

/* Tells why the store failed, naming the path under DIR. */
static int store_error(const struct publish *p, int err)
{
	const struct stp_pubstore *s = &p->store;

	stp_cli_error(&publish_cli, "%s%s%s: %s%s%s", p->dir, s->err_path[0] ? "/" : "",
		      s->err_path, s->err_why, s->err_refused ? "" : ": ",
		      s->err_refused ? "" : stp_strerror(err));
	return err;
}

/* Reads block B's stored bytes into BUF (checked against its checksum or signed hash),
 * and fills in its entry E: where it lies and its SHA-256. */
static int read_block(struct publish *p, uint64_t b, uint8_t *buf,
		      struct stp_pubindex_entry *e)
{
	struct stp_blockent be;
	size_t len;
	int err = stp_image_block(p->img, b, &be) ?:
		  stp_image_read_stored(p->img, STP_SIG_HASH_BLOCK0 + b, buf, &len);

	if (err == -EIO)
		stp_cli_problem(&publish_cli, p->image, NULL, "block %" PRIu64 ": %s", b,
				stp_strerror(err));
	if (err)
		return err; /* damage: reported by the library */
	e->offset = be.offset;
	e->stored_size = (uint32_t)len;
	stp_sign_hash(buf, len, e->sha256);
	return 0;
}

static uint8_t *entry_at(const struct publish *p, uint64_t b)
{
	return p->index + STP_PUBINDEX_HDR_SIZE + b * STP_PUBINDEX_ENTRY_SIZE;
}

/* The first pass: every block read, checked and hashed into its entry, before anything
 * is written, so that a damaged image leaves nothing in DIR. */
static int hash_block(struct publish *p, uint64_t b, uint8_t *buf, uint8_t *scratch)
{
	struct stp_pubindex_entry e;
	int err = read_block(p, b, buf, &e);

	(void)scratch;
	if (!err)
		stp_pubindex_encode_entry(&e, entry_at(p, b));
	return err;
}

/* The delta of the block of E against OLD, when OLD lacks it and one pays (made by
 * pubdelta's threads, taken in block order): written and listed. */
static int delta_block(struct publish *p, const struct stp_pubindex_entry *e, uint8_t *scratch)
{
	struct stp_pubindex_delta ent, *v;
	enum stp_pubstore_put how;
	const uint8_t *delta;
	int rc;

	if (pubdelta_old_has(p->delta, e->sha256))
		return 0;
	p->update += e->stored_size;
	rc = pubdelta_next(p->delta, &delta, &ent);
	if (rc <= 0)
		return rc;
	rc = stp_pubstore_put_block(&p->store, ent.delta_sha256, delta, ent.delta_size, scratch,
				    &how);
	if (rc)
		return store_error(p, rc);
	v = realloc(p->deltas, (p->ndeltas + 1) * sizeof(*v));
	if (!v) {
		stp_cli_error(&publish_cli, "out of memory");
		return -ENOMEM;
	}
	p->deltas = v;
	p->deltas[p->ndeltas++] = ent;
	p->update -= e->stored_size - ent.delta_size;
	p->delta_bytes += ent.delta_size;
	p->delta_full += e->stored_size;
	return 0;
}

/* The second pass: block B read again, and its file written unless one holds it. */
static int store_block(struct publish *p, uint64_t b, uint8_t *buf, uint8_t *scratch)
{
	struct stp_pubindex_entry e, first;
	enum stp_pubstore_put how;
	int err = read_block(p, b, buf, &e);

	if (err)
		return err;
	stp_pubindex_entry_at(p->index, b, &first);
	if (memcmp(e.sha256, first.sha256, sizeof(e.sha256)) || e.stored_size != first.stored_size) {
		stp_cli_problem(&publish_cli, p->image, NULL, "block %" PRIu64 " changed while "
				"it was being published", b);
		return -EAGAIN;
	}
	err = stp_pubstore_put_block(&p->store, e.sha256, buf, e.stored_size, scratch, &how);
	if (err)
		return store_error(p, err);
	p->count[how]++;
	p->bytes[how] += e.stored_size;
	return p->delta ? delta_block(p, &e, scratch) : 0;
}

typedef int (*block_fn)(struct publish *p, uint64_t b, uint8_t *buf, uint8_t *scratch);

/* FN on every block, with buffers for its stored bytes. */
static int each_block(struct publish *p, block_fn fn)
{
	size_t max = stp_image_stored_max(p->img);
	uint8_t *buf = malloc(max), *scratch = malloc(max);
	int err = buf && scratch ? 0 : -ENOMEM;

	if (err)
		stp_cli_error(&publish_cli, "out of memory");
	for (uint64_t b = 0; !err && b < stp_image_sb(p->img)->block_count; b++)
		err = fn(p, b, buf, scratch);
	free(buf);
	free(scratch);
	return err;
}

/* The header, sealed over the entries, then the rules any reader applies: a failure
 * there is this program's bug, but no index that breaks them is ever written. */
static int seal_index(struct publish *p)
{
	const struct stp_superblock *sb = stp_image_sb(p->img);
	struct stp_pubindex_header h = {
		.version = STP_PUBINDEX_VERSION, .hash = STP_PUBINDEX_HASH_SHA256,
		.image_size = sb->image_size, .tail_offset = p->tail,
		.block_count = sb->block_count,
	};
	const char *why = NULL;
	int err;

	stp_pubindex_encode_header(&h, p->index);
	h.checksum = stp_pubindex_checksum(p->index, p->index + STP_PUBINDEX_HDR_SIZE,
					   h.block_count);
	stp_pubindex_encode_header(&h, p->index);
	err = stp_pubindex_check(p->index, p->index_len, NULL, NULL, &why);
	if (err)
		stp_cli_problem(&publish_cli, p->image, NULL, "the index made of it is refused "
				"(%s); nothing written", why);
	return err;
}

/* The delta table after the tail, and the header of version 2 sealed over it, checked
 * as a reader checks it. */
static int seal_deltas(struct publish *p)
{
	const struct stp_superblock *sb = stp_image_sb(p->img);
	size_t table = p->ndeltas * STP_PUBINDEX_DELTA_SIZE;
	uint8_t *idx = realloc(p->index, p->index_len + table);
	struct stp_pubindex_header h;
	const char *why = NULL;
	int err;

	if (!idx) {
		stp_cli_error(&publish_cli, "out of memory");
		return -ENOMEM;
	}
	p->index = idx;
	for (size_t i = 0; i < p->ndeltas; i++)
		stp_pubindex_encode_delta(&p->deltas[i], idx + p->index_len +
					  i * STP_PUBINDEX_DELTA_SIZE);
	h = (struct stp_pubindex_header){
		.version = STP_PUBINDEX_VERSION_DELTAS, .hash = STP_PUBINDEX_HASH_SHA256,
		.image_size = sb->image_size, .tail_offset = p->tail,
		.block_count = sb->block_count, .delta_count = p->ndeltas,
	};
	stp_pubindex_encode_header(&h, idx);
	h.checksum = stp_pubindex_checksum2(idx, idx + STP_PUBINDEX_HDR_SIZE, h.block_count,
					    idx + p->index_len, p->ndeltas);
	stp_pubindex_encode_header(&h, idx);
	p->index_len += table;
	err = stp_pubindex_check(idx, p->index_len, NULL, NULL, &why);
	if (err)
		stp_cli_problem(&publish_cli, p->image, NULL, "the index made of it with its "
				"deltas is refused (%s); the index is not written", why);
	return err;
}

/* The image itself may be the file the index would replace: DIR/NAME.stp. */
static int replaces_image(const struct publish *p)
{
	struct stat st;
	int fd = stp_image_fd(p->img);

	if (fd < 0 || fstat(fd, &st) || !stp_pubstore_is(&p->store, p->index_name, st.st_dev,
							   st.st_ino))
		return 0;
	stp_cli_problem(&publish_cli, p->image, NULL, "is %s/%s, which its index would replace; "
			"choose another DIR or --name", p->dir, p->index_name);
	return 1;
}

static void print_summary(const struct publish *p)
{
	uint64_t written = p->count[STP_PUBSTORE_WRITTEN] + p->count[STP_PUBSTORE_REPLACED];
	uint64_t wbytes = p->bytes[STP_PUBSTORE_WRITTEN] + p->bytes[STP_PUBSTORE_REPLACED];
	char h1[32], h2[32], h3[32];

	printf("%s: published as %s/%s (index %s)\n", p->image, p->dir, p->index_name,
	       stp_human_size(p->index_len, h1, sizeof(h1)));
	printf("  blocks: %" PRIu64 ", %" PRIu64 " written (%s), %" PRIu64
	       " already present (%s shared)", stp_image_sb(p->img)->block_count, written,
	       stp_human_size(wbytes, h2, sizeof(h2)), p->count[STP_PUBSTORE_PRESENT],
	       stp_human_size(p->bytes[STP_PUBSTORE_PRESENT], h3, sizeof(h3)));
	if (p->count[STP_PUBSTORE_REPLACED])
		printf("; of those written, %" PRIu64 " replaced a damaged block file",
		       p->count[STP_PUBSTORE_REPLACED]);
	putchar('\n');
	if (p->delta)
		printf("  deltas against %s: %zu (%s, for %s of full blocks); an update from it "
		       "fetches %s with the index\n", p->base, p->ndeltas,
		       stp_human_size(p->delta_bytes, h1, sizeof(h1)),
		       stp_human_size(p->delta_full, h2, sizeof(h2)),
		       stp_human_size(p->update + p->index_len, h3, sizeof(h3)));
}

static int print_json(const struct publish *p)
{
	size_t dlen = strlen(p->dir), nlen = strlen(p->index_name);
	char *index = malloc(dlen + nlen + 2);
	json_t *doc;

	if (index)
		snprintf(index, dlen + nlen + 2, "%s/%s", p->dir, p->index_name);
	doc = !index ? NULL : json_pack("{s:o?,s:o?,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
		"image", stp_json_bytes(p->image, strlen(p->image)),
		"index", stp_json_bytes(index, strlen(index)),
		"index_size", (json_int_t)p->index_len,
		"blocks", (json_int_t)stp_image_sb(p->img)->block_count,
		"written", (json_int_t)p->count[STP_PUBSTORE_WRITTEN],
		"replaced", (json_int_t)p->count[STP_PUBSTORE_REPLACED],
		"present", (json_int_t)p->count[STP_PUBSTORE_PRESENT],
		"bytes_written", (json_int_t)(p->bytes[STP_PUBSTORE_WRITTEN] +
					      p->bytes[STP_PUBSTORE_REPLACED]),
		"bytes_shared", (json_int_t)p->bytes[STP_PUBSTORE_PRESENT],
		"deltas", (json_int_t)p->ndeltas,
		"delta_bytes", (json_int_t)p->delta_bytes,
		/* what a mount holding --base's blocks fetches, index included (0: no --base) */
		"update_bytes", (json_int_t)(p->delta ? p->update + p->index_len : 0));
	free(index);
	return stp_json_print(&publish_cli, doc);
}

/* The blocks OLD lacks, by the first pass's hashes, handed to the delta threads. */
static int start_deltas(struct publish *p)
{
	uint64_t n = stp_image_sb(p->img)->block_count;
	size_t k = 0;

	p->want = calloc(n ? n : 1, sizeof(*p->want));
	if (!p->want) {
		stp_cli_error(&publish_cli, "out of memory");
		return -ENOMEM;
	}
	for (uint64_t b = 0; b < n; b++) {
		struct stp_pubindex_entry e;

		stp_pubindex_entry_at(p->index, b, &e);
		if (pubdelta_old_has(p->delta, e.sha256))
			continue;
		p->want[k].block = b;
		memcpy(p->want[k++].sha256, e.sha256, sizeof(e.sha256));
	}
	return pubdelta_start(p->delta, p->want, k);
}

static int publish(struct publish *p, const struct stp_pubkey *key)
{
	int err = stp_cli_open_checked(&publish_cli, p->image, key, &p->img) ?:
		  check_layout(p) ?: read_verbatim(p);

	if (err || (err = each_block(p, hash_block) ?: seal_index(p) ?: check_verbatim(p, key)))
		return err;
	if (p->base && (err = pubdelta_open(&publish_cli, p->base, p->img, p->level, p->threads,
					    &p->delta)))
		return err;
	if ((err = stp_pubstore_open(&p->store, p->dir)))
		return store_error(p, err);
	if (replaces_image(p))
		return -EEXIST;
	stp_progress_attach(p->img); /* the second pass, from 0 */
	err = p->delta ? start_deltas(p) : 0;
	if (!err)
		err = each_block(p, store_block);
	if (!err && p->ndeltas)
		err = seal_deltas(p);
	if (!err && (err = stp_pubstore_sync_blocks(&p->store)))
		store_error(p, err);
	if (!err && (err = stp_pubstore_put_file(&p->store, p->index_name, p->index,
						 p->index_len)))
		store_error(p, err);
	stp_progress_end();
	return err;
}

static int publish_run(struct publish *p, const struct stp_pubkey *key, int json)
{
	int err = publish(p, key);

	if (!err) {
		if (json)
			err = print_json(p);
		else
			print_summary(p);
	}
	stp_pubstore_close(&p->store);
	pubdelta_close(p->delta);
	free(p->want);
	free(p->deltas);
	if (p->img)
		stp_image_close(p->img);
	free(p->index);
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}

/* --delta-level N: a zstd level from 1 to 22. */
static int delta_level(const char *arg, int *level)
{
	char *end;
	long v = strtol(arg, &end, 10);

	if (*arg && !*end && v >= 1 && v <= 22) {
		*level = (int)v;
		return 0;
	}
	stp_cli_error(&publish_cli, "--delta-level %s: not a zstd level from 1 to 22", arg);
	return -EINVAL;
}

/* --threads N: from 1 to 1024, as mkstipple's. */
static int threads(const char *arg, unsigned *n)
{
	uint64_t v;

	if (!stp_parse_uint(arg, 1, 1024, &v)) {
		*n = (unsigned)v;
		return 0;
	}
	stp_cli_error(&publish_cli, "--threads %s: not a number from 1 to 1024", arg);
	return -EINVAL;
}

int stp_cmd_publish(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "key", required_argument, NULL, 'k' }, { "name", required_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' }, { "quiet", no_argument, NULL, 'q' },
		{ "base", required_argument, NULL, 'b' },
		{ "delta-level", required_argument, NULL, 'L' },
		{ "threads", required_argument, NULL, 't' },
		STP_CLI_LONGOPTS, { 0 },
	};
	/* one thread by default: deltas are taken in block order, and on 2 CPUs two
	 * threads waiting on each other were slower than one (stipple(1)) */
	struct publish p = { .store = { .dirfd = -1, .blocksfd = -1 }, .level = 19,
			     .threads = 1 };
	const char *keyfile = NULL, *name = NULL;
	struct stp_pubkey key;
	int opt, status, json = 0, quiet = 0;

	for (int i = 0; i < STP_PUBSTORE_FANOUT; i++)
		p.store.fanfd[i] = -1;
	stp_cli_init(&publish_cli, argv);
	while ((opt = getopt_long(argc, argv, "b:jk:n:qt:" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'b')
			p.base = optarg;
		else if (opt == 't' && threads(optarg, &p.threads))
			return STP_EXIT_USAGE;
		else if (opt == 't')
			continue;
		else if (opt == 'L' && delta_level(optarg, &p.level))
			return STP_EXIT_USAGE;
		else if (opt == 'L')
			continue;
		else if (opt == 'k')
			keyfile = optarg;
		else if (opt == 'n')
			name = optarg;
		else if (opt == 'j')
			json = 1;
		else if (opt == 'q')
			quiet = 1;
		else
			return stp_cli_other_option(&publish_cli, opt);
	}
	if ((status = stp_cli_operands(&publish_cli, argc, 2, 2)))
		return status;
	p.image = argv[optind];
	p.dir = argv[optind + 1];
	if (index_name(&p, name))
		return STP_EXIT_USAGE;
	if (keyfile && stp_cli_load_pubkey(&publish_cli, keyfile, &key))
		return STP_EXIT_FAIL;
	stp_progress_want(publish_cli.name, quiet);
	return publish_run(&p, keyfile ? &key : NULL, json);
}
