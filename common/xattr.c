/* SPDX-License-Identifier: MIT */
/* Extended attributes of an inode. */
#include "image_internal.h"

#include <string.h>

#include "log.h"

int stp_image_xattr(const struct stp_image *img, const struct stp_inode *inode, uint32_t index,
		    struct stp_xattr *x, char name[STP_XATTR_NAME_MAX + 1])
{
	unsigned long long n = (unsigned long long)inode->xattr_first + index;
	uint8_t rec[STP_XATTR_SIZE];
	int rc;

	if (index >= inode->xattr_count)
		return -ENOENT;
	rc = img_meta_read(img, img->mh.xattr_off + n * STP_XATTR_SIZE, sizeof(rec), rec);
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

int stp_image_xattr_value(const struct stp_image *img, const struct stp_xattr *x, void *value)
{
	/* stp_image_xattr checked the range */
	return img_read_string(img, x->value_off, x->value_len, value);
}
