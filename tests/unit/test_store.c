/* SPDX-License-Identifier: MIT */
/* The trim of a published images' store (mounthelper/mount/store.c): a mount lists a
 * bounded part of a large store, not every file (it held the store's lock, and the
 * mount, for a walk of the whole store), and repeated mounts still bring the store
 * within its bound, the least recently mounted blocks first. */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fetcher.h"
#include "format.h"
#include "monproto.h"
#include "store.h"
#include "util.h"

#include "check.h"

#define PER_DIR 16u /* files in each of the 256 fan-out directories: 4096 in all */
#define OLD_SEC 1000000000 /* the mtime of the older half (2001); the rest is now */

static char root[] = "/dev/shm/stipple-store-test-XXXXXX";

/* The blocks directory: 256 fan-out directories of PER_DIR one-byte files, every other
 * one old. Returns its descriptor. */
static int make_store(void)
{
	char path[256];
	int fd;

	CHECK(mkdtemp(root));
	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", root, h);
		CHECK(!mkdir(path, 0700));
		for (unsigned i = 0; i < PER_DIR; i++) {
			snprintf(path, sizeof(path), "%s/%02x/%02x%062x", root, h, h, i);
			fd = open(path, O_CREAT | O_WRONLY, 0600);
			CHECK(fd >= 0 && write(fd, "x", 1) == 1);
			if (i % 2)
				futimens(fd, (struct timespec[2]){ { OLD_SEC, 0 }, { OLD_SEC, 0 } });
			close(fd);
		}
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

/* The fan-out directories listed since reset_atimes. */
static unsigned listed(void)
{
	char path[256];
	struct stat st;
	unsigned n = 0;

	for (unsigned h = 0; h < 256; h++) {
		snprintf(path, sizeof(path), "%s/%02x", root, h);
		n += !stat(path, &st) && st.st_atim.tv_sec > 1;
	}
	return n;
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
	reset_atimes();
	held = stp_store_trim(fd, bytes * 2);
	CHECK(listed() >= 1 && listed() <= 80, "%u of 256 directories listed for 1024 of 4096 files",
	      listed());
	CHECK(held > bytes * 8 / 10 && held < bytes * 12 / 10, "estimated %llu of %llu",
	      (unsigned long long)held, (unsigned long long)bytes);
	count(&old, &young, &bytes);
	CHECK(old + young == 256 * PER_DIR, "%u files removed below the bound",
	      256 * PER_DIR - old - young);
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

/* A file named NAME in fan-out directory DIR of the store, holding BYTES. */
static void plant(unsigned dir, const char *name, const char *bytes)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "%s/blocks/%02x", root, dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/blocks/%02x/%s", root, dir, name);
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

	CHECK(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/blocks", root);
	CHECK(!mkdir(path, 0700));
	snprintf(path, sizeof(path), "%s/blocks/02", root);
	CHECK(!mkdir(path, 0700));
	plant(0x02, "0202020202020202020202020202020202020202020202020202020202020202", "stored");
	snprintf(path, sizeof(path), "%s/blocks/02/%s", root,
		 "0202020202020202020202020202020202020202020202020202020202020202");
	CHECK(!setxattr(path, "user.stipple.sound", "1", 1, 0)); /* a block found sound */
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	s.ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, offer, &s));
	rc = stp_store_attach(root, limit, "test", sv[0], &sb, CLAIMED,
			      stp_block_stored_max(64u << 10));
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

struct two_blocks {
	int ctl;
	const uint8_t *sha[2];
	int mode[2];  /* O_RDWR, O_RDONLY, or -1: no file */
	off_t size[2];
};

/* A fetcher offering two blocks: what it receives for each. */
static void *offer_two(void *arg)
{
	struct two_blocks *t = arg;
	struct stp_fetch_blocks b = { .first = 0, .count = 2 };
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

/* A fetcher turned hostile wrote junk into the empty file of another image's block (review
 * 4 #6): that image's mounts got it read-only, junk, for ever. The junk is now replaced by
 * an empty file, writable; a sound block is left as it is, read-only. */
static void junk_in_a_block_file_is_replaced(void)
{
	static const uint8_t junk_sha[32] = { [0 ... 31] = 0x5a };
	/* SHA-256 of "stored" */
	static const char *good = "87b04e58961f9a99d853d4046a0b5b793e7c3e4bbd21f5aca8fb17c20cdb1d8b";
	uint8_t good_sha[32];
	struct stp_superblock sb = { .block_log = 16, .block_count = 2,
				     .meta_offset = STP_SB_SIZE + 2 * (64u << 10) };
	struct two_blocks t = { -1, { junk_sha, good_sha }, { -1, -1 }, { -1, -1 } };
	char path[256];
	pthread_t tid;
	int sv[2];

	for (unsigned i = 0; i < 32; i++)
		sscanf(good + 2 * i, "%2hhx", &good_sha[i]);
	CHECK(mkdtemp(root));
	snprintf(path, sizeof(path), "%s/blocks", root);
	CHECK(!mkdir(path, 0700));
	plant(0x5a, "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a", "junk of 19 bytes...");
	plant(good_sha[0], good, "stored");
	CHECK(!socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
	t.ctl = sv[1];
	CHECK(!pthread_create(&tid, NULL, offer_two, &t));
	stp_store_attach(root, 1 << 20, "test", sv[0], &sb, 2, stp_block_stored_max(64u << 10));
	pthread_join(tid, NULL);
	CHECK(t.mode[0] == O_RDWR && t.size[0] == 0, "the junk's file: mode %d, %lld bytes",
	      t.mode[0], (long long)t.size[0]);
	CHECK(t.mode[1] == O_RDONLY && t.size[1] == 6, "the sound block's file: mode %d, %lld bytes",
	      t.mode[1], (long long)t.size[1]);
	close(sv[0]);
	close(sv[1]);
	cleanup();
}

int main(void)
{
	RUN(trim_lists_part_of_a_large_store);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(repeated_trims_keep_the_bound_oldest_first);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(hostile_fetcher_gets_few_writable_files);
	strcpy(root, "/dev/shm/stipple-store-test-XXXXXX");
	RUN(junk_in_a_block_file_is_replaced);
	return tap_done();
}
