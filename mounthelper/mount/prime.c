/* SPDX-License-Identifier: MIT */
#include "prime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "image.h"

/* Lookups take well under a millisecond each; past this, priming gives up. */
#define PRIME_DEADLINE_MS 10000

/* A file of the hot region: where its first hot byte lies, and its path in the pool. */
struct hot_file {
	uint64_t first;
	uint32_t ino;
	uint32_t path; /* offset in the pool, UINT32_MAX until found */
};

struct plan {
	const struct stp_image *img;
	uint64_t hot_size;
	uint32_t *slot;          /* by inode: index into files, UINT32_MAX when not hot */
	struct hot_file *files;
	uint32_t nfiles;
	char *pool;              /* NUL-terminated paths, relative to the mount's root */
	size_t pool_len, pool_cap;
};

/* The lowest stream offset of INODE's extents inside the hot region, or UINT64_MAX. */
static uint64_t first_hot_byte(const struct plan *p, const struct stp_inode *inode)
{
	uint64_t first = UINT64_MAX;

	for (uint32_t x = 0; x < inode->count; x++) {
		struct stp_extent e;

		if (stp_image_extent(p->img, inode, x, &e))
			break;
		if (e.stream_off < p->hot_size && e.stream_off < first)
			first = e.stream_off;
	}
	return first;
}

static int collect_files(struct plan *p, uint32_t ninodes)
{
	p->slot = malloc((ninodes ? ninodes : 1) * sizeof(*p->slot));
	p->files = malloc((ninodes ? ninodes : 1) * sizeof(*p->files));
	if (!p->slot || !p->files)
		return -ENOMEM;
	for (uint32_t i = 0; i < ninodes; i++) {
		struct stp_inode in;
		uint64_t first;

		p->slot[i] = UINT32_MAX;
		if (stp_image_inode(p->img, i, &in) || !S_ISREG(in.mode))
			continue;
		first = first_hot_byte(p, &in);
		if (first == UINT64_MAX)
			continue;
		p->slot[i] = p->nfiles;
		p->files[p->nfiles++] = (struct hot_file){ first, i, UINT32_MAX };
	}
	return 0;
}

static int pool_add(struct plan *p, const char *s, size_t len, uint32_t *off)
{
	if (p->pool_len + len + 1 > p->pool_cap) {
		size_t cap = p->pool_cap ? p->pool_cap * 2 : 4096;
		char *grown;

		while (cap < p->pool_len + len + 1)
			cap *= 2;
		if (cap > UINT32_MAX || !(grown = realloc(p->pool, cap)))
			return -ENOMEM;
		p->pool = grown;
		p->pool_cap = cap;
	}
	memcpy(p->pool + p->pool_len, s, len);
	p->pool[p->pool_len + len] = '\0';
	*off = (uint32_t)p->pool_len;
	p->pool_len += len + 1;
	return 0;
}

/* A name the kernel could look up: the image is untrusted. */
static int name_ok(const char *name, size_t len)
{
	if (!len || (len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
		return 0;
	return !memchr(name, '/', len) && !memchr(name, '\0', len);
}

/* Directory DIR, at PATH (LEN bytes, empty for the root): finds the paths of its hot
 * files and walks its subdirectories. Each directory is walked once (VISITED), so a
 * damaged image with a loop cannot trap the walk; too deep a path is left out. */
static int walk_dir(struct plan *p, uint32_t dir, char *path, size_t len, uint8_t *visited)
{
	struct stp_inode in;
	int err = 0;

	if (dir >= stp_image_sb(p->img)->inode_count || visited[dir] ||
	    stp_image_inode(p->img, dir, &in) || !S_ISDIR(in.mode))
		return 0;
	visited[dir] = 1;
	for (uint32_t i = 0; !err && i < in.count; i++) {
		struct stp_dirent de;
		const char *name;
		size_t n;

		if (stp_image_dirent(p->img, &in, i, &de, &name))
			break;
		n = len + (len > 0) + de.name_len;
		if (!name_ok(name, de.name_len) || n >= PATH_MAX)
			continue;
		if (len)
			path[len] = '/';
		memcpy(path + len + (len > 0), name, de.name_len);
		path[n] = '\0';
		if (de.dtype == DT_DIR) {
			err = walk_dir(p, de.ino, path, n, visited);
		} else if (de.dtype == DT_REG && de.ino < stp_image_sb(p->img)->inode_count &&
			   p->slot[de.ino] != UINT32_MAX) {
			struct hot_file *f = &p->files[p->slot[de.ino]];

			if (f->path == UINT32_MAX)
				err = pool_add(p, path, n, &f->path);
		}
	}
	return err;
}

static int cmp_first(const void *a, const void *b)
{
	const struct hot_file *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

static int build_plan(struct plan *p)
{
	uint32_t ninodes = stp_image_sb(p->img)->inode_count;
	uint8_t *visited = calloc(ninodes ? ninodes : 1, 1);
	char *path = malloc(PATH_MAX);
	int err = visited && path ? collect_files(p, ninodes) : -ENOMEM;

	if (!err && p->nfiles)
		err = walk_dir(p, 0, path, 0, visited);
	free(visited);
	free(path);
	if (!err)
		qsort(p->files, p->nfiles, sizeof(*p->files), cmp_first);
	return err;
}

/* Looks PATH up under ROOT without leaving it: no symlink, no "..", no other mount is
 * followed, whatever a damaged image says (an O_PATH open sends no FUSE_OPEN). The file
 * found must be image inode INO. Returns 0 or a negative errno. */
static int look_up(int root, const char *path, uint32_t ino)
{
	struct open_how how = {
		.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
			   RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
	struct stat sb;
	int err = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb))
		err = -errno;
	else if (sb.st_ino != (ino_t)ino + 1) /* FUSE inode numbers are the image's plus 1 */
		err = -ESTALE;
	close(fd);
	return err;
}

/* The lookups themselves. The first sign that the mount is gone, or is not the image
 * the plan was made from, or that the kernel cannot confine the walk, ends them. */
static void look_up_all(const struct plan *p, int root)
{
	for (uint32_t i = 0; i < p->nfiles; i++) {
		int err;

		if (p->files[i].path == UINT32_MAX)
			continue;
		err = look_up(root, p->pool + p->files[i].path, p->files[i].ino);
		if (err == -ENOTCONN || err == -ECONNABORTED || err == -ESTALE || err == -ENOSYS)
			break;
	}
}

/* Runs the lookups in a child, which is killed if they take longer than PRIME_DEADLINE_MS:
 * a FUSE request waits until it is answered, and a stopped daemon never answers. The
 * pipe closes when the child exits. */
static int look_up_bounded(const struct plan *p, int root)
{
	struct pollfd pfd = { .events = POLLIN };
	int fds[2], status, ready;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		look_up_all(p, root);
		_exit(0);
	}
	close(fds[1]);
	if (pid < 0) {
		close(fds[0]);
		return -errno;
	}
	pfd.fd = fds[0];
	do
		ready = poll(&pfd, 1, PRIME_DEADLINE_MS);
	while (ready < 0 && errno == EINTR);
	if (ready <= 0)
		kill(pid, SIGKILL);
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return ready > 0 ? 0 : -ETIMEDOUT;
}

/* The root of a FUSE mount (our root is FUSE_ROOT_ID, its st_ino). */
static int is_fuse_root(int fd)
{
	struct statfs fs;
	struct stat st;

	return !fstatfs(fd, &fs) && fs.f_type == FUSE_SUPER_MAGIC && !fstat(fd, &st) &&
	       st.st_ino == 1;
}

int stp_prime_mount(const struct stp_image *img, const char *mountpoint)
{
	struct plan p = { .img = img, .hot_size = stp_image_sb(img)->hot_size };
	int root, err = 0;

	if (!p.hot_size)
		return 0;
	err = build_plan(&p);
	if (!err && p.nfiles) {
		/* held only while priming: an open descriptor keeps the mount busy */
		root = open(mountpoint, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (root < 0) {
			err = -errno;
		} else if (!is_fuse_root(root)) {
			err = -ESTALE; /* something else is there now: look nothing up */
			close(root);
		} else {
			err = look_up_bounded(&p, root);
			close(root);
		}
	}
	free(p.slot);
	free(p.files);
	free(p.pool);
	return err;
}
