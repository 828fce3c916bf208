/* SPDX-License-Identifier: MIT */
/*
 * Warming tries a store again when the kernel had not yet taken the lookup reply of a
 * file the inode table already counts (its requester had not run again, as on a busy
 * machine). Before, a worker's store was tried 5 times 2 ms apart and then given up for
 * good: warming said done and those hot pages were read through FUSE on every launch.
 *
 * warm.c runs on the libfuse stand-in of tests/fuzz/fuse_shim.c, with
 * fuse_lowlevel_notify_store wrapped at link time (-Wl,--wrap) to refuse the first
 * REFUSALS stores with ENOENT, as the kernel does for an inode it does not hold. The image
 * is built by mkstipple (argv[1]) from one file listed hot.
 */
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "check.h"
#include "fuseapi.h"
#include "image.h"
#include "inodes.h"
#include "warm.h"

#define FILE_BYTES (256u << 10)
#define REFUSALS 7u /* more than a store's own tries (STP_PAGESTORE_TRIES) */

int __real_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags);
int __wrap_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags);

static unsigned stores;

int __wrap_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags)
{
	if (__atomic_fetch_add(&stores, 1, __ATOMIC_RELAXED) < REFUSALS)
		return -ENOENT;
	return __real_fuse_lowlevel_notify_store(se, ino, offset, bufv, flags);
}

static int run(char *const argv[])
{
	pid_t pid;
	int status;

	if (posix_spawn(&pid, argv[0], NULL, NULL, argv, NULL) ||
	    waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int write_file(const char *path, const char *text, size_t len)
{
	FILE *f = fopen(path, "w");
	int bad = !f || fwrite(text, 1, len, f) != len;

	return (f && fclose(f)) || bad ? -1 : 0;
}

/* Builds DIR/image.stp from DIR/tree/f (FILE_BYTES of varied bytes), listed hot. */
static int build(const char *mkstipple, const char *dir, char *image, size_t size)
{
	char tree[256], file[300], list[300];
	char *data = malloc(FILE_BYTES);
	int rc;

	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(file, sizeof(file), "%s/f", tree);
	snprintf(list, sizeof(list), "%s/hot.list", dir);
	snprintf(image, size, "%s/image.stp", dir);
	if (!data || mkdir(tree, 0755))
		return -1;
	for (size_t i = 0; i < FILE_BYTES; i++)
		data[i] = (char)(i * 2654435761u >> 13);
	rc = write_file(file, data, FILE_BYTES) || write_file(list, "f\n", 2);
	free(data);
	if (rc)
		return -1;
	return run((char *const[]){ (char *)mkstipple, "-q", "--hot-list", list, tree, image,
				    NULL });
}

static const char *mkstipple;

static void test_refused_stores_are_retried(void)
{
	char dir[] = "/tmp/stp-warmretry-XXXXXX", image[300];
	struct stp_image *img = NULL;
	struct stp_cache *cache = NULL;
	struct stp_inodes *inodes = NULL;
	struct stp_warmer *w = NULL;
	struct stp_warm_status st = { 0 };
	struct stp_inode inode;
	uint32_t ino = 0;
	int dummy_session;

	CHECK(mkdtemp(dir) != NULL);
	CHECK(build(mkstipple, dir, image, sizeof(image)) == 0, "mkstipple %s", mkstipple);
	if (stp_image_open(image, &img) || stp_image_lookup(img, STP_ROOT_INO, "f", 1, &ino) ||
	    stp_image_inode(img, ino, &inode) || stp_cache_new(img, 8, 4, &cache) ||
	    stp_inodes_new(stp_image_sb(img)->inode_count, &inodes)) {
		CHECK(0, "cannot open %s", image);
		goto out;
	}
	CHECK(stp_image_sb(img)->hot_size >= FILE_BYTES, "the file is in the hot region");
	/* the kernel "knows" the file before warming starts: no lookup comes later to
	 * start a store, only the worker's own store and what it hands on */
	stp_inodes_lookup(inodes, ino, &inode);
	CHECK(!stp_warm_start(img, cache, (struct fuse_session *)&dummy_session, inodes, 1, &w));
	for (int i = 0; w && i < 2000 && !st.done; i++) { /* a hang guard, not a timing */
		struct timespec nap = { 0, 5000000 };

		nanosleep(&nap, NULL);
		stp_warm_status(w, &st);
	}
	CHECK(st.done, "warming never said done");
	CHECK(st.store.stored_bytes == FILE_BYTES,
	      "%llu of %u bytes stored (%u stores asked, the first %u refused)",
	      (unsigned long long)st.store.stored_bytes, FILE_BYTES, stores, REFUSALS);
out:
	stp_warm_stop(w);
	stp_inodes_free(inodes);
	stp_cache_free(cache);
	stp_image_close(img);
	run((char *const[]){ "/bin/rm", "-rf", dir, NULL });
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return tap_skip_all("no mkstipple given");
	mkstipple = argv[1];
	RUN(test_refused_stores_are_retried);
	return tap_done();
}
