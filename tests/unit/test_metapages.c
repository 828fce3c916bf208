/* SPDX-License-Identifier: MIT */
/* The metadata page cache: what it copies, what it keeps, what it does with errors. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "format.h"
#include "metapages.h"

#define PAGE STP_META_PAGE_SIZE
#define SIZE (10 * (uint64_t)PAGE + 1234) /* ten full pages and a short last one */

static atomic_uint loads;
static uint64_t bad_page = UINT64_MAX;

static uint8_t byte_at(uint64_t off) { return (uint8_t)(off * 2654435761u >> 13); }

/* A load that makes byte i of the metadata byte_at(i), or fails for BAD_PAGE. */
static int load(void *ctx, uint64_t page, uint8_t *out, size_t len)
{
	(void)ctx;
	atomic_fetch_add(&loads, 1);
	if (page == bad_page)
		return -EUCLEAN;
	if (len != (page == SIZE / PAGE ? SIZE % PAGE : PAGE))
		return -EINVAL; /* the cache asked for the wrong length */
	for (size_t i = 0; i < len; i++)
		out[i] = byte_at(page * PAGE + i);
	return 0;
}

static int range_is(struct stp_metapages *mp, uint64_t off, size_t len)
{
	uint8_t *buf = malloc(len ? len : 1);
	int ok = buf && stp_metapages_read(mp, off, len, buf) == 0;

	for (size_t i = 0; ok && i < len; i++)
		ok = buf[i] == byte_at(off + i);
	free(buf);
	return ok;
}

static void test_reads_across_pages(void)
{
	struct stp_metapages *mp;

	CHECK(stp_metapages_create(SIZE, 3 * PAGE, load, NULL, &mp) == 0);
	CHECK(range_is(mp, 0, 96));
	CHECK(range_is(mp, PAGE - 5, 12));          /* a record straddling two pages */
	CHECK(range_is(mp, 2 * PAGE - 1, 2 * PAGE + 2)); /* three pages at once */
	CHECK(range_is(mp, SIZE - 1234, 1234));     /* the short last page */
	CHECK(range_is(mp, SIZE, 0));
	CHECK(stp_metapages_read(mp, SIZE - 1, 2, (uint8_t[2]){ 0 }) == -EINVAL);
	CHECK(stp_metapages_read(mp, UINT64_MAX, 1, (uint8_t[1]){ 0 }) == -EINVAL);
	stp_metapages_destroy(mp);
}

static void test_budget_bounds_what_is_kept(void)
{
	struct stp_metapages *mp;
	struct stp_metapages_stats st;

	atomic_store(&loads, 0);
	CHECK(stp_metapages_create(SIZE, 3 * PAGE, load, NULL, &mp) == 0);
	for (int round = 0; round < 3; round++)
		for (uint64_t p = 0; p <= SIZE / PAGE; p++)
			CHECK(range_is(mp, p * PAGE, 16));
	stp_metapages_stats(mp, &st);
	CHECK(st.resident <= 3 * PAGE && st.peak <= 3 * PAGE, "resident %zu peak %zu",
	      st.resident, st.peak);
	/* A cyclic walk over 11 pages through 3 slots: least recently used would load all 33,
	 * a random victim keeps some of the pages the next round comes back to. */
	CHECK(atomic_load(&loads) < 33 && atomic_load(&loads) >= 11 + 2 * 8,
	      "a cyclic walk over 11 pages in 3 slots: %u loads", atomic_load(&loads));
	/* the page just read stays: reading it again loads nothing */
	atomic_store(&loads, 0);
	CHECK(range_is(mp, 10 * PAGE, 8) && range_is(mp, 10 * PAGE + 100, 8));
	CHECK(atomic_load(&loads) == 0);
	/* a budget below one page still serves, one page at a time */
	stp_metapages_set_budget(mp, 1);
	CHECK(range_is(mp, 0, 3 * PAGE));
	stp_metapages_stats(mp, &st);
	CHECK(st.resident <= PAGE, "resident %zu", st.resident);
	stp_metapages_destroy(mp);
}

static void test_errors_are_not_kept(void)
{
	struct stp_metapages *mp;
	uint8_t b[4];

	CHECK(stp_metapages_create(SIZE, 4 * PAGE, load, NULL, &mp) == 0);
	bad_page = 5;
	CHECK(stp_metapages_read(mp, 5 * PAGE + 10, 4, b) == -EUCLEAN);
	CHECK(stp_metapages_read(mp, 5 * PAGE - 2, 4, b) == -EUCLEAN); /* straddling into it */
	CHECK(range_is(mp, 4 * PAGE, 100));
	bad_page = UINT64_MAX;                      /* a page that failed is read again */
	CHECK(range_is(mp, 5 * PAGE + 10, 4));
	stp_metapages_destroy(mp);
}

/* A bound on loads: a walk cycling through more pages than the budget stops at it with
 * -ENOBUFS (counted), resident pages are still read, and lifting it lets loads go on. */
static void test_load_bound(void)
{
	struct stp_metapages *mp;
	struct stp_metapages_stats st;
	uint8_t b[4];
	int rc = 0;

	CHECK(stp_metapages_create(SIZE, 2 * PAGE, load, NULL, &mp) == 0);
	CHECK(range_is(mp, 0, 8));
	stp_metapages_limit_loads(mp, 6);
	for (unsigned i = 1; i < 100 && !rc; i++)
		rc = stp_metapages_read(mp, (uint64_t)(i % 4) * PAGE, 4, b);
	CHECK(rc == -ENOBUFS, "rc %d", rc);
	stp_metapages_stats(mp, &st);
	CHECK(st.loads == 6 && st.refused == 1, "loads %llu refused %llu",
	      (unsigned long long)st.loads, (unsigned long long)st.refused);
	for (uint64_t p = 0; p < 4; p++) /* what is resident still reads */
		if (stp_metapages_read(mp, p * PAGE, 4, b) == 0)
			CHECK(range_is(mp, p * PAGE, 4));
	stp_metapages_limit_loads(mp, 0);
	CHECK(range_is(mp, 9 * PAGE, 8) && range_is(mp, 0, 8) && range_is(mp, 3 * PAGE, 8));
	stp_metapages_destroy(mp);
}

static struct stp_metapages *shared;
static atomic_int thread_bad;

static void *reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	for (int i = 0; i < 3000; i++) {
		uint64_t off = (uint64_t)rand_r(&seed) % SIZE;
		size_t len = (size_t)rand_r(&seed) % 300;

		if (len > SIZE - off)
			len = (size_t)(SIZE - off);
		if (!range_is(shared, off, len))
			atomic_fetch_add(&thread_bad, 1);
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t t[4];
	struct stp_metapages_stats st;

	CHECK(stp_metapages_create(SIZE, 2 * PAGE, load, NULL, &shared) == 0);
	for (uintptr_t i = 0; i < 4; i++)
		CHECK(pthread_create(&t[i], NULL, reader, (void *)(i + 1)) == 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK(atomic_load(&thread_bad) == 0, "%d reads returned wrong bytes",
	      atomic_load(&thread_bad));
	stp_metapages_stats(shared, &st);
	CHECK(st.resident <= 2 * PAGE, "resident %zu", st.resident);
	CHECK(st.hits > 0 && st.loads > 0);
	stp_metapages_destroy(shared);
}

int main(void)
{
	RUN(test_reads_across_pages);
	RUN(test_load_bound);
	RUN(test_budget_bounds_what_is_kept);
	RUN(test_errors_are_not_kept);
	RUN(test_threads);
	return tap_done();
}
