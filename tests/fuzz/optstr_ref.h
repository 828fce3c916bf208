/* SPDX-License-Identifier: MIT */
/*
 * mounthelper/mount/optstr.c against libmount itself, for test_optstr and fuzz_optstr:
 * the same items (names, values, where the next item starts) as mnt_optstr_next_option,
 * and the same three lists as mnt_split_optstr. Only tests link libmount.
 */
#ifndef STP_OPTSTR_REF_H
#define STP_OPTSTR_REF_H

#include <libmount.h>
#include <stdlib.h>
#include <string.h>

#include "optstr.h"

/* Whether libmount's item (N, NS, V, VS, next at MC) in its copy M is OP at C in L. */
static int optstr_same_item(const char *m, const char *n, size_t ns, const char *v, size_t vs,
			    const char *mc, const char *l, const struct stp_opt *op, const char *c)
{
	return n - m == op->name - l && ns == op->namesz && !v == !op->val &&
	       (!v || (v - m == op->val - l && vs == op->valsz)) && mc - m == c - l;
}

/* The items of LIST one by one: NULL when both agree, else what differs. */
static const char *optstr_items_differ(const char *list)
{
	char *m = strdup(list), *mc = m, *n, *v;
	const char *c = list, *why = NULL;
	size_t ns, vs;
	struct stp_opt op;

	if (!m)
		abort();
	while (!why) {
		int rc = mnt_optstr_next_option(&mc, &n, &ns, &v, &vs);
		bool ours = stp_optstr_next(&c, &op);

		if (rc < 0)
			why = "libmount cannot parse it";
		else if ((rc == 0) != ours)
			why = "one sees an item the other does not";
		else if (!ours)
			break;
		else if (!optstr_same_item(m, n, ns, v, vs, mc, list, &op, c))
			why = "an item differs";
	}
	free(m);
	return why;
}

/* Appends OP to *END as libmount's split does: NAME, '=' if any, VALUE. */
static void optstr_append(char *buf, char **end, const struct stp_opt *op)
{
	if (*end > buf)
		*(*end)++ = ',';
	memcpy(*end, op->name, op->namesz);
	*end += op->namesz;
	if (op->val) {
		*(*end)++ = '=';
		memcpy(*end, op->val, op->valsz);
		*end += op->valsz;
	}
	**end = '\0';
}

static int optstr_same_list(const char *theirs, const char *ours)
{
	return theirs ? !strcmp(theirs, ours) : !*ours;
}

/* The three lists of mnt_split_optstr: NULL when both agree, else which differs. */
static const char *optstr_split_differs(const char *list)
{
	size_t cap = strlen(list) + 1;
	char *buf[4], *end[4], *user = NULL, *vfs = NULL, *fs = NULL;
	const char *c = list, *why = NULL;
	struct stp_opt op;

	for (int i = 0; i < 4; i++)
		if (!(end[i] = buf[i] = calloc(1, cap)))
			abort();
	while (stp_optstr_next(&c, &op)) {
		enum stp_optstr_map map = stp_optstr_map(&op);

		optstr_append(buf[map], &end[map], &op);
	}
	if (mnt_split_optstr(list, &user, &vfs, &fs, 0, 0))
		why = "libmount cannot split it";
	else if (!optstr_same_list(user, buf[STP_OPTSTR_USER]))
		why = "mount(8)'s list differs";
	else if (!optstr_same_list(vfs, buf[STP_OPTSTR_VFS]))
		why = "the kernel's flags differ";
	else if (!optstr_same_list(fs, buf[STP_OPTSTR_FS]))
		why = "the file system's list differs";
	for (int i = 0; i < 4; i++)
		free(buf[i]);
	free(user);
	free(vfs);
	free(fs);
	return why;
}

static const char *optstr_differs(const char *list)
{
	const char *why = optstr_items_differ(list);

	return why ? why : optstr_split_differs(list);
}

#endif
