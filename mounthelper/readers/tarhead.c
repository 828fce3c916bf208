/* SPDX-License-Identifier: MIT */
/*
 * pax headers (tarhead.h). The ustar layout, POSIX.1-2001: name 100 bytes at 0, mode 8
 * at 100, uid 8 at 108, gid 8 at 116, size 12 at 124, mtime 12 at 136, chksum 8 at 148,
 * typeflag at 156, linkname 100 at 157, magic "ustar\0" at 257, version "00" at 263,
 * uname 32 at 265, gname 32 at 297, devmajor 8 at 329, devminor 8 at 337, prefix 155 at
 * 345. Numbers are octal, zero-padded, NUL-terminated.
 */
#include "tarhead.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "util.h"

#define NAME_FIELD 100
#define ID_MAX 07777777u              /* 7 octal digits */
#define SIZE_MAX_OCTAL 077777777777ull /* 11 octal digits: 8 GiB - 1 */
#define PAX_NAME "././@PaxHeader"

int stp_tarbuf_put(struct stp_tarbuf *b, const void *data, size_t len)
{
	int err = stp_room_for_n(&b->data, &b->cap, b->len, len, SIZE_MAX / 2);

	if (err)
		return err;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

void stp_tarbuf_free(struct stp_tarbuf *b)
{
	free(b->data);
	*b = (struct stp_tarbuf){ 0 };
}

static size_t decimal_digits(size_t n)
{
	size_t d = 1;

	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

/* A record's LEN counts its own digits: the least LEN with LEN = BODY + digits(LEN). */
static size_t record_len(size_t body)
{
	size_t len = body + 1;

	while (len != body + decimal_digits(len))
		len = body + decimal_digits(len);
	return len;
}

/* "LEN " then KEY (KLEN bytes) then "=", VALUE and "\n". */
static int put_record(struct stp_tarbuf *r, const char *key, size_t klen, const void *value,
		      size_t vlen)
{
	size_t len = record_len(klen + vlen + 3), start = r->len;
	char num[24];
	int n = snprintf(num, sizeof(num), "%zu ", len);
	int err = stp_tarbuf_put(r, num, (size_t)n);

	if (!err)
		err = stp_tarbuf_put(r, key, klen);
	if (!err)
		err = stp_tarbuf_put(r, "=", 1);
	if (!err)
		err = stp_tarbuf_put(r, value, vlen);
	if (!err)
		err = stp_tarbuf_put(r, "\n", 1);
	if (err)
		r->len = start;
	return err;
}

int stp_tarhead_record(struct stp_tarbuf *records, const char *key, const void *value,
		       size_t vlen)
{
	return put_record(records, key, strlen(key), value, vlen);
}

int stp_tarhead_xattr(struct stp_tarbuf *records, const char *name, const void *value,
		      size_t vlen)
{
	static const char prefix[] = "SCHILY.xattr.";
	size_t len = strlen(name), k = sizeof(prefix) - 1;
	char *key = malloc(k + 3 * len + 1);
	int err;

	if (!key)
		return -ENOMEM;
	memcpy(key, prefix, k);
	for (size_t i = 0; i < len; i++) {
		if (name[i] == '%' || name[i] == '=')
			k += (size_t)sprintf(key + k, "%%%02X", (unsigned char)name[i]);
		else
			key[k++] = name[i];
	}
	err = put_record(records, key, k, value, vlen);
	free(key);
	return err;
}

static int record_u64(struct stp_tarbuf *r, const char *key, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, v);

	return stp_tarhead_record(r, key, num, (size_t)n);
}

/* SEC and NSEC (0 to 1e9-1) as a decimal: "-5.000000003" for sec -6, nsec 999999997;
 * the fraction without trailing zeros, and none when NSEC is 0. */
static int record_mtime(struct stp_tarbuf *r, int64_t sec, uint32_t nsec)
{
	char num[48];
	int n;

	if (sec < 0 && nsec) /* -6 + 0.999999997 is -(5 + 0.000000003) */
		n = snprintf(num, sizeof(num), "-%" PRIu64 ".%09" PRIu32,
			     (uint64_t)-(sec + 1), 1000000000u - nsec);
	else if (nsec)
		n = snprintf(num, sizeof(num), "%" PRId64 ".%09" PRIu32, sec, nsec);
	else
		n = snprintf(num, sizeof(num), "%" PRId64, sec);
	while (nsec && num[n - 1] == '0')
		n--;
	return stp_tarhead_record(r, "mtime", num, (size_t)n);
}

static int is_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return 0;
	return 1;
}

static int is_utf8(const char *s)
{
	size_t len = strlen(s);

	for (size_t i = 0, n; i < len; i += n)
		if (!(n = stp_escape_utf8_len(s + i, len - i)))
			return 0;
	return 1;
}

/* Whether S can stand in a ustar name field as it is. */
static int fits_name_field(const char *s)
{
	return strlen(s) <= NAME_FIELD && is_ascii(s);
}

/* path or GNU.sparse.name, linkpath, hdrcharset: the names the ustar fields cannot
 * hold. */
static int name_records(const struct stp_tarhead *h, struct stp_tarbuf *r, int *not_utf8)
{
	const char *link = h->linkname;
	int err = 0;

	*not_utf8 = !is_utf8(h->name) || (link && !is_utf8(link));
	if (*not_utf8)
		err = stp_tarhead_record(r, "hdrcharset", "BINARY", 6);
	if (!err && (h->sparse || !fits_name_field(h->name)))
		err = stp_tarhead_record(r, h->sparse ? "GNU.sparse.name" : "path", h->name,
					 strlen(h->name));
	if (!err && link && !fits_name_field(link))
		err = stp_tarhead_record(r, "linkpath", link, strlen(link));
	return err;
}

static int mtime_fits(const struct stp_tarhead *h)
{
	return h->mtime_sec >= 0 && (uint64_t)h->mtime_sec <= SIZE_MAX_OCTAL;
}

/* The numbers the ustar fields cannot hold, and the sparse member's own records. */
static int number_records(const struct stp_tarhead *h, struct stp_tarbuf *r)
{
	int err = 0;

	if (h->size > SIZE_MAX_OCTAL)
		err = record_u64(r, "size", h->size);
	if (!err && h->uid > ID_MAX)
		err = record_u64(r, "uid", h->uid);
	if (!err && h->gid > ID_MAX)
		err = record_u64(r, "gid", h->gid);
	if (!err && (h->mtime_nsec || !mtime_fits(h)))
		err = record_mtime(r, h->mtime_sec, h->mtime_nsec);
	if (!err && h->devmajor > ID_MAX)
		err = record_u64(r, "SCHILY.devmajor", h->devmajor);
	if (!err && h->devminor > ID_MAX)
		err = record_u64(r, "SCHILY.devminor", h->devminor);
	if (!err && h->sparse) {
		err = stp_tarhead_record(r, "GNU.sparse.major", "1", 1);
		if (!err)
			err = stp_tarhead_record(r, "GNU.sparse.minor", "0", 1);
		if (!err)
			err = record_u64(r, "GNU.sparse.realsize", h->realsize);
	}
	return err;
}

/* V in the WIDTH-byte field F: WIDTH-1 octal digits and a NUL; MAX when V is larger
 * (its record holds it). */
static void put_octal(uint8_t *f, size_t width, uint64_t v, uint64_t max)
{
	char tmp[24];

	snprintf(tmp, sizeof(tmp), "%0*" PRIo64, (int)(width - 1), v > max ? max : v);
	memcpy(f, tmp, width);
}

static void put_name(uint8_t *f, const char *s)
{
	size_t len = strlen(s);

	memcpy(f, s, len < NAME_FIELD ? len : NAME_FIELD);
}

static void put_checksum(uint8_t *hdr)
{
	unsigned sum = 0;
	char tmp[8];

	memset(hdr + 148, ' ', 8);
	for (size_t i = 0; i < STP_TAR_BLOCK; i++)
		sum += hdr[i];
	snprintf(tmp, sizeof(tmp), "%06o", sum);
	memcpy(hdr + 148, tmp, 7); /* six digits, a NUL, and the space left in place */
}

/* The ustar header of NAME, of the fields of H (NAME: H's own, or a sparse stand-in). */
static void ustar_header(uint8_t hdr[STP_TAR_BLOCK], const struct stp_tarhead *h,
			 const char *name)
{
	memset(hdr, 0, STP_TAR_BLOCK);
	put_name(hdr, name);
	put_octal(hdr + 100, 8, h->mode & 07777, ID_MAX);
	put_octal(hdr + 108, 8, h->uid, ID_MAX);
	put_octal(hdr + 116, 8, h->gid, ID_MAX);
	put_octal(hdr + 124, 12, h->size, SIZE_MAX_OCTAL);
	put_octal(hdr + 136, 12, h->mtime_sec < 0 ? 0 : (uint64_t)h->mtime_sec, SIZE_MAX_OCTAL);
	hdr[156] = (uint8_t)h->type;
	if (h->linkname)
		put_name(hdr + 157, h->linkname);
	memcpy(hdr + 257, "ustar", 6);
	memcpy(hdr + 263, "00", 2);
	if (h->type == STP_TAR_CHR || h->type == STP_TAR_BLK) {
		put_octal(hdr + 329, 8, h->devmajor, ID_MAX);
		put_octal(hdr + 337, 8, h->devminor, ID_MAX);
	}
	put_checksum(hdr);
}

/* The extended header: its ustar header, RECORDS, zeros to the block's end. */
static int put_extended(struct stp_tarbuf *out, const struct stp_tarbuf *records)
{
	static const uint8_t zeros[STP_TAR_BLOCK];
	struct stp_tarhead x = { .name = PAX_NAME, .type = 'x', .mode = 0644,
				 .size = records->len };
	uint8_t hdr[STP_TAR_BLOCK];
	int err;

	ustar_header(hdr, &x, PAX_NAME);
	err = stp_tarbuf_put(out, hdr, sizeof(hdr));
	if (!err)
		err = stp_tarbuf_put(out, records->data, records->len);
	if (!err)
		err = stp_tarbuf_put(out, zeros, stp_tar_padding(records->len));
	return err;
}

/* A sparse member's ustar name, as GNU tar and libarchive give it: DIR/GNUSparseFile.0/
 * BASE, which a reader that does not know the GNU records extracts aside. */
static char *sparse_stand_in(const char *name)
{
	const char *slash = strrchr(name, '/');
	int dir = slash ? (int)(slash - name) : 1;
	char *s;

	if (asprintf(&s, "%.*s/GNUSparseFile.0/%s", dir, slash ? name : ".",
		     slash ? slash + 1 : name) < 0)
		return NULL;
	return s;
}

int stp_tarhead_encode(const struct stp_tarhead *h, const struct stp_tarbuf *extra,
		       struct stp_tarbuf *out, int *not_utf8)
{
	struct stp_tarbuf r = { 0 };
	uint8_t hdr[STP_TAR_BLOCK];
	char *stand_in = NULL;
	size_t start = out->len;
	int binary = 0, err;

	if (!h->name[0])
		return -EINVAL;
	err = name_records(h, &r, &binary);
	if (!err)
		err = number_records(h, &r);
	if (!err && extra)
		err = stp_tarbuf_put(&r, extra->data, extra->len);
	if (!err && r.len)
		err = put_extended(out, &r);
	if (!err && h->sparse && !(stand_in = sparse_stand_in(h->name)))
		err = -ENOMEM;
	if (!err) {
		ustar_header(hdr, h, stand_in ? stand_in : h->name);
		err = stp_tarbuf_put(out, hdr, sizeof(hdr));
	}
	if (err)
		out->len = start;
	else if (not_utf8)
		*not_utf8 = binary;
	free(stand_in);
	stp_tarbuf_free(&r);
	return err;
}
