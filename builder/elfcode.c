/* SPDX-License-Identifier: MIT */
/* Finding the machine code in an ELF file, so that it can be filtered apart from the
 * symbol tables, strings and data around it. */
#include "elfcode.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* The most section table mkstipple reads: 64Ki entries of a 64-bit header's size. */
#define TABLE_MAX (65536u * sizeof(Elf64_Shdr))

struct reader {
	int wide, big_endian; /* ELFCLASS64, ELFDATA2MSB */
};

static uint64_t get(const struct reader *r, const uint8_t *p, unsigned len)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < len; i++)
		v |= (uint64_t)p[r->big_endian ? len - 1 - i : i] << (8 * i);
	return v;
}

/* The span of the code sections seen so far. */
struct span {
	uint64_t start, end;
	int found;
};

/* Widens S by the sections of TABLE[0..count) that are code in the file. */
static void scan_sections(const struct reader *r, const uint8_t *table, uint64_t count,
			  unsigned entsize, uint64_t size, struct span *s)
{
	for (uint64_t i = 0; i < count; i++) {
		const uint8_t *sh = table + i * entsize;
		uint64_t type = get(r, sh + 4, 4);
		uint64_t flags = r->wide ? get(r, sh + 8, 8) : get(r, sh + 8, 4);
		uint64_t off = r->wide ? get(r, sh + 24, 8) : get(r, sh + 16, 4);
		uint64_t len = r->wide ? get(r, sh + 32, 8) : get(r, sh + 20, 4);

		if (type == SHT_NOBITS || !(flags & SHF_EXECINSTR) || !len || off > size ||
		    len > size - off)
			continue;
		if (!s->found || off < s->start)
			s->start = off;
		if (!s->found || off + len > s->end)
			s->end = off + len;
		s->found = 1;
	}
}

/* A table is read this many bytes at a time at most (an entry is below 64 KiB). */
#define PIECE (64u << 10)

/* Entries [FIRST, LAST) of the table at OFF of FD, read and scanned a piece at a time
 * into BUF. */
static int scan_range(int fd, const struct reader *r, uint8_t *buf, uint64_t off,
		      unsigned entsize, uint64_t first, uint64_t last, uint64_t size,
		      struct span *s)
{
	uint64_t per = PIECE / entsize;

	for (uint64_t i = first; i < last; i += per) {
		uint64_t n = last - i < per ? last - i : per;
		int rc = stp_pread_full(fd, buf, n * entsize, off + i * entsize);

		if (rc)
			return rc;
		scan_sections(r, buf, n, entsize, size, s);
	}
	return 0;
}

/* A file that ends before END: it shrank (as a short read says, -EIO). */
static int ends_before(int fd, uint64_t end)
{
	struct stat st;

	return !fstat(fd, &st) && (uint64_t)st.st_size < end;
}

/* The COUNT entries of the table at OFF of FD, scanned where they hold data only: a
 * hole reads as zero entries, which hold no code, and a sparse archive entry's hole in
 * the spool could otherwise claim a 4 MiB table at the cost of its map. Where the file
 * cannot tell data from holes, all of it is read. Moves FD's offset (every other read of
 * it is positioned). */
static int scan_table(int fd, const struct reader *r, uint64_t off, uint64_t count,
		      unsigned entsize, uint64_t size, struct span *s)
{
	uint64_t end = off + count * entsize, at = off, last;
	uint8_t *buf = malloc(PIECE);
	int rc = buf ? 0 : -ENOMEM;

	while (!rc && at < end) {
		off_t data = lseek(fd, (off_t)at, SEEK_DATA), hole = (off_t)end;

		if (data < 0 && errno == ENXIO) { /* a hole to the end of the file, or past it */
			rc = ends_before(fd, end) ? -EIO : 0;
			break;
		}
		if (data < 0)
			data = (off_t)at;
		else if ((uint64_t)data >= end)
			break;
		else if ((hole = lseek(fd, data, SEEK_HOLE)) < 0 || (uint64_t)hole > end)
			hole = (off_t)end;
		/* the whole entries that the data [data, hole) touches */
		last = ((uint64_t)hole - off + entsize - 1) / entsize;
		rc = scan_range(fd, r, buf, off, entsize, ((uint64_t)data - off) / entsize, last,
				size, s);
		at = off + last * entsize;
	}
	free(buf);
	return rc;
}

int elf_code_span(int fd, uint64_t base, const uint8_t head[ELF_HEAD_SIZE], uint64_t size,
		  uint64_t *start, uint64_t *end)
{
	struct reader r;
	struct span s = { 0 };
	uint64_t shoff, count, bytes;
	unsigned entsize;
	int rc;

	if (size < ELF_HEAD_SIZE || memcmp(head, ELFMAG, SELFMAG) ||
	    (head[EI_CLASS] != ELFCLASS32 && head[EI_CLASS] != ELFCLASS64) ||
	    (head[EI_DATA] != ELFDATA2LSB && head[EI_DATA] != ELFDATA2MSB))
		return 0;
	r.wide = head[EI_CLASS] == ELFCLASS64;
	r.big_endian = head[EI_DATA] == ELFDATA2MSB;
	shoff = r.wide ? get(&r, head + 0x28, 8) : get(&r, head + 0x20, 4);
	entsize = (unsigned)get(&r, head + (r.wide ? 0x3a : 0x2e), 2);
	count = get(&r, head + (r.wide ? 0x3c : 0x30), 2);
	bytes = count * entsize;
	/* count 0 with a table means more than 0xff00 sections: not worth following */
	if (!count || !shoff || entsize < (r.wide ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)) ||
	    bytes > TABLE_MAX || shoff > size || bytes > size - shoff)
		return 0;
	rc = scan_table(fd, &r, base + shoff, count, entsize, size, &s);
	if (!rc) {
		*start = s.found ? s.start : 0;
		*end = s.found ? s.end : 0;
	}
	/* a file shorter than its table says (it shrank): no usable table */
	return rc == -EIO ? 0 : rc ? rc : 1;
}
