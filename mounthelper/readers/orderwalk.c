/* SPDX-License-Identifier: MIT */
/* The walk that refuses names out of order (orderwalk.h). */
#include "orderwalk.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The greatest name admitted so far in the directory being read at one depth. */
struct last_name {
	uint32_t dir;
	uint16_t len;
	char name[STP_NAME_MAX];
};

struct orderwalk {
	struct stp_walk walk;   /* what the callbacks get */
	const struct stp_walk *outer;
	struct last_name *last; /* per depth: a path of STP_WALK_PATH_MAX bytes has fewer */
};

/* 1 when E's name comes after every name admitted before it in its directory. Refused
 * names are not remembered: "b", "a", "b" refuses "a" and the second "b". */
static int admit(struct orderwalk *o, const struct stp_walk_entry *e)
{
	struct last_name *last = &o->last[e->depth];

	if (last->dir == e->dir && last->len &&
	    stp_name_cmp(last->name, last->len, e->name, e->name_len) >= 0)
		return 0;
	last->dir = e->dir;
	last->len = (uint16_t)e->name_len;
	memcpy(last->name, e->name, e->name_len);
	return 1;
}

static int ordered_enter(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct orderwalk *o = (struct orderwalk *)((char *)w - offsetof(struct orderwalk, walk));

	if (e->depth > 0 && !admit(o, e)) {
		stp_walk_problem(w, e->path, "entry %u is out of order or a duplicate; "
				 "left out with all below it", e->index);
		return STP_WALK_SKIP; /* a non-directory has nothing below: the same */
	}
	return o->outer->enter(w, e);
}

int stp_orderwalk_run(struct stp_walk *w)
{
	struct orderwalk o = { .walk = *w, .outer = w };
	int err;

	/* depths run to STP_WALK_PATH_MAX / 2: "/a" per level */
	o.last = calloc(STP_WALK_PATH_MAX / 2 + 1, sizeof(*o.last));
	if (!o.last)
		return -ENOMEM;
	o.walk.enter = ordered_enter;
	err = stp_walk_tree(&o.walk);
	w->problems = o.walk.problems;
	free(o.last);
	return err;
}
