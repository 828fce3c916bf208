/* SPDX-License-Identifier: MIT */
/* The store of published images' blocks (store.h). */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cachedir.h"
#include "diskcache.h"
#include "fetcher.h"
#include "format.h"
#include "hash.h"
#include "ledger.h"
#include "monitor.h"
#include "monlog.h"
#include "monproto.h"
#include "pubindex.h"
#include "published.h"
#include "setup.h"
#include "util.h"

#define BLOCKS_DIR "blocks"
#define KEY_FILE "fanout.key"
#define LEDGER_FILE "ledger"
#define LEDGER_NEW "ledger.new"
/* Set on a stored block file once its bytes were found to hash to its name. */
#define VERIFIED_XATTR "user.stipple.sound"
#define FANOUT STP_LEDGER_FANOUT
#define KEY_SIZE STP_LEDGER_KEY_SIZE
/* A trim lists fan-out directories until it has seen this many files (all of them in a
 * store of fewer), and no more unless the store is still over its bound. */
#define SAMPLE_MIN 1024u
#define SAMPLE_MAX (SAMPLE_MIN + (1u << 16)) /* and the rest of the last directory's */

/* One attach's or trim's view of the store. */
struct store {
	int blocks;
	struct stp_ledger l;
	uint64_t writable;       /* read-write files this mount may still be handed */
	uint32_t group;          /* this mount's in L */
	uint32_t earlier;        /* L's pending files of live mounts before this one's */
	bool grouped;            /* GROUP made */
	uint64_t handed;         /* read-write files handed to this mount */
	pid_t fetcher;           /* its fetcher (0: not known) */
	uint64_t block_max;      /* the longest a block of the image may be stored */
	uint64_t hashed;         /* bytes of files hashed for junk: STP_STORE_HASH_BUDGET */
};

/* "HH/H64": the path of SHA's file beneath the blocks directory. */
static void block_path(const struct stp_ledger *l, const uint8_t sha[32],
		       char path[STP_PUBINDEX_NAME_MAX])
{
	char hex[STP_PUBINDEX_NAME_MAX];

	stp_pubindex_block_name(sha, hex);
	snprintf(path, STP_PUBINDEX_NAME_MAX, "%02x/%s", stp_ledger_fanout(l, sha), hex + 3);
}

/* The store's key into KEY, made when missing or damaged: *MADE then (every file laid
 * out under another key, or by a version without one, is out of place). */
static int load_key(int blocks, uint8_t key[KEY_SIZE], bool *made)
{
	uint64_t len;
	int fd = stp_cachedir_open_private(blocks, KEY_FILE, O_RDONLY, &len), err;

	*made = false;
	if (fd >= 0) {
		err = len == KEY_SIZE ? stp_pread_full(fd, key, KEY_SIZE, 0) : -EIO;
		close(fd);
		if (!err)
			return 0;
		stp_monitor_cache_remove(blocks, KEY_FILE);
	}
	fd = stp_cachedir_open_private(blocks, KEY_FILE, O_RDWR | O_CREAT, &len);
	if (fd < 0)
		return fd;
	err = getrandom(key, KEY_SIZE, 0) != (ssize_t)KEY_SIZE ? -EIO
							       : stp_pwrite_full(fd, key, KEY_SIZE, 0);
	if (!err && fsync(fd))
		err = -errno;
	close(fd);
	if (err)
		stp_monitor_cache_remove(blocks, KEY_FILE);
	*made = !err;
	return err;
}

/* The ledger as its file holds it, when it holds one whole (ledger.h). */
static void load_ledger(int blocks, struct stp_ledger *l)
{
	uint64_t len;
	int fd = stp_cachedir_open_private(blocks, LEDGER_FILE, O_RDONLY, &len);

	if (fd < 0)
		return;
	stp_ledger_read(l, fd, len);
	close(fd);
}

/* Writes the ledger anew (a new file renamed over the old: a torn one is never read
 * back, and then only costs a whole listing). */
static void save_ledger(int blocks, struct stp_ledger *l)
{
	uint64_t len;
	int fd, err;

	stp_monitor_cache_remove(blocks, LEDGER_NEW);
	fd = stp_cachedir_open_private(blocks, LEDGER_NEW, O_RDWR | O_CREAT, &len);
	if (fd < 0)
		return;
	err = stp_ledger_write(l, fd);
	close(fd);
	if (err || stp_monitor_cache_rename(blocks, LEDGER_NEW, LEDGER_FILE))
		stp_monitor_cache_remove(blocks, LEDGER_NEW);
}

static void free_store(struct store *st)
{
	stp_ledger_free(&st->l);
}

/* SHA's file: whether a mount holds it (an exclusive lock not had at once), its bytes
 * into *BYTES (0 when there is none). */
static bool held_file(const struct store *st, const uint8_t sha[32], uint64_t *bytes)
{
	char path[STP_PUBINDEX_NAME_MAX];
	struct stat sb;
	bool held;
	int fd;

	block_path(&st->l, sha, path);
	fd = stp_monitor_cache_open(st->blocks, path, O_RDONLY);
	*bytes = 0;
	if (fd < 0)
		return false;
	if (!fstat(fd, &sb) && S_ISREG(sb.st_mode))
		*bytes = (uint64_t)sb.st_blocks * 512;
	held = flock(fd, LOCK_EX | LOCK_NB) != 0;
	close(fd);
	return held;
}

/* When process PID started (/proc's starttime, in clock ticks since boot): 0 when it
 * has ended (or is not known). With the pid, it names the process whatever pid reuse. */
static uint64_t started(pid_t pid)
{
	char buf[512], *end;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	if (pid <= 0)
		return 0;
	fd = stp_monitor_open_proc(pid, "stat");
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	end = strrchr(buf, ')'); /* the name may hold anything but this last ')' */
	/* after ") ": state, then fields 4 to 21, then starttime (22) */
	if (!end || sscanf(end + 2, "%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				    "%*s %*s %*s %*s %*s %*s %llu", &start) != 1)
		return 0;
	return start;
}

/* Counts what the mounts that ended wrote (stp_ledger_settle): a group whose files no
 * mount holds is over. A live mount holds all its files, so one file held keeps its group
 * (the first one looked at, most often); a file another mount holds since keeps it too,
 * which only counts it longer. */
static void settle(struct store *st)
{
	struct stp_ledger *l = &st->l;
	uint8_t *state = calloc(l->ngroups + 1u, 1);
	uint64_t *bytes = calloc(l->npend + 1u, sizeof(*bytes));

	if (state && bytes) {
		/* a mount whose fetcher has ended writes no more, whoever pins its files */
		for (uint32_t g = 0; g < l->ngroups; g++)
			if (l->g[g].pid && started((pid_t)l->g[g].pid) != l->g[g].start)
				state[g] = STP_LEDGER_ENDED;
		/* a group none of whose files is held had each looked at here */
		for (uint32_t i = 0; i < l->npend; i++) {
			uint8_t *s = &state[l->p[i].group];

			if (*s != STP_LEDGER_HELD && held_file(st, l->p[i].sha, &bytes[i]) &&
			    *s == STP_LEDGER_OVER)
				*s = STP_LEDGER_HELD;
		}
		stp_ledger_settle(l, state, bytes);
	}
	free(state);
	free(bytes);
}

/* The store's key and ledger under BLOCKS, the mounts that ended settled. */
static int open_store(struct store *st, int blocks)
{
	bool made;
	int err;

	memset(st, 0, sizeof(*st));
	st->blocks = blocks;
	err = load_key(blocks, st->l.key, &made);
	if (err)
		return err;
	if (!made)
		load_ledger(blocks, &st->l);
	settle(st);
	return 0;
}

/* FD (a file of LEN bytes), or the same file opened read-write when it is empty, while
 * ST's writable files last (one spent) and the ledger can follow one more: a fetcher may
 * write a block into a file that holds none, never change one that holds a block
 * (another mount may be serving it). FD is taken; the descriptor, or a negative errno
 * (-ENOSPC: empty, and no writable file left). */
static int writable_if_empty(struct store *st, int fd, uint64_t len, const uint8_t sha[32])
{
	struct stp_ledger *l = &st->l;
	int rw;

	if (len)
		return fd;
	if (!st->writable || l->npend >= STP_LEDGER_PENDING_MAX ||
	    stp_ledger_pending_in(l, st->earlier, sha)) {
		rw = -ENOSPC; /* none left, or a live mount may write it (and no file's bytes
			       * may be counted twice) */
	} else {
		st->writable--;
		st->handed++;
		rw = stp_monitor_cache_reopen_rw(fd);
		if (rw >= 0)
			stp_ledger_add_pending(l, sha, st->group);
	}
	close(fd);
	return rw;
}

/* Whether FD (LEN bytes) holds the block hashing to SHA: 1 yes, 0 no, -1 not known (no
 * memory). Read, not mapped (stp_sign_hash_fd): the owner (or a fetcher) may cut the
 * file short meanwhile, which must cost a hash that does not match, not a SIGBUS; and a
 * chunk at a time, so that root's monitor holds one chunk whatever the block size. A
 * file longer than the largest block the image allows is no block of it, and is not
 * read. */
static int hashes_to(const struct store *st, int fd, uint64_t len, const uint8_t sha[32])
{
	uint8_t got[STP_SIG_HASH_SIZE];
	int err;

	if (len > st->block_max)
		return 0;
	err = stp_sign_hash_fd(fd, len, got);
	if (err == -ENOMEM)
		return -1;
	return !err && !memcmp(got, sha, sizeof(got));
}

/* Whether hashing a file of LEN bytes would take the mount past its budget (store.h).
 * None where no mark can be set (UNMARKABLE): every mount would spend it on the same
 * first files, and never reach the others. A file longer than a block costs nothing to
 * find junk (hashes_to reads none of it). */
static bool past_budget(const struct store *st, uint64_t len, bool unmarkable)
{
	return !unmarkable && len <= st->block_max && st->hashed &&
	       len > STP_STORE_HASH_BUDGET - st->hashed;
}

/* Whether FD, a file of LEN bytes that no mount holds (an exclusive lock had at once),
 * holds something other than the block hashing to SHA: what a fetcher turned hostile
 * wrote into the empty file of another image's block, which that image's mounts would
 * get read-only for ever. Each file is hashed once: found sound, it is marked with an
 * xattr that no confined process can set (their filters allow no xattr call). Within
 * the mount's budget (past_budget): past it, the file is a later mount's to hash. */
static bool holds_junk(struct store *st, int fd, uint64_t len, const uint8_t sha[32])
{
	ssize_t marked;
	char mark;
	int sound;

	if (!len)
		return false;
	marked = fgetxattr(fd, VERIFIED_XATTR, &mark, sizeof(mark));
	if (marked == (ssize_t)sizeof(mark) ||
	    past_budget(st, len, marked < 0 && errno == ENOTSUP) ||
	    flock(fd, LOCK_EX | LOCK_NB))
		return false;
	if (len <= st->block_max)
		st->hashed += len < STP_STORE_HASH_BUDGET ? len : STP_STORE_HASH_BUDGET;
	sound = hashes_to(st, fd, len, sha);
	if (sound > 0)
		stp_monitor_cache_mark(fd, VERIFIED_XATTR); /* else hashed again next time */
	flock(fd, LOCK_UN);
	return !sound;
}

/* The file LEAF beneath SUB (fan-out directory D) of the block hashing to SHA, opened,
 * its bytes into *LEN; made empty only while files may be handed writable (no file made
 * that nothing may write). A file holding junk is removed (and its bytes from the
 * ledger) and made anew. -ENOENT when there is none to give. */
static int open_block_file(struct store *st, int sub, unsigned d, const char *leaf,
			   const uint8_t sha[32], uint64_t *len)
{
	int fd = stp_cachedir_open_private(sub, leaf, O_RDONLY, len);
	struct stat sb;

	if (fd >= 0 && holds_junk(st, fd, *len, sha)) {
		uint64_t bytes = fstat(fd, &sb) ? 0 : (uint64_t)sb.st_blocks * 512;

		close(fd);
		fd = stp_monitor_cache_remove(sub, leaf);
		fd = fd ? fd : -ENOENT;
		if (fd == -ENOENT && !stp_ledger_is_pending(&st->l, sha))
			stp_ledger_remove(&st->l, d, bytes);
	}
	if (fd == -ENOENT && st->writable)
		fd = stp_cachedir_open_private(sub, leaf, O_RDONLY | O_CREAT, len);
	return fd;
}

/* The file of the block hashing to SHA, opened or made (open_block_file), locked shared
 * (the pin) and marked used now; a negative errno when it cannot be. A delta's BASE is
 * only opened, and only when its file holds bytes: never made, never handed writable.
 * A base is hashed as a block is (within the budget): the same hash may come again as
 * one of the image's blocks, which the fetcher then holds locked already, so the block's
 * turn could not check it. */
static int take_block(struct store *st, const uint8_t sha[32], bool base)
{
	char path[STP_PUBINDEX_NAME_MAX];
	uint64_t len, writable = st->writable;
	int sub, fd;

	block_path(&st->l, sha, path);
	path[2] = '\0';
	sub = stp_cachedir_open_sub(st->blocks, path);
	if (sub < 0)
		return sub;
	if (base)
		st->writable = 0; /* open_block_file makes no file */
	fd = open_block_file(st, sub, stp_ledger_fanout(&st->l, sha), path + 3, sha, &len);
	st->writable = writable;
	close(sub);
	if (fd < 0)
		return fd == -ENOENT ? -ENOSPC : fd;
	if (base && !len) {
		close(fd);
		return -ENOENT;
	}
	fd = writable_if_empty(st, fd, len, sha);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_SH | LOCK_NB)) { /* held exclusively: by no mount; not waited for */
		close(fd);
		return -errno;
	}
	stp_monitor_cache_touch(fd); /* the store's LRU order */
	return fd;
}

/* One batch: the files of its first TAKE blocks, sent back on CTL; STOP: the last. */
static int answer_batch(struct store *st, int ctl, const struct stp_fetch_blocks *b,
			uint32_t take, bool stop, int64_t deadline)
{
	struct stp_fetch_store fs = { .first = b->first, .stop = stop };
	int fds[STP_FETCH_BATCH], err;

	for (uint32_t k = 0; k < take && k < b->count; k++) {
		int fd = take_block(st, b->sha[k], b->bases);

		if (fd < 0)
			continue; /* that block is fetched each time */
		fs.which[fs.nfds] = k;
		fds[fs.nfds++] = fd;
	}
	/* by the deadline: a fetcher that reads no answer would hold the lock for good */
	err = stp_msg_send_fds_by(ctl, deadline, STP_MSG_STORE, &fs, sizeof(fs), fds, fs.nfds);
	for (uint32_t k = 0; k < fs.nfds; k++)
		close(fds[k]); /* the fetcher's copies hold the locks */
	return err;
}

/* Room in the ledger for this mount: its group and as many files as it may be handed
 * writable. */
static int make_group(struct store *st)
{
	int err = stp_ledger_add_group(&st->l, (uint32_t)st->fetcher, started(st->fetcher),
				       st->writable, &st->group, &st->earlier, &st->writable);

	st->grouped = !err;
	return err;
}

/* Files for the first FILES of the OFFERED blocks the fetcher offers (fetcher.h), at
 * most ST's writable of them writable: the batch that reaches FILES is the last, STOP
 * said when the fetcher would offer more. */
static int exchange(struct store *st, int ctl, uint64_t offered, uint64_t files,
		    int64_t deadline)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int err = buf ? make_group(st) : -ENOMEM;

	for (uint64_t first = 0; !err && first < files;) {
		struct stp_fetch_blocks b;
		uint32_t type;
		size_t len;

		err = stp_msg_recv(ctl, deadline, &type, buf, STP_MSG_MAX, &len);
		if (err == -EPIPE) {
			err = 0; /* the fetcher offered no more: it has no room for them */
			break;
		}
		if (!err && type != STP_MSG_BLOCKS)
			err = -EPROTO;
		if (!err)
			err = stp_fetch_blocks_check(buf, len, first, offered, &b);
		if (!err) {
			uint64_t take = files - first < b.count ? files - first : b.count;

			err = answer_batch(st, ctl, &b, (uint32_t)take,
					   first + take == files && files < offered, deadline);
			first += take;
		}
	}
	/* in hash order for the listing; a file two live mounts were handed (empty, so
	 * handed writable twice) stays in both groups: both keep their room */
	stp_ledger_sort(&st->l);
	free(buf);
	return err;
}

uint64_t stp_store_writable_max(uint64_t limit, uint64_t file_max)
{
	const uint64_t least = STP_PUBLISHED_STORE_UNIT; /* however well a block compresses */

	return limit / (file_max > least ? file_max : least);
}

uint64_t stp_store_files_max(const struct stp_superblock *sb, uint64_t offered)
{
	uint64_t slots = sb->block_count * STP_PUBINDEX_FILES_PER_BLOCK; /* stipple(5) */
	uint64_t n = offered < slots ? offered : slots;

	return n < STP_FETCH_STORE_MAX ? n : STP_FETCH_STORE_MAX;
}

struct entry {
	char name[STP_PUBINDEX_NAME_MAX];
	int64_t mtime;
	uint64_t bytes;
};

/* What a trim has seen of the store: the fan-out directories it listed and their block
 * files (at most SAMPLE_MAX between two evictions). */
struct sample {
	struct entry *e;
	size_t n;
	unsigned dirs;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* NAME's 64 hex digits into SHA: false when it is not such a name. */
static bool parse_name(const char *name, uint8_t sha[32])
{
	for (unsigned i = 0; i < 64; i++) {
		char c = name[i];
		unsigned v = c >= '0' && c <= '9' ? (unsigned)(c - '0') :
			     c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16;

		if (v == 16)
			return false;
		sha[i / 2] = (uint8_t)(i % 2 ? sha[i / 2] | v : v << 4);
	}
	return !name[64];
}

/* Fan-out directory D's block files into S (the ones past SAMPLE_MAX only counted), its
 * bytes into the ledger, as they are now. Files of live mounts' are left to their
 * group's room. Empty files, blocks a mount never fetched, and files out of place (laid
 * out under another key) are removed as they are met, once no mount holds them: however
 * many a hostile index had made, every one is seen when its directory is. */
static void list_sub(struct store *st, unsigned d, struct sample *s)
{
	char sub[3];
	int fd;
	DIR *dir;
	struct dirent *de;
	uint64_t bytes = 0;

	snprintf(sub, sizeof(sub), "%02hhx", (unsigned char)d);
	fd = stp_monitor_cache_open_dir(st->blocks, sub);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	while (dir && (de = readdir(dir))) {
		char name[STP_PUBINDEX_NAME_MAX];
		uint8_t sha[32];
		struct stat sb;
		uint64_t b;
		bool placed;

		if (!parse_name(de->d_name, sha) || stp_ledger_is_pending(&st->l, sha) ||
		    fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode))
			continue;
		memcpy(name, sub, 2);
		name[2] = '/';
		memcpy(name + 3, de->d_name, 65); /* 64 hex digits and the NUL */
		b = (uint64_t)sb.st_blocks * 512;
		placed = stp_ledger_fanout(&st->l, sha) == d;
		if ((!sb.st_size || !placed) &&
		    !stp_monitor_cache_remove_unused(st->blocks, name))
			continue;
		bytes += b;
		if (s->n == SAMPLE_MAX || !placed)
			continue;
		memcpy(s->e[s->n].name, name, sizeof(name));
		s->e[s->n].mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
		s->e[s->n++].bytes = b;
	}
	if (dir)
		closedir(dir);
	else if (fd >= 0)
		close(fd);
	stp_ledger_set_dir(&st->l, d, bytes);
	s->dirs++;
}

/* Lists S's next directories (round the fan-out from START) until it has SAMPLE_MIN more
 * files or every directory was listed. */
static void walk(struct store *st, struct sample *s, unsigned start)
{
	size_t from = s->n;

	while (s->dirs < FANOUT && s->n - from < SAMPLE_MIN)
		list_sub(st, (start + s->dirs) % FANOUT, s);
}

/* Removes S's least recently mounted files no mount holds, up to SHARE bytes, while the
 * store is over LIMIT. */
static void evict(struct store *st, struct sample *s, uint64_t limit, uint64_t share)
{
	uint64_t removed = 0;

	qsort(s->e, s->n, sizeof(*s->e), by_age);
	for (size_t i = 0; i < s->n && st->l.total > limit && removed < share; i++) {
		unsigned d = (unsigned)strtoul(s->e[i].name, NULL, 16);

		if (stp_monitor_cache_remove_unused(st->blocks, s->e[i].name))
			continue;
		stp_ledger_remove(&st->l, d, s->e[i].bytes);
		removed += s->e[i].bytes;
	}
	s->n = 0;
}

/* Lists part of the store, correcting the ledger's directories (first all of them when
 * the ledger knew nothing), and removes the oldest files until the ledger's total fits
 * in LIMIT: each round's directories give their share of the excess (the fan-out being
 * keyed, each holds about as much as any other). */
static void trim(struct store *st, uint64_t limit)
{
	struct sample s = { calloc(SAMPLE_MAX, sizeof(*s.e)), 0, 0 };
	unsigned start = 0;

	if (!s.e)
		return;
	for (unsigned d = 0; !st->l.known && d < FANOUT; d++) {
		list_sub(st, d, &s);
		s.n = 0;
	}
	s.dirs = 0;
	st->l.known = true;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != (ssize_t)sizeof(start))
		start = (unsigned)(stp_now_ns() / 1000);
	do {
		unsigned before = s.dirs;
		uint64_t excess;

		walk(st, &s, start);
		excess = st->l.total > limit ? st->l.total - limit : 0;
		/* rounded up: a few bytes over still cost a file, not the whole listing */
		evict(st, &s, limit, excess / (FANOUT - before) * (s.dirs - before) + !!excess);
	} while (st->l.total > limit && s.dirs < FANOUT);
	free(s.e);
}

uint64_t stp_store_trim(int blocks, uint64_t limit)
{
	struct store st;
	uint64_t held = limit;

	if (!open_store(&st, blocks)) {
		trim(&st, limit);
		save_ledger(blocks, &st.l);
		held = st.l.total;
	}
	free_store(&st);
	return held;
}

/* The blocks directory's exclusive lock, waited for until DEADLINE (another mount may
 * hold it, as long as its own deadline): -ETIMEDOUT past it. */
static int lock_until(int fd, int64_t deadline)
{
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return -errno;
		if ((int64_t)stp_now_ns() >= deadline)
			return -ETIMEDOUT;
		usleep(10000);
	}
	return 0;
}

/* The largest stored block an image of SB may hold: a file longer is no block of it. */
static uint64_t block_max(const struct stp_superblock *sb)
{
	/* hot blocks are smaller (format.c); the superblock was checked */
	return stp_block_stored_max(1ull << (sb->block_log < 40 ? sb->block_log : 40));
}

/* Under the store's lock: the exchange, the trim, and the ROOM this mount is given,
 * charged to the ledger until it ends. */
static int attach_locked(int blocks, uint64_t limit, int ctl, const struct stp_superblock *sb,
			 uint64_t offered, uint64_t file_max, pid_t fetcher, int64_t deadline,
			 uint64_t *room)
{
	struct store st;
	int err = open_store(&st, blocks);

	*room = 0;
	st.fetcher = fetcher;
	if (!err) {
		if (offered > STP_FETCH_STORE_MAX)
			offered = STP_FETCH_STORE_MAX; /* the fetcher offers no more (fetcher.h) */
		/* no more read-write files than the room the ledger leaves now: a fetcher that
		 * does not heed ROOM writes no more than its mount is charged */
		st.writable = stp_store_writable_max(st.l.total < limit ? limit - st.l.total : 0,
						     file_max);
		st.block_max = block_max(sb);
		err = exchange(&st, ctl, offered, stp_store_files_max(sb, offered), deadline);
		trim(&st, limit);
		if (!err)
			*room = st.l.total < limit ? limit - st.l.total : 0;
		if (st.grouped) {
			uint64_t unit = file_max > STP_PUBLISHED_STORE_UNIT ? file_max
									    : STP_PUBLISHED_STORE_UNIT;
			uint64_t most = st.handed * unit; /* <= the room before: no overflow */

			st.l.g[st.group].room = *room > most ? *room : most;
			st.l.total += st.l.g[st.group].room;
		}
		save_ledger(blocks, &st.l);
	}
	free_store(&st);
	return err;
}

int stp_store_attach(const char *dir, uint64_t limit, const char *prog, int ctl,
		     const struct stp_superblock *sb, uint64_t offered, uint64_t file_max,
		     pid_t fetcher)
{
	int64_t deadline = (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
	int dirfd, fd = -1, err = stp_cachedir_open_dir(dir, &dirfd);
	uint64_t room = 0;

	if (!err) {
		fd = stp_cachedir_open_sub(dirfd, BLOCKS_DIR);
		err = fd < 0 ? fd : 0;
		close(dirfd);
	}
	if (err) {
		stp_monlog_say(prog, "warning: store %s/" BLOCKS_DIR ": %s; going on without it",
			       dir, stp_cachedir_dir_error(err));
		return err;
	}
	/* files are taken and removed under it, never both at once */
	err = lock_until(fd, deadline);
	if (err == -ETIMEDOUT) {
		stp_monlog_say(prog, "warning: store %s/" BLOCKS_DIR ": another mount holds it "
			       "past %d s; going on without it", dir, STP_MOUNT_DEADLINE_MS / 1000);
		close(fd);
		return err;
	}
	if (!err) {
		err = attach_locked(fd, limit, ctl, sb, offered, file_max, fetcher, deadline, &room);
		flock(fd, LOCK_UN);
	}
	if (!err) {
		struct stp_fetch_room r = { room };

		err = stp_msg_send_fds_by(ctl, deadline, STP_MSG_ROOM, &r, sizeof(r), NULL, 0);
	}
	close(fd);
	if (err)
		stp_monlog_say(prog, "warning: store %s/" BLOCKS_DIR ": %s; going on without it",
			       dir, stp_strerror(err));
	return err;
}
