/* SPDX-License-Identifier: MIT */
/*
 * Priming from the monitor's side (monstate.h): the lookups of the plan the daemon sent
 * run in a child of the monitor's that confines itself first, with the lookup filter
 * the monitor built before the fork (filters.h), beneath the mount point's parent pinned before the mount,
 * and only in the mount that was made there (prime.h has the child's side).
 *
 * Called from the monitor's one thread; not thread-safe (fork).
 */
#ifndef STP_MONPRIME_H
#define STP_MONPRIME_H

#include <sys/types.h>

struct stp_mon;
struct stp_prime_list;

/* The lookups of LIST in the confined child, killed at m->deadline. 0 (also when the
 * mount point's name no longer leads to the mount made: a warning, nothing primed),
 * -ETIMEDOUT with *STUCK the child to wait for once the mount is undone, or another
 * negative errno (the caller warns). */
int stp_monprime_look_up(const struct stp_mon *m, const struct stp_prime_list *list,
			 pid_t *stuck);

#endif
