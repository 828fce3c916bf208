/* SPDX-License-Identifier: MIT */
/* Scanning the source tree. */
#include "scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "bcj.h"
#include "elfcode.h"
#include "progress.h"
#include "report.h"
#include "report.h"
#include "source.h"
#include "tree.h"

static int cmp_xattr(const void *a, const void *b)
{
	return strcmp(((const struct xattr_kv *)a)->name, ((const struct xattr_kv *)b)->name);
}

/* Where extended attributes are read: a directory's own descriptor, or for the others
 * (which are not opened: symlinks, devices, FIFOs) the name beneath the parent's
 * descriptor, reached through /proc since the xattr calls have no *at form. */
struct xsrc {
	int fd;           /* >= 0: use it */
	const char *path; /* else this path, not following its last component */
};

static ssize_t x_list(const struct xsrc *x, char *buf, size_t len)
{
	return x->fd >= 0 ? flistxattr(x->fd, buf, len) : llistxattr(x->path, buf, len);
}

static ssize_t x_get(const struct xsrc *x, const char *name, void *buf, size_t len)
{
	return x->fd >= 0 ? fgetxattr(x->fd, name, buf, len) : lgetxattr(x->path, name, buf, len);
}

static int read_xattr_value(struct node *n, const struct xsrc *x, struct xattr_kv *kv)
{
	ssize_t len = x_get(x, kv->name, NULL, 0);

	for (int tries = 0; len >= 0 && tries < 4; tries++) {
		kv->value = malloc(len ? (size_t)len : 1);
		if (!kv->value)
			return -ENOMEM;
		ssize_t got = x_get(x, kv->name, kv->value, (size_t)len);
		if (got >= 0) {
			kv->len = (size_t)got;
			return 0;
		}
		free(kv->value);
		kv->value = NULL;
		if (errno != ERANGE)
			break;
		len = x_get(x, kv->name, NULL, 0); /* grew meanwhile */
	}
	return report_errno(tree_path(n), errno, "reading extended attribute");
}

static const struct scan_opts *scan_opts; /* set for the duration of scan_tree() */

static int read_xattrs(struct node *n, const struct xsrc *x)
{
	ssize_t len;
	char *names, *p;
	int rc = 0;

	if (scan_opts->no_xattrs)
		return 0;
	len = x_list(x, NULL, 0);
	if (len < 0)
		return errno == ENOTSUP ? 0 : report_errno(tree_path(n), errno, "listing extended attributes");
	if (len == 0)
		return 0;
	names = malloc((size_t)len);
	if (!names)
		return -ENOMEM;
	len = x_list(x, names, (size_t)len);
	if (len < 0) {
		rc = report_errno(tree_path(n), errno, "listing extended attributes");
		goto out;
	}
	for (p = names; p < names + len; p += strlen(p) + 1) {
		struct xattr_kv *kv, *grown = realloc(n->xattrs, (n->nxattrs + 1) * sizeof(*grown));

		if (!grown) {
			rc = -ENOMEM;
			goto out;
		}
		n->xattrs = grown;
		kv = &n->xattrs[n->nxattrs];
		kv->name = strdup(p);
		kv->value = NULL;
		if (!kv->name) {
			rc = -ENOMEM;
			goto out;
		}
		n->nxattrs++;
		rc = read_xattr_value(n, x, kv);
		if (rc)
			goto out;
	}
	qsort(n->xattrs, n->nxattrs, sizeof(*n->xattrs), cmp_xattr);
out:
	free(names);
	return rc;
}

/* The xattrs of N, which is NAME in DIRFD and not opened. Without /proc, the full path
 * is the only way left. */
static int read_xattrs_at(struct node *n, int dirfd)
{
	static int have_proc = -1;
	char path[64 + STP_NAME_MAX];
	struct xsrc x = { .fd = -1, .path = path };

	if (have_proc < 0)
		have_proc = access("/proc/self/fd", X_OK) == 0;
	if (have_proc)
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, n->name);
	else
		x.path = tree_path(n); /* the messages that name N build the same string */
	return read_xattrs(n, &x);
}

static int read_link(struct node *n, int dirfd)
{
	size_t cap = (size_t)n->st.st_size + 1;
	ssize_t len;

	if (cap < 64 || cap > STP_LINK_MAX + 1)
		cap = STP_LINK_MAX + 1;
	n->link_target = malloc(cap);
	if (!n->link_target)
		return -ENOMEM;
	len = readlinkat(dirfd, n->name, n->link_target, cap);
	if (len < 0 && errno == EINVAL)
		return report_changed(tree_path(n)); /* no longer a symlink */
	if (len < 0)
		return report_errno(tree_path(n), errno, "reading symlink");
	if ((size_t)len >= cap || len == 0)
		return report_errno(tree_path(n), ENAMETOOLONG, "reading symlink");
	n->link_target[len] = 0;
	return 0;
}



static int scan_node(struct node *n, int dirfd, int fd);

/* Files left out of the scan; set for the duration of scan_tree(). */
static const struct stat *skip_list;
static size_t skip_count;

#define SKIPPED 1 /* scan_node: the entry is one of skip_list */

static int skipped(const struct stat *st)
{
	for (size_t i = 0; i < skip_count; i++)
		if (st->st_dev == skip_list[i].st_dev && st->st_ino == skip_list[i].st_ino)
			return 1;
	return 0;
}


/* The source root's device, for scan_opts, and the tree being built; set by scan_tree. */
static dev_t root_dev;
static struct tree *scan_out;

/* 1 when entry DE of the directory N, open as FD, is left out: excluded, or not on the
 * way to nor below a path -T lists; -ENOMEM. Sets *LISTED when -T lists it. REL is a
 * buffer for its path, holding N's path from the root and a '/' up to REL_LEN. */
static int left_out(const struct node *n, const struct dirent *de, int fd, char *rel,
		    size_t rel_len, int *listed)
{
	int is_dir = de->d_type == DT_DIR, out;
	enum select_match m = SELECT_IN;
	struct stat st;

	*listed = 0;
	if (strlen(de->d_name) > STP_NAME_MAX)
		return 0; /* add_child refuses it */
	strcpy(rel + rel_len, de->d_name);
	if (de->d_type == DT_UNKNOWN && !fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
		is_dir = S_ISDIR(st.st_mode);
	if ((out = exclude_match(scan_opts->exclude, rel, is_dir)))
		return out;
	if (scan_opts->select && !n->selected)
		m = select_match(scan_opts->select, rel);
	*listed = m == SELECT_IN;
	return m == SELECT_OUT || (m == SELECT_ABOVE && !is_dir);
}

/* The regular files a little ahead of the scan are opened before it reaches them, and
 * the kernel is asked for their first page: on a cold tree each costs a disk read, and
 * asked for together they are served together. The scan then takes the descriptor and
 * does not look the name up again. A hint: a file that does not open here is opened by
 * the scan, which reports its failure. A subdirectory is scanned only once what was
 * opened ahead is closed, so at most 2 * AHEAD descriptors are held whatever the depth. */
#define AHEAD 64u
#define AHEAD_FAILED (-2) /* a regular file that did not open ahead: open it to say why */
#define AHEAD_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)

struct ahead {
	int fd[2 * AHEAD]; /* child I's at I % (2 * AHEAD), or -1 */
	size_t next;       /* the first child not opened ahead */
};

/* Opens the regular files among DIR's children from A->next up to UPTO. */
static void ahead_open(struct ahead *a, const struct node *dir, size_t upto, int dirfd)
{
	if (upto > dir->nchildren)
		upto = dir->nchildren;
	for (; a->next < upto; a->next++) {
		const struct node *c = dir->children[a->next];
		int fd = c->listed_type == DT_REG ? openat(dirfd, c->name, AHEAD_FLAGS) : -1;

		if (fd >= 0)
			posix_fadvise(fd, 0, 4096, POSIX_FADV_WILLNEED);
		else if (c->listed_type == DT_REG)
			fd = AHEAD_FAILED;
		a->fd[a->next % (2 * AHEAD)] = fd;
	}
}

/* Child I's descriptor, now the caller's, or -1, or AHEAD_FAILED. */
static int ahead_take(struct ahead *a, size_t i)
{
	int fd = i < a->next ? a->fd[i % (2 * AHEAD)] : -1;

	if (i < a->next)
		a->fd[i % (2 * AHEAD)] = -1;
	return fd;
}

/* Closes what was opened from child FROM on, to be opened again when reached. */
static void ahead_drop(struct ahead *a, size_t from)
{
	for (size_t i = from; i < a->next; i++) {
		int fd = ahead_take(a, i);

		if (fd >= 0)
			close(fd);
	}
	if (a->next > from)
		a->next = from;
}

/* Entries left out because they could not be read (reported each), in this scan; the
 * entries and bytes seen, for the progress. */
static size_t dropped;
static uint64_t seen, seen_bytes;

/* Scans the children of N, open as FD, in order, leaving out those scan_node skips and
 * those that could not be read: every problem is reported in one pass, and only running
 * out of memory stops the scan. */
static int scan_children(struct node *n, int fd)
{
	struct ahead a = { .next = 0 };
	size_t count = n->nchildren, kept = 0, i;
	int rc = 0;

	for (i = 0; i < count && !rc; i++) {
		struct node *c = n->children[i];

		if (a.next < i + AHEAD)
			ahead_open(&a, n, i + 2 * AHEAD, fd);
		if (c->listed_type == DT_DIR || c->listed_type == DT_UNKNOWN)
			ahead_drop(&a, i + 1);
		rc = scan_node(c, fd, ahead_take(&a, i));
		if (rc < 0 && rc != -ENOMEM) {
			dropped++;
			rc = SKIPPED;
		}
		if (rc == SKIPPED) {
			tree_node_free(c);
			rc = 0;
			continue;
		}
		n->children[kept++] = c;
	}
	ahead_drop(&a, 0);
	/* on failure the ones not reached stay, for tree_free */
	memmove(&n->children[kept], &n->children[i], (count - i) * sizeof(*n->children));
	n->nchildren = (uint32_t)(kept + count - i);
	return rc;
}

/* Lists directory N, open as FD, and scans its children beneath FD. */
static int scan_dir(struct node *n, int fd)
{
	int lfd = dup(fd);
	DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
	struct dirent *de;
	size_t cap = 0, rel_len = 0;
	char *rel = NULL;
	int rc = 0, listed = 0;

	if (!d) {
		rc = report_errno(tree_path(n), errno, "opening directory");
		if (lfd >= 0)
			close(lfd);
		return rc;
	}
	if ((scan_opts->exclude && scan_opts->exclude->count) || scan_opts->select) {
		rel_len = tree_rel_path(n, NULL, 0);
		rel = malloc(rel_len + STP_NAME_MAX + 2);
		if (!rel) {
			closedir(d);
			return -ENOMEM;
		}
		tree_rel_path(n, rel, rel_len + 1);
		if (rel_len)
			rel[rel_len++] = '/';
	}
	for (errno = 0; (de = readdir(d)); errno = 0) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rel && (rc = left_out(n, de, fd, rel, rel_len, &listed))) {
			if (rc < 0)
				break;
			rc = 0;
			continue;
		}
		rc = tree_add_child(scan_out, n, de->d_name, &cap);
		if (rc)
			break;
		n->children[n->nchildren - 1]->listed_type = de->d_type & 15;
		n->children[n->nchildren - 1]->selected = listed || n->selected;
	}
	free(rel);
	if (!rc && errno)
		rc = report_errno(tree_path(n), errno, "reading directory");
	closedir(d);
	if (rc)
		return rc;
	tree_sort_children(n);
	return scan_children(n, fd);
}

/* Machine code is told by its ELF header, and found by its section table; the packer
 * filters the blocks that hold it. A table that cannot be used makes the whole file
 * code; a table without code in the file (a debug file) makes it none. */
int scan_read_filter(struct node *n, int fd, uint64_t base)
{
	uint8_t head[ELF_HEAD_SIZE];
	ssize_t len = pread(fd, head, sizeof(head), (off_t)base);
	int rc = 0;

	if (len < 0)
		return report_errno(tree_path(n), errno, "reading");
	n->filter = (uint8_t)stp_bcj_elf_filter(head, (size_t)len);
	if (n->filter != STP_FILTER_NONE) {
		if (!n->code && !(n->code = malloc(sizeof(*n->code))))
			return -ENOMEM;
		n->code->start = 0;
		n->code->end = (uint64_t)n->st.st_size;
		if (len == sizeof(head))
			rc = elf_code_span(fd, base, head, (uint64_t)n->st.st_size, &n->code->start,
					   &n->code->end);
		if (rc > 0 && n->code->start == n->code->end)
			n->filter = STP_FILTER_NONE; /* no code in the file: a debug file, say */
	}
	if (n->filter == STP_FILTER_NONE) {
		free(n->code);
		n->code = NULL;
	}
	return rc < 0 ? report_errno(tree_path(n), -rc, "reading its section table") : 0;
}

/* A regular file opened as X->fd: its xattrs are read through the descriptor, which
 * costs less than a path, and its ELF header when it is long enough to hold one. */
static int read_file(struct node *n, struct xsrc *x)
{
	int rc = read_xattrs(n, x);

	if (!rc && n->st.st_size >= ELF_HEAD_SIZE)
		rc = scan_read_filter(n, x->fd, 0);
	close(x->fd);
	return rc;
}

/* A directory is opened beneath its parent, checked to be the one just looked at, and
 * scanned through its own descriptor, held while its children are. */
static int scan_subdir(struct node *n, int dirfd)
{
	struct xsrc x = { .fd = openat(dirfd, n->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				       O_NOCTTY | O_CLOEXEC) };
	struct stat st;
	int rc;

	if (x.fd < 0 && (errno == ENOTDIR || errno == ELOOP))
		return report_changed(tree_path(n));
	if (x.fd < 0)
		return report_errno(tree_path(n), errno, "opening directory");
	if (fstat(x.fd, &st))
		rc = report_errno(tree_path(n), errno, "stat");
	else if (st.st_dev != n->st.st_dev || st.st_ino != n->st.st_ino)
		rc = report_changed(tree_path(n));
	else
		rc = read_xattrs(n, &x);
	/* a mount point is kept, empty */
	if (!rc && !(scan_opts->one_file_system && st.st_dev != root_dev))
		rc = scan_dir(n, x.fd);
	close(x.fd);
	return rc;
}

/* Regular file N, which is N->name in DIRFD, opened ahead as FD or -1 (closed here).
 * A file too short for an ELF header is not opened for the scan alone, unless it failed
 * to open ahead (AHEAD_FAILED): then the open here reports why. */
static int scan_file(struct node *n, int dirfd, int fd)
{
	struct xsrc x = { .fd = fd >= 0 ? fd : -1 };

	if (fd >= 0 && fcntl(fd, F_SETFL, 0)) { /* reads block, as for any file */
		close(fd);
		return report_errno(tree_path(n), errno, "opening");
	}
	if (fd == -1 && n->st.st_size < ELF_HEAD_SIZE)
		return read_xattrs_at(n, dirfd);
	if (fd < 0) {
		struct stat now;

		x.fd = source_openat_file(dirfd, n, &now);
		if (x.fd < 0)
			return x.fd;
		tree_set_stat(n, &now); /* the latest look: a live file may have grown */
	}
	return read_file(n, &x);
}

/* Scans N, which is N->name in DIRFD; FD is N opened ahead (AHEAD_FLAGS), which it
 * closes, or -1. */
static int scan_node(struct node *n, int dirfd, int fd)
{
	struct stat st;
	int rc;

	/* what the readers could not reach; it also bounds the recursion below */
	if (tree_rel_path(n, NULL, 0) > TREE_PATH_MAX) {
		char what[96];

		if (fd >= 0)
			close(fd);
		snprintf(what, sizeof(what), "refused: the readers take paths of at most %u "
			 "bytes (%u names)", TREE_PATH_MAX, TREE_DEPTH_MAX);
		return report_errno(tree_path(n), ENAMETOOLONG, what);
	}
	if (fd >= 0 ? fstat(fd, &st) : fstatat(dirfd, n->name, &st, AT_SYMLINK_NOFOLLOW))
		rc = report_errno(tree_path(n), errno, "stat");
	else
		rc = skipped(&st) ? SKIPPED : 0;
	if (!rc) {
		tree_set_stat(n, &st);
		seen_bytes += S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
		progress_set(seen_bytes, ++seen);
	}
	if (!rc && S_ISREG(st.st_mode))
		return scan_file(n, dirfd, fd);
	if (fd >= 0)
		close(fd); /* no longer what was listed */
	if (rc)
		return rc;
	if (S_ISDIR(n->st.st_mode))
		return scan_subdir(n, dirfd);
	rc = read_xattrs_at(n, dirfd);
	if (rc)
		return rc;
	if (S_ISLNK(n->st.st_mode))
		return read_link(n, dirfd);
	return 0;
}

static int scan_root(struct node *root)
{
	struct stat st;
	struct xsrc x = { .fd = source_open_root(root->name, &st) };
	int rc;

	if (x.fd < 0)
		return x.fd;
	tree_set_stat(root, &st);
	root_dev = root->st.st_dev;
	root->selected = scan_opts->select && select_match(scan_opts->select, "") == SELECT_IN;
	rc = read_xattrs(root, &x);
	return rc ? rc : scan_dir(root, x.fd);
}





int scan_tree(const char *source, const struct stat *skip, size_t nskip,
	      const struct scan_opts *opts, struct tree *t)
{
	static const struct scan_opts none;
	int rc;

	memset(t, 0, sizeof(*t));
	t->root = tree_root_new(t, source);
	if (!t->root)
		return -ENOMEM;
	scan_out = t;
	skip_list = skip;
	skip_count = nskip;
	scan_opts = opts ? opts : &none;
	dropped = seen = seen_bytes = 0;
	progress_phase("scan", 0);
	report_errors_as_warnings(scan_opts->ignore_failed_read);
	rc = scan_root(t->root);
	if (!rc && scan_opts->select)
		dropped += select_report_missing(scan_opts->select);
	report_errors_as_warnings(0);
	skip_list = NULL;
	skip_count = 0;
	scan_opts = NULL;
	scan_out = NULL;
	return rc ? rc : tree_finish(t);
}

size_t scan_tree_dropped(void)
{
	return dropped;
}
