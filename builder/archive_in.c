/* SPDX-License-Identifier: MIT */
/* Reading an archive into the tree, through libarchive. */
#include "archive_in.h"
#include "archive_open.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <locale.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cpiolinks.h"
#include "exclude.h"
#include "format.h"
#include "report.h"
#include "source.h"
#include "tree.h"
#include "util.h"

#define XATTR_NAME_MAX_LEN 255u
#define XATTR_VALUE_MAX_LEN 65536u
/* Linux's XATTR_LIST_MAX: a file's attribute names, each with its NUL, fit in 64 KiB, or
 * listxattr(2) could not return them. It bounds an entry's attributes to 32,768. */
#define XATTR_NAMES_MAX 65536u

/* Where an inode's bytes are; hard links share one, so data carried by a later link (as
 * cpio stores it) reaches every name. Indexed by the nodes' st_ino. A hard link copies
 * no attribute: the inode's extended attributes and symlink target stay with OWNER, the
 * node whose entry made the inode, or in the record when that node took another entry,
 * and go to the inode's primary node once the tree is finished (keep_attrs). */
struct data_rec {
	uint64_t off, size;
	int in_spool;
	struct node *owner;
	struct xattr_kv *xattrs; /* kept when OWNER took another entry */
	uint32_t nxattrs;
	char *link_target;
	const struct node *filtered; /* the name its filter was read for (finish_files) */
};

struct reader {
	const char *name;      /* the archive as messages name it */
	struct archive *a;
	int fd, seekable;
	const char *spool_dir;
	int spool_fd;
	uint64_t spool_end;    /* bytes the spool holds */
	int used_in_place;
	int64_t epoch;
	const struct scan_opts *opts; /* never NULL */
	struct tree *t;
	struct tree_index ix;  /* every node by (parent, name) */
	struct data_rec *recs; /* by st_ino */
	size_t nrecs, caprecs;
	struct archive_input in; /* what A reads through */
	bool utf8_names;       /* read under C.UTF-8: a zip (read_archive) */
	char *entry;           /* the current entry's path as the archive gives it */
	uint64_t meta;         /* metadata bytes of the entries applied (see count_meta) */
};

/* An entry's path as messages give it: its two ends when longer than this, so that a
 * crafted path of 20,000 names does not flood the terminal. */
#define ENTRY_SHOWN 240

/* WHAT, about the current entry (LEAD "") or the one after it (LEAD "after "). */
static int fail_at(const struct reader *r, const char *lead, const char *what, int err)
{
	size_t len = r->entry ? strlen(r->entry) : 0;

	if (len > ENTRY_SHOWN)
		report_error(r->name, "%s%.*s...%s: %s", lead, ENTRY_SHOWN / 2, r->entry,
			   r->entry + len - ENTRY_SHOWN / 2, what);
	else if (r->entry)
		report_error(r->name, "%s%s: %s", lead, r->entry, what);
	else
		report_error(r->name, "%s", what);
	return -err;
}

static int fail(const struct reader *r, const char *what, int err)
{
	return fail_at(r, "", what, err);
}

static int fail_archive(const struct reader *r)
{
	const char *msg = archive_error_string(r->a);
	int err = archive_errno(r->a);

	return fail(r, msg ? msg : "unreadable archive", err > 0 ? err : EINVAL);
}

/* The header after the current entry could not be read: that entry was read whole (or
 * its bytes skipped, read_data). */
static int fail_next_header(const struct reader *r)
{
	const char *msg = archive_error_string(r->a);
	int err = archive_errno(r->a);

	return fail_at(r, "after ", msg ? msg : "an unreadable header", err > 0 ? err : EINVAL);
}

static int not_an_archive(const struct reader *r)
{
	const char *msg = archive_error_string(r->a);

	report_error(r->name, "not an archive mkstipple reads (tar, cpio or zip; plain or "
		     "compressed with gzip, bzip2, xz or zstd)%s%s", msg ? ": " : "", msg ? msg : "");
	return -EINVAL;
}

/* --- nodes by path --- */

/* The node at relative PATH (normalized: names joined by single '/'), or NULL: one
 * (parent, name) look-up per name, so O(the path's length). */
static struct node *lookup(const struct reader *r, const char *path)
{
	struct node *n = r->t->root;

	while (n && *path) {
		size_t len = strcspn(path, "/");

		n = tree_index_find(&r->ix, n, path, len);
		path += len + (path[len] == '/');
	}
	return n;
}

/* A new inode identity for N: an st_ino of its own and a record for its bytes. */
static int new_inode(struct reader *r, struct node *n)
{
	if (r->nrecs == r->caprecs) {
		size_t cap = r->caprecs ? r->caprecs * 2 : 1024;
		struct data_rec *grown = realloc(r->recs, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		r->recs = grown;
		r->caprecs = cap;
	}
	r->recs[r->nrecs] = (struct data_rec){ .owner = n };
	n->st.st_dev = 0;
	n->st.st_ino = (ino_t)r->nrecs++;
	n->st.st_nlink = 1;
	return 0;
}

static void implicit_dir(const struct reader *r, struct node *n)
{
	n->st.st_mode = S_IFDIR | 0755;
	n->st.st_uid = n->st.st_gid = 0;
	n->st.st_mtim.tv_sec = (time_t)r->epoch;
	n->st.st_mtim.tv_nsec = 0;
}

/* tree_add_child's array capacity for N children: 16, then doubled when full. */
static size_t child_cap(size_t n)
{
	size_t cap = 16;

	if (!n)
		return 0;
	while (cap < n)
		cap *= 2;
	return cap;
}

static int add_node(struct reader *r, struct node *dir, const char *name, struct node **out)
{
	size_t cap = child_cap(dir->nchildren);
	int rc = tree_add_child(r->t, dir, name, &cap);
	struct node *n;

	if (rc)
		return rc;
	n = dir->children[dir->nchildren - 1];
	rc = tree_index_add(&r->ix, n);
	if (!rc)
		rc = new_inode(r, n);
	*out = n;
	return rc;
}

static int charge_meta(struct reader *r, uint64_t bytes);

/* The node for relative path PATH's parent, making the directories not yet there; each
 * is charged as an entry (count_meta): 2,000 of them come with one path. */
static int parent_of(struct reader *r, char *path, struct node **out)
{
	struct node *dir = r->t->root;
	char *p = path, *slash;
	int rc = 0;

	while (!rc && (slash = strchr(p, '/'))) {
		struct node *n = tree_index_find(&r->ix, dir, p, (size_t)(slash - p));

		*slash = 0;
		if (!n && !(rc = add_node(r, dir, p, &n))) {
			implicit_dir(r, n);
			rc = charge_meta(r, STP_DIRENT_SIZE + n->name_len + STP_INODE_SIZE);
		}
		if (!rc && !S_ISDIR(n->st.st_mode)) {
			char what[64 + PATH_MAX];

			snprintf(what, sizeof(what), "refused: %s is not a directory", path);
			rc = fail(r, what, ENOTDIR);
		}
		*slash = '/';
		dir = n;
		p = slash + 1;
	}
	*out = dir;
	return rc;
}

/* The readers walk paths below TREE_PATH_MAX bytes: an entry deeper or longer would be
 * in the image but out of their reach. PATH is normalized. */
static int within_reach(struct reader *r, const char *path)
{
	size_t len = strlen(path), depth = *path != 0;
	char what[160];

	if (len <= TREE_PATH_MAX)
		return 0;
	for (const char *p = path; (p = strchr(p, '/')); p++)
		depth++;
	snprintf(what, sizeof(what), "refused: the path is %zu bytes long, %zu names deep; the "
		 "readers take paths of at most %u bytes (%u names)", len, depth, TREE_PATH_MAX,
		 TREE_DEPTH_MAX);
	return fail(r, what, ENAMETOOLONG);
}

/* Rewrites RAW in place as a path from the root: no leading "/", no "." or empty
 * components; "" is the root. -EINVAL (printed) for a ".." component. */
static int normalize(struct reader *r, char *raw)
{
	char *in = raw, *out = raw;

	while (*in) {
		size_t len = strcspn(in, "/");

		if (len == 2 && in[0] == '.' && in[1] == '.')
			return fail(r, "refused: the path has a \"..\" component", EINVAL);
		if (len && !(len == 1 && in[0] == '.')) {
			if (out != raw)
				*out++ = '/';
			memmove(out, in, len);
			out += len;
		}
		in += len;
		while (*in == '/')
			in++;
	}
	*out = 0;
	return 0;
}

static char *entry_string(const char *mbs, const char *utf8)
{
	const char *s = mbs ? mbs : utf8;

	return s ? strdup(s) : NULL;
}

/* --- what an entry records --- */

static void free_xattrs(struct xattr_kv *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
}

static void drop_xattrs(struct node *n)
{
	free_xattrs(n->xattrs, n->nxattrs);
	n->xattrs = NULL;
	n->nxattrs = 0;
}

/* Swaps the attributes of record D and node N: one of them has none, and gets the
 * other's. */
static void move_attrs(struct data_rec *d, struct node *n)
{
	struct xattr_kv *x = d->xattrs;
	uint32_t nx = d->nxattrs;
	char *target = d->link_target;

	d->xattrs = n->xattrs;
	d->nxattrs = n->nxattrs;
	d->link_target = n->link_target;
	n->xattrs = x;
	n->nxattrs = nx;
	n->link_target = target;
}

/* N is about to take a new entry: its inode's attributes stay in the inode's record
 * while other names share it, else they go. */
static void free_inode(struct reader *r, struct node *n)
{
	struct data_rec *d = &r->recs[n->st.st_ino];

	if (d->owner == n && n->st.st_nlink > 1)
		move_attrs(d, n);
	if (d->owner == n)
		d->owner = NULL;
	drop_xattrs(n);
	free(n->link_target);
	n->link_target = NULL;
}

/* Appends an attribute; sort_xattrs then keeps the last value of each name. */
static int add_xattr(struct node *n, const char *name, const void *value, size_t len)
{
	struct xattr_kv *kv, *grown;

	if (!(n->nxattrs & (n->nxattrs - 1))) {
		grown = reallocarray(n->xattrs, n->nxattrs ? 2 * (size_t)n->nxattrs : 1,
				     sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		n->xattrs = grown;
	}
	kv = &n->xattrs[n->nxattrs];
	kv->name = strdup(name);
	kv->value = malloc(len ? len : 1);
	kv->len = len;
	if (!kv->name || !kv->value) {
		free(kv->name);
		free(kv->value);
		return -ENOMEM;
	}
	memcpy(kv->value, value, len);
	n->nxattrs++;
	return 0;
}

static int has_xattr(const struct node *n, const char *name)
{
	for (size_t i = 0; i < n->nxattrs; i++)
		if (!strcmp(n->xattrs[i].name, name))
			return 1;
	return 0;
}

/* The kernel's POSIX ACL xattr value (include/uapi/linux/posix_acl_xattr.h): a
 * little-endian u32 version 2, then per entry u16 tag, u16 perm, u32 id, in the
 * order the kernel checks: by tag, then by id. */
#define ACL_XATTR_VERSION 2u
#define ACL_ENTRY_SIZE 8u
#define ACL_UNDEFINED_ID 0xffffffffu
/* As many entries as a value of XATTR_VALUE_MAX_LEN holds after the version. */
#define ACL_ENTRIES_MAX ((XATTR_VALUE_MAX_LEN - 4) / ACL_ENTRY_SIZE)

struct acl_ent {
	uint16_t tag, perm;
	uint32_t id;
};

static int cmp_acl(const void *a, const void *b)
{
	const struct acl_ent *x = a, *y = b;

	if (x->tag != y->tag)
		return x->tag < y->tag ? -1 : 1;
	return (x->id > y->id) - (x->id < y->id);
}

static uint16_t kernel_acl_tag(int tag)
{
	switch (tag) {
	case ARCHIVE_ENTRY_ACL_USER_OBJ: return 0x01;
	case ARCHIVE_ENTRY_ACL_USER: return 0x02;
	case ARCHIVE_ENTRY_ACL_GROUP_OBJ: return 0x04;
	case ARCHIVE_ENTRY_ACL_GROUP: return 0x08;
	case ARCHIVE_ENTRY_ACL_MASK: return 0x10;
	case ARCHIVE_ENTRY_ACL_OTHER: return 0x20;
	default: return 0;
	}
}

static void put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A named ACL entry's id: the one the archive gives, else the name's on this machine, as
 * tar resolves it when extracting. */
static int acl_id(struct reader *r, int user, int qual, const char *name, uint32_t *id)
{
	char what[128];

	if (qual >= 0) {
		*id = (uint32_t)qual;
		return 0;
	}
	if (name && user) {
		const struct passwd *pw = getpwnam(name);

		if (pw) {
			*id = (uint32_t)pw->pw_uid;
			return 0;
		}
	}
	if (name && !user) {
		const struct group *gr = getgrnam(name);

		if (gr) {
			*id = (uint32_t)gr->gr_gid;
			return 0;
		}
	}
	snprintf(what, sizeof(what), "its ACL names %s %.64s, unknown here", user ? "user" : "group",
		 name ? name : "(none)");
	return fail(r, what, EINVAL);
}

static int acl_xattr(struct reader *r, struct archive_entry *e, struct node *n, int type,
		     const char *name)
{
	int count = archive_entry_acl_reset(e, type), etype, perm, tag, qual, rc;
	struct acl_ent *v;
	const char *ename;
	uint8_t *buf;
	size_t k = 0;

	if (count <= 0 || has_xattr(n, name))
		return 0;
	if ((unsigned)count > ACL_ENTRIES_MAX)
		return fail(r, "refused: its ACL has more than 8,191 entries, more than an extended "
			    "attribute's 64 KiB holds", E2BIG);
	v = calloc((size_t)count, sizeof(*v));
	buf = malloc(4 + (size_t)count * ACL_ENTRY_SIZE);
	if (!v || !buf) {
		free(v);
		free(buf);
		return -ENOMEM;
	}
	while (k < (size_t)count &&
	       archive_entry_acl_next(e, type, &etype, &perm, &tag, &qual, &ename) == ARCHIVE_OK) {
		uint16_t ktag = kernel_acl_tag(tag);

		if (!ktag)
			continue;
		v[k].tag = ktag;
		v[k].perm = (uint16_t)(perm & 7);
		v[k].id = ACL_UNDEFINED_ID;
		if (ktag == 0x02 || ktag == 0x08) {
			rc = acl_id(r, ktag == 0x02, qual, ename, &v[k].id);
			if (rc) {
				free(v);
				free(buf);
				return rc;
			}
		}
		k++;
	}
	qsort(v, k, sizeof(*v), cmp_acl);
	for (size_t i = 1; i < k; i++)
		if (!cmp_acl(&v[i - 1], &v[i])) {
			free(v);
			free(buf);
			return fail(r, "refused: its ACL gives one user or group twice, which Linux "
				    "refuses", EINVAL);
		}
	put_le(buf, ACL_XATTR_VERSION, 4);
	for (size_t i = 0; i < k; i++) {
		put_le(buf + 4 + i * ACL_ENTRY_SIZE, v[i].tag, 2);
		put_le(buf + 6 + i * ACL_ENTRY_SIZE, v[i].perm, 2);
		put_le(buf + 8 + i * ACL_ENTRY_SIZE, v[i].id, 4);
	}
	rc = add_xattr(n, name, buf, 4 + k * ACL_ENTRY_SIZE);
	free(v);
	free(buf);
	return rc;
}

/* With an access ACL that has a mask, the kernel's mode holds the mask in the group bits,
 * where libarchive, reading the ACL, put the owning group's: as the file had it. */
static void mask_into_mode(struct node *n)
{
	for (size_t i = 0; i < n->nxattrs; i++) {
		const uint8_t *p = n->xattrs[i].value;
		size_t len = n->xattrs[i].len;

		if (strcmp(n->xattrs[i].name, "system.posix_acl_access") || len < 4 ||
		    (len - 4) % ACL_ENTRY_SIZE || p[0] != ACL_XATTR_VERSION || p[1] || p[2] || p[3])
			continue;
		for (size_t at = 4; at < len; at += ACL_ENTRY_SIZE)
			if (p[at] == 0x10 && !p[at + 1])
				n->st.st_mode = (n->st.st_mode & ~(mode_t)070) | (mode_t)((p[at + 2] & 7) << 3);
	}
}

/* By name, then by the order they came in. */
struct xattr_at {
	struct xattr_kv kv;
	size_t at;
};

static int cmp_xattr_at(const void *a, const void *b)
{
	const struct xattr_at *x = a, *y = b;
	int c = strcmp(x->kv.name, y->kv.name);

	return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Sorts N's attributes by name, as the image stores them, keeping the last value the
 * archive gave each name: O(n log n) for an entry with many. */
static int sort_xattrs(struct node *n)
{
	struct xattr_at *v;
	size_t k = 0;

	if (n->nxattrs < 2)
		return 0;
	v = malloc(n->nxattrs * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n->nxattrs; i++)
		v[i] = (struct xattr_at){ n->xattrs[i], i };
	qsort(v, n->nxattrs, sizeof(*v), cmp_xattr_at);
	for (size_t i = 0; i < n->nxattrs; i++) {
		if (i + 1 < n->nxattrs && !strcmp(v[i].kv.name, v[i + 1].kv.name)) {
			free(v[i].kv.name); /* a later value wins */
			free(v[i].kv.value);
			continue;
		}
		n->xattrs[k++] = v[i].kv;
	}
	n->nxattrs = (uint32_t)k;
	free(v);
	return 0;
}

static int too_many_names(const struct reader *r)
{
	return fail(r, "refused: its extended attributes' names take more than 64 KiB, more "
		    "than Linux lists for a file", E2BIG);
}

static int read_xattrs(struct reader *r, struct archive_entry *e, struct node *n)
{
	const char *name;
	const void *value;
	size_t len, names = 0;
	int rc = 0;

	archive_entry_xattr_reset(e);
	while (!rc && archive_entry_xattr_next(e, &name, &value, &len) == ARCHIVE_OK) {
		if (!name || !*name || strlen(name) > XATTR_NAME_MAX_LEN || len > XATTR_VALUE_MAX_LEN)
			return fail(r, "an extended attribute's name or value is too long", EINVAL);
		names += strlen(name) + 1;
		if (names > XATTR_NAMES_MAX)
			return too_many_names(r);
		rc = add_xattr(n, name, value, len);
	}
	if (!rc)
		rc = sort_xattrs(n); /* before the ACLs, which look their names up */
	if (!rc)
		rc = acl_xattr(r, e, n, ARCHIVE_ENTRY_ACL_TYPE_ACCESS, "system.posix_acl_access");
	if (!rc)
		rc = acl_xattr(r, e, n, ARCHIVE_ENTRY_ACL_TYPE_DEFAULT, "system.posix_acl_default");
	mask_into_mode(n);
	if (!rc)
		rc = sort_xattrs(n);
	names = 0; /* again, with the ACLs' names: what the image will hold */
	for (size_t i = 0; !rc && i < n->nxattrs; i++)
		names += strlen(n->xattrs[i].name) + 1;
	return !rc && names > XATTR_NAMES_MAX ? too_many_names(r) : rc;
}

/* Before 3.8, libarchive read a pax time before 1970 with a fraction, "-S.F", as -S + F
 * instead of -(S + F) (libarchive#2562). */
static void mtime_of(const struct reader *r, struct archive_entry *e, struct timespec *ts)
{
	int fmt = archive_format(r->a);

	ts->tv_sec = (time_t)archive_entry_mtime(e);
	ts->tv_nsec = archive_entry_mtime_nsec(e);
	if (ts->tv_sec < 0 && ts->tv_nsec > 0 && archive_version_number() < 3008000 &&
	    (fmt == ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE || fmt == ARCHIVE_FORMAT_TAR_PAX_RESTRICTED)) {
		ts->tv_sec -= 1;
		ts->tv_nsec = 1000000000L - ts->tv_nsec;
	}
}

static int set_attrs(struct reader *r, struct archive_entry *e, struct node *n)
{
	int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
	int rc;

	if (uid < 0 || uid > UINT32_MAX - 1 || gid < 0 || gid > UINT32_MAX - 1)
		return fail(r, "the owner is out of range", ERANGE);
	n->st.st_mode = archive_entry_mode(e) & (S_IFMT | 07777);
	n->st.st_uid = (uid_t)uid;
	n->st.st_gid = (gid_t)gid;
	n->st.st_mtim.tv_sec = (time_t)r->epoch;
	n->st.st_mtim.tv_nsec = 0;
	if (archive_entry_mtime_is_set(e))
		mtime_of(r, e, &n->st.st_mtim);
	n->st.st_size = 0;
	n->st.st_rdev = 0;
	if (S_ISCHR(n->st.st_mode) || S_ISBLK(n->st.st_mode))
		n->st.st_rdev = makedev(archive_entry_rdevmajor(e), archive_entry_rdevminor(e));
	if (S_ISLNK(n->st.st_mode)) {
		n->link_target = entry_string(archive_entry_symlink(e), archive_entry_symlink_utf8(e));
		if (!n->link_target || !*n->link_target)
			return fail(r, "a symbolic link without a target", EINVAL);
		if (strlen(n->link_target) > STP_LINK_MAX)
			return fail(r, "the symbolic link's target is too long", ENAMETOOLONG);
		n->st.st_size = (off_t)strlen(n->link_target);
	}
	rc = read_xattrs(r, e, n); /* read even so: an ACL's mask is the mode's group bits */
	if (!rc && r->opts->no_xattrs)
		drop_xattrs(n);
	return rc;
}

/* --- file bytes --- */

static int open_spool(struct reader *r)
{
	char *tmpl;

	r->spool_fd = open(r->spool_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (r->spool_fd >= 0)
		return 0;
	if (asprintf(&tmpl, "%s/.mkstipple-spool.XXXXXX", r->spool_dir) < 0)
		return -ENOMEM;
	r->spool_fd = mkostemp(tmpl, O_CLOEXEC);
	if (r->spool_fd >= 0)
		unlink(tmpl);
	else
		report_error(r->spool_dir, "creating the spool for %s: %s", r->name, strerror(errno));
	free(tmpl);
	return r->spool_fd >= 0 ? 0 : -errno;
}

static int spool_fail(const struct reader *r, int err)
{
	report_error(r->spool_dir, "writing the spool for %s: %s", r->name, strerror(err));
	return -err;
}

/* Zeros are not written: the spool is written once, and what was not written reads as
 * zeros, so a file of zeros stored in full costs no disk space there. */
static int all_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;

	return p[0] == 0 && !memcmp(p, p + 1, len - 1);
}

/* Only a sparse entry's map may leave bytes out: any other entry that brings fewer (or
 * more) than its header says is damaged, and its file would be what the archive is not. */
static int short_data(const struct reader *r, uint64_t got, uint64_t said)
{
	char what[128];

	snprintf(what, sizeof(what), "damaged: its data is %llu bytes, its header says %llu",
		 (unsigned long long)got, (unsigned long long)said);
	return fail(r, what, EINVAL);
}

/* Copies the entry's bytes to the spool's end, leaving holes where the archive has them;
 * the entry's size is what the archive says or, when it does not say, what came. */
static int spool_data(struct reader *r, struct archive_entry *e, struct data_rec *d)
{
	uint64_t base = r->spool_end, end = 0;
	const void *buf;
	size_t len;
	la_int64_t off;
	int rc;

	if (r->spool_fd < 0 && (rc = open_spool(r)))
		return rc;
	for (;;) {
		rc = archive_read_data_block(r->a, &buf, &len, &off);
		if (rc == ARCHIVE_EOF)
			break;
		if (rc != ARCHIVE_OK) /* a warning too: a zip's bad CRC or wrong data size */
			return fail_archive(r);
		if (off < 0 || (uint64_t)off > UINT64_MAX / 2)
			return fail(r, "a data block lies out of range", EINVAL);
		if (len && !all_zero(buf, len) &&
		    (rc = stp_pwrite_full(r->spool_fd, buf, len, base + (uint64_t)off)))
			return spool_fail(r, -rc);
		if ((uint64_t)off + len > end)
			end = (uint64_t)off + len;
	}
	if (archive_entry_size_is_set(e) && (uint64_t)archive_entry_size(e) != end &&
	    !archive_entry_sparse_count(e))
		return short_data(r, end, (uint64_t)archive_entry_size(e));
	if (archive_entry_size_is_set(e) && (uint64_t)archive_entry_size(e) > end)
		end = (uint64_t)archive_entry_size(e); /* a sparse file's hole at the end */
	if (base + end > r->spool_end && ftruncate(r->spool_fd, (off_t)(base + end)))
		return spool_fail(r, errno);
	r->spool_end = base + end;
	d->off = base;
	d->size = end;
	d->in_spool = 1;
	return 0;
}

/* The bytes of a plain tar or cpio lie in the archive, after the header just read. */
static int in_place(const struct reader *r, struct archive_entry *e)
{
	int fmt = archive_format(r->a) & ARCHIVE_FORMAT_BASE_MASK;

	return r->seekable && archive_filter_count(r->a) == 1 &&
	       (fmt == ARCHIVE_FORMAT_TAR || fmt == ARCHIVE_FORMAT_CPIO) &&
	       archive_entry_size_is_set(e) && archive_entry_sparse_count(e) == 0;
}

static int read_data(struct reader *r, struct archive_entry *e, struct node *n)
{
	struct data_rec *d = &r->recs[n->st.st_ino];
	int64_t size = archive_entry_size(e);

	if (archive_entry_size_is_set(e) && size < 0)
		return fail(r, "a negative size", EINVAL);
	if (!in_place(r, e))
		return spool_data(r, e, d);
	d->off = (uint64_t)archive_filter_bytes(r->a, 0);
	d->size = (uint64_t)size;
	d->in_spool = 0;
	r->used_in_place = 1;
	/* skipped now, not by the next header's read: a cut inside them is this entry's */
	return archive_read_data_skip(r->a) == ARCHIVE_OK ? 0 : fail_archive(r);
}

/* --- entries --- */

static void copy_stat_of_link(struct node *n, const struct node *target)
{
	n->st = target->st;
}

/* Whether the archive being read is a zip (known from its first header on). */
static bool is_zip(const struct reader *r)
{
	return (archive_format(r->a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_ZIP;
}

/* N, already in the tree, is about to take a new entry of type MODE. A tar or cpio entry
 * replaces an earlier one of its name, as tar and cpio extract them (an appended update).
 * A zip's entries are a directory, not a log: two entries of one name there are a
 * damaged or crafted zip, or two spellings of one Unicode name, which libarchive gives in
 * NFC form (read_archive), and one would be lost. Taken are a directory over a directory
 * (attributes only) and, checked by zip_file_again, the same file given twice, which
 * two spellings with the same bytes and mode are too (a lone spelling comes in NFC as
 * well). */
static int may_replace(struct reader *r, struct node *n, mode_t mode)
{
	if (!n->parent && !S_ISDIR(mode))
		return fail(r, "refused: the root must be a directory", EINVAL);
	if (S_ISDIR(n->st.st_mode) && !S_ISDIR(mode) && n->nchildren)
		return fail(r, "refused: it would replace a directory that is not empty", ENOTEMPTY);
	if (is_zip(r) && !(S_ISDIR(mode) && S_ISDIR(n->st.st_mode)))
		return fail(r, "refused: an earlier entry of the zip has this name (names are "
			    "compared in Unicode NFC form, as libarchive gives them)", EEXIST);
	return 0;
}

/* 1 when --exclude leaves PATH (relative, normalized) out: it, or a directory above it,
 * matches, as a directory scan never descends into an excluded directory. -ENOMEM. */
static int left_out(const struct reader *r, const char *path, int is_dir)
{
	return exclude_match_path(r->opts->exclude, path, is_dir);
}

/* The node a hard link names, which must be in the tree already and not a directory. */
static int link_target(struct reader *r, const char *hl, struct node **out)
{
	char *path = strdup(hl), what[64 + PATH_MAX];
	int rc = path ? normalize(r, path) : -ENOMEM;

	if (!rc && !(*out = lookup(r, path))) {
		snprintf(what, sizeof(what), "refused: a hard link to %s, which %s", path,
			 left_out(r, path, 0) > 0 ? "--exclude leaves out" :
			 "the archive has not (yet) listed");
		rc = fail(r, what, EINVAL);
	}
	if (!rc && S_ISDIR((*out)->st.st_mode))
		rc = fail(r, "refused: a hard link to a directory", EINVAL);
	free(path);
	return rc;
}

/* A hard link: N takes TARGET's inode (and the link's bytes, when it carries them); the
 * inode's attributes stay where they are (struct data_rec), so that N links to one target
 * cost O(N) whatever the target's attributes. */
static int link_entry(struct reader *r, struct archive_entry *e, struct node *n,
		      struct node *target)
{
	copy_stat_of_link(n, target);
	n->st.st_nlink = 2;
	target->st.st_nlink = 2;
	if (S_ISREG(target->st.st_mode) && archive_entry_size_is_set(e) &&
	    archive_entry_size(e) > 0)
		return read_data(r, e, n); /* cpio: the last link carries the bytes */
	return 0;
}

/*
 * Adds N's share of the image's metadata (its entry, name, inode, link target and
 * extended attributes: less than meta_build will lay out) once its entry is applied, and
 * refuses the archive past what any reader takes. It bounds what the tree holds in
 * memory: a compressed archive can claim a gigabyte of attributes in kilobytes. An entry
 * that replaces an earlier one counts again.
 */
static int charge_meta(struct reader *r, uint64_t bytes)
{
	r->meta += bytes;
	if (r->meta <= STP_META_SIZE_MAX)
		return 0;
	return fail(r, "refused: the archive's metadata (names, link targets, extended "
		    "attributes) passes 1 GiB here, more than any reader of an image takes", EFBIG);
}

static int count_meta(struct reader *r, const struct node *n, int hard_link)
{
	uint64_t bytes = STP_DIRENT_SIZE + n->name_len;

	if (!hard_link) {
		bytes += STP_INODE_SIZE + (n->link_target ? strlen(n->link_target) : 0);
		for (size_t i = 0; i < n->nxattrs; i++)
			bytes += STP_XATTR_SIZE + strlen(n->xattrs[i].name) + n->xattrs[i].len;
	}
	return charge_meta(r, bytes);
}

/* 1 when the spool holds the same bytes at A and B, 0 when not, -errno when it cannot be
 * read (reported). */
static int same_spooled(const struct reader *r, const struct data_rec *a,
			const struct data_rec *b)
{
	uint8_t x[16384], y[sizeof(x)];

	if (a->size != b->size || !a->in_spool || !b->in_spool)
		return 0;
	for (uint64_t at = 0; at < a->size; at += sizeof(x)) {
		size_t len = a->size - at < sizeof(x) ? (size_t)(a->size - at) : sizeof(x);
		int rc = stp_pread_full(r->spool_fd, x, len, a->off + at);

		if (!rc)
			rc = stp_pread_full(r->spool_fd, y, len, b->off + at);
		if (rc) {
			report_error(r->spool_dir, "reading the spool for %s: %s", r->name,
				     strerror(-rc));
			return rc;
		}
		if (memcmp(x, y, len))
			return 0;
	}
	return 1;
}

/* A zip's regular file N named again by entry E (Gradle's zips before 7 repeat files
 * two sources give): taken, as nothing then, when its bytes and mode are N's; else
 * refused as may_replace refuses. The bytes are spooled to compare, then given back.
 * Returns 0 or -errno (reported). */
static int zip_file_again(struct reader *r, struct archive_entry *e, struct node *n)
{
	struct data_rec again = { 0 };
	int rc = spool_data(r, e, &again), same;

	if (rc)
		return rc;
	same = (archive_entry_mode(e) & (S_IFMT | 07777)) == n->st.st_mode ?
	       same_spooled(r, &r->recs[n->st.st_ino], &again) : 0;
	if (same < 0)
		return same;
	if (!same)
		return fail(r, "refused: an earlier entry of the zip has this name, with other "
			    "bytes or mode (names are compared in Unicode NFC form, as libarchive "
			    "gives them)", EEXIST);
	if (ftruncate(r->spool_fd, (off_t)again.off))
		return spool_fail(r, errno);
	r->spool_end = again.off;
	return 0;
}

static int apply_entry(struct reader *r, struct archive_entry *e, char *path)
{
	const char *hl = archive_entry_hardlink(e) ? archive_entry_hardlink(e) :
			 archive_entry_hardlink_utf8(e);
	mode_t mode = hl ? S_IFREG : archive_entry_filetype(e);
	struct node *n, *dir, *target = NULL;
	int rc;

	if (!hl && !(S_ISREG(mode) || S_ISDIR(mode) || S_ISLNK(mode) || S_ISCHR(mode) ||
		     S_ISBLK(mode) || S_ISFIFO(mode) || S_ISSOCK(mode)))
		return fail(r, "an entry of unknown type", EINVAL);
	rc = normalize(r, path);
	if (!rc)
		rc = within_reach(r, path);
	if (!rc && (rc = left_out(r, path, S_ISDIR(mode))))
		return rc < 0 ? rc : 0;
	if (!rc && hl)
		rc = link_target(r, hl, &target);
	if (rc)
		return rc;
	n = lookup(r, path);
	if (n && n == target)
		return 0; /* a link to itself changes nothing */
	if (n && is_zip(r) && S_ISREG(mode) && S_ISREG(n->st.st_mode))
		return zip_file_again(r, e, n);
	if (!n) {
		rc = parent_of(r, path, &dir);
		if (!rc)
			rc = add_node(r, dir, strrchr(path, '/') ? strrchr(path, '/') + 1 : path, &n);
		if (rc)
			return rc;
	} else if ((rc = may_replace(r, n, mode))) {
		return rc;
	}
	free_inode(r, n);
	if (hl)
		return link_entry(r, e, n, target) ?: count_meta(r, n, 1);
	rc = new_inode(r, n);
	if (!rc)
		rc = set_attrs(r, e, n);
	if (!rc)
		rc = count_meta(r, n, 0);
	if (!rc && S_ISREG(n->st.st_mode))
		rc = read_data(r, e, n);
	return rc;
}

/* A program's filter is read once for all the names of its inode: each read may cost a
 * section table of up to 4 MiB, which a million hard links in a few KB would multiply. */
static int read_filter_once(struct reader *r, struct data_rec *d, struct node *n)
{
	const struct node *first = d->filtered;

	if (!first) {
		d->filtered = n;
		return scan_read_filter(n, d->in_spool ? r->spool_fd : r->fd, d->off);
	}
	n->filter = first->filter;
	if (!first->code) {
		free(n->code);
		n->code = NULL;
		return 0;
	}
	if (!n->code && !(n->code = malloc(sizeof(*n->code))))
		return -ENOMEM;
	*n->code = *first->code;
	return 0;
}

/* Every regular file takes its inode's bytes, and programs their filter. */
static int finish_files(struct reader *r)
{
	for (size_t i = 0; i < r->ix.nslots; i++) {
		struct node *n = r->ix.slots[i];
		struct data_rec *d;
		int rc;

		if (!n)
			continue;
		if (S_ISDIR(n->st.st_mode))
			tree_sort_children(n);
		if (!S_ISREG(n->st.st_mode))
			continue;
		d = &r->recs[n->st.st_ino];
		if (d->size > (uint64_t)INT64_MAX)
			return fail(r, "a file is too large", EFBIG);
		n->st.st_size = (off_t)d->size;
		n->data_off = d->off;
		n->in_spool = d->in_spool;
		if (d->size >= 64 && (rc = read_filter_once(r, d, n)))
			return rc;
	}
	return 0;
}

/* Each inode's attributes go to the node that carries it in the image. */
static void keep_attrs(struct reader *r)
{
	for (uint32_t i = 0; i < r->t->ninodes; i++) {
		struct node *p = r->t->inodes[i];
		struct data_rec *d = &r->recs[p->st.st_ino];

		if (d->owner == p)
			continue;
		if (d->owner)
			move_attrs(d, d->owner);
		move_attrs(d, p);
		d->owner = p;
	}
}

static void free_recs(struct reader *r)
{
	for (size_t i = 0; i < r->nrecs; i++) {
		free_xattrs(r->recs[i].xattrs, r->recs[i].nxattrs);
		free(r->recs[i].link_target);
	}
	free(r->recs);
}

/* libarchive's cpio reader pairs an entry whose inode has more than one link, directories
 * included, by walking a list of the earlier ones (cpiolinks.h): 80,000 directories in a
 * 420 KB cpio.gz cost 3.2e9 steps there. Past this many steps (what 65,536 directories
 * cost: 3.5 s of CPU here) the archive is refused. */
#define CPIO_LINK_STEPS_MAX (1ull << 31)

static int too_many_links(const struct reader *r, struct archive_entry *e,
			  struct cpio_links *links)
{
	int rc;

	if ((archive_format(r->a) & ARCHIVE_FORMAT_BASE_MASK) != ARCHIVE_FORMAT_CPIO)
		return 0;
	rc = cpio_links_note(links, (uint64_t)archive_entry_dev(e),
			     (uint64_t)archive_entry_ino64(e), archive_entry_nlink(e));
	if (rc || links->steps <= CPIO_LINK_STEPS_MAX)
		return rc;
	return fail(r, "refused: libarchive pairs this cpio archive's entries that have more "
		    "than one link (directories among them) at a cost that grows with the "
		    "square of their number, and some 65,000 of them wait here; a tar of the "
		    "same tree costs none of it", E2BIG);
}

static int apply_path(struct reader *r, struct archive_entry *e)
{
	char *path = strdup(r->entry);
	int rc = path ? apply_entry(r, e, path) : -ENOMEM;

	free(path);
	return rc;
}

static int header_warned(const struct reader *r)
{
	const char *msg = archive_error_string(r->a);
	char what[320];

	snprintf(what, sizeof(what), "a damaged header (libarchive: %.256s)", msg ? msg : "a warning");
	return fail(r, what, EINVAL);
}

/* Whether the warning libarchive gave with the header just read is that a name could
 * not be converted to the locale's charset: pax and zip say their names are UTF-8, and
 * mkstipple runs in the C locale, so every name beyond ASCII warns. Such a name is
 * taken as the archive stores it (entry_string): names are bytes in the image. (A
 * UTF-8 locale would not warn, but libarchive then also normalizes names to NFC, and
 * two names the archive keeps apart would become one.) Told by libarchive's words for
 * it, the same in its tar, cpio and zip readers. */
static int conversion_warning(const struct reader *r)
{
	const char *msg = archive_error_string(r->a);

	return msg && strstr(msg, " be converted from ") && strstr(msg, " to current locale");
}

/* A header libarchive read with a warning is refused, but for a name it could not
 * convert: each other warning it gives there says the entry may not be what the archive
 * meant (a malformed pax attribute ignored, a sparse map not understood, a zip's local
 * header against its central directory), as the zip CRC does at the data (spool_data).
 * One message is kept per header, the last: a name that cannot be converted hides any
 * warning given before it in the same header. */
static int read_entries(struct reader *r)
{
	struct archive_entry *e;
	struct cpio_links links = { 0 };
	size_t count = 0;
	int rc = 0;

	for (;;) {
		int got = archive_read_next_header(r->a, &e);

		if (got == ARCHIVE_EOF)
			break;
		if (got != ARCHIVE_OK && got != ARCHIVE_WARN) {
			rc = !count && !r->entry ? not_an_archive(r) : fail_next_header(r);
			break;
		}
		free(r->entry);
		r->entry = entry_string(archive_entry_pathname(e), archive_entry_pathname_utf8(e));
		if (r->utf8_names && !is_zip(r)) {
			rc = fail(r, "refused: taken for a zip, which mkstipple reads in a UTF-8 "
				  "locale, but libarchive reads another format: its names would "
				  "change", EINVAL);
			break;
		}
		if (got == ARCHIVE_WARN && !conversion_warning(r)) {
			rc = header_warned(r);
			break;
		}
		if (!r->entry) {
			rc = got == ARCHIVE_WARN ? /* a conversion warning: checked above */
			     fail(r, "a name marked UTF-8 that libarchive gives only in a UTF-8 "
				  "locale, which mkstipple reads a zip in when it knows the zip "
				  "as one beforehand: not a compressed zip, nor one behind a "
				  "self-extracting program on a pipe", EILSEQ) :
			     fail(r, "an entry without a path", EINVAL);
			break;
		}
		if ((rc = too_many_links(r, e, &links)) || (rc = apply_path(r, e)))
			break;
		count++;
	}
	cpio_links_free(&links);
	if (rc)
		return rc;
	free(r->entry);
	r->entry = NULL;
	if (!count)
		return fail(r, "no entries: an empty archive, or not an archive", EINVAL);
	return 0;
}

/* Opens and reads the archive. A zip (archive_open.h) is read under C.UTF-8 (on this
 * thread alone): a zip name marked UTF-8 that libarchive cannot convert to the locale's
 * charset is left with no name at all, where a pax name keeps its bytes
 * (conversion_warning). Those names come out in Unicode's NFC form, as libarchive gives
 * every UTF-8 name in a UTF-8 locale (two that meet so are refused: may_replace);
 * unmarked zip names, and every name of the other formats, are their bytes. */
static int read_archive(struct reader *r)
{
	locale_t utf8 = (locale_t)0, was = (locale_t)0;
	int rc = archive_input_init(&r->in, r->fd);

	if (!rc && (r->utf8_names = archive_input_is_zip(&r->in)) &&
	    !(utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0)))
		return report_errno(r->name, errno, "a zip's names need the C.UTF-8 locale");
	if (rc)
		return report_errno(r->name, -rc, "reading");
	if (utf8)
		was = uselocale(utf8);
	rc = archive_input_open(&r->in, &r->a);
	if (rc == -EINVAL)
		not_an_archive(r);
	else if (rc)
		report_errno(r->name, -rc, "reading");
	if (!rc)
		rc = read_entries(r);
	if (utf8) {
		uselocale(was);
		freelocale(utf8);
	}
	return rc;
}

int archive_tree(const char *path, const char *spool_dir, int64_t epoch,
		 const struct scan_opts *opts, struct tree *t, struct archive_source *src)
{
	static const struct scan_opts none;
	struct reader r = { .name = strcmp(path, "-") ? path : "standard input",
			    .spool_dir = spool_dir, .spool_fd = -1, .epoch = epoch,
			    .opts = opts ? opts : &none, .t = t };
	struct stat st;
	int rc;

	memset(t, 0, sizeof(*t));
	src->fd = src->spool_fd = -1;
	r.fd = strcmp(path, "-") ? open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC) : STDIN_FILENO;
	if (r.fd < 0)
		return report_errno(path, errno, "opening");
	if (fstat(r.fd, &st)) {
		rc = report_errno(path, errno, "stat");
		goto out;
	}
	r.seekable = r.fd != STDIN_FILENO && S_ISREG(st.st_mode);
	t->root = tree_root_new(t, path);
	rc = t->root ? tree_index_add(&r.ix, t->root) : -ENOMEM;
	if (!rc) {
		implicit_dir(&r, t->root);
		rc = new_inode(&r, t->root);
	}
	if (!rc)
		rc = read_archive(&r);
	if (!rc)
		rc = finish_files(&r);
	if (!rc)
		rc = tree_finish(t);
	if (!rc)
		keep_attrs(&r);
out:
	if (r.a)
		archive_read_free(r.a);
	archive_input_free(&r.in);
	free(r.entry);
	tree_index_free(&r.ix);
	free_recs(&r);
	if (!rc && r.used_in_place) {
		src->fd = r.fd;
		r.fd = -1;
	}
	if (!rc) {
		src->spool_fd = r.spool_fd;
		r.spool_fd = -1;
	}
	if (r.fd > STDIN_FILENO)
		close(r.fd);
	if (r.spool_fd >= 0)
		close(r.spool_fd);
	return rc;
}

void archive_source_close(struct archive_source *src)
{
	if (src->fd >= 0)
		close(src->fd);
	if (src->spool_fd >= 0)
		close(src->spool_fd);
	src->fd = src->spool_fd = -1;
}
