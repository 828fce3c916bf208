/* SPDX-License-Identifier: MIT */
/* The list of entries and the summary, for people or as JSON. */
#include "summary.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "util.h"

/* Writes N's path below the root, then N's children (depth first), with BUF (CAP bytes,
 * grown as needed) for the paths. The depth is bounded by TREE_DEPTH_MAX. */
static void list_node(FILE *out, const struct node *n, char **buf, size_t *cap)
{
	size_t len = tree_rel_path(n, NULL, 0);

	if (n->parent) {
		if (len + 1 > *cap) {
			char *grown = realloc(*buf, len + 1);

			if (!grown)
				return;
			*buf = grown;
			*cap = len + 1;
		}
		tree_rel_path(n, *buf, *cap);
		stp_escape_put(out, *buf, len);
		fputs(S_ISDIR(n->st.st_mode) ? "/\n" : "\n", out);
	}
	for (uint32_t i = 0; S_ISDIR(n->st.st_mode) && i < n->nchildren; i++)
		list_node(out, n->children[i], buf, cap);
}

void summary_list(FILE *out, const struct tree *t)
{
	char *buf = NULL;
	size_t cap = 0;

	if (t->root)
		list_node(out, t->root, &buf, &cap);
	free(buf);
}

/* S as a JSON string: controls and the bytes that are not UTF-8 as \u escapes of their
 * byte values, so that any name gives valid JSON. */
static void json_string(FILE *out, const char *s)
{
	size_t len = strlen(s);

	fputc('"', out);
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)s[i];
		size_t u = stp_escape_utf8_len(s + i, len - i);

		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c == 0x7f || !u)
			fprintf(out, "\\u%04x", c);
		else
			fwrite(s + i, 1, u, out);
		i += u && c >= 0x20 ? u : 1;
	}
	fputc('"', out);
}

static void print_json(FILE *out, const struct summary *s, const struct tree *t)
{
	fputs("{\"image\":", out);
	if (s->image)
		json_string(out, s->image);
	else
		fputs("null", out);
	fprintf(out, ",\"dry_run\":%s,\"files\":%zu,\"inodes\":%" PRIu32 ",\"bytes_in\":%" PRIu64,
		s->image ? "false" : "true", t->nfiles, t->ninodes, t->file_bytes);
	if (s->image)
		fprintf(out, ",\"image_bytes\":%" PRIu64 ",\"ratio\":%.4f", s->image_size,
			t->file_bytes ? (double)s->image_size / (double)t->file_bytes : 1.0);
	else
		fputs(",\"image_bytes\":null,\"ratio\":null", out);
	fprintf(out, ",\"seconds\":%.3f,\"left_out\":%zu,\"changed\":%u,\"warnings\":%u,"
		"\"errors\":%u}\n", s->seconds, s->left_out, s->changed, s->warnings, s->errors);
}

void summary_print(FILE *out, const struct summary *s, const struct tree *t, int json)
{
	char in[32], img[32];

	if (json) {
		print_json(out, s, t);
		return;
	}
	if (!s->image) {
		fprintf(out, "dry run: %zu files, %" PRIu32 " inodes, %s in, %.1f s\n", t->nfiles,
			t->ninodes, stp_human_size(t->file_bytes, in, sizeof(in)), s->seconds);
		return;
	}
	stp_escape_put(out, s->image, strlen(s->image));
	fprintf(out, ": %zu files, %" PRIu32 " inodes, %s in, %s image (%.1f%%), %.1f s\n",
		t->nfiles, t->ninodes, stp_human_size(t->file_bytes, in, sizeof(in)),
		stp_human_size(s->image_size, img, sizeof(img)),
		t->file_bytes ? 100.0 * (double)s->image_size / (double)t->file_bytes : 100.0,
		s->seconds);
}
