/* SPDX-License-Identifier: MIT */
/* The report of `stipple bench` (bench_report.h). */
#include "bench_report.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "util.h"

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

void bench_print_text(const struct bench *b, const struct bench_summary *s)
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
	       b->o->threads == 1 ? "" : "s", b->o->seed, b->budget,
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

/* S with each byte that is not UTF-8 as U+FFFD: JSON holds only Unicode. */
static json_t *json_text(const char *s)
{
	size_t len = strlen(s), n = 0;
	char *clean = malloc(len * 3 + 1);
	json_t *j;

	if (!clean)
		return NULL;
	while (*s) {
		size_t k = stp_cli_utf8_len(s, strlen(s));

		if (k == 0) {
			memcpy(clean + n, "\xef\xbf\xbd", 3);
			n += 3;
			s++;
		} else {
			memcpy(clean + n, s, k);
			n += k;
			s += k;
		}
	}
	j = json_stringn(clean, n);
	free(clean);
	return j;
}

int bench_print_json(const struct bench *b, const struct bench_summary *s)
{
	const struct stp_cache_stats *st = &b->stats;
	double wall = seconds(b->wall_ns);
	char digest[17];
	json_t *o;
	int err;

	snprintf(digest, sizeof(digest), "%016" PRIx64, s->digest);
	o = json_pack(
		"{s:o, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:I, s:I, s:f, s:f, s:f,"
		" s:{s:I, s:I, s:I, s:I, s:I, s:I}, s:I, s:I, s:f, s:I, s:I, s:f, s:f, s:s#}",
		"image", json_text(b->image), "mode", b->o->sequential ? "sequential" : "random",
		"block_size", (json_int_t)stp_image_block_size(b->img),
		"blocks", (json_int_t)stp_image_sb(b->img)->block_count,
		"files", (json_int_t)b->files.n, "file_bytes", (json_int_t)b->files.bytes,
		"read_size", (json_int_t)b->o->read_size, "threads", (json_int_t)b->o->threads,
		"seed", (json_int_t)b->o->seed, "cache_budget", (json_int_t)b->budget,
		"warm", b->o->warm, "reads", (json_int_t)s->reads, "bytes", (json_int_t)s->bytes,
		"wall_seconds", wall, "mib_per_second", ratio(mib(s->bytes), wall),
		"reads_per_second", ratio((double)s->reads, wall),
		"latency_ns", "p50", (json_int_t)s->p50, "p90", (json_int_t)s->p90,
		"p99", (json_int_t)s->p99, "p99_9", (json_int_t)s->p999, "max", (json_int_t)s->max,
		"mean", (json_int_t)s->mean,
		"cache_hits", (json_int_t)st->hits, "cache_misses", (json_int_t)st->misses,
		"hit_ratio", ratio((double)st->hits, (double)(st->hits + st->misses)),
		"blocks_decoded", (json_int_t)st->decoded, "decoded_bytes",
		(json_int_t)st->decoded_bytes, "decode_seconds", seconds(s->decode_ns),
		"decode_mib_per_second", ratio(mib(st->decoded_bytes), seconds(s->decode_ns)),
		"checksum", digest, (size_t)16);
	err = o ? json_dumpf(o, stdout, JSON_PRESERVE_ORDER) : -1;

	json_decref(o);
	if (err)
		return -ENOMEM;
	putchar('\n');
	return 0;
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
void bench_print_reads(const struct bench *b)
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
