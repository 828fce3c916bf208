/* SPDX-License-Identifier: MIT */
/*
 * `stipple extract`: restore the image's tree into a directory.
 *
 * Everything is created relative to the descriptor of its parent directory, always
 * exclusively (O_EXCL, mkdirat, symlinkat, mknodat fail on an existing name), and
 * directories are opened with O_NOFOLLOW: nothing already in DIR, and nothing the image
 * created, is ever followed or overwritten, so no entry can land outside DIR. A
 * directory's own attributes are set once its children are done, so that a read-only
 * directory can still be filled and its mtime is the stored one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cache.h"
#include "cli.h"
#include "commands.h"
#include "fileread.h"
#include "image.h"
#include "tarout.h"
#include "util.h"

static const struct stp_cli extract_cli = {
	.name = "extract",
	.synopsis = "IMAGE DIR\n       stipple extract --tar IMAGE [FILE|-]",
	.summary = "Restore the tree of IMAGE into DIR, which must be absent or an empty "
		   "directory.\nAs root, owners and modes are restored exactly; otherwise the umask\n"
		   "applies and setuid and setgid bits are dropped. With --tar, write the tree\n"
		   "as a pax tar archive to FILE, or to standard output (never a terminal).",
	.options = "  -t, --tar      write a pax tar archive instead of a directory\n"
		   "  -v, --verbose  name every problem (else the first 20 of each kind)\n",
};

#define COPY_CHUNK (1u << 20)
#define EXTRACT_CACHE_BLOCKS 4
/* A path of at most STP_WALK_PATH_MAX bytes has at most half as many components. */
#define DEPTH_MAX (STP_WALK_PATH_MAX / 2 + 1)

static char link_failed; /* marks an inode whose first name could not be extracted */

struct extract {
	const struct stp_image *img;
	const char *image, *dest;
	struct stp_cache *cache;
	char *buf;                    /* COPY_CHUNK bytes */
	const struct stp_superblock *sb; /* the image's: where its blocks lie */
	int restore_owners;           /* root: owners and modes exactly, as tar -p */
	mode_t umask;                 /* otherwise the umask applies to every mode */
	int dirfd[DEPTH_MAX];         /* open directory at each depth, [0] = DIR */
	char **first_name;            /* per inode with nlink > 1: its first path, or &link_failed */
	unsigned long warnings;
	uint8_t xattr_value[STP_XATTR_VALUE_MAX]; /* the attribute being restored */
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

	stp_walk_problem(w, e->path, "%s %s%s: %s", what, x->dest, e->path,
			 stp_strerror(err));
	return err;
}

/* What a callback returns after a reported failure ERR: stop only when fatal. */
static int go_on_unless_fatal(int err)
{
	return err < 0 && is_fatal(err) ? err : 0;
}

/* The xattr calls have no *at form: reach NAME through its directory's descriptor. */
static void proc_path(char *out, size_t len, int dirfd, const char *name)
{
	snprintf(out, len, "/proc/self/fd/%d/%s", dirfd, name);
}

/* Filesystems and non-root users refuse some namespaces (trusted.*, security.*). */
static int xattr_refused(int err)
{
	return err == EPERM || err == EACCES || err == ENOTSUP || err == EOPNOTSUPP;
}

/* Sets the extended attributes on FD, or when FD < 0 on NAME in DIRFD. */
static int restore_xattrs(struct stp_walk *w, const struct stp_walk_entry *e, int fd, int dirfd)
{
	struct extract *x = w->ctx;
	char path[STP_WALK_PATH_MAX + 64], name[STP_XATTR_NAME_MAX + 1];

	if (fd < 0)
		proc_path(path, sizeof(path), dirfd, e->name);
	for (uint32_t i = 0; i < e->inode.xattr_count; i++) {
		struct stp_xattr a;
		int err = stp_image_xattr(x->img, &e->inode, i, &a, name);

		if (!err)
			err = stp_image_xattr_value(x->img, &a, x->xattr_value);
		if (err) {
			stp_walk_problem(w, e->path, "extended attribute %u: %s", i,
					 stp_strerror(err));
			continue;
		}
		err = fd >= 0 ? fsetxattr(fd, name, x->xattr_value, a.value_len, 0)
			      : lsetxattr(path, name, x->xattr_value, a.value_len, 0);
		if (!err)
			continue;
		if (xattr_refused(errno)) {
			stp_cli_error(&extract_cli, "%s%s: extended attribute %s not restored: %s",
				      x->dest, e->path, name, stp_strerror(-errno));
			x->warnings++;
			continue;
		}
		return fail(w, e, "cannot set an extended attribute on", -errno);
	}
	return 0;
}

/* As tar does: root restores the stored mode whole; anyone else gets it less the umask
 * and without setuid and setgid, which on the user's own files would let whoever runs
 * them act as that user, by the image's choice and not the user's. */
static mode_t mode_of(const struct extract *x, const struct stp_inode *in)
{
	if (x->restore_owners)
		return in->mode & 07777;
	return in->mode & 01777 & ~x->umask;
}

/* Owner, xattrs, mode, times of an entry open as FD (a file or a directory). Owner first:
 * chown clears setuid bits and file capabilities. */
static int restore_attrs_fd(struct stp_walk *w, const struct stp_walk_entry *e, int fd)
{
	struct extract *x = w->ctx;
	const struct stp_inode *in = &e->inode;
	struct timespec ts[2] = { { in->mtime_sec, in->mtime_nsec }, { in->mtime_sec, in->mtime_nsec } };
	int err;

	if (x->restore_owners && fchown(fd, in->uid, in->gid))
		return fail(w, e, "cannot set the owner of", -errno);
	err = restore_xattrs(w, e, fd, -1);
	if (err)
		return err;
	if (fchmod(fd, mode_of(x, in)))
		return fail(w, e, "cannot set the mode of", -errno);
	if (futimens(fd, ts))
		return fail(w, e, "cannot set the times of", -errno);
	return 0;
}

/* The same for NAME in DIRFD, which is not opened (symlinks, devices, fifos, sockets). */
static int restore_attrs_at(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	struct extract *x = w->ctx;
	const struct stp_inode *in = &e->inode;
	struct timespec ts[2] = { { in->mtime_sec, in->mtime_nsec }, { in->mtime_sec, in->mtime_nsec } };
	int err;

	if (x->restore_owners && fchownat(dirfd, e->name, in->uid, in->gid, AT_SYMLINK_NOFOLLOW))
		return fail(w, e, "cannot set the owner of", -errno);
	err = restore_xattrs(w, e, -1, dirfd);
	if (err)
		return err;
	/* the name was just created by us and is not a symlink: chmod cannot follow one */
	if (!S_ISLNK(in->mode) && fchmodat(dirfd, e->name, mode_of(x, in), 0))
		return fail(w, e, "cannot set the mode of", -errno);
	if (utimensat(dirfd, e->name, ts, AT_SYMLINK_NOFOLLOW))
		return fail(w, e, "cannot set the times of", -errno);
	return 0;
}

/* Copies extent EXT into FD one block at a time, so that a damaged block is named. */
static int copy_extent(struct stp_walk *w, const struct stp_walk_entry *e,
		       const struct stp_extent *ext, int fd)
{
	struct extract *x = w->ctx;
	uint64_t done = 0;

	while (done < ext->length) {
		uint64_t stream = ext->stream_off + done;
		uint64_t block = stp_sb_block_of(x->sb, stream);
		uint64_t in_block = stp_sb_block_end(x->sb, block) - stream;
		size_t want = (size_t)(ext->length - done < in_block ? ext->length - done : in_block);
		ssize_t n;
		int err;

		if (want > COPY_CHUNK)
			want = COPY_CHUNK;
		n = stp_file_read(x->img, x->cache, &e->inode, ext->file_off + done, want, x->buf);
		if (n <= 0) {
			err = n < 0 ? (int)n : -EUCLEAN;

			stp_walk_problem(w, e->path, "cannot read block %" PRIu64 " (file offset %"
					 PRIu64 "): %s; not extracted", block,
					 ext->file_off + done, stp_strerror(err));
			return err;
		}
		err = stp_pwrite_full(fd, x->buf, (size_t)n, ext->file_off + done);
		if (err)
			return fail(w, e, "cannot write", err);
		done += (uint64_t)n;
	}
	return 0;
}

/* Writes the file's extents; bytes no extent covers stay holes. */
static int write_content(struct stp_walk *w, const struct stp_walk_entry *e, int fd)
{
	struct extract *x = w->ctx;

	if (ftruncate(fd, (off_t)e->inode.size))
		return fail(w, e, "cannot size", -errno);
	for (uint32_t i = 0; i < e->inode.count; i++) {
		struct stp_extent ext;
		int err = stp_image_extent(x->img, &e->inode, i, &ext);

		if (err) {
			stp_walk_problem(w, e->path, "extent %u: %s; not extracted", i,
					 stp_strerror(err));
			return err;
		}
		err = copy_extent(w, e, &ext, fd);
		if (err)
			return err;
	}
	return 0;
}

/* On failure (reported) no file is left under the name. */
static int extract_file(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	int fd, err;

	fd = openat(dirfd, e->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(w, e, "cannot create", -errno);
	err = write_content(w, e, fd);
	if (!err)
		err = restore_attrs_fd(w, e, fd);
	if (close(fd) && !err)
		err = fail(w, e, "cannot write", -errno);
	/* never leave a file whose bytes are not the image's */
	if (err)
		unlinkat(dirfd, e->name, 0);
	return err;
}

static int extract_symlink(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	char *target;
	int err = stp_walk_link_target(w, e, &target);

	if (err)
		return err;
	err = symlinkat(target, dirfd, e->name) ? -errno : 0;
	free(target);
	return err ? fail(w, e, "cannot create", err) : 0;
}

/* Returns 0, 1 when a device was left out with a warning (not root), or an error. */
static int extract_node(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	struct extract *x = w->ctx;
	uint32_t type = e->inode.mode & S_IFMT;
	dev_t rdev = 0;

	if (type == S_IFCHR || type == S_IFBLK)
		rdev = makedev(stp_cli_rdev_major(&e->inode), stp_cli_rdev_minor(&e->inode));

	if (!mknodat(dirfd, e->name, type | 0600, rdev))
		return 0;
	if (errno == EPERM && rdev) {
		fprintf(stderr, "stipple extract: %s%s: device not created: %s\n", x->dest,
			e->path, stp_strerror(-errno));
		x->warnings++;
		return 1;
	}
	return fail(w, e, "cannot create", -errno);
}

/* A further name of an inode already extracted: a hard link to its first name. */
static int extract_link(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd,
			const char *first)
{
	struct extract *x = w->ctx;

	if (first == &link_failed) {
		stp_walk_problem(w, e->path, "not extracted: it is a hard link to a file that "
			"could not be extracted");
		return 0;
	}
	if (linkat(x->dirfd[0], first, dirfd, e->name, 0))
		return go_on_unless_fatal(fail(w, e, "cannot create the hard link", -errno));
	return 0;
}

static int extract_nondir(struct stp_walk *w, const struct stp_walk_entry *e, int dirfd)
{
	struct extract *x = w->ctx;
	char **first = e->inode.nlink > 1 ? &x->first_name[e->ino] : NULL;
	int err;

	if (first && *first)
		return extract_link(w, e, dirfd, *first);
	switch (e->inode.mode & S_IFMT) {
	case S_IFREG:
		err = extract_file(w, e, dirfd);
		break;
	case S_IFLNK:
		err = extract_symlink(w, e, dirfd);
		break;
	case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		err = extract_node(w, e, dirfd);
		break;
	default:
		stp_walk_problem(w, e->path, "unknown file type %#o", e->inode.mode & S_IFMT);
		err = -EUCLEAN;
	}
	if (!err && !S_ISREG(e->inode.mode))
		err = restore_attrs_at(w, e, dirfd);
	if (first) {
		*first = err ? &link_failed : strdup(e->path + 1);
		if (!*first)
			return -ENOMEM;
	}
	return go_on_unless_fatal(err);
}

static int enter_entry(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct extract *x = w->ctx;
	int parent, fd;

	if (e->depth == 0)
		return 0; /* DIR itself, opened already */
	parent = x->dirfd[e->depth - 1];
	if (!S_ISDIR(e->inode.mode))
		return extract_nondir(w, e, parent);
	if (e->depth >= DEPTH_MAX) {
		stp_walk_problem(w, e->path, "nested too deep");
		return STP_WALK_SKIP;
	}
	if (mkdirat(parent, e->name, 0700))
		return go_on_unless_fatal(fail(w, e, "cannot create", -errno)) ?: STP_WALK_SKIP;
	fd = openat(parent, e->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return go_on_unless_fatal(fail(w, e, "cannot open", -errno)) ?: STP_WALK_SKIP;
	x->dirfd[e->depth] = fd;
	return 0;
}

static int leave_dir(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct extract *x = w->ctx;
	int err = restore_attrs_fd(w, e, x->dirfd[e->depth]);

	if (e->depth > 0)
		close(x->dirfd[e->depth]);
	return go_on_unless_fatal(err);
}

/* DIR must be absent (it is created) or an empty directory: never merge into a tree. */
static int open_destination(const char *dest)
{
	struct dirent *d = NULL;
	DIR *dir;
	int fd;

	if (mkdir(dest, 0700) && errno != EEXIST) {
		stp_cli_error(&extract_cli, "cannot create %s: %s", dest, stp_strerror(-errno));
		return -1;
	}
	fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		stp_cli_error(&extract_cli, "cannot open %s: %s", dest, stp_strerror(-errno));
		return -1;
	}
	dir = fdopendir(dup(fd));
	while (dir && (d = readdir(dir)))
		if (strcmp(d->d_name, ".") && strcmp(d->d_name, ".."))
			break;
	if (!dir || d) {
		stp_cli_error(&extract_cli, "%s: %s", dest,
			      dir ? "exists and is not empty" : stp_strerror(-errno));
		close(fd);
		fd = -1;
	}
	if (dir)
		closedir(dir);
	return fd;
}

/* Each directory level holds a descriptor: allow as many as the hard limit permits. */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void free_names(char **names, uint32_t count)
{
	for (uint32_t i = 0; names && i < count; i++)
		if (names[i] != &link_failed)
			free(names[i]);
	free(names);
}

static int extract_tree(struct extract *x)
{
	uint32_t inodes = stp_image_sb(x->img)->inode_count;
	struct stp_walk walk = { .cli = &extract_cli, .img = x->img, .image = x->image,
				 .enter = enter_entry, .leave = leave_dir, .ctx = x };
	int err;

	x->first_name = calloc(inodes ? inodes : 1, sizeof(*x->first_name));
	x->buf = malloc(COPY_CHUNK);
	err = x->first_name && x->buf ? stp_cache_new(x->img, EXTRACT_CACHE_BLOCKS, 1, &x->cache)
				       : -ENOMEM;
	if (!err)
		err = stp_walk_tree(&walk);
	stp_cli_flush_messages();
	if (err)
		stp_cli_problem(&extract_cli, x->image, NULL, "extraction stopped: %s",
				stp_strerror(err));
	else if (walk.problems)
		stp_cli_problem(&extract_cli, x->image, NULL, "%lu entries not extracted or "
				"incomplete in %s", walk.problems, x->dest);
	if (x->cache)
		stp_cache_free(x->cache);
	free(x->buf);
	free_names(x->first_name, inodes);
	return err || walk.problems ? STP_EXIT_FAIL : STP_EXIT_OK;
}

static int extract_run(const char *image, const char *dest)
{
	struct extract x = { .image = image, .dest = dest, .restore_owners = geteuid() == 0,
			     .umask = umask(0) };
	struct stp_image *img;
	int status;

	umask(x.umask);
	if (stp_cli_open(&extract_cli, image, &img))
		return STP_EXIT_FAIL;
	x.img = img;
	x.sb = stp_image_sb(img);
	x.dirfd[0] = open_destination(dest);
	if (x.dirfd[0] < 0) {
		stp_image_close(img);
		return STP_EXIT_FAIL;
	}
	if (!strcmp(dest, "/"))
		x.dest = ""; /* messages: "/a/b", not "//a/b" */
	raise_fd_limit();
	status = extract_tree(&x);
	close(x.dirfd[0]);
	stp_image_close(img);
	return status;
}

int stp_cmd_extract(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "tar", no_argument, NULL, 't' }, { "verbose", no_argument, NULL, 'v' },
		STP_CLI_LONGOPTS, { 0 }
	};
	int opt, status, tar = 0, verbose = 0;

	stp_cli_init(&extract_cli, argv);
	while ((opt = getopt_long(argc, argv, "tv" STP_CLI_SHORTOPTS, longopts, NULL)) != -1) {
		if (opt == 't')
			tar = 1;
		else if (opt == 'v')
			verbose = 1;
		else
			return stp_cli_other_option(&extract_cli, opt);
	}
	stp_cli_bound_messages(verbose ? 0 : STP_CLI_KIND_LIMIT);
	if ((status = stp_cli_operands(&extract_cli, argc, tar ? 1 : 2, 2)))
		return status;
	if (tar)
		return stp_tarout_run(&extract_cli, argv[optind], argv[optind + 1]);
	return extract_run(argv[optind], argv[optind + 1]);
}
