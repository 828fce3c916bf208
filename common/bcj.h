/* SPDX-License-Identifier: MIT */
/*
 * BCJ filters: make machine code compress better by rewriting the relative targets of
 * calls and branches into absolute ones, so that repeated calls to one function become
 * repeated byte strings. A block is filtered as a whole before compression and unfiltered
 * after decompression; the filters keep no state from one block to the next, so every block can be
 * decoded on its own.
 *
 * The transforms are the ones xz calls x86 and ARM64 BCJ, applied to one buffer as a
 * complete xz stream whose start offset is POS (mod 2^32):
 *
 * x86: an E8 (CALL) or E9 (JMP) byte followed by a rel32 whose high byte is 0x00 or 0xFF
 *   gets rel32 + (address of the next instruction) as a 25-bit signed value. The scan
 *   remembers which of the previous three bytes were E8/E9 left alone, to reject
 *   false positives and to keep the decoder's view of those bytes the same as the
 *   encoder's. The scan state starts empty at the start of every buffer; the last four
 *   bytes of a buffer are never changed.
 * ARM64: at each absolute position that is a multiple of 4, a BL gets imm26 + pos/4 and
 *   an ADRP whose page offset lies within +-512 MiB gets it + pos/4096 (18-bit
 *   wrap-around, sign extended). Instructions are looked for only at absolute
 *   positions that are multiples of 4, so cuts at multiples of 4 do not change the
 *   result; code gains only where the file sits at a multiple of 4 in the stream
 *   (ADRP fully only at a multiple of 4096; a file 2 bytes off compresses worse).
 *
 * For any bytes, any size and any POS, decoding what encoding produced gives back the
 * input exactly. All functions are pure and thread-safe; buffers belong to the caller.
 */
#ifndef STP_BCJ_H
#define STP_BCJ_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

/* Encode (ENCODE != 0) or decode in place the SIZE bytes that start at stream position POS. */
void stp_bcj_x86(uint8_t *buf, size_t size, uint64_t pos, int encode);
void stp_bcj_arm64(uint8_t *buf, size_t size, uint64_t pos, int encode);

/*
 * The same filters applied piece by piece, as a buffer's bytes arrive in order: the
 * state carries what the scan has seen (for x86, which of the previous bytes were
 * E8/E9 left alone, and where the scan stands). Filtering the first A1 bytes, then the
 * first A2 >= A1, ..., then the whole buffer with END gives exactly what one call over
 * the whole buffer gives, wherever the cuts fall. After each step the bytes below the
 * returned count are final: at least AVAIL - 4 for x86 (an instruction whose operand is
 * not there yet may still change), AVAIL rounded down to an instruction for ARM64, AVAIL
 * with END. Positions in the state count from BUF, which must be the same buffer (or a
 * copy holding the same bytes) at every step.
 */
struct stp_bcj_state {
	unsigned filter;        /* enum stp_filter */
	size_t next;            /* the first byte not scanned yet */
	size_t last;            /* x86: the last E8/E9 seen */
	unsigned skipped, sign; /* x86: the scan's memory of the bytes before NEXT */
};

void stp_bcj_begin(struct stp_bcj_state *st, unsigned filter);
/* Filters the first AVAIL bytes of BUF (stream position POS) further; END: they are all
 * of it. Returns how many bytes are final. An unknown filter changes nothing. */
size_t stp_bcj_step(struct stp_bcj_state *st, uint8_t *buf, size_t avail, uint64_t pos,
		    int encode, int end);

/*
 * Decoding part of a buffer, for a reader of one still filtered (a block being
 * decompressed, whose later matches copy from the filtered bytes). stp_bcj_restart
 * returns a position R <= AT of the filtered BUF (it reads bytes up to AT only) such
 * that decoding a copy of BUF from R on, with a fresh state (stp_bcj_begin) at
 * stream position POS + R, gives every byte from AT on as decoding the whole buffer
 * does; SIZE_MAX when no such point lies within BACK bytes before AT (x86 over bytes
 * dense in E8/E9; the buffer's start is always one). For x86, R is found a few bytes
 * back in machine code; for ARM64 it is AT's instruction. Pure; BUF is only read.
 */
size_t stp_bcj_restart(unsigned filter, const uint8_t *buf, size_t at, uint64_t pos,
		       size_t back);

/* The same for a filter given by its enum stp_filter value (STP_FILTER_NONE does
 * nothing). Returns 0, or -EPROTONOSUPPORT for a filter this build does not know. */
int stp_bcj_apply(unsigned filter, uint8_t *buf, size_t size, uint64_t pos, int encode);

/* The filter that suits a file starting with the LEN bytes HEAD: STP_FILTER_X86 for an
 * x86 or x86-64 ELF executable or shared object, STP_FILTER_ARM64 for an AArch64 one,
 * else STP_FILTER_NONE (not ELF, relocatable objects, core files, other machines).
 * Relocatable objects are left out because their unrelocated calls (rel32 = 0) already
 * repeat, and the filter makes them differ. 64 bytes are enough. */
enum stp_filter stp_bcj_elf_filter(const uint8_t *head, size_t len);

#endif
