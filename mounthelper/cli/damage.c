/* SPDX-License-Identifier: MIT */
#include "damage.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

#define DAMAGED_MAX 64   /* blocks told apart; past them the lines are printed as they come */
#define NAME_LEN 128     /* bytes kept of an image's and a file's name */

static struct {
	pthread_mutex_t lock;
	bool group;              /* files counted (stp_damage_group) */
	bool verbose;            /* and printed too */
	size_t n;
	struct damaged {
		uint64_t block;
		unsigned long files;
		bool told;               /* the library's line printed */
		char image[NAME_LEN];    /* the image it is a block of, as it is named */
		char first[NAME_LEN];    /* the first file counted */
	} b[DAMAGED_MAX];
} damage = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Block BLOCK of the image named IMAGE (LEN bytes): `stipple diff A B` reads two images,
 * and A's block 7 is not B's. Names are compared as kept, NAME_LEN - 1 bytes at most. */
static struct damaged *damaged_block(const char *image, size_t len, uint64_t block)
{
	char name[NAME_LEN];

	snprintf(name, sizeof(name), "%.*s", (int)(len < sizeof(name) ? len : sizeof(name) - 1),
		 image);
	for (size_t i = 0; i < damage.n; i++)
		if (damage.b[i].block == block && !strcmp(damage.b[i].image, name))
			return &damage.b[i];
	if (damage.n == DAMAGED_MAX)
		return NULL;
	damage.b[damage.n] = (struct damaged){ .block = block };
	memcpy(damage.b[damage.n].image, name, sizeof(name));
	return &damage.b[damage.n++];
}

/* The library's "IMAGE: damaged image (FILE:LINE): block N: CAUSE": whether to print it
 * (the first time for that block of IMAGE). */
bool stp_damage_library_message(const char *msg)
{
	const char *p = strstr(msg, ": damaged image");
	const char *q = p ? strstr(p, ": block ") : NULL;
	unsigned long long block;
	struct damaged *d;
	bool shown;

	if (!q || sscanf(q, ": block %llu:", &block) != 1)
		return true;
	pthread_mutex_lock(&damage.lock);
	d = damaged_block(msg, (size_t)(p - msg), block);
	shown = !d || !d->told;
	if (d)
		d->told = true;
	pthread_mutex_unlock(&damage.lock);
	return shown;
}

/* Once grouped, a command's message about a file in a damaged block
 * ("... block N ... damaged ...", with a path) is counted against the block, and
 * printed only with -v; check's "data block N: ..." is left out when the library told
 * the block. Whether to print MSG. */
bool stp_damage_command_message(const char *image, const char *path, const char *msg)
{
	const char *p = strstr(msg, "block ");
	unsigned long long block;
	struct damaged *d;
	bool shown = true;

	if (!damage.group || !p || !strstr(msg, "damaged") || sscanf(p, "block %llu", &block) != 1)
		return true;
	image = image ? image : "";
	pthread_mutex_lock(&damage.lock);
	d = damaged_block(image, strlen(image), block);
	if (d && !path) {
		shown = !d->told;
	} else if (d) {
		if (!d->files++)
			snprintf(d->first, sizeof(d->first), "%s", path);
		shown = damage.verbose;
	}
	pthread_mutex_unlock(&damage.lock);
	return shown;
}

void stp_damage_group(bool verbose)
{
	damage.group = true;
	damage.verbose = verbose;
}

void stp_damage_flush(const char *command)
{
	pthread_mutex_lock(&damage.lock);
	for (size_t i = 0; i < damage.n; i++) {
		struct damaged *d = &damage.b[i];

		if (!d->files)
			continue;
		fprintf(stderr, "stipple %s: ", command);
		if (d->image[0]) {
			stp_escape_put(stderr, d->image, strlen(d->image));
			fputs(": ", stderr);
		}
		fprintf(stderr, "data block %llu: damaged image; ", (unsigned long long)d->block);
		if (d->files == 1 || damage.verbose) {
			fprintf(stderr, "%lu file%s data in it", d->files,
				d->files == 1 ? " has" : "s have");
			if (d->files == 1) {
				fputs(": ", stderr);
				stp_escape_put(stderr, d->first, strlen(d->first));
			}
		} else {
			fprintf(stderr, "%lu files have data in it, the first ", d->files);
			stp_escape_put(stderr, d->first, strlen(d->first));
			fputs(" (-v names them all)", stderr);
		}
		fputc('\n', stderr);
		d->files = 0;
	}
	pthread_mutex_unlock(&damage.lock);
}
