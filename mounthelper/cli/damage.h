/* SPDX-License-Identifier: MIT */
/*
 * A damaged data block, told once (for each image: blocks are told apart by the image's
 * name and their number). The library reports a block each time it is read, and a
 * command each file whose data lies in it: hundreds of lines for one block. cli.c's
 * message functions ask here whether to print: the library's line is printed the first
 * time for its block; once stp_damage_group is on (stp_cli_bound_messages turns it on),
 * the files are counted rather than printed (printed too with VERBOSE), and
 * stp_damage_flush prints one line per block with their number and the first of them.
 * Messages are recognised by their words: "damaged image ... block N" from the library,
 * "block N ... damaged" with a path from a command, check's "data block N: ...".
 * Thread-safe (the library's log handler may run in any thread).
 */
#ifndef STP_DAMAGE_H
#define STP_DAMAGE_H

#include <stdbool.h>

void stp_damage_group(bool verbose);

/* Whether to print the library's message MSG. */
bool stp_damage_library_message(const char *msg);

/* Whether to print a command's message MSG about PATH (NULL: the image) of IMAGE. */
bool stp_damage_command_message(const char *image, const char *path, const char *msg);

/* Prints, as "stipple COMMAND: ...", one line per block that files were counted against
 * since the last flush. */
void stp_damage_flush(const char *command);

#endif
