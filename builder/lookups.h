/* SPDX-License-Identifier: MIT */
/*
 * The names a recorded start-up looked up, found or not (the hot list's lookup lines,
 * common/hotlist.h), kept in the image's lookup table (stipple(5)) so that a mount can
 * look them up before the application does. Not thread-safe.
 */
#ifndef MKSTP_LOOKUPS_H
#define MKSTP_LOOKUPS_H

#include "tree.h"

/* Adds PATH, line LINENO of hot list LIST, to T's lookups: its last name in the
 * directory the rest names. A path whose directory is not in the tree, or whose name is
 * not one a directory could hold, is said (a warning naming LIST and LINENO) and
 * skipped. 0 or -ENOMEM. */
int lookups_add(struct tree *t, const char *path, const char *list, unsigned lineno);

/* Once the list is read: keeps the first of each repeated (directory, name) and at most
 * STP_LOOKUP_MAX of them (the first; the rest are said and dropped), in the order
 * listed. 0 or -ENOMEM. */
int lookups_finish(struct tree *t, const char *list);

/* tree_free frees them. */

#endif
