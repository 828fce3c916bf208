/* SPDX-License-Identifier: MIT */
/* `stipple info`: the superblock, the sizes, and what the tree holds. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "image.h"
#include "jsonout.h"
#include "sign.h"
#include "util.h"

static const struct stp_cli info_cli = {
	.name = "info",
	.synopsis = "[--blocks] [--json] IMAGE",
	.summary = "Show the format version, features, sizes and what the tree of IMAGE holds.",
	.options = "  -b, --blocks   also list every data block: offset, stored size, codec\n"
		   "  -j, --json     one JSON document instead (stipple(1))\n",
};

enum { KIND_REG, KIND_DIR, KIND_LNK, KIND_CHR, KIND_BLK, KIND_FIFO, KIND_SOCK, KIND_COUNT };

static const char *const kind_names[KIND_COUNT] = {
	"regular files", "directories", "symlinks", "char devices", "block devices", "fifos",
	"sockets",
};

struct tree_counts {
	uint64_t by_kind[KIND_COUNT]; /* names, as `find -type` counts them */
	uint64_t file_bytes;              /* each inode once */
	uint64_t hard_links;              /* names beyond an inode's first */
	uint64_t xattrs;
	uint8_t *seen;                    /* non-directory inodes met, one bit each */
};

static int mode_kind(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return KIND_REG;
	case S_IFDIR: return KIND_DIR;
	case S_IFLNK: return KIND_LNK;
	case S_IFCHR: return KIND_CHR;
	case S_IFBLK: return KIND_BLK;
	case S_IFIFO: return KIND_FIFO;
	case S_IFSOCK: return KIND_SOCK;
	default: return -1;
	}
}

static int count_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct tree_counts *c = w->ctx;
	int kind = mode_kind(e->inode.mode);

	if (kind < 0) {
		stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
		return 0;
	}
	c->by_kind[kind]++;
	if (kind == KIND_DIR) {
		c->xattrs += e->inode.xattr_count;
		return 0;
	}
	if (c->seen[e->ino / 8] & (1u << (e->ino % 8))) {
		c->hard_links++;
		return 0;
	}
	c->seen[e->ino / 8] |= (uint8_t)(1u << (e->ino % 8));
	c->xattrs += e->inode.xattr_count;
	if (kind == KIND_REG)
		c->file_bytes += e->inode.size;
	return 0;
}

static void print_size(const char *label, uint64_t bytes)
{
	char human[32];

	printf("%-18s %" PRIu64 " (%s)\n", label, bytes, stp_human_size(bytes, human, sizeof(human)));
}

/* Where the metadata is; paged, how many pages and what they take stored. */
static void print_metadata(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint64_t stored = 0;

	if (!stp_meta_pages(sb)) {
		printf("%-18s offset %" PRIu64 ", %" PRIu64 " bytes stored, %" PRIu64 " decoded\n",
		       "metadata:", sb->meta_offset, sb->meta_stored_size, sb->meta_size);
		return;
	}
	for (uint64_t p = 0; p < stp_meta_pages(sb); p++) {
		struct stp_blockent pe;

		if (!stp_image_meta_page(img, p, &pe))
			stored += pe.stored_size;
	}
	printf("%-18s %" PRIu64 " pages, %" PRIu64 " bytes stored, %" PRIu64 " decoded; "
	       "page table at offset %" PRIu64 ", %" PRIu64 " bytes\n", "metadata:",
	       stp_meta_pages(sb), stored, sb->meta_size, sb->meta_offset, sb->meta_stored_size);
}

static const struct { uint64_t bit; const char *name; } known[] = {
	{ STP_FEAT_INCOMPAT_DICT, "dictionary" },
	{ STP_FEAT_INCOMPAT_BCJ_X86, "bcj-x86" },
	{ STP_FEAT_INCOMPAT_BCJ_ARM64, "bcj-arm64" },
	{ STP_FEAT_INCOMPAT_META_PAGES, "meta-pages" },
	{ STP_FEAT_INCOMPAT_HOT_BLOCKS, "hot-blocks" },
	{ STP_FEAT_INCOMPAT_BCJ_RELATIVE, "bcj-relative" },
	{ STP_FEAT_INCOMPAT_LOOKUPS, "lookups" },
	{ STP_FEAT_INCOMPAT_CONTENT_HASHES, "content-hashes" },
};

static void print_features(const struct stp_superblock *sb)
{
	uint64_t rest = sb->feat_incompat;

	printf("%-18s", "features:");
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (rest & known[i].bit)
			printf(" %s", known[i].name);
		rest &= ~known[i].bit;
	}
	if (rest)
		printf(" incompat:%#" PRIx64, rest);
	if (sb->feat_ro_compat)
		printf(" ro-compat:%#" PRIx64, sb->feat_ro_compat);
	if (sb->feat_compat & STP_FEAT_COMPAT_SIGNED)
		printf(" signed");
	if (sb->feat_compat & ~STP_FEAT_COMPAT_SIGNED)
		printf(" compat:%#" PRIx64, (uint64_t)(sb->feat_compat & ~STP_FEAT_COMPAT_SIGNED));
	if (!sb->feat_incompat && !sb->feat_ro_compat && !sb->feat_compat)
		printf(" none");
	printf("\n");
}

/* The key id the signature block names: who claims to have signed, not a proof. */
static void print_signer(const struct stp_image *img)
{
	uint8_t id[32];
	char hex[65];

	if (stp_image_signer(img, id))
		printf("%-18s yes, key %s\n", "signed:", stp_sign_key_hex(id, hex));
	else
		printf("%-18s no\n", "signed:");
}

static void print_superblock(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);

	printf("%-18s ", "image:");
	stp_cli_put_escaped(stdout, stp_image_path(img), strlen(stp_image_path(img)));
	putchar('\n');
	printf("%-18s %u\n", "format version:", sb->version);
	print_features(sb);
	print_size("block size:", stp_image_block_size(img));
	printf("%-18s %" PRIu64 "\n", "blocks:", sb->block_count);
	print_size("data size:", sb->data_size);
	print_size("image size:", sb->image_size);
	print_metadata(img);
	printf("%-18s offset %" PRIu64 ", %" PRIu64 " bytes\n", "dictionary:", sb->dict_offset,
	       sb->dict_size);
	print_size("hot region:", sb->hot_size);
	if (sb->hot_block_log) {
		char h[32];

		printf("%-18s %" PRIu64 " of %s, then blocks of the block size\n", "hot blocks:",
		       stp_sb_hot_blocks(sb), stp_human_size(1ull << sb->hot_block_log, h, sizeof(h)));
	}
	if (stp_image_meta_header(img)->lookup_count)
		printf("%-18s %u names, looked up at mount\n", "lookups:",
		       stp_image_meta_header(img)->lookup_count);
	printf("%-18s %u\n", "inodes:", sb->inode_count);
	print_signer(img);
}

static void print_counts(const struct tree_counts *c, uint64_t image_size)
{
	char label[32];

	for (int k = 0; k < KIND_COUNT; k++) {
		snprintf(label, sizeof(label), "%s:", kind_names[k]);
		printf("%-18s %" PRIu64 "\n", label, c->by_kind[k]);
	}
	printf("%-18s %" PRIu64 "\n", "hard links:", c->hard_links);
	printf("%-18s %" PRIu64 "\n", "xattrs:", c->xattrs);
	print_size("file bytes:", c->file_bytes);
	if (c->file_bytes)
		printf("%-18s %.2f%% of the file bytes\n", "ratio:",
		       100.0 * (double)image_size / (double)c->file_bytes);
}

static const char *const codecs[] = { "raw", "zstd", "zstd-dict" };
static const char *const filters[] = { "none", "x86", "arm64" };

static int print_blocks(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);

	printf("\n%-8s %-14s %-10s %-10s %-9s %s\n", "block", "offset", "stored", "decoded",
	       "codec", "filter");
	for (uint64_t b = 0; b < sb->block_count; b++) {
		struct stp_blockent be;
		int err = stp_image_block(img, b, &be);

		if (err)
			return err;
		printf("%-8" PRIu64 " %-14" PRIu64 " %-10u %-10zu %-9s %s\n", b, be.offset,
		       be.stored_size, stp_image_block_decoded_size(img, b),
		       be.codec < 3 ? codecs[be.codec] : "?", be.filter < 3 ? filters[be.filter] : "?");
	}
	return 0;
}

/* --- --json --- */

static const char *hex64(uint64_t v)
{
	static char buf[17];

	snprintf(buf, sizeof(buf), "%016" PRIx64, v);
	return buf;
}

/* The stored bytes of the metadata: its pages' when paged, else the stored copy. */
static uint64_t meta_stored(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	uint64_t stored = 0;

	if (!stp_meta_pages(sb))
		return sb->meta_stored_size;
	for (uint64_t p = 0; p < stp_meta_pages(sb); p++) {
		struct stp_blockent pe;

		if (!stp_image_meta_page(img, p, &pe))
			stored += pe.stored_size;
	}
	return stored;
}

static json_t *json_features(const struct stp_superblock *sb)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < sizeof(known) / sizeof(known[0]); i++)
		if (sb->feat_incompat & known[i].bit)
			json_array_append_new(a, json_string(known[i].name));
	if (a && (sb->feat_compat & STP_FEAT_COMPAT_SIGNED))
		json_array_append_new(a, json_string("signed"));
	return a;
}

static json_t *json_signer(const struct stp_image *img)
{
	uint8_t id[32];
	char hex[65];

	return stp_image_signer(img, id) ? json_string(stp_sign_key_hex(id, hex)) : json_null();
}

static json_t *json_superblock(const struct stp_image *img)
{
	const struct stp_superblock *sb = stp_image_sb(img);

	return json_pack("{s:o?,s:I,s:o,s:I,s:I,s:I,s:I,s:I,s:{s:I,s:I,s:I,s:I},s:{s:I,s:I},"
			 "s:I,s:I,s:o}",
			 "image", stp_json_bytes(stp_image_path(img), strlen(stp_image_path(img))),
			 "format_version", (json_int_t)sb->version, "features", json_features(sb),
			 "block_size", (json_int_t)stp_image_block_size(img),
			 "blocks", (json_int_t)sb->block_count,
			 "hot_blocks", (json_int_t)stp_sb_hot_blocks(sb),
			 "data_size", (json_int_t)sb->data_size,
			 "image_size", (json_int_t)sb->image_size,
			 "metadata", "offset", (json_int_t)sb->meta_offset,
			 "pages", (json_int_t)stp_meta_pages(sb),
			 "stored", (json_int_t)meta_stored(img), "decoded", (json_int_t)sb->meta_size,
			 "dictionary", "offset", (json_int_t)sb->dict_offset,
			 "size", (json_int_t)sb->dict_size,
			 "hot_size", (json_int_t)sb->hot_size, "inodes", (json_int_t)sb->inode_count,
			 "signer", json_signer(img));
}

static json_t *json_counts(const struct tree_counts *c)
{
	static const char *const keys[KIND_COUNT] = {
		"files", "dirs", "symlinks", "chardevs", "blockdevs", "fifos", "sockets",
	};
	json_t *o = json_pack("{s:I,s:I,s:I}", "hard_links", (json_int_t)c->hard_links,
			      "xattrs", (json_int_t)c->xattrs,
			      "file_bytes", (json_int_t)c->file_bytes);

	for (int k = 0; o && k < KIND_COUNT; k++)
		json_object_set_new(o, keys[k], json_integer((json_int_t)c->by_kind[k]));
	return o;
}

static int json_blocks(const struct stp_image *img, json_t *doc)
{
	const struct stp_superblock *sb = stp_image_sb(img);
	json_t *a = json_array();

	if (!a || json_object_set_new(doc, "block_table", a))
		return -ENOMEM;
	for (uint64_t b = 0; b < sb->block_count; b++) {
		struct stp_blockent be;
		int err = stp_image_block(img, b, &be);

		if (err)
			return err;
		if (json_array_append_new(a, json_pack("{s:I,s:I,s:I,s:I,s:s,s:s,s:s+}",
			"block", (json_int_t)b, "offset", (json_int_t)be.offset,
			"stored", (json_int_t)be.stored_size,
			"decoded", (json_int_t)stp_image_block_decoded_size(img, b),
			"codec", be.codec < 3 ? codecs[be.codec] : "?",
			"filter", be.filter < 3 ? filters[be.filter] : "?",
			"checksum", "xxh3:", hex64(be.checksum))))
			return -ENOMEM;
	}
	return 0;
}

static int print_json(const struct stp_image *img, const struct tree_counts *c, int list_blocks)
{
	json_t *doc = json_superblock(img);
	int err = 0;

	if (doc && json_object_set_new(doc, "tree", json_counts(c)))
		err = -ENOMEM;
	if (doc && !err && list_blocks && (err = json_blocks(img, doc))) {
		json_decref(doc);
		return err;
	}
	return stp_json_print(&info_cli, doc) ? -EIO : 0;
}

static int info_run(const char *image, int list_blocks, int json)
{
	struct stp_image *img;
	struct tree_counts counts = { 0 };
	struct stp_walk walk = { .cli = &info_cli, .image = image, .enter = count_entry,
				 .ctx = &counts };
	int status = STP_EXIT_FAIL, err;

	if (stp_cli_open(&info_cli, image, &img))
		return STP_EXIT_FAIL;
	counts.seen = calloc(stp_image_sb(img)->inode_count / 8 + 1, 1);
	if (!counts.seen) {
		stp_cli_error(&info_cli, "out of memory");
		goto out;
	}
	walk.img = img;
	err = stp_walk_tree(&walk);
	if (err) {
		stp_cli_problem(&info_cli, image, NULL, "%s", stp_strerror(err));
		goto out;
	}
	if (json) {
		if ((err = print_json(img, &counts, list_blocks)) && err != -EIO)
			stp_cli_problem(&info_cli, image, NULL, "%s", stp_strerror(err));
		if (err)
			goto out;
	} else {
		print_superblock(img);
		print_counts(&counts, stp_image_sb(img)->image_size);
	}
	if (!json && list_blocks && (err = print_blocks(img))) {
		stp_cli_problem(&info_cli, image, NULL, "block table: %s", stp_strerror(err));
		goto out;
	}
	status = walk.problems ? STP_EXIT_FAIL : STP_EXIT_OK;
out:
	free(counts.seen);
	stp_image_close(img);
	return status;
}

int stp_cmd_info(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "blocks", no_argument, NULL, 'b' }, { "json", no_argument, NULL, 'j' },
		STP_CLI_LONGOPTS, { 0 },
	};
	int list_blocks = 0, json = 0, opt, status;

	stp_cli_init(&info_cli, argv);
	while ((opt = getopt_long(argc, argv, "bj" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'b')
			list_blocks = 1;
		else if (opt == 'j')
			json = 1;
		else
			return stp_cli_other_option(&info_cli, opt);
	}
	if ((status = stp_cli_operands(&info_cli, argc, 1, 1)))
		return status;
	return info_run(argv[optind], list_blocks, json);
}
