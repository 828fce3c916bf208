/* SPDX-License-Identifier: MIT */
/* mkstipple's options, their checks and the hints for mksquashfs's. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "format.h"
#include "hotlist.h"
#include "report.h"
#include "util.h"

#define DEFAULT_LEVEL 19
#define DEFAULT_BLOCK_LOG 25 /* 32 MiB */
/* The hot region in blocks of 4 MiB, so that several decode at once at mount: a start-up
 * whose hot bytes fit in one block otherwise waits for one thread to decode all of it. */
#define DEFAULT_HOT_BLOCK_LOG 22

static void usage(FILE *out)
{
	fprintf(out,
		"usage: mkstipple [OPTIONS] SOURCE IMAGE\n"
		"Build a compressed read-only image of SOURCE: a directory (a symlink to one is\n"
		"followed), a tar, cpio or zip archive (plain or compressed), or - for an archive\n"
		"on standard input. IMAGE - is standard output; a symlink IMAGE is written through.\n\n"
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
		"      --no-stable-blocks  fill every block, as before stable blocks: shares\n"
		"                        far fewer blocks with the next release\n"
		"      --base OLD        keep the blocks of the image OLD (the last release) that\n"
		"                        hold files that did not change, stored as they are\n"
		"      --cut-inside[=MEAN]  cut large files where their bytes say, each cut a\n"
		"                        block of its own, MEAN long on average (default: 1/128\n"
		"                        block, 64K at least): unchanged runs of changed files\n"
		"                        are shared (the default with --base); the hot\n"
		"                        region is cut at file boundaries too\n"
		"      --no-cut-inside   with --base, pack large files whole\n"
		"  -t, --threads N       compression threads (default: online CPUs)\n"
		"  -m, --memory SIZE     cap on the memory of blocks in flight (default: none)\n"
		"  -T, --files-from FILE pack only these paths of SOURCE (one a line) and what\n"
		"                        lies below them\n"
		"      --null            -T's names end with a NUL, not a newline\n"
		"      --exclude PATTERN leave out paths matching this glob (repeatable)\n"
		"      --exclude-from FILE  leave out paths matching the globs in FILE\n"
		"      --one-file-system do not enter directories on other file systems\n"
		"      --no-xattrs       store no extended attributes\n"
		"      --ignore-failed-read  leave out, with a warning, what cannot be read\n"
		"      --all-root        every entry owned by uid 0, gid 0\n"
		"      --uid N, --gid N  every entry owned by this numeric id (over --all-root)\n"
		"      --mtime T         every mtime T: @SECONDS, YYYY-MM-DD[ HH:MM[:SS]][ ZONE],\n"
		"                        or the mtime of file T when it starts with / or .\n"
		"                        (else mtimes past $SOURCE_DATE_EPOCH are clamped)\n"
		"  -p, --pseudo DEF      a pseudo definition: \"PATH m MODE UID GID\" sets an\n"
		"                        entry's mode and owners (as in mksquashfs)\n"
		"      --pseudo-file FILE, -pf FILE  pseudo definitions, one a line\n"
		"  -v, --verbose         list every entry packed (on standard output)\n"
		"  -n, --dry-run         scan and list, write nothing\n"
		"      --json            the summary as one JSON object (see mkstipple(1))\n"
		"  -q, --quiet           print nothing but problems (no progress, no summary)\n"
		"  -h, --help            show this help\n"
		"  -V, --version         show the version\n\n"
		"Neither --threads nor --memory changes the image. See mkstipple(1).\n",
		DEFAULT_LEVEL);
}

/* The one line that follows every usage error (and bad value). */
/* A file an option names (--exclude-from, -pf, -T) could not be read or used: the
 * reader said why; no usage hint, and exit 1, as for the hot list, the key and every
 * file the stipple commands are given. */
#define OPTION_FILE_FAILED (-1)

static int usage_hint(void)
{
	fputs("Try 'mkstipple --help' for more information.\n", stderr);
	return 2;
}

static int bad_option(const char *opt, const char *val, const char *why)
{
	report_error(NULL, "%s %s: %s", opt, val, why);
	return 2;
}

/* mksquashfs's options that mkstipple has no such spelling for, and what to use. */
static const struct squash_hint {
	const char *opt, *instead;
} squash_hints[] = {
	{ "-comp", "images are always zstd: --level N sets its level" },
	{ "-Xcompression-level", "use --level N" },
	{ "-all-root", "use --all-root" },
	{ "-root-owned", "use --all-root" },
	{ "-force-uid", "use --uid N" },
	{ "-force-gid", "use --gid N" },
	{ "-e", "use --exclude PATTERN (once per pattern)" },
	{ "-ef", "use --exclude-from FILE" },
	{ "-wildcards", "--exclude always takes globs" },
	{ "-regex", "--exclude takes globs, not regular expressions" },
	{ "-noappend", "mkstipple always writes a new image: there is no appending" },
	{ "-no-xattrs", "use --no-xattrs" },
	{ "-xattrs", "extended attributes are stored unless --no-xattrs" },
	{ "-one-file-system", "use --one-file-system" },
	{ "-processors", "use --threads N" },
	{ "-mem", "use --memory SIZE" },
	{ "-all-time", "use --mtime T" },
	{ "-mkfs-time", "the image has no time of its own; --mtime T sets the entries'" },
	{ "-reproducible", "images are always reproducible (see SOURCE_DATE_EPOCH)" },
	{ "-not-reproducible", "images are always reproducible" },
	{ "-sort", "use --hot-list FILE" },
	{ "-info", "use -v" },
	{ "-quiet", "use -q" },
	{ "-no-progress", "use -q" },
	{ "-progress", "progress is shown whenever standard error is a terminal" },
	{ "-tar", "a tar archive as SOURCE (or - for standard input) is read as it is" },
	{ "-no-recovery", "there is no recovery file: a failed build leaves nothing" },
	{ "-keep-as-directory", "SOURCE's contents are the image's root" },
	{ "-no-duplicates", "identical files are always stored once" },
	{ "-no-hardlinks", "hard links are always kept as links" },
	{ "-no-sparse", "runs of zeros are always stored as holes" },
	{ "-exit-on-error", "every problem fails the build (see --ignore-failed-read)" },
	{ "-root-mode", "use -p '/ m MODE UID GID'" },
	{ "-root-uid", "use -p '/ m MODE UID GID'" },
	{ "-root-gid", "use -p '/ m MODE UID GID'" },
	{ "-root-time", "use --mtime T (for every entry)" },
	{ "-action", "use -p for modes and owners, --exclude to leave paths out" },
	{ "-action-file", "use -pf for modes and owners, --exclude-from to leave paths out" },
	{ "-cpiostyle", "use -T FILE (paths of SOURCE, one a line)" },
	{ "-cpiostyle0", "use -T FILE --null" },
	{ "-offset", "the image always begins at byte 0 of IMAGE" },
	{ "-nopad", "images are not padded" },
	{ "-Xhelp", "images are always zstd: --level N sets its level" },
};

/* ARG, an option of mksquashfs, and what to use: 1 when it was one (reported). */
static int squash_option(const char *arg)
{
	for (size_t i = 0; i < sizeof(squash_hints) / sizeof(*squash_hints); i++) {
		if (!strcmp(arg, squash_hints[i].opt)) {
			report_error(NULL, "%s is an option of mksquashfs: %s", arg,
				     squash_hints[i].instead);
			return 1;
		}
	}
	return 0;
}

/* Options with no short form. */
enum { OPT_ALL_ROOT = 256, OPT_UID, OPT_GID, OPT_MTIME, OPT_EXCLUDE, OPT_EXCLUDE_FROM,
       OPT_ONE_FS, OPT_NO_XATTRS, OPT_HOT_MARGIN, OPT_HOT_BLOCK_SIZE, OPT_NULL,
       OPT_IGNORE_FAILED_READ, OPT_JSON, OPT_PSEUDO_FILE, OPT_NO_STABLE,
       OPT_BASE, OPT_CUT_INSIDE, OPT_NO_CUT_INSIDE };

static const struct option longopts[] = {
	{ "level", required_argument, NULL, 'l' },
	{ "block-size", required_argument, NULL, 'b' },
	{ "hot-list", required_argument, NULL, 'H' },
	{ "hot-margin", required_argument, NULL, OPT_HOT_MARGIN },
	{ "hot-block-size", required_argument, NULL, OPT_HOT_BLOCK_SIZE },
	{ "no-bcj", no_argument, NULL, 'B' },
	{ "code-apart", no_argument, NULL, 'C' },
	{ "no-meta-pages", no_argument, NULL, 'W' },
	{ "no-stable-blocks", no_argument, NULL, OPT_NO_STABLE },
	{ "base", required_argument, NULL, OPT_BASE },
	{ "cut-inside", optional_argument, NULL, OPT_CUT_INSIDE },
	{ "no-cut-inside", no_argument, NULL, OPT_NO_CUT_INSIDE },
	{ "sign", required_argument, NULL, 'S' },
	{ "threads", required_argument, NULL, 't' },
	{ "memory", required_argument, NULL, 'm' },
	{ "files-from", required_argument, NULL, 'T' },
	{ "null", no_argument, NULL, OPT_NULL },
	{ "all-root", no_argument, NULL, OPT_ALL_ROOT },
	{ "uid", required_argument, NULL, OPT_UID },
	{ "gid", required_argument, NULL, OPT_GID },
	{ "mtime", required_argument, NULL, OPT_MTIME },
	{ "exclude", required_argument, NULL, OPT_EXCLUDE },
	{ "exclude-from", required_argument, NULL, OPT_EXCLUDE_FROM },
	{ "one-file-system", no_argument, NULL, OPT_ONE_FS },
	{ "no-xattrs", no_argument, NULL, OPT_NO_XATTRS },
	{ "ignore-failed-read", no_argument, NULL, OPT_IGNORE_FAILED_READ },
	{ "pseudo", required_argument, NULL, 'p' },
	{ "pseudo-file", required_argument, NULL, OPT_PSEUDO_FILE },
	{ "verbose", no_argument, NULL, 'v' },
	{ "dry-run", no_argument, NULL, 'n' },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ 0 }
};
#define SHORTOPTS ":l:b:t:m:T:p:vnqhV" /* ':' first: a missing value is told apart */

/* 1 when ARG is an option of ours whose value is the next argument. */
static int takes_next(const char *arg)
{
	if (arg[0] == '-' && arg[1] && arg[1] != '-' && arg[1] != ':' && !arg[2]) {
		const char *at = strchr(SHORTOPTS, arg[1]);

		return at && at[1] == ':';
	}
	for (const struct option *lo = longopts; arg[0] == '-' && arg[1] == '-' && lo->name; lo++)
		if (!strcmp(arg + 2, lo->name))
			return lo->has_arg == required_argument;
	return 0;
}

/* Before getopt sees them: mksquashfs's -pf becomes --pseudo-file, and its options we
 * do not spell that way are refused with a hint (getopt would read "-comp" as -c...). */
static int squash_words(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		if (i > 1 && takes_next(argv[i - 1]))
			continue;
		if (!strcmp(argv[i], "-pf"))
			argv[i] = "--pseudo-file";
		else if (squash_option(argv[i]))
			return 2;
	}
	return 0;
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

static int parse_id(const char *opt, const char *val, int64_t *id)
{
	uint64_t v;

	/* (uid_t)-1 means "unchanged" to chown(2): no file can have it */
	if (stp_parse_uint(val, 0, UINT32_MAX - 1, &v))
		return bad_option(opt, val, "not a numeric id from 0 to 4294967294");
	*id = (int64_t)v;
	return 0;
}

static int parse_mtime(const char *val, struct attr_opts *a)
{
	int rc = attrs_parse_time(val, &a->mtime);

	if (rc == -EINVAL)
		return bad_option("--mtime", val, "not @SECONDS, a date YYYY-MM-DD[ HH:MM[:SS]]"
				  "[ ZONE] from 1970 on, or a file (starting with / or .)");
	if (rc)
		return bad_option("--mtime", val, strerror(-rc));
	a->set_mtime = 1;
	return 0;
}

/* The options that decide what is packed, owners and times. */
static int parse_tree_option(int c, const char *val, struct options *o)
{
	int rc;

	switch (c) {
	case OPT_ALL_ROOT: o->all_root = 1; return 0;
	case OPT_UID: return parse_id("--uid", val, &o->attrs.uid);
	case OPT_GID: return parse_id("--gid", val, &o->attrs.gid);
	case OPT_MTIME: return parse_mtime(val, &o->attrs);
	case OPT_EXCLUDE:
		rc = exclude_add(&o->exclude, val);
		if (rc == -EINVAL)
			return bad_option("--exclude", val, "matches no path");
		return rc ? bad_option("--exclude", val, strerror(-rc)) : 0;
	case OPT_EXCLUDE_FROM: return exclude_load(&o->exclude, val) ? OPTION_FILE_FAILED : 0;
	case OPT_ONE_FS: o->scan.one_file_system = 1; return 0;
	case OPT_NO_XATTRS: o->scan.no_xattrs = 1; return 0;
	case OPT_IGNORE_FAILED_READ: o->scan.ignore_failed_read = 1; return 0;
	case 'T': o->files_from = val; return 0;
	case OPT_NULL: o->null_names = 1; return 0;
	case 'p': return pseudo_add(&o->pseudo, val, "-p", 0) ? 2 : 0;
	case OPT_PSEUDO_FILE: return pseudo_load(&o->pseudo, val) ? OPTION_FILE_FAILED : 0;
	}
	return 2;
}

/* The options that shape the image's blocks. */
static int parse_pack_option(int c, const char *val, struct options *o)
{
	uint64_t v;

	switch (c) {
	case 'l':
		if (stp_parse_uint(val, 1, (uint64_t)ZSTD_maxCLevel(), &v))
			return bad_option("--level", val, "must be from 1 to 22");
		o->pack.level = (int)v;
		return 0;
	case 'b': return parse_block_size("--block-size", val, &o->pack.block_log);
	case OPT_HOT_BLOCK_SIZE:
		o->hot_block_arg = val;
		return parse_block_size("--hot-block-size", val, &o->pack.hot_block_log);
	case OPT_HOT_MARGIN:
		if (stp_parse_size(val, &v) || v > STP_HOT_MARGIN_MAX)
			return bad_option("--hot-margin", val, "not a size from 0 to 16M");
		o->hot_margin = v;
		return 0;
	case 't':
		if (stp_parse_uint(val, 1, 1024, &v))
			return bad_option("--threads", val, "must be from 1 to 1024");
		o->pack.threads = (unsigned)v;
		return 0;
	case 'm':
		if (stp_parse_size(val, &v) || v == 0)
			return bad_option("--memory", val, "not a size (e.g. 512M)");
		o->pack.memory = v;
		return 0;
	}
	return parse_tree_option(c, val, o);
}

/* Whether ARG, where getopt stopped, is a long option (getopt's optopt is then no
 * letter to show). */
static int long_form(const char *arg)
{
	return arg[0] == '-' && arg[1] == '-';
}

/* The options that say what to print or do; ARGV_AT is the argument getopt was at. */
static int parse_one(int c, const char *val, const char *argv_at, struct options *o)
{
	switch (c) {
	case 'H': o->hot_list = val; return 0;
	case 'B': o->pack.bcj = 0; return 0;
	case 'C': o->code_apart = 1; return 0;
	case 'W': o->whole_meta = 1; return 0;
	case OPT_NO_STABLE: o->pack.stable = 0; return 0;
	case OPT_BASE: o->base = val; return 0;
	case OPT_CUT_INSIDE:
		o->cut_inside = 1;
		return val ? parse_block_size("--cut-inside", val, &o->cut_mean_log) : 0;
	case OPT_NO_CUT_INSIDE: o->cut_inside = 0; return 0;
	case 'S': o->sign_key = val; return 0;
	case 'v': o->verbose = 1; return 0;
	case 'n': o->dry_run = 1; return 0;
	case OPT_JSON: o->json = 1; return 0;
	case 'q': o->quiet = 1; return 0;
	case 'h': usage(stdout); exit(0);
	case 'V': printf("mkstipple %s\n", STP_VERSION); exit(0);
	case ':':
		if (long_form(argv_at))
			report_error(NULL, "%s needs a value", argv_at);
		else
			report_error(NULL, "-%c needs a value", optopt);
		return 2;
	case '?':
		if (long_form(argv_at))
			report_error(NULL, "unknown option %s", argv_at);
		else
			report_error(NULL, "unknown option -%c", optopt);
		return 2;
	}
	return parse_pack_option(c, val, o);
}

/* --uid and --gid win over --all-root, whatever the order; -T is read once --null is
 * known. */
static int finish_options(struct options *o)
{
	if (o->all_root && o->attrs.uid < 0)
		o->attrs.uid = 0;
	if (o->all_root && o->attrs.gid < 0)
		o->attrs.gid = 0;
	o->scan.exclude = &o->exclude;
	if (o->files_from) {
		if (select_load(&o->select, o->files_from, o->null_names))
			return OPTION_FILE_FAILED;
		o->scan.select = &o->select;
	}
	if (attrs_load_env(&o->attrs))
		return 2;
	if (o->base && !o->pack.stable)
		return bad_option("--base", o->base, "keeps stable blocks: not with "
				  "--no-stable-blocks");
	if (o->cut_inside < 0) /* a build on the last release cuts, unless told not to */
		o->cut_inside = o->base != NULL;
	if (o->cut_inside && !o->pack.stable) {
		report_error(NULL, "--cut-inside: cuts stable blocks: not with --no-stable-blocks");
		return 2;
	}
	if (o->cut_mean_log && o->cut_mean_log + 2 > o->pack.block_log) {
		report_error(NULL, "--cut-inside: the mean must be a quarter block or less");
		return 2;
	}
	return finish_hot_block_size(o);
}

/* SOURCE and IMAGE; a dry run needs no IMAGE. */
static int operands(int argc, char **argv, struct options *o)
{
	int n = argc - optind;

	if (n == 2 || (n == 1 && o->dry_run)) {
		o->source = argv[optind];
		o->image = n == 2 ? argv[optind + 1] : NULL;
		return 0;
	}
	report_error(NULL, n < 2 ? "missing %s" : "too many operands: %s",
		     n < 1 ? "SOURCE and IMAGE" : n < 2 ? "IMAGE" : argv[optind + 2]);
	return 2;
}

int options_parse(int argc, char **argv, struct options *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int c, rc = squash_words(argc, argv);

	opterr = 0; /* its messages name argv[0] as typed: ours are one line, the same */
	o->pack = (struct pack_opts){ .level = DEFAULT_LEVEL, .block_log = DEFAULT_BLOCK_LOG,
				      .hot_block_log = DEFAULT_HOT_BLOCK_LOG,
				      .threads = cpus > 0 ? (unsigned)cpus : 1, .bcj = 1,
				      .stable = 1 };
	o->attrs = ATTR_OPTS_NONE;
	o->hot_margin = STP_HOT_MARGIN_DEFAULT;
	o->cut_inside = -1; /* finish_options: on with --base */
	while (!rc && (c = getopt_long(argc, argv, SHORTOPTS, longopts, NULL)) != -1)
		rc = parse_one(c, optarg, argv[optind - 1], o);
	if (rc || (rc = operands(argc, argv, o)) || (rc = finish_options(o)))
		return rc == OPTION_FILE_FAILED ? 1 : usage_hint();
	return 0;
}

void options_free(struct options *o)
{
	exclude_free(&o->exclude);
	select_free(&o->select);
	pseudo_free(&o->pseudo);
}
