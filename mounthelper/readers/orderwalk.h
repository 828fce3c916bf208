/* SPDX-License-Identifier: MIT */
/*
 * The one walk `stipple extract` and `stipple extract --tar` share, so that both refuse
 * the same names: cli.h's walk, where each directory's names must strictly ascend in the
 * image's name order (stipple(5)), as `stipple check` requires. An entry that does not
 * (a name met twice, next to its twin or not, or one out of order) is reported, counted
 * and skipped with everything below it. So no name is written twice, and no path runs
 * through an entry that is not the directory the walk went into: a symlink "aa", then a
 * directory "aa" holding "evil", gives "aa" alone.
 *
 * Single-threaded, as cli.h's walk.
 */
#ifndef STP_ORDERWALK_H
#define STP_ORDERWALK_H

struct stp_walk;

/* stp_walk_tree(W) with that check before W->enter. The callbacks get a walk of their
 * own whose ctx, cli, img and image are W's; W's problems are theirs at the end.
 * Returns as stp_walk_tree, or -ENOMEM. */
int stp_orderwalk_run(struct stp_walk *w);

#endif
