/* SPDX-License-Identifier: MIT */
/* stp_image_check_all on small images made here record by record, each damaged in one
 * way the library accepts at open: the check must name that damage, and only it. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <check.h> /* common's; "check.h" is the tests' harness beside this file */

#include "check.h"
#include "image.h"
#include "log.h"

#define MAXN 8

/* The tree: inodes, the entries of their directories, extents, and 8 data bytes. */
struct model {
	struct stp_inode in[MAXN];
	struct stp_dirent de[MAXN];
	const char *name[MAXN];
	struct stp_extent ex[MAXN];
	unsigned ni, nd, nx;
	int bad_block;
};

static const uint8_t data[8] = "stipple!";

/* Root (0) lists a (1, 8 bytes) and b (2, 4 bytes); each file has one extent. */
static void sound(struct model *m)
{
	memset(m, 0, sizeof(*m));
	m->in[0] = (struct stp_inode){ .mode = S_IFDIR | 0755, .nlink = 2, .size = 2, .count = 2 };
	m->in[1] = (struct stp_inode){ .mode = S_IFREG | 0644, .nlink = 1, .size = 8, .count = 1 };
	m->in[2] = (struct stp_inode){ .mode = S_IFREG | 0644, .nlink = 1, .size = 4, .data = 1,
				       .count = 1 };
	m->de[0] = (struct stp_dirent){ .ino = 1, .dtype = DT_REG };
	m->de[1] = (struct stp_dirent){ .ino = 2, .dtype = DT_REG };
	m->name[0] = "a";
	m->name[1] = "b";
	m->ex[0] = (struct stp_extent){ 0, 0, 8 };
	m->ex[1] = (struct stp_extent){ 0, 0, 4 };
	m->ni = 3;
	m->nd = 2;
	m->nx = 2;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* The image of M: superblock, the one raw data block at 256, raw metadata after it. */
static size_t encode(const struct model *m, uint8_t *img)
{
	struct stp_meta_header h = { .inode_count = m->ni, .dirent_count = m->nd,
				     .extent_count = m->nx, .block_count = 1 };
	uint8_t *meta = img + 256 + sizeof(data);
	struct stp_blockent be = { .offset = 256, .stored_size = sizeof(data) };
	struct stp_superblock sb = { .version = STP_FORMAT_VERSION, .block_log = 16,
				     .data_size = sizeof(data), .block_count = 1,
				     .inode_count = m->ni, .meta_offset = 256 + sizeof(data) };
	size_t off, str = 0;

	h.inode_off = STP_META_HDR_SIZE;
	h.dirent_off = align8(h.inode_off + m->ni * STP_INODE_SIZE);
	h.extent_off = align8(h.dirent_off + m->nd * STP_DIRENT_SIZE);
	h.xattr_off = h.block_off = align8(h.extent_off + m->nx * STP_EXTENT_SIZE);
	h.strings_off = h.block_off + STP_BLOCKENT_SIZE;
	for (unsigned i = 0; i < m->ni; i++)
		stp_inode_encode(&m->in[i], meta + h.inode_off + i * STP_INODE_SIZE);
	for (unsigned i = 0; i < m->nd; i++) {
		struct stp_dirent d = m->de[i];

		d.name_off = (uint32_t)str;
		d.name_len = (uint16_t)strlen(m->name[i]);
		memcpy(meta + h.strings_off + str, m->name[i], d.name_len);
		str += d.name_len;
		stp_dirent_encode(&d, meta + h.dirent_off + i * STP_DIRENT_SIZE);
	}
	for (unsigned i = 0; i < m->nx; i++)
		stp_extent_encode(&m->ex[i], meta + h.extent_off + i * STP_EXTENT_SIZE);
	memcpy(img + 256, data, sizeof(data));
	be.checksum = stp_checksum(data, sizeof(data));
	if (m->bad_block)
		img[256] ^= 1;
	stp_blockent_encode(&be, meta + h.block_off);
	h.strings_size = str;
	stp_meta_header_encode(&h, meta);
	off = h.strings_off + str;
	sb.meta_stored_size = sb.meta_size = off;
	sb.meta_checksum = stp_checksum(meta, off);
	sb.image_size = sb.meta_offset + off;
	stp_sb_encode(&sb, img);
	return sb.image_size;
}

static char said[4096];

static void collect(void *ctx, const char *path, const char *msg)
{
	size_t n = strlen(said);

	(void)ctx;
	snprintf(said + n, sizeof(said) - n, "%s: %s\n", path ? path : "-", msg);
}

/* Checks the image of M: the check's result; what it said is in `said`. */
static int check_model(const struct model *m, struct stp_check_counts *counts)
{
	static uint8_t img[8192];
	char path[] = "/tmp/test_check.XXXXXX";
	struct stp_image *im;
	size_t len = encode(m, img);
	int fd = mkstemp(path), rc;

	if (fd < 0 || write(fd, img, len) != (ssize_t)len) {
		perror("test_check: temporary image");
		exit(1);
	}
	close(fd);
	said[0] = 0;
	rc = stp_image_open(path, &im);
	unlink(path);
	if (rc) {
		fprintf(stderr, "test_check: the image does not open (%d)\n", rc);
		return rc;
	}
	rc = stp_image_check_all(im, collect, NULL, counts);
	stp_image_close(im);
	return rc;
}

/* M is checked to completion and gives one problem, whose words hold WANT. */
static void expect_one(const struct model *m, const char *want)
{
	struct stp_check_counts n;

	CHECK(check_model(m, &n) == 0);
	CHECK(strstr(said, want) != NULL);
	if (!strstr(said, want))
		fprintf(stderr, "wanted '%s', got:\n%s", want, said);
	CHECK(n.problems >= 1);
}

static void quiet(enum stp_log_level level, const char *msg) { (void)level; (void)msg; }

/* A sound image, then each fault of the names and inodes. */
static void test_check_names(void)
{
	struct stp_check_counts n;
	struct model m;

	sound(&m);
	CHECK(check_model(&m, &n) == 0);
	CHECK(n.problems == 0 && n.entries == 2 && said[0] == 0);

	sound(&m); /* names out of order */
	m.name[0] = "b";
	m.name[1] = "a";
	expect_one(&m, "/a: entry 1 is out of order or a duplicate");

	sound(&m);
	m.de[0].dtype = DT_LNK;
	expect_one(&m, "/a: the directory entry's type differs from the inode's");

	sound(&m);
	m.in[1].nlink = 2;
	expect_one(&m, "/a: link count 2, but 1 names");

	sound(&m); /* an inode no entry names */
	m.in[3] = (struct stp_inode){ .mode = S_IFREG | 0644, .nlink = 1 };
	m.ni = 4;
	expect_one(&m, "-: inode 3 is not reached from the root");
}

/* The extent records: their order between inodes and within one. */
static void test_check_extents(void)
{
	struct stp_check_counts n;
	struct model m;

	sound(&m); /* b's extent is a's record */
	m.in[2] = m.in[1];
	expect_one(&m, "-: inode 2: its extent records overlap or precede those of inode 1");

	sound(&m); /* apart, but not in inode order: b's record comes first */
	m.in[1].data = 1;
	m.in[2].data = 0;
	m.ex[0] = (struct stp_extent){ 0, 0, 4 };
	m.ex[1] = (struct stp_extent){ 0, 0, 8 };
	expect_one(&m, "-: inode 2: its extent records overlap or precede those of inode 1");

	sound(&m); /* a file with no extent may point anywhere: nothing is read */
	m.in[1].size = 0;
	m.in[1].count = 0;
	m.in[1].data = 2;
	m.ex[0] = (struct stp_extent){ 0, 0, 4 };
	m.in[2].data = 0;
	CHECK(check_model(&m, &n) == 0);
	CHECK(n.problems == 0, "%s", said);

	sound(&m); /* a: two extents, the second before the first */
	m.in[1].count = 2;
	m.in[2].data = 2;
	m.ex[0] = (struct stp_extent){ 4, 4, 4 };
	m.ex[1] = (struct stp_extent){ 0, 0, 4 };
	m.ex[2] = (struct stp_extent){ 0, 0, 4 };
	m.nx = 3;
	expect_one(&m, "/a: extent 1 overlaps or precedes extent 0");
}

/* A damaged block, named with every file in it; a directory cycle. */
static void test_check_damage(void)
{
	struct model m;

	sound(&m);
	m.bad_block = 1;
	expect_one(&m, "-: data block 0: damaged image");
	CHECK(strstr(said, "/a: its data lies in damaged block 0") != NULL);
	CHECK(strstr(said, "/b: its data lies in damaged block 0") != NULL);

	sound(&m); /* a directory listed under itself: a cycle */
	m.in[1] = (struct stp_inode){ .mode = S_IFDIR | 0755, .nlink = 2, .size = 1, .data = 2,
				      .count = 1, .parent = 0 };
	m.in[2] = (struct stp_inode){ .mode = S_IFREG | 0644, .nlink = 1 };
	m.de[0].dtype = DT_DIR;
	m.de[2] = (struct stp_dirent){ .ino = 1, .dtype = DT_DIR };
	m.name[2] = "again";
	m.nd = 3;
	m.nx = 0;
	expect_one(&m, "/a/again: directory inode 1 reached twice (a cycle)");
}

int main(void)
{
	stp_log_set_handler(quiet);
	RUN(test_check_names);
	RUN(test_check_extents);
	RUN(test_check_damage);
	return tap_done();
}
