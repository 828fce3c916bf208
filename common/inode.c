/* SPDX-License-Identifier: MIT */
/* Inodes, link targets and the string pool of an image. */
#include "image_internal.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"

unsigned stp_mode_dtype(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return DT_REG;
	case S_IFDIR: return DT_DIR;
	case S_IFLNK: return DT_LNK;
	case S_IFCHR: return DT_CHR;
	case S_IFBLK: return DT_BLK;
	case S_IFIFO: return DT_FIFO;
	case S_IFSOCK: return DT_SOCK;
	default: return DT_UNKNOWN;
	}
}

static int inode_check(const struct stp_image *img, uint32_t ino, const struct stp_inode *in)
{
	const struct stp_meta_header *mh = &img->mh;

	/* bits above type and permissions would reach the kernel, which has no room for them */
	if (in->mtime_nsec >= 1000000000u || in->nlink == 0 || (in->mode & ~(S_IFMT | 07777)) ||
	    in->xattr_count > STP_XATTR_COUNT_MAX ||
	    !img_range_ok(in->xattr_first, in->xattr_count, mh->xattr_count))
		return STP_CORRUPT(img->path, "inode %u: attributes out of range", ino);
	switch (in->mode & S_IFMT) {
	case S_IFREG:
		if (!img_range_ok(in->data, in->count, mh->extent_count))
			return STP_CORRUPT(img->path, "inode %u: extents out of range", ino);
		return 0;
	case S_IFDIR:
		if (!img_range_ok(in->data, in->count, mh->dirent_count) || in->size != in->count ||
		    in->parent >= mh->inode_count)
			return STP_CORRUPT(img->path, "inode %u: directory entries out of range", ino);
		return 0;
	case S_IFLNK:
		if (in->size == 0 || in->size > STP_LINK_MAX ||
		    !img_range_ok(in->data, in->size, mh->strings_size))
			return STP_CORRUPT(img->path, "inode %u: link target out of range", ino);
		return 0;
	case S_IFCHR: case S_IFBLK: case S_IFIFO: case S_IFSOCK:
		return 0;
	default:
		return STP_CORRUPT(img->path, "inode %u: unknown type %#o", ino, in->mode & S_IFMT);
	}
}

int stp_image_inode(const struct stp_image *img, uint32_t ino, struct stp_inode *out)
{
	uint8_t rec[STP_INODE_SIZE];
	int rc;

	if (ino >= img->mh.inode_count)
		return STP_CORRUPT(img->path, "inode %u out of range", ino);
	rc = img_meta_read(img, img->mh.inode_off + (uint64_t)ino * STP_INODE_SIZE, sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_inode_decode(rec, out))
		return STP_CORRUPT(img->path, "inode %u: reserved bytes set", ino);
	if (ino == STP_ROOT_INO && !S_ISDIR(out->mode))
		return STP_CORRUPT(img->path, "the root is not a directory");
	return inode_check(img, ino, out);
}

/* LEN bytes at OFF of the string pool (bounded by the caller) into DST. */
int img_read_string(const struct stp_image *img, uint64_t off, size_t len, void *dst)
{
	return img_meta_read(img, img->mh.strings_off + off, len, dst);
}

int stp_image_readlink(const struct stp_image *img, const struct stp_inode *inode,
		       char target[STP_LINK_MAX + 1], size_t *len)
{
	int rc;

	if (!S_ISLNK(inode->mode))
		return -EINVAL;
	/* stp_image_inode bounded size by STP_LINK_MAX and the pool */
	rc = img_read_string(img, inode->data, inode->size, target);
	if (rc)
		return rc;
	/* a NUL would cut the target short wherever it is used as a C string */
	if (memchr(target, 0, inode->size))
		return STP_CORRUPT(img->path, "link target at %llu holds a NUL",
				   (unsigned long long)inode->data);
	target[inode->size] = '\0';
	*len = inode->size;
	return 0;
}
