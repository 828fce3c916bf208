/* SPDX-License-Identifier: MIT */
/*
 * The engine of `stipple bench` (bench_engine.h): the seeded random offsets, the file
 * table, the timed loop, the worker threads, and what their latencies sum up to.
 *
 * The timed loop allocates nothing and makes no system call of its own: the clock is the
 * vDSO's, the buffers and the latency arrays are allocated before the start.
 */
#include "bench_engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fileread.h"
#include "image.h"
#include "util.h"

/* --- random numbers: splitmix64 seeds xoshiro256** --- */

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rotl64(uint64_t x, int k) { return x << k | x >> (64 - k); }

static inline uint64_t xoshiro_next(uint64_t s[4])
{
	uint64_t r = rotl64(s[1] * 5, 7) * 9, t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return r;
}

/* Thread INDEX takes words 4 * INDEX to 4 * INDEX + 3 of the seed's splitmix64 stream:
 * the streams depend only on the seed and the index. */
static void rng_seed(uint64_t s[4], uint64_t seed, unsigned index)
{
	uint64_t sm = seed;

	for (unsigned i = 0; i < 4 * index; i++)
		splitmix64(&sm);
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&sm);
}

/* Uniform in [0, n): the high half of a 64x64 product (bias below 2^-64 * n). */
static inline uint64_t rng_below(uint64_t s[4], uint64_t n)
{
	return (uint64_t)(((unsigned __int128)xoshiro_next(s) * n) >> 64);
}

/* --- the files --- */

static int add_file(struct stp_walk *w, const struct stp_walk_entry *e)
{
	struct file_table *t = w->ctx;
	struct bench_file *f;
	struct stp_extent ext;

	if (!S_ISREG(e->inode.mode) || (t->seen[e->ino / 8] >> (e->ino % 8) & 1))
		return 0;
	t->seen[e->ino / 8] |= (uint8_t)(1u << (e->ino % 8));
	if (t->n == t->cap) {
		size_t cap;
		struct bench_file *v;

		if (__builtin_mul_overflow(t->cap ? t->cap : 128, 2, &cap))
			return -ENOMEM;
		v = reallocarray(t->v, cap, sizeof(*v));
		if (!v)
			return -ENOMEM;
		t->v = v;
		t->cap = cap;
	}
	f = &t->v[t->n];
	f->inode = e->inode;
	f->ino = e->ino;
	f->stream_off = UINT64_MAX;
	if (e->inode.count && !stp_image_extent(w->img, &e->inode, 0, &ext))
		f->stream_off = ext.stream_off;
	f->path = strdup(e->path);
	if (!f->path)
		return -ENOMEM;
	t->n++;
	return 0;
}

static int by_stream_order(const void *a, const void *b)
{
	const struct bench_file *x = a, *y = b;

	if (x->stream_off != y->stream_off)
		return x->stream_off < y->stream_off ? -1 : 1;
	return x->ino < y->ino ? -1 : x->ino > y->ino;
}

static void files_free(struct file_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].path);
	free(t->v);
	free(t->seen);
}

/* Lists the regular files in stream order with their cumulative starts; prints what
 * went wrong. A tree with problems is refused: its figures would mean little. */
static int files_collect(struct bench *b)
{
	struct file_table *t = &b->files;
	struct stp_walk walk = { .cli = b->cli, .img = b->img, .image = b->image,
				 .enter = add_file, .ctx = t };
	int err;

	t->seen = calloc(stp_image_sb(b->img)->inode_count / 8 + 1, 1);
	err = t->seen ? stp_walk_tree(&walk) : -ENOMEM;
	if (err) {
		stp_cli_problem(b->cli, b->image, NULL, "listing the files: %s",
				stp_strerror(err));
		return err;
	}
	if (walk.problems)
		return -EUCLEAN;
	qsort(t->v, t->n, sizeof(*t->v), by_stream_order);
	for (size_t i = 0; i < t->n; i++) {
		t->v[i].start = t->bytes;
		/* sizes are the image's word: a sum that wraps would misplace every read */
		if (__builtin_add_overflow(t->bytes, t->v[i].inode.size, &t->bytes)) {
			stp_cli_problem(b->cli, b->image, t->v[i].path,
					"file sizes add up to more than 2^64 bytes");
			return -EOVERFLOW;
		}
	}
	if (!t->bytes) {
		stp_cli_problem(b->cli, b->image, NULL, "no file bytes to read");
		return -ENODATA;
	}
	return 0;
}

/* The file holding byte POS of the concatenation of all files (POS < bytes). */
static size_t file_at(const struct file_table *t, uint64_t pos)
{
	size_t lo = 0, hi = t->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->v[mid].start <= pos)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* --- the timed loop --- */

static uint64_t cache_misses(struct stp_cache *cache)
{
	struct stp_cache_stats s;

	stp_cache_stats(cache, &s);
	return s.misses;
}

/* Reads LEN bytes at OFF of file FILE, timing the read alone. A read during which the
 * cache decoded a block counts as decoding time. */
static int timed_read(struct worker *w, size_t file, uint64_t off, uint64_t len)
{
	struct bench *b = w->b;
	const struct bench_file *f = &b->files.v[file];
	uint64_t misses = cache_misses(b->cache), t0 = stp_now_ns(), ns;
	ssize_t n = stp_file_read(b->img, b->cache, &f->inode, off, (size_t)len, w->buf);
	uint64_t sum;

	ns = stp_now_ns() - t0;
	if (n != (ssize_t)len) {
		w->err = n < 0 ? (int)n : -EIO;
		w->err_file = (uint32_t)file;
		w->err_off = off;
		w->err_len = len;
		atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
		return w->err;
	}
	if (cache_misses(b->cache) != misses)
		w->decode_ns += ns;
	sum = stp_checksum(w->buf, (size_t)len);
	if (w->done >= w->planned) { /* the plan was sized for every read: never past it */
		w->err = -EOVERFLOW;
		atomic_store_explicit(&b->stop, 1, memory_order_relaxed);
		return w->err;
	}
	if (w->records)
		w->records[w->done] = (struct read_record){ .off = off, .checksum = sum,
							    .file = (uint32_t)file, .len = (uint32_t)len };
	w->latency[w->done++] = ns;
	w->bytes += len;
	w->digest = rotl64(w->digest ^ sum, 23) * 0x9e3779b97f4a7c15ull;
	return 0;
}

static int stopped(const struct bench *b)
{
	return atomic_load_explicit(&b->stop, memory_order_relaxed);
}

static void run_random(struct worker *w)
{
	const struct file_table *t = &w->b->files;
	uint64_t len = w->b->o->read_size;

	for (uint64_t i = 0; i < w->planned && !stopped(w->b); i++) {
		uint64_t pos = rng_below(w->rng, t->bytes);
		size_t file = file_at(t, pos);
		uint64_t size = t->v[file].inode.size, off = pos - t->v[file].start;

		/* keep the read inside the file; a file shorter than a read is read whole */
		if (off + len > size)
			off = size > len ? size - len : 0;
		if (timed_read(w, file, off, size < len ? size : len))
			return;
	}
}

static void run_sequential(struct worker *w)
{
	const struct file_table *t = &w->b->files;
	uint64_t chunk = w->b->o->read_size;

	for (size_t i = w->file_first; i < w->file_end; i++) {
		uint64_t size = t->v[i].inode.size;

		for (uint64_t off = 0; off < size; off += chunk) {
			if (stopped(w->b) ||
			    timed_read(w, i, off, size - off < chunk ? size - off : chunk))
				return;
		}
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench *b = w->b;

	pthread_mutex_lock(&b->go_lock);
	while (!b->go)
		pthread_cond_wait(&b->go_cond, &b->go_lock);
	pthread_mutex_unlock(&b->go_lock);
	if (!stopped(b)) {
		if (b->o->sequential)
			run_sequential(w);
		else
			run_random(w);
	}
	return NULL;
}

/* --- setting up and running the workers --- */

static uint64_t chunks_of(uint64_t size, uint64_t chunk)
{
	return size / chunk + (size % chunk != 0);
}

/* Sequential: thread I reads the files whose start lies in the I-th equal share of the
 * bytes, so each thread reads its own stretch of the stream. Every read is recorded,
 * so the reads of all threads together are bounded as --reads is: -E2BIG beyond. */
static int plan_sequential(struct bench *b)
{
	const struct file_table *t = &b->files;
	uint32_t threads = b->o->threads;
	uint64_t total = 0;
	size_t f = 0;

	for (uint32_t i = 0; i < threads; i++) {
		struct worker *w = &b->workers[i];
		uint64_t end = (uint64_t)((unsigned __int128)t->bytes * (i + 1) / threads);

		w->file_first = f;
		while (f < t->n && (i + 1 == threads || t->v[f].start < end)) {
			uint64_t n = chunks_of(t->v[f++].inode.size, b->o->read_size);

			if (__builtin_add_overflow(w->planned, n, &w->planned) ||
			    __builtin_add_overflow(total, n, &total) || total > BENCH_READS_MAX) {
				stp_cli_problem(b->cli, b->image, NULL, "reading every file in "
						"%" PRIu64 "-byte reads takes more than %llu reads; "
						"use a larger --read-size", b->o->read_size,
						BENCH_READS_MAX);
				return -E2BIG;
			}
		}
		w->file_end = f;
	}
	return 0;
}

static void plan_random(struct bench *b)
{
	uint32_t threads = b->o->threads;

	for (uint32_t i = 0; i < threads; i++) {
		struct worker *w = &b->workers[i];

		w->planned = b->o->reads / threads + (i < b->o->reads % threads);
		rng_seed(w->rng, b->o->seed, i);
	}
}

/* An array of N elements of SIZE bytes (at least one), or NULL when it cannot be had. */
void *bench_alloc_array(uint64_t n, size_t size)
{
	return n > SIZE_MAX ? NULL : reallocarray(NULL, n ? (size_t)n : 1, size);
}

static int workers_alloc(struct bench *b)
{
	uint32_t threads = b->o->threads;
	int err;

	b->workers = calloc(threads, sizeof(*b->workers));
	if (!b->workers)
		return -ENOMEM;
	if (b->o->sequential) {
		if ((err = plan_sequential(b)))
			return err;
	} else {
		plan_random(b);
	}
	for (uint32_t i = 0; i < threads; i++) {
		struct worker *w = &b->workers[i];

		w->b = b;
		w->buf = malloc(b->o->read_size);
		w->latency = bench_alloc_array(w->planned, sizeof(*w->latency));
		if (b->o->print_reads)
			w->records = bench_alloc_array(w->planned, sizeof(*w->records));
		if (!w->buf || !w->latency || (b->o->print_reads && !w->records))
			return -ENOMEM;
	}
	return 0;
}

static void workers_free(struct bench *b)
{
	if (!b->workers)
		return;
	for (uint32_t i = 0; i < b->o->threads; i++) {
		free(b->workers[i].buf);
		free(b->workers[i].latency);
		free(b->workers[i].records);
	}
	free(b->workers);
}

static void stats_minus(struct stp_cache_stats *a, const struct stp_cache_stats *before)
{
	a->hits -= before->hits;
	a->misses -= before->misses;
	a->decoded -= before->decoded;
	a->decoded_bytes -= before->decoded_bytes;
	a->failures -= before->failures;
}

/* Starts the workers together and times them from the start to the last one's end. */
int bench_workers_run(struct bench *b)
{
	struct stp_cache_stats before;
	uint32_t started = 0;
	uint64_t t0;
	int err = 0;

	for (; started < b->o->threads; started++) {
		err = -pthread_create(&b->workers[started].thread, NULL, worker_main,
				      &b->workers[started]);
		if (err) {
			stp_cli_error(b->cli, "cannot start a thread: %s", stp_strerror(err));
			atomic_store(&b->stop, 1);
			break;
		}
	}
	stp_cache_stats(b->cache, &before);
	pthread_mutex_lock(&b->go_lock);
	b->go = 1;
	t0 = stp_now_ns();
	pthread_cond_broadcast(&b->go_cond);
	pthread_mutex_unlock(&b->go_lock);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(b->workers[i].thread, NULL);
	b->wall_ns = stp_now_ns() - t0;
	stp_cache_stats(b->cache, &b->stats);
	stats_minus(&b->stats, &before);
	return err;
}

/* Decodes the first blocks of the stream into the cache, as many as the budget holds. */
static int cache_warm(struct bench *b)
{
	uint64_t n = stp_image_sb(b->img)->block_count;

	if (n > b->budget)
		n = b->budget;
	for (uint64_t i = 0; i < n; i++) {
		struct stp_block_ref ref;
		int err = stp_cache_get(b->cache, i, &ref);

		if (err) {
			stp_cli_problem(b->cli, b->image, NULL, "warming block %" PRIu64 ": %s",
					i, stp_strerror(err));
			return err;
		}
		stp_cache_release(b->cache, &ref);
	}
	return 0;
}

/* The data blocks that bytes [OFF, OFF + LEN) of file F lie in; 0 when none (a hole). */
static int read_blocks(const struct bench *b, const struct bench_file *f, uint64_t off,
		       uint64_t len, uint64_t *first, uint64_t *last)
{
	const struct stp_superblock *sb = stp_image_sb(b->img);
	int found = 0;

	for (uint32_t i = 0; i < f->inode.count; i++) {
		struct stp_extent e;
		uint64_t from, to;

		if (stp_image_extent(b->img, &f->inode, i, &e))
			break;
		from = e.file_off > off ? e.file_off : off;
		to = e.file_off + e.length < off + len ? e.file_off + e.length : off + len;
		if (from >= to)
			continue;
		from = stp_sb_block_of(sb, e.stream_off + (from - e.file_off));
		to = stp_sb_block_of(sb, e.stream_off + (to - e.file_off) - 1);
		if (!found || from < *first)
			*first = from;
		if (!found || to > *last)
			*last = to;
		found = 1;
	}
	return found;
}

/* Prints the first failed read, naming the file and the blocks it touches. */
int bench_report_failure(const struct bench *b)
{
	for (uint32_t i = 0; i < b->o->threads; i++) {
		const struct worker *w = &b->workers[i];
		const struct bench_file *f = &b->files.v[w->err_file];
		uint64_t first = 0, last = 0;
		char where[64] = "";

		if (!w->err)
			continue;
		if (read_blocks(b, f, w->err_off, w->err_len, &first, &last))
			snprintf(where, sizeof(where), first == last ? " (data block %" PRIu64 ")"
				 : " (data blocks %" PRIu64 " to %" PRIu64 ")", first, last);
		stp_cli_problem(b->cli, b->image, f->path,
				"cannot read %" PRIu64 " bytes at offset %" PRIu64 "%s: %s", w->err_len,
				w->err_off, where, stp_strerror(w->err));
		return w->err;
	}
	return 0;
}


static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest latency that PER_10000 / 10000 of the reads do not exceed. */
static uint64_t percentile(const uint64_t *sorted, uint64_t n, unsigned per_10000)
{
	uint64_t rank = (n * per_10000 + 9999) / 10000;

	return n ? sorted[rank ? rank - 1 : 0] : 0;
}

int bench_summarize(const struct bench *b, struct bench_summary *s)
{
	uint64_t *all, total = 0, k = 0, sum = 0;

	for (uint32_t i = 0; i < b->o->threads; i++)
		total += b->workers[i].done; /* each at most its planned reads: no overflow */
	all = bench_alloc_array(total, sizeof(*all));
	if (!all)
		return -ENOMEM;
	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i < b->o->threads; i++) {
		const struct worker *w = &b->workers[i];

		memcpy(all + k, w->latency, w->done * sizeof(*all));
		k += w->done;
		s->bytes += w->bytes;
		s->decode_ns += w->decode_ns;
		s->digest = rotl64(s->digest ^ w->digest, 23) * 0x9e3779b97f4a7c15ull;
	}
	qsort(all, total, sizeof(*all), cmp_u64);
	for (uint64_t i = 0; i < total; i++)
		sum += all[i];
	s->reads = total;
	s->p50 = percentile(all, total, 5000);
	s->p90 = percentile(all, total, 9000);
	s->p99 = percentile(all, total, 9900);
	s->p999 = percentile(all, total, 9990);
	s->max = total ? all[total - 1] : 0;
	s->mean = total ? sum / total : 0;
	free(all);
	return 0;
}

int bench_prepare(struct bench *b)
{
	int err;

	if (b->o->key ? stp_cli_open_verified(b->cli, b->image, b->o->key, &b->img)
		      : stp_cli_open(b->cli, b->image, &b->img))
		return -EIO;
	err = files_collect(b);
	if (err)
		return err;
	/* 0: the image's default, as a mount's */
	b->budget = b->o->budget ? b->o->budget : stp_cache_default_budget(stp_image_sb(b->img),
									      stp_cache_machine_memory());
	err = stp_cache_new(b->img, b->budget, b->o->threads, &b->cache);
	if (!err)
		err = workers_alloc(b);
	if (err && err != -E2BIG) /* a plan too large said so itself */
		stp_cli_error(b->cli, "%s", stp_strerror(err));
	if (err)
		return err;
	return b->o->warm ? cache_warm(b) : 0;
}

void bench_free(struct bench *b)
{
	workers_free(b);
	stp_cache_free(b->cache);
	files_free(&b->files);
	if (b->img)
		stp_image_close(b->img);
}
