/* SPDX-License-Identifier: MIT */
/*
 * Regression driver: runs a fuzz target over stored inputs in an ordinary unit test.
 *
 *   replay_NAME PATH...
 *
 * Each PATH is an input file or a directory of them. Every input is run as stored, then
 * cut short at a few lengths, then with each byte in turn inverted (every byte of inputs
 * up to 16 KiB, evenly spaced ones beyond), a deterministic sweep of the mutations a
 * fuzzer tries first. Exits 0 when every run returned, 1 when no input was found; a
 * broken promise aborts, and so does an allocation above ALLOC_MAX (as libFuzzer's
 * -malloc_limit_mb does): a few bytes of image must not make a reader reserve gigabytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

#define INPUT_MAX (16u << 20)
#define FLIP_ALL_UP_TO (16u << 10)
#define FLIPS_MAX 4096u

#define ALLOC_MAX (1ull << 30)

static unsigned long runs;
static const char *current_path;  /* the input being replayed, and its mutation */
static char current_change[64];

/* Names the input that made the target abort. */
static void report_current(int sig)
{
	fprintf(stderr, "replay: failed on %s, %s\n", current_path ? current_path : "?",
		current_change);
	signal(sig, SIG_DFL);
	raise(sig);
}

#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_SANITIZED 1
#endif
#endif

/* Every malloc of the process (the library's and zstd's too) goes through this limit.
 * Sanitizers bring their own allocator: there, ASAN_OPTIONS=max_allocation_size_mb=1024
 * does the same. */
#ifndef REPLAY_SANITIZED
void *__libc_malloc(size_t size);
void *malloc(size_t size)
{
	if (size > ALLOC_MAX) {
		fprintf(stderr, "replay: malloc(%zu) is above the %llu-byte limit\n", size,
			(unsigned long long)ALLOC_MAX);
		abort();
	}
	return __libc_malloc(size);
}
#endif

static void run(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	runs++;
}

static void run_cut(const uint8_t *data, size_t size)
{
	snprintf(current_change, sizeof(current_change), "cut to %zu bytes", size);
	run(data, size);
}

static void sweep(uint8_t *data, size_t size)
{
	static const size_t cuts[] = { 0, 1, 8, 255, 256, 257, 4096 };
	size_t step = size <= FLIP_ALL_UP_TO ? 1 : size / FLIPS_MAX + 1;

	snprintf(current_change, sizeof(current_change), "as stored");
	run(data, size);
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
		if (cuts[i] < size)
			run_cut(data, cuts[i]);
	if (size > 1) {
		run_cut(data, size / 2);
		run_cut(data, size - 1);
	}
	for (size_t i = 0; i < size; i += step) {
		snprintf(current_change, sizeof(current_change), "byte %zu inverted", i);
		data[i] ^= 0xff;
		run(data, size);
		data[i] ^= 0xff;
	}
}

/* Reads PATH whole: 0, or -errno. *out is the caller's to free. */
static int read_input(const char *path, uint8_t **out, size_t *size)
{
	struct stat st;
	uint8_t *buf = NULL;
	ssize_t n;
	int rc = 0, fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	if (st.st_size > INPUT_MAX) {
		rc = -EFBIG;
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	n = pread(fd, buf, (size_t)st.st_size, 0);
	if (n != st.st_size) {
		rc = n < 0 ? -errno : -EIO;
		free(buf);
		goto out;
	}
	*out = buf;
	*size = (size_t)n;
out:
	close(fd);
	return rc;
}

static int replay_file(const char *path)
{
	uint8_t *data = NULL;
	size_t size = 0;
	int rc = read_input(path, &data, &size);

	if (rc) {
		fprintf(stderr, "%s: %s\n", path, strerror(-rc));
		return rc;
	}
	fprintf(stderr, "%s (%zu bytes)\n", path, size);
	current_path = path;
	sweep(data, size);
	current_path = NULL;
	free(data);
	return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

/* Replays PATH or, for a directory, each file in it in name order: the number of inputs
 * replayed, or -errno. */
static int replay_path(const char *path)
{
	struct dirent **names;
	struct stat st;
	int n, count = 0, rc = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode))
		return replay_file(path);
	n = scandir(path, &names, NULL, by_name);
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		char *file;

		if (names[i]->d_name[0] != '.' && rc >= 0 &&
		    asprintf(&file, "%s/%s", path, names[i]->d_name) >= 0) {
			rc = replay_file(file);
			count += rc > 0;
			free(file);
		}
		free(names[i]);
	}
	free(names);
	return rc < 0 ? rc : count;
}

int main(int argc, char **argv)
{
	int inputs = 0;

	signal(SIGABRT, report_current);
	signal(SIGSEGV, report_current);
	signal(SIGBUS, report_current);
	signal(SIGFPE, report_current);
	for (int i = 1; i < argc; i++) {
		int rc = replay_path(argv[i]);

		if (rc < 0)
			return 1;
		inputs += rc;
	}
	if (!inputs) {
		fprintf(stderr, "%s: no inputs to replay\n", argv[0]);
		return 1;
	}
	printf("%d inputs, %lu runs\n", inputs, runs);
	return 0;
}
