/* SPDX-License-Identifier: MIT */
/* Finding the machine code in an ELF file, so that it can be filtered apart from the
 * symbol tables, strings and data around it. */
#include "elfcode.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

/* Sets [*start, *end) to the span of the sections of TABLE[0..count) that are code in
 * the file, or to an empty span when none is. */
static void scan_sections(const struct reader *r, const uint8_t *table, uint64_t count,
			  unsigned entsize, uint64_t size, uint64_t *start, uint64_t *end)
{
	int found = 0;

	*start = *end = 0;
	for (uint64_t i = 0; i < count; i++) {
		const uint8_t *sh = table + i * entsize;
		uint64_t type = get(r, sh + 4, 4);
		uint64_t flags = r->wide ? get(r, sh + 8, 8) : get(r, sh + 8, 4);
		uint64_t off = r->wide ? get(r, sh + 24, 8) : get(r, sh + 16, 4);
		uint64_t len = r->wide ? get(r, sh + 32, 8) : get(r, sh + 20, 4);

		if (type == SHT_NOBITS || !(flags & SHF_EXECINSTR) || !len || off > size ||
		    len > size - off)
			continue;
		if (!found || off < *start)
			*start = off;
		if (!found || off + len > *end)
			*end = off + len;
		found = 1;
	}
}

int elf_code_span(int fd, uint64_t base, const uint8_t head[ELF_HEAD_SIZE], uint64_t size,
		  uint64_t *start, uint64_t *end)
{
	struct reader r;
	uint64_t shoff, count, bytes;
	unsigned entsize;
	uint8_t *table;
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
	table = malloc(bytes);
	if (!table)
		return -ENOMEM;
	rc = stp_pread_full(fd, table, bytes, base + shoff);
	if (!rc)
		scan_sections(&r, table, count, entsize, size, start, end);
	free(table);
	/* a file shorter than its table says (it shrank): no usable table */
	return rc == -EIO ? 0 : rc ? rc : 1;
}
