/* SPDX-License-Identifier: MIT */
/*
 * A directory read a run at a time (stp_image_dir_run) gives, entry for entry, what
 * stp_image_dirent gives one at a time: across runs, with names packed as mkstipple
 * packs them and with names shared from far away in the pool (read one by one), and it
 * refuses what stp_image_dirent refuses. The images are made in memory (memimage.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "memimage.h"

#define NFILES 300u

static char names[NFILES][STP_NAME_MAX + 1];
static struct mem_file files[NFILES];

/* Names of 200 to 255 bytes, sorted: a run of 128 spans up to the whole scratch buffer. */
static void make_files(void)
{
	for (unsigned i = 0; i < NFILES; i++) {
		size_t len = 200 + (i * 37) % 56;

		snprintf(names[i], sizeof(names[i]), "f%03u", i);
		memset(names[i] + 4, 'a' + (char)(i % 26), len - 4);
		names[i][len] = '\0';
		files[i] = (struct mem_file){ .name = names[i] };
	}
}

static struct stp_inode root_of(struct stp_image *img)
{
	struct stp_inode root;

	CHECK(stp_image_inode(img, STP_ROOT_INO, &root) == 0);
	return root;
}

/* Every entry of the root, read in runs of at most MAX from FIRST on, is what
 * stp_image_dirent reads. */
static int runs_match(struct stp_image *img, uint32_t first, uint32_t max)
{
	static struct stp_dir_run run;
	struct stp_inode root = root_of(img);
	int bad = 0;

	for (uint32_t i = first; i < root.count; i += run.count) {
		if (stp_image_dir_run(img, &root, i, max, &run) || run.first != i || run.count == 0 ||
		    run.count > max)
			return 1;
		for (uint32_t k = 0; k < run.count; k++) {
			struct stp_dirent d;
			char name[STP_NAME_MAX + 1];

			if (stp_image_dirent(img, &root, i + k, &d, name))
				return 1;
			bad |= d.ino != run.ent[k].ino || d.dtype != run.ent[k].dtype ||
			       d.name_len != run.ent[k].name_len ||
			       strcmp(name, run.names + run.name_at[k]) != 0;
		}
	}
	return bad;
}

static void test_runs_give_every_entry(void)
{
	static struct stp_dir_run run;
	struct stp_image *img;
	struct stp_inode root;

	CHECK(mem_image_open(files, NFILES, 0, &img) == 0);
	root = root_of(img);
	CHECK(runs_match(img, 0, STP_DIR_RUN) == 0);
	CHECK(runs_match(img, 77, STP_DIR_RUN) == 0);
	CHECK(runs_match(img, 3, 7) == 0);
	CHECK(stp_image_dir_run(img, &root, 0, STP_DIR_RUN, &run) == 0 && run.count == STP_DIR_RUN);
	CHECK(stp_image_dir_run(img, &root, 256, STP_DIR_RUN, &run) == 0 && run.count == NFILES - 256);
	CHECK(stp_image_dir_run(img, &root, NFILES, STP_DIR_RUN, &run) == 0 && run.count == 0);
	CHECK(stp_image_dir_run(img, &root, UINT32_MAX, STP_DIR_RUN, &run) == 0 && run.count == 0);
	/* MAX bounds a run, clamped to 1 .. STP_DIR_RUN */
	CHECK(stp_image_dir_run(img, &root, 0, 5, &run) == 0 && run.count == 5);
	CHECK(stp_image_dir_run(img, &root, 0, 0, &run) == 0 && run.count == 1);
	CHECK(stp_image_dir_run(img, &root, 0, 1000, &run) == 0 && run.count == STP_DIR_RUN);
	CHECK(stp_image_dir_run(img, &root, NFILES - 4, 10, &run) == 0 && run.count == 4);
	stp_image_close(img);
}

/* The dirent table and the pool, found from the metadata header. */
static void tables(uint8_t *meta, size_t len, uint8_t **dirents, uint8_t **pool)
{
	struct stp_meta_header h;

	if (stp_meta_header_decode(meta, len, &h))
		abort();
	*dirents = meta + h.dirent_off;
	*pool = meta + h.strings_off;
}

/* Entry 0 takes the name of the last entry (a string shared, as stipple(5) allows; the
 * order of names breaks, which no run checks): its run cannot copy the pool at once. */
static void share_last_name(uint8_t *meta, size_t len, void *ctx)
{
	uint8_t *dirents, *pool;
	struct stp_dirent first, last;

	(void)ctx;
	tables(meta, len, &dirents, &pool);
	stp_dirent_decode(dirents, &first);
	stp_dirent_decode(dirents + (NFILES - 1) * STP_DIRENT_SIZE, &last);
	first.name_off = last.name_off;
	first.name_len = last.name_len;
	stp_dirent_encode(&first, dirents);
}

static void test_shared_names_read_one_by_one(void)
{
	static struct stp_dir_run run;
	struct stp_image *img;
	struct stp_inode root;

	CHECK(mem_image_open_edited(files, NFILES, 0, share_last_name, NULL, &img) == 0);
	root = root_of(img);
	CHECK(runs_match(img, 0, STP_DIR_RUN) == 0);
	CHECK(stp_image_dir_run(img, &root, 0, STP_DIR_RUN, &run) == 0 && run.count == STP_DIR_RUN);
	CHECK(strcmp(run.names + run.name_at[0], names[NFILES - 1]) == 0);
	CHECK(strcmp(run.names + run.name_at[1], names[1]) == 0);
	stp_image_close(img);
}

/* A '/' inside the name of entry 200. */
static void slash_in_name(uint8_t *meta, size_t len, void *ctx)
{
	uint8_t *dirents, *pool;
	struct stp_dirent d;

	(void)ctx;
	tables(meta, len, &dirents, &pool);
	stp_dirent_decode(dirents + 200 * STP_DIRENT_SIZE, &d);
	pool[d.name_off + 7] = '/';
}

/* Entry 5 names an inode past the table. */
static void ino_out_of_range(uint8_t *meta, size_t len, void *ctx)
{
	uint8_t *dirents, *pool;
	struct stp_dirent d;

	(void)ctx;
	tables(meta, len, &dirents, &pool);
	stp_dirent_decode(dirents + 5 * STP_DIRENT_SIZE, &d);
	d.ino = NFILES + 1;
	stp_dirent_encode(&d, dirents + 5 * STP_DIRENT_SIZE);
}

static void test_damage_is_refused(void)
{
	static struct stp_dir_run run;
	struct stp_image *img;
	struct stp_inode root, file;

	CHECK(mem_image_open_edited(files, NFILES, 0, slash_in_name, NULL, &img) == 0);
	root = root_of(img);
	CHECK(stp_image_dir_run(img, &root, 0, STP_DIR_RUN, &run) == 0 && run.count == STP_DIR_RUN);
	CHECK(stp_image_dir_run(img, &root, 128, STP_DIR_RUN, &run) == -EUCLEAN && run.count == 0);
	CHECK(stp_image_dir_run(img, &root, 201, STP_DIR_RUN, &run) == 0 && run.count == NFILES - 201);
	stp_image_close(img);

	CHECK(mem_image_open_edited(files, NFILES, 0, ino_out_of_range, NULL, &img) == 0);
	root = root_of(img);
	CHECK(stp_image_dir_run(img, &root, 0, STP_DIR_RUN, &run) == -EUCLEAN && run.count == 0);
	CHECK(stp_image_dir_run(img, &root, 6, STP_DIR_RUN, &run) == 0);
	CHECK(stp_image_inode(img, 1, &file) == 0);
	CHECK(stp_image_dir_run(img, &file, 0, STP_DIR_RUN, &run) == -ENOTDIR && run.count == 0);
	stp_image_close(img);
}

static void quiet(enum stp_log_level level, const char *msg) { (void)level; (void)msg; }

int main(void)
{
	stp_log_set_handler(quiet);
	make_files();
	RUN(test_runs_give_every_entry);
	RUN(test_shared_names_read_one_by_one);
	RUN(test_damage_is_refused);
	return tap_done();
}
