/* SPDX-License-Identifier: MIT */
/* mkstipple: build an image from a directory tree. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_in.h"
#include "base.h"
#include "chunks.h"
#include "format.h"
#include "image.h"
#include "meta.h"
#include "metastore.h"
#include "options.h"
#include "order.h"
#include "output.h"
#include "progress.h"
#include "report.h"
#include "source.h"
#include "summary.h"
#include "util.h"

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

/* Packs the files of *ORDER (freed here: the metadata needs none of it) into FD after
 * the superblock, over BASE's blocks when there is one; R gets the blocks and the
 * dictionary, which the caller frees whatever this returns. A file that could not be read
 * fails the build once every file was tried: -ENODATA, reported. */
static int pack_image(const struct options *o, const struct tree *t, struct piece **order,
		      size_t count, size_t nhot, struct base *base, int fd,
		      struct pack_result *r)
{
	struct pack_opts pack = o->pack;
	struct pack_carry carry;
	int rc = base ? base_match(base, *order, nhot, &count, &carry) : 0;

	pack.carry = base ? &carry : NULL;
	pack.end_body = o->cut_inside;
	pack.cut_hot = o->cut_inside && (!base || base_hot_cut(base));
	if (!rc)
		rc = meta_check_size(t); /* before any block is written */
	if (!rc && o->cut_inside)
		rc = chunks_split(order, nhot, &count, o->pack.block_log, o->cut_mean_log, base);
	if (!rc)
		rc = pack_files(*order, count, nhot, fd, STP_SB_SIZE, &pack, r);
	if (!rc && base)
		rc = base_place(base);
	free(*order);
	*order = NULL;
	if (!rc && r->failed) {
		report_error(NULL, "%u file%s could not be read: no image written", r->failed,
			     r->failed == 1 ? "" : "s");
		rc = -ENODATA;
	}
	return rc;
}

/* The superblock's fields that the packing R and the tree T decide. */
static void describe_image(const struct tree *t, const struct pack_result *r,
			   struct stp_superblock *sb)
{
	sb->data_size = r->data_size;
	sb->block_count = r->nblocks;
	sb->hot_size = r->hot_size;
	sb->hot_block_log = r->hot_block_log;
	sb->feat_incompat = r->feat_incompat;
	if (t->nlookups)
		sb->feat_incompat |= STP_FEAT_INCOMPAT_LOOKUPS;
	sb->inode_count = t->ninodes;
}

/* Writes what follows the blocks (dictionary, metadata), then the superblock SB at the
 * start, and cuts FD at the image's end. */
static int finish_image(const struct options *o, const struct tree *t,
			struct pack_result *r, int fd, struct stp_superblock *sb)
{
	uint8_t raw[STP_SB_SIZE];
	int rc = 0;

	describe_image(t, r, sb);
	if (r->dict)
		rc = write_dictionary(r, fd, sb);
	if (!rc)
		rc = write_metadata(o, t, r, fd, sb);
	if (!rc) {
		stp_sb_encode(sb, raw);
		rc = stp_pwrite_full(fd, raw, sizeof(raw), 0);
	}
	if (!rc && ftruncate(fd, (off_t)sb->image_size))
		rc = -errno;
	return rc;
}

/* Writes the image of T into OUT; S gets its size and the files that kept changing.
 * Returns 0 or a negative errno, reported (pack_image). */
static int write_image(const struct options *o, struct tree *t, struct piece **order,
		       size_t count, size_t nhot, struct base *base, struct stp_output *out,
		       struct summary *s)
{
	struct stp_superblock sb = { .version = STP_FORMAT_VERSION,
				     .block_log = o->pack.block_log };
	struct pack_result r = { 0 };
	int rc = pack_image(o, t, order, count, nhot, base, out->fd, &r);

	if (!rc) {
		s->changed = r.changed;
		progress_phase("metadata", 0);
		attrs_apply(t, &o->attrs); /* only now: the packer compared each file's mtime */
		pseudo_apply(&o->pseudo); /* per path, over --all-root, --uid and --gid */
		rc = finish_image(o, t, &r, out->fd, &sb);
		s->image_size = sb.image_size;
	}
	free(r.blocks);
	free(r.dict);
	return rc;
}

/* Loads the signing key before anything is built: a bad key costs nothing. */
static int load_key(struct options *o)
{
	int rc;

	if (!o->sign_key)
		return 0;
	rc = stp_sign_load_seckey(o->sign_key, &o->key);
	if (rc == -EINVAL)
		report_error(o->sign_key, "--sign: not an unencrypted Ed25519 secret key in PEM "
			     "(see stipple keygen)");
	else if (rc)
		report_errno(o->sign_key, -rc, "--sign");
	return rc ? 1 : 0;
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
	enum { DEPTH_MAX = PATH_MAX }; /* levels: more than a path of PATH_MAX bytes names */
	struct stat r, st, up;
	int fd = openat(dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC), found = 0;

	if (stat(root, &r))
		r.st_ino = 0;
	for (int depth = 0; fd >= 0 && depth < DEPTH_MAX && !fstat(fd, &st); depth++) {
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
	if (out->fd >= 0 && !o->quiet && !out->to_stdout && dir_within(out->dirfd, o->source))
		report_warning(out->final, "inside %s: the image is not packed into itself",
			       o->source);
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
	if (o->scan.select) {
		report_error(o->source, "-T names paths of a directory SOURCE, not of an archive");
		return -EINVAL;
	}
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

	char named[2 * PATH_MAX + 8];

	if (out->to_stdout && rc == -ENOTTY && out->refused) {
		report_error(NULL, "refusing to write an image to a terminal (redirect standard "
			     "output, or give a file as IMAGE)");
		return;
	}
	snprintf(named, sizeof(named), "%s%s%s", image, final ? " -> " : "", final ? final : "");
	if (out->refused)
		report_error(named, "%s", step);
	else
		report_error(named, "%s: %s", step, strerror(-rc));
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
	report_error(from_stdin ? "standard input" : o->source, "is the file the image would "
		     "replace (%s): not read", out->to_stdout ? "standard output" : out->final);
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

/* After the scan: -T's and the pseudo definitions' paths are checked, and what could
 * not be read fails the build unless --ignore-failed-read. */
static int check_tree(struct options *o, struct tree *t, struct summary *s)
{
	int rc = pseudo_resolve(&o->pseudo, t);

	s->left_out = scan_tree_dropped();
	if (s->left_out && !o->scan.ignore_failed_read) {
		report_error(NULL, "%zu entr%s left out (see above): no image written "
			     "(--ignore-failed-read leaves them out)", s->left_out,
			     s->left_out == 1 ? "y" : "ies");
		return -ENODATA;
	}
	return rc ? -ENODATA : 0;
}

/* Where -v, the summary and --json go: standard output, unless the image does. */
static FILE *words_out(const struct options *o)
{
	return o->image && !strcmp(o->image, "-") ? stderr : stdout;
}

/* The end of a build or a dry run: the list, the summary, and the exit status. */
static int finish(const struct options *o, const struct tree *t, struct summary *s,
		  uint64_t t0, int rc)
{
	progress_end();
	if (!rc && o->verbose)
		summary_list(words_out(o), t);
	s->seconds = (double)(stp_now_ns() - t0) / 1e9;
	s->warnings = report_warnings();
	s->errors = report_errors();
	if (!rc && (o->json || !o->quiet))
		summary_print(words_out(o), s, t, o->json);
	if (!rc && s->changed)
		report_error(NULL, "%u file%s changed as we read %s: the image holds each as it "
			     "last read", s->changed, s->changed == 1 ? "" : "s",
			     s->changed == 1 ? "it" : "them");
	return rc || s->changed ? 1 : 0;
}

/* Scans SOURCE, as a build does, and writes nothing. */
static int dry_run(struct options *o, struct tree *t, uint64_t t0)
{
	struct stp_output none = { .fd = -1, .dirfd = -1,
				   .dir = getenv("TMPDIR") ? getenv("TMPDIR") : (char *)"/tmp" };
	struct archive_source src = { .fd = -1, .spool_fd = -1 };
	struct summary s = { 0 };
	int rc = read_source(o, &none, t, &src);

	if (!rc)
		rc = check_tree(o, t, &s);
	source_close();
	archive_source_close(&src);
	return finish(o, t, &s, t0, rc);
}

/* The image O asks for, from its source into T, sharing blocks with BASE (NULL: none),
 * written, signed and committed, its summary into S and printed (T0: when the run
 * began): finish's exit status. */
static int build(struct options *o, struct tree *t, struct base *base, struct summary *s,
		 uint64_t t0)
{
	struct stp_output out = { .fd = -1 };
	struct archive_source src = { .fd = -1, .spool_fd = -1 };
	struct piece *order = NULL;
	size_t nhot = 0, count = 0;
	int rc = open_output(o->image, &out);

	if (!rc)
		rc = refuse_own_source(o, &out);
	if (!rc)
		rc = read_source(o, &out, t, &src);
	if (!rc)
		rc = check_tree(o, t, s);
	if (!rc)
		rc = order_files(t, o->hot_list, o->hot_margin, o->code_apart, &order, &nhot, &count);
	if (!rc)
		rc = write_image(o, t, &order, count, nhot, base, &out, s);
	if (!rc && o->key && (rc = sign_output(o, &out, &s->image_size)) && rc != -ENOSPC &&
	    rc != -EIO && rc != -EDQUOT && rc != -EFBIG)
		report_error(o->image, "signing failed: %s", strerror(-rc));
	if (rc == -ENOSPC || rc == -EIO || rc == -EDQUOT || rc == -EFBIG)
		report_error(o->image, "writing failed: %s", strerror(-rc));
	if (!rc)
		rc = commit_output(o->image, &out);
	stp_output_abort(&out);
	source_close();
	archive_source_close(&src);
	free(order);
	if (out.to_stdout && !o->json)
		s->image = "standard output";
	return finish(o, t, s, t0, rc);
}

int main(int argc, char **argv)
{
	struct options o = { 0 };
	struct tree t = { 0 };
	struct summary s = { 0 };
	struct base *base = NULL;
	uint64_t t0 = stp_now_ns();
	int rc = stp_fill_stdio() ? 1 : options_parse(argc, argv, &o);

	if (rc || (rc = load_key(&o))) {
		options_free(&o);
		return rc;
	}
	progress_enable(!o.quiet && isatty(STDERR_FILENO));
	raise_fd_limit();
	if (o.dry_run) {
		rc = dry_run(&o, &t, t0);
	} else {
		s.image = o.image;
		/* the base is checked before anything is written: a bad one costs nothing */
		rc = o.base ? base_open(o.base, &o.pack, &base) : 0;
		rc = rc ? finish(&o, &t, &s, t0, rc) : build(&o, &t, base, &s, t0);
		if (!rc && base && !o.quiet && !o.json)
			base_print(base, words_out(&o));
	}
	base_close(base);
	stp_sign_seckey_free(o.key);
	options_free(&o);
	tree_free(&t);
	return rc;
}
