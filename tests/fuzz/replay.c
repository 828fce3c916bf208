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
 * broken promise aborts, and so does an allocation above the limits below: a few bytes
 * of image must not make a reader reserve gigabytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
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

/*
 * Allocation limits, as libFuzzer's -malloc_limit_mb and -rss_limit_mb: one allocation
 * above ALLOC_MAX, or more than LIVE_MAX held at once, aborts the replay and names the
 * input. Every allocation of the process counts (the library's, zstd's, libc's own), by
 * malloc, calloc, realloc and the aligned allocators alike. Without a sanitizer these
 * functions replace glibc's and call its __libc_* entry points; under a sanitizer, whose
 * allocator cannot be replaced, its allocation hooks do the counting and
 * ASAN_OPTIONS=max_allocation_size_mb stops a single large request before it is made.
 */
#define ALLOC_MAX (256ull << 20)
#define LIVE_MAX (1ull << 30)

static int64_t live_bytes, peak_bytes; /* signed: a block libc allocated for itself may be
				        * freed here without having been counted */

static void alloc_abort(const char *what, uint64_t size)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "replay: %s of %llu bytes is above the limit (%llu one, "
			 "%llu held)\n", what, (unsigned long long)size,
			 (unsigned long long)ALLOC_MAX, (unsigned long long)LIVE_MAX);

	if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0)
		n = 0; /* nothing better to do */
	abort();
}

static void alloc_counted(int64_t size)
{
	int64_t now = __atomic_add_fetch(&live_bytes, size, __ATOMIC_RELAXED);

	if (now > __atomic_load_n(&peak_bytes, __ATOMIC_RELAXED))
		__atomic_store_n(&peak_bytes, now, __ATOMIC_RELAXED);
	if (now > (int64_t)LIVE_MAX)
		alloc_abort("holding allocations", (uint64_t)now);
}

#ifndef REPLAY_SANITIZED
void *__libc_malloc(size_t size);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t size);
void *__libc_memalign(size_t align, size_t size);
void __libc_free(void *p);

static void *counted(void *p)
{
	if (p)
		alloc_counted((int64_t)malloc_usable_size(p));
	return p;
}

static void check_one(const char *fn, size_t size)
{
	if (size > ALLOC_MAX)
		alloc_abort(fn, size);
}

void *malloc(size_t size)
{
	check_one("malloc", size);
	return counted(__libc_malloc(size));
}

void *calloc(size_t n, size_t size)
{
	size_t total;

	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	check_one("calloc", total);
	return counted(__libc_calloc(n, size));
}

void *realloc(void *old, size_t size)
{
	size_t was = old ? malloc_usable_size(old) : 0;
	void *p;

	check_one("realloc", size);
	p = __libc_realloc(old, size);
	if (p || !size) { /* moved, grown, or (size 0) freed */
		alloc_counted(-(int64_t)was);
		counted(p);
	}
	return p;
}

void free(void *p)
{
	if (p)
		alloc_counted(-(int64_t)malloc_usable_size(p));
	__libc_free(p);
}

void *memalign(size_t align, size_t size)
{
	check_one("memalign", size);
	return counted(__libc_memalign(align, size));
}

void *aligned_alloc(size_t align, size_t size)
{
	return memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (!align || align % sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = memalign(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *valloc(size_t size)
{
	return memalign((size_t)sysconf(_SC_PAGESIZE), size);
}

void *pvalloc(size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	return memalign(page, (size + page - 1) & ~(page - 1));
}

/* glibc hands memory back to the kernel as soon as it can: a block of 128 KiB or more
 * (zstd's contexts, reply buffers) is unmapped at its free, and the heap's top trimmed.
 * Each of those costs a TLB flush on every CPU the process ran on, which was about half
 * of a replay's time, paid tens of thousands of times. Kept, the memory is reused. */
static void alloc_limits_install(void)
{
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_TOP_PAD, 16 << 20);
}
#else
int __sanitizer_install_malloc_and_free_hooks(void (*on_malloc)(const volatile void *, size_t),
					      void (*on_free)(const volatile void *));
size_t __sanitizer_get_allocated_size(const volatile void *p);

static void on_malloc(const volatile void *p, size_t size)
{
	if (size > ALLOC_MAX)
		alloc_abort("an allocation", size);
	alloc_counted((int64_t)size);
}

static void on_free(const volatile void *p)
{
	alloc_counted(-(int64_t)__sanitizer_get_allocated_size(p));
}

static void alloc_limits_install(void)
{
	__sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#endif

/* replay --alloc-test=FN: asks FN for more than the limit allows, which must abort (the
 * unit tests that check the limits are in force expect this to fail). */
static int alloc_test(const char *fn)
{
	volatile size_t big = ALLOC_MAX + 1;
	void *p = NULL, *q[8] = { NULL };

	if (!strcmp(fn, "malloc"))
		p = malloc(big);
	else if (!strcmp(fn, "calloc"))
		p = calloc(1, big);
	else if (!strcmp(fn, "realloc"))
		p = realloc(malloc(16), big);
	else if (!strcmp(fn, "held"))  /* each allowed, together too much */
		for (int i = 0; i < 8; i++)
			q[i] = malloc(ALLOC_MAX);
	else
		return 2;
	fprintf(stderr, "replay: %s of %zu bytes was allowed\n", fn, (size_t)big);
	free(p);
	for (int i = 0; i < 8; i++)
		free(q[i]);
	return 0;
}

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

	alloc_limits_install();
	if (argc == 2 && !strncmp(argv[1], "--alloc-test=", 13))
		return alloc_test(argv[1] + 13);
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
	printf("%d inputs, %lu runs, at most %lld KiB held\n", inputs, runs,
	       (long long)(peak_bytes >> 10));
	return 0;
}
