/* SPDX-License-Identifier: MIT */
/* Encoding the metadata tables. */
#include "meta.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "image.h"
#include "report.h"

/* Records of each table, counted before anything is written. */
struct sizes {
	uint64_t dirents, extents, xattrs, strings;
};

static void count(const struct tree *t, struct sizes *s)
{
	memset(s, 0, sizeof(*s));
	for (uint32_t i = 0; i < t->ninodes; i++) {
		const struct node *n = t->inodes[i];

		s->extents += n->nextents;
		s->xattrs += n->nxattrs;
		for (size_t x = 0; x < n->nxattrs; x++)
			s->strings += strlen(n->xattrs[x].name) + n->xattrs[x].len;
		if (n->link_target)
			s->strings += strlen(n->link_target);
		s->dirents += n->nchildren;
		for (size_t c = 0; c < n->nchildren; c++)
			s->strings += n->children[c]->name_len;
	}
	for (size_t i = 0; i < t->nlookups; i++)
		s->strings += t->lookups[i].len;
}

static uint64_t align8(uint64_t v) { return (v + 7) & ~7ull; }

/* Cursor over the tables of the buffer being written. */
struct writer {
	uint8_t *buf;
	struct stp_meta_header h;
	uint64_t dirent, extent, xattr, str;
};

static uint32_t put_string(struct writer *w, const void *s, size_t len)
{
	uint64_t off = w->str;

	memcpy(w->buf + w->h.strings_off + off, s, len);
	w->str += len;
	return (uint32_t)off;
}

static void put_xattrs(struct writer *w, const struct node *n, struct stp_inode *in)
{
	in->xattr_first = (uint32_t)w->xattr;
	in->xattr_count = (uint32_t)n->nxattrs;
	for (size_t i = 0; i < n->nxattrs; i++) {
		struct stp_xattr x;

		x.name_len = (uint16_t)strlen(n->xattrs[i].name);
		x.name_off = put_string(w, n->xattrs[i].name, x.name_len);
		x.value_len = (uint32_t)n->xattrs[i].len;
		x.value_off = put_string(w, n->xattrs[i].value, n->xattrs[i].len);
		stp_xattr_encode(&x, w->buf + w->h.xattr_off + w->xattr++ * STP_XATTR_SIZE);
	}
}

static void put_body(struct writer *w, const struct node *n, struct stp_inode *in)
{
	switch (n->st.st_mode & S_IFMT) {
	case S_IFREG:
		in->size = (uint64_t)n->st.st_size;
		in->data = w->extent;
		in->count = n->nextents;
		for (uint32_t i = 0; i < n->nextents; i++)
			stp_extent_encode(&n->extents[i],
					  w->buf + w->h.extent_off + w->extent++ * STP_EXTENT_SIZE);
		break;
	case S_IFDIR:
		in->size = in->count = (uint32_t)n->nchildren;
		in->data = w->dirent;
		in->parent = n->parent ? n->parent->ino : n->ino;
		for (size_t i = 0; i < n->nchildren; i++) {
			const struct node *c = n->children[i];
			struct stp_dirent d = { .ino = c->primary->ino,
						.name_len = (uint16_t)c->name_len,
						.dtype = (uint8_t)stp_mode_dtype(c->st.st_mode) };

			d.name_off = put_string(w, c->name, c->name_len);
			stp_dirent_encode(&d, w->buf + w->h.dirent_off + w->dirent++ * STP_DIRENT_SIZE);
		}
		break;
	case S_IFLNK:
		in->size = strlen(n->link_target);
		in->data = put_string(w, n->link_target, in->size);
		break;
	case S_IFCHR:
	case S_IFBLK:
		in->data = stp_rdev_pack(major(n->st.st_rdev), minor(n->st.st_rdev));
		break;
	}
}

static void put_inode(struct writer *w, const struct node *n)
{
	struct stp_inode in = {
		.mode = n->st.st_mode, .uid = n->st.st_uid, .gid = n->st.st_gid,
		.nlink = n->nlink, .mtime_sec = n->st.st_mtim.tv_sec,
		.mtime_nsec = (uint32_t)n->st.st_mtim.tv_nsec,
	};

	put_xattrs(w, n, &in);
	put_body(w, n, &in);
	stp_inode_encode(&in, w->buf + w->h.inode_off + (uint64_t)n->ino * STP_INODE_SIZE);
}

/* The lookup table, its names after every other string. */
static void put_lookups(struct writer *w, const struct tree *t)
{
	for (size_t i = 0; i < t->nlookups; i++) {
		const struct tree_lookup *l = &t->lookups[i];
		struct stp_lookup rec = { .dir = l->dir->ino, .name_len = l->len };

		rec.name_off = put_string(w, l->name, l->len);
		stp_lookup_encode(&rec, w->buf + w->h.lookup_off + i * STP_LOOKUP_SIZE);
	}
}

static void layout(const struct tree *t, const struct sizes *s, uint64_t nblocks,
		   struct stp_meta_header *h, uint64_t *total)
{
	h->inode_count = t->ninodes;
	h->dirent_count = (uint32_t)s->dirents;
	h->extent_count = (uint32_t)s->extents;
	h->xattr_count = (uint32_t)s->xattrs;
	h->block_count = (uint32_t)nblocks;
	h->strings_size = s->strings;
	h->inode_off = STP_META_HDR_SIZE;
	h->dirent_off = align8(h->inode_off + (uint64_t)t->ninodes * STP_INODE_SIZE);
	h->extent_off = align8(h->dirent_off + s->dirents * STP_DIRENT_SIZE);
	h->xattr_off = align8(h->extent_off + s->extents * STP_EXTENT_SIZE);
	h->block_off = align8(h->xattr_off + s->xattrs * STP_XATTR_SIZE);
	h->strings_off = align8(h->block_off + nblocks * STP_BLOCKENT_SIZE);
	if (t->nlookups) { /* none: both fields 0, the image as before the table */
		h->lookup_count = (uint32_t)t->nlookups;
		h->lookup_off = h->strings_off;
		h->strings_off = align8(h->lookup_off + t->nlookups * STP_LOOKUP_SIZE);
	}
	*total = h->strings_off + s->strings;
}

/* Counts T's tables and lays them out in H: -EFBIG (reported) when a table overflows
 * its count or the whole is more than the readers take (STP_META_SIZE_MAX). */
static int plan(const struct tree *t, uint64_t nblocks, struct sizes *s,
		struct stp_meta_header *h, uint64_t *total)
{
	count(t, s);
	if (s->dirents > UINT32_MAX || s->extents > UINT32_MAX || s->xattrs > UINT32_MAX ||
	    s->strings > UINT32_MAX || nblocks > UINT32_MAX) {
		report_error(NULL, "the tree is too large for one image");
		return -EFBIG;
	}
	layout(t, s, nblocks, h, total);
	if (*total <= STP_META_SIZE_MAX)
		return 0;
	report_error(NULL, "the metadata would take %.1f MiB (%u inodes, %llu extended "
		     "attributes, %.1f MiB of names, link targets and attribute values), over "
		     "the %llu MiB every reader takes: no image written", *total / 1048576.0,
		     t->ninodes, (unsigned long long)s->xattrs, s->strings / 1048576.0,
		     STP_META_SIZE_MAX >> 20);
	return -EFBIG;
}

int meta_check_size(const struct tree *t)
{
	struct stp_meta_header h = { 0 };
	struct sizes s;
	uint64_t total;

	return plan(t, 0, &s, &h, &total);
}

int meta_build(const struct tree *t, const struct stp_blockent *blocks, uint64_t nblocks,
	       uint8_t **out, size_t *len)
{
	struct writer w = { 0 };
	struct sizes s;
	uint64_t total;
	int rc = plan(t, nblocks, &s, &w.h, &total);

	if (rc)
		return rc;
	w.buf = calloc(1, total);
	if (!w.buf)
		return -ENOMEM;
	stp_meta_header_encode(&w.h, w.buf);
	for (uint32_t i = 0; i < t->ninodes; i++)
		put_inode(&w, t->inodes[i]);
	for (uint64_t b = 0; b < nblocks; b++)
		stp_blockent_encode(&blocks[b], w.buf + w.h.block_off + b * STP_BLOCKENT_SIZE);
	put_lookups(&w, t);
	*out = w.buf;
	*len = total;
	return 0;
}
