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
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cachedir.h"
#include "diskcache.h"
#include "fetcher.h"
#include "format.h"
#include "hash.h"
#include "monlog.h"
#include "monproto.h"
#include "pubindex.h"
#include "published.h"
#include "setup.h"
#include "util.h"

#define BLOCKS_DIR "blocks"
/* Set on a stored block file once its bytes were found to hash to its name. */
#define VERIFIED_XATTR "user.stipple.sound"
#define FANOUT 256u
/* A trim lists fan-out directories until it has seen this many files (all of them in a
 * store of fewer), and no more unless the store is still over its bound. */
#define SAMPLE_MIN 1024u
#define SAMPLE_MAX (SAMPLE_MIN + (1u << 16)) /* and the rest of the last directory's */

/* SUB beneath DIRFD, made 0700 when missing, opened when it is a directory (not a
 * link) of the mounting user's that no one else may write. */
static int open_subdir(int dirfd, const char *sub)
{
	struct stat st;
	int fd;

	if (mkdirat(dirfd, sub, 0700) && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOTDIR || errno == ELOOP ? -ENOTDIR : -errno;
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* FD (a file of LEN bytes), or the same file opened read-write when it is empty, while
 * *WRITABLE lasts (one spent): a fetcher may write a block into a file that holds none,
 * never change one that holds a block (another mount may be serving it). FD is taken;
 * the descriptor, or a negative errno (-ENOSPC: empty, and no writable file left). */
static int writable_if_empty(int fd, uint64_t len, uint64_t *writable)
{
	char path[32];
	int rw;

	if (len)
		return fd;
	if (!*writable) {
		rw = -ENOSPC;
	} else {
		(*writable)--;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		rw = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
		rw = rw < 0 ? -errno : rw;
	}
	close(fd);
	return rw;
}

/* Whether FD (LEN bytes) holds the block hashing to SHA. */
static bool hashes_to(int fd, uint64_t len, const uint8_t sha[32])
{
	uint8_t got[STP_SIG_HASH_SIZE];
	void *p = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);

	if (p == MAP_FAILED)
		return false;
	stp_sign_hash(p, (size_t)len, got);
	munmap(p, (size_t)len);
	return !memcmp(got, sha, sizeof(got));
}

/* Whether FD, a file of LEN bytes that no mount holds (an exclusive lock had at once),
 * holds something other than the block hashing to SHA: what a fetcher turned hostile
 * wrote into the empty file of another image's block, which that image's mounts would
 * get read-only for ever. Each file is hashed once: found sound, it is marked with an
 * xattr that no confined process can set (their filters allow no xattr call). */
static bool holds_junk(int fd, uint64_t len, const uint8_t sha[32])
{
	char mark;
	bool junk;

	if (!len || fgetxattr(fd, VERIFIED_XATTR, &mark, sizeof(mark)) == (ssize_t)sizeof(mark) ||
	    flock(fd, LOCK_EX | LOCK_NB))
		return false;
	junk = !hashes_to(fd, len, sha);
	if (!junk)
		fsetxattr(fd, VERIFIED_XATTR, "1", 1, 0); /* else hashed again next time */
	flock(fd, LOCK_UN);
	return junk;
}

/* The file LEAF beneath SUB of the block hashing to SHA, opened, its bytes into *LEN;
 * made empty only while *WRITABLE lasts (no file made that nothing may write). A file
 * holding junk is removed and made anew. -ENOENT when there is none to give. */
static int open_block_file(int sub, const char *leaf, const uint8_t sha[32],
			   const uint64_t *writable, uint64_t *len)
{
	int fd = stp_cachedir_open_private(sub, leaf, O_RDONLY, len);

	if (fd >= 0 && holds_junk(fd, *len, sha)) {
		close(fd);
		fd = unlinkat(sub, leaf, 0) ? -errno : -ENOENT;
	}
	if (fd == -ENOENT && *writable)
		fd = stp_cachedir_open_private(sub, leaf, O_RDONLY | O_CREAT, len);
	return fd;
}

/* The file of the block hashing to SHA, opened or made (open_block_file), locked shared
 * (the pin) and marked used now; a negative errno when it cannot be. */
static int take_block(int blocks, const uint8_t sha[32], uint64_t *writable)
{
	char name[STP_PUBINDEX_NAME_MAX];
	uint64_t len;
	int sub, fd;

	stp_pubindex_block_name(sha, name);
	name[2] = '\0';
	sub = open_subdir(blocks, name);
	if (sub < 0)
		return sub;
	fd = open_block_file(sub, name + 3, sha, writable, &len);
	close(sub);
	if (fd < 0)
		return fd == -ENOENT ? -ENOSPC : fd;
	fd = writable_if_empty(fd, len, writable);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_SH | LOCK_NB)) { /* held exclusively: by no mount; not waited for */
		close(fd);
		return -errno;
	}
	futimens(fd, NULL); /* the store's LRU order */
	return fd;
}

/* One batch: the files of its first TAKE blocks, sent back on CTL; STOP: the last. */
static int answer_batch(int blocks, int ctl, const struct stp_fetch_blocks *b, uint32_t take,
			bool stop, uint64_t *writable)
{
	struct stp_fetch_store st = { .first = b->first, .stop = stop };
	int fds[STP_FETCH_BATCH], err;

	for (uint32_t k = 0; k < take && k < b->count; k++) {
		int fd = take_block(blocks, b->sha[k], writable);

		if (fd < 0)
			continue; /* that block is fetched each time */
		st.which[st.nfds] = k;
		fds[st.nfds++] = fd;
	}
	err = stp_msg_send_fds(ctl, STP_MSG_STORE, &st, sizeof(st), fds, st.nfds);
	for (uint32_t k = 0; k < st.nfds; k++)
		close(fds[k]); /* the fetcher's copies hold the locks */
	return err;
}

/* Files for the first FILES of the OFFERED blocks the fetcher offers (fetcher.h), at
 * most WRITABLE of them writable: the batch that reaches FILES is the last, STOP said
 * when the fetcher would offer more. */
static int exchange(int blocks, int ctl, uint64_t offered, uint64_t files, uint64_t writable,
		    int64_t deadline)
{
	uint8_t *buf = malloc(STP_MSG_MAX);
	int err = buf ? 0 : -ENOMEM;

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

			err = answer_batch(blocks, ctl, &b, (uint32_t)take,
					   first + take == files && files < offered, &writable);
			first += take;
		}
	}
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
	uint64_t n = offered < sb->block_count ? offered : sb->block_count;

	return n < STP_FETCH_STORE_MAX ? n : STP_FETCH_STORE_MAX;
}

struct entry {
	char name[STP_PUBINDEX_NAME_MAX];
	int64_t mtime;
	uint64_t bytes;
};

/* What a trim has seen of the store: the fan-out directories it listed, the bytes their
 * files hold, and their block files (at most SAMPLE_MAX between two evictions). */
struct sample {
	struct entry *e;
	size_t n;
	unsigned dirs;
	uint64_t bytes;
};

static int by_age(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;

	return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return !s[n];
}

static bool remove_unused(int blocks, const char *name);

/* The block files of fan-out directory SUB (its name) into S (the ones past SAMPLE_MAX
 * only summed). Empty files, blocks a mount never fetched, are removed as they are met,
 * once no mount holds them: however many a hostile index had made, every one is seen
 * when its directory is. */
static void list_sub(int blocks, const char *sub, struct sample *s)
{
	int fd = openat(blocks, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char name[STP_PUBINDEX_NAME_MAX];
		struct stat st;

		if (!is_hex(de->d_name, 64) || strncmp(de->d_name, sub, 2) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		memcpy(name, sub, 2);
		name[2] = '/';
		memcpy(name + 3, de->d_name, 65); /* 64 hex digits and the NUL */
		if (!st.st_size && remove_unused(blocks, name))
			continue;
		s->bytes += (uint64_t)st.st_blocks * 512;
		if (s->n == SAMPLE_MAX)
			continue;
		memcpy(s->e[s->n].name, name, sizeof(name));
		s->e[s->n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		s->e[s->n++].bytes = (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	s->dirs++;
}

/* Removes NAME when no mount holds it (an exclusive lock had at once): true if it did. */
static bool remove_unused(int blocks, const char *name)
{
	int fd = openat(blocks, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	bool gone = false;

	if (fd < 0)
		return false;
	gone = !flock(fd, LOCK_EX | LOCK_NB) && !unlinkat(blocks, name, 0);
	close(fd);
	return gone;
}

/* The store's bytes as S's directories stand for them: blocks are named by their hash,
 * so each fan-out directory holds about a 256th of them. */
static uint64_t estimate(const struct sample *s)
{
	return s->dirs >= FANOUT ? s->bytes : s->bytes / s->dirs * FANOUT;
}

/* Lists S's next directories (round the fan-out from START) until it has SAMPLE_MIN more
 * files or every directory was listed. */
static void walk(int blocks, struct sample *s, unsigned start)
{
	size_t from = s->n;

	while (s->dirs < FANOUT && s->n - from < SAMPLE_MIN) {
		char sub[3];

		snprintf(sub, sizeof(sub), "%02x", (start + s->dirs) % FANOUT);
		list_sub(blocks, sub, s);
	}
}

/* Removes S's least recently mounted files no mount holds until the estimate fits in
 * LIMIT or S has none left: each stands for FANOUT / s->dirs times its bytes, the share
 * of the store's excess that its directories hold. */
static void evict(int blocks, struct sample *s, uint64_t limit)
{
	qsort(s->e, s->n, sizeof(*s->e), by_age);
	for (size_t i = 0; i < s->n && estimate(s) > limit; i++)
		if (remove_unused(blocks, s->e[i].name))
			s->bytes -= s->e[i].bytes;
	s->n = 0;
}

uint64_t stp_store_trim(int blocks, uint64_t limit)
{
	struct sample s = { calloc(SAMPLE_MAX, sizeof(*s.e)), 0, 0, 0 };
	unsigned start = 0;

	if (!s.e)
		return limit;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != (ssize_t)sizeof(start))
		start = (unsigned)(stp_now_ns() / 1000);
	do {
		walk(blocks, &s, start);
		evict(blocks, &s, limit);
	} while (estimate(&s) > limit && s.dirs < FANOUT);
	free(s.e);
	return estimate(&s);
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

int stp_store_attach(const char *dir, uint64_t limit, const char *prog, int ctl,
		     const struct stp_superblock *sb, uint64_t offered, uint64_t file_max)
{
	int64_t deadline = (int64_t)stp_now_ns() + STP_MOUNT_DEADLINE_MS * 1000000ll;
	int dirfd, fd = -1, err = stp_cachedir_open_dir(dir, &dirfd);
	uint64_t held;

	if (!err) {
		fd = open_subdir(dirfd, BLOCKS_DIR);
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
		if (offered > STP_FETCH_STORE_MAX)
			offered = STP_FETCH_STORE_MAX; /* the fetcher offers no more (fetcher.h) */
		err = exchange(fd, ctl, offered, stp_store_files_max(sb, offered),
			       stp_store_writable_max(limit, file_max), deadline);
		held = stp_store_trim(fd, limit);
		flock(fd, LOCK_UN);
	}
	if (!err) {
		struct stp_fetch_room room = { held < limit ? limit - held : 0 };

		err = stp_msg_send(ctl, STP_MSG_ROOM, &room, sizeof(room));
	}
	close(fd);
	if (err)
		stp_monlog_say(prog, "warning: store %s/" BLOCKS_DIR ": %s; going on without it",
			       dir, stp_strerror(err));
	return err;
}
