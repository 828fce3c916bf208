/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: mkstipple's archive reader (builder/archive_in.c), the code `mkstipple
 * x.tar IMAGE` runs. The input is the archive, in a memfd reached by its /proc path as a
 * seekable file, so tar and cpio bytes are read in place and the rest go through the
 * spool, an unlinked file in a directory made once under $TMPDIR. On success the tree
 * must keep its promises: inodes numbered from the root, every path within the readers'
 * bound, attributes sorted with one value per name, a hard link's primary a regular file;
 * and a file's bytes can be read from the sources the reader handed back, holes skipped.
 * mkstipple's messages are silenced (the stdio stream only: sanitizer reports still go to
 * descriptor 2).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "archive_in.h"
#include "fuzz.h"
#include "source.h"
#include "tree.h"

#define READ_BUDGET (256u << 10) /* file bytes read per input, holes not counted */

static char dir[256];

static void remove_spool_dir(void)
{
	rmdir(dir);
}

static const char *spool_dir(void)
{
	if (!dir[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(dir, sizeof(dir), "%s/fuzz-archive.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(dir))
			abort();
		atexit(remove_spool_dir);
	}
	return dir;
}

static void check_node(const struct node *n)
{
	FUZZ_ASSERT(tree_rel_path(n, NULL, 0) <= TREE_PATH_MAX);
	FUZZ_ASSERT(n->primary == n);
	for (uint32_t i = 1; i < n->nxattrs; i++)
		FUZZ_ASSERT(strcmp(n->xattrs[i - 1].name, n->xattrs[i].name) < 0);
	FUZZ_ASSERT(!S_ISLNK(n->st.st_mode) || (n->link_target && *n->link_target));
	for (uint32_t i = 0; S_ISDIR(n->st.st_mode) && i < n->nchildren; i++)
		FUZZ_ASSERT(n->children[i]->parent == n);
}

/* Reads what it can of F within *BUDGET, skipping holes as the packer does. */
static void read_file(const struct node *f, uint8_t *buf, size_t *budget)
{
	struct source_file sf;
	uint64_t off = 0, size = (uint64_t)f->st.st_size;

	if (source_file_open(f, &sf))
		return;
	while (off < size && *budget) {
		size_t want = *budget < 65536 ? *budget : 65536;
		ssize_t got;

		off = source_file_data(&sf, off, size);
		FUZZ_ASSERT(off <= size);
		if (off == size)
			break;
		got = source_file_pread(&sf, buf, want, off);
		if (got <= 0)
			break;
		*budget -= (size_t)got;
		off += (uint64_t)got;
	}
	source_file_close(&sf);
}

static void check_tree(struct tree *t, const struct archive_source *src)
{
	static uint8_t buf[65536];
	size_t budget = READ_BUDGET;

	FUZZ_ASSERT(t->root && t->ninodes >= 1 && t->inodes[0] == t->root);
	FUZZ_ASSERT(S_ISDIR(t->root->st.st_mode));
	for (uint32_t i = 0; i < t->ninodes; i++) {
		FUZZ_ASSERT(t->inodes[i]->ino == i);
		check_node(t->inodes[i]);
	}
	source_use_archive(src->fd, src->spool_fd);
	for (size_t i = 0; i < t->nfiles; i++) {
		FUZZ_ASSERT(S_ISREG(t->files[i]->st.st_mode) && t->files[i]->st.st_size >= 0);
		read_file(t->files[i], buf, &budget);
	}
	source_close();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-archive", MFD_CLOEXEC);
	struct archive_source src;
	struct tree t;
	char path[64];
	FILE *quiet = fopen("/dev/null", "w"), *saved = stderr;
	int rc;

	if (fd < 0 || !quiet || (size && write(fd, data, size) != (ssize_t)size))
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	stderr = quiet;
	rc = archive_tree(path, spool_dir(), 0, NULL, &t, &src);
	if (!rc)
		check_tree(&t, &src);
	stderr = saved;
	archive_source_close(&src);
	tree_free(&t);
	fclose(quiet);
	close(fd);
	return 0;
}
