/* SPDX-License-Identifier: MIT */
/*
 * `stipple bench`: timed reads of an image's files through the library and the block
 * cache the mount uses, without FUSE. Random reads pick a byte uniformly over all file
 * bytes (so a file is hit in proportion to its size) from a seeded generator; sequential
 * reads go through every file once in stream order. Every read is timed on its own and
 * every latency kept, so the percentiles are exact.
 *
 * The timed loop allocates nothing and makes no system call of its own: the clock is the
 * vDSO's, the buffers and the latency arrays are allocated before the start.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cache.h"
#include "cli.h"
#include "commands.h"
#include "fileread.h"
#include "image.h"
#include "util.h"

static const struct stp_cli bench_cli = {
	.name = "bench",
	.synopsis = "[OPTIONS] IMAGE",
	.summary = "Time reads of the files of IMAGE through the library and its block cache,\n"
		   "without FUSE, and report throughput, latency percentiles and cache figures.",
	.options =
		"  -n, --reads N          random reads to make (default 10000)\n"
		"  -s, --read-size BYTES  bytes per read, suffixes K, M (default 4K)\n"
		"  -t, --threads T        reading threads sharing one cache (default 1)\n"
		"      --seed S           seed of the random offsets (default 1)\n"
		"  -c, --cache-budget N   decoded blocks the cache keeps (default 8)\n"
		"      --warm             decode blocks into the cache before timing\n"
		"      --sequential       read every file once, in image order, instead\n"
		"  -j, --json             print the report as one JSON object\n"
		"      --print-reads      list every read after the run (a debugging aid)\n",
};

#define BENCH_READS_MAX 1000000000ull
#define BENCH_READ_SIZE_MAX (1ull << 30)
#define BENCH_THREADS_MAX 256u

struct bench_opts {
	uint64_t reads, read_size, seed;
	uint32_t threads, budget;
	int json, sequential, warm, print_reads;
};

/* A regular file of the image, each inode once. */
struct bench_file {
	struct stp_inode inode;
	uint64_t start;      /* sum of the sizes of the files before it in this table */
	uint64_t stream_off; /* of its first extent; UINT64_MAX without one */
	uint32_t ino;
	char *path;
};

struct file_table {
	struct bench_file *v;
	size_t n, cap;
	uint64_t bytes;  /* of all files */
	uint8_t *seen;   /* one bit per inode */
};

/* One read, kept for --print-reads. */
struct read_record {
	uint64_t off, checksum;
	uint32_t file, len;
};

struct bench;

struct worker {
	struct bench *b;
	pthread_t thread;
	uint64_t rng[4];
	size_t file_first, file_end; /* sequential: the files this thread reads */
	uint64_t planned;            /* reads this thread will make */
	uint8_t *buf;
	uint64_t *latency;           /* planned entries */
	struct read_record *records; /* --print-reads only */
	/* results */
	uint64_t done, bytes, decode_ns, digest;
	int err;
	uint32_t err_file;
	uint64_t err_off, err_len;
};

struct bench {
	const struct bench_opts *o;
	const char *image;
	struct stp_image *img;
	struct stp_cache *cache;
	struct file_table files;
	struct worker *workers;
	atomic_int stop;          /* a worker failed: the others finish early */
	pthread_mutex_t go_lock;
	pthread_cond_t go_cond;
	int go;                   /* protected by go_lock */
	uint64_t wall_ns;
	struct stp_cache_stats stats; /* of the timed run only */
};

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
	struct stp_walk walk = { .cli = &bench_cli, .img = b->img, .image = b->image,
				 .enter = add_file, .ctx = t };
	int err;

	t->seen = calloc(stp_image_sb(b->img)->inode_count / 8 + 1, 1);
	err = t->seen ? stp_walk_tree(&walk) : -ENOMEM;
	if (err) {
		stp_cli_problem(&bench_cli, b->image, NULL, "listing the files: %s",
				stp_cli_strerror(err));
		return err;
	}
	if (walk.problems)
		return -EUCLEAN;
	qsort(t->v, t->n, sizeof(*t->v), by_stream_order);
	for (size_t i = 0; i < t->n; i++) {
		t->v[i].start = t->bytes;
		/* sizes are the image's word: a sum that wraps would misplace every read */
		if (__builtin_add_overflow(t->bytes, t->v[i].inode.size, &t->bytes)) {
			stp_cli_problem(&bench_cli, b->image, t->v[i].path,
					"file sizes add up to more than 2^64 bytes");
			return -EOVERFLOW;
		}
	}
	if (!t->bytes) {
		stp_cli_problem(&bench_cli, b->image, NULL, "no file bytes to read");
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
				stp_cli_problem(&bench_cli, b->image, NULL, "reading every file in "
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
static void *alloc_array(uint64_t n, size_t size)
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
		w->latency = alloc_array(w->planned, sizeof(*w->latency));
		if (b->o->print_reads)
			w->records = alloc_array(w->planned, sizeof(*w->records));
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
static int workers_run(struct bench *b)
{
	struct stp_cache_stats before;
	uint32_t started = 0;
	uint64_t t0;
	int err = 0;

	for (; started < b->o->threads; started++) {
		err = -pthread_create(&b->workers[started].thread, NULL, worker_main,
				      &b->workers[started]);
		if (err) {
			stp_cli_error(&bench_cli, "cannot start a thread: %s", stp_cli_strerror(err));
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

	if (n > b->o->budget)
		n = b->o->budget;
	for (uint64_t i = 0; i < n; i++) {
		struct stp_block_ref ref;
		int err = stp_cache_get(b->cache, i, &ref);

		if (err) {
			stp_cli_problem(&bench_cli, b->image, NULL, "warming block %" PRIu64 ": %s",
					i, stp_cli_strerror(err));
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
	unsigned log = stp_image_sb(b->img)->block_log;
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
		from = (e.stream_off + (from - e.file_off)) >> log;
		to = (e.stream_off + (to - e.file_off) - 1) >> log;
		if (!found || from < *first)
			*first = from;
		if (!found || to > *last)
			*last = to;
		found = 1;
	}
	return found;
}

/* Prints the first failed read, naming the file and the blocks it touches. */
static int report_failure(const struct bench *b)
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
		stp_cli_problem(&bench_cli, b->image, f->path,
				"cannot read %" PRIu64 " bytes at offset %" PRIu64 "%s: %s", w->err_len,
				w->err_off, where, stp_cli_strerror(w->err));
		return w->err;
	}
	return 0;
}

/* --- the report --- */

struct summary {
	uint64_t reads, bytes, decode_ns, digest;
	uint64_t p50, p90, p99, p999, max, mean;
};

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

static int summarize(const struct bench *b, struct summary *s)
{
	uint64_t *all, total = 0, k = 0, sum = 0;

	for (uint32_t i = 0; i < b->o->threads; i++)
		total += b->workers[i].done; /* each at most its planned reads: no overflow */
	all = alloc_array(total, sizeof(*all));
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

static double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }
static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }
static double seconds(uint64_t ns) { return (double)ns / 1e9; }

/* "812 ns", "3.4 us", "12.50 ms", "1.203 s" */
static const char *human_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns < 1000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 1000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.3f s", (double)ns / 1e9);
	return buf;
}

static void print_text(const struct bench *b, const struct summary *s)
{
	const struct stp_cache_stats *st = &b->stats;
	char h1[32], h2[32], h3[32], h4[32], h5[32];

	printf("%-12s %s\n", "image:", b->image);
	printf("%-12s %s block size, %" PRIu64 " blocks, %zu files, %s of file data\n", "holds:",
	       stp_human_size(stp_image_block_size(b->img), h1, sizeof(h1)),
	       stp_image_sb(b->img)->block_count, b->files.n,
	       stp_human_size(b->files.bytes, h2, sizeof(h2)));
	printf("%-12s %s, %" PRIu64 "-byte reads, %u thread%s, seed %" PRIu64
	       ", cache budget %u blocks%s\n", "run:",
	       b->o->sequential ? "sequential" : "random", b->o->read_size, b->o->threads,
	       b->o->threads == 1 ? "" : "s", b->o->seed, b->o->budget,
	       b->o->warm ? ", warmed" : "");
	printf("%-12s %" PRIu64 "\n", "reads:", s->reads);
	printf("%-12s %" PRIu64 " (%s)\n", "bytes:", s->bytes,
	       stp_human_size(s->bytes, h1, sizeof(h1)));
	printf("%-12s %.6f s\n", "wall time:", seconds(b->wall_ns));
	printf("%-12s %.1f MiB/s, %.0f reads/s\n", "throughput:",
	       ratio(mib(s->bytes), seconds(b->wall_ns)),
	       ratio((double)s->reads, seconds(b->wall_ns)));
	printf("%-12s p50 %s, p90 %s, p99 %s, p99.9 %s, max %s\n", "latency:",
	       human_ns(s->p50, h1, sizeof(h1)), human_ns(s->p90, h2, sizeof(h2)),
	       human_ns(s->p99, h3, sizeof(h3)), human_ns(s->p999, h4, sizeof(h4)),
	       human_ns(s->max, h5, sizeof(h5)));
	printf("%-12s %" PRIu64 " hits, %" PRIu64 " misses, hit ratio %.2f%%\n", "cache:",
	       st->hits, st->misses, 100.0 * ratio((double)st->hits, (double)(st->hits + st->misses)));
	printf("%-12s %" PRIu64 " blocks, %" PRIu64 " bytes (%s)\n", "decoded:", st->decoded,
	       st->decoded_bytes, stp_human_size(st->decoded_bytes, h1, sizeof(h1)));
	if (st->decoded)
		printf("%-12s %.1f MiB/s (%.6f s in reads that decoded)\n", "decode:",
		       ratio(mib(st->decoded_bytes), seconds(s->decode_ns)), seconds(s->decode_ns));
	else
		printf("%-12s nothing decoded\n", "decode:");
	printf("%-12s %016" PRIx64 "\n", "checksum:", s->digest);
}

/* Length of the valid UTF-8 sequence at P, 0 when it is not one. */
static size_t utf8_len(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t n;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		n = 2;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		n = 3;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		n = 4;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (p[0] == 0xe0)
		lo = 0xa0;
	else if (p[0] == 0xed)
		hi = 0x9f;
	else if (p[0] == 0xf0)
		lo = 0x90;
	else if (p[0] == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/* A JSON string; a byte that is not UTF-8 becomes U+FFFD (JSON holds only Unicode). */
static void json_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	fputc('"', out);
	while (*p) {
		size_t n = utf8_len(p);

		if (n == 0) {
			fputs("\\ufffd", out);
			p++;
		} else if (n > 1) {
			fwrite(p, 1, n, out);
			p += n;
		} else {
			if (*p == '"' || *p == '\\')
				fprintf(out, "\\%c", *p);
			else if (*p == '\n')
				fputs("\\n", out);
			else if (*p == '\t')
				fputs("\\t", out);
			else if (*p < 0x20 || *p == 0x7f)
				fprintf(out, "\\u%04x", *p);
			else
				fputc(*p, out);
			p++;
		}
	}
	fputc('"', out);
}

static void print_json(const struct bench *b, const struct summary *s)
{
	const struct stp_cache_stats *st = &b->stats;
	double wall = seconds(b->wall_ns);

	printf("{\"image\": ");
	json_string(stdout, b->image);
	printf(", \"mode\": \"%s\", \"block_size\": %u, \"blocks\": %" PRIu64
	       ", \"files\": %zu, \"file_bytes\": %" PRIu64 ",\n",
	       b->o->sequential ? "sequential" : "random", stp_image_block_size(b->img),
	       stp_image_sb(b->img)->block_count, b->files.n, b->files.bytes);
	printf(" \"read_size\": %" PRIu64 ", \"threads\": %u, \"seed\": %" PRIu64
	       ", \"cache_budget\": %u, \"warm\": %s,\n",
	       b->o->read_size, b->o->threads, b->o->seed, b->o->budget,
	       b->o->warm ? "true" : "false");
	printf(" \"reads\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"wall_seconds\": %.9f,"
	       " \"mib_per_second\": %.3f, \"reads_per_second\": %.1f,\n",
	       s->reads, s->bytes, wall, ratio(mib(s->bytes), wall), ratio((double)s->reads, wall));
	printf(" \"latency_ns\": {\"p50\": %" PRIu64 ", \"p90\": %" PRIu64 ", \"p99\": %" PRIu64
	       ", \"p99_9\": %" PRIu64 ", \"max\": %" PRIu64 ", \"mean\": %" PRIu64 "},\n",
	       s->p50, s->p90, s->p99, s->p999, s->max, s->mean);
	printf(" \"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64 ", \"hit_ratio\": %.6f,"
	       " \"blocks_decoded\": %" PRIu64 ", \"decoded_bytes\": %" PRIu64 ",\n",
	       st->hits, st->misses, ratio((double)st->hits, (double)(st->hits + st->misses)),
	       st->decoded, st->decoded_bytes);
	printf(" \"decode_seconds\": %.9f, \"decode_mib_per_second\": %.3f,"
	       " \"checksum\": \"%016" PRIx64 "\"}\n",
	       seconds(s->decode_ns), ratio(mib(st->decoded_bytes), seconds(s->decode_ns)),
	       s->digest);
}

/* A path on one line: backslash, control and non-ASCII bytes as escapes. */
static void print_escaped(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '\\')
			fputs("\\\\", stdout);
		else if (*p < 0x20 || *p >= 0x7f)
			printf("\\x%02x", *p);
		else
			putchar(*p);
	}
}

/* "read THREAD INDEX OFFSET LENGTH CHECKSUM PATH", thread by thread. */
static void print_reads(const struct bench *b)
{
	for (uint32_t i = 0; i < b->o->threads; i++) {
		const struct worker *w = &b->workers[i];

		for (uint64_t k = 0; k < w->done; k++) {
			const struct read_record *r = &w->records[k];

			printf("read %u %" PRIu64 " %" PRIu64 " %u %016" PRIx64 " ", i, k, r->off,
			       r->len, r->checksum);
			print_escaped(b->files.v[r->file].path);
			putchar('\n');
		}
	}
}

/* --- the command --- */

static int bench_prepare(struct bench *b)
{
	int err;

	if (stp_cli_open(&bench_cli, b->image, &b->img))
		return -EIO;
	err = files_collect(b);
	if (err)
		return err;
	err = stp_cache_new(b->img, b->o->budget, b->o->threads, &b->cache);
	if (!err)
		err = workers_alloc(b);
	if (err && err != -E2BIG) /* a plan too large said so itself */
		stp_cli_error(&bench_cli, "%s", stp_cli_strerror(err));
	if (err)
		return err;
	return b->o->warm ? cache_warm(b) : 0;
}

static int bench_run(const char *image, const struct bench_opts *o)
{
	struct bench b = { .o = o, .image = image };
	struct summary s;
	int err;

	pthread_mutex_init(&b.go_lock, NULL);
	pthread_cond_init(&b.go_cond, NULL);
	err = bench_prepare(&b);
	if (!err)
		err = workers_run(&b);
	if (!err)
		err = report_failure(&b);
	if (!err && (err = summarize(&b, &s)))
		stp_cli_error(&bench_cli, "%s", stp_cli_strerror(err));
	if (!err) {
		if (o->print_reads)
			print_reads(&b);
		if (o->json)
			print_json(&b, &s);
		else
			print_text(&b, &s);
	}
	workers_free(&b);
	stp_cache_free(b.cache);
	files_free(&b.files);
	if (b.img)
		stp_image_close(b.img);
	pthread_mutex_destroy(&b.go_lock);
	pthread_cond_destroy(&b.go_cond);
	if (!err && fflush(stdout)) {
		stp_cli_error(&bench_cli, "writing to standard output: %s", strerror(errno));
		err = -EIO;
	}
	return err ? STP_EXIT_FAIL : STP_EXIT_OK;
}

/* Parses the value of option NAME into *OUT, in [MIN, MAX]; prints why not. */
static int parse_count(const char *name, const char *arg, uint64_t min, uint64_t max,
		       int size, uint64_t *out)
{
	int err = size ? stp_parse_size(arg, out) : stp_parse_uint(arg, min, max, out);

	if (!err && (*out < min || *out > max))
		err = -ERANGE;
	if (err)
		stp_cli_error(&bench_cli, "%s '%s': want %s from %" PRIu64 " to %" PRIu64, name,
			      arg, size ? "a size" : "a number", min, max);
	return err;
}

enum { OPT_SEED = 256, OPT_WARM, OPT_SEQUENTIAL, OPT_PRINT_READS };

static int parse_option(int opt, struct bench_opts *o)
{
	uint64_t v;

	switch (opt) {
	case 'n':
		return parse_count("--reads", optarg, 1, BENCH_READS_MAX, 0, &o->reads);
	case 's':
		return parse_count("--read-size", optarg, 1, BENCH_READ_SIZE_MAX, 1, &o->read_size);
	case 't':
		if (parse_count("--threads", optarg, 1, BENCH_THREADS_MAX, 0, &v))
			return -EINVAL;
		o->threads = (uint32_t)v;
		return 0;
	case 'c':
		if (parse_count("--cache-budget", optarg, 1, UINT32_MAX, 0, &v))
			return -EINVAL;
		o->budget = (uint32_t)v;
		return 0;
	case OPT_SEED:
		return parse_count("--seed", optarg, 0, UINT64_MAX, 0, &o->seed);
	case OPT_WARM: o->warm = 1; return 0;
	case OPT_SEQUENTIAL: o->sequential = 1; return 0;
	case 'j': o->json = 1; return 0;
	case OPT_PRINT_READS: o->print_reads = 1; return 0;
	default: return 1;
	}
}

int stp_cmd_bench(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "reads", required_argument, NULL, 'n' },
		{ "read-size", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "cache-budget", required_argument, NULL, 'c' },
		{ "warm", no_argument, NULL, OPT_WARM },
		{ "sequential", no_argument, NULL, OPT_SEQUENTIAL },
		{ "json", no_argument, NULL, 'j' },
		{ "print-reads", no_argument, NULL, OPT_PRINT_READS },
		STP_CLI_LONGOPTS, { 0 },
	};
	struct bench_opts o = { .reads = 10000, .read_size = 4096, .seed = 1, .threads = 1,
				.budget = 8 };
	int opt, status, rc;

	stp_cli_init(&bench_cli, argv);
	while ((opt = getopt_long(argc, argv, "n:s:t:c:j" STP_CLI_SHORTOPTS, longopts,
				  NULL)) != -1) {
		rc = parse_option(opt, &o);
		if (rc > 0)
			return stp_cli_other_option(&bench_cli, opt);
		if (rc < 0)
			return STP_EXIT_USAGE;
	}
	if ((status = stp_cli_operands(&bench_cli, argc, 1, 1)))
		return status;
	if (o.json && o.print_reads) {
		stp_cli_error(&bench_cli, "--print-reads and --json do not go together");
		return STP_EXIT_USAGE;
	}
	return bench_run(argv[optind], &o);
}
