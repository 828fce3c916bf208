/* SPDX-License-Identifier: MIT */
#include "escape.h"

#include <stdint.h>

/* Length of the valid UTF-8 sequence at S (LEN bytes left), or 0; *cp its code point. */
static size_t utf8_seq(const unsigned char *s, size_t len, uint32_t *cp)
{
	static const uint32_t min[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t n = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	uint32_t c;

	if (n == 0 || s[0] >= 0xf8 || n > len)
		return 0;
	c = s[0] & (0x7fu >> n);
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, UTF-16 surrogates and what lies past Unicode are not UTF-8 */
	if (c < min[n] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		return 0;
	*cp = c;
	return n;
}

size_t stp_escape_utf8_len(const char *s, size_t len)
{
	uint32_t cp;

	if (!len)
		return 0;
	return (unsigned char)s[0] < 0x80 ? 1 : utf8_seq((const unsigned char *)s, len, &cp);
}

static void put_octal(FILE *f, const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "\\%03o", s[i]);
}

void stp_escape_put(FILE *f, const char *str, size_t len)
{
	const unsigned char *s = (const unsigned char *)str;

	while (len) {
		uint32_t cp = 0;
		size_t n = 1;

		if (s[0] < 0x20 || s[0] == 0x7f || s[0] == '\\') {
			put_octal(f, s, 1);
		} else if (s[0] < 0x80) {
			fputc(s[0], f);
		} else if (!(n = utf8_seq(s, len, &cp))) {
			n = 1;
			put_octal(f, s, 1);
		} else if (cp <= 0x9f) {
			put_octal(f, s, n); /* C1 control, as CSI (U+009B) */
		} else {
			fwrite(s, 1, n, f);
		}
		s += n;
		len -= n;
	}
}
