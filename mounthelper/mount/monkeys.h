/* SPDX-License-Identifier: MIT */
/*
 * verify='s public keys, read by the monitor before the image as the caller's own
 * configuration (trustkeys.h): the file verify=PUBKEY names, opened without following
 * a link, or every *.pub of the trusted keys folder in name order, each opened beneath
 * it; parsed by m->checks->take_key (mount.stipple-checked only: monitor.h).
 *
 * Called from the monitor's one thread; not thread-safe.
 */
#ifndef STP_MONKEYS_H
#define STP_MONKEYS_H

struct stp_mon;

/* The keys into m->h.keys (m->h.nkeys of them, for the daemon); nothing without verify=.
 * 0, or a negative errno with the reason said (-ENOMEM, or take_key's). */
int stp_monkeys_read(struct stp_mon *m);

#endif
