/* SPDX-License-Identifier: MIT */
/* The trim of a published images' store (mounthelper/mount/store.c): a mount lists a
 * bounded part of a large store, not every file (it held the store's lock, and the
 * mount, for a walk of the whole store), whatever hashes a publisher chose, and repeated
 * mounts still bring the store within its bound, the least recently mounted blocks
 * first. Files are placed here as store.h says, by SHA-256 of the store's key and the
 * block's hash, computed by the test from the key file. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fetcher.h"
#include "format.h"
#include "hash.h"
#include "monproto.h"
#include "store.h"
#include "util.h"

#include "check.h"

#define PER_DIR 16u /* files in each of the 256 fan-out directories: 4096 in all */
#define OLD_SEC 1000000000 /* the mtime of the older half (2001); the rest is now */

static char root[] = "/dev/shm/stipple-store-test-XXXXXX";
static const uint8_t key[32] = "the store's key for these tests.";

/* Writes the store's key into the blocks directory BLOCKS, with the 256 fan-out
 * directories. */
static void write_key(const char *blocks)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/fanout.key", blocks);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0 && write(fd, key, sizeof(key)) == (ssize_t)sizeof(key));
	close(fd);
	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", blocks, h);
		mkdir(path, 0700);
	}
}

/* The fan-out directory of SHA under KEY: the first byte of SHA-256(KEY, SHA). */
static unsigned fanout(const uint8_t k[32], const uint8_t sha[32])
{
	uint8_t in[64], out[32];

	memcpy(in, k, 32);
	memcpy(in + 32, sha, 32);
	stp_sign_hash(in, sizeof(in), out);
	return out[0];
}

/* "HH/H64" beneath the blocks directory for SHA. */
static void place(const uint8_t sha[32], char out[70])
{
	int n = snprintf(out, 70, "%02x/", fanout(key, sha));

	for (unsigned i = 0; i < 32; i++)
		n += snprintf(out + n, 70 - (size_t)n, "%02x", sha[i]);
}

/* A file of LEN bytes (of 'x') for SHA in the blocks directory BLOCKS, its mtime
 * MTIME_S unless 0. */
static void put(const char *blocks, const uint8_t sha[32], size_t len, time_t mtime_s)
{
	static char bytes[64 << 10];
	char path[256], rel[70];
	int fd;

	memset(bytes, 'x', sizeof(bytes));
	place(sha, rel);
	snprintf(path, sizeof(path), "%s/%s", blocks, rel);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	CHECK(fd >= 0 && len <= sizeof(bytes) && write(fd, bytes, len) == (ssize_t)len);
	if (mtime_s)
		futimens(fd, (struct timespec[2]){ { mtime_s, 0 }, { mtime_s, 0 } });
	close(fd);
}

/* A store below ROOT: its blocks directory, with its key, into BLOCKS. */
static void make_blocks(char blocks[256])
{
	CHECK(mkdtemp(root));
	snprintf(blocks, 256, "%s/blocks", root);
	CHECK(!mkdir(blocks, 0700));
	write_key(blocks);
}

/* The hash of block I of a store's series S: its first byte S. */
static void series_sha(unsigned s, unsigned i, uint8_t sha[32])
{
	memset(sha, 0, 32);
	sha[0] = (uint8_t)s;
	memcpy(sha + 1, &i, sizeof(i));
}

/* The blocks directory: 256 x PER_DIR one-byte files, every other one old, spread by
 * their hashes. Returns its descriptor. */
static int make_store(void)
{
	uint8_t sha[32];
	int fd;

	CHECK(mkdtemp(root));
	write_key(root);
	for (unsigned h = 0; h < 256; h++)
		for (unsigned i = 0; i < PER_DIR; i++) {
			series_sha(h, i, sha);
			put(root, sha, 1, i % 2 ? OLD_SEC : 0);
		}
	fd = open(root, O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	return fd;
}

/* Sets every fan-out directory's atime to 1970, so that a listing shows (relatime). */
static void reset_atimes(void)
{
	char path[256];

	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", root, h);
		utimensat(AT_FDCWD, path, (struct timespec[2]){ { 1, 0 }, { 0, UTIME_OMIT } }, 0);
	}
}

/* The fan-out directories listed since reset_atimes, and the files they hold into
 * *FILES unless NULL. */
static unsigned listed_files(unsigned *files)
{
	char path[256];
	struct stat st;
	unsigned n = 0;

	if (files)
		*files = 0;
	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", root, h);
		if (stat(path, &st) || st.st_atim.tv_sec <= 1)
			continue;
		n++;
		DIR *d = files ? opendir(path) : NULL;
		struct dirent *de;

		while (d && (de = readdir(d)))
			*files += de->d_name[0] != '.';
		if (d)
			closedir(d);
	}
	return n;
}

static unsigned listed(void)
{
	return listed_files(NULL);
}

/* The bytes the files beneath the blocks directory BLOCKS take. */
static uint64_t du(const char *blocks)
{
	char path[256];
	uint64_t bytes = 0;

	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", blocks, h);
		DIR *d = opendir(path);
		struct dirent *de;
		struct stat st;

		while (d && (de = readdir(d)))
			if (!fstatat(dirfd(d), de->d_name, &st, 0) && S_ISREG(st.st_mode))
				bytes += (uint64_t)st.st_blocks * 512;
		if (d)
			closedir(d);
	}
	return bytes;
}

/* The files left, old and new, and their bytes as the trim counts them. */
static void count(unsigned *old, unsigned *young, uint64_t *bytes)
{
	char path[256];

	*old = *young = 0;
	*bytes = 0;
	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", root, h);
		DIR *d = opendir(path);
		struct dirent *de;

		while (d && (de = readdir(d))) {
			struct stat st;

			if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0))
				continue;
			*bytes += (uint64_t)st.st_blocks * 512;
			if (st.st_mtim.tv_sec == OLD_SEC)
				(*old)++;
			else
				(*young)++;
		}
		if (d)
			closedir(d);
	}
}

static void cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	CHECK(!system(cmd));
}

static void trim_lists_part_of_a_large_store(void)
{
	int fd = make_store();
	unsigned old, young;
	uint64_t bytes, held;

	count(&old, &young, &bytes);
	stp_store_trim(fd, bytes * 2); /* the first lists it whole: its ledger is made */
	reset_atimes();
	held = stp_store_trim(fd, bytes * 2);
	CHECK(listed() >= 1 && listed() <= 80, "%u of 256 directories listed for 1024 of 4096 files",
	      listed());
	CHECK(held == bytes, "the ledger holds %llu of %llu", (unsigned long long)held,
	      (unsigned long long)bytes);
	count(&old, &young, &bytes);
	CHECK(old + young == 256 * PER_DIR, "%u files removed below the bound",
	      256 * PER_DIR - old - young);
	close(fd);
	cleanup();
}

/* A store a few bytes over its bound gives a file from its first directories, and the
 * trim lists no more than its sample (the share of so small an excess was 0 bytes, and
 * the trim went on listing until it had listed the whole store). */
static void a_few_bytes_over_cost_a_file_not_a_listing(void)
{
	int fd = make_store();
	unsigned old, young;
	uint64_t bytes, held;

	count(&old, &young, &bytes);
	stp_store_trim(fd, bytes * 2);
	reset_atimes();
	held = stp_store_trim(fd, bytes - 100);
	CHECK(listed() >= 1 && listed() <= 80, "%u of 256 directories listed", listed());
	CHECK(held <= bytes - 100, "the ledger holds %llu of %llu", (unsigned long long)held,
	      (unsigned long long)bytes - 100);
	count(&old, &young, &bytes);
	CHECK(old + young == 256 * PER_DIR - 1, "%u files removed", 256 * PER_DIR - old - young);
	close(fd);
	cleanup();
}

/* A ledger cut short (or edited) is not believed: the next trim lists the store whole
 * and counts it anew. */
static void a_damaged_ledger_is_made_anew(void)
{
	int fd = make_store(), led;
	unsigned old, young;
	uint64_t bytes, held;
	char path[256];

	count(&old, &young, &bytes);
	stp_store_trim(fd, bytes * 2);
	snprintf(path, sizeof(path), "%s/ledger", root);
	led = open(path, O_WRONLY);
	CHECK(led >= 0 && !ftruncate(led, 100));
	close(led);
	reset_atimes();
	held = stp_store_trim(fd, bytes * 2);
	CHECK(listed() == 256 && held == bytes, "%u directories listed, %llu of %llu bytes",
	      listed(), (unsigned long long)held, (unsigned long long)bytes);
	close(fd);
	cleanup();
}

static void repeated_trims_keep_the_bound_oldest_first(void)
{
	int fd = make_store();
	unsigned old, young;
	uint64_t bytes, limit;

	count(&old, &young, &bytes);
	limit = bytes / 2;
	for (unsigned i = 0; i < 48; i++)
		stp_store_trim(fd, limit);
	count(&old, &young, &bytes);
	CHECK(bytes <= limit * 11 / 10, "%llu bytes held, bound %llu", (unsigned long long)bytes,
	      (unsigned long long)limit);
	CHECK(young >= 128 * PER_DIR * 9 / 10, "%u of %u recent files removed",
	      128 * PER_DIR - young, 128 * PER_DIR);
	CHECK(old <= 128 * PER_DIR / 5, "%u old files left", old);
	close(fd);
	cleanup();
}

/* The fetcher's side of one batch: offers B on CTL and takes the monitor's answer, its
 * descriptors into FDS (*NFDS) and ST. 0, or -1 when anything went wrong. */
static int trade(int ctl, const struct stp_fetch_blocks *b, int *fds, unsigned *nfds,
		 struct stp_fetch_store *st)
{
	uint8_t buf[STP_MSG_MAX];
	uint32_t type;
	size_t len;

	if (stp_msg_send(ctl, STP_MSG_BLOCKS, b, sizeof(*b)) ||
	    stp_msg_recv_fds(ctl, (int64_t)stp_now_ns() + 10000000000ll, &type, buf, sizeof(buf),
			     &len, fds, STP_FETCH_BATCH, nfds) ||
	    type != STP_MSG_STORE || stp_fetch_store_check(buf, len, b, *nfds, st))
		return -1;
	return 0;
}

#define CLAIMED 64u /* blocks the stand-in fetcher offers: 64 KiB each */

struct stand_in {
	int ctl;
	unsigned files, writable, readonly;
	const char *broke; /* the step of the exchange that failed, NULL if none did */
};

/* A fetcher turned hostile (its file size limit lowered to a 64 KiB block's: one that
 * did not lower it gets no writable file): offers CLAIMED hashes, keeps every descriptor, counts the
 * writable ones. Block 2's file already holds bytes (stored by an earlier mount). */
static void *offer(void *arg)
{
	struct stand_in *s = arg;

	for (uint64_t first = 0; first < CLAIMED; first += STP_FETCH_BATCH) {
		struct stp_fetch_blocks b = { .first = first, .count = STP_FETCH_BATCH };
		struct stp_fetch_store st;
		int fds[STP_FETCH_BATCH];
		unsigned nfds = 0;

		for (uint32_t k = 0; k < b.count; k++)
			memset(b.sha[k], (int)(first + k), 32);
		if (trade(s->ctl, &b, fds, &nfds, &st))
			s->broke = "offer a batch or take its answer";
		if (s->broke)
			return NULL;
		for (unsigned k = 0; k < nfds; k++) {
			int mode = fcntl(fds[k], F_GETFL) & O_ACCMODE;

			s->files++;
			s->writable += mode == O_RDWR;
			s->readonly += mode == O_RDONLY;
		}
		if (st.stop)
			break;
	}
	shutdown(s->ctl, SHUT_WR);
	return NULL;
}

/* The file of SHA in the store (path into PATH), holding BYTES. */
static void plant(const uint8_t sha[32], const char *bytes, char path[256])
{
	char rel[70];
	int fd;

	place(sha, rel);
	snprintf(path, 256, "%s/blocks/%s", root, rel);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0 && write(fd, bytes, strlen(bytes)) == (ssize_t)strlen(bytes));
	close(fd);
}

static void hostile_fetcher_gets_few_writable_files(void)
{
	struct stp_superblock sb = { .block_log = 16, .block_count = CLAIMED,
				     .meta_offset = STP_SB_SIZE + CLAIMED * (64u << 10) };
	uint64_t limit = 256 << 10, max = limit / stp_block_stored_max(64u << 10);
	struct stand_in s = { -1, 0, 0, 0, NULL };
	char path[256];
	pthread_t tid;
	int sv[2], rc;

	make_blocks(path);
	plant((const uint8_t[32]){ [0 ... 31] = 0x02 }, "stored", path);
	CHECK(!setxattr(path, "user.stipple.sound", "1", 1, 0)); /* a block found sound */
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	s.ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, offer, &s));
	rc = stp_store_attach(root, limit, "test", sv[0], &sb, CLAIMED,
			      stp_block_stored_max(64u << 10), 0);
	pthread_join(tid, NULL);
	CHECK(rc == 0, "stp_store_attach: %s", strerror(-rc));
	CHECK(!s.broke, "the stand-in fetcher could not %s", s.broke);
	CHECK(s.files > 0 && s.files == s.writable + s.readonly, "%u files, %u writable, %u "
	      "read-only", s.files, s.writable, s.readonly);
	CHECK(s.writable <= max, "%u writable files for %llu bytes of 64 KiB blocks", s.writable,
	      (unsigned long long)limit);
	CHECK(s.readonly == 1, "%u read-only files", s.readonly);
	close(sv[0]);
	close(sv[1]);
	cleanup();
}

#define DEAF_BLOCKS STP_FETCH_STORE_MAX

/* A fetcher turned hostile that offers every batch and reads no answer (review 10 #3). */
static void *offer_deaf(void *arg)
{
	int ctl = *(int *)arg;

	for (uint64_t first = 0; first < DEAF_BLOCKS; first += STP_FETCH_BATCH) {
		struct stp_fetch_blocks b = { .first = first, .count = STP_FETCH_BATCH };

		for (uint32_t k = 0; k < b.count; k++)
			memcpy(b.sha[k], &(uint64_t){ first + k + 1 }, 8);
		if (stp_msg_send(ctl, STP_MSG_BLOCKS, &b, sizeof(b)))
			break;
	}
	return NULL;
}

/* The monitor's answers fill the socket: it gives up by its deadline (the mount's, 10 s),
 * rather than waiting in sendmsg for good with the store's lock held. */
static void deaf_fetcher_cannot_hold_the_monitor(void)
{
	struct stp_superblock sb = { .block_log = 16, .block_count = DEAF_BLOCKS,
				     .meta_offset = STP_SB_SIZE + DEAF_BLOCKS * (64ull << 10) };
	int64_t start = (int64_t)stp_now_ns();
	char path[256];
	pthread_t tid;
	int sv[2], rc;

	make_blocks(path);
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	CHECK(!pthread_create(&tid, NULL, offer_deaf, &sv[1]));
	alarm(60); /* a monitor that waits for good: the test fails, it does not hang */
	rc = stp_store_attach(root, 1 << 20, "test", sv[0], &sb, DEAF_BLOCKS,
			      stp_block_stored_max(64u << 10), 0);
	alarm(0);
	CHECK(rc == -ETIMEDOUT, "stp_store_attach: %s", strerror(-rc));
	CHECK((int64_t)stp_now_ns() - start < 30000000000ll, "the monitor waited %lld ms",
	      (long long)(((int64_t)stp_now_ns() - start) / 1000000));
	shutdown(sv[0], SHUT_RDWR);
	pthread_join(tid, NULL);
	close(sv[0]);
	close(sv[1]);
	cleanup();
}

struct two_blocks {
	int ctl;
	const uint8_t *sha[2];
	int mode[2];  /* O_RDWR, O_RDONLY, or -1: no file */
	off_t size[2];
	bool bases;   /* offered as a delta's bases (fetcher.h: BASES) */
};

/* A fetcher offering two blocks: what it receives for each. */
static void *offer_two(void *arg)
{
	struct two_blocks *t = arg;
	struct stp_fetch_blocks b = { .first = 0, .count = 2, .bases = t->bases };
	struct stp_fetch_store st;
	int fds[STP_FETCH_BATCH];
	unsigned nfds = 0;

	memcpy(b.sha[0], t->sha[0], 32);
	memcpy(b.sha[1], t->sha[1], 32);
	if (trade(t->ctl, &b, fds, &nfds, &st))
		return NULL;
	for (unsigned k = 0; k < nfds; k++) {
		struct stat sb;

		t->mode[st.which[k]] = fcntl(fds[k], F_GETFL) & O_ACCMODE;
		t->size[st.which[k]] = fstat(fds[k], &sb) ? -1 : sb.st_size;
		close(fds[k]);
	}
	shutdown(t->ctl, SHUT_WR);
	return NULL;
}

/* One mount of SB against the stand-in fetcher FETCHER(T): T's modes and sizes say what
 * it was handed (-1: nothing). */
static void attach_with(struct two_blocks *t, const struct stp_superblock *sb,
			void *(*fetcher)(void *))
{
	pthread_t tid;
	int sv[2];

	t->mode[0] = t->mode[1] = -1;
	t->size[0] = t->size[1] = -1;
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	t->ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, fetcher, t));
	stp_store_attach(root, 1 << 20, "test", sv[0], sb, 2, stp_block_stored_max(64u << 10), 0);
	pthread_join(tid, NULL);
	close(sv[0]);
	close(sv[1]);
}

/* A fetcher offering T's first hash as a delta's base, keeping that file (its lock) as
 * a fetcher does, then the same hash as a block: what it receives each time. */
static void *offer_base_then_block(void *arg)
{
	struct two_blocks *t = arg;
	int fds[2][STP_FETCH_BATCH];
	unsigned nfds[2] = { 0, 0 };

	for (unsigned i = 0; i < 2; i++) {
		struct stp_fetch_blocks b = { .first = i, .count = 1, .bases = i == 0 };
		struct stp_fetch_store st;
		struct stat sb;

		memcpy(b.sha[0], t->sha[0], 32);
		if (trade(t->ctl, &b, fds[i], &nfds[i], &st))
			break;
		if (nfds[i]) {
			t->mode[i] = fcntl(fds[i][0], F_GETFL) & O_ACCMODE;
			t->size[i] = fstat(fds[i][0], &sb) ? -1 : sb.st_size;
		}
	}
	for (unsigned i = 0; i < 2; i++)
		for (unsigned k = 0; k < nfds[i]; k++)
			close(fds[i][k]);
	shutdown(t->ctl, SHUT_WR);
	return NULL;
}

/* Junk in a file that is both one of a release's bases and one of its blocks (publish
 * may take a block the release keeps as a base of another): checked in the base's
 * turn, since in the block's the fetcher holds it locked already. Replaced by an empty
 * file, writable, for the block. */
static void junk_base_that_is_also_a_block_is_replaced(void)
{
	static const uint8_t junk_sha[32] = { [0 ... 31] = 0x5c };
	struct stp_superblock sb = { .block_log = 16, .block_count = 2,
				     .meta_offset = STP_SB_SIZE + 2 * (64u << 10) };
	struct two_blocks t = { -1, { junk_sha, junk_sha }, { -1, -1 }, { -1, -1 }, false };
	char path[256];

	make_blocks(path);
	plant(junk_sha, "junk of 19 bytes...", path);
	attach_with(&t, &sb, offer_base_then_block);
	CHECK(t.mode[0] == -1, "as a base: mode %d, %lld bytes", t.mode[0], (long long)t.size[0]);
	CHECK(t.mode[1] == O_RDWR && t.size[1] == 0, "as a block: mode %d, %lld bytes", t.mode[1],
	      (long long)t.size[1]);
	cleanup();
}

/* One mount of SB offering T's two blocks (as bases with BASES) to the store. */
static void offer_two_to(struct two_blocks *t, const struct stp_superblock *sb, bool bases)
{
	t->bases = bases;
	attach_with(t, sb, offer_two);
}

/* A fetcher turned hostile wrote junk into the empty file of another image's block (review
 * 4 #6): that image's mounts got it read-only, junk, for ever. The junk is now replaced by
 * an empty file, writable; a sound block is left as it is, read-only. Offered first as a
 * delta's bases, the files are hashed all the same (the fetcher keeps a base's file
 * locked, so the same hash offered again as a block could not be checked then): the
 * junk is removed and, a base being never made, not handed at all. */
static void junk_in_a_block_file_is_replaced(void)
{
	static const uint8_t junk_sha[32] = { [0 ... 31] = 0x5a };
	/* SHA-256 of "stored" */
	static const char *good = "87b04e58961f9a99d853d4046a0b5b793e7c3e4bbd21f5aca8fb17c20cdb1d8b";
	uint8_t good_sha[32];
	struct stp_superblock sb = { .block_log = 16, .block_count = 2,
				     .meta_offset = STP_SB_SIZE + 2 * (64u << 10) };
	struct two_blocks t = { -1, { junk_sha, good_sha }, { -1, -1 }, { -1, -1 }, false };
	char path[256];

	for (unsigned i = 0; i < 32; i++)
		sscanf(good + 2 * i, "%2hhx", &good_sha[i]);
	make_blocks(path);
	plant(junk_sha, "junk of 19 bytes...", path);
	plant(good_sha, "stored", path);
	offer_two_to(&t, &sb, true);
	CHECK(t.mode[0] == -1, "the junk base's file: mode %d, %lld bytes", t.mode[0],
	      (long long)t.size[0]);
	CHECK(t.mode[1] == O_RDONLY && t.size[1] == 6, "the sound base's file: mode %d, %lld bytes",
	      t.mode[1], (long long)t.size[1]);
	offer_two_to(&t, &sb, false);
	CHECK(t.mode[0] == O_RDWR && t.size[0] == 0, "the junk's file: mode %d, %lld bytes",
	      t.mode[0], (long long)t.size[0]);
	CHECK(t.mode[1] == O_RDONLY && t.size[1] == 6, "the sound block's file: mode %d, %lld bytes",
	      t.mode[1], (long long)t.size[1]);
	cleanup();
}

/* Junk larger than half the hashing budget, in two block files: a mount hashes (and
 * replaces) the first only, and hands the second unchecked, read-only, as it is; the
 * next mount hashes the second. So a mount after one that wrote many files waits for
 * one budget's hashing, and every file is still checked in turn. */
static void junk_is_hashed_within_a_budget(void)
{
	static const uint8_t sha0[32] = { [0 ... 31] = 0x61 }, sha1[32] = { [0 ... 31] = 0x62 };
	const off_t big = (off_t)(STP_STORE_HASH_BUDGET / 2 + 4096);
	struct stp_superblock sb = { .block_log = 25, .block_count = 2,
				     .meta_offset = STP_SB_SIZE + (2ull << 25) };
	struct two_blocks t = { -1, { sha0, sha1 }, { -1, -1 }, { -1, -1 }, false };
	const uint8_t *shas[2] = { sha0, sha1 };
	char path[256];

	make_blocks(path);
	for (unsigned i = 0; i < 2; i++) {
		plant(shas[i], "junk", path);
		CHECK(!truncate(path, big));
	}
	offer_two_to(&t, &sb, false);
	CHECK(t.mode[0] == O_RDWR && t.size[0] == 0, "the first junk: mode %d, %lld bytes",
	      t.mode[0], (long long)t.size[0]);
	CHECK(t.mode[1] == O_RDONLY && t.size[1] == big, "the second, past the budget: mode %d, "
	      "%lld bytes", t.mode[1], (long long)t.size[1]);
	offer_two_to(&t, &sb, false);
	CHECK(t.mode[1] == O_RDWR && t.size[1] == 0, "the second, next time: mode %d, %lld bytes",
	      t.mode[1], (long long)t.size[1]);
	cleanup();
}

#define DECOYS 64u             /* one-byte files per fan-out directory's worth */
#define HEAVY (64u << 10)      /* the publisher's blocks, all of hash 0xff... */
#define ROUND_BLOCKS 1024u     /* offered by each mount */

struct honest {
	int ctl;
	unsigned round;
	uint64_t room;
	uint64_t write_max;      /* the bytes it writes at most (within ROOM) */
	bool live;               /* its descriptors kept in FDS: the mount goes on */
	bool one_hash;           /* every block the same bytes: one hash */
	bool hostile;            /* writes a block into every writable file, whatever ROOM */
	pid_t fetcher;           /* the fetcher's pid told the monitor (0: not known) */
	unsigned pins;           /* first offers the first block of each of as many mounts before */
	int fds[ROUND_BLOCKS];
	unsigned n;
	const char *broke;
};

/* An honest fetcher of an image whose blocks a publisher chose all of one first byte
 * (0xff): offers ROUND_BLOCKS new ones, takes its files and ROOM, writes 64 KiB blocks
 * into its writable files while ROOM (and WRITE_MAX) lasts, then ends (every descriptor
 * closed) unless LIVE. */
static void *honest_mount(void *arg)
{
	static char block[HEAVY];
	struct honest *m = arg;
	int *fds = m->fds;
	unsigned n = 0;
	uint8_t buf[STP_MSG_MAX];
	uint32_t type;
	size_t len;

	memset(block, 'h', sizeof(block));
	for (uint64_t first = 0; first < ROUND_BLOCKS && !m->broke; first += STP_FETCH_BATCH) {
		struct stp_fetch_blocks b = { .first = first, .count = STP_FETCH_BATCH };
		struct stp_fetch_store st;
		unsigned nfds = 0;

		for (uint32_t k = 0; k < b.count; k++) {
			unsigned i = (unsigned)first + k;

			series_sha(0xff, m->one_hash ? 0 : i < m->pins ? i * ROUND_BLOCKS :
				   m->round * ROUND_BLOCKS + i - m->pins, b.sha[k]);
		}
		if (trade(m->ctl, &b, fds + n, &nfds, &st))
			m->broke = "offer a batch or take its answer";
		n += nfds;
		if (m->broke || st.stop)
			break;
	}
	m->n = n;
	shutdown(m->ctl, SHUT_WR);
	if (!m->broke && (stp_msg_recv(m->ctl, (int64_t)stp_now_ns() + 10000000000ll, &type, buf,
				       sizeof(buf), &len) ||
			  type != STP_MSG_ROOM || len != sizeof(struct stp_fetch_room)))
		m->broke = "take ROOM";
	if (!m->broke)
		memcpy(&m->room, buf, sizeof(m->room));
	for (uint64_t k = 0, left = m->hostile ? UINT64_MAX :
			(m->room < m->write_max ? m->room : m->write_max) / HEAVY;
	     k < n; k++) {
		if (left && (fcntl(fds[k], F_GETFL) & O_ACCMODE) == O_RDWR &&
		    write(fds[k], block, sizeof(block)) == (ssize_t)sizeof(block))
			left--;
		if (!m->live)
			close(fds[k]);
	}
	return NULL;
}

/* Mount M (round ROUND) of an image of ROUND_BLOCKS 64 KiB blocks on the store below
 * ROOT, bounded by LIMIT: the monitor's side here, the fetcher's on a thread. */
static void mount_round(struct honest *m, unsigned round, uint64_t limit)
{
	struct stp_superblock sb = { .block_log = 16, .block_count = ROUND_BLOCKS,
				     .meta_offset = STP_SB_SIZE + ROUND_BLOCKS * (uint64_t)HEAVY };
	pthread_t tid;
	int sv[2], rc;

	m->round = round;
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	m->ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, honest_mount, m));
	rc = stp_store_attach(root, limit, "test", sv[0], &sb, ROUND_BLOCKS,
			      stp_block_stored_max(HEAVY), m->fetcher);
	pthread_join(tid, NULL);
	close(sv[0]);
	close(sv[1]);
	CHECK(rc == 0 && !m->broke, "round %u: %s, %s", round, strerror(-rc),
	      m->broke ? m->broke : "");
}

/* The mount M ends. */
static void unmount_round(struct honest *m)
{
	for (unsigned k = 0; k < m->n; k++)
		close(m->fds[k]);
	m->n = 0;
}

/* Review 4 #2: a publisher whose heavy blocks all share a first byte steered the sampled
 * trim (its one directory was unseen by most trims, each granting ROOM as if the store
 * were small): the store reached 10.5 x its bound. 16 mounts, each writing all the ROOM
 * it is told, keep it within twice its bound. */
static void honest_mounts_keep_the_bound_whatever_the_hashes(void)
{
	uint64_t limit, bytes, peak = 0;
	char blocks[256];
	uint8_t sha[32];

	make_blocks(blocks);
	for (unsigned h = 0; h < 256; h++)
		for (unsigned i = 0; i < DECOYS; i++) {
			series_sha(h, i, sha);
			put(blocks, sha, 1, 0);
		}
	limit = du(blocks) + (32u << 20);
	for (unsigned i = 0; i < 512; i++) {
		series_sha(0xff, 1000000 + i, sha);
		put(blocks, sha, HEAVY, 0);
	}
	for (unsigned round = 0; round < 16; round++) {
		static struct honest m = { .write_max = UINT64_MAX };

		mount_round(&m, round, limit);
		bytes = du(blocks);
		peak = bytes > peak ? bytes : peak;
		CHECK(bytes <= 2 * limit, "round %u: ROOM %llu MiB; store %llu MiB, bound %llu MiB",
		      round, (unsigned long long)(m.room >> 20), (unsigned long long)(bytes >> 20),
		      (unsigned long long)(limit >> 20));
	}
	printf("# peak %.2f x the bound\n", (double)peak / (double)limit);
	cleanup();
}

/* Mounts that run at once share the bound: the room a live mount was told stays charged
 * (the sample's estimate gave each start all the room the store had then), and once it
 * ends, what it wrote counts, the rest of its room is free again. */
static void live_mounts_share_the_bound(void)
{
	static struct honest a = { .write_max = 8u << 20, .live = true };
	static struct honest b = { .write_max = UINT64_MAX, .live = true };
	static struct honest c = { .write_max = 0 };
	const uint64_t limit = 32u << 20;
	char blocks[256];

	make_blocks(blocks);
	mount_round(&a, 0, limit);
	CHECK(a.room == limit, "the first mount's room: %llu", (unsigned long long)a.room);
	mount_round(&b, 1, limit);
	CHECK(b.room == 0, "the second mount's room while the first runs: %llu MiB",
	      (unsigned long long)(b.room >> 20));
	unmount_round(&a);
	mount_round(&c, 2, limit);
	CHECK(c.room == limit - (8u << 20), "room once the first ended having written 8 MiB: "
	      "%llu MiB", (unsigned long long)(c.room >> 20));
	CHECK(du(blocks) == 8u << 20, "%llu bytes stored", (unsigned long long)du(blocks));
	unmount_round(&b);
	cleanup();
}

/* Review 6 #1: an index naming one block many times (all its blocks the same bytes) got
 * the one empty file writable as often, and the ledger counted its bytes as often when
 * the mount ended: the next trim evicted sound blocks from a store under its bound. */
static void a_block_named_twice_is_counted_once(void)
{
	static struct honest m = { .write_max = HEAVY, .one_hash = true };
	unsigned files = 0;
	char blocks[256];
	uint8_t sha[32];
	uint64_t held, limit;
	int fd;

	make_blocks(blocks);
	for (unsigned i = 0; i < 4096; i++) {
		series_sha(i & 0xff, i >> 8, sha);
		put(blocks, sha, 4096, 0);
	}
	limit = du(blocks) + (1u << 20);
	fd = open(blocks, O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	stp_store_trim(fd, limit);
	mount_round(&m, 0, limit);
	held = stp_store_trim(fd, limit);
	for (unsigned i = 0; i < 4096; i++) {
		char rel[70], path[400];
		struct stat st;

		series_sha(i & 0xff, i >> 8, sha);
		place(sha, rel);
		snprintf(path, sizeof(path), "%s/%s", blocks, rel);
		files += !stat(path, &st);
	}
	CHECK(files == 4096 && held == du(blocks), "%u of 4096 sound files left; ledger %llu KiB, "
	      "store %llu KiB", files, (unsigned long long)(held >> 10),
	      (unsigned long long)(du(blocks) >> 10));
	close(fd);
	cleanup();
}

/* Review 6 #2: a hostile fetcher writes into every writable file it gets, whatever ROOM
 * says; each mount pins a block of every mount before it, so that none of them is seen
 * to end. Ten such mounts at once keep the store within its bound and a block. */
static void overlapping_hostile_mounts_keep_the_bound(void)
{
	static struct honest m[10];
	const uint64_t limit = 4u << 20;
	char blocks[256];

	make_blocks(blocks);
	for (unsigned r = 0; r < 10; r++) {
		m[r] = (struct honest){ .write_max = UINT64_MAX, .live = true, .hostile = true,
					.pins = r };
		mount_round(&m[r], r, limit);
		CHECK(du(blocks) <= limit + stp_block_stored_max(HEAVY), "mount %u: store %llu KiB, "
		      "bound %llu KiB", r, (unsigned long long)(du(blocks) >> 10),
		      (unsigned long long)(limit >> 10));
	}
	for (unsigned r = 0; r < 10; r++)
		unmount_round(&m[r]);
	cleanup();
}

/* Review 6 #6: a mount that ended stayed "live" while a later mount pinned one of its
 * files, its charge (all the room at its attach) never given back. Its fetcher's end
 * ends it now, whoever holds its files. */
static void an_ended_mount_pinned_by_another_gives_its_room_back(void)
{
	static struct honest a = { .write_max = HEAVY, .live = true };
	static struct honest c = { .write_max = 0 };
	const uint64_t limit = 8u << 20;
	char blocks[256];
	pid_t fetcher = fork();

	if (fetcher == 0) {
		pause();
		_exit(0);
	}
	CHECK(fetcher > 0);
	make_blocks(blocks);
	a.fetcher = fetcher;
	mount_round(&a, 0, limit); /* its files stay held: as a later mount's pins would */
	kill(fetcher, SIGKILL);
	waitpid(fetcher, NULL, 0);
	mount_round(&c, 1, limit);
	CHECK(c.room == limit - du(blocks), "room %llu KiB with %llu KiB stored, bound %llu KiB",
	      (unsigned long long)(c.room >> 10), (unsigned long long)(du(blocks) >> 10),
	      (unsigned long long)(limit >> 10));
	unmount_round(&a);
	cleanup();
}

/* Review 4 #2's corollary: every file in one fan-out directory made each trim list that
 * directory whole. Whatever their hashes, a trim lists about its sample. */
static void trim_work_is_bounded_whatever_the_hashes(void)
{
	uint8_t sha[32];
	unsigned files;
	int fd;

	CHECK(mkdtemp(root));
	write_key(root);
	for (unsigned i = 0; i < 8192; i++) {
		series_sha(0xff, i, sha);
		put(root, sha, 1, 0);
	}
	fd = open(root, O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	stp_store_trim(fd, 1u << 30); /* the first lists it whole: its ledger is made */
	reset_atimes();
	stp_store_trim(fd, 1u << 30);
	listed_files(&files);
	CHECK(files >= 1024 && files <= 2048, "%u of 8192 files listed", files);
	close(fd);
	cleanup();
}

/* BLOCKS/DIR/the hex of SHA into PATH. */
static void name_of(const char *blocks, unsigned dir, const uint8_t sha[32], char path[256])
{
	int n = snprintf(path, 256, "%s/%02x/", blocks, dir);

	for (unsigned i = 0; i < 32; i++)
		n += snprintf(path + n, 256 - (size_t)n, "%02x", sha[i]);
}

/* A store laid out by an older version (by the hash's first byte, no key): the files out
 * of place under the key made now are removed, the rest kept. */
static void old_layout_is_evicted(void)
{
	char path[256];
	uint8_t sha[32], made[32];
	unsigned kept = 0, gone = 0, wrong = 0;
	int fd;

	CHECK(mkdtemp(root));
	for (unsigned h = 0; h < 256; h++) {
		series_sha(h, 7, sha);
		name_of(root, h, sha, path);
		*strrchr(path, '/') = '\0';
		CHECK(!mkdir(path, 0700));
		name_of(root, h, sha, path);
		fd = open(path, O_CREAT | O_WRONLY, 0600);
		CHECK(fd >= 0 && write(fd, "x", 1) == 1);
		close(fd);
	}
	fd = open(root, O_RDONLY | O_DIRECTORY);
	CHECK(fd >= 0);
	stp_store_trim(fd, 1u << 30);
	close(fd);
	snprintf(path, sizeof(path), "%s/fanout.key", root);
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0 && read(fd, made, sizeof(made)) == (ssize_t)sizeof(made));
	close(fd);
	for (unsigned h = 0; h < 256; h++) {
		struct stat st;
		bool placed;

		series_sha(h, 7, sha);
		placed = fanout(made, sha) == h;
		name_of(root, h, sha, path);
		if (stat(path, &st))
			gone++;
		else
			kept++;
		wrong += placed == !!stat(path, &st);
	}
	CHECK(wrong == 0 && gone >= 200, "%u kept, %u gone, %u of them wrongly", kept, gone, wrong);
	cleanup();
}

/* A store holding, under SHA, a sparse file of SIZE bytes, taken by a mount of an
 * image of 1 << BLOCK_LOG byte blocks offering SHA: what it got into T. */
static void take_sparse(const uint8_t sha[32], unsigned block_log, uint64_t size,
			struct two_blocks *t)
{
	struct stp_superblock sb = { .block_log = block_log, .block_count = 2,
				     .meta_offset = STP_SB_SIZE + (2ull << block_log) };
	char path[256];
	pthread_t tid;
	int sv[2], fd;

	*t = (struct two_blocks){ -1, { sha, sha }, { -1, -1 }, { -1, -1 }, false };
	make_blocks(path);
	plant(sha, "x", path);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0 && !ftruncate(fd, (off_t)size));
	close(fd);
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	t->ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, offer_two, t));
	stp_store_attach(root, 1 << 30, "test", sv[0], &sb, 2,
			 stp_block_stored_max(1ull << block_log), 0);
	pthread_join(tid, NULL);
	close(sv[0]);
	close(sv[1]);
	CHECK(t->mode[0] == O_RDWR && t->size[0] == 0, "the file: mode %d, %lld bytes",
	      t->mode[0], (long long)t->size[0]);
	cleanup();
}

/* A file a user or a fetcher left, longer than the largest block the image allows (a
 * sparse 16 GiB): judged junk by its length, not read (it was mapped and hashed whole),
 * and handed writable, empty. */
static void overlong_block_file_is_not_read(void)
{
	static const uint8_t long_sha[32] = { [0 ... 31] = 0x3c };
	uint64_t t0 = stp_now_ns();
	struct two_blocks t;

	take_sparse(long_sha, 12, 16ull << 30, &t);
	CHECK(stp_now_ns() - t0 < 3000000000ull, "%.1f s to take the file",
	      (double)(stp_now_ns() - t0) / 1e9);
}

/* Review 6 #4: the junk check read a whole block file into memory (up to 1 GiB with
 * 1 GiB blocks) in root's monitor, counted in no budget. A 256 MiB file of an image of
 * 256 MiB blocks now costs a fixed buffer. */
static void junk_check_memory_is_bounded(void)
{
	static const uint8_t big_sha[32] = { [0 ... 31] = 0x77 };
	struct rusage before, after;
	struct two_blocks t;

	getrusage(RUSAGE_SELF, &before);
	take_sparse(big_sha, 28, 256ull << 20, &t);
	getrusage(RUSAGE_SELF, &after);
	CHECK(after.ru_maxrss - before.ru_maxrss < 64 << 10, "peak RSS %ld MiB -> %ld MiB",
	      before.ru_maxrss >> 10, after.ru_maxrss >> 10);
}

int main(void)
{
	RUN(junk_check_memory_is_bounded); /* first: the process's peak RSS still low */
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(trim_lists_part_of_a_large_store);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(repeated_trims_keep_the_bound_oldest_first);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(a_few_bytes_over_cost_a_file_not_a_listing);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(a_damaged_ledger_is_made_anew);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(hostile_fetcher_gets_few_writable_files);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(junk_in_a_block_file_is_replaced);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(junk_is_hashed_within_a_budget);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(junk_base_that_is_also_a_block_is_replaced);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(honest_mounts_keep_the_bound_whatever_the_hashes);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(trim_work_is_bounded_whatever_the_hashes);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(live_mounts_share_the_bound);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(a_block_named_twice_is_counted_once);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(overlapping_hostile_mounts_keep_the_bound);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(an_ended_mount_pinned_by_another_gives_its_room_back);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(old_layout_is_evicted);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(overlong_block_file_is_not_read);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(deaf_fetcher_cannot_hold_the_monitor);
	return tap_done();
}
