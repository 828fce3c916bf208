/* SPDX-License-Identifier: MIT */
/*
 * Where an ELF executable or shared object keeps its machine code, from its section
 * table. Thread-safe; nothing is allocated that outlives a call.
 */
#ifndef MKSTP_ELFCODE_H
#define MKSTP_ELFCODE_H

#include <stdint.h>

/* Bytes of the file's start that elf_code_span needs: an ELF64 header. */
#define ELF_HEAD_SIZE 64u

/* Finds [*start, *end), the file bytes from the first to the end of the last section
 * that holds instructions, in the ELF file of SIZE bytes at BASE in FD (0 for a file of
 * its own; an archive may hold it further in), whose first ELF_HEAD_SIZE
 * bytes are HEAD (32- or 64-bit, either byte order). Returns 1 when the section table
 * was read: the span is empty (*start == *end) when no section holds code in the file,
 * as in a separate debug file. Returns 0 when there is no usable section table, leaving
 * *start and *end alone (the caller then counts the whole file as code); -errno when
 * reading fails. */
int elf_code_span(int fd, uint64_t base, const uint8_t head[ELF_HEAD_SIZE], uint64_t size,
		  uint64_t *start, uint64_t *end);

#endif
