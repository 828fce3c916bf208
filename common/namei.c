/* SPDX-License-Identifier: MIT */
/* Directory entries, name lookup and path resolution. */
#include "image_internal.h"

#include <dirent.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "util.h"

/* Decodes record REC, entry INDEX of DIR, into OUT and checks it, without its name. */
static int dirent_check(const struct stp_image *img, const struct stp_inode *dir,
			uint32_t index, const uint8_t rec[STP_DIRENT_SIZE], struct stp_dirent *out)
{
	if (stp_dirent_decode(rec, out) ||
	    out->ino >= img->mh.inode_count || out->ino == STP_ROOT_INO ||
	    out->dtype == DT_UNKNOWN || stp_mode_dtype(DTTOIF(out->dtype)) != out->dtype ||
	    out->name_len > STP_NAME_MAX ||
	    !img_range_ok(out->name_off, out->name_len, img->mh.strings_size))
		return STP_CORRUPT(img->path, "directory entry %llu out of range",
				   (unsigned long long)(dir->data + index));
	return 0;
}

/* Entry INDEX of DIR, checked, without its name. */
static int dirent_get(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		      struct stp_dirent *out)
{
	uint8_t rec[STP_DIRENT_SIZE];
	int rc;

	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (index >= dir->count)
		return -ENOENT;
	rc = img_meta_read(img, img->mh.dirent_off + (dir->data + index) * STP_DIRENT_SIZE,
		       sizeof(rec), rec);
	return rc ? rc : dirent_check(img, dir, index, rec, out);
}

/* NAME (LEN bytes, NUL-terminated here) of entry INDEX of DIR, checked. */
static int name_check(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		      char *name, size_t len)
{
	name[len] = '\0';
	if (!stp_name_ok(name, len))
		return STP_CORRUPT(img->path, "directory entry %llu has an invalid name",
				   (unsigned long long)(dir->data + index));
	return 0;
}

int stp_image_dirent(const struct stp_image *img, const struct stp_inode *dir, uint32_t index,
		     struct stp_dirent *out, char name[STP_NAME_MAX + 1])
{
	int rc = dirent_get(img, dir, index, out);

	if (!rc)
		rc = img_read_string(img, out->name_off, out->name_len, name);
	return rc ? rc : name_check(img, dir, index, name, out->name_len);
}

int stp_image_lookup_name(const struct stp_image *img, uint32_t index, uint32_t *dir,
			  char name[STP_NAME_MAX + 1])
{
	uint8_t rec[STP_LOOKUP_SIZE];
	struct stp_lookup l;
	struct stp_inode in;
	int rc;

	if (index >= img->mh.lookup_count)
		return -EINVAL;
	rc = img_meta_read(img, img->mh.lookup_off + (uint64_t)index * STP_LOOKUP_SIZE,
			   sizeof(rec), rec);
	if (rc)
		return rc;
	if (stp_lookup_decode(rec, &l) || l.dir >= img->mh.inode_count ||
	    l.name_len > STP_NAME_MAX || !img_range_ok(l.name_off, l.name_len, img->mh.strings_size))
		return STP_CORRUPT(img->path, "lookup %u out of range", index);
	rc = stp_image_inode(img, l.dir, &in);
	if (!rc)
		rc = img_read_string(img, l.name_off, l.name_len, name);
	if (rc)
		return rc;
	name[l.name_len] = '\0';
	if (!S_ISDIR(in.mode) || !stp_name_ok(name, l.name_len))
		return STP_CORRUPT(img->path, "lookup %u: %s", index,
				   S_ISDIR(in.mode) ? "invalid name" : "not in a directory");
	*dir = l.dir;
	return 0;
}

/* The names of RUN's entries into run->names: one copy of the pool when they lie close
 * together (mkstipple writes a directory's names in entry order), else one each. */
static int dir_run_names(const struct stp_image *img, const struct stp_inode *dir,
			 struct stp_dir_run *run)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t at = 0;
	bool one = false;
	int rc;

	for (uint32_t i = 0; i < run->count; i++) {
		lo = run->ent[i].name_off < lo ? run->ent[i].name_off : lo;
		if (run->ent[i].name_off + run->ent[i].name_len > hi)
			hi = run->ent[i].name_off + run->ent[i].name_len;
	}
	if (hi - lo <= sizeof(run->span)) {
		rc = img_read_string(img, lo, (size_t)(hi - lo), run->span);
		if (rc)
			return rc;
		one = true;
	}
	for (uint32_t i = 0; i < run->count; i++) {
		const struct stp_dirent *d = &run->ent[i];
		char *name = run->names + at;

		if (one)
			memcpy(name, run->span + (d->name_off - lo), d->name_len);
		else if ((rc = img_read_string(img, d->name_off, d->name_len, name)))
			return rc;
		rc = name_check(img, dir, run->first + i, name, d->name_len);
		if (rc)
			return rc;
		run->name_at[i] = (uint16_t)at;
		at += d->name_len + 1u;
	}
	return 0;
}

int stp_image_dir_run(const struct stp_image *img, const struct stp_inode *dir, uint32_t first,
		      uint32_t max, struct stp_dir_run *run)
{
	uint8_t recs[STP_DIR_RUN * STP_DIRENT_SIZE];
	int rc;

	run->first = first;
	run->count = 0;
	if (!S_ISDIR(dir->mode))
		return -ENOTDIR;
	if (first >= dir->count)
		return 0;
	max = max < 1 ? 1 : max > STP_DIR_RUN ? STP_DIR_RUN : max;
	run->count = dir->count - first < max ? dir->count - first : max;
	rc = img_meta_read(img, img->mh.dirent_off + ((uint64_t)dir->data + first) * STP_DIRENT_SIZE,
		       run->count * STP_DIRENT_SIZE, recs);
	for (uint32_t i = 0; !rc && i < run->count; i++)
		rc = dirent_check(img, dir, first + i, recs + i * STP_DIRENT_SIZE, &run->ent[i]);
	if (!rc)
		rc = dir_run_names(img, dir, run);
	if (rc)
		run->count = 0;
	return rc;
}

int stp_image_lookup(const struct stp_image *img, uint32_t dir, const char *name, size_t len,
		     uint32_t *ino)
{
	struct stp_inode d;
	uint32_t lo = 0, hi;
	int rc = stp_image_inode(img, dir, &d);

	if (rc)
		return rc;
	if (!S_ISDIR(d.mode))
		return -ENOTDIR;
	hi = d.count;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		struct stp_dirent de;
		char n[STP_NAME_MAX + 1];
		int c;

		rc = stp_image_dirent(img, &d, mid, &de, n);
		if (rc)
			return rc;
		c = stp_name_cmp(name, len, n, de.name_len);
		if (c == 0) {
			*ino = de.ino;
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}

int stp_image_resolve(const struct stp_image *img, const char *path, uint32_t *ino)
{
	uint32_t cur = STP_ROOT_INO;
	enum stp_path_part part;
	const char *name;
	size_t len;

	while ((part = stp_path_next(&path, &name, &len)) != STP_PATH_END) {
		struct stp_inode d;
		int rc;

		if (part == STP_PATH_PARENT) {
			rc = stp_image_inode(img, cur, &d);
			if (!rc && !S_ISDIR(d.mode))
				rc = -ENOTDIR;
			if (!rc)
				cur = d.parent;
		} else {
			rc = stp_image_lookup(img, cur, name, len, &cur);
		}
		if (rc)
			return rc;
	}
	*ino = cur;
	return 0;
}
