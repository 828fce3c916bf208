/* SPDX-License-Identifier: MIT */
/*
 * The harness the unit tests share, speaking TAP (meson's protocol : 'tap') so that a
 * failure names its case. A test function is one case: RUN(fn) calls it and prints
 * "ok N - fn" or "not ok N - fn"; a CHECK inside it prints a failed condition with its
 * place on stderr, counts it in `failures`, and lets the case go on. A harness
 * that reports its own cases calls tap_result(). main() ends with `return tap_done();`,
 * which prints the plan "1..N" and exits non-zero when any check failed, or with
 * `return tap_skip_all(why);`. One test executable per file includes it.
 */
#ifndef STP_TEST_CHECK_H
#define STP_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;         /* failed checks, over the whole run */
static unsigned tap_cases;   /* cases reported so far */
static unsigned tap_failed;  /* of those, failed */

static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), unused));

/* FMT begins with a space (see CHECK) so that it is never empty. */
static void check_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s:%d: check failed: %s", file, line, cond);
	if (fmt[1]) {
		fputs(": ", stderr);
		va_start(ap, fmt);
		vfprintf(stderr, fmt + 1, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	failures++;
}

/* CHECK(cond) or CHECK(cond, "format", ...): the format must be a string literal. */
#define CHECK(cond, ...)                                                              \
	do {                                                                          \
		if (!(cond))                                                          \
			check_failed(__FILE__, __LINE__, #cond, " " __VA_ARGS__);     \
	} while (0)

/* Reports one case: "ok N - NAME" or "not ok N - NAME". */
static void __attribute__((unused)) tap_result(int ok, const char *name)
{
	fflush(stderr);
	printf("%sok %u - %s\n", ok ? "" : "not ", ++tap_cases, name);
	fflush(stdout);
	if (!ok)
		tap_failed++;
}

/* Runs FN as the case NAME: it fails when a check inside it failed. */
static void __attribute__((unused)) tap_run(const char *name, void (*fn)(void))
{
	int before = failures;

	fn();
	tap_result(failures == before, name);
}

#define RUN(fn) tap_run(#fn, fn)

/* The plan line; the exit status: 1 when a case or a check failed. */
static int __attribute__((unused)) tap_done(void)
{
	printf("1..%u\n", tap_cases);
	return tap_failed || failures ? 1 : 0;
}

/* Skips the whole program (before any case ran): meson reports it as skipped. */
static int __attribute__((unused)) tap_skip_all(const char *why)
{
	printf("1..0 # SKIP %s\n", why);
	return 0;
}

#endif
