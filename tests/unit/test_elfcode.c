/* SPDX-License-Identifier: MIT */
/* Finding the code in ELF files: crafted headers of both classes and byte orders, and
 * the ways a section table can be unusable (then the caller counts the file as code). */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfcode.h"

#include "check.h"

static void put(uint8_t *p, uint64_t v, unsigned len, int big_endian)
{
	for (unsigned i = 0; i < len; i++)
		p[big_endian ? len - 1 - i : i] = (uint8_t)(v >> (8 * i));
}

struct section {
	uint32_t type;
	uint64_t flags, off, size;
};

/* An ELF file of SIZE bytes with the sections S[0..n) in a table at SHOFF. */
static uint8_t *make_elf(int wide, int big_endian, const struct section *s, unsigned n,
			 uint64_t shoff, size_t size)
{
	uint8_t *f = calloc(1, size);
	unsigned ent = wide ? 64 : 40;

	memcpy(f, ELFMAG, SELFMAG);
	f[EI_CLASS] = wide ? ELFCLASS64 : ELFCLASS32;
	f[EI_DATA] = big_endian ? ELFDATA2MSB : ELFDATA2LSB;
	put(f + 16, ET_DYN, 2, big_endian);
	put(f + (wide ? 0x28 : 0x20), shoff, wide ? 8 : 4, big_endian);
	put(f + (wide ? 0x3a : 0x2e), ent, 2, big_endian);
	put(f + (wide ? 0x3c : 0x30), n, 2, big_endian);
	for (unsigned i = 0; i < n && shoff + (i + 1) * ent <= size; i++) {
		uint8_t *sh = f + shoff + i * ent;

		put(sh + 4, s[i].type, 4, big_endian);
		put(sh + 8, s[i].flags, wide ? 8 : 4, big_endian);
		put(sh + (wide ? 24 : 16), s[i].off, wide ? 8 : 4, big_endian);
		put(sh + (wide ? 32 : 20), s[i].size, wide ? 8 : 4, big_endian);
	}
	return f;
}

/* Runs elf_code_span on BYTES written to a temporary file. */
static int span_of(const uint8_t *bytes, size_t len, uint64_t *start, uint64_t *end)
{
	char path[] = "/tmp/test_elfcode.XXXXXX";
	int fd = mkstemp(path), rc;

	if (fd < 0 || write(fd, bytes, len) != (ssize_t)len) {
		perror("temporary file");
		exit(2);
	}
	unlink(path);
	*start = *end = 7777; /* left alone when nothing is found */
	rc = elf_code_span(fd, 0, bytes, len, start, end);
	close(fd);
	return rc;
}

static const struct section usual[] = {
	{ SHT_NULL, 0, 0, 0 },
	{ SHT_PROGBITS, SHF_ALLOC, 0x100, 0x80 },                 /* .rodata */
	{ SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0x200, 0x10 }, /* .init */
	{ SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0x240, 0x300 },/* .text */
	{ SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, 0x540, 0x9000 }, /* in no file byte */
	{ SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, 0x600, 0x9000 },/* past the end */
	{ SHT_STRTAB, 0, 0x580, 0x40 },
};

static void test_both_classes_and_orders(void)
{
	for (int wide = 0; wide < 2; wide++) {
		for (int be = 0; be < 2; be++) {
			uint8_t *f = make_elf(wide, be, usual, 7, 0x800, 0x800 + 7 * 64);
			uint64_t a, b;

			CHECK(span_of(f, 0x800 + 7 * 64, &a, &b) == 1);
			CHECK(a == 0x200 && b == 0x540);
			free(f);
		}
	}
}

/* A table mkstipple cannot use leaves the span alone: the caller counts it all as code. */
static void check_unusable(const uint8_t *f, size_t size)
{
	uint64_t a, b;

	CHECK(span_of(f, size, &a, &b) == 0 && a == 7777 && b == 7777);
}

static void test_unusable_tables(void)
{
	const size_t size = 0x1000;
	uint8_t *f;

	f = make_elf(1, 0, usual, 7, size - 64, size); /* table runs past the end */
	check_unusable(f, size);
	free(f);
	f = make_elf(1, 0, usual, 7, 0x800, size);
	put(f + 0x28, size + 64, 8, 0); /* table starts past the end */
	check_unusable(f, size);
	put(f + 0x28, 0, 8, 0); /* no table offset */
	check_unusable(f, size);
	put(f + 0x28, 0x800, 8, 0);
	put(f + 0x3a, 32, 2, 0); /* entries smaller than a section header */
	check_unusable(f, size);
	put(f + 0x3a, 64, 2, 0);
	put(f + 0x3c, 0, 2, 0); /* no sections (or too many to count) */
	check_unusable(f, size);
	put(f + 0x3c, 7, 2, 0);
	f[EI_CLASS] = 3; /* neither 32- nor 64-bit */
	check_unusable(f, size);
	f[EI_CLASS] = ELFCLASS64;
	check_unusable(f, 40); /* shorter than its header */
	f[0] = 'X';
	check_unusable(f, size); /* not ELF at all */
	free(f);
}

static void test_sections_without_code(void)
{
	/* a debug file: .text is NOBITS, the rest is not code */
	static const struct section debug[] = {
		{ SHT_NULL, 0, 0, 0 },
		{ SHT_NOBITS, SHF_ALLOC | SHF_EXECINSTR, 0x100, 0x4000 },
		{ SHT_PROGBITS, 0, 0x100, 0x600 },
	};
	/* a size that wraps around when added to its offset */
	static const struct section wrap[] = {
		{ SHT_PROGBITS, SHF_EXECINSTR, 0x200, UINT64_MAX - 0x100 },
		{ SHT_PROGBITS, SHF_EXECINSTR, 0x300, 0x10 },
	};
	uint64_t a, b;
	uint8_t *f = make_elf(1, 0, debug, 3, 0x800, 0x800 + 3 * 64);

	CHECK(span_of(f, 0x800 + 3 * 64, &a, &b) == 1 && a == b);
	free(f);
	f = make_elf(1, 0, wrap, 2, 0x800, 0x800 + 2 * 64);
	CHECK(span_of(f, 0x800 + 2 * 64, &a, &b) == 1 && a == 0x300 && b == 0x310);
	free(f);
}

static void test_own_executable(void)
{
	FILE *self = fopen("/proc/self/exe", "rb");
	struct stat st;
	uint64_t a = 0, b = 0;
	uint8_t head[ELF_HEAD_SIZE];

	if (!self || fstat(fileno(self), &st)) {
		perror("/proc/self/exe");
		exit(2);
	}
	CHECK(fread(head, 1, sizeof(head), self) == sizeof(head));
	CHECK(elf_code_span(fileno(self), 0, head, (uint64_t)st.st_size, &a, &b) == 1);
	CHECK(0 < a && a < b && b < (uint64_t)st.st_size);
	fclose(self);
}

int main(void)
{
	RUN(test_both_classes_and_orders);
	RUN(test_unusable_tables);
	RUN(test_sections_without_code);
	RUN(test_own_executable);
	return tap_done();
}
