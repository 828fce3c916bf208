/* SPDX-License-Identifier: MIT */
/* The nodes extract made and reaches again (destnodes.h). */
#include "destnodes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int stp_destnodes_init(struct stp_destnodes *t, int rootfd, uint32_t root_ino)
{
	struct stat st;
	uint32_t rec;

	*t = (struct stp_destnodes){ .rootfd = rootfd };
	if (fstat(rootfd, &st))
		return -errno;
	return stp_destnodes_add(t, STP_DESTNODES_ROOT, "", root_ino, &st, &rec);
}

int stp_destnodes_add(struct stp_destnodes *t, uint32_t parent, const char *name,
		      uint32_t ino, const struct stat *st, uint32_t *rec)
{
	if (t->count == UINT32_MAX)
		return -EOVERFLOW;
	if (t->count == t->cap) {
		uint32_t cap = t->cap < UINT32_MAX / 2 ? (t->cap ? t->cap * 2 : 64) : UINT32_MAX;
		struct stp_destnode *n = reallocarray(t->node, cap, sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->node = n;
		t->cap = cap;
	}
	t->node[t->count] = (struct stp_destnode){ .parent = parent, .ino = ino,
		.dev = st->st_dev, .st_ino = st->st_ino, .is_dir = S_ISDIR(st->st_mode),
		.name = strdup(name) };
	if (!t->node[t->count].name)
		return -ENOMEM;
	*rec = t->count++;
	return 0;
}

/* Built from the end: each name, then its parent's, up to DIR. */
int stp_destnodes_path(const struct stp_destnodes *t, uint32_t rec, char *out, size_t len)
{
	size_t at = len;

	if (rec == STP_DESTNODES_ROOT)
		return len >= 2 ? (memcpy(out, ".", 2), 0) : -ENAMETOOLONG;
	if (!at--)
		return -ENAMETOOLONG;
	out[at] = '\0';
	for (uint32_t r = rec; r != STP_DESTNODES_ROOT; r = t->node[r].parent) {
		size_t n = strlen(t->node[r].name);

		if (at < n + (r != rec))
			return -ENAMETOOLONG;
		if (r != rec)
			out[--at] = '/';
		at -= n;
		memcpy(out + at, t->node[r].name, n);
	}
	memmove(out, out + at, len - at);
	return 0;
}

int stp_destnodes_open(const struct stp_destnodes *t, uint32_t rec, int flags, int *fd)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	char path[PATH_MAX];
	struct stat st;
	int err = stp_destnodes_path(t, rec, path, sizeof(path));

	if (err)
		return err;
	*fd = (int)syscall(SYS_openat2, t->rootfd, path, &how, sizeof(how));
	if (*fd < 0)
		return -errno;
	if (fstat(*fd, &st))
		err = -errno;
	else if (st.st_dev != t->node[rec].dev || st.st_ino != t->node[rec].st_ino)
		err = -ESTALE;
	if (err) {
		close(*fd);
		*fd = -1;
	}
	return err;
}

void stp_destnodes_free(struct stp_destnodes *t)
{
	for (uint32_t i = 0; i < t->count; i++)
		free(t->node[i].name);
	free(t->node);
	*t = (struct stp_destnodes){ .rootfd = -1 };
}
