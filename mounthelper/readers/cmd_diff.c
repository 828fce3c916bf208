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

/* The two entries at PATH, which both sides have: 1 when both are directories, whose
 * entries are to be compared next. */
static int diff_nodes(struct differ *d, const char *path, const struct stp_side_node *na,
		      const struct stp_side_node *nb)
{
	if ((na->mode & S_IFMT) != (nb->mode & S_IFMT)) {
		say(d, 'M', path, "type %s -> %s", stp_json_type(na->mode), stp_json_type(nb->mode));
		return 0;
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
	return S_ISDIR(na->mode);
}

/* Entry PATH of one side (WHICH < 0: A only; > 0: B only) or both (0): 1 when both are
 * directories, their nodes in *NA and *NB. */
static int diff_child(struct differ *d, const char *path, int which, struct stp_side_node *na,
		      struct stp_side_node *nb)
{
	int err;

	if (which < 0 || which > 0) {
		struct stp_side *s = which < 0 ? d->a : d->b;

		if ((err = stp_side_stat(s, path, na)))
			trouble(d, which < 0 ? d->name_a : d->name_b, path, err);
		else
			say(d, which < 0 ? '-' : '+', path, S_ISDIR(na->mode) ? "directory" : NULL);
		return 0;
	}
	if ((err = stp_side_stat(d->a, path, na)))
		trouble(d, d->name_a, path, err);
	else if ((err = stp_side_stat(d->b, path, nb)))
		trouble(d, d->name_b, path, err);
	else
		return diff_nodes(d, path, na, nb);
	return 0;
}

/* A pair of directories being compared: their names in byte order, the next of each to
 * look at, and the length of their path in the walk's one path buffer. */
struct diff_frame {
	char **a, **b;
	size_t ca, cb, i, j, len;
};

struct diff_stack {
	struct diff_frame *frame;
	size_t n, cap;
};

/* Whether directory PATH of SIDE (named NAME) is met for the first time: a directory
 * reached twice (a hostile image's loop) is reported and skipped, as the cli walk does. */
static int first_visit(struct differ *d, struct stp_side *side, const char *name,
		       const char *path, const struct stp_side_node *node)
{
	int first = stp_side_first_visit(side, node);

	if (first < 0)
		trouble(d, name, path, first);
	else if (!first)
		stp_cli_problem(&diff_cli, name, path, "directory reached twice: skipped");
	d->trouble += !first;
	return first > 0;
}

/* Lists directories PATH of both sides onto the stack, to be compared entry by entry. */
static int enter_dirs(struct differ *d, struct diff_stack *k, const char *path,
		      const struct stp_side_node *na, const struct stp_side_node *nb)
{
	struct diff_frame f = { .len = strlen(path) };
	int err;

	if (!first_visit(d, d->a, d->name_a, path, na) ||
	    !first_visit(d, d->b, d->name_b, path, nb))
		return 0;
	if ((err = stp_side_list(d->a, path, na, &f.a, &f.ca))) {
		trouble(d, d->name_a, path, err);
		return 0;
	}
	if ((err = stp_side_list(d->b, path, nb, &f.b, &f.cb))) {
		trouble(d, d->name_b, path, err);
		stp_side_free_names(f.a, f.ca);
		return 0;
	}
	if (k->n == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 64;
		struct diff_frame *p = realloc(k->frame, cap * sizeof(*p));

		if (!p) {
			stp_side_free_names(f.a, f.ca);
			stp_side_free_names(f.b, f.cb);
			return -ENOMEM;
		}
		k->frame = p;
		k->cap = cap;
	}
	k->frame[k->n++] = f;
	return 0;
}

/* "/a" + "b" = "/a/b", in BUF after its first LEN bytes; -ENAMETOOLONG. */
static int child_path(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf + len, STP_WALK_PATH_MAX - len, "%s%s", len > 1 ? "/" : "", name);

	if (n < 0 || (size_t)n >= STP_WALK_PATH_MAX - len) {
		buf[len] = '\0';
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Both trees from their roots, in path order: each pair of directories' entries merged
 * by name, a pair of subdirectories compared before the next entry. Depth-first with a
 * stack on the heap and the path in one buffer: a tree thousands of directories deep
 * needs no deep C stack. */
static int diff_tree(struct differ *d, const struct stp_side_node *ra,
		     const struct stp_side_node *rb)
{
	struct diff_stack k = { 0 };
	char *buf = malloc(STP_WALK_PATH_MAX);
	int err = buf ? 0 : -ENOMEM;

	if (!err && diff_nodes(d, "/", ra, rb))
		err = enter_dirs(d, &k, strcpy(buf, "/"), ra, rb);
	while (!err && k.n) {
		struct diff_frame *f = &k.frame[k.n - 1];
		struct stp_side_node na, nb;
		const char *name;
		int c;

		buf[f->len] = '\0';
		if (f->i == f->ca && f->j == f->cb) {
			stp_side_free_names(f->a, f->ca);
			stp_side_free_names(f->b, f->cb);
			k.n--;
			continue;
		}
		c = f->i == f->ca ? 1 : f->j == f->cb ? -1 : strcmp(f->a[f->i], f->b[f->j]);
		name = c <= 0 ? f->a[f->i] : f->b[f->j];
		f->i += c <= 0; /* before enter_dirs, which may move the frames */
		f->j += c >= 0;
		if (child_path(buf, f->len, name))
			trouble(d, NULL, buf, -ENAMETOOLONG);
		else if (diff_child(d, buf, c, &na, &nb))
			err = enter_dirs(d, &k, buf, &na, &nb);
	}
	while (k.n--) {
		stp_side_free_names(k.frame[k.n].a, k.frame[k.n].ca);
		stp_side_free_names(k.frame[k.n].b, k.frame[k.n].cb);
	}
	free(k.frame);
	free(buf);
	return err;
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
	else if ((err = diff_tree(d, &na, &nb)))
		trouble(d, NULL, "/", err);
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
