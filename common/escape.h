/* SPDX-License-Identifier: MIT */
/*
 * Text that came from an image, a mount or a path someone else chose, made safe for a
 * terminal. Names, link targets, paths, messages that carry them: whoever prints such
 * text (the readers, stipple(1), and the mount's monitor, mount.stipple(8)) goes through
 * this one rule, whether or not the output is a terminal, as tar(1) lists names: each
 * byte of a C0 control (0x00-0x1f), of DEL (0x7f), of a C1 control (U+0080-U+009F)
 * written in UTF-8, of a sequence that is not valid UTF-8 (overlong, surrogate, past
 * U+10FFFF, cut short), and each backslash becomes a backslash and three octal digits
 * ("\012" for a newline, "\134" for a backslash, "\302\233" for CSI), so the output is
 * unambiguous and reversible. Valid UTF-8 is written as it is; a lone byte 0x80-0x9f is
 * not UTF-8, so it is escaped too.
 *
 * Pure, thread-safe (as far as the FILE given is); nothing is allocated.
 */
#ifndef STP_ESCAPE_H
#define STP_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Writes the LEN bytes at S to F, escaped by the rule above. */
void stp_escape_put(FILE *f, const char *s, size_t len);

/* Length of the valid UTF-8 sequence at S (LEN bytes left; 1 for ASCII), or 0 when the
 * bytes there are not UTF-8 (LEN 0 included). */
size_t stp_escape_utf8_len(const char *s, size_t len);

#endif
