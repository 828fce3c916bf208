/* SPDX-License-Identifier: MIT */
/*
 * `stipple diff A B`: what differs between two trees, each an image or a directory:
 * the paths, the types, the modes, the owners, the contents, the link targets, the
 * device numbers and the extended attributes (not the times, not the link counts).
 * One line per difference, in path order; exit 0, 1 or 2 as diff(1). With --stat, how
 * many stored blocks two images share.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "diffside.h"
#include "image.h"
#include "jsonout.h"
#include "util.h"

static const struct stp_cli diff_cli = {
	.name = "diff",
	.synopsis = "[-q] [--stat] A B",
	.summary = "Compare A and B, each an image or a directory: print what differs, one\n"
		   "line each, and exit 0 when nothing does, 1 when something does, 2 on trouble.",
	.options = "  -q, --brief    print nothing; the exit status says\n"
		   "      --stat     then how many stored blocks the two images share\n",
};

#define DIFF_CHUNK ((size_t)1 << 20)

struct differ {
	struct stp_side *a, *b;
	const char *name_a, *name_b;
	int brief;
	unsigned long differences, trouble;
	char *buf_a, *buf_b;
};

static void trouble(struct differ *d, const char *side, const char *path, int err)
{
	stp_cli_problem(&diff_cli, side, path, "%s", stp_strerror(err));
	d->trouble++;
}

/* "M PATH: WHAT" (or "- PATH", "+ PATH" for WHAT NULL with MARK '-' or '+'). */
static void say(struct differ *d, char mark, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void say(struct differ *d, char mark, const char *path, const char *fmt, ...)
{
	va_list ap;

	d->differences++;
	if (d->brief)
		return;
	printf("%c ", mark);
	stp_cli_put_escaped(stdout, path, strlen(path));
	if (fmt) {
		char *what = NULL;
		int n;

		va_start(ap, fmt);
		n = vasprintf(&what, fmt, ap);
		va_end(ap);
		fputs(": ", stdout);
		if (n >= 0)
			stp_cli_put_escaped(stdout, what, (size_t)n);
		free(n >= 0 ? what : NULL);
	}
	putchar('\n');
}

static int same_contents(struct differ *d, const char *path, const struct stp_side_node *na,
			 const struct stp_side_node *nb)
{
	struct stp_side_file *fa = NULL, *fb = NULL;
	int err, same = 1;

	if ((err = stp_side_file_open(d->a, path, na, &fa))) {
		trouble(d, d->name_a, path, err);
		return 1;
	}
	if ((err = stp_side_file_open(d->b, path, nb, &fb))) {
		trouble(d, d->name_b, path, err);
		stp_side_file_close(fa);
		return 1;
	}
	for (;;) {
		ssize_t ra = stp_side_file_read(fa, d->buf_a, DIFF_CHUNK);
		/* as much of B; at A's end, one byte, to see whether B goes on (it grew) */
		ssize_t rb = ra < 0 ? 0 : stp_side_file_read(fb, d->buf_b, ra ? (size_t)ra : 1);

		if (ra < 0 || rb < 0) {
			trouble(d, ra < 0 ? d->name_a : d->name_b, path, (int)(ra < 0 ? ra : rb));
			break;
		}
		/* a short read on one side: read the other to the same length */
		while (rb > 0 && rb < ra) {
			ssize_t more = stp_side_file_read(fb, d->buf_b + rb, (size_t)(ra - rb));

			if (more <= 0)
				break;
			rb += more;
		}
		if (ra != rb || memcmp(d->buf_a, d->buf_b, (size_t)ra)) {
			same = 0;
			break;
		}
		if (!ra)
			break;
	}
	stp_side_file_close(fa);
	stp_side_file_close(fb);
	return same;
}

static void diff_xattrs(struct differ *d, const char *path, const struct stp_side_node *na,
			const struct stp_side_node *nb)
{
	struct stp_side_xattr *xa = NULL, *xb = NULL;
	size_t ca = 0, cb = 0, i = 0, j = 0;
	int err;

	if ((err = stp_side_xattrs(d->a, path, na, &xa, &ca)))
		trouble(d, d->name_a, path, err);
	else if ((err = stp_side_xattrs(d->b, path, nb, &xb, &cb)))
		trouble(d, d->name_b, path, err);
	while (!err && (i < ca || j < cb)) {
		int c = i == ca ? 1 : j == cb ? -1 : strcmp(xa[i].name, xb[j].name);

		if (c < 0)
			say(d, 'M', path, "xattr %s only in A", xa[i].name);
		else if (c > 0)
			say(d, 'M', path, "xattr %s only in B", xb[j].name);
		else if (xa[i].len != xb[j].len || memcmp(xa[i].value, xb[j].value, xa[i].len))
			say(d, 'M', path, "xattr %s", xa[i].name);
		i += c <= 0;
		j += c >= 0;
	}
	stp_side_free_xattrs(xa, ca);
	stp_side_free_xattrs(xb, cb);
}

static void diff_targets(struct differ *d, const char *path, const struct stp_side_node *na,
			 const struct stp_side_node *nb)
{
	char ta[STP_LINK_MAX + 1], tb[STP_LINK_MAX + 1];
	size_t la, lb;
	int err;

	if ((err = stp_side_readlink(d->a, path, na, ta, &la)))
		trouble(d, d->name_a, path, err);
	else if ((err = stp_side_readlink(d->b, path, nb, tb, &lb)))
		trouble(d, d->name_b, path, err);
	else if (la != lb || memcmp(ta, tb, la))
		say(d, 'M', path, "target %s -> %s", ta, tb);
}

static void diff_dirs(struct differ *d, const char *path, const struct stp_side_node *na,
		      const struct stp_side_node *nb);

/* The two entries at PATH, which both sides have. */
static void diff_nodes(struct differ *d, const char *path, const struct stp_side_node *na,
		       const struct stp_side_node *nb)
{
	if ((na->mode & S_IFMT) != (nb->mode & S_IFMT)) {
		say(d, 'M', path, "type %s -> %s", stp_json_type(na->mode), stp_json_type(nb->mode));
		return;
	}
	if ((na->mode & 07777) != (nb->mode & 07777))
		say(d, 'M', path, "mode %04o -> %04o", na->mode & 07777, nb->mode & 07777);
	if (na->uid != nb->uid || na->gid != nb->gid)
		say(d, 'M', path, "owner %u:%u -> %u:%u", na->uid, na->gid, nb->uid, nb->gid);
	if (S_ISREG(na->mode) && na->size != nb->size)
		say(d, 'M', path, "contents (size %" PRIu64 " -> %" PRIu64 ")", na->size, nb->size);
	else if (S_ISREG(na->mode) && !same_contents(d, path, na, nb))
		say(d, 'M', path, "contents");
	else if (S_ISLNK(na->mode))
		diff_targets(d, path, na, nb);
	else if ((S_ISCHR(na->mode) || S_ISBLK(na->mode)) &&
		 (na->rdev_major != nb->rdev_major || na->rdev_minor != nb->rdev_minor))
		say(d, 'M', path, "device %u,%u -> %u,%u", na->rdev_major, na->rdev_minor,
		    nb->rdev_major, nb->rdev_minor);
	diff_xattrs(d, path, na, nb);
	if (S_ISDIR(na->mode))
		diff_dirs(d, path, na, nb);
}

static void diff_child(struct differ *d, const char *path, const char *name, int which)
{
	char sub[STP_WALK_PATH_MAX];
	struct stp_side_node na, nb;
	int n = snprintf(sub, sizeof(sub), "%s%s%s", path, strcmp(path, "/") ? "/" : "", name);
	int err;

	if (n < 0 || n >= (int)sizeof(sub)) {
		trouble(d, NULL, path, -ENAMETOOLONG);
		return;
	}
	if (which < 0 || which > 0) {
		struct stp_side *s = which < 0 ? d->a : d->b;

		if ((err = stp_side_stat(s, sub, &na)))
			trouble(d, which < 0 ? d->name_a : d->name_b, sub, err);
		else
			say(d, which < 0 ? '-' : '+', sub, S_ISDIR(na.mode) ? "directory" : NULL);
		return;
	}
	if ((err = stp_side_stat(d->a, sub, &na)))
		trouble(d, d->name_a, sub, err);
	else if ((err = stp_side_stat(d->b, sub, &nb)))
		trouble(d, d->name_b, sub, err);
	else
		diff_nodes(d, sub, &na, &nb);
}

static void diff_dirs(struct differ *d, const char *path, const struct stp_side_node *na,
		      const struct stp_side_node *nb)
{
	char **a = NULL, **b = NULL;
	size_t ca = 0, cb = 0, i = 0, j = 0;
	int err;

	if ((err = stp_side_list(d->a, path, na, &a, &ca))) {
		trouble(d, d->name_a, path, err);
		return;
	}
	if ((err = stp_side_list(d->b, path, nb, &b, &cb))) {
		trouble(d, d->name_b, path, err);
		stp_side_free_names(a, ca);
		return;
	}
	while (i < ca || j < cb) {
		int c = i == ca ? 1 : j == cb ? -1 : strcmp(a[i], b[j]);

		diff_child(d, path, c <= 0 ? a[i] : b[j], c);
		i += c <= 0;
		j += c >= 0;
	}
	stp_side_free_names(a, ca);
	stp_side_free_names(b, cb);
}

/* --- --stat: stored blocks the images share, by their stored size and checksum --- */

struct block_key {
	uint64_t checksum;
	uint32_t stored;
};

static int key_order(const void *x, const void *y)
{
	const struct block_key *a = x, *b = y;

	if (a->checksum != b->checksum)
		return a->checksum < b->checksum ? -1 : 1;
	return (a->stored > b->stored) - (a->stored < b->stored);
}

static int block_keys(const struct stp_image *img, struct block_key **keys, uint64_t *n,
		      uint64_t *bytes)
{
	uint64_t count = stp_image_sb(img)->block_count;

	*bytes = 0;
	*n = count;
	if (!(*keys = calloc(count ? count : 1, sizeof(**keys))))
		return -ENOMEM;
	for (uint64_t i = 0; i < count; i++) {
		struct stp_blockent be;
		int err = stp_image_block(img, i, &be);

		if (err)
			return err;
		(*keys)[i] = (struct block_key){ be.checksum, be.stored_size };
		*bytes += be.stored_size;
	}
	qsort(*keys, count, sizeof(**keys), key_order);
	return 0;
}

static int print_stat(struct differ *d)
{
	const struct stp_image *ia = stp_side_image(d->a), *ib = stp_side_image(d->b);
	struct block_key *ka = NULL, *kb = NULL;
	uint64_t na, nb, bytes_a, bytes_b, shared = 0, shared_bytes = 0;
	char h1[32], h2[32], h3[32];
	int err;

	if (!ia || !ib) {
		stp_cli_error(&diff_cli, "--stat compares two images; %s is a directory",
			      ia ? d->name_b : d->name_a);
		return -EINVAL;
	}
	err = block_keys(ia, &ka, &na, &bytes_a) ?: block_keys(ib, &kb, &nb, &bytes_b);
	for (uint64_t i = 0; !err && i < nb; i++)
		if (bsearch(&kb[i], ka, na, sizeof(*ka), key_order)) {
			shared++;
			shared_bytes += kb[i].stored;
		}
	free(ka);
	free(kb);
	if (err) {
		stp_cli_error(&diff_cli, "block table: %s", stp_strerror(err));
		return err;
	}
	printf("blocks: A %" PRIu64 " (%s stored), B %" PRIu64 " (%s stored); B shares %" PRIu64
	       " with A (%s, %.1f%% of B's stored bytes)\n", na,
	       stp_human_size(bytes_a, h1, sizeof(h1)), nb, stp_human_size(bytes_b, h2, sizeof(h2)),
	       shared, stp_human_size(shared_bytes, h3, sizeof(h3)),
	       bytes_b ? 100.0 * (double)shared_bytes / (double)bytes_b : 100.0);
	return 0;
}

static int diff_run(struct differ *d, int stat)
{
	struct stp_side_node na, nb;
	int err;

	d->buf_a = malloc(DIFF_CHUNK);
	d->buf_b = malloc(DIFF_CHUNK);
	if (!d->buf_a || !d->buf_b) {
		stp_cli_error(&diff_cli, "out of memory");
		return STP_EXIT_USAGE;
	}
	if ((err = stp_side_stat(d->a, "/", &na)))
		trouble(d, d->name_a, "/", err);
	else if ((err = stp_side_stat(d->b, "/", &nb)))
		trouble(d, d->name_b, "/", err);
	else
		diff_nodes(d, "/", &na, &nb);
	if (stat && !d->trouble && print_stat(d))
		d->trouble++;
	if (fflush(stdout) || ferror(stdout)) {
		stp_cli_error(&diff_cli, "writing to standard output: %s", stp_strerror(-errno));
		d->trouble++;
	}
	/* as diff(1): trouble, whatever differs, is 2 */
	return d->trouble ? 2 : d->differences ? 1 : 0;
}

int stp_cmd_diff(int argc, char **argv)
{
	enum { OPT_STAT = 0x200 };
	static const struct option longopts[] = {
		{ "brief", no_argument, NULL, 'q' }, { "stat", no_argument, NULL, OPT_STAT },
		STP_CLI_LONGOPTS, { 0 },
	};
	struct differ d = { 0 };
	int opt, status, stat = 0;

	stp_cli_init(&diff_cli, argv);
	while ((opt = getopt_long(argc, argv, "q" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 'q')
			d.brief = 1;
		else if (opt == OPT_STAT)
			stat = 1;
		else
			return stp_cli_other_option(&diff_cli, opt);
	}
	if ((status = stp_cli_operands(&diff_cli, argc, 2, 2)))
		return status;
	d.name_a = argv[optind];
	d.name_b = argv[optind + 1];
	if (stp_side_open(&diff_cli, d.name_a, &d.a))
		return 2;
	if (stp_side_open(&diff_cli, d.name_b, &d.b)) {
		stp_side_close(d.a);
		return 2;
	}
	status = diff_run(&d, stat);
	free(d.buf_a);
	free(d.buf_b);
	stp_side_close(d.a);
	stp_side_close(d.b);
	return status;
}
