/* SPDX-License-Identifier: MIT */
/*
 * extract --tar's pax headers (readers/tarhead.h), read back here by hand, field by
 * field as POSIX lays them out: record lengths that count their own digits across 10,
 * 100, 1000 and 10000 bytes, a size past ustar's 8 GiB, a name of exactly 100 bytes
 * (no extended header) and of 101 (a path record), ids, mtimes and devices out of
 * range, xattr keys with '%' and '=', names that are not UTF-8, and the checksum.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tarhead.h"

/* The value of record KEY in the LEN bytes of records at P, checking every record's
 * length on the way; NULL when absent. */
static const char *find_record(const uint8_t *p, size_t len, const char *key, size_t *vlen)
{
	const char *found = NULL;

	for (size_t off = 0; off < len;) {
		char *end;
		unsigned long rlen = strtoul((const char *)p + off, &end, 10);
		const char *k = end + 1, *eq = memchr(k, '=', rlen);

		CHECK(*end == ' ' && rlen > 0 && off + rlen <= len && p[off + rlen - 1] == '\n',
		      "record at %zu", off);
		if (!(*end == ' ' && rlen > 0 && off + rlen <= len && eq))
			return NULL;
		if ((size_t)(eq - k) == strlen(key) && !memcmp(k, key, strlen(key))) {
			found = eq + 1;
			*vlen = (size_t)((const char *)p + off + rlen - 1 - found);
		}
		off += rlen;
	}
	return found;
}

static unsigned long long octal(const uint8_t *f, size_t width)
{
	char tmp[16] = { 0 };

	memcpy(tmp, f, width);
	return strtoull(tmp, NULL, 8);
}

static void check_checksum(const uint8_t *hdr)
{
	unsigned sum = 0;

	for (size_t i = 0; i < STP_TAR_BLOCK; i++)
		sum += i >= 148 && i < 156 ? ' ' : hdr[i];
	CHECK(octal(hdr + 148, 7) == sum, "checksum %llo, sum %o", octal(hdr + 148, 7), sum);
	CHECK(hdr[154] == 0 && hdr[155] == ' ');
}

/* Encodes H; the extended header's records into *RECORDS (NULL when none), and the
 * ustar header. */
static const uint8_t *encode(const struct stp_tarhead *h, const struct stp_tarbuf *extra,
			     struct stp_tarbuf *out, const uint8_t **records, size_t *rlen)
{
	int not_utf8;

	out->len = 0;
	CHECK(stp_tarhead_encode(h, extra, out, &not_utf8) == 0);
	CHECK(out->len % STP_TAR_BLOCK == 0);
	*records = NULL;
	*rlen = 0;
	if (out->len > STP_TAR_BLOCK) {
		CHECK(out->data[156] == 'x');
		check_checksum(out->data);
		*rlen = octal(out->data + 124, 12);
		*records = out->data + STP_TAR_BLOCK;
		CHECK(out->len == STP_TAR_BLOCK * 2 + (*rlen + 511) / 512 * 512);
	}
	check_checksum(out->data + out->len - STP_TAR_BLOCK);
	return out->data + out->len - STP_TAR_BLOCK;
}

static void test_record_lengths(void)
{
	struct stp_tarbuf r = { 0 };
	char *value = malloc(10100);

	memset(value, '\n', 10100); /* any byte: a newline too */
	for (size_t n = 0; n < 10100; n++) {
		size_t vlen = 0;

		r.len = 0;
		CHECK(stp_tarhead_record(&r, "k", value, n) == 0);
		CHECK(find_record(r.data, r.len, "k", &vlen) && vlen == n, "value of %zu", n);
	}
	stp_tarbuf_free(&r);
	free(value);
}

static void test_name_of_100_bytes(void)
{
	char name[102];
	struct stp_tarbuf out = { 0 };
	struct stp_tarhead h = { .name = name, .type = STP_TAR_REG, .mode = 0644 };
	const uint8_t *rec, *hdr;
	size_t rlen, vlen;

	memset(name, 'a', 100);
	name[100] = '\0';
	hdr = encode(&h, NULL, &out, &rec, &rlen);
	CHECK(!rec && !memcmp(hdr, name, 100) && hdr[100] == '0');
	CHECK(!memcmp(hdr + 257, "ustar\0" "00", 8));
	name[100] = 'b';
	name[101] = '\0';
	encode(&h, NULL, &out, &rec, &rlen);
	CHECK(rec && find_record(rec, rlen, "path", &vlen) && vlen == 101);
	stp_tarbuf_free(&out);
}

static void test_numbers_past_the_fields(void)
{
	struct stp_tarbuf out = { 0 };
	struct stp_tarhead h = { .name = "./big", .type = STP_TAR_REG, .mode = 06755,
				 .uid = 3000000000u, .gid = 2097151, .size = 9ull << 30,
				 .mtime_sec = -6, .mtime_nsec = 999999997 };
	const uint8_t *rec, *hdr;
	size_t rlen, vlen;
	const char *v;

	hdr = encode(&h, NULL, &out, &rec, &rlen);
	CHECK(octal(hdr + 100, 8) == 06755 && octal(hdr + 116, 8) == 2097151);
	CHECK(octal(hdr + 108, 8) == 07777777 && octal(hdr + 136, 12) == 0);
	CHECK((v = find_record(rec, rlen, "uid", &vlen)) && !memcmp(v, "3000000000", vlen));
	CHECK(!find_record(rec, rlen, "gid", &vlen));
	CHECK((v = find_record(rec, rlen, "size", &vlen)) && !memcmp(v, "9663676416", vlen));
	CHECK((v = find_record(rec, rlen, "mtime", &vlen)) && vlen == 12 &&
	      !memcmp(v, "-5.000000003", 12));
	h.mtime_sec = 1;
	h.mtime_nsec = 500000000;
	h.size = 1;
	encode(&h, NULL, &out, &rec, &rlen);
	CHECK((v = find_record(rec, rlen, "mtime", &vlen)) && vlen == 3 &&
	      !memcmp(v, "1.5", 3));
	CHECK(!find_record(rec, rlen, "size", &vlen));
	stp_tarbuf_free(&out);
}

static void test_devices_and_sparse(void)
{
	struct stp_tarbuf out = { 0 };
	struct stp_tarhead h = { .name = "./dev", .type = STP_TAR_CHR, .mode = 0600,
				 .devmajor = 4095, .devminor = 1048575 };
	const uint8_t *rec, *hdr = encode(&h, NULL, &out, &rec, &(size_t){ 0 });
	size_t rlen, vlen;
	const char *v;

	CHECK(!rec && octal(hdr + 329, 8) == 4095 && octal(hdr + 337, 8) == 1048575);
	h.devminor = 3000000;
	encode(&h, NULL, &out, &rec, &rlen);
	CHECK((v = find_record(rec, rlen, "SCHILY.devminor", &vlen)) && !memcmp(v, "3000000", 7));
	h = (struct stp_tarhead){ .name = "./a/sparse", .type = STP_TAR_REG, .mode = 0644,
				  .size = 1024, .sparse = 1, .realsize = 1ull << 40 };
	hdr = encode(&h, NULL, &out, &rec, &rlen);
	CHECK(!strncmp((const char *)hdr, "./a/GNUSparseFile.0/sparse", 100));
	CHECK((v = find_record(rec, rlen, "GNU.sparse.name", &vlen)) && vlen == 10);
	CHECK((v = find_record(rec, rlen, "GNU.sparse.realsize", &vlen)) &&
	      !memcmp(v, "1099511627776", vlen));
	CHECK(find_record(rec, rlen, "GNU.sparse.major", &vlen) && !find_record(rec, rlen, "path", &vlen));
	stp_tarbuf_free(&out);
}

static void test_xattr_keys_and_names(void)
{
	static const uint8_t value[] = { 0, '\n', '=', 0xff };
	struct stp_tarbuf extra = { 0 }, out = { 0 };
	struct stp_tarhead h = { .name = "./n\xc3\xa4me", .type = STP_TAR_REG, .mode = 0644 };
	const uint8_t *rec;
	size_t rlen, vlen;
	const char *v;
	int not_utf8 = 0;

	CHECK(stp_tarhead_xattr(&extra, "user.a=b%c\nd", value, sizeof(value)) == 0);
	encode(&h, &extra, &out, &rec, &rlen);
	CHECK((v = find_record(rec, rlen, "SCHILY.xattr.user.a%3Db%25c\nd", &vlen)) &&
	      vlen == sizeof(value) && !memcmp(v, value, vlen));
	CHECK(find_record(rec, rlen, "path", &vlen) && !find_record(rec, rlen, "hdrcharset", &vlen));
	h.name = "./bad\xff";
	out.len = 0;
	CHECK(stp_tarhead_encode(&h, NULL, &out, &not_utf8) == 0 && not_utf8);
	rlen = octal(out.data + 124, 12);
	CHECK((v = find_record(out.data + STP_TAR_BLOCK, rlen, "hdrcharset", &vlen)) &&
	      !memcmp(v, "BINARY", 6));
	h.name = "";
	CHECK(stp_tarhead_encode(&h, NULL, &out, NULL) == -EINVAL);
	stp_tarbuf_free(&extra);
	stp_tarbuf_free(&out);
}

int main(void)
{
	RUN(test_record_lengths);
	RUN(test_name_of_100_bytes);
	RUN(test_numbers_past_the_fields);
	RUN(test_devices_and_sparse);
	RUN(test_xattr_keys_and_names);
	return tap_done();
}
