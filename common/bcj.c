/* SPDX-License-Identifier: MIT */
#include "bcj.h"

#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <string.h>

static inline uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* rel32 operands that the x86 filter touches have 0x00 or 0xFF as their high byte. */
static inline int x86_is_sign_byte(uint8_t b)
{
	return (uint8_t)(b + 1) <= 1;
}

static inline uint32_t x86_sext25(uint32_t v)
{
	return (v & 0x01000000u) ? (v | 0xFE000000u) : (v & 0x01FFFFFFu);
}

/*
 * Adds OFF to the operand V (subtracts when decoding). When an E8/E9 left alone GUARD
 * bytes before this opcode has its fourth operand byte inside V (at byte 3 - GUARD),
 * that byte must not become 0x00/0xFF, or the decoder would judge that opcode
 * differently: flip the bytes up to it and convert again until it is not. The decoder
 * retraces the same walk backwards; it ends because the start value has no such byte.
 */
static uint32_t x86_convert(uint32_t v, uint32_t off, unsigned guard, int encode)
{
	unsigned shift = 8 * (3 - guard);
	uint32_t w;

	for (;;) {
		w = encode ? v + off : v - off;
		if (!guard || !x86_is_sign_byte((uint8_t)(w >> shift)))
			return x86_sext25(w);
		v = w ^ ((UINT32_C(1) << (shift + 8)) - 1);
	}
}

/* The first E8/E9 byte in BUF[I, END), or END. Eight bytes at a time: in machine code
 * most words hold neither, and this scan is most of the filter's time. */
static size_t x86_next_opcode(const uint8_t *buf, size_t i, size_t end)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;

	for (; i + 8 <= end; i += 8) {
		uint64_t w, x, z;

		memcpy(&w, buf + i, 8);
		x = (le64toh(w) & 0xFEFEFEFEFEFEFEFEull) ^ 0xE8E8E8E8E8E8E8E8ull;
		/* the lowest flagged byte is a true zero of X: borrows only carry upwards */
		z = (x - ones) & ~x & highs;
		if (z)
			return i + ((unsigned)__builtin_ctzll(z) >> 3);
	}
	while (i < end && (buf[i] & 0xFE) != 0xE8)
		i++;
	return i;
}

void stp_bcj_begin(struct stp_bcj_state *st, unsigned filter)
{
	*st = (struct stp_bcj_state){ .filter = filter };
}

/* The x86 scan over the first AVAIL bytes from where ST left it. Its decisions read only
 * bytes at or past the scan position, which no earlier conversion changed. */
static size_t x86_step(struct stp_bcj_state *st, uint8_t *buf, size_t avail, uint64_t pos,
		       int encode)
{
	/* Bit d: the byte d back was an E8/E9 left alone (SKIPPED), whose fourth operand
	 * byte was 0x00/0xFF (SIGN). Bit 0 is the current opcode. */
	unsigned skipped = st->skipped, sign = st->sign, guard;
	size_t i = st->next, last = st->last, gap;
	uint32_t v;

	if (avail < 5)
		return 0;
	for (;;) {
		i = x86_next_opcode(buf, i, avail - 4);
		if (i > avail - 5)
			break;
		gap = i - last;
		last = i;
		if (gap > 3) {
			skipped = sign = 0;
		} else {
			skipped = (skipped << gap) & 0xE;
			sign = (sign << gap) & 0xE;
		}
		/* Convert only with at most one opcode left alone in the last three bytes. */
		if (!sign && x86_is_sign_byte(buf[i + 4]) && !(skipped & (skipped - 1))) {
			guard = skipped ? (unsigned)__builtin_ctz(skipped) : 0;
			v = x86_convert(get_le32(buf + i + 1), (uint32_t)(pos + i + 5), guard,
					encode);
			put_le32(buf + i + 1, v);
			skipped = sign = 0;
			i += 5;
			continue;
		}
		skipped |= 1;
		if (x86_is_sign_byte(buf[i + 4]))
			sign |= 1;
		i++;
	}
	*st = (struct stp_bcj_state){ .filter = st->filter, .next = i, .last = last,
				      .skipped = skipped, .sign = sign };
	return i; /* an opcode at I or later may still change the bytes after it */
}

void stp_bcj_x86(uint8_t *buf, size_t size, uint64_t pos, int encode)
{
	struct stp_bcj_state st;

	stp_bcj_begin(&st, STP_FILTER_X86);
	x86_step(&st, buf, size, pos, encode);
}

/* BL: imm26 counts instructions. */
static inline uint32_t arm64_bl(uint32_t insn, uint64_t addr, int encode)
{
	uint32_t d = (uint32_t)(addr >> 2);
	uint32_t imm = encode ? insn + d : insn - d;

	return 0x94000000u | (imm & 0x03FFFFFFu);
}

/* ADRP: 21-bit page offset in immhi (bits 23..5) and immlo (bits 30..29). Far targets
 * are rare and would only add noise: only offsets within +-2^17 pages change. */
static inline uint32_t arm64_adrp(uint32_t insn, uint64_t addr, int encode)
{
	uint32_t imm = ((insn >> 29) & 3) | ((insn >> 3) & 0x001FFFFCu);
	uint32_t page = (uint32_t)(addr >> 12);

	if ((imm + 0x00020000u) & 0x001C0000u)
		return insn;
	imm = (encode ? imm + page : imm - page) & 0x0003FFFFu;
	if (imm & 0x00020000u)
		imm |= 0x001C0000u;
	return (insn & 0x9000001Fu) | (imm & 3) << 29 | (imm >> 2) << 5;
}

void stp_bcj_arm64(uint8_t *buf, size_t size, uint64_t pos, int encode)
{
	size_t i = (size_t)(-pos & 3);
	uint32_t insn;

	for (; i + 4 <= size; i += 4) {
		insn = get_le32(buf + i);
		if ((insn & 0xFC000000u) == 0x94000000u)
			put_le32(buf + i, arm64_bl(insn, pos + i, encode));
		else if ((insn & 0x9F000000u) == 0x90000000u)
			put_le32(buf + i, arm64_adrp(insn, pos + i, encode));
	}
}

/* ARM64 instructions start at absolute multiples of 4: those wholly in [next, avail). */
static size_t arm64_step(struct stp_bcj_state *st, uint8_t *buf, size_t avail, uint64_t pos,
			 int encode)
{
	size_t from = st->next, to;

	if (avail <= from)
		return from;
	to = avail - (size_t)((pos + avail) & 3);
	if (to > from) {
		stp_bcj_arm64(buf + from, to - from, pos + from, encode);
		st->next = to;
	}
	return st->next;
}

size_t stp_bcj_step(struct stp_bcj_state *st, uint8_t *buf, size_t avail, uint64_t pos,
		    int encode, int end)
{
	size_t final;

	switch (st->filter) {
	case STP_FILTER_X86:
		final = x86_step(st, buf, avail, pos, encode);
		break;
	case STP_FILTER_ARM64:
		final = arm64_step(st, buf, avail, pos, encode);
		break;
	default:
		final = avail;
		break;
	}
	/* at the end of the buffer nothing more will change: the last bytes are left alone */
	return end ? avail : final;
}

/*
 * x86: four filtered bytes none of which is E8/E9, at R, make R a restart point. A call
 * before R has its operand at most in those four bytes, so the scan of the whole buffer
 * goes on inside them or right after them, finds no opcode there, and meets the same
 * next opcode as a scan started at R, more than 3 bytes past the last one it saw: with
 * an empty memory, as the fresh scan's. Bytes from R + 4 on come out the same either
 * way (R .. R + 3 may hold such an operand). The start of the buffer serves every byte.
 */
static size_t x86_restart(const uint8_t *buf, size_t at, size_t back)
{
	size_t lowest = at > back ? at - back : 0, run = 0;

	if (at < 4)
		return 0;
	for (size_t i = at + 1; i-- > lowest;) {
		run = (buf[i] & 0xFE) == 0xE8 ? 0 : run + 1;
		if (run >= 4 && i + 4 <= at)
			return i;
	}
	return lowest ? SIZE_MAX : 0;
}

size_t stp_bcj_restart(unsigned filter, const uint8_t *buf, size_t at, uint64_t pos,
		       size_t back)
{
	switch (filter) {
	case STP_FILTER_X86:
		return x86_restart(buf, at, back);
	case STP_FILTER_ARM64:
		/* instructions at absolute multiples of 4, each changed on its own */
		return at < (size_t)((pos + at) & 3) ? 0 : at - (size_t)((pos + at) & 3);
	default:
		return at;
	}
}

int stp_bcj_apply(unsigned filter, uint8_t *buf, size_t size, uint64_t pos, int encode)
{
	switch (filter) {
	case STP_FILTER_NONE:
		return 0;
	case STP_FILTER_X86:
		stp_bcj_x86(buf, size, pos, encode);
		return 0;
	case STP_FILTER_ARM64:
		stp_bcj_arm64(buf, size, pos, encode);
		return 0;
	default:
		return -EPROTONOSUPPORT;
	}
}

static unsigned elf_get16(const uint8_t *p, int big_endian)
{
	return big_endian ? (unsigned)p[0] << 8 | p[1] : (unsigned)p[1] << 8 | p[0];
}

enum stp_filter stp_bcj_elf_filter(const uint8_t *head, size_t len)
{
	unsigned type, machine;
	int big_endian;

	if (len < EI_NIDENT + 4 || memcmp(head, ELFMAG, SELFMAG))
		return STP_FILTER_NONE;
	if (head[EI_DATA] != ELFDATA2LSB && head[EI_DATA] != ELFDATA2MSB)
		return STP_FILTER_NONE;
	big_endian = head[EI_DATA] == ELFDATA2MSB;
	type = elf_get16(head + EI_NIDENT, big_endian);
	machine = elf_get16(head + EI_NIDENT + 2, big_endian);
	if (type != ET_EXEC && type != ET_DYN)
		return STP_FILTER_NONE;
	switch (machine) {
	case EM_386:
	case EM_X86_64:
		return STP_FILTER_X86;
	case EM_AARCH64:
		return STP_FILTER_ARM64;
	default:
		return STP_FILTER_NONE;
	}
}
