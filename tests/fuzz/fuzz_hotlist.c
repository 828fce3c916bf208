/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the hot list's line format (hotlist.h). The input, up to its first NUL
 * byte, is taken two ways: as a line mkstipple reads (up to its first newline), which is
 * split and its ranges parsed; and as a path the recorder writes. Whatever a line holds,
 * writing back what was read and reading that again must give the same path and ranges;
 * any path must survive being written and read; a written line is one line, its path
 * free of tabs; parsed ranges never end before they start.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "hotlist.h"

/* stp_hotlist_put's line for PATH and R[0..N), its newline checked and cut. */
static char *written(const char *path, const struct stp_hot_range *r, size_t n)
{
	char *text = NULL, *nl;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	FUZZ_ASSERT(stp_hotlist_put(f, path, r, n) == 0);
	FUZZ_ASSERT(fclose(f) == 0);
	nl = strchr(text, '\n');
	FUZZ_ASSERT(nl && nl == text + len - 1);
	*nl = 0;
	return text;
}

/* Writes PATH and R[0..N), reads the line back and checks it gives them again. */
static void round_trip(const char *path, const struct stp_hot_range *r, size_t n)
{
	char *line = written(path, r, n), *ranges = stp_hotlist_split(line);
	struct stp_hot_range *back;
	size_t nback;

	FUZZ_ASSERT(!strcmp(line, path));
	FUZZ_ASSERT((ranges != NULL) == (n != 0));
	if (ranges) {
		FUZZ_ASSERT(stp_hotlist_parse_ranges(ranges, &back, &nback) == 0);
		FUZZ_ASSERT(nback == n && !memcmp(back, r, n * sizeof(*r)));
		free(back);
	}
	free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = strnlen((const char *)data, size), n;
	char *text = malloc(len + 1), *nl, *ranges;
	struct stp_hot_range *r;

	if (!text)
		return 0;
	memcpy(text, data, len);
	text[len] = 0;
	round_trip(text, NULL, 0);
	nl = strchr(text, '\n');
	if (nl)
		*nl = 0;
	ranges = stp_hotlist_split(text);
	round_trip(text, NULL, 0);
	if (ranges && stp_hotlist_parse_ranges(ranges, &r, &n) == 0) {
		for (size_t i = 0; i < n; i++)
			FUZZ_ASSERT(r[i].start <= r[i].end);
		round_trip(text, r, n);
		free(r);
	}
	free(text);
	return 0;
}
