/* SPDX-License-Identifier: MIT */
/* The tree walk of the readers (cli.h). */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "image.h"
#include "treewalk.h"
#include "util.h"

void stp_walk_problem(struct stp_walk *w, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	stp_cli_vproblem(w->cli, w->image, path, fmt, ap);
	va_end(ap);
	w->problems++;
}

int stp_walk_link_target(struct stp_walk *w, const struct stp_walk_entry *e, char **target)
{
	char t[STP_LINK_MAX + 1];
	size_t len;
	int err = stp_image_readlink(w->img, &e->inode, t, &len);

	if (err) {
		stp_walk_problem(w, e->path, "symlink target: %s", stp_strerror(err));
		return err;
	}
	*target = strndup(t, len);
	return *target ? 0 : -ENOMEM;
}

static void walk_entry_of(struct stp_walk *w, const struct stp_tree_entry *t,
			  struct stp_walk_entry *e)
{
	*e = (struct stp_walk_entry){ .path = t->rooted, .name = t->name, .name_len = t->name_len,
				      .ino = t->ino, .dir = t->dir, .index = t->index,
				      .dtype = t->dtype, .depth = t->depth, .inode = *t->inode };
}

static int walk_enter(void *ctx, const struct stp_tree_entry *t)
{
	struct stp_walk *w = ctx;
	struct stp_walk_entry e;
	int err;

	walk_entry_of(w, t, &e);
	err = w->enter(w, &e);
	return err < 0 || err == STP_WALK_SKIP ? err : 0;
}

static int walk_leave(void *ctx, const struct stp_tree_entry *t)
{
	struct stp_walk *w = ctx;
	struct stp_walk_entry e;

	walk_entry_of(w, t, &e);
	return w->leave ? w->leave(w, &e) : 0;
}

static int walk_damage(void *ctx, const struct stp_tree_problem *p)
{
	struct stp_walk *w = ctx;
	char msg[128];

	stp_check_tree_problem(p, msg, sizeof(msg));
	if (p->what == STP_TREE_ABANDONED)
		stp_cli_problem(w->cli, w->image, p->rooted, "%s", msg); /* not counted */
	else
		stp_walk_problem(w, p->rooted, "%s", msg);
	return 0;
}

/* The root, which common's walk does not visit: its enter, the walk, its leave. */
int stp_walk_tree(struct stp_walk *w)
{
	/* rooted paths stay below STP_WALK_PATH_MAX bytes with their NUL */
	static const struct stp_treewalk_ops ops = {
		.enter = walk_enter, .leave = walk_leave, .problem = walk_damage,
		.path_max = STP_WALK_PATH_MAX - 1, .inodes = 1,
	};
	struct stp_walk_entry root = { .path = "/", .name = "", .ino = STP_ROOT_INO,
				       .dir = STP_ROOT_INO, .dtype = DT_DIR };
	int err;

	w->problems = 0;
	/* inodes that share records would make the walk quadratic: refused before it starts,
	 * so that nothing is written of an image that breaks the rule */
	err = stp_treewalk_files(w->img, NULL, NULL);
	if (err)
		return err;
	err = stp_image_inode(w->img, STP_ROOT_INO, &root.inode);
	if (err) {
		stp_walk_problem(w, "/", "root inode: %s", stp_strerror(err));
		return 0;
	}
	err = w->enter(w, &root);
	if (err < 0 || err == STP_WALK_SKIP)
		return err < 0 ? err : 0;
	err = stp_treewalk(w->img, &ops, w);
	if (err == STP_WALK_SKIP)
		err = 0;
	if (err)
		return err;
	return w->leave ? w->leave(w, &root) : 0;
}
