/* SPDX-License-Identifier: MIT */
/*
 * Progress of a long read of an image (check, extract, extract --tar) on a terminal, as
 * mksquashfs shows it: bytes of the image read, of its size, the percentage, the rate
 * and the time left, redrawn in place on stderr at most 5 times a second. Nothing when
 * stderr is not a terminal or -q asked for quiet.
 *
 * The bytes are counted where the image reads them: stp_progress_attach puts a counting
 * read in front of the image's source (imgsrc.h), so the figures hold for a file and a
 * URL alike, from whichever thread reads. The line is cleared before any message of
 * cli.h is printed, and at exit. Thread-safe after stp_progress_want.
 */
#ifndef STP_PROGRESS_H
#define STP_PROGRESS_H

#include <stdbool.h>

struct stp_image;

/* Progress is wanted for the images this process opens from now on, labelled NAME
 * ("check"), unless QUIET or stderr is not a terminal. Call before the image is opened. */
void stp_progress_want(const char *name, bool quiet);

/* Counts IMG's reads, when progress is wanted (stp_cli_open calls it), from 0: one image
 * at a time (the last one opened). Called again on the same image, counts from 0 again
 * (a second pass over it). */
void stp_progress_attach(struct stp_image *img);

/* Clears the progress line, when one is shown, so that a message starts a clean line. */
void stp_progress_clear(void);

/* Clears the line and draws no more. */
void stp_progress_end(void);

#endif
