/* SPDX-License-Identifier: MIT */
/*
 * `stipple extract`: restore the image's tree into a directory.
 *
 * DIR may be one that other users can write, and the extracting user may be root, so
 * every step holds against a local user who swaps what extract just made for a symlink
 * or another node (as bsdtar and GNU tar do):
 * - every node is made exclusively (O_EXCL, mkdirat, symlinkat, mknodat) relative to the
 *   descriptor of its parent, which was opened with O_NOFOLLOW;
 * - then it is opened without following it (the file's own O_EXCL descriptor, or
 *   O_PATH|O_NOFOLLOW), checked to be the node made (type, owner, one link, a device's
 *   number; a directory: empty and not one made before), and its owner, xattrs, mode
 *   and times are set through that descriptor alone, with no need for /proc where the
 *   kernel has the calls (linkat and fchmodat2 with AT_EMPTY_PATH);
 * - a directory stays 0700 and ours while the run lasts, so nobody else can enter or
 *   write it; the final owners, modes and times of all directories are set in one pass
 *   at the end, deepest first, each opened again beneath DIR (destnodes.h);
 * - a hard link's first name is opened again the same way, beneath DIR with no symlink
 *   followed, checked to be the node made, and linked through its descriptor;
 * - a node made in a directory with a default ACL inherits an ACL, masked at first by the
 *   0700 or 0600 it is made with, but whose named entries the final chmod would switch on
 *   (the mask follows the group bits): right after its checks, before anything else, that
 *   ACL is removed through its descriptor, a directory's default ACL too, and DIR's when
 *   extract makes it; only the image's ACLs are set again;
 * - DIR and the directories above it: a symlink is followed only if trusted (destdir.h);
 * - an inode of link count 1 is written once, whatever number of names the image gives it.
 * Names are checked by the walk extract --tar shares (orderwalk.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "commands.h"
#include "destdir.h"
#include "destnodes.h"
#include "fileread.h"
#include "image.h"
#include "orderwalk.h"
#include "progress.h"
#include "tarout.h"
#include "util.h"

static const struct stp_cli extract_cli = {
	.name = "extract",
	.synopsis = "[-qv] [--xattrs|--no-xattrs] [--acls|--no-acls] [--no-devices] "
		    "[--no-setuid]\n                       IMAGE DIR [PATH...]\n"
		    "       stipple extract --tar [-q] IMAGE [FILE|-]",
	.summary = "Restore the tree of IMAGE into DIR, which must be absent or an empty "
		   "directory.\nAs root, owners and modes are restored exactly, with every "
		   "extended attribute\nand ACL; otherwise the umask applies, setuid and setgid "
		   "bits are dropped and\nonly user.* attributes are restored. With --tar, write "
		   "the tree as a pax tar\narchive to FILE, or to standard output (never a "
		   "terminal). With PATHs, only those\n(and what lies below them) are "
		   "restored, with the directories leading to them.",
	.options = "  -t, --tar      write a pax tar archive instead of a directory\n"
		   "      --xattrs   restore every extended attribute (the default as root,\n"
		   "                 trusted.overlay.* aside; a user gets user.* alone)\n"
		   "      --no-xattrs\n"
		   "                 restore none (ACLs aside)\n"
		   "      --acls     restore POSIX ACLs (the default as root)\n"
		   "      --no-acls  restore no ACL\n"
		   "      --no-devices, --nodev\n"
		   "                 make no character or block device (each named on stderr)\n"
		   "      --no-setuid, --nosuid\n"
		   "                 restore no setuid or setgid bit on a file and no file\n"
		   "                 capability (security.capability), as root too\n"
		   "  -q, --quiet    no progress line on a terminal\n"
		   "  -v, --verbose  list each path as it is written, on standard output, and\n"
		   "                 name every problem (else the first 20 of each kind)\n",
};

#define EXTRACT_CACHE_BLOCKS 4
/* A path of at most STP_WALK_PATH_MAX bytes has at most half as many components. */
#define DEPTH_MAX (STP_WALK_PATH_MAX / 2 + 1)
/* Descriptors left free for what one entry opens besides the directories: at most three
 * at once (the node, the parent of a walk without openat2, a message catalog libc may
 * open for strerror), with room for what a library may open unasked. */
#define DIRFDS_RESERVE 16
#define DIRFD_LOST (-2) /* closed for room, and could not be opened again */
#define DIRFDS_MIN 16 /* a limit leaving fewer gets this many tried (EMFILE says so) */
#define FIRST_FAILED UINT32_MAX /* an inode whose first name could not be extracted */
#define NAMED_ONCE (UINT32_MAX - 1) /* an inode of link count 1 already met */
#define FIRST_LEFT_OUT (UINT32_MAX - 2) /* a device a user could not make: a warning */
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452 /* Linux 6.6; the same number on every architecture but alpha */
#endif
#ifndef SYS_setxattrat
#define SYS_setxattrat 463 /* Linux 6.13, likewise */
#endif
#ifndef SYS_removexattrat
#define SYS_removexattrat 466 /* Linux 6.13, likewise */
#endif

/* Which extended attributes are restored, ACLs apart. */
/* root's default, XATTRS_ROOT, is every name but overlayfs's own (OVERLAY_PREFIX): those
 * tie a layer's node to paths of other layers, not to the file; --xattrs adds them */
enum { XATTRS_NONE, XATTRS_USER, XATTRS_ROOT, XATTRS_ALL };
#define OVERLAY_PREFIX "trusted.overlay."
#define CAPABILITY_XATTR "security.capability"
#define ACL_ACCESS "system.posix_acl_access"
#define ACL_DEFAULT "system.posix_acl_default"

struct extract {
	const struct stp_image *img;
	const char *image, *dest;
	struct stp_cache *cache;
	int restore_owners;           /* root: owners and modes exactly, as tar -p */
	mode_t umask;                 /* otherwise the umask applies to every mode */
	uid_t euid;                   /* who runs extract */
	uid_t owner;                  /* who owns what extract makes: DIR's filesystem says */
	int xattrs, acls;             /* what is restored: XATTRS_*, and ACLs or not */
	int no_devices;               /* --no-devices: devices are left out, each named */
	int no_setuid;                /* --no-setuid: no setuid, setgid nor capability */
	int dirfd[DEPTH_MAX];         /* open directory at each depth, [0] = DIR; -1 when
				       * closed (left, or to keep within dirfds_max) */
	uint32_t dirrec[DEPTH_MAX];   /* its record in nodes */
	unsigned dirfds, dirfds_max;  /* how many of dirfd[1...] are open, and at most */
	unsigned dirfd_low;           /* dirfd[1] to dirfd[dirfd_low - 1] are all closed */
	struct stp_destnodes nodes;   /* the directories and first names made */
	uint32_t *first;              /* per inode with nlink > 1: 1 + its first name's
				       * record, 0 before it, FIRST_FAILED or
				       * FIRST_LEFT_OUT; with
				       * nlink 1: NAMED_ONCE once met */
	unsigned long warnings;
	unsigned long overlay_left;   /* trusted.overlay.* names not restored (XATTRS_ROOT) */
	char **select;                /* the PATHs asked for, "/a/b"; none: everything */
	size_t nselect;
	int list;                     /* -v: each path on stdout as it is written */
	uint8_t xattr_value[STP_XATTR_VALUE_MAX]; /* the attribute being restored */
};

/* A node made by extract, open: a file or directory descriptor, or an O_PATH one, which
 * also names the node's directory and name (for set_mode_by_name). */
struct node {
	int fd;
	int opath;
	int dirfd;
	const char *name;
	struct stat st;
};

/* Errors of the destination as a whole: going on would only repeat them. */
static int is_fatal(int err)
{
	return err == -ENOSPC || err == -EDQUOT || err == -EROFS || err == -EIO ||
	       err == -ENOMEM || err == -EMFILE || err == -ENFILE;
}

/* Reports that WHAT failed on the destination path of E; returns ERR. */
static int fail(struct stp_walk *w, const struct stp_walk_entry *e, const char *what, int err)
{
	struct extract *x = w->ctx;

	if (err == -ESTALE)
		stp_walk_problem(w, e->path, "%s %s%s: it was replaced while extracting; left "
				 "as it is", what, x->dest, e->path);
	else
		stp_walk_problem(w, e->path, "%s %s%s: %s", what, x->dest, e->path,
				 stp_strerror(err));
	return err;
}

/* What a callback returns after a reported failure ERR: stop only when fatal. */
static int go_on_unless_fatal(int err)
{
	return err < 0 && is_fatal(err) ? err : 0;
}

/* Filesystems and non-root users refuse some namespaces (trusted.*, security.*). */
static int xattr_refused(int err)
{
	return err == EPERM || err == EACCES || err == ENOTSUP || err == EOPNOTSUPP;
}

/* The options' choice: ACLs (system.posix_acl_*) apart, then every name, root's default
 * or user.*; a trusted.overlay.* name left out by root's default is counted. */
static int xattr_wanted(struct extract *x, const char *name)
{
	if (!strncmp(name, "system.posix_acl_", 17))
		return x->acls;
	if (x->no_setuid && !strcmp(name, CAPABILITY_XATTR))
		return 0; /* a privilege on exec, as setuid is */
	if (x->xattrs == XATTRS_ROOT && !strncmp(name, OVERLAY_PREFIX, strlen(OVERLAY_PREFIX))) {
		x->overlay_left++;
		return 0;
	}
	return x->xattrs >= XATTRS_ROOT || (x->xattrs == XATTRS_USER && !strncmp(name, "user.", 5));
}

/* What an O_PATH descriptor has no call for goes through its /proc/self/fd link, which
 * the kernel resolves to that very node (a symlink included), never by a name. */
static void fd_path(char out[32], int fd)
{
	snprintf(out, 32, "/proc/self/fd/%d", fd);
}

/* Whether only this user (or root) can rename anything in the directory FD. */
static int is_private_dir(const struct extract *x, int fd)
{
	struct stat st;

	return !fstat(fd, &st) && (st.st_uid == x->euid || st.st_uid == 0) &&
	       !(st.st_mode & 022); /* an ACL's write shows in the group bits, its mask */
}

/* The last resort without the descriptor calls and /proc: an O_PATH node N by its name,
 * which is safe only where nobody else can swap that name between this check and the
 * call. 0 when the name is still N, -EOPNOTSUPP when that cannot be relied on. */
static int check_name_kept(const struct extract *x, const struct node *n)
{
	struct stat st;

	if (!is_private_dir(x, n->dirfd))
		return -EOPNOTSUPP;
	if (fstatat(n->dirfd, n->name, &st, AT_SYMLINK_NOFOLLOW))
		return -errno;
	return st.st_dev == n->st.st_dev && st.st_ino == n->st.st_ino ? 0 : -ESTALE;
}

static int set_xattr(const struct extract *x, const struct node *n, const char *name,
		     const void *value, size_t len)
{
	struct { uint64_t value; uint32_t size, flags; } args = { /* setxattrat's xattr_args */
		.value = (uintptr_t)value, .size = (uint32_t)len };
	char path[32];
	int err;

	if (!n->opath)
		return fsetxattr(n->fd, name, value, len, 0) ? -errno : 0;
	fd_path(path, n->fd);
	if (!setxattr(path, name, value, len, 0))
		return 0;
	if (errno != ENOENT) /* else no /proc; setxattrat takes no O_PATH descriptor */
		return -errno;
	if ((err = check_name_kept(x, n)))
		return err;
	if (!syscall(SYS_setxattrat, n->dirfd, n->name, AT_SYMLINK_NOFOLLOW, name, &args,
		     sizeof(args)))
		return 0;
	return errno == ENOSYS ? -EOPNOTSUPP : -errno; /* before Linux 6.13: a warning */
}

/* Whether removing an attribute failed only for want of one: none there, or a
 * filesystem without it. */
static int nothing_removed(int err)
{
	return err == -ENODATA || err == -ENOTSUP || err == -EOPNOTSUPP;
}

/* Whether O_PATH node N cannot have inherited an ACL: its directory has no default ACL,
 * and nobody but this user and root could have given it one, or taken it away, since N
 * was made (only a directory's owner can, and root). */
static int inherited_none(const struct extract *x, const struct node *n)
{
	struct stat st;

	if (fstat(n->dirfd, &st) || (st.st_uid != x->euid && st.st_uid != 0))
		return 0;
	return fgetxattr(n->dirfd, ACL_DEFAULT, NULL, 0) < 0 && nothing_removed(-errno);
}

/* Removes ACL attribute NAME from node N by set_xattr's route; without /proc, an O_PATH
 * node's by its name, unless it cannot have one. -ENOSYS: no safe way is left. */
static int remove_acl(const struct extract *x, const struct node *n, const char *name)
{
	char path[32];
	int err;

	if (!n->opath)
		return fremovexattr(n->fd, name) ? -errno : 0;
	fd_path(path, n->fd);
	if (!removexattr(path, name))
		return 0;
	if (errno != ENOENT) /* else no /proc; removexattrat takes no O_PATH descriptor */
		return -errno;
	if (inherited_none(x, n))
		return -ENODATA; /* as if removed: nothing is there */
	if ((err = check_name_kept(x, n)))
		return err == -EOPNOTSUPP ? -ENOSYS : err;
	if (!syscall(SYS_removexattrat, n->dirfd, n->name, AT_SYMLINK_NOFOLLOW, name))
		return 0;
	return -errno; /* ENOSYS before Linux 6.13 */
}

/* Removes the ACLs node N inherited when it was made: its access ACL, and a directory's
 * (IS_DIR) default ACL. 0, or the first error that is not "none there". */
static int drop_acls(const struct extract *x, const struct node *n, int is_dir)
{
	int err = remove_acl(x, n, ACL_ACCESS);

	if (!err || nothing_removed(err))
		err = is_dir ? remove_acl(x, n, ACL_DEFAULT) : 0;
	return nothing_removed(err) ? 0 : err;
}

/* Without fchmodat2 and /proc (check_name_kept). */
static int set_mode_by_name(const struct extract *x, const struct node *n, mode_t mode)
{
	int err = check_name_kept(x, n);

	return err ? err : fchmodat(n->dirfd, n->name, mode, 0) ? -errno : 0;
}

static int set_mode(const struct extract *x, const struct node *n, mode_t mode)
{
	char path[32];

	if (!n->opath)
		return fchmod(n->fd, mode) ? -errno : 0;
	if (!syscall(SYS_fchmodat2, n->fd, "", mode, AT_EMPTY_PATH))
		return 0;
	if (errno != ENOSYS && errno != EPERM && errno != EINVAL) /* older kernel, seccomp */
		return -errno;
	fd_path(path, n->fd);
	if (!chmod(path, mode))
		return 0;
	return errno == ENOENT ? set_mode_by_name(x, n, mode) : -errno; /* no /proc */
}

static int set_times(const struct node *n, const struct timespec ts[2])
{
	char path[32];

	if (!n->opath)
		return futimens(n->fd, ts) ? -errno : 0;
	if (!utimensat(n->fd, "", ts, AT_EMPTY_PATH))
		return 0;
	if (errno != EINVAL && errno != ENOENT) /* an older kernel: no AT_EMPTY_PATH here */
		return -errno;
	fd_path(path, n->fd);
	return utimensat(AT_FDCWD, path, ts, 0) ? -errno : 0;
}

/* The ACLs E's node N inherited from its directory's default ACL, removed (drop_acls)
 * before anything else is done to it: its mask, from the mode it was made with, keeps
 * their named entries off only until the final mode sets the image's group bits. */
static int drop_inherited_acls(struct stp_walk *w, const struct stp_walk_entry *e,
			       const struct node *n)
{
	struct extract *x = w->ctx;
	int err = drop_acls(x, n, S_ISDIR(e->inode.mode));

	if (err == -ENOSYS)
		stp_walk_problem(w, e->path, "cannot remove the ACL %s%s inherits from its "
				 "directory's default ACL: /proc is not mounted, and this kernel "
				 "has no removexattrat (Linux 6.13) or others can write that "
				 "directory", x->dest, e->path);
	else if (err)
		fail(w, e, "cannot remove the inherited ACL of", err);
	return err;
}

/* Sets the extended attributes the options ask for on node N. */
static int restore_xattrs(struct stp_walk *w, const struct stp_walk_entry *e,
			  const struct node *n)
{
	struct extract *x = w->ctx;
	char name[STP_XATTR_NAME_MAX + 1];

	for (uint32_t i = 0; i < e->inode.xattr_count; i++) {
		struct stp_xattr a;
		int err = stp_image_xattr(x->img, &e->inode, i, &a, name);

		if (!err && !xattr_wanted(x, name))
			continue;
		if (!err)
			err = stp_image_xattr_value(x->img, &a, x->xattr_value);
		if (err) {
			stp_walk_problem(w, e->path, "extended attribute %u: %s", i,
					 stp_strerror(err));
			continue;
		}
		err = set_xattr(x, n, name, x->xattr_value, a.value_len);
		if (!err)
			continue;
		if (xattr_refused(-err)) {
			stp_cli_error(&extract_cli, "%s%s: extended attribute %s not restored: %s",
				      x->dest, e->path, name, stp_strerror(err));
			x->warnings++;
			continue;
		}
		return fail(w, e, "cannot set an extended attribute on", err);
	}
	return 0;
}

/* As tar does: root restores the stored mode whole; anyone else gets it less the umask
 * and without setuid and setgid, which on the user's own files would let whoever runs
 * them act as that user, by the image's choice and not the user's. --no-setuid drops
 * them as root too, as a nosuid mount ignores them: on a file only, since a directory's
 * setgid grants nothing on exec (it gives new entries its group). */
static mode_t mode_of(const struct extract *x, const struct stp_inode *in)
{
	if (!x->restore_owners)
		return in->mode & 01777 & ~x->umask;
	if (x->no_setuid && !S_ISDIR(in->mode))
		return in->mode & 01777;
	return in->mode & 07777;
}

/* Owner, xattrs, mode, times of E, through node N alone. Owner first: chown clears
 * setuid bits and file capabilities. A symlink has no mode of its own. */
static int restore_attrs(struct stp_walk *w, const struct stp_walk_entry *e, const struct node *n)
{
	struct extract *x = w->ctx;
	const struct stp_inode *in = &e->inode;
	struct timespec ts[2] = { { in->mtime_sec, in->mtime_nsec }, { in->mtime_sec, in->mtime_nsec } };
	int err;

	if (x->restore_owners && fchownat(n->fd, "", in->uid, in->gid, AT_EMPTY_PATH))
		return fail(w, e, "cannot set the owner of", -errno);
	err = restore_xattrs(w, e, n);
	if (err)
		return err;
	err = S_ISLNK(in->mode) ? 0 : set_mode(x, n, mode_of(x, in));
	if (err == -EOPNOTSUPP && n->opath)
		stp_walk_problem(w, e->path, "cannot set the mode of %s%s: this kernel has no "
				 "fchmodat2 (Linux 6.6), /proc is not mounted, and others can "
				 "write the directory holding it", x->dest, e->path);
	else if (err)
		return fail(w, e, "cannot set the mode of", err);
	if ((err = set_times(n, ts)))
		return fail(w, e, "cannot set the times of", err);
	return 0;
}
struct content {
	struct stp_walk *w;
	const struct stp_walk_entry *e;
	int fd;
	int reported; /* the error that ended the walk was reported */
};

/* Writes N bytes at file offset OFF: a stp_cache_sink_fn. */
static int write_out(void *ctx, uint64_t off, const uint8_t *b, size_t n)
{
	return stp_pwrite_full(((struct content *)ctx)->fd, b, n, off);
}

/* Writes stored piece P into the file, straight from its pinned block; a hole stays a
 * hole. A damaged block is named. */
static int write_piece(void *ctx, const struct stp_file_piece *p)
{
	struct content *c = ctx;
	struct extract *x = c->w->ctx;
	struct stp_block_ref ref;
	int err;

	if (p->block == STP_FILE_HOLE)
		return 0;
	err = stp_cache_get(x->cache, p->block, &ref);
	if (!err && (err = stp_file_piece_check(x->img, p, ref.size)))
		stp_cache_release(x->cache, &ref);
	c->reported = err != 0;
	if (err) {
		stp_walk_problem(c->w, c->e->path, "cannot read block %" PRIu64 " (file offset %"
				 PRIu64 "): %s; not extracted", p->block, p->file_off,
				 stp_strerror(err));
		return err;
	}
	err = stp_cache_feed(&ref, (size_t)p->in_block, (size_t)p->len, p->file_off, write_out,
			     c);
	stp_cache_release(x->cache, &ref);
	c->reported = err != 0;
	return err ? fail(c->w, c->e, "cannot write", err) : 0;
}

/* Writes the file's stored bytes; bytes no extent covers stay holes. */
static int write_content(struct stp_walk *w, const struct stp_walk_entry *e, int fd)
{
	struct extract *x = w->ctx;
	struct content c = { w, e, fd, 0 };
	int err;

	if (ftruncate(fd, (off_t)e->inode.size))
		return fail(w, e, "cannot size", -errno);
	err = stp_file_walk(x->img, &e->inode, 0, e->inode.size, write_piece, &c);
	if (err && !c.reported)
		stp_walk_problem(w, e->path, "extents: %s; not extracted", stp_strerror(err));
	return err;
}

/* Whether ST is the node just made for E: of its type, owned as what extract makes in
 * DIR is (the probe's owner), with no other name (another file linked in its place has
 * one), and for a device its number. The device is not compared: the node was reached
 * with O_NOFOLLOW from a directory extract holds, and overlayfs gives its non-directories
 * the st_dev of the layer below. */
static int is_made(const struct extract *x, const struct stat *st, mode_t type, dev_t rdev)
{
	return (st->st_mode & S_IFMT) == type && st->st_uid == x->owner &&
	       (type == S_IFDIR || st->st_nlink == 1) && (!rdev || st->st_rdev == rdev);
}

/* Opens NAME, just made in DIRFD, without following it (O_PATH) into N and ST, and
 * checks it is the node made; -ESTALE when it is not, as when it is one extract made
 * before (an earlier FIFO or device exchanged for it with renameat2: every node pinned
 * is recorded, extract_nondir). */
static int pin_made(const struct extract *x, int dirfd, const char *name, mode_t type,
		    dev_t rdev, struct node *n, struct stat *st)
{
	int err = 0;

	*n = (struct node){ .opath = 1, .dirfd = dirfd, .name = name };
	n->fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (n->fd < 0)
		return -errno;
	if (fstat(n->fd, st))
		err = -errno;
	else if (!is_made(x, st, type, rdev) ||
		 stp_destnodes_has(&x->nodes, st->st_dev, st->st_ino))
		err = -ESTALE;
	if (err)
		close(n->fd);
	n->st = *st;
	return err;
}

/* A file system may report a failed write only when the file is flushed (NFS: at
 * close). The file is then removed, but a program that gets its setuid or setgid bits
 * must never hold them without all its bytes, not even until that close: for those, the
 * bytes are flushed first and a failure is reported before any bit is set. */
static int flush_before_setid(struct stp_walk *w, const struct stp_walk_entry *e, int fd)
{
	const struct extract *x = w->ctx;

	if (!(mode_of(x, &e->inode) & (S_ISUID | S_ISGID)) || !fdatasync(fd))
		return 0;
	return fail(w, e, "cannot write", -errno);
}

/* On failure (reported) no file is left under the name. ST, when not NULL, gets what
 * the file became (for a first name). */
static int extract_file(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd,
			struct stat *st)
{
	struct node n = { .opath = 0 };
	int err;

	n.fd = openat(dirfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (n.fd < 0)
		return fail(w, e, "cannot create", -errno);
	err = drop_inherited_acls(w, e, &n);
	if (!err)
		err = write_content(w, e, n.fd);
	if (!err)
		err = flush_before_setid(w, e, n.fd);
	if (!err)
		err = restore_attrs(w, e, &n);
	if (!err && st && fstat(n.fd, st))
		err = fail(w, e, "cannot stat", -errno);
	if (close(n.fd) && !err)
		err = fail(w, e, "cannot write", -errno);
	/* never leave a file whose bytes are not the image's */
	if (err)
		unlinkat(dirfd, e->name, 0);
	return err;
}

/* Makes symlink, device, fifo or socket E as NAME in DIRFD. Returns 0, 1 when a device
 * was left out with a warning (not root), or an error (reported). */
static int make_special(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd,
			dev_t rdev)
{
	struct extract *x = w->ctx;
	char *target;
	int err;

	if (S_ISLNK(e->inode.mode)) {
		err = stp_walk_link_target(w, e, &target);
		if (err)
			return err;
		err = symlinkat(target, dirfd, e->name) ? -errno : 0;
		free(target);
		return err ? fail(w, e, "cannot create", err) : 0;
	}
	if (!mknodat(dirfd, e->name, (e->inode.mode & S_IFMT) | 0600, rdev))
		return 0;
	if (errno == EPERM && rdev) {
		/* escaped: the name is the image's */
		stp_cli_error(&extract_cli, "%s%s: device not created: %s", x->dest, e->path,
			      stp_strerror(-errno));
		x->warnings++;
		return 1;
	}
	return fail(w, e, "cannot create", -errno);
}

/* A symlink, device, fifo or socket: made, pinned, then given its attributes. */
static int extract_special(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd,
			   struct stat *st)
{
	struct extract *x = w->ctx;
	mode_t type = e->inode.mode & S_IFMT;
	dev_t rdev = 0;
	struct node n;
	int err;

	if (type == S_IFCHR || type == S_IFBLK)
		rdev = makedev(stp_cli_rdev_major(&e->inode), stp_cli_rdev_minor(&e->inode));
	err = make_special(w, e, dirfd, rdev);
	if (err)
		return err;
	err = pin_made(x, dirfd, e->name, type, rdev, &n, st);
	if (err)
		return fail(w, e, "cannot open", err);
	err = type == S_IFLNK ? 0 : drop_inherited_acls(w, e, &n); /* a symlink has none */
	if (!err)
		err = restore_attrs(w, e, &n);
	if (!err && fstat(n.fd, st)) /* as it is now, owner set, for its record */
		err = fail(w, e, "cannot stat", -errno);
	close(n.fd);
	return err;
}

/* A further name of an inode already extracted: its first name is opened beneath DIR
 * with no symlink followed, checked, and linked through that descriptor. */
static int extract_link(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd,
			uint32_t first)
{
	struct extract *x = w->ctx;
	char path[32];
	int fd, err;

	if (first == FIRST_FAILED) {
		stp_walk_problem(w, e->path, "not extracted: it is a hard link to a file that "
			"could not be extracted");
		return 0;
	}
	if (first == FIRST_LEFT_OUT) { /* a warning, as its first name's */
		stp_cli_error(&extract_cli, "%s%s: device not created: a hard link to one that "
			      "was not", x->dest, e->path);
		x->warnings++;
		return 0;
	}
	err = stp_destnodes_open(&x->nodes, first - 1, O_PATH, &fd);
	if (!err) {
		/* AT_EMPTY_PATH needs CAP_DAC_READ_SEARCH (root has it), else ENOENT */
		err = linkat(fd, "", dirfd, e->name, AT_EMPTY_PATH) ? -errno : 0;
		fd_path(path, fd);
		if (err == -ENOENT)
			err = linkat(AT_FDCWD, path, dirfd, e->name, AT_SYMLINK_FOLLOW) ? -errno : 0;
		close(fd);
	}
	if (err == -ELOOP || err == -EXDEV)
		stp_walk_problem(w, e->path, "cannot create the hard link %s%s: a symlink now "
				 "lies on the way to its first name; not followed", x->dest, e->path);
	else if (err)
		fail(w, e, "cannot create the hard link", err);
	return go_on_unless_fatal(err);
}

/* The first name of an inode with several: recorded, FIRST_LEFT_OUT when ERR is 1 (a
 * device left out with a warning), or FIRST_FAILED. */
static int remember_first(struct extract *x, const struct stp_walk_entry *e, int err,
			  const struct stat *st)
{
	uint32_t rec;

	x->first[e->ino] = err == 1 ? FIRST_LEFT_OUT : FIRST_FAILED;
	if (err)
		return 0;
	err = stp_destnodes_add(&x->nodes, x->dirrec[e->depth - 1], e->name, e->ino, st, &rec);
	if (!err)
		x->first[e->ino] = rec + 1;
	return err;
}

/* A symlink, FIFO, socket or device of one name, pinned: recorded, so that it cannot be
 * swapped in for one made later (pin_made). A file is written through the descriptor
 * that made it, and needs none. */
static int remember_made(struct extract *x, const struct stp_walk_entry *e,
			 const struct stat *st)
{
	uint32_t rec;

	return stp_destnodes_add(&x->nodes, x->dirrec[e->depth - 1], e->name, e->ino, st, &rec);
}

static int extract_nondir(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	struct extract *x = w->ctx;
	int several = e->inode.nlink > 1;
	struct stat st;
	int err;

	if (several && x->first[e->ino])
		return extract_link(w, e, dirfd, x->first[e->ino]);
	if (x->first[e->ino] == NAMED_ONCE) {
		/* not a copy per name: a 1 GiB file named 100,000 times would be 100 TiB */
		stp_walk_problem(w, e->path, "not extracted: its inode %u has a link count of "
				 "1, but another name had it already (a damaged image)", e->ino);
		return 0;
	}
	if (!several)
		x->first[e->ino] = NAMED_ONCE;
	switch (e->inode.mode & S_IFMT) {
	case S_IFREG:
		err = extract_file(w, e, dirfd, several ? &st : NULL);
		break;
	case S_IFLNK: case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		err = extract_special(w, e, dirfd, &st);
		break;
	default:
		stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
		err = -EUCLEAN;
	}
	if (several && remember_first(x, e, err, &st))
		return -ENOMEM;
	if (!several && !err && !S_ISREG(e->inode.mode) && remember_made(x, e, &st))
		return -ENOMEM;
	return go_on_unless_fatal(err);
}

/* Whether directory FD is empty, as a directory just made is: one swapped in its place
 * between mkdirat and open (a sibling already filled, exchanged with renameat2) is not.
 * 0, -ESTALE, or a negative errno. */
static int check_empty(int fd)
{
	char buf[1024] __attribute__((aligned(8)));
	ssize_t n;

	while ((n = getdents64(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t at = 0; at < n; at += ((struct dirent64 *)(buf + at))->d_reclen) {
			const char *name = ((struct dirent64 *)(buf + at))->d_name;

			if (strcmp(name, ".") && strcmp(name, ".."))
				return -ESTALE;
		}
	}
	return n < 0 ? -errno : 0;
}

/* Whether FD, a directory just made, into ST, is the one made (see is_made; empty and
 * not one extract made before): 0, -ESTALE, or a negative errno. */
static int check_dir_made(const struct extract *x, int fd, struct stat *st)
{
	if (fstat(fd, st))
		return -errno;
	if (!is_made(x, st, S_IFDIR, 0) || stp_destnodes_has(&x->nodes, st->st_dev, st->st_ino))
		return -ESTALE;
	return check_empty(fd);
}

/* How many directory descriptors extract keeps open at once, OPEN of them open now: those
 * and the descriptor numbers still free below the soft limit, less DIRFDS_RESERVE.
 * Counted rather than guessed, since what is open already varies: the image (a URL's has
 * a fetcher's channels), DIR, and any a parent left open. Free ones are counted up to
 * twice the deepest tree: beyond, enough. */
static unsigned dirfd_budget(unsigned open)
{
	unsigned top = 2 * DEPTH_MAX, usable = open;
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < top)
		top = (unsigned)rl.rlim_cur;
	for (unsigned fd = 0; fd < top; fd++)
		usable += fcntl((int)fd, F_GETFD) < 0 && errno == EBADF;
	return usable > DIRFDS_MIN + DIRFDS_RESERVE ? usable - DIRFDS_RESERVE : DIRFDS_MIN;
}

/* Room for one more directory descriptor within x->dirfds_max: the shallowest open one
 * below DIR is closed, the one the walk needs last (when it comes back up to it). With
 * at least DIRFDS_MIN open, that is never the parent of the entry at hand. */
static void make_dirfd_room(struct extract *x)
{
	unsigned d = x->dirfd_low;

	if (x->dirfds < DIRFDS_MIN)
		return;
	if (!x->dirfds_max) /* counted once a tree is this deep: most never are */
		x->dirfds_max = dirfd_budget(x->dirfds);
	if (x->dirfds < x->dirfds_max)
		return;
	while (x->dirfd[d] < 0)
		d++;
	close(x->dirfd[d]);
	x->dirfd[d] = -1;
	x->dirfds--;
	x->dirfd_low = d + 1;
}

/* FD, room made for it, as the directory at DEPTH. */
static void keep_dirfd(struct extract *x, unsigned depth, int fd)
{
	x->dirfd[depth] = fd;
	x->dirfds++;
	if (depth < x->dirfd_low)
		x->dirfd_low = depth;
}

/* A directory: made 0700, opened without following, checked, stripped of the ACLs it
 * inherited, recorded. Its attributes wait for the end (settle_dirs). */
static int make_dir(struct stp_walk *w, const struct stp_walk_entry *e, int parent)
{
	struct extract *x = w->ctx;
	struct node n = { .opath = 0 };
	struct stat st;
	uint32_t rec;
	int err;

	if (mkdirat(parent, e->name, 0700))
		return fail(w, e, "cannot create", -errno);
	make_dirfd_room(x);
	n.fd = openat(parent, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (n.fd < 0)
		return fail(w, e, "cannot open", -errno);
	if ((err = check_dir_made(x, n.fd, &st)))
		fail(w, e, "cannot open", err);
	else if (!(err = drop_inherited_acls(w, e, &n)) &&
		 (err = stp_destnodes_add(&x->nodes, x->dirrec[e->depth - 1], e->name, e->ino,
					  &st, &rec)))
		fail(w, e, "cannot open", err);
	if (err) {
		close(n.fd);
		return err;
	}
	keep_dirfd(x, e->depth, n.fd);
	x->dirrec[e->depth] = rec;
	return 0;
}

/* --- PATH operands --- */

enum { SELECT_OUT, SELECT_LEADING, SELECT_IN };

/* Whether PATH (LEN bytes) is, or lies below, the PATH asked for (S, SLEN bytes). */
static int lies_in(const char *path, size_t len, const char *s, size_t slen)
{
	return (slen == 1 || len == slen || (len > slen && path[slen] == '/')) &&
	       len >= slen && !memcmp(path, s, slen);
}

/* SELECT_IN: asked for or below; SELECT_LEADING: a directory on the way to one. */
static int selected(const struct extract *x, const char *path)
{
	size_t len = strlen(path);
	int leading = 0;

	if (!x->nselect)
		return SELECT_IN;
	for (size_t i = 0; i < x->nselect; i++) {
		size_t slen = strlen(x->select[i]);

		if (lies_in(path, len, x->select[i], slen))
			return SELECT_IN;
		leading |= lies_in(x->select[i], slen, path, len);
	}
	return leading ? SELECT_LEADING : SELECT_OUT;
}

/* "a//b/./" as "/a/b", in place in a copy; NULL: out of memory, or ".." (refused). */
static char *normal_path(const char *arg)
{
	char *out = malloc(strlen(arg) + 2), *o = out;
	const char *p = arg;

	if (!out)
		return NULL;
	*o++ = '/';
	while (*p) {
		size_t n;

		p += strspn(p, "/");
		n = strcspn(p, "/");
		if (n == 2 && !memcmp(p, "..", 2)) {
			free(out);
			return NULL;
		}
		if (n && !(n == 1 && *p == '.')) {
			if (o > out + 1)
				*o++ = '/';
			memcpy(o, p, n);
			o += n;
		}
		p += n;
	}
	*o = 0;
	return out;
}

/* Checks that each PATH is in the image before anything is made: nothing is written
 * for a command that names what is not there. */
static int select_paths(struct extract *x, char **args, size_t n)
{
	x->select = calloc(n ? n : 1, sizeof(*x->select));
	if (!x->select)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint32_t ino;

		x->select[i] = normal_path(args[i]);
		if (!x->select[i]) {
			stp_cli_error(&extract_cli, "%s: a PATH may not hold \"..\"", args[i]);
			return -EINVAL;
		}
		x->nselect++; /* the caller frees them, whatever follows */
		if (stp_cli_resolve(&extract_cli, x->img, x->select[i], &ino))
			return -ENOENT;
	}
	return 0;
}

/* --no-devices: E is left out if a device (every name of it), named as a warning, which
 * is no failure since it was asked for. */
static int left_out(struct extract *x, const struct stp_walk_entry *e)
{
	if (!x->no_devices || !(S_ISCHR(e->inode.mode) || S_ISBLK(e->inode.mode)))
		return 0;
	stp_cli_error(&extract_cli, "%s%s: device left out (--no-devices)", x->dest, e->path);
	x->warnings++;
	return 1;
}

/* -v: "a/b", or "a/" for a directory, as tar -v lists them. */
static void list_entry(const struct extract *x, const struct stp_walk_entry *e)
{
	if (!x->list)
		return;
	stp_cli_put_escaped(stdout, e->path + 1, strlen(e->path + 1));
	fputs(S_ISDIR(e->inode.mode) ? "/\n" : "\n", stdout);
}

/* The directory holding E into *FD. Closed to keep within the budget (make_dirfd_room),
 * it is opened again beneath DIR and checked to be the one made, as settle_dir does; it
 * is 0700 and ours until then, so nobody else can have entered it, and one renamed or
 * swapped in DIR is refused, never followed.
 * The cost stays that of what the image stores: each entry needs at most one reopen (its
 * parent), one openat2 (without it, a walk of one openat per level); and a directory is
 * closed only once the walk has made dirfds_max directories below it since it was last
 * opened, each of which settle_dirs opens again by a longer path. A directory at depth
 * 200 with 5,000 children each 1,000 deep: 5,000 reopens of 200 names, 1 million names
 * looked up, while its 5 million directories take 3.5 billion to settle. A file after
 * the subdirectory at each level of such a chain: each level closed is opened again
 * once on the way back up, by the path settle_dirs opens it by too.
 * Returns 0; 1 when the directory could not be opened again earlier (said then, once:
 * the rest of it is left out); or the failure's negative errno, reported. */
static int open_parent(struct stp_walk *w, const struct stp_walk_entry *e, int *fd)
{
	struct extract *x = w->ctx;
	unsigned d = e->depth - 1;
	int err;

	if (x->dirfd[d] == DIRFD_LOST)
		return 1; /* said once, for its first entry met after */
	if (x->dirfd[d] < 0) {
		make_dirfd_room(x);
		err = stp_destnodes_open(&x->nodes, x->dirrec[d], O_RDONLY | O_DIRECTORY, fd);
		if (err) {
			x->dirfd[d] = DIRFD_LOST;
			return fail(w, e, "left out with the rest of its directory, which cannot "
				    "be opened again:", err);
		}
		keep_dirfd(x, d, *fd);
	}
	*fd = x->dirfd[d];
	return 0;
}

static int enter_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct extract *x = w->ctx;
	int parent, err, sel;

	if (e->depth == 0)
		return 0; /* DIR itself, opened already */
	sel = selected(x, e->path);
	if (sel == SELECT_OUT || (sel == SELECT_LEADING && !S_ISDIR(e->inode.mode)))
		return S_ISDIR(e->inode.mode) ? STP_WALK_SKIP : 0;
	if (left_out(x, e))
		return 0;
	list_entry(x, e);
	if ((err = open_parent(w, e, &parent)))
		return (err < 0 ? go_on_unless_fatal(err) : 0) ?:
		       (S_ISDIR(e->inode.mode) ? STP_WALK_SKIP : 0);
	if (!S_ISDIR(e->inode.mode))
		return extract_nondir(w, e, parent);
	if (e->depth >= DEPTH_MAX) {
		stp_walk_problem(w, e->path, "nested too deep");
		return STP_WALK_SKIP;
	}
	err = make_dir(w, e, parent);
	return err ? go_on_unless_fatal(err) ?: STP_WALK_SKIP : 0;
}

static int leave_dir(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct extract *x = w->ctx;

	if (e->depth > 0 && x->dirfd[e->depth] >= 0) { /* else closed for room, or lost */
		close(x->dirfd[e->depth]);
		x->dirfds--;
	}
	if (e->depth > 0)
		x->dirfd[e->depth] = -1;
	return 0;
}

/* The final owner, xattrs, mode and times of the directory of record REC. */
static int settle_dir(struct stp_walk *w, uint32_t rec)
{
	struct extract *x = w->ctx;
	char rooted[STP_WALK_PATH_MAX + 1] = "/";
	struct stp_walk_entry e = { .path = rooted };
	struct node n = { .fd = x->dirfd[0], .opath = 0 };
	int err = 0;

	if (rec != STP_DESTNODES_ROOT) {
		err = stp_destnodes_path(&x->nodes, rec, rooted + 1, sizeof(rooted) - 1);
		if (!err)
			err = stp_destnodes_open(&x->nodes, rec, O_RDONLY | O_DIRECTORY, &n.fd);
		if (err)
			return fail(w, &e, "cannot set the attributes of", err);
	}
	err = stp_image_inode(x->img, x->nodes.node[rec].ino, &e.inode);
	if (err)
		stp_walk_problem(w, e.path, "inode: %s", stp_strerror(err));
	else
		err = restore_attrs(w, &e, &n);
	if (rec != STP_DESTNODES_ROOT)
		close(n.fd);
	return err;
}

/* Every directory's final attributes, deepest first, DIR last. A record comes after its
 * parent's, so backwards each directory comes after all those below it: until its turn
 * it is 0700 and ours, so nobody else reaches below it while extract still works there. */
static int settle_dirs(struct stp_walk *w)
{
	struct extract *x = w->ctx;

	for (uint32_t r = x->nodes.count; r-- > 0;) {
		int err = x->nodes.node[r].is_dir ? settle_dir(w, r) : 0;

		if (err && is_fatal(err))
			return err;
	}
	return 0;
}

/* Each directory level holds a descriptor while it can: allow as many as the hard limit
 * permits, so that fewer are closed and opened again (open_parent). */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Every level below DIR closed. */
static void init_dirfds(struct extract *x)
{
	for (unsigned d = 1; d < DEPTH_MAX; d++)
		x->dirfd[d] = -1;
	x->dirfd_low = 1;
	x->dirfds_max = 0; /* make_dirfd_room counts it when needed */
}

static int extract_tree(struct extract *x)
{
	uint32_t inodes = stp_image_sb(x->img)->inode_count;
	struct stp_walk walk = { .cli = &extract_cli, .img = x->img, .image = x->image,
				 .enter = enter_entry, .leave = leave_dir, .ctx = x };
	int err, settled;

	x->first = calloc(inodes ? inodes : 1, sizeof(*x->first));
	err = x->first ? stp_destnodes_init(&x->nodes, x->dirfd[0], STP_ROOT_INO) : -ENOMEM;
	if (!err)
		err = stp_cache_new(x->img, EXTRACT_CACHE_BLOCKS, 1, &x->cache);
	if (!err)
		err = stp_orderwalk_run(&walk);
	/* even after a failure: no directory stays 0700 that the image says otherwise */
	settled = x->nodes.node ? settle_dirs(&walk) : 0;
	err = err ? err : settled;
	stp_cli_flush_messages();
	if (x->overlay_left)
		stp_cli_error(&extract_cli, "%lu trusted.overlay.* attributes not restored "
			      "(overlayfs's links between layers; --xattrs restores them)",
			      x->overlay_left);
	if (err)
		stp_cli_problem(&extract_cli, x->image, NULL, "extraction stopped: %s",
				stp_strerror(err));
	else if (walk.problems)
		stp_cli_problem(&extract_cli, x->image, NULL, "%lu entries not extracted or "
				"incomplete in %s", walk.problems, x->dest);
	if (x->cache)
		stp_cache_free(x->cache);
	free(x->first);
	stp_destnodes_free(&x->nodes);
	return err || walk.problems ? STP_EXIT_FAIL : STP_EXIT_OK;
}

/* DIR, when extract made it, inherited its parent's default ACL as any node made does
 * (drop_inherited_acls); one that was there is the user's, its ACLs the user's choice. */
static int drop_dest_acls(const struct extract *x)
{
	const struct node n = { .fd = x->dirfd[0], .opath = 0 };
	int err = drop_acls(x, &n, 1);

	if (err)
		stp_cli_problem(&extract_cli, x->image, NULL, "cannot remove the ACL %s inherited "
				"from its parent: %s", x->dest, stp_strerror(err));
	return err;
}

/* DIR opened into x->dirfd[0] and made ready; -1 when it cannot be (reported). */
static int open_dest(struct extract *x)
{
	int made, err;

	x->dirfd[0] = stp_destdir_open(&extract_cli, x->dest, &made);
	if (x->dirfd[0] < 0)
		return -1;
	err = made ? drop_dest_acls(x) : 0;
	if (!err && (err = stp_destdir_probe_owner(x->dirfd[0], &x->owner)))
		stp_cli_error(&extract_cli, "cannot create a file in %s: %s", x->dest,
			      stp_strerror(err));
	if (err) {
		close(x->dirfd[0]);
		return -1;
	}
	return 0;
}

/* The tree of x->img into DIR. */
static int extract_run(struct extract *x)
{
	int status;

	x->umask = umask(0);
	umask(x->umask);
	if (open_dest(x))
		return STP_EXIT_FAIL;
	if (!strcmp(x->dest, "/"))
		x->dest = ""; /* messages: "/a/b", not "//a/b" */
	raise_fd_limit();
	init_dirfds(x);
	status = extract_tree(x);
	close(x->dirfd[0]);
	return status;
}

/* The image is opened once: the PATHs are checked in the image extracted (one opened
 * again could be another by then), before DIR is touched. */
static int extract_paths(struct extract *x, char **paths, size_t n)
{
	struct stp_image *img;
	int err = 0, status = STP_EXIT_FAIL;

	if (stp_cli_open(&extract_cli, x->image, &img))
		return STP_EXIT_FAIL;
	x->img = img;
	if (n && (err = select_paths(x, paths, n)) == -ENOMEM)
		stp_cli_error(&extract_cli, "out of memory");
	if (!err)
		status = extract_run(x);
	stp_image_close(img);
	x->img = NULL;
	if (!err && (fflush(stdout) || ferror(stdout))) {
		stp_cli_error(&extract_cli, "writing to standard output: %s", stp_strerror(-errno));
		status = STP_EXIT_FAIL;
	}
	for (size_t i = 0; i < x->nselect; i++)
		free(x->select[i]);
	free(x->select);
	return status;
}

enum { OPT_XATTRS = 256, OPT_NO_XATTRS, OPT_ACLS, OPT_NO_ACLS, OPT_NO_DEVICES, OPT_NO_SETUID };

int stp_cmd_extract(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tar", no_argument, NULL, 't' }, { "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "xattrs", no_argument, NULL, OPT_XATTRS },
		{ "no-xattrs", no_argument, NULL, OPT_NO_XATTRS },
		{ "acls", no_argument, NULL, OPT_ACLS },
		{ "no-acls", no_argument, NULL, OPT_NO_ACLS },
		/* mount(8)'s names for the same rules: nodev, nosuid */
		{ "no-devices", no_argument, NULL, OPT_NO_DEVICES },
		{ "nodev", no_argument, NULL, OPT_NO_DEVICES },
		{ "no-setuid", no_argument, NULL, OPT_NO_SETUID },
		{ "nosuid", no_argument, NULL, OPT_NO_SETUID },
		STP_CLI_LONGOPTS, { 0 }
	};
	/* as bsdtar -p for root; for a user, GNU tar's caution, user.* aside */
	int root = geteuid() == 0, opt, status, tar = 0, chosen = 0, verbose = 0, quiet = 0;
	struct extract x = { .restore_owners = root, .euid = geteuid(),
			     .xattrs = root ? XATTRS_ROOT : XATTRS_USER, .acls = root };

	stp_cli_init(&extract_cli, argv);
	while ((opt = getopt_long(argc, argv, "qtv" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 't')
			tar = 1;
		else if (opt == OPT_XATTRS || opt == OPT_NO_XATTRS)
			x.xattrs = opt == OPT_XATTRS ? XATTRS_ALL : XATTRS_NONE;
		else if (opt == OPT_ACLS || opt == OPT_NO_ACLS)
			x.acls = opt == OPT_ACLS;
		else if (opt == OPT_NO_DEVICES)
			x.no_devices = 1;
		else if (opt == OPT_NO_SETUID)
			x.no_setuid = 1;
		else if (opt == 'v')
			verbose = x.list = 1;
		else if (opt == 'q')
			quiet = 1;
		else
			return stp_cli_other_option(&extract_cli, opt);
		chosen |= opt >= OPT_XATTRS;
	}
	if (tar && chosen) {
		stp_cli_error(&extract_cli, "--tar keeps every entry, mode, extended attribute "
			      "and ACL: --xattrs, --no-xattrs, --acls, --no-acls, --no-devices and "
			      "--no-setuid are for a directory");
		return STP_EXIT_USAGE;
	}
	stp_cli_bound_messages(verbose ? 0 : STP_CLI_KIND_LIMIT);
	if ((status = stp_cli_operands(&extract_cli, argc, tar ? 1 : 2, tar ? 2 : INT_MAX)))
		return status;
	/* -v's list on a terminal would be written over by the line */
	stp_progress_want(extract_cli.name, quiet || (x.list && isatty(STDOUT_FILENO)));
	if (tar)
		return stp_tarout_run(&extract_cli, argv[optind], argv[optind + 1], x.list);
	x.image = argv[optind];
	x.dest = argv[optind + 1];
	return extract_paths(&x, argv + optind + 2, (size_t)(argc - optind - 2));
}
