/* SPDX-License-Identifier: MIT */
#include "prime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuseino.h"
#include "image.h"
#include "monproto.h"
#include "mountopts.h"
#include "treewalk.h"
#include "util.h"

int stp_prime_wanted(const struct stp_mount_opts *o)
{
	return o->warm_workers && stp_mountopts_stores_pages(o) && !o->no_prime && !o->foreground;
}

/* ---- The plan: daemon side, confined. ---- */

/* A file of the hot region: where its first hot byte lies, and its path in the pool. */
struct hot_file {
	uint64_t first;
	uint32_t ino;
	uint32_t path; /* offset in the pool, UINT32_MAX until found */
};

/* dir_path of a directory the walk is to name. */
#define DIR_WANTED (UINT32_MAX - 1)

/* A name of the image's lookup table: where to look it up, and what it finds. */
struct looked_up {
	uint32_t dir;
	uint32_t ino;  /* STP_PRIME_MISSING until the tree walk meets it */
	uint32_t name; /* offset in the pool */
};

struct stp_prime_plan {
	int err;                 /* what building it met, returned by the send */
	const struct stp_image *img;
	uint64_t hot_size;
	uint32_t *slot;          /* by inode: index into files, UINT32_MAX when not hot */
	struct hot_file *files;
	uint32_t nfiles;
	struct looked_up *names; /* the lookup table's, in its order */
	uint32_t nnames;
	uint32_t *by_name;       /* indexes into names, by directory and name (cmp_name) */
	uint32_t *dir_path;      /* by inode: a directory's path in the pool, DIR_WANTED
				  * until the walk finds it, UINT32_MAX when not wanted */
	char *pool;              /* NUL-terminated paths, relative to the mount's root */
	size_t pool_len, pool_cap;
};

/* Files whose extents reach into the hot region, with the lowest such stream offset. */
static int note_hot_file(void *ctx, uint32_t ino, const struct stp_inode *inode)
{
	struct stp_prime_plan *p = ctx;
	uint64_t first = UINT64_MAX;

	for (uint32_t x = 0; x < inode->count; x++) {
		struct stp_extent e;

		if (stp_image_extent(p->img, inode, x, &e))
			break;
		if (e.stream_off < p->hot_size && e.stream_off < first)
			first = e.stream_off;
	}
	if (first != UINT64_MAX) {
		p->slot[ino] = p->nfiles;
		p->files[p->nfiles++] = (struct hot_file){ first, ino, UINT32_MAX };
	}
	return 0;
}

static int pool_add(struct stp_prime_plan *p, const char *s, size_t len, uint32_t *off)
{
	/* offsets into the pool are 32-bit */
	if (stp_room_for_n(&p->pool, &p->pool_cap, p->pool_len, len + 1, UINT32_MAX))
		return -ENOMEM;
	memcpy(p->pool + p->pool_len, s, len + 1);
	*off = (uint32_t)p->pool_len;
	p->pool_len += len + 1;
	return 0;
}

/* Name L of P against entry E: by directory, then name, as cmp_name sorts them. */
static int cmp_entry(const struct stp_prime_plan *p, const struct looked_up *l,
		     const struct stp_tree_entry *e)
{
	const char *name = p->pool + l->name;

	if (l->dir != e->dir)
		return l->dir < e->dir ? -1 : 1;
	return stp_name_cmp(name, strlen(name), e->name, e->name_len);
}

/* The names that are entry E find its inode: the walk meets each entry once, and the
 * names it never meets stay STP_PRIME_MISSING. */
static void note_found(struct stp_prime_plan *p, const struct stp_tree_entry *e)
{
	uint32_t lo = 0, hi = p->nnames;

	while (lo < hi) { /* the first name not below E */
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp_entry(p, &p->names[p->by_name[mid]], e) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < p->nnames && !cmp_entry(p, &p->names[p->by_name[lo]], e); lo++)
		p->names[p->by_name[lo]].ino = e->ino;
}

/* The first path found for each hot file (a hard link has several), the path of each
 * directory the lookup table names, and what its names find. */
static int note_hot_path(void *ctx, const struct stp_tree_entry *e)
{
	struct stp_prime_plan *p = ctx;
	struct hot_file *f;

	if (p->nnames && p->dir_path[e->dir] != UINT32_MAX)
		note_found(p, e);
	if (e->dtype == DT_DIR && p->dir_path && p->dir_path[e->ino] == DIR_WANTED)
		return pool_add(p, e->path, e->path_len, &p->dir_path[e->ino]);
	if (e->dtype != DT_REG || !p->slot || p->slot[e->ino] == UINT32_MAX)
		return 0;
	f = &p->files[p->slot[e->ino]];
	return f->path == UINT32_MAX ? pool_add(p, e->path, e->path_len, &f->path) : 0;
}

static int cmp_first(const void *a, const void *b)
{
	const struct hot_file *x = a, *y = b;

	if (x->first != y->first)
		return x->first < y->first ? -1 : 1;
	return (x->ino > y->ino) - (x->ino < y->ino);
}

static int find_hot_files(struct stp_prime_plan *p)
{
	uint32_t n = stp_image_sb(p->img)->inode_count;

	p->slot = malloc((n ? n : 1) * sizeof(*p->slot));
	p->files = malloc((n ? n : 1) * sizeof(*p->files));
	if (!p->slot || !p->files)
		return -ENOMEM;
	memset(p->slot, 0xff, n * sizeof(*p->slot));
	return stp_treewalk_files(p->img, note_hot_file, p);
}

/* Records X and Y of P's names by directory, then name (as directories sort them). */
static int cmp_name(const void *x, const void *y, void *ctx)
{
	const struct stp_prime_plan *p = ctx;
	const struct looked_up *a = &p->names[*(const uint32_t *)x];
	const struct looked_up *b = &p->names[*(const uint32_t *)y];

	if (a->dir != b->dir)
		return a->dir < b->dir ? -1 : 1;
	return stp_name_cmp(p->pool + a->name, strlen(p->pool + a->name), p->pool + b->name,
			    strlen(p->pool + b->name));
}

/* The lookup table's names, each read and checked once, and the directories they are
 * in marked DIR_WANTED for the tree walk to name (and to find the names in). A damaged
 * record is skipped (the image reports it) and the rest kept; past the plan's bound on
 * page loads the names left are dropped: priming only saves time. */
static int find_names(struct stp_prime_plan *p)
{
	uint32_t n = stp_image_meta_header(p->img)->lookup_count;
	uint32_t ninodes = stp_image_sb(p->img)->inode_count;
	char name[STP_NAME_MAX + 1];
	int err = 0;

	p->names = malloc((n ? n : 1) * sizeof(*p->names));
	p->by_name = malloc((n ? n : 1) * sizeof(*p->by_name));
	p->dir_path = malloc((ninodes ? ninodes : 1) * sizeof(*p->dir_path));
	if (!p->names || !p->by_name || !p->dir_path)
		return -ENOMEM;
	memset(p->dir_path, 0xff, ninodes * sizeof(*p->dir_path));
	for (uint32_t i = 0; !err && i < n; i++) {
		struct looked_up *l = &p->names[p->nnames];

		l->ino = STP_PRIME_MISSING;
		err = stp_image_lookup_name(p->img, i, &l->dir, name);
		if (err == -ENOBUFS)
			break;
		if (err == -EUCLEAN) {
			err = 0; /* that record alone */
			continue;
		}
		if (!err)
			err = pool_add(p, name, strlen(name), &l->name);
		if (!err) {
			p->dir_path[l->dir] = DIR_WANTED;
			p->nnames++;
		}
	}
	for (uint32_t i = 0; i < p->nnames; i++)
		p->by_name[i] = i;
	qsort_r(p->by_name, p->nnames, sizeof(*p->by_name), cmp_name, p);
	return err;
}

static int build_plan(struct stp_prime_plan *p)
{
	int err = p->hot_size ? find_hot_files(p) : 0;

	if (!err && stp_image_meta_header(p->img)->lookup_count)
		err = find_names(p);
	/* the root's names need no walk: its path is empty */
	if (!err && p->dir_path && p->dir_path[STP_ROOT_INO] == DIR_WANTED)
		err = pool_add(p, "", 0, &p->dir_path[STP_ROOT_INO]);
	if (!err && (p->nfiles || p->nnames))
		err = stp_treewalk_tree(p->img, note_hot_path, p);
	if (!err && p->nfiles)
		qsort(p->files, p->nfiles, sizeof(*p->files), cmp_first);
	return err;
}

/* Messages of entries being packed: uint32 inode, uint16 path length, the path (no NUL). */
struct sender {
	int fd, err;
	uint8_t *buf;
	size_t used;
	size_t name_bytes; /* of the lookup table's paths so far */
};

static void send_entry(struct sender *s, uint32_t ino, const char *dir, const char *name)
{
	size_t dlen = strlen(dir), nlen = name ? strlen(name) : 0;
	size_t len = dlen + (name && dlen) + nlen;

	if (s->err || len >= PATH_MAX)
		return;
	if (s->used + 6 + len > STP_MSG_MAX) {
		s->err = stp_msg_send(s->fd, STP_MSG_PRIME, s->buf, s->used);
		s->used = 0;
	}
	memcpy(s->buf + s->used, &ino, 4);
	memcpy(s->buf + s->used + 4, &(uint16_t){ (uint16_t)len }, 2);
	memcpy(s->buf + s->used + 6, dir, dlen);
	if (name && dlen)
		s->buf[s->used + 6 + dlen] = '/';
	memcpy(s->buf + s->used + 6 + len - nlen, name ? name : "", nlen);
	s->used += 6 + len;
}

/* The hot files first, in the order of the region (the warmer pushes a file's pages
 * only once it is known), then the lookup table's names in the order the start-up
 * looked them up, their paths (directory and name) coming to at most
 * STP_PRIME_NAME_BYTES. */
static int send_entries(const struct stp_prime_plan *p, int fd)
{
	struct sender s = { fd, 0, malloc(STP_MSG_MAX), 0, 0 };

	if (!s.buf)
		return -ENOMEM;
	for (uint32_t i = 0; i < p->nfiles; i++)
		if (p->files[i].path != UINT32_MAX)
			send_entry(&s, p->files[i].ino, p->pool + p->files[i].path, NULL);
	for (uint32_t i = 0; i < p->nnames; i++) {
		const struct looked_up *l = &p->names[i];
		const char *dir = p->dir_path[l->dir] >= DIR_WANTED ? NULL
								    : p->pool + p->dir_path[l->dir];
		const char *name = p->pool + p->names[i].name;

		if (!dir) /* not reached by the walk */
			continue;
		s.name_bytes += strlen(dir) + strlen(name) + 1;
		if (s.name_bytes > STP_PRIME_NAME_BYTES)
			break;
		send_entry(&s, l->ino, dir, name);
	}
	if (!s.err && s.used)
		s.err = stp_msg_send(fd, STP_MSG_PRIME, s.buf, s.used);
	free(s.buf);
	return s.err;
}

int stp_prime_plan_build(const struct stp_image *img, struct stp_prime_plan **out)
{
	struct stp_prime_plan *p = calloc(1, sizeof(*p));

	*out = p;
	if (!p)
		return -ENOMEM;
	p->img = img;
	p->hot_size = stp_image_sb(img)->hot_size;
	p->err = build_plan(p);
	return p->err;
}

int stp_prime_plan_send(const struct stp_prime_plan *p, int fd)
{
	int err = p ? p->err : -ENOMEM, end;

	if (!err)
		err = send_entries(p, fd);
	end = stp_msg_send(fd, STP_MSG_PRIME_END, NULL, 0);
	return err ? err : end;
}

void stp_prime_plan_free(struct stp_prime_plan *p)
{
	if (!p)
		return;
	free(p->slot);
	free(p->files);
	free(p->names);
	free(p->by_name);
	free(p->dir_path);
	free(p->pool);
	free(p);
}

int stp_prime_send_plan(const struct stp_image *img, int fd)
{
	struct stp_prime_plan *p;
	int err;

	stp_prime_plan_build(img, &p);
	err = stp_prime_plan_send(p, fd);
	stp_prime_plan_free(p);
	return err;
}

/* ---- The lookups: monitor side. ---- */

struct stp_prime_list {
	uint32_t *ino;
	uint32_t *path;   /* offsets into pool */
	uint32_t n, cap;
	char *pool;
	size_t pool_len, pool_cap;
};

/* A path the kernel could look up beneath a directory: relative, no empty component. */
static int path_ok(const char *s, size_t len)
{
	if (!len || len >= PATH_MAX || s[0] == '/' || s[len - 1] == '/' || memchr(s, '\0', len))
		return 0;
	return !memmem(s, len, "//", 2);
}

static int list_grow(struct stp_prime_list *l, size_t len)
{
	if (l->n == l->cap) {
		uint32_t cap = l->cap ? l->cap * 2 : 256;
		uint32_t *ino = reallocarray(l->ino, cap, sizeof(*ino));

		if (ino)
			l->ino = ino;
		uint32_t *path = ino ? reallocarray(l->path, cap, sizeof(*path)) : NULL;

		if (!path)
			return -ENOMEM;
		l->path = path;
		l->cap = cap;
	}
	return stp_room_for_n(&l->pool, &l->pool_cap, l->pool_len, len + 1,
			      STP_PRIME_MAX_BYTES);
}

static int list_add_one(struct stp_prime_list *l, uint32_t ino, const char *s, size_t len)
{
	int err;

	if (l->n >= STP_PRIME_MAX_FILES || l->pool_len + len + 1 > STP_PRIME_MAX_BYTES)
		return 0;
	err = list_grow(l, len);
	if (err)
		return err;
	memcpy(l->pool + l->pool_len, s, len);
	l->pool[l->pool_len + len] = '\0';
	l->ino[l->n] = ino;
	l->path[l->n++] = (uint32_t)l->pool_len;
	l->pool_len += len + 1;
	return 0;
}

int stp_prime_list_add(struct stp_prime_list **lp, const void *payload, size_t len)
{
	const uint8_t *p = payload, *end = p + len;

	if (!*lp && !(*lp = calloc(1, sizeof(**lp))))
		return -ENOMEM;
	while (p < end) {
		uint32_t ino;
		uint16_t n;
		int err;

		if (end - p < 6)
			return -EPROTO;
		memcpy(&ino, p, 4);
		memcpy(&n, p + 4, 2);
		if ((size_t)(end - p - 6) < n || !path_ok((const char *)p + 6, n))
			return -EPROTO;
		err = list_add_one(*lp, ino, (const char *)p + 6, n);
		if (err)
			return err;
		p += 6 + n;
	}
	return 0;
}

void stp_prime_list_free(struct stp_prime_list *l)
{
	if (!l)
		return;
	free(l->ino);
	free(l->path);
	free(l->pool);
	free(l);
}

/* PATH beneath ROOT opened with FLAGS, resolved as look_up resolves it; or -1. */
static int open_beneath(int root, const char *path, uint64_t flags)
{
	struct open_how how = {
		.flags = flags | O_NOFOLLOW | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV |
			   RESOLVE_NO_MAGICLINKS,
	};

	return (int)syscall(SYS_openat2, root, path, &how, sizeof(how));
}

/* Looks PATH up under ROOT without leaving it: no symlink, no "..", no other mount is
 * followed (an O_PATH open sends no FUSE_OPEN). The file found must be image inode INO,
 * or, for STP_PRIME_MISSING, none must be (the kernel then keeps a negative entry).
 * Returns 0 or a negative errno. */
static int look_up(int root, const char *path, uint32_t ino)
{
	int fd = open_beneath(root, path, O_PATH);
	struct stat sb;
	int err = 0;

	if (fd < 0)
		return ino == STP_PRIME_MISSING && errno == ENOENT ? 0 : -errno;
	if (ino == STP_PRIME_MISSING)
		err = -ESTALE;
	else if (fstat(fd, &sb))
		err = -errno;
	else if (sb.st_ino != stp_fuseino_of(ino))
		err = -ESTALE;
	close(fd);
	return err;
}

/*
 * The lookups run in up to STREAMS_MAX streams at once, each taking the next name not yet
 * taken, so that they go in the hot region's order whatever one stream waits for: each
 * lookup is a round trip to the daemon, which answers several at once on its threads,
 * and names of one directory are looked up in parallel by the kernel. Measured on 2
 * cores: the 1,724 names of a Node.js hot list took 90 ms in one stream, 56 in two, 62 in
 * three (lstat from as many processes); mount.stipple of that image returned after 66 ms
 * against 87 in one stream, LibreOffice's after 25 against 54.
 */
#define STREAMS_MAX 2

/* The streams' threads are started before the lookup filter, which allows no clone
 * (stp_sandbox_confine_lookups), and wait to be released once it is on every thread. */
struct streams {
	const struct stp_prime_list *l;
	int root;
	int64_t stop_ns;
	unsigned want;	  /* streams, the calling thread's among them (stream_count) */
	unsigned started; /* threads started */
	pthread_t thread[STREAMS_MAX - 1];
	pthread_mutex_t lock;
	pthread_cond_t released_cond;
	bool released;
	atomic_uint next; /* the next name to look up */
	atomic_int end;   /* the first reason to end, which ends every stream */
};

/* Whether ERR ends the lookups: the mount is gone, or is not the image the plan was made
 * from, or the kernel cannot confine the walk, or the time is up. */
static bool ends_lookups(int err)
{
	return err == -ENOTCONN || err == -ECONNABORTED || err == -ESTALE || err == -ENOSYS ||
	       err == -ETIMEDOUT;
}

static void run_stream(struct streams *s)
{
	const struct stp_prime_list *l = s->l;
	uint32_t i;

	while (!atomic_load(&s->end) && (i = atomic_fetch_add(&s->next, 1)) < l->n) {
		int err = stp_now_ns() < (uint64_t)s->stop_ns ?
			  look_up(s->root, l->pool + l->path[i], l->ino[i]) : -ETIMEDOUT;
		int none = 0;

		if (ends_lookups(err))
			atomic_compare_exchange_strong(&s->end, &none, err);
	}
}

static void *wait_then_run(void *arg)
{
	struct streams *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->released)
		pthread_cond_wait(&s->released_cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	run_stream(s);
	return NULL;
}

/* stp_sandbox_confine_lookups's START: the streams beside the calling thread's (a thread
 * that cannot start leaves its share to the others). */
static void start_streams(void *arg)
{
	struct streams *s = arg;

	while (s->started < STREAMS_MAX - 1 && s->started + 1 < s->want &&
	       !pthread_create(&s->thread[s->started], NULL, wait_then_run, s))
		s->started++;
}

/* Lets the threads start_streams started look up: only once the filter is on every
 * thread and the mount is known ours, since each lookup is a request to it. */
static void release_streams(struct streams *s)
{
	pthread_mutex_lock(&s->lock);
	s->released = true;
	pthread_cond_broadcast(&s->released_cond);
	pthread_mutex_unlock(&s->lock);
}

/* Every name of S's list, in its released streams and the calling thread's. The first
 * reason to end (ends_lookups), or 0 when the lookups ended for none. */
static int look_up_all(struct streams *s)
{
	run_stream(s);
	for (unsigned k = 0; k < s->started; k++)
		pthread_join(s->thread[k], NULL);
	return atomic_load(&s->end);
}

/* The streams for L, counted before the filter (which allows no sched_getaffinity): one
 * per CPU the child may run on, at most STREAMS_MAX and one per name. */
static unsigned stream_count(const struct stp_prime_list *l)
{
	cpu_set_t cpus;
	int n = sched_getaffinity(0, sizeof(cpus), &cpus) ? 1 : CPU_COUNT(&cpus);

	if (n > STREAMS_MAX)
		n = STREAMS_MAX;
	if ((uint32_t)n > l->n)
		n = (int)l->n;
	return n < 1 ? 1 : (unsigned)n;
}

/* Whether the mount at ROOT has nodev: a device node there opens nothing of the host. */
static bool mount_nodev(int root)
{
	struct statfs fs;

	return !fstatfs(root, &fs) && (fs.f_flags & ST_NODEV);
}

/* A launch's first open, close and access(2) each cost a round trip that the daemon
 * answers "not supported" once a mount, after which the kernel stops asking: made here,
 * on the first hot regular file, so that a launch after priming meets none of them.
 * Only on a nodev mount: the daemon names the path and answers what it is, and with
 * -o dev it could be a device node, whose open alone can act (a tape rewinds). */
static void settle_first_requests(const struct stp_prime_list *l, int root)
{
	if (!mount_nodev(root))
		return;
	for (uint32_t i = 0; i < l->n; i++) {
		struct stat sb;
		int fd;

		if (l->ino[i] == STP_PRIME_MISSING)
			continue;
		/* one resolution, beneath ROOT; a non-regular file costs at most its own open */
		fd = open_beneath(root, l->pool + l->path[i], O_RDONLY | O_NONBLOCK | O_NOCTTY);
		if (fd < 0)
			continue;
		if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
			close(fd);
			continue;
		}
		syscall(SYS_faccessat2, fd, "", R_OK, AT_EMPTY_PATH);
		close(fd); /* FUSE_FLUSH */
		return;
	}
}

/* The root of a FUSE mount whose root has our root's inode number. */
static int is_fuse_root(int fd)
{
	struct statfs fs;
	struct stat st;

	return !fstatfs(fd, &fs) && fs.f_type == FUSE_SUPER_MAGIC && !fstat(fd, &st) &&
	       st.st_ino == stp_fuseino_of(STP_ROOT_INO);
}

/* Every descriptor but A and B (both above 2) is closed: the child holds nothing else. */
static void keep_only(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	close_range(3, (unsigned)lo - 1, 0);
	close_range((unsigned)lo + 1, (unsigned)hi - 1, 0);
	close_range((unsigned)hi + 1, ~0u, 0);
}

size_t stp_prime_list_count(const struct stp_prime_list *l)
{
	return l ? l->n : 0;
}

/* The child: confined before its first request to the mount (the statfs and stat that
 * check it is ours are requests too), or it sends none. */
void stp_prime_look_up(const struct stp_prime_list *l, int root, int done_fd,
		       enum stp_sandbox_mode mode, const struct stp_sandbox_prog *filter,
		       int64_t stop_ns)
{
	struct streams s = { .l = l, .root = root, .stop_ns = stop_ns, .want = stream_count(l),
			     .lock = PTHREAD_MUTEX_INITIALIZER,
			     .released_cond = PTHREAD_COND_INITIALIZER };
	char err[256];

	keep_only(root, done_fd);
	if (stp_sandbox_confine_lookups(mode, filter, start_streams, &s, err, sizeof(err)))
		_exit(STP_PRIME_NOT_CONFINED);
	if (!is_fuse_root(root))
		_exit(STP_PRIME_NOT_OURS);
	release_streams(&s);
	if (!look_up_all(&s))
		settle_first_requests(l, root);
	_exit(STP_PRIME_LOOKED_UP);
}

int64_t stp_prime_stop_ns(int64_t deadline_ns)
{
	int64_t now = (int64_t)stp_now_ns(), budget = STP_PRIME_BUDGET_MS * 1000000ll;
	int64_t half = (deadline_ns - now) / 2;

	return now + (half < budget ? half : budget);
}

int stp_prime_status(int status)
{
	if (!WIFEXITED(status) || WEXITSTATUS(status) == STP_PRIME_NOT_CONFINED)
		return -EPERM;
	return WEXITSTATUS(status) == STP_PRIME_NOT_OURS ? -ESTALE : 0;
}

int stp_prime_wait_done(int done_fd, int64_t deadline_ns)
{
	struct pollfd pfd = { .fd = done_fd, .events = POLLIN };
	int ready = 0;

	for (;;) {
		int64_t left = deadline_ns - (int64_t)stp_now_ns();

		if (left <= 0)
			break;
		ready = poll(&pfd, 1, (int)((left + 999999) / 1000000));
		if (ready >= 0 || errno != EINTR)
			break;
	}
	return ready > 0 ? 0 : -ETIMEDOUT;
}
