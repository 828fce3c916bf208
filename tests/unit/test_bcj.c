/* SPDX-License-Identifier: MIT */
/*
 * BCJ filters: hand-computed vectors that pin the definition, and round trips on real
 * binaries (cut into blocks at odd stream positions), random and instruction-dense data
 * and every tiny size; decoding resumed from a state saved by a dry scan, as readers of
 * a block still filtered do.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bcj.h"

#include "check.h"

typedef void (*bcj_fn)(uint8_t *buf, size_t size, uint64_t pos, int encode);

/* xorshift64*: reproducible test data. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

static void fill_random(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)rng();
}

/* Bytes where E8/E9 and 0x00/0xFF are common, so every rule of the x86 scan is hit. */
static void fill_x86_dense(uint8_t *buf, size_t len)
{
	static const uint8_t pick[] = { 0xE8, 0xE9, 0x00, 0xFF, 0x01, 0xFE, 0xE8, 0x00 };

	for (size_t i = 0; i < len; i++) {
		uint64_t r = rng();
		buf[i] = (r & 0x30) ? pick[r & 7] : (uint8_t)(r >> 8);
	}
}

/* Little-endian words, most of them BL or ADRP (near and far). */
static void fill_arm64_dense(uint8_t *buf, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i += 4) {
		uint32_t w = (uint32_t)rng();

		switch (rng() % 4) {
		case 0:
			w = 0x94000000u | (w & 0x03FFFFFFu);
			break;
		case 1:
			w = 0x90000000u | (w & 0x6FFFFFFFu);
			break;
		case 2: /* ADRP within +-512 MiB: immhi bits 23..21 equal */
			w = 0x90000000u | (w & 0x601FFFFFu) | ((w & 0x00100000u) ? 0x00E00000u : 0);
			break;
		}
		memcpy(buf + i, &w, 4);
	}
	for (size_t i = len & ~(size_t)3; i < len; i++)
		buf[i] = (uint8_t)rng();
}

/* Encodes a copy of SRC; returns how many bytes changed; checks decode gives SRC back. */
static size_t round_trip(const char *what, bcj_fn fn, const uint8_t *src, size_t len,
			 uint64_t pos)
{
	uint8_t *buf = malloc(len ? len : 1);
	size_t changed = 0;

	if (!buf)
		abort();
	memcpy(buf, src, len);
	fn(buf, len, pos, 1);
	for (size_t i = 0; i < len; i++)
		changed += buf[i] != src[i];
	fn(buf, len, pos, 0);
	CHECK(memcmp(buf, src, len) == 0, "%s: %zu bytes at %llu", what, len,
	      (unsigned long long)pos);
	free(buf);
	return changed;
}

static void check_vector(const char *what, bcj_fn fn, const uint8_t *in, const uint8_t *out,
			 size_t len, uint64_t pos)
{
	uint8_t buf[64];

	memcpy(buf, in, len);
	fn(buf, len, pos, 1);
	CHECK(memcmp(buf, out, len) == 0, "%s: encoded bytes differ", what);
	fn(buf, len, pos, 0);
	CHECK(memcmp(buf, in, len) == 0, "%s: decoded bytes differ", what);
}

static void test_x86_vectors(void)
{
	/* At 0x1000: call +0x10 -> 0x1016; jmp -0x10 -> 0xFFB; call with high byte 0x78 is
	 * no rel32 we touch; call -0x2000 at 0x1010 -> -0xFEB. */
	static const uint8_t in1[] = { 0x90, 0xE8, 0x10, 0x00, 0x00, 0x00, 0xE9, 0xF0, 0xFF,
				       0xFF, 0xFF, 0xE8, 0x12, 0x34, 0x56, 0x78, 0xE8, 0x00,
				       0xE0, 0xFF, 0xFF };
	static const uint8_t out1[] = { 0x90, 0xE8, 0x16, 0x10, 0x00, 0x00, 0xE9, 0xFB, 0x0F,
					0x00, 0x00, 0xE8, 0x12, 0x34, 0x56, 0x78, 0xE8, 0x15,
					0xF0, 0xFF, 0xFF };
	/* Opcode 0 is left alone (its fourth operand byte, 0xFE, is no sign byte); the call
	 * at 1 would turn that byte into 0xFF (0x00FEFFFA + 6 = 0x00FF0000), so its low
	 * three bytes are flipped and it converts again: 0x0000FFFF + 6 = 0x00010005. */
	static const uint8_t in2[] = { 0xE8, 0xE8, 0xFA, 0xFF, 0xFE, 0x00 };
	static const uint8_t out2[] = { 0xE8, 0xE8, 0x05, 0x00, 0x01, 0x00 };
	/* Two opcodes left alone in the three bytes before the one at 2: no conversion. */
	static const uint8_t in3[] = { 0xE8, 0xE8, 0xE8, 0x11, 0x22, 0x33, 0x00, 0x00 };
	static const uint8_t in3b[] = { 0x90, 0x90, 0xE8, 0x11, 0x22, 0x33, 0x00, 0x00 };
	static const uint8_t out3b[] = { 0x90, 0x90, 0xE8, 0x18, 0x22, 0x33, 0x00, 0x00 };
	/* The opcode at 2 is left alone although its fourth operand byte is 0x00; that
	 * blocks the one at 5, three bytes later. */
	static const uint8_t in4[] = { 0xE8, 0xE8, 0xE8, 0x11, 0x22, 0xE8, 0x00, 0x44, 0x55, 0x00 };
	static const uint8_t in4b[] = { 0x90, 0x90, 0x90, 0x11, 0x22, 0xE8, 0x00, 0x44, 0x55, 0x00 };
	static const uint8_t out4b[] = { 0x90, 0x90, 0x90, 0x11, 0x22, 0xE8, 0x0A, 0x44, 0x55, 0x00 };
	/* The address is taken modulo 2^32: 0x1'0000'0000 + 0x20 behaves as 0x20. */
	static const uint8_t in5[] = { 0xE8, 0x00, 0x00, 0x00, 0x00 };
	static const uint8_t out5[] = { 0xE8, 0x25, 0x00, 0x00, 0x00 };

	check_vector("x86 calls", stp_bcj_x86, in1, out1, sizeof(in1), 0x1000);
	check_vector("x86 guard", stp_bcj_x86, in2, out2, sizeof(in2), 0);
	check_vector("x86 two left alone", stp_bcj_x86, in3, in3, sizeof(in3), 0);
	check_vector("x86 one opcode", stp_bcj_x86, in3b, out3b, sizeof(in3b), 0);
	check_vector("x86 sign left alone", stp_bcj_x86, in4, in4, sizeof(in4), 0);
	check_vector("x86 no history", stp_bcj_x86, in4b, out4b, sizeof(in4b), 0);
	check_vector("x86 pos mod 2^32", stp_bcj_x86, in5, out5, sizeof(in5), 0x100000020ull);
	/* The last four bytes never start a conversion. */
	check_vector("x86 too short", stp_bcj_x86, in5, in5, 4, 0);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void test_arm64_vectors(void)
{
	/* Words at 0x1000.., pinned by hand from the encodings:
	 * bl +0x40 -> imm 0x10 + 0x400; bl -4 at 0x1004 -> (0x3FFFFFF + 0x401) mod 2^26;
	 * adrp x3, +1 page at 0x1008 -> +2 (immlo 2); adrp x1, +2^18 pages: too far, kept;
	 * adrp x2, -1 page at 0x1010 -> 0; nop kept. */
	static const uint32_t in_w[] = { 0x94000010u, 0x97FFFFFFu, 0xB0000003u,
					 0x90200001u, 0xF0FFFFE2u, 0xD503201Fu };
	static const uint32_t out_w[] = { 0x94000410u, 0x94000400u, 0xD0000003u,
					  0x90200001u, 0x90000002u, 0xD503201Fu };
	uint8_t in[sizeof(in_w) + 3], out[sizeof(in_w) + 3];
	size_t n = sizeof(in_w) / 4;

	for (size_t i = 0; i < n; i++) {
		put32(in + 4 * i, in_w[i]);
		put32(out + 4 * i, out_w[i]);
	}
	check_vector("arm64 words", stp_bcj_arm64, in, out, 4 * n, 0x1000);
	/* Words sit at absolute multiples of 4: at 0x1002, the BL is at buffer offset 2
	 * (address 0x1004) and the partial words at both ends are kept. */
	memset(in, 0x94, sizeof(in));
	memset(out, 0x94, sizeof(out));
	put32(in + 2, 0x94000010u);
	put32(out + 2, 0x94000411u);
	check_vector("arm64 alignment", stp_bcj_arm64, in, out, 9, 0x1002);
	/* BL uses address bits 2..27 and ADRP bits 12..29: bit 32 changes nothing. */
	put32(in, 0x94000010u);
	put32(out, 0x94000410u);
	check_vector("arm64 pos bit 32", stp_bcj_arm64, in, out, 4, 0x100001000ull);
}

static void test_tiny_sizes(void)
{
	uint8_t buf[16];

	for (int round = 0; round < 2000; round++) {
		if (round % 2)
			fill_x86_dense(buf, sizeof(buf));
		else
			fill_arm64_dense(buf, sizeof(buf));
		for (size_t len = 0; len <= 16; len++) {
			uint64_t pos = rng() % 4096;
			round_trip("x86 tiny", stp_bcj_x86, buf, len, pos);
			round_trip("arm64 tiny", stp_bcj_arm64, buf, len, pos);
		}
	}
}

static void test_random(void)
{
	size_t len = 3u << 20;
	uint8_t *buf = malloc(len);
	static const uint64_t positions[] = { 0, 1, 3, 4095, 0xFFFFFFFEull, 0x123456789ull };

	if (!buf)
		abort();
	for (size_t i = 0; i < sizeof(positions) / sizeof(positions[0]); i++) {
		fill_random(buf, len);
		round_trip("x86 random", stp_bcj_x86, buf, len - i, positions[i]);
		round_trip("arm64 random", stp_bcj_arm64, buf, len - i, positions[i]);
		fill_x86_dense(buf, len);
		CHECK(round_trip("x86 dense", stp_bcj_x86, buf, len - i, positions[i]) > len / 20,
		      "x86 dense data barely changed");
		/* instructions at absolute multiples of 4 */
		fill_arm64_dense(buf + (-positions[i] & 3), len - 3);
		CHECK(round_trip("arm64 dense", stp_bcj_arm64, buf, len - i, positions[i]) >
			      len / 4, "arm64 dense data barely changed");
	}
	/* Decoding bytes that no encoder produced must still end and stay in bounds. */
	fill_x86_dense(buf, len);
	stp_bcj_x86(buf, len, 77, 0);
	fill_arm64_dense(buf, len);
	stp_bcj_arm64(buf, len, 77, 0);
	free(buf);
}

/* Arm64 is stateless: filtering in pieces cut at multiples of 4 gives the same bytes. */
static void test_arm64_cuts(void)
{
	size_t len = 1u << 20, off, n;
	uint8_t *whole = malloc(len), *pieces = malloc(len);
	uint64_t pos = 0x7FFFF000ull;

	if (!whole || !pieces)
		abort();
	fill_arm64_dense(whole, len);
	memcpy(pieces, whole, len);
	stp_bcj_arm64(whole, len, pos, 1);
	for (off = 0; off < len; off += n) {
		n = 4 * (1 + rng() % 5000);
		if (n > len - off)
			n = len - off;
		stp_bcj_arm64(pieces + off, n, pos + off, 1);
	}
	CHECK(memcmp(whole, pieces, len) == 0, "arm64 result depends on the cuts");
	free(whole);
	free(pieces);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (n = ftell(f)) > 0 && !fseek(f, 0, SEEK_SET)) {
		buf = malloc((size_t)n);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*len = (size_t)n;
	}
	fclose(f);
	return buf;
}

/* Real x86 machine code, found rather than named: the files of the objects loaded into
 * this test (its own program, libc...), and the FOLDER_PICKS shared objects (up to
 * PICK_MAX_SIZE) with the most code in the folder libc was loaded from, the largest
 * first. None on a machine of another architecture: the tests that use them then say
 * they skip. */
#define SAMPLES_MAX 8
#define FOLDER_PICKS 2
#define PICK_MAX_SIZE (8 << 20)
static char *samples[SAMPLES_MAX];
static off_t sample_sizes[SAMPLES_MAX];
static unsigned nsamples;

static int is_x86_elf(const char *path)
{
	uint8_t h[64];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(h, 1, sizeof(h), f) : 0;

	if (f)
		fclose(f);
	return stp_bcj_elf_filter(h, n) == STP_FILTER_X86;
}

/* Takes PATH (malloc'ed, resolved) among the samples, in size order, if it is x86 code
 * and not there already; else frees it. */
static void add_sample(char *path)
{
	struct stat st;
	unsigned i;

	for (i = 0; i < nsamples; i++)
		if (!strcmp(samples[i], path))
			break;
	if (i < nsamples || nsamples == SAMPLES_MAX || stat(path, &st) || !S_ISREG(st.st_mode) ||
	    !is_x86_elf(path)) {
		free(path);
		return;
	}
	for (i = nsamples++; i > 0 && sample_sizes[i - 1] < st.st_size; i--) {
		samples[i] = samples[i - 1];
		sample_sizes[i] = sample_sizes[i - 1];
	}
	samples[i] = path;
	sample_sizes[i] = st.st_size;
}

/* The bytes of x86 machine code in ELF file PATH: its executable segments' (0: not
 * 64-bit x86 ELF). */
static off_t code_bytes(const char *path)
{
	uint8_t h[4096];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(h, 1, sizeof(h), f) : 0;
	Elf64_Ehdr eh;
	off_t code = 0;

	if (f)
		fclose(f);
	if (n < sizeof(eh) || stp_bcj_elf_filter(h, n) != STP_FILTER_X86 ||
	    h[EI_CLASS] != ELFCLASS64)
		return 0;
	memcpy(&eh, h, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		size_t at = eh.e_phoff + (size_t)i * sizeof(ph);

		if (at > n || n - at < sizeof(ph))
			break;
		memcpy(&ph, h + at, sizeof(ph));
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			code += (off_t)ph.p_filesz;
	}
	return code;
}

/* The FOLDER_PICKS x86 shared objects of DIR up to PICK_MAX_SIZE with the most machine
 * code (links not followed: each file once). */
static void add_folder(const char *dir)
{
	char *pick[FOLDER_PICKS] = { 0 }, *path;
	off_t code[FOLDER_PICKS] = { 0 }, c;
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;

	while (d && (de = readdir(d))) {
		unsigned i = FOLDER_PICKS;

		if (!strstr(de->d_name, ".so") ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_size > PICK_MAX_SIZE ||
		    asprintf(&path, "%s/%s", dir, de->d_name) < 0)
			continue;
		if ((c = code_bytes(path)) <= code[i - 1]) {
			free(path);
			continue;
		}
		free(pick[i - 1]);
		for (; i > 1 && code[i - 2] < c; i--) {
			pick[i - 1] = pick[i - 2];
			code[i - 1] = code[i - 2];
		}
		pick[i - 1] = path;
		code[i - 1] = c;
	}
	if (d)
		closedir(d);
	for (unsigned i = 0; i < FOLDER_PICKS; i++)
		if (pick[i])
			add_sample(pick[i]);
}

static int add_loaded(struct dl_phdr_info *info, size_t size, void *ctx)
{
	char *path = realpath(info->dlpi_name[0] ? info->dlpi_name : "/proc/self/exe", NULL);
	char **libc_dir = ctx;

	if (!path) /* the vDSO has no file */
		return 0;
	if (strstr(path, "/libc.so") && !*libc_dir)
		*libc_dir = strdup(path);
	add_sample(path);
	return 0;
}

static void find_samples(void)
{
	char *libc_dir = NULL;

	if (nsamples)
		return;
	dl_iterate_phdr(add_loaded, &libc_dir);
	if (libc_dir) {
		*strrchr(libc_dir, '/') = '\0';
		add_folder(libc_dir);
	}
	free(libc_dir);
	if (!nsamples)
		printf("# skip: no x86 object loaded to take machine code from\n");
	for (unsigned i = 0; i < nsamples; i++)
		printf("# sample %s, %lld bytes\n", samples[i], (long long)sample_sizes[i]);
}

/* A binary filtered block by block as the image does: each block at its stream position,
 * the file starting at an odd position inside the stream. */
static void test_binary(const char *path, size_t block)
{
	uint64_t file_pos = 1000003; /* where the file starts in the stream */
	size_t len, off, n, changed = 0;
	uint8_t *data = read_file(path, &len);

	if (!data) {
		printf("# skip %s: not readable\n", path);
		return;
	}
	CHECK(stp_bcj_elf_filter(data, len) == STP_FILTER_X86, "%s: not taken for x86", path);
	for (off = 0; off < len; off += n) {
		/* blocks cut at stream offsets that are multiples of BLOCK */
		n = block - (size_t)((file_pos + off) % block);
		if (n > len - off)
			n = len - off;
		changed += round_trip(path, stp_bcj_x86, data + off, n, file_pos + off);
		round_trip(path, stp_bcj_arm64, data + off, n, file_pos + off);
	}
	/* compiled x86-64 code has a call every few dozen bytes */
	CHECK(changed > len / 100, "%s: x86 filter changed only %zu of %zu bytes", path,
	      changed, len);
	free(data);
}


/*
 * Piece by piece: the first bytes of a buffer filtered as they arrive, at random cuts,
 * must give what one call gives, and after each piece the bytes below the count
 * returned must already be what they end as (for x86 at most 4 bytes back of the piece's
 * end; for ARM64 the last whole instruction).
 */
static void check_pieces(const char *what, unsigned filter, const uint8_t *src, size_t len,
			 uint64_t pos, int encode, unsigned cuts)
{
	uint8_t *whole = malloc(len ? len : 1), *pieces = malloc(len ? len : 1);
	struct stp_bcj_state st;
	size_t avail = 0, final, prev = 0;
	int bad_final = 0, bad_bytes = 0;

	if (!whole || !pieces) {
		CHECK(0, "out of memory");
		free(whole);
		free(pieces);
		return;
	}
	memcpy(whole, src, len);
	CHECK(stp_bcj_apply(filter, whole, len, pos, encode) == 0);
	/* the bytes arrive at the cuts: what is past AVAIL is not there yet */
	memset(pieces, 0xE8, len);
	stp_bcj_begin(&st, filter);
	for (unsigned c = 0; c <= cuts; c++) {
		size_t was = avail;

		avail = c == cuts ? len : avail + (size_t)(rng() % (2 * len / (cuts + 1) + 2));
		if (avail > len)
			avail = len;
		memcpy(pieces + was, src + was, avail - was);
		final = stp_bcj_step(&st, pieces, avail, pos, encode, avail == len);
		if (final < prev || final > avail ||
		    (avail == len && final != len) ||
		    (filter == STP_FILTER_X86 && avail >= 4 && final + 4 < avail) ||
		    (filter == STP_FILTER_ARM64 && final + 4 <= avail))
			bad_final++;
		if (memcmp(pieces, whole, final))
			bad_bytes++;
		prev = final;
		if (avail == len)
			break;
	}
	CHECK(!bad_final, "%s: %d pieces with a wrong final count", what, bad_final);
	CHECK(!bad_bytes, "%s: %d pieces released bytes that changed later", what, bad_bytes);
	CHECK(memcmp(pieces, whole, len) == 0, "%s: the pieces differ from one call", what);
	free(whole);
	free(pieces);
}

static void test_pieces(void)
{
	static const char *const paths[] = { "/bin/bash", "/usr/lib/x86_64-linux-gnu/libc.so.6" };
	enum { RANDOM = 1u << 20 };
	uint8_t *rnd = malloc(RANDOM), *dense = malloc(RANDOM);
	static const unsigned filters[] = { STP_FILTER_X86, STP_FILTER_ARM64 };

	CHECK(rnd && dense);
	if (!rnd || !dense)
		goto out;
	fill_random(rnd, RANDOM);
	fill_x86_dense(dense, RANDOM);
	for (unsigned f = 0; f < 2; f++) {
		for (unsigned round = 0; round < 20; round++) {
			uint64_t pos = rng() % 4096;
			unsigned cuts = 1 + (unsigned)(rng() % 300);
			size_t n = 1 + rng() % RANDOM;

			check_pieces("random", filters[f], rnd, n, pos, round & 1, cuts);
			check_pieces("dense", filters[f], dense, n, pos, round & 1, cuts);
		}
		for (unsigned p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
			size_t len;
			uint8_t *data = read_file(paths[p], &len);

			if (!data) {
				printf("# skip %s: not readable\n", paths[p]);
				continue;
			}
			/* the first 4 MiB, as a block at a stream position of its own */
			if (len > (4u << 20))
				len = 4u << 20;
			for (unsigned round = 0; round < 6; round++)
				check_pieces(paths[p], filters[f], data, len, (uint64_t)round << 22,
					     round & 1, 1 + (unsigned)(rng() % 2000));
			free(data);
		}
	}
	/* one byte at a time, and tiny buffers */
	for (size_t n = 0; n < 40; n++) {
		check_pieces("tiny", STP_FILTER_X86, dense, n, 3, 0, (unsigned)n + 1);
		check_pieces("tiny", STP_FILTER_ARM64, dense, n, 3, 0, (unsigned)n + 1);
	}
out:
	free(rnd);
	free(dense);
}

/*
 * Decoding part of a filtered buffer, as a reader of a block still filtered does: from
 * the point stp_bcj_restart gives for A, a fresh decode of a copy of the filtered bytes
 * up to B + 4 (or the end) must give bytes [A, B) of the source. Ranges at random, at
 * spots where E8/E9 and sign bytes are planted, over runs of opcodes, in the last bytes,
 * and the whole buffer. The point must be the closest the rule allows (four bytes free
 * of E8/E9, ending at least a byte before A), SIZE_MAX only when there is none between
 * A - BACK and A, and then not for A <= BACK (the start serves).
 */
static int is_opcode(uint8_t b)
{
	return (b & 0xFE) == 0xE8;
}

/* Whether the x86 restart point R for A is what the rule allows: four clean bytes at R,
 * R + 4 <= A, none closer, or 0 when there are none. */
static int restart_as_ruled(const uint8_t *buf, size_t a, size_t back, size_t r)
{
	size_t lowest = a > back ? a - back : 0, best = SIZE_MAX;

	for (size_t i = a >= 4 ? a - 4 + 1 : 0; a >= 4 && i-- > lowest;) {
		size_t k = 0;

		while (k < 4 && !is_opcode(buf[i + k]))
			k++;
		if (k == 4) {
			best = i;
			break;
		}
	}
	if (best == SIZE_MAX && (a < 4 || !lowest))
		best = 0;
	return r == best;
}

static int part_right(unsigned filter, const uint8_t *filtered, const uint8_t *src,
		      size_t len, uint64_t pos, size_t back, size_t a, size_t b, int *ruled)
{
	size_t stop = len - b > 4 ? b + 4 : len;
	size_t r = stp_bcj_restart(filter, filtered, a, pos, back);
	struct stp_bcj_state st;
	uint8_t *copy;
	int right;

	if (filter == STP_FILTER_X86 && !restart_as_ruled(filtered, a, back, r))
		(*ruled)++;
	if (r == SIZE_MAX)
		return 1; /* the caller waits for the whole decode instead */
	if (r > a)
		return 0;
	copy = malloc(stop - r + 1);
	if (!copy)
		return 0;
	memcpy(copy, filtered + r, stop - r);
	stp_bcj_begin(&st, filter);
	stp_bcj_step(&st, copy, stop - r, pos + r, 0, stop == len);
	right = !memcmp(copy + (a - r), src + a, b - a);
	free(copy);
	return right;
}

static void check_parts(const char *what, unsigned filter, const uint8_t *src, size_t len,
			uint64_t pos, size_t back, size_t spot)
{
	uint8_t *filtered = malloc(len + 1);
	size_t bad = 0, tries = 0;
	int ruled = 0;

	CHECK(filtered);
	if (!filtered)
		return;
	memcpy(filtered, src, len);
	stp_bcj_apply(filter, filtered, len, pos, 1);
#define PART(a, b) (tries++, bad += !part_right(filter, filtered, src, len, pos, back, (a), (b), &ruled))
	for (size_t k = 0; k * spot < len; k++)
		for (size_t d = 0; d < 12; d++) {
			size_t a = k * spot + d >= 6 ? k * spot + d - 6 : 0, b = a + 1 + d % 5;

			if (b <= len)
				PART(a, b);
		}
	for (size_t t = 1; t <= 8 && t <= len; t++) {
		PART(len - t, len);
		PART(len - t, len - t + 1);
	}
	for (unsigned r = 0; r < 400 && len; r++) {
		size_t a = (size_t)(rng() % len), b = a + 1 + (size_t)(rng() % 9000);

		PART(a, b < len ? b : len);
	}
	if (len)
		PART(0, len);
#undef PART
	CHECK(!bad, "%s: %zu of %zu parts decoded from a restart point differ from the source",
	      what, bad, tries);
	CHECK(!ruled, "%s: %d restart points not the closest the rule allows", what, ruled);
	free(filtered);
}

/* E8/E9 and 0x00/0xFF bytes around every SPOT bytes, runs of them LONG bytes long: calls
 * whose operands straddle the spots, opcodes left alone in a row, restart points far. */
static void fill_spots(uint8_t *buf, size_t len, size_t spot, size_t lng)
{
	fill_random(buf, len);
	for (size_t m = spot; m < len; m += spot)
		for (size_t i = m > lng ? m - lng : 0; i < m + lng && i < len; i++)
			buf[i] = (uint8_t[]){ 0xE8, 0xE9, 0x00, 0xFF }[rng() % 4];
}

static void test_restart(void)
{
	enum { N = 1u << 20 };
	uint8_t *buf = malloc(N);
	static const size_t backs[] = { 16, 100, 4096, 65536 };

	CHECK(buf);
	if (!buf)
		return;
	for (unsigned f = 0; f < 2; f++) {
		unsigned filter = f ? STP_FILTER_ARM64 : STP_FILTER_X86;

		for (unsigned m = 0; m < 4; m++) {
			size_t n = 1 + (size_t)(rng() % N);

			fill_x86_dense(buf, n);
			check_parts("dense", filter, buf, n, (uint64_t)m << 16, backs[m], 4096);
			fill_spots(buf, n, 65536, 6);
			check_parts("spots", filter, buf, n, (uint64_t)m << 20, backs[m], 65536);
			fill_spots(buf, n, 8192, 300);
			check_parts("long runs", filter, buf, n, 0, backs[m], 8192);
			if (f) {
				fill_arm64_dense(buf, n);
				check_parts("arm64 dense", filter, buf, n, 0, backs[m], 4096);
			}
		}
		for (size_t n = 0; n < 24; n++) {
			fill_x86_dense(buf, n);
			check_parts("tiny", filter, buf, n, 0, 8, 4);
		}
	}
	find_samples();
	/* the two largest: the most code */
	for (unsigned p = 0; p < 2 && p < nsamples; p++) {
		const char *path = samples[p];
		size_t len;
		uint8_t *data = read_file(path, &len);

		CHECK(data, "%s: not readable", path);
		if (!data)
			continue;
		if (len > (3u << 20))
			len = 3u << 20;
		check_parts(path, STP_FILTER_X86, data, len, 32u << 20, 65536, 65536);
		{
			/* in machine code a restart point lies a few bytes back */
			size_t far = 0, r;

			stp_bcj_apply(STP_FILTER_X86, data, len, 32u << 20, 1);
			for (size_t a = 4; a < len; a += 997) {
				r = stp_bcj_restart(STP_FILTER_X86, data, a, 32u << 20, 65536);
				far = r != SIZE_MAX && a - r > far ? a - r : far;
			}
			CHECK(far < 256, "%s: a restart point %zu bytes back", path, far);
		}
		free(data);
	}
	free(buf);
}

static void test_binaries(void)
{
	static const size_t blocks[] = { 65536, 1u << 20, 32u << 20 };

	find_samples();
	for (unsigned i = 0; i < nsamples; i++)
		test_binary(samples[i], blocks[i % 3]);
}

static void elf_header(uint8_t *h, unsigned type, unsigned machine, int big_endian)
{
	memset(h, 0, 64);
	memcpy(h, ELFMAG, SELFMAG);
	h[EI_CLASS] = ELFCLASS64;
	h[EI_DATA] = big_endian ? ELFDATA2MSB : ELFDATA2LSB;
	h[EI_VERSION] = EV_CURRENT;
	h[16 + !big_endian] = (uint8_t)(type >> 8);
	h[16 + big_endian] = (uint8_t)type;
	h[18 + !big_endian] = (uint8_t)(machine >> 8);
	h[18 + big_endian] = (uint8_t)machine;
}

static void test_elf_filter(void)
{
	uint8_t h[64];

	elf_header(h, ET_DYN, EM_X86_64, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_X86, "x86-64 shared object");
	CHECK(stp_bcj_elf_filter(h, 19) == STP_FILTER_NONE, "truncated header");
	elf_header(h, ET_EXEC, EM_386, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_X86, "i386 executable");
	elf_header(h, ET_EXEC, EM_AARCH64, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_ARM64, "aarch64 executable");
	elf_header(h, ET_DYN, EM_AARCH64, 1);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_ARM64, "aarch64_be shared object");
	elf_header(h, ET_REL, EM_X86_64, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_NONE, "relocatable object");
	elf_header(h, ET_CORE, EM_X86_64, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_NONE, "core file");
	elf_header(h, ET_DYN, EM_RISCV, 0);
	CHECK(stp_bcj_elf_filter(h, sizeof(h)) == STP_FILTER_NONE, "riscv");
	CHECK(stp_bcj_elf_filter((const uint8_t *)"!<arch>\n", 8) == STP_FILTER_NONE, "ar");
	CHECK(stp_bcj_elf_filter(h, 0) == STP_FILTER_NONE, "empty");
}

static void test_apply(void)
{
	/* a call at 0, then a BL at 8 */
	uint8_t a[] = { 0xE8, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0x94 }, b[sizeof(a)];

	memcpy(b, a, sizeof(a));
	CHECK(stp_bcj_apply(STP_FILTER_NONE, b, sizeof(b), 0, 1) == 0 &&
		      !memcmp(a, b, sizeof(a)), "none changes nothing");
	CHECK(stp_bcj_apply(STP_FILTER_X86, b, sizeof(b), 0, 1) == 0 && b[1] == 5 &&
		      b[8] == 0x10, "x86");
	memcpy(b, a, sizeof(a));
	CHECK(stp_bcj_apply(STP_FILTER_ARM64, b, sizeof(b), 4, 1) == 0 && b[1] == 0 &&
		      b[8] == 0x13, "arm64");
	CHECK(stp_bcj_apply(3, b, sizeof(b), 0, 1) == -EPROTONOSUPPORT, "unknown filter");
}

int main(void)
{
	RUN(test_x86_vectors);
	RUN(test_arm64_vectors);
	RUN(test_tiny_sizes);
	RUN(test_random);
	RUN(test_arm64_cuts);
	RUN(test_binaries);
	RUN(test_elf_filter);
	RUN(test_apply);
	RUN(test_pieces);
	RUN(test_restart);
	return tap_done();
}
