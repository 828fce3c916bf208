/* SPDX-License-Identifier: MIT */
/* Extended attributes of an inode. */
#include "image_internal.h"

#include <string.h>

#include "log.h"

/* Record N of the table into *X and its name into NAME, checked alone. */
static int read_record(const struct stp_image *img, unsigned long long n, struct stp_xattr *x,
		       char name[STP_XATTR_NAME_MAX + 1])
{
	uint8_t rec[STP_XATTR_SIZE];
	int rc = img_meta_read(img, img->mh.xattr_off + n * STP_XATTR_SIZE, sizeof(rec), rec);

	if (rc)
		return rc;
	if (stp_xattr_decode(rec, x) ||
	    x->name_len == 0 || !img_range_ok(x->name_off, x->name_len, img->mh.strings_size) ||
	    !img_range_ok(x->value_off, x->value_len, img->mh.strings_size))
		return STP_CORRUPT(img->path, "extended attribute %llu out of range", n);
	/* What Linux accepts: getxattr and listxattr cannot return more than these, and a
	 * NUL would cut the name short in listxattr's list. */
	if (x->name_len <= STP_XATTR_NAME_MAX && x->value_len <= STP_XATTR_VALUE_MAX) {
		rc = img_read_string(img, x->name_off, x->name_len, name);
		if (rc)
			return rc;
		name[x->name_len] = '\0';
		if (!memchr(name, 0, x->name_len))
			return 0;
	}
	return STP_CORRUPT(img->path, "extended attribute %llu: name or value too long, "
			   "or a NUL in the name", n);
}

int stp_image_xattr(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		    struct stp_xattr *x, char name[STP_XATTR_NAME_MAX + 1])
{
	unsigned long long n = (unsigned long long)inode->xattr_first + index;
	char before[STP_XATTR_NAME_MAX + 1];
	struct stp_xattr prev;
	int rc;

	if (index >= inode->xattr_count)
		return -ENOENT;
	rc = read_record(img, n, x, name);
	/* an inode's names strictly increase (stipple(5)): each record checks the one
	 * before, so that any walk of them sees every pair, and a look-up may bisect */
	if (!rc && index)
		rc = read_record(img, n - 1, &prev, before);
	if (!rc && index && strcmp(before, name) >= 0)
		return STP_CORRUPT(img->path, "extended attribute %llu: names out of order or "
				   "repeated", n);
	return rc;
}

int stp_image_xattr_find(const struct stp_image *img, const struct stp_inode *inode,
			 const char *wanted, struct stp_xattr *x)
{
	char name[STP_XATTR_NAME_MAX + 1];
	uint32_t lo = 0, hi = inode->xattr_count;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int rc = stp_image_xattr(img, inode, mid, x, name), c;

		if (rc)
			return rc;
		c = strcmp(name, wanted);
		if (!c)
			return 0;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -ENODATA;
}

int stp_image_xattr_sizes(const struct stp_image *img, const struct stp_inode *inode,
			  uint64_t *values)
{
	char name[STP_XATTR_NAME_MAX + 1];
	uint64_t names = 0;
	struct stp_xattr x;

	*values = 0;
	for (uint32_t i = 0; i < inode->xattr_count; i++) {
		int rc = stp_image_xattr(img, inode, i, &x, name);

		if (rc)
			return rc;
		names += x.name_len + 1u;
		*values += x.value_len;
	}
	if (names > STP_XATTR_LIST_MAX)
		return STP_CORRUPT(img->path, "extended attributes %u to %u: names of %llu bytes, "
				   "over %u", inode->xattr_first,
				   inode->xattr_first + inode->xattr_count - 1,
				   (unsigned long long)names, STP_XATTR_LIST_MAX);
	return 0;
}

int stp_image_xattr_value(const struct stp_image *img, const struct stp_xattr *x, void *value)
{
	/* stp_image_xattr checked the range */
	return img_read_string(img, x->value_off, x->value_len, value);
}
