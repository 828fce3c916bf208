/* SPDX-License-Identifier: MIT */
/* The hot list's lookup lines, for the image's lookup table. */
#include "lookups.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format.h"
#include "report.h"
#include "util.h"

static int push(struct tree *t, const struct node *dir, const char *name, size_t len)
{
	char *copy;

	if (stp_room_for(&t->lookups, &t->lookups_cap, t->nlookups, sizeof(*t->lookups)))
		return -ENOMEM;
	copy = strndup(name, len);
	if (!copy)
		return -ENOMEM;
	t->lookups[t->nlookups++] = (struct tree_lookup){ dir, copy, (uint16_t)len };
	return 0;
}

int lookups_add(struct tree *t, const char *path, const char *list, unsigned lineno)
{
	const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
	const struct node *dir = t->root;
	char *dpath;

	if (slash) {
		dpath = strndup(path, (size_t)(slash - path));
		if (!dpath)
			return -ENOMEM;
		dir = tree_find(t, dpath);
		free(dpath);
	}
	if (!dir || !S_ISDIR(dir->st.st_mode) || !stp_name_ok(name, strlen(name))) {
		report_warning(NULL, "%s:%u: %s: %s, skipped", list, lineno, path,
			       !dir ? "its directory is not in the tree"
			       : !S_ISDIR(dir->st.st_mode) ? "not in a directory"
			       : "not a name a directory holds");
		return 0;
	}
	return push(t, dir, name, strlen(name));
}

static const struct tree_lookup *sorted_base;

/* By directory and name, then by place in the list: the first of equals comes first. */
static int cmp_lookup(const void *a, const void *b)
{
	const struct tree_lookup *x = &sorted_base[*(const size_t *)a];
	const struct tree_lookup *y = &sorted_base[*(const size_t *)b];
	int c;

	if (x->dir->ino != y->dir->ino)
		return x->dir->ino < y->dir->ino ? -1 : 1;
	c = stp_name_cmp(x->name, x->len, y->name, y->len);
	if (c)
		return c;
	return (*(const size_t *)a > *(const size_t *)b) - (*(const size_t *)a < *(const size_t *)b);
}

/* Marks with a NULL name every lookup that repeats an earlier one, and frees it. */
static int drop_repeats(struct tree *t)
{
	size_t *idx = reallocarray(NULL, t->nlookups, sizeof(*idx));

	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < t->nlookups; i++)
		idx[i] = i;
	sorted_base = t->lookups;
	qsort(idx, t->nlookups, sizeof(*idx), cmp_lookup);
	sorted_base = NULL;
	for (size_t i = t->nlookups; i-- > 1;) {
		struct tree_lookup *x = &t->lookups[idx[i]];
		const struct tree_lookup *y = &t->lookups[idx[i - 1]];

		if (x->dir == y->dir && x->len == y->len && !memcmp(x->name, y->name, x->len)) {
			free(x->name);
			x->name = NULL;
		}
	}
	free(idx);
	return 0;
}

int lookups_finish(struct tree *t, const char *list)
{
	size_t k = 0, over = 0;
	int rc = t->nlookups ? drop_repeats(t) : 0;

	if (rc)
		return rc;
	for (size_t i = 0; i < t->nlookups; i++) {
		if (!t->lookups[i].name)
			continue;
		if (k == STP_LOOKUP_MAX) {
			free(t->lookups[i].name);
			over++;
			continue;
		}
		t->lookups[k++] = t->lookups[i];
	}
	if (over)
		report_warning(NULL, "%s: %zu names looked up past the first %u, not kept", list,
			       over, STP_LOOKUP_MAX);
	t->nlookups = k;
	return 0;
}
