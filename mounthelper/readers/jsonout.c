/* SPDX-License-Identifier: MIT */
#include "jsonout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "cli.h"
#include "image.h"
#include "util.h"

static int is_utf8(const char *s, size_t len)
{
	for (size_t i = 0, n; i < len; i += n)
		if (!s[i] || !(n = stp_cli_utf8_len(s + i, len - i)))
			return 0;
	return 1;
}

json_t *stp_json_bytes(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	json_t *j;
	FILE *f;

	if (is_utf8(s, len))
		return json_stringn(s, len);
	f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	stp_cli_put_escaped(f, s, len);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	j = json_stringn(buf, n);
	free(buf);
	return j;
}

const char *stp_json_type(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFCHR: return "chardev";
	case S_IFBLK: return "blockdev";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "unknown";
	}
}

static json_t *link_target(const struct stp_image *img, const struct stp_inode *in, int *failed)
{
	char target[STP_LINK_MAX + 1];
	size_t len;

	if (stp_image_readlink(img, in, target, &len)) {
		*failed = 1;
		return json_null();
	}
	return stp_json_bytes(target, len);
}

json_t *stp_json_inode(const struct stp_image *img, const char *path, size_t path_len,
		       const struct stp_inode *in, int *failed)
{
	json_t *o = json_pack("{s:o?,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
			      "path", stp_json_bytes(path, path_len),
			      "type", stp_json_type(in->mode),
			      "mode", (json_int_t)(in->mode & 07777),
			      "uid", (json_int_t)in->uid, "gid", (json_int_t)in->gid,
			      "nlink", (json_int_t)in->nlink, "size", (json_int_t)in->size,
			      "mtime", (json_int_t)in->mtime_sec,
			      "mtime_nsec", (json_int_t)in->mtime_nsec);

	if (!o)
		return NULL;
	if (S_ISLNK(in->mode))
		json_object_set_new(o, "target", link_target(img, in, failed));
	if (S_ISCHR(in->mode) || S_ISBLK(in->mode))
		json_object_set_new(o, "rdev", json_pack("[I,I]",
			(json_int_t)stp_cli_rdev_major(in), (json_int_t)stp_cli_rdev_minor(in)));
	return o;
}

int stp_json_put(json_t *v)
{
	int err = v ? json_dumpf(v, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER |
				 JSON_ENCODE_ANY) : -1;

	json_decref(v);
	return err ? -1 : 0;
}

int stp_json_print(const struct stp_cli *cli, json_t *doc)
{
	int err = 0;

	if (!doc) {
		stp_cli_error(cli, "out of memory");
		return -1;
	}
	if (json_dumpf(doc, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER) || putchar('\n') == EOF ||
	    fflush(stdout))
		err = -1;
	json_decref(doc);
	if (err)
		stp_cli_error(cli, "writing to standard output: %s", stp_strerror(-errno));
	return err;
}
