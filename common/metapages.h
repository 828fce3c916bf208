/* SPDX-License-Identifier: MIT */
/*
 * A bounded cache of decoded metadata pages (stipple(5), METADATA PAGES). A page is
 * loaded by the owner's LOAD function (read, checked, decoded) the first time a read
 * needs it and kept while the cache stays within its budget, a page chosen at random
 * leaving when it would not (metapages.c says why not the least recently used); so
 * memory follows what is looked up, not the size of the tree.
 *
 * Thread-safe: one mutex guards the page table and the resident pages, held only to find
 * a page and copy from it. LOAD runs without it, so two threads may load one page at once;
 * the second copy is dropped. Functions return 0 or a negative errno (LOAD's own).
 */
#ifndef STP_METAPAGES_H
#define STP_METAPAGES_H

#include <stddef.h>
#include <stdint.h>

struct stp_metapages;

/* Decodes page PAGE, LEN bytes (STP_META_PAGE_SIZE but for the last), into OUT. Called
 * from any thread that reads; must be thread-safe. */
typedef int (*stp_metapages_load_fn)(void *ctx, uint64_t page, uint8_t *out, size_t len);

/* A cache over SIZE bytes of decoded metadata holding up to BUDGET bytes of pages (at
 * least one page is always kept). *OUT is the caller's (stp_metapages_destroy). */
int stp_metapages_create(uint64_t size, size_t budget, stp_metapages_load_fn load, void *ctx,
			 struct stp_metapages **out);
void stp_metapages_destroy(struct stp_metapages *mp);

/* Copies LEN decoded bytes at OFF into DST, loading the pages it needs. -EUCLEAN
 * (reported by LOAD) for a damaged page, -EINVAL for a range past SIZE. */
int stp_metapages_read(struct stp_metapages *mp, uint64_t off, size_t len, void *dst);

/* Changes the budget; pages above it leave as later reads come. */
void stp_metapages_set_budget(struct stp_metapages *mp, size_t budget);

/* Bounds the pages loaded in all (stats.loads) to MAX; 0 lifts the bound. A read that
 * needs a page beyond it fails with -ENOBUFS and is counted (stats.refused): a walk that
 * cycles through more pages than the cache holds ends fast instead of decoding a page
 * for every record it visits. Resident pages are still read. */
void stp_metapages_limit_loads(struct stp_metapages *mp, uint64_t max);

struct stp_metapages_stats {
	uint64_t loads;       /* pages decoded */
	uint64_t hits;        /* reads served from a resident page */
	uint64_t refused;     /* loads refused by the bound of stp_metapages_limit_loads */
	size_t resident;      /* bytes of pages held now */
	size_t peak;          /* the most held at once, between reads */
};
void stp_metapages_stats(struct stp_metapages *mp, struct stp_metapages_stats *st);

#endif
