/* SPDX-License-Identifier: MIT */
/* mkstipple: build an image from a directory tree. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "archive_in.h"
#include "attrs.h"
#include "exclude.h"
#include "format.h"
#include "hotlist.h"
#include "image.h"
#include "meta.h"
#include "metastore.h"
#include "order.h"
#include "output.h"
#include "pack.h"
#include "scan.h"
#include "sign.h"
#include "source.h"
#include "util.h"

#define DEFAULT_LEVEL 19
#define DEFAULT_BLOCK_LOG 25 /* 32 MiB */
/* The hot region in blocks of 4 MiB, so that several decode at once at mount: a start-up
 * whose hot bytes fit in one block otherwise waits for one thread to decode all of it. */
#define DEFAULT_HOT_BLOCK_LOG 22

struct options {
	const char *source, *image, *hot_list, *sign_key;
	uint64_t hot_margin;
	const char *hot_block_arg; /* --hot-block-size, as given */
	struct stp_seckey *key;
	struct pack_opts pack;
	struct attr_opts attrs;
	struct exclude exclude;
	struct scan_opts scan;
	int all_root;
	int quiet;
	int code_apart;
	int whole_meta;   /* --no-meta-pages */
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mkstipple [OPTIONS] SOURCE IMAGE\n"
		"Build a compressed read-only image of SOURCE: a directory, a tar, cpio or zip\n"
		"archive (plain or compressed), or - for an archive on standard input.\n"
		"IMAGE - is standard output; a symlink IMAGE is written through.\n\n"
		"  -l, --level N         zstd level, 1-22 (default %d)\n"
		"  -b, --block-size SIZE block size, a power of two from 64K to 1G (default 32M)\n"
		"      --hot-list FILE   files read at start-up, stored first, in order\n"
		"      --hot-margin SIZE widen the hot list's ranges by this on each side\n"
		"                        (default 32K: twice the mount's readahead)\n"
		"      --hot-block-size SIZE  blocks of the hot region, a power of two from 64K\n"
		"                        to the block size (default 4M, or the block size if less)\n"
		"      --no-bcj          do not filter machine code before compression\n"
		"      --code-apart      store programs' code apart from their tables and data\n"
		"      --sign SECKEY     sign the image with this Ed25519 key (stipple keygen)\n"
		"      --no-meta-pages   metadata in one piece, for readers older than paged\n"
		"                        metadata (decoded whole when opened)\n"
		"  -t, --threads N       compression threads (default: online CPUs)\n"
		"  -m, --memory SIZE     cap on the memory of blocks in flight (default: none)\n"
		"      --all-root        every entry owned by uid 0, gid 0\n"
		"      --uid N, --gid N  every entry owned by this numeric id (over --all-root)\n"
		"      --mtime T         every mtime T: seconds, @seconds or YYYY-MM-DD[THH:MM:SS]\n"
		"                        (UTC); else mtimes past $SOURCE_DATE_EPOCH are clamped\n"
		"      --exclude PATTERN leave out paths matching this glob (repeatable)\n"
		"      --exclude-from FILE  leave out paths matching the globs in FILE\n"
		"      --one-file-system do not enter directories on other file systems\n"
		"      --no-xattrs       store no extended attributes\n"
		"  -q, --quiet           print nothing but errors\n"
		"  -h, --help            show this help\n"
		"  -V, --version         show the version\n\n"
		"Neither --threads nor --memory changes the image. See mkstipple(1).\n",
		DEFAULT_LEVEL);
}

static int bad_option(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "mkstipple: %s %s: %s\n", opt, val, why);
	return 2;
}

static int parse_block_size(const char *opt, const char *val, unsigned *log)
{
	uint64_t v;

	if (stp_parse_size(val, &v) || v == 0 || (v & (v - 1)))
		return bad_option(opt, val, "not a power of two");
	*log = (unsigned)__builtin_ctzll(v);
	if (*log < STP_BLOCK_LOG_MIN || *log > STP_BLOCK_LOG_MAX)
		return bad_option(opt, val, "must be from 64K to 1G");
	return 0;
}

/* The hot blocks' size against the block size: a default above it follows it down. */
static int finish_hot_block_size(struct options *o)
{
	if (o->pack.hot_block_log <= o->pack.block_log)
		return 0;
	if (!o->hot_block_arg) {
		o->pack.hot_block_log = o->pack.block_log;
		return 0;
	}
	return bad_option("--hot-block-size", o->hot_block_arg, "larger than --block-size");
}

/* Options with no short form. */
enum { OPT_ALL_ROOT = 256, OPT_UID, OPT_GID, OPT_MTIME, OPT_EXCLUDE, OPT_EXCLUDE_FROM,
       OPT_ONE_FS, OPT_NO_XATTRS, OPT_HOT_MARGIN, OPT_HOT_BLOCK_SIZE };

static int parse_id(const char *opt, const char *val, int64_t *id)
{
	uint64_t v;

	/* (uid_t)-1 means "unchanged" to chown(2): no file can have it */
	if (stp_parse_uint(val, 0, UINT32_MAX - 1, &v))
		return bad_option(opt, val, "not a numeric id from 0 to 4294967294");
	*id = (int64_t)v;
	return 0;
}

/* The options that decide owners, times and what is left out. */
static int parse_tree_option(int c, const char *val, struct options *o)
{
	int rc;

	switch (c) {
	case OPT_ALL_ROOT: o->all_root = 1; return 0;
	case OPT_UID: return parse_id("--uid", val, &o->attrs.uid);
	case OPT_GID: return parse_id("--gid", val, &o->attrs.gid);
	case OPT_MTIME:
		if (attrs_parse_time(val, &o->attrs.mtime))
			return bad_option("--mtime", val, "not seconds since the epoch, @seconds "
					  "or a date YYYY-MM-DD[THH:MM:SS[Z]] from 1970 on");
		o->attrs.set_mtime = 1;
		return 0;
	case OPT_EXCLUDE:
		rc = exclude_add(&o->exclude, val);
		if (rc == -EINVAL)
			return bad_option("--exclude", val, "matches no path");
		return rc ? bad_option("--exclude", val, strerror(-rc)) : 0;
	case OPT_EXCLUDE_FROM: return exclude_load(&o->exclude, val) ? 2 : 0;
	case OPT_ONE_FS: o->scan.one_file_system = 1; return 0;
	case OPT_NO_XATTRS: o->scan.no_xattrs = 1; return 0;
	}
	return 2;
}

/* --uid and --gid win over --all-root, whatever the order. */
static int finish_tree_options(struct options *o)
{
	if (o->all_root && o->attrs.uid < 0)
		o->attrs.uid = 0;
	if (o->all_root && o->attrs.gid < 0)
		o->attrs.gid = 0;
	o->scan.exclude = &o->exclude;
	return attrs_load_env(&o->attrs) ? 2 : 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "level", required_argument, NULL, 'l' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "hot-list", required_argument, NULL, 'H' },
		{ "hot-margin", required_argument, NULL, OPT_HOT_MARGIN },
		{ "hot-block-size", required_argument, NULL, OPT_HOT_BLOCK_SIZE },
		{ "no-bcj", no_argument, NULL, 'B' },
		{ "code-apart", no_argument, NULL, 'C' },
		{ "no-meta-pages", no_argument, NULL, 'W' },
		{ "sign", required_argument, NULL, 'S' },
		{ "threads", required_argument, NULL, 't' },
		{ "memory", required_argument, NULL, 'm' },
		{ "all-root", no_argument, NULL, OPT_ALL_ROOT },
		{ "uid", required_argument, NULL, OPT_UID },
		{ "gid", required_argument, NULL, OPT_GID },
		{ "mtime", required_argument, NULL, OPT_MTIME },
		{ "exclude", required_argument, NULL, OPT_EXCLUDE },
		{ "exclude-from", required_argument, NULL, OPT_EXCLUDE_FROM },
		{ "one-file-system", no_argument, NULL, OPT_ONE_FS },
		{ "no-xattrs", no_argument, NULL, OPT_NO_XATTRS },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t v;
	int c, rc = 0;

	o->pack = (struct pack_opts){ .level = DEFAULT_LEVEL, .block_log = DEFAULT_BLOCK_LOG,
				      .hot_block_log = DEFAULT_HOT_BLOCK_LOG,
				      .threads = cpus > 0 ? (unsigned)cpus : 1, .bcj = 1 };
	o->attrs = ATTR_OPTS_NONE;
	o->hot_margin = STP_HOT_MARGIN_DEFAULT;
	while (!rc && (c = getopt_long(argc, argv, "l:b:t:m:qhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (stp_parse_uint(optarg, 1, (uint64_t)ZSTD_maxCLevel(), &v))
				return bad_option("--level", optarg, "must be from 1 to 22");
			o->pack.level = (int)v;
			break;
		case 'b': rc = parse_block_size("--block-size", optarg, &o->pack.block_log); break;
		case OPT_HOT_BLOCK_SIZE:
			rc = parse_block_size("--hot-block-size", optarg, &o->pack.hot_block_log);
			o->hot_block_arg = optarg;
			break;
		case 'H': o->hot_list = optarg; break;
		case OPT_HOT_MARGIN:
			if (stp_parse_size(optarg, &v) || v > STP_HOT_MARGIN_MAX)
				return bad_option("--hot-margin", optarg, "not a size from 0 to 16M");
			o->hot_margin = v;
			break;
		case 'B': o->pack.bcj = 0; break;
		case 'C': o->code_apart = 1; break;
		case 'W': o->whole_meta = 1; break;
		case 'S': o->sign_key = optarg; break;
		case 't':
			if (stp_parse_uint(optarg, 1, 1024, &v))
				return bad_option("--threads", optarg, "must be from 1 to 1024");
			o->pack.threads = (unsigned)v;
			break;
		case 'm':
			if (stp_parse_size(optarg, &v) || v == 0)
				return bad_option("--memory", optarg, "not a size (e.g. 512M)");
			o->pack.memory = v;
			break;
		case 'q': o->quiet = 1; break;
		case 'h': usage(stdout); exit(0);
		case 'V': printf("mkstipple %s\n", STP_VERSION); exit(0);
		case '?': usage(stderr); return 2;
		default: rc = parse_tree_option(c, optarg, o); break;
		}
	}
	if (rc || (rc = finish_tree_options(o)) || (rc = finish_hot_block_size(o)))
		return rc;
	if (argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	o->source = argv[optind];
	o->image = argv[optind + 1];
	o->pack.progress = !o->quiet && isatty(STDERR_FILENO);
	return 0;
}

/* Encodes the metadata and stores it in pages after the blocks (and dictionary). */
static int write_metadata(const struct options *o, const struct tree *t,
			  const struct pack_result *r, int fd, struct stp_superblock *sb)
{
	uint8_t *meta;
	size_t len;
	int rc = meta_build(t, r->blocks, r->nblocks, &meta, &len);

	if (rc)
		return rc;
	if (o->whole_meta)
		rc = meta_store_whole(meta, len, fd, r->end, sb, &sb->image_size);
	else
		rc = meta_store(meta, len, o->pack.level, o->pack.threads, fd, r->end, sb,
				&sb->image_size);
	free(meta);
	return rc;
}

/* Stores the dictionary after the blocks, where the metadata would have gone. */
static int write_dictionary(struct pack_result *r, int fd, struct stp_superblock *sb)
{
	sb->dict_offset = r->end;
	sb->dict_size = r->dict_size;
	sb->dict_checksum = stp_checksum(r->dict, r->dict_size);
	r->end += r->dict_size;
	return stp_pwrite_full(fd, r->dict, r->dict_size, sb->dict_offset);
}

/* Frees *ORDER once the files are packed: the metadata needs none of it. */
static int write_image(const struct options *o, struct tree *t, struct piece **order,
		       size_t count, size_t nhot, struct stp_output *out, uint64_t *image_size)
{
	struct stp_superblock sb = { .version = STP_FORMAT_VERSION,
				     .block_log = o->pack.block_log };
	struct pack_result r;
	uint8_t raw[STP_SB_SIZE];
	int rc = pack_files(*order, count, nhot, out->fd, STP_SB_SIZE, &o->pack, &r);

	free(*order);
	*order = NULL;
	if (rc)
		return rc;
	attrs_apply(t, &o->attrs); /* only now: the packer compared each file's mtime */
	sb.data_size = r.data_size;
	sb.block_count = r.nblocks;
	sb.hot_size = r.hot_size;
	sb.hot_block_log = r.hot_block_log;
	sb.feat_incompat = r.feat_incompat;
	sb.inode_count = t->ninodes;
	if (r.dict)
		rc = write_dictionary(&r, out->fd, &sb);
	if (!rc)
		rc = write_metadata(o, t, &r, out->fd, &sb);
	if (!rc) {
		stp_sb_encode(&sb, raw);
		rc = stp_pwrite_full(out->fd, raw, sizeof(raw), 0);
	}
	if (!rc && ftruncate(out->fd, (off_t)sb.image_size))
		rc = -errno;
	free(r.blocks);
	free(r.dict);
	*image_size = sb.image_size;
	return rc;
}

/* On standard error when the image goes to standard output. */
static void summary(const struct options *o, const struct tree *t, uint64_t image_size,
		    uint64_t t0, int to_stdout)
{
	char in[32], img[32];
	double secs = (double)(stp_now_ns() - t0) / 1e9;

	if (o->quiet)
		return;
	fprintf(to_stdout ? stderr : stdout, "%s: %zu files, %u inodes, %s in, %s image "
		"(%.1f%%), %.1f s\n", to_stdout ? "standard output" : o->image,
		t->nfiles, t->ninodes, stp_human_size(t->file_bytes, in, sizeof(in)),
		stp_human_size(image_size, img, sizeof(img)),
		t->file_bytes ? 100.0 * (double)image_size / (double)t->file_bytes : 100.0, secs);
}

/* Loads the signing key before anything is built: a bad key costs nothing. */
static int load_key(struct options *o)
{
	int rc;

	if (!o->sign_key)
		return 0;
	rc = stp_sign_load_seckey(o->sign_key, &o->key);
	if (rc == -EINVAL)
		fprintf(stderr, "mkstipple: --sign %s: not an unencrypted Ed25519 secret key "
			"in PEM (see stipple keygen)\n", o->sign_key);
	else if (rc)
		fprintf(stderr, "mkstipple: --sign %s: %s\n", o->sign_key, strerror(-rc));
	return rc ? 2 : 0;
}

/* Signs the complete unsigned image in the temporary file: the same bytes `stipple
 * sign` gives, since both take them from stp_sign_image. */
static int sign_output(const struct options *o, const struct stp_output *out, uint64_t *image_size)
{
	struct stp_image *img;
	uint8_t sb[STP_SB_SIZE], *block;
	size_t len;
	uint64_t keep;
	int fd = fcntl(out->fd, F_DUPFD_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	rc = stp_image_open_fd(fd, out->temp ? out->temp : "the spool", &img);
	if (rc)
		return rc;
	rc = stp_sign_image(img, o->key, sb, &block, &len, &keep);
	stp_image_close(img);
	if (rc)
		return rc;
	rc = stp_pwrite_full(out->fd, block, len, keep);
	if (!rc)
		rc = stp_pwrite_full(out->fd, sb, sizeof(sb), 0);
	if (!rc && ftruncate(out->fd, (off_t)(keep + len)))
		rc = -errno;
	free(block);
	*image_size = keep + len;
	return rc;
}

/* Whether the directory DIRFD is ROOT or lies below it, as ".." leads up (by device and
 * inode, across mounts and whatever the names). */
static int dir_within(int dirfd, const char *root)
{
	struct stat r, st, up;
	int fd = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC), found = 0;

	if (stat(root, &r))
		r.st_ino = 0;
	for (int depth = 0; fd >= 0 && depth < 4096 && !fstat(fd, &st); depth++) {
		int parent;

		found = r.st_ino && st.st_dev == r.st_dev && st.st_ino == r.st_ino;
		if (found)
			break;
		parent = openat(fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = parent;
		if (fd >= 0 && !fstat(fd, &up) && up.st_dev == st.st_dev && up.st_ino == st.st_ino)
			break; /* "/" is its own parent */
	}
	if (fd >= 0)
		close(fd);
	return found;
}

/* Scans the source, leaving out the image being written and the file it replaces (by
 * device and inode, whatever their names), so that an image built inside its own source
 * never packs itself. */
static int scan_own_output(const struct options *o, const struct stp_output *out, struct tree *t)
{
	struct stat skip[2];
	size_t n = 0;

	if (!fstat(out->fd, &skip[n]))
		n++;
	if (out->dest_exists && S_ISREG(out->dest.st_mode))
		skip[n++] = out->dest;
	if (!o->quiet && !out->to_stdout && dir_within(out->dirfd, o->source))
		fprintf(stderr, "mkstipple: %s: inside %s: the image is not packed into itself\n",
			out->final, o->source);
	return scan_tree(o->source, skip, n, &o->scan, t);
}

/* SOURCE is an archive when it is "-" or a file that is not a directory; the spool of a
 * stream goes beside the image (in $TMPDIR with the image's, for standard output). */
static int read_source(const struct options *o, const struct stp_output *out, struct tree *t,
		       struct archive_source *src)
{
	/* the directories an archive implies are as old as SOURCE_DATE_EPOCH says */
	int64_t epoch = o->attrs.clamp ? o->attrs.clamp_to : 0;
	struct stat st;
	int rc;

	if (strcmp(o->source, "-") && (stat(o->source, &st) || S_ISDIR(st.st_mode)))
		return scan_own_output(o, out, t);
	rc = archive_tree(o->source, out->dir, epoch, &o->scan, t, src);
	if (!rc)
		source_use_archive(src->fd, src->spool_fd);
	return rc;
}

/* Names IMAGE as given, and the file it leads to when that is another. */
static void output_problem(const char *image, const struct stp_output *out, const char *step,
			   int rc)
{
	const char *final = out->final && strcmp(out->final, image) ? out->final : NULL;

	if (out->to_stdout && rc == -ENOTTY && out->refused) {
		fprintf(stderr, "mkstipple: refusing to write an image to a terminal "
			"(redirect standard output, or give a file as IMAGE)\n");
		return;
	}
	fprintf(stderr, "mkstipple: %s%s%s: %s", image, final ? " -> " : "", final ? final : "",
		step);
	if (out->refused)
		fputc('\n', stderr);
	else
		fprintf(stderr, ": %s\n", strerror(-rc));
}

static int open_output(const char *image, struct stp_output *out)
{
	const char *step;
	int rc = stp_output_open(image, out, &step);

	if (rc)
		output_problem(image, out, step, rc);
	return rc;
}

/* The mode of a replaced image is kept, as a shell's > or cp(1) keeps it. */
static int commit_output(const char *image, struct stp_output *out)
{
	const char *step;
	int rc = stp_output_commit(out, stp_output_mode(out), &step);

	if (rc)
		output_problem(image, out, step, rc);
	return rc;
}

/* Refuses a SOURCE archive that is the very file IMAGE replaces, by device and inode, as
 * tar refuses to archive its own archive: whatever path or link leads to it. */
static int refuse_own_source(const struct options *o, const struct stp_output *out)
{
	struct stat st;
	int from_stdin = !strcmp(o->source, "-");

	if (!out->dest_exists || (from_stdin ? fstat(STDIN_FILENO, &st) : stat(o->source, &st)))
		return 0;
	if (st.st_dev != out->dest.st_dev || st.st_ino != out->dest.st_ino)
		return 0;
	fprintf(stderr, "mkstipple: %s: is the file the image would replace (%s): not read\n",
		from_stdin ? "standard input" : o->source, out->to_stdout ? "standard output" :
		out->final);
	return -EEXIST;
}

/* The scan holds a descriptor per directory level: allow what the hard limit permits. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct tree t = { 0 };
	struct stp_output out = { .fd = -1 };
	struct archive_source src = { .fd = -1, .spool_fd = -1 };
	struct piece *order = NULL;
	uint64_t t0 = stp_now_ns(), image_size = 0;
	size_t nhot = 0, count = 0;
	int rc = parse_args(argc, argv, &o);

	if (rc || (rc = load_key(&o)))
		return rc;
	raise_fd_limit();
	rc = open_output(o.image, &out);
	if (!rc)
		rc = refuse_own_source(&o, &out);
	if (!rc)
		rc = read_source(&o, &out, &t, &src);
	if (!rc)
		rc = order_files(&t, o.hot_list, o.hot_margin, o.code_apart, &order, &nhot, &count);
	if (!rc)
		rc = write_image(&o, &t, &order, count, nhot, &out, &image_size);
	if (!rc && o.key && (rc = sign_output(&o, &out, &image_size)) && rc != -ENOSPC &&
	    rc != -EIO && rc != -EDQUOT && rc != -EFBIG)
		fprintf(stderr, "mkstipple: %s: signing failed: %s\n", o.image, strerror(-rc));
	if (rc == -ENOSPC || rc == -EIO || rc == -EDQUOT || rc == -EFBIG)
		fprintf(stderr, "mkstipple: %s: writing failed: %s\n", o.image, strerror(-rc));
	if (!rc)
		rc = commit_output(o.image, &out);
	stp_output_abort(&out);
	source_close();
	archive_source_close(&src);
	if (!rc)
		summary(&o, &t, image_size, t0, out.to_stdout);
	free(order);
	stp_sign_seckey_free(o.key);
	exclude_free(&o.exclude);
	tree_free(&t);
	return rc ? 1 : 0;
}
