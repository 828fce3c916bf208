/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by the programs: parsing sizes and counts given on the command
 * line, and complete pread/pwrite. All thread-safe; return 0 or a negative errno.
 */
#ifndef STP_UTIL_H
#define STP_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* "64K", "32M", "1G", "4096": bytes, with binary suffixes K, M, G, T (optionally "iB"). */
int stp_parse_size(const char *s, uint64_t *out);
/* A decimal integer in [min, max]. */
int stp_parse_uint(const char *s, uint64_t min, uint64_t max, uint64_t *out);
/* Reads exactly LEN bytes at OFF: -EIO on a short read (end of file), else -errno. */
int stp_pread_full(int fd, void *buf, size_t len, uint64_t off);
int stp_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
/* Writes all LEN bytes to a pipe, terminal or file position: 0 or -errno. */
int stp_write_full(int fd, const void *buf, size_t len);
/* "12.3 MiB" into BUF. */
const char *stp_human_size(uint64_t bytes, char *buf, size_t len);
/* What errno ERR (negative or not) means, for a message to a user: "damaged image" for
 * EUCLEAN (what the library returns for a corrupt image), "unsupported format version or
 * feature" for EPROTONOSUPPORT, the C library's description otherwise.
 * Thread-safe, unlike strerror(): the text is static and never rewritten. */
const char *stp_strerror(int err);
/* The path rule every reader and mkstipple's hot list share: components are separated by
 * slashes, empty ones and "." are skipped, ".." means the parent (the root's is itself).
 * Returns the next component of *PATH (*NAME, *LEN bytes, not NUL-terminated) and moves
 * *PATH past it: STP_PATH_NAME, STP_PATH_PARENT for "..", or STP_PATH_END. */
enum stp_path_part { STP_PATH_END, STP_PATH_NAME, STP_PATH_PARENT };
enum stp_path_part stp_path_next(const char **path, const char **name, size_t *len);
/* Writes the formatted message into ERR (ERRLEN bytes, always terminated; nothing when
 * ERR is NULL or ERRLEN 0) and returns RC: for functions that hand their caller a
 * negative errno and the sentence that explains it. */
int stp_errf(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Syncs the directory that holds PATH, so that a rename into it lasts; a file system
 * that cannot sync a directory (EINVAL, EROFS) is not an error. 0 or -errno. */
int stp_sync_parent_dir(const char *path);
/* Opens /dev/null on whichever of descriptors 0, 1 and 2 is closed, so that no file the
 * program opens later takes their place (and is read as stdin, or written over as
 * stdout): each program's first call. 0, or -errno when /dev/null cannot be opened. */
int stp_fill_stdio(void);
/* Room in the array *V (a pointer to it: *CAP items of SIZE bytes, NULL when *CAP is 0)
 * for item N, which is at most *CAP: grown to twice its capacity (1024 items at first)
 * when full. 0 or -ENOMEM (*V and *CAP unchanged). */
int stp_room_for(void *v, size_t *cap, size_t n, size_t size);
/* Room in the byte buffer *V (a pointer to it: *CAP bytes, NULL when *CAP is 0), whose
 * first USED bytes are taken, for MORE bytes after them: grown to twice its capacity
 * (1024 bytes at first) until they fit, never past MAX bytes. 0, or -ENOMEM when USED +
 * MORE exceeds MAX or memory runs out (*V and *CAP unchanged). */
int stp_room_for_n(void *v, size_t *cap, size_t used, size_t more, size_t max);
/* Monotonic clock in nanoseconds. */
uint64_t stp_now_ns(void);
/* pthread_create of FN(ARG) as *THREAD, with a stack of STACK bytes (0: the default) and
 * every signal blocked in the new thread: a process's signals then go only to the threads
 * that expect them (a daemon's handlers run on the thread that serves). 0 or a negative
 * errno. */
int stp_thread_create_blocked(pthread_t *thread, size_t stack, void *(*fn)(void *),
			      void *arg);
/* fstat(2) of FD through a call that takes no path, where the kernel has one that fills
 * this C library's struct stat (the 64-bit architectures but mips64el): glibc's fstat
 * passes "" with AT_EMPTY_PATH, a path the sandbox's filter cannot read, and the confined
 * daemon and fetcher are refused it there (syscalls.h). 0 or -errno. */
struct stat;
int stp_fd_stat(int fd, struct stat *st);

/* PATH (its symlinks followed) opened with FLAGS and O_CLOEXEC, if OK(PATH, ST) accepts
 * what it names; ST is found through an O_PATH descriptor, which runs no driver's open.
 * So a user who swaps a path root reads for a link to a device does not arm a watchdog,
 * rewind a tape or raise a modem's lines, and a FIFO refused is not waited on. The node
 * is then opened through /proc/self/fd; without /proc, by PATH again, checked to be the
 * same node (a swap in between is refused, though its open has run). Returns the
 * descriptor, -EINVAL for a node refused, or -errno. */
int stp_open_if(const char *path, int flags, int (*ok)(const char *path, const struct stat *st));

/* The node O_PATH descriptor PFD holds, opened with FLAGS and O_CLOEXEC through its
 * /proc/self/fd link: that very inode, whatever its name points to now. Returns the
 * descriptor, -ENOSYS without /proc, or -errno. */
int stp_reopen(int pfd, int flags);

/* What stp_open_if takes for an image: a regular file or a block device. */
int stp_node_is_image(const char *path, const struct stat *st);
/* ... and for a file of settings or secrets: a regular file. */
int stp_node_is_regular(const char *path, const struct stat *st);

#endif
