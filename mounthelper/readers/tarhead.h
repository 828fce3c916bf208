/* SPDX-License-Identifier: MIT */
/*
 * The headers of one tar member, POSIX pax (ustar with extended headers): the encoder
 * `stipple extract --tar` writes with. A field the 512-byte ustar header cannot hold
 * exactly (a name over 100 bytes or not ASCII, a link target likewise, an id, size or
 * mtime out of its octal range, nanoseconds, a device number) goes in a pax record
 * instead, which readers take over the ustar field. A name that is not UTF-8 goes out
 * as its bytes under hdrcharset=BINARY. Records are "LEN KEY=VALUE\n", LEN counting
 * itself, so a value may hold any byte. The output depends on the arguments alone.
 *
 * Thread-safe: no state beyond the buffers the caller passes.
 */
#ifndef STP_TARHEAD_H
#define STP_TARHEAD_H

#include <stddef.h>
#include <stdint.h>

#define STP_TAR_BLOCK 512

/* ustar type flags */
enum {
	STP_TAR_REG = '0', STP_TAR_HARDLINK = '1', STP_TAR_SYMLINK = '2', STP_TAR_CHR = '3',
	STP_TAR_BLK = '4', STP_TAR_DIR = '5', STP_TAR_FIFO = '6',
};

/* A growable byte buffer; owned by whoever declared it, freed with stp_tarbuf_free. */
struct stp_tarbuf {
	uint8_t *data;
	size_t len, cap;
};

/* One member. NAME and LINKNAME are NUL-terminated bytes, borrowed for the call. */
struct stp_tarhead {
	const char *name;       /* "./a/b", a directory's with its trailing '/' */
	const char *linkname;   /* a symlink's target, a hard link's first name, or NULL */
	char type;              /* STP_TAR_* */
	uint32_t mode;          /* permission bits, setuid, setgid and sticky included */
	uint32_t uid, gid;
	int64_t mtime_sec;
	uint32_t mtime_nsec;    /* below 1e9 */
	uint64_t size;          /* the bytes that follow the header */
	uint32_t devmajor, devminor;
	int sparse;             /* a GNU 1.0 sparse member: NAME goes in GNU.sparse.name */
	uint64_t realsize;      /* the file's size, when sparse */
};

/* The zeros that follow LEN bytes of a member's data to the end of their block. */
static inline size_t stp_tar_padding(uint64_t len)
{
	return (size_t)((STP_TAR_BLOCK - len % STP_TAR_BLOCK) % STP_TAR_BLOCK);
}

/* Appends LEN bytes; 0 or -ENOMEM (the buffer is left as it was). */
int stp_tarbuf_put(struct stp_tarbuf *b, const void *data, size_t len);
void stp_tarbuf_free(struct stp_tarbuf *b);

/* Appends the record "LEN KEY=VALUE\n" (VALUE: VLEN bytes, any of them) to RECORDS.
 * KEY must hold no '=' and no NUL. 0 or -ENOMEM. */
int stp_tarhead_record(struct stp_tarbuf *records, const char *key, const void *value,
		       size_t vlen);

/* Appends the record of extended attribute NAME, as GNU tar writes it: the key is
 * SCHILY.xattr.NAME with '%' and '=' written %25 and %3D (the only bytes a key cannot
 * hold as they are), the value VALUE's VLEN bytes as they are. 0 or -ENOMEM. */
int stp_tarhead_xattr(struct stp_tarbuf *records, const char *name, const void *value,
		      size_t vlen);

/*
 * Appends to OUT the headers of member H: when anything needs one, an extended header
 * ('x', named "././@PaxHeader") whose data is the records H needs followed by EXTRA's
 * (may be NULL), padded to 512; then the ustar header. *NOT_UTF8 (may be NULL) is set
 * to whether a name had to go out as bytes. Returns 0, -ENOMEM, or -EINVAL for a NAME
 * that is empty.
 */
int stp_tarhead_encode(const struct stp_tarhead *h, const struct stp_tarbuf *extra,
		       struct stp_tarbuf *out, int *not_utf8);

#endif
