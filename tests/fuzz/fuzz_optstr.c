/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: mount option lists (mounthelper/mount/optstr.c), which mount.stipple splits
 * without libmount. The input up to its first NUL byte is a -o list; our items and our
 * split into mount(8)'s, the kernel's and the file system's options must be libmount's.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "optstr_ref.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *list = strndup((const char *)data, size);
	const char *why;

	if (!list)
		abort();
	why = optstr_differs(list);
	if (why)
		fprintf(stderr, "'%s': %s\n", list, why);
	FUZZ_ASSERT(!why);
	free(list);
	return 0;
}
