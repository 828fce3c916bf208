/* SPDX-License-Identifier: MIT */
/*
 * Where an ELF executable or shared object keeps its machine code, from its section
 * table. Thread-safe; nothing is allocated that outlives a call.
 */
#ifndef MKSTP_ELFCODE_H
#define MKSTP_ELFCODE_H

#include <stdint.h>

/* Finds [*start, *end), the file bytes from the first to the end of the last section
 * that holds instructions, in the ELF file FD of SIZE bytes (32- or 64-bit, either byte
 * order; SIZE at least 64). Returns 1 when the section table was read: the span is
 * empty (*start == *end) when no section holds code in the file, as in a separate debug
 * file. Returns 0 when there is no usable section table, leaving *start and *end alone
 * (the caller then counts the whole file as code); -errno when reading fails. */
int elf_code_span(int fd, uint64_t size, uint64_t *start, uint64_t *end);

#endif
