/* SPDX-License-Identifier: MIT */
/*
 * Recording a hot list: which byte ranges of which files a workload reads, in the order
 * of their first read. Written when the mount ends, in the format mkstipple --hot-list
 * reads: a path (backslash escapes for \\, tab and newline), then a tab and the ranges
 * read as START-END (END exclusive, page-aligned), comma-separated, in the order they
 * were first read; one line per run of ranges of one file, so a file read again after
 * others is listed again. Ranges that touch or meet are merged into the earliest.
 *
 * stp_record_read() is thread-safe and cheap (one striped lock, ranges merged in place);
 * the rest is not thread-safe. Functions return 0 or a negative errno.
 */
#ifndef STP_RECORD_H
#define STP_RECORD_H

#include <stdint.h>

struct stp_image;
struct stp_recorder;

/* The recorder does not own IMG, which must outlive it. */
int stp_record_new(const struct stp_image *img, struct stp_recorder **out);
void stp_record_free(struct stp_recorder *r);

/* A read of LEN bytes at OFF of regular file INO (image inode number). */
void stp_record_read(struct stp_recorder *r, uint32_t ino, uint64_t off, uint64_t len);

/* Writes the hot list to FD (opened before the sandbox closed the file system), which
 * stays open. */
int stp_record_write(struct stp_recorder *r, int fd);

#endif
