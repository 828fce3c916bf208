/* SPDX-License-Identifier: MIT */
/*
 * Recording a hot list: which byte ranges of which files a workload reads, in the order
 * of their first read. Written when the mount ends, in the format mkstipple --hot-list
 * reads: a path (backslash escapes for \\, tab and newline), then a tab and the ranges
 * read as START-END (END exclusive, page-aligned), comma-separated, in the order they
 * were first read; one line per run of ranges of one file, so a file read again after
 * others is listed again. Ranges that touch or meet are merged into the earliest. Then
 * the names the workload looked up, found or not, each once, in the order of its first
 * lookup, as lookup lines (hotlist.h): at most STP_LOOKUP_MAX of them, the first.
 *
 * stp_record_read() and stp_record_lookup() are thread-safe and cheap (a striped lock,
 * ranges merged in place; one lock and an append per lookup, repeats dropped in one sort
 * when the list fills up and when it is written); the rest is not thread-safe.
 * Functions return 0 or a negative errno.
 */
#ifndef STP_RECORD_H
#define STP_RECORD_H

#include <stddef.h>
#include <stdint.h>

struct stp_image;
struct stp_recorder;

/* The recorder does not own IMG, which must outlive it. */
int stp_record_new(const struct stp_image *img, struct stp_recorder **out);
void stp_record_free(struct stp_recorder *r);

/* A read of LEN bytes at OFF of regular file INO (image inode number). */
void stp_record_read(struct stp_recorder *r, uint32_t ino, uint64_t off, uint64_t len);

/* A lookup of NAME (LEN bytes) in directory DIR (image inode number), whatever it found. */
void stp_record_lookup(struct stp_recorder *r, uint32_t dir, const char *name, size_t len);

/* The most a hot list holds: a longer one is cut at its last whole line below it (the
 * first reads are the ones a start-up needs most), so that a huge listing (any user can
 * make lookups through an allow_other mount) cannot fill root's file system. The
 * daemon's RLIMIT_FSIZE is no lower with record= (daemon.c). */
#define STP_RECORD_MAX (256ull << 20)

/* Writes the hot list to FD (opened before the sandbox closed the file system), which
 * stays open: its first MAX bytes at most, cut after a whole line; -EFBIG when it was
 * cut (what fits is written). */
int stp_record_write(struct stp_recorder *r, int fd, uint64_t max);

#endif
