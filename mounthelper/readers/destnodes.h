/* SPDX-License-Identifier: MIT */
/*
 * What `stipple extract` remembers of the nodes it made beneath DIR that it must reach
 * again later: each directory (its owner, mode and times are set in one pass at the
 * end) and the first name of each inode with several (its later names link to it).
 * A record holds the node's parent record, its name, its image inode and the device
 * and inode number it got, so memory follows the names the image stores, not the
 * lengths of their paths.
 *
 * A node is reached again beneath DIR with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS),
 * so no symlink is followed on the way, whoever put it there, and is then checked to be
 * the very node that was made (device, inode number, owner and type): a node swapped in
 * its place is refused, one that took a freed inode number among them. Where openat2 is
 * missing (ENOSYS before Linux 5.6, EPERM under some container seccomp profiles), the
 * path is walked one name at a time with O_NOFOLLOW from DIR, each directory on the way
 * checked to be the one recorded (device and inode number).
 *
 * The records are also indexed by device and inode number, so that a directory swapped
 * for one extract made before (a sibling exchanged with renameat2) is told apart.
 *
 * Single-threaded. Functions return 0 or a negative errno.
 */
#ifndef STP_DESTNODES_H
#define STP_DESTNODES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define STP_DESTNODES_ROOT 0u /* the record of DIR itself */

struct stp_destnode {
	uint32_t parent;   /* record of the directory holding it (the root: itself) */
	uint32_t ino;      /* its inode in the image */
	dev_t dev;         /* what fstat said once it was made (and, for a first name, */
	ino_t st_ino;      /* given its attributes): a freed inode number can come back, */
	uid_t uid;         /* as another user's node, so its owner and type count too */
	mode_t type;
	int is_dir;
	char *name;        /* owned; "" for the root */
};

struct stp_destnodes {
	int rootfd;                /* DIR, open; not owned */
	struct stp_destnode *node; /* node[0] is DIR */
	uint32_t count, cap;
	uint32_t *slot;            /* open addressing by (dev, ino): 1 + record, 0 free */
	uint32_t slots;            /* a power of two, at least twice count */
};

/* Starts the records with DIR, open as ROOTFD, which must outlive them. */
int stp_destnodes_init(struct stp_destnodes *t, int rootfd, uint32_t root_ino);

/* Records the node NAME made in the directory of record PARENT, for image inode INO, as
 * ST says it is: ST must be what the node is when it is opened again (its owner set).
 * Its record number goes to *REC. -ENOMEM, or -EOVERFLOW past 2^32-1. */
int stp_destnodes_add(struct stp_destnodes *t, uint32_t parent, const char *name,
		      uint32_t ino, const struct stat *st, uint32_t *rec);

/* Whether a record holds the node of device DEV and inode number INO. */
int stp_destnodes_has(const struct stp_destnodes *t, dev_t dev, ino_t ino);

/* The path of record REC beneath DIR ("a/b"; "." for DIR) into OUT of LEN bytes.
 * -ENAMETOOLONG when it does not fit. */
int stp_destnodes_path(const struct stp_destnodes *t, uint32_t rec, char *out, size_t len);

/* Opens record REC again beneath DIR with FLAGS (O_PATH, or O_RDONLY|O_DIRECTORY;
 * O_NOFOLLOW and O_CLOEXEC are added), following no symlink and leaving neither DIR
 * nor its filesystem, into *FD. -ESTALE when the node found there is not the one made
 * (it was replaced), -ELOOP when a symlink lies on the way, the open's error otherwise. */
int stp_destnodes_open(const struct stp_destnodes *t, uint32_t rec, int flags, int *fd);

void stp_destnodes_free(struct stp_destnodes *t);

/* Opens PATH (relative: "a/b", or ".") beneath directory ROOTFD with FLAGS (O_NOFOLLOW
 * and O_CLOEXEC added) the way stp_destnodes_open does, with no record to check: no
 * symlink followed on the way, none at the end (O_PATH gets the link itself), no ".."
 * out. Used by `stipple diff` on a directory side. 0 and *FD, or a negative errno
 * (-ELOOP: a symlink on the way). */
int stp_beneath_open(int rootfd, const char *path, int flags, int *fd);

/* PATH beneath ROOTFD, as stp_beneath_open finds it, opened for reading only if it is a
 * regular file: the node is found with O_PATH and checked first, and that same inode is
 * then opened through its /proc/self/fd link (stp_reopen), so a device node or FIFO
 * planted in a file's place is never opened (opening some has effects: a tape rewinds,
 * a modem hangs up). Without /proc, by its path again, checked to be the same node
 * (-EAGAIN when it is not, though that open has run). 0 with *FD (O_RDONLY, O_NONBLOCK,
 * O_CLOEXEC) and *ST; -EINVAL for a node that is not a regular file, else the error. */
int stp_beneath_open_file(int rootfd, const char *path, int *fd, struct stat *st);

#endif
