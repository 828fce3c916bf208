/* SPDX-License-Identifier: MIT */
/* The block store's ledger (mounthelper/mount/ledger.c): its file read back only when
 * whole and sound, what ended mounts wrote counted once in its directory, and the groups
 * of ended mounts dropped with their room given back. The fan-out is checked against
 * SHA-256 as the test computes it, not against the module. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash.h"
#include "ledger.h"

#include "check.h"

static const uint8_t key[STP_LEDGER_KEY_SIZE] = "the ledger's key for these tests";

/* A ledger holding the key, directory 7's 1000 bytes, and two groups (rooms 100 and 200)
 * of one pending file each, both files hashing to SHA. */
static void two_groups(struct stp_ledger *l, const uint8_t sha[32])
{
	uint32_t group, earlier;
	uint64_t room_for;

	memset(l, 0, sizeof(*l));
	memcpy(l->key, key, sizeof(key));
	l->known = true;
	stp_ledger_set_dir(l, 7, 1000);
	for (unsigned i = 0; i < 2; i++) {
		CHECK(!stp_ledger_add_group(l, 0, 0, 5, &group, &earlier, &room_for));
		CHECK(group == i && earlier == i && room_for == 5, "%u %u %llu", group, earlier,
		      (unsigned long long)room_for);
		l->g[group].room = 100 * (i + 1);
		l->total += l->g[group].room;
		stp_ledger_add_pending(l, sha, group);
	}
	stp_ledger_sort(l);
}

/* A file of the ledger's bytes as stp_ledger_write leaves them, and its length. */
static int written(struct stp_ledger *l, uint64_t *len)
{
	char path[] = "/dev/shm/stipple-ledger-test-XXXXXX";
	int fd = mkstemp(path);
	struct stat st;

	CHECK(fd >= 0);
	unlink(path);
	CHECK(!stp_ledger_write(l, fd));
	CHECK(!fstat(fd, &st));
	*len = (uint64_t)st.st_size;
	return fd;
}

static void the_fanout_is_the_keyed_hash(void)
{
	struct stp_ledger l = { 0 };
	uint8_t sha[32], in[64], out[STP_SIG_HASH_SIZE];

	memcpy(l.key, key, sizeof(key));
	for (unsigned i = 0; i < 32; i++)
		sha[i] = (uint8_t)(i * 7 + 1);
	memcpy(in, key, 32);
	memcpy(in + 32, sha, 32);
	stp_sign_hash(in, sizeof(in), out);
	CHECK(stp_ledger_fanout(&l, sha) == out[0]);
}

static void a_ledger_read_back_is_the_one_written(void)
{
	struct stp_ledger l, back = { 0 };
	uint8_t sha[32] = { 9 };
	uint64_t len;
	int fd;

	two_groups(&l, sha);
	fd = written(&l, &len);
	stp_ledger_read(&back, fd, len);
	CHECK(back.known && back.ngroups == 2 && back.npend == 2);
	CHECK(back.dir[7] == 1000 && back.total == 1300, "%llu", (unsigned long long)back.total);
	CHECK(stp_ledger_is_pending(&back, sha));
	close(fd);
	stp_ledger_free(&l);
	stp_ledger_free(&back);
}

/* Damage at each place a check guards: magic, length, a pending file's group. */
static void a_damaged_ledger_is_not_believed(void)
{
	static const struct { off_t at; uint8_t byte; int cut; } damage[] = {
		{ 0, 'X', 0 },  /* magic */
		{ 0, 0, 1 },    /* one byte short */
		{ -4, 0xff, 0 } /* the last pending file's group, past the groups */
	};
	uint8_t sha[32] = { 3 };

	for (unsigned i = 0; i < sizeof(damage) / sizeof(*damage); i++) {
		struct stp_ledger l, back = { 0 };
		uint64_t len;
		int fd;

		two_groups(&l, sha);
		fd = written(&l, &len);
		if (damage[i].cut) {
			CHECK(!ftruncate(fd, (off_t)--len));
		} else {
			off_t at = damage[i].at < 0 ? (off_t)len + damage[i].at : damage[i].at;

			CHECK(pwrite(fd, &damage[i].byte, 1, at) == 1);
		}
		stp_ledger_read(&back, fd, len);
		CHECK(!back.known && !back.ngroups && !back.npend && !back.total, "damage %u", i);
		close(fd);
		stp_ledger_free(&l);
		stp_ledger_free(&back);
	}
}

/* Two ended mounts were handed the same file: its bytes count once, their rooms go. */
static void a_file_of_ended_mounts_counts_once(void)
{
	uint8_t sha[32] = { 5 }, state[2] = { STP_LEDGER_OVER, STP_LEDGER_ENDED };
	uint64_t bytes[2] = { 4096, 4096 };
	struct stp_ledger l;
	unsigned d;

	two_groups(&l, sha);
	d = stp_ledger_fanout(&l, sha);
	stp_ledger_settle(&l, state, bytes);
	CHECK(!l.npend && !l.ngroups);
	CHECK(l.dir[d] == (d == 7 ? 1000u : 0u) + 4096, "%llu", (unsigned long long)l.dir[d]);
	CHECK(l.total == 1000 + 4096, "%llu", (unsigned long long)l.total);
	stp_ledger_free(&l);
}

/* One of the two mounts still holds the file: it may write it, so nothing is counted, and
 * only the ended mount's group goes. */
static void a_file_a_live_mount_holds_is_not_counted(void)
{
	uint8_t sha[32] = { 6 }, state[2] = { STP_LEDGER_ENDED, STP_LEDGER_HELD };
	uint64_t bytes[2] = { 4096, 4096 };
	struct stp_ledger l;

	two_groups(&l, sha);
	stp_ledger_settle(&l, state, bytes);
	CHECK(l.npend == 1 && l.ngroups == 1 && l.p[0].group == 0 && l.g[0].room == 200);
	CHECK(l.total == 1000 + 200, "%llu", (unsigned long long)l.total);
	stp_ledger_free(&l);
}

int main(void)
{
	RUN(the_fanout_is_the_keyed_hash);
	RUN(a_ledger_read_back_is_the_one_written);
	RUN(a_damaged_ledger_is_not_believed);
	RUN(a_file_of_ended_mounts_counts_once);
	RUN(a_file_a_live_mount_holds_is_not_counted);
	return tap_done();
}
