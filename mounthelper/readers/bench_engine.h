/* SPDX-License-Identifier: MIT */
/*
 * The engine of `stipple bench`: timed reads of an image's files through the library
 * and the block cache the mount uses, without FUSE. Random reads pick a byte uniformly
 * over all file bytes (so a file is hit in proportion to its size) from a seeded
 * xoshiro256** generator; sequential reads go through every file once in stream order.
 * Every read is timed on its own and every latency kept, so the percentiles are exact.
 *
 * One struct bench is used by one thread (the workers it starts are its own); functions
 * returning int give 0 or a negative errno and print what went wrong, naming b->image,
 * through b->cli. Everything a struct bench holds is freed by bench_free.
 */
#ifndef STP_BENCH_ENGINE_H
#define STP_BENCH_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "cli.h"
#include "format.h"

#define BENCH_READS_MAX 1000000000ull
#define BENCH_READ_SIZE_MAX (1ull << 30)
#define BENCH_THREADS_MAX 256u

struct stp_pubkey;

struct bench_opts {
	uint64_t reads, read_size, seed;
	uint32_t threads, budget; /* budget 0: stp_cache_default_budget */
	int json, sequential, warm, print_reads;
	const struct stp_pubkey *key; /* open verified with this key, or NULL */
	const char *key_file;         /* --key, loaded into key by the command */
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
	const struct stp_cli *cli; /* for messages */
	const struct bench_opts *o;
	const char *image;
	struct stp_image *img;
	struct stp_cache *cache;
	uint32_t budget;          /* the cache's: o->budget, or the image's default */
	struct file_table files;
	struct worker *workers;
	atomic_int stop;          /* a worker failed: the others finish early */
	pthread_mutex_t go_lock;
	pthread_cond_t go_cond;
	int go;                   /* protected by go_lock */
	uint64_t wall_ns;
	struct stp_cache_stats stats; /* of the timed run only */
};

struct bench_summary {
	uint64_t reads, bytes, decode_ns, digest;
	uint64_t p50, p90, p99, p999, max, mean;
};

/* Opens b->image, lists its files, makes the cache and the workers' plans and buffers,
 * and warms the cache when asked. */
int bench_prepare(struct bench *b);
/* Starts the workers together and times them from the start to the last one's end. */
int bench_workers_run(struct bench *b);
/* Prints the first failed read, naming the file and its blocks; returns its errno. */
int bench_report_failure(const struct bench *b);
/* The reads' count, bytes, checksum and exact latency percentiles. */
int bench_summarize(const struct bench *b, struct bench_summary *s);
/* N elements of SIZE bytes, or NULL (also when N * SIZE overflows). */
void *bench_alloc_array(uint64_t n, size_t size);
void bench_free(struct bench *b);

#endif
