/* SPDX-License-Identifier: MIT */
/*
 * Warming tries a store again when the kernel had not yet taken the lookup reply of a
 * file the inode table already counts (its requester had not run again, as on a busy
 * machine). Before, a worker's store was tried 5 times 2 ms apart and then given up for
 * good: warming said done and those hot pages were read through FUSE on every launch.
 *
 * And a push that waits for a read never holds a buffer that the read waits for (warm.h,
 * fill.h): pushes are stalled as a page lock held by a read in flight would stall them,
 * and the blocks warming pins must stay within its share of the budget, so that the read
 * still gets its block.
 *
 * warm.c and fill.c run on the libfuse stand-in of tests/fuzz/fuse_shim.c, with
 * fuse_lowlevel_notify_store wrapped at link time (-Wl,--wrap) to refuse the first
 * `refusals` stores with ENOENT, as the kernel does for an inode it does not hold, or to
 * wait while `stalled` is set. The images are built by mkstipple (argv[1]).
 */
#include <errno.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "cache.h"
#include "check.h"
#include "fill.h"
#include "fuseapi.h"
#include "image.h"
#include "inodes.h"
#include "mountopts.h"
#include "pagestore.h"
#include "warm.h"

#define FILE_BYTES (256u << 10)
#define REFUSALS 7u /* more than a store's own tries (STP_PAGESTORE_TRIES) */

int __real_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags);
int __wrap_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags);

static unsigned stores, refusals;
/* While set, a store waits (a read in flight holds its page locked); WAITING counts them. */
static pthread_mutex_t stall_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stall_cond = PTHREAD_COND_INITIALIZER;
static int stalled;
static unsigned waiting;

int __wrap_fuse_lowlevel_notify_store(struct fuse_session *se, fuse_ino_t ino, off_t offset,
				      struct fuse_bufvec *bufv, enum fuse_buf_copy_flags flags)
{
	if (__atomic_fetch_add(&stores, 1, __ATOMIC_RELAXED) < refusals)
		return -ENOENT;
	pthread_mutex_lock(&stall_lock);
	waiting++;
	pthread_cond_broadcast(&stall_cond);
	while (stalled)
		pthread_cond_wait(&stall_cond, &stall_lock);
	waiting--;
	pthread_mutex_unlock(&stall_lock);
	return __real_fuse_lowlevel_notify_store(se, ino, offset, bufv, flags);
}

static void stall(int on)
{
	pthread_mutex_lock(&stall_lock);
	stalled = on;
	pthread_cond_broadcast(&stall_cond);
	pthread_mutex_unlock(&stall_lock);
}

/* Waits until N stores wait (a hang guard of 10 s, not a timing); 1 when they do. */
static int wait_stores(unsigned n)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&stall_lock);
	while (waiting < n && rc == 0)
		rc = pthread_cond_timedwait(&stall_cond, &stall_lock, &ts);
	rc = waiting >= n;
	pthread_mutex_unlock(&stall_lock);
	return rc;
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

/* Builds DIR/image.stp from DIR/tree/f (FILE_BYTES of varied bytes), listed hot, and,
 * with COLD, DIR/tree/g (COLD bytes), not listed; BLOCK: mkstipple's --block-size and
 * --hot-block-size (NULL: the defaults). */
static int build(const char *mkstipple, const char *dir, char *image, size_t size,
		 size_t cold, const char *block)
{
	char tree[256], file[300], list[300];
	char *data = malloc(FILE_BYTES > cold ? FILE_BYTES : cold);
	int rc;

	snprintf(tree, sizeof(tree), "%s/tree", dir);
	snprintf(file, sizeof(file), "%s/f", tree);
	snprintf(list, sizeof(list), "%s/hot.list", dir);
	snprintf(image, size, "%s/image.stp", dir);
	if (!data || mkdir(tree, 0755))
		return -1;
	for (size_t i = 0; i < FILE_BYTES || i < cold; i++)
		data[i] = (char)(i * 2654435761u >> 13);
	rc = write_file(file, data, FILE_BYTES) || write_file(list, "f\n", 2);
	snprintf(file, sizeof(file), "%s/g", tree);
	for (size_t i = 0; i < cold; i++) /* other bytes: no extent of g is f's */
		data[i] = (char)(i * 2246822519u >> 11);
	rc = rc || (cold && write_file(file, data, cold));
	free(data);
	if (rc)
		return -1;
	if (block)
		return run((char *const[]){ (char *)mkstipple, "-q", "--block-size", (char *)block,
					    "--hot-block-size", (char *)block, "--hot-list", list,
					    tree, image, NULL });
	return run((char *const[]){ (char *)mkstipple, "-q", "--hot-list", list, tree, image,
				    NULL });
}

static const char *mkstipple;

/* Warms an image of one hot file whose first NREFUSALS stores the kernel refuses, until
 * warming says done: *ST its status. */
static void warm_refused(unsigned nrefusals, struct stp_warm_status *st)
{
	char dir[] = "/tmp/stp-warmretry-XXXXXX", image[300];
	struct stp_image *img = NULL;
	struct stp_cache *cache = NULL;
	struct stp_inodes *inodes = NULL;
	struct stp_warmer *w = NULL;
	struct stp_inode inode;
	uint32_t ino = 0;
	int dummy_session;

	CHECK(mkdtemp(dir) != NULL);
	stores = 0;
	refusals = nrefusals;
	CHECK(build(mkstipple, dir, image, sizeof(image), 0, NULL) == 0, "mkstipple %s", mkstipple);
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
	for (int i = 0; w && i < 2000 && !st->done; i++) { /* a hang guard, not a timing */
		struct timespec nap = { 0, 5000000 };

		nanosleep(&nap, NULL);
		stp_warm_status(w, st);
	}
	CHECK(st->done, "warming never said done");
out:
	stp_warm_stop(w);
	stp_inodes_free(inodes);
	stp_cache_free(cache);
	stp_image_close(img);
	run((char *const[]){ "/bin/rm", "-rf", dir, NULL });
}

static void test_refused_stores_are_retried(void)
{
	struct stp_warm_status st = { 0 };

	warm_refused(REFUSALS, &st);
	CHECK(st.store.stored_bytes == FILE_BYTES,
	      "%llu of %u bytes stored (%u stores asked, the first %u refused)",
	      (unsigned long long)st.store.stored_bytes, FILE_BYTES, stores, REFUSALS);
}

/* One retry rule (pagestore.h): a file still refused is stored again a bounded number
 * of times (it was, up to 1,024 times a mount), and warming then says done. */
static void test_a_refused_file_is_retried_a_bounded_number_of_times(void)
{
	struct stp_warm_status st = { 0 };
	const unsigned want = (1 + STP_PAGESTORE_ROUNDS) * STP_PAGESTORE_TRIES;

	warm_refused(UINT32_MAX, &st);
	CHECK(st.store.stored_bytes == 0 && stores == want,
	      "%u stores asked for a file always refused (%u expected)", stores, want);
}

/* A requester slow to run (a busy machine): the kernel refuses the stores of the first
 * half-second, more than the two first tries' naps; a later retry stores the file. */
static void test_a_file_refused_for_a_while_is_stored(void)
{
	struct stp_warm_status st = { 0 };

	warm_refused(4 * STP_PAGESTORE_TRIES, &st);
	CHECK(st.store.stored_bytes == FILE_BYTES,
	      "%llu of %u bytes stored (%u stores asked, the first %u refused)",
	      (unsigned long long)st.store.stored_bytes, FILE_BYTES, stores,
	      4 * STP_PAGESTORE_TRIES);
}

/* Budget 3 (warming's share 2) and three workers: two take blocks 0 and 1, the third
 * waits for room. Their stores stall, and so does the filler's, of a cold block; then
 * reads take every hot page. The stalled pushes keep their blocks pinned: warming must
 * keep counting them as held, or its third worker takes a third block, and each further
 * stalled push pins a buffer the budget does not count, until a read finds none. */
static void test_a_stalled_push_counts_against_warming(void)
{
	char dir[] = "/tmp/stp-pushwait-XXXXXX", image[300];
	struct stp_mount_opts o = { .cache_budget = 3, .warm_workers = 3 };
	struct stp_image *img = NULL;
	struct stp_cache *cache = NULL;
	struct stp_inodes *inodes = NULL;
	struct stp_warmer *w = NULL;
	struct stp_filler *f = NULL;
	struct stp_warm_status ws;
	struct stp_cache_stats cs;
	struct stp_block_ref ref = { 0 };
	struct stp_inode hot, cold;
	uint32_t hino = 0, cino = 0;
	uint64_t last;
	int dummy_session;

	CHECK(mkdtemp(dir) != NULL);
	refusals = 0;
	stall(1);
	CHECK(build(mkstipple, dir, image, sizeof(image), FILE_BYTES, "64K") == 0, "mkstipple");
	if (stp_image_open(image, &img) || stp_image_lookup(img, STP_ROOT_INO, "f", 1, &hino) ||
	    stp_image_inode(img, hino, &hot) || stp_image_lookup(img, STP_ROOT_INO, "g", 1, &cino) ||
	    stp_image_inode(img, cino, &cold) ||
	    stp_cache_new(img, o.cache_budget, stp_mountopts_cache_extra(&o), &cache) ||
	    stp_inodes_new(stp_image_sb(img)->inode_count, &inodes)) {
		CHECK(0, "cannot open %s", image);
		goto out;
	}
	last = stp_image_sb(img)->block_count - 1; /* g's last bytes: a cold block */
	CHECK(stp_image_sb(img)->hot_size >= FILE_BYTES && last >= 6, "4 hot blocks, then g's");
	/* a read decoded it: the filler pushes g's pages from it once the kernel knows g */
	CHECK(!stp_cache_get(cache, last, &ref));
	stp_cache_release(cache, &ref);
	/* f known before warming starts: its workers push, its store thread does not */
	stp_inodes_lookup(inodes, hino, &hot);
	CHECK(!stp_warm_start(img, cache, (struct fuse_session *)&dummy_session, inodes, 3, &w));
	CHECK(!stp_fill_new(img, cache, (struct fuse_session *)&dummy_session, inodes,
			    stp_image_sb(img)->hot_size, &f));
	CHECK(!stp_fill_run(f));
	stp_inodes_lookup(inodes, cino, &cold);
	CHECK(wait_stores(3), "%u stores wait, not the two workers' and the filler's", waiting);
	stp_warm_note_read(w, 0, FILE_BYTES);
	stp_warm_status(w, &ws);
	stp_cache_stats(cache, &cs);
	/* the filler's block, and the blocks whose pushes stall: held */
	CHECK(cs.pinned <= ws.held + 1, "%u blocks pinned, %llu held by warming", cs.pinned,
	      (unsigned long long)ws.held);
	CHECK(ws.held + 1 < o.cache_budget + stp_mountopts_cache_extra(&o));
	/* a read in flight (one whose page a push waits for) still gets its block */
	CHECK(!stp_cache_get_range(cache, last - 1, 1, &ref));
	stp_cache_release(cache, &ref);
out:
	stall(0);
	stp_warm_stop(w);
	stp_fill_stop(f);
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
	RUN(test_a_refused_file_is_retried_a_bounded_number_of_times);
	RUN(test_a_file_refused_for_a_while_is_stored);
	RUN(test_a_stalled_push_counts_against_warming);
	return tap_done();
}
