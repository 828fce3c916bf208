/* SPDX-License-Identifier: MIT */
/*
 * Mount option lists (mounthelper/mount/optstr.c), split without libmount, checked
 * against libmount itself (tests/fuzz/optstr_ref.h): a table of tricky lists, and lists
 * made of the pieces that matter (quotes, commas, '=', the maps' names and prefixes).
 * fuzz_optstr replays the fuzzer's corpus the same way.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "optstr.h"
#include "../fuzz/optstr_ref.h"

#include "check.h"

static const char *const tricky[] = {
	"", ",", ",,,", "ro", "ro,", ",ro", "ro,,nodev,,", "a=b", "a=", "=", "==", "=a",
	"=a=b", "a==b", "a=b=c", "a,=,b", "\"", "\"\"", "\"a,b\"", "a=\"b,c\"", "a=\"b,c",
	"\"a=b\"=c", "a\"=\"b", "a\",\"b,c", "x\\,y", "a\\\"b\",c\"", "ro=", "ro=1",
	"defaults", "defaults=1", "user", "user=joe", "user[", "user[=]", "users=x",
	"nouser=1", "comment", "comment=", "comment=\"a,b\"", "x-a", "x-", "x", "X-b=1",
	"x-systemd.automount,nofail", "loop", "loop=/dev/loop0", "offset=12", "helper=x",
	"verity.roothash=ab", "verity.roothash", "silent", "sub", "nosub", "iversion",
	"nosymfollow", "rbind,rshared", "_netdev", " ro", "ro ", "a b=c d",
	"context=\"system_u:object_r:tmp_t:s0:c127,c456\",noatime",
	"nodev,fsname=\"a,b\",allow_other,,", "\"\",\"\"", "a=\"\"", ",\"x\",",
	"verify,cache_budget=3,record=/tmp/r.list,sandbox=log",
};

static void test_tricky_lists_split_as_libmount_does(void)
{
	for (size_t i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++) {
		const char *why = optstr_differs(tricky[i]);

		CHECK(!why, "'%s': %s", tricky[i], why);
	}
}

static const char *const pieces[] = {
	",", ",", "\"", "=", "=", "a", "b", "\\", " ", "ro", "rw", "user", "users", "user[",
	"defaults", "comment", "x-", "X-", "x", "loop", "nofail", "nosuid", "context",
	"verity.roothash", "helper", "noatime", "allow_other", "_netdev", "silent", "sub",
};

/* A list of up to 12 pieces, drawn by a fixed generator (xorshift) from *STATE. */
static void made_list(uint64_t *state, char *buf, size_t cap)
{
	size_t n;

	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	n = *state % 13;
	buf[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		*state ^= *state << 13;
		*state ^= *state >> 7;
		*state ^= *state << 17;
		strncat(buf, pieces[*state % (sizeof(pieces) / sizeof(pieces[0]))],
			cap - strlen(buf) - 1);
	}
}

static void test_made_lists_split_as_libmount_does(void)
{
	uint64_t state = 0x9e3779b97f4a7c15u;
	unsigned wrong = 0;
	char list[256];

	for (int i = 0; i < 200000 && wrong < 5; i++) {
		const char *why;

		made_list(&state, list, sizeof(list));
		why = optstr_differs(list);
		wrong += !!why;
		CHECK(!why, "'%s': %s", list, why);
	}
}

/* What the rules are, said without libmount: the test fails if both changed alike. */
static void test_items_and_maps(void)
{
	const char *c = ",a=\"b,c\",,=d=e,f";
	struct stp_opt op;

	CHECK(stp_optstr_next(&c, &op) && op.namesz == 1 && op.valsz == 5 &&
	      !memcmp(op.val, "\"b,c\"", 5));
	CHECK(stp_optstr_next(&c, &op) && op.namesz == 2 && !memcmp(op.name, "=d", 2) &&
	      op.valsz == 1 && op.val[0] == 'e');
	CHECK(stp_optstr_next(&c, &op) && op.namesz == 1 && !op.val && !*c);
	CHECK(!stp_optstr_next(&c, &op));
	c = "ok,\"open";
	CHECK(stp_optstr_next(&c, &op) && !stp_optstr_next(&c, &op), "an open quote ends the list");
	CHECK(stp_optstr_find("nosuid,\"dev\",user_id=7", "user_id", &op) == 0 && op.valsz == 1);
	CHECK(stp_optstr_find("nosuid,\"dev\"", "dev", NULL) == -ENOENT);

	struct { const char *item; enum stp_optstr_map map; } want[] = {
		{ "defaults=1", STP_OPTSTR_DROP }, { "user", STP_OPTSTR_USER },
		{ "user=joe", STP_OPTSTR_USER }, { "nouser=1", STP_OPTSTR_FS },
		{ "X-a=1", STP_OPTSTR_USER }, { "ro", STP_OPTSTR_VFS }, { "ro=", STP_OPTSTR_VFS },
		{ "ro=1", STP_OPTSTR_FS }, { "max_read=4", STP_OPTSTR_FS },
		{ "sub", STP_OPTSTR_FS }, { "comment", STP_OPTSTR_USER },
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		c = want[i].item;
		CHECK(stp_optstr_next(&c, &op) && stp_optstr_map(&op) == want[i].map, "%s",
		      want[i].item);
	}
}

int main(void)
{
	RUN(test_tricky_lists_split_as_libmount_does);
	RUN(test_made_lists_split_as_libmount_does);
	RUN(test_items_and_maps);
	return tap_done();
}
