/* SPDX-License-Identifier: MIT */
/*
 * BCJ filters: make machine code compress better by rewriting the relative targets of
 * calls and branches into absolute ones, so that repeated calls to one function become
 * repeated byte strings. A block is filtered as a whole before compression and unfiltered
 * after decompression; the filters keep no state between calls, so every block can be
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
