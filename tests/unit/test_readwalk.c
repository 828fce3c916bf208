/* SPDX-License-Identifier: MIT */
/*
 * A FUSE read walks the file's extents once (issue: one extent walk per read), whether it
 * is answered without copying or, past READ_PIECES pieces, copied. fuseops.c runs on the
 * libfuse stand-in of tests/fuzz/fuse_shim.c; stp_file_walk is wrapped at link time
 * (-Wl,--wrap) to count its calls; the bytes answered are checked against the image's.
 * Also: the entries of a READDIRPLUS reply that could not be sent are not left counted
 * in the inode table.
 */
#include <errno.h>
#include <string.h>

#include "cache.h"
#include "check.h"
#include "fileread.h"
#include "fuse_shim.h"
#include "fuseops.h"
#include "inodes.h"
#include "memimage.h"
#include "mountopts.h"

int __real_stp_file_walk(const struct stp_image *img, const struct stp_inode *inode,
			 uint64_t off, uint64_t len, stp_file_piece_fn fn, void *ctx);
int __wrap_stp_file_walk(const struct stp_image *img, const struct stp_inode *inode,
			 uint64_t off, uint64_t len, stp_file_piece_fn fn, void *ctx);

static unsigned walks;

int __wrap_stp_file_walk(const struct stp_image *img, const struct stp_inode *inode,
			 uint64_t off, uint64_t len, stp_file_piece_fn fn, void *ctx)
{
	walks++;
	return __real_stp_file_walk(img, inode, off, len, fn, ctx);
}

/* File 1: one extent. File 2: 100 extents of 64 bytes with 64-byte holes between them,
 * more pieces than a read answers without copying. */
static struct stp_extent frag[100];
static const struct stp_extent whole[] = { { 0, 0, 8192 } };

static struct stp_fs fs;
static struct stp_mount_opts opts;

/* Reads [OFF, OFF + LEN) of FUSE inode INO; 0 when the bytes are those of the file. */
static int read_checked(fuse_ino_t ino, const struct stp_extent *ext, unsigned next,
			uint64_t off, size_t len)
{
	struct fuse_req req = { .op = SHIM_READ, .ino = ino, .size = len, .userdata = &fs };
	struct fuse_file_info fi = { 0 };
	int bad = 0;

	stp_fuseops.read(&req, ino, len, (off_t)off, &fi);
	shim_finish(&req);
	if (req.reply.kind != SHIM_DATA || req.reply.len != len)
		bad = 1;
	for (size_t i = 0; !bad && i < len; i++) {
		uint64_t f = off + i;
		uint8_t want = 0;

		for (unsigned x = 0; x < next; x++)
			if (f >= ext[x].file_off && f < ext[x].file_off + ext[x].length)
				want = mem_byte(ext[x].stream_off + (f - ext[x].file_off));
		bad = req.reply.data[i] != want;
	}
	shim_clear(&req);
	return bad;
}

static struct stp_image *img;

static void test_zero_copy_read(void)
{
	walks = 0;
	CHECK(read_checked(2, whole, 1, 100, 4000) == 0);
	CHECK(walks == 1, "%u walks", walks);
}

static void test_copied_read(void)
{
	walks = 0;
	CHECK(read_checked(3, frag, 100, 0, 100 * 128) == 0);
	CHECK(walks == 1, "%u walks", walks);
}

/* Lists the root from offset 2 (the files, with attributes); the reply's send returns FAIL.
 * Returns the inodes the table then counts. */
static uint64_t readdirplus_counted(int fail)
{
	struct fuse_req req = { .op = SHIM_READDIRPLUS, .ino = FUSE_ROOT_ID, .size = 4096,
				.userdata = &fs, .fail = fail };
	struct fuse_file_info fi = { 0 };
	uint64_t n;

	CHECK(stp_inodes_new(16, &fs.inodes) == 0);
	stp_fuseops.readdirplus(&req, FUSE_ROOT_ID, 4096, 2, &fi);
	shim_finish(&req);
	CHECK(req.reply.kind == SHIM_DATA && req.reply.len > 0);
	shim_clear(&req);
	n = stp_inodes_count(fs.inodes);
	stp_inodes_free(fs.inodes);
	fs.inodes = NULL;
	return n;
}

static void test_readdirplus_unsent_forgotten(void)
{
	uint64_t n = readdirplus_counted(0);

	CHECK(n == 2, "%llu inodes counted after a sent reply", (unsigned long long)n);
	n = readdirplus_counted(-ENOENT);
	CHECK(n == 0, "%llu inodes counted after a failed send", (unsigned long long)n);
}

int main(void)
{
	struct mem_file files[] = {
		{ "a", 8192, whole, 1 },
		{ "b", 100 * 128, frag, 100 },
	};

	for (unsigned i = 0; i < 100; i++)
		frag[i] = (struct stp_extent){ (uint64_t)i * 128, 8192 + (uint64_t)i * 64, 64 };
	opts.cache_budget = 1; /* the rest zero: no warming, no recording */
	if (mem_image_open(files, 2, 8192 + 100 * 64, &img))
		return tap_skip_all("the image does not open");
	CHECK(stp_cache_new(img, 1, 1, &fs.cache) == 0);
	fs.img = img;
	fs.opts = &opts;
	RUN(test_zero_copy_read);
	RUN(test_copied_read);
	RUN(test_readdirplus_unsent_forgotten);
	stp_cache_free(fs.cache);
	stp_image_close(img);
	return tap_done();
}
