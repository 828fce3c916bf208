# SPDX-License-Identifier: MIT
"""Crafted images whose decoded metadata is far larger than what they store: paged
metadata (stipple(5), METADATA PAGES) whose pages are zstd frames, a page that repeats
stored once and named by every page-table entry that holds it. Used against the mount's
accounting: millions of hot blocks in a 45 KB image, and a metadata table that makes a
walk cycle through more pages than the daemon's page cache holds.

Each image starts from a real one built by mkstipple (its superblock, its first inodes'
metadata); everything else is laid out here, field by field as stipple(5) tables it
(imageutil holds the offsets)."""
import ctypes
import struct

from imageutil import (BLOCKENT_FIELDS, BLOCKENT_SIZE, CODEC_ZSTD, DIRENT_SIZE,
                       EXTENT_FIELDS, EXTENT_SIZE, FEAT_META_PAGES, INODE_FIELDS, INODE_SIZE,
                       META_CODEC_PAGES, META_FIELDS, META_PAGE_SIZE, SB_FIELDS, put,
                       reseal, xxh3)
from conftest import read_file

FEAT_HOT_BLOCKS = 1 << 4
SB_HOT_BLOCK_LOG = 44      # stipple(5): the superblock's hot_block_log, 32 bits
META_HDR_SIZE = 96
S_IFDIR, S_IFREG = 0o040000, 0o100000

_zstd = ctypes.CDLL("libzstd.so.1")
_zstd.ZSTD_compress.restype = ctypes.c_size_t
_zstd.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                ctypes.c_size_t, ctypes.c_int]
_zstd.ZSTD_compressBound.restype = ctypes.c_size_t
_zstd.ZSTD_compressBound.argtypes = [ctypes.c_size_t]


def zstd(data, level=3):
    """DATA as one zstd frame."""
    cap = _zstd.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(cap)
    n = _zstd.ZSTD_compress(out, cap, bytes(data), len(data), level)
    assert n <= cap, "zstd failed"
    return out.raw[:n]


def blockent(offset, stored_size, checksum, codec=CODEC_ZSTD):
    rec = bytearray(BLOCKENT_SIZE)
    for f, v in (("offset", offset), ("stored_size", stored_size), ("codec", codec),
                 ("checksum", checksum)):
        put(BLOCKENT_FIELDS, f, rec, v)
    return bytes(rec)


def inode(mode, size, data, count, parent=0):
    rec = bytearray(INODE_SIZE)
    for f, v in (("mode", mode), ("nlink", 2 if mode == S_IFDIR | 0o755 else 1),
                 ("size", size), ("data", data), ("count", count), ("parent", parent)):
        put(INODE_FIELDS, f, rec, v)
    return bytes(rec)


def meta_header(**fields):
    """The 96-byte metadata header with FIELDS set (the rest zero)."""
    rec = bytearray(META_HDR_SIZE)
    put(META_FIELDS, "magic", rec, 0x4154454D)
    for name, value in fields.items():
        put(META_FIELDS, name, rec, value)
    return bytes(rec)


class Frames:
    """The image's bytes after the superblock: stored frames, each distinct one once."""

    def __init__(self, data):
        self.data = bytearray(data)
        self.seen = {}

    def add(self, stored):
        """Appends STORED unless it is there already; its (offset, size, checksum)."""
        key = (xxh3(stored), len(stored))
        if key not in self.seen:
            self.seen[key] = (len(self.data), len(stored), key[0])
            self.data += stored
        return self.seen[key]


def write_paged(path, data, pages, **sb):
    """Writes the image: DATA (superblock and stored blocks), then each decoded page of
    PAGES (an iterable of bytes, full pages but the last) as a zstd frame, stored once per
    distinct content, then the page table; the superblock fields SB set and re-sealed.
    Returns (path, image size)."""
    frames = Frames(data)
    table = bytearray()
    meta_size = 0
    cache = {}
    for page in pages:
        key = (xxh3(page), len(page))
        if key not in cache:
            cache[key] = frames.add(zstd(page))
        off, size, sum_ = cache[key]
        table += blockent(off, size, sum_)
        meta_size += len(page)
    out = frames.data
    meta_offset = len(out)
    out += table
    fields = dict(sb, meta_offset=meta_offset, meta_stored_size=len(table),
                  meta_size=meta_size, meta_checksum=xxh3(table), meta_codec=META_CODEC_PAGES,
                  image_size=len(out))
    for name, value in fields.items():
        put(SB_FIELDS, name, out, value)
    reseal(out)
    with open(path, "wb") as f:
        f.write(out)
    return path, len(out)


def paginate(head, table_entry, count, first_entries=b""):
    """Decoded pages of a metadata whose first bytes are HEAD (padded to a whole page)
    followed by a table: FIRST_ENTRIES, then TABLE_ENTRY repeated up to COUNT entries of
    its size in all. Generated page by page: the table may be near 1 GiB."""
    head = bytes(head) + bytes(-len(head) % META_PAGE_SIZE)
    for p in range(0, len(head), META_PAGE_SIZE):
        yield head[p:p + META_PAGE_SIZE]
    esize = len(table_entry)
    total = count * esize
    reps = (2 * META_PAGE_SIZE) // esize + 2
    pattern = table_entry * reps
    start = 0
    while start < total:
        end = min(start + META_PAGE_SIZE, total)
        if start < len(first_entries):
            page = (first_entries + pattern)[start:end]
        else:
            phase = start % esize
            page = pattern[phase:phase + end - start]
        yield page
        start = end


def table_pages(head, entries, esize):
    """Decoded pages of a metadata whose first bytes are HEAD (padded to a whole page)
    followed by the records ENTRIES yields (ESIZE bytes each), a page at a time."""
    head = bytes(head) + bytes(-len(head) % META_PAGE_SIZE)
    for p in range(0, len(head), META_PAGE_SIZE):
        yield head[p:p + META_PAGE_SIZE]
    page = bytearray()
    for e in entries:
        page += e
        if len(page) >= META_PAGE_SIZE:
            yield bytes(page[:META_PAGE_SIZE])
            del page[:META_PAGE_SIZE]
    if page:
        yield bytes(page)


def hot_blocks_image(src, dst, nhot, content=b"hello\n", pad=0, apart=False):
    """An image of one file CONTENT whose hot region claims NHOT blocks of 64 KiB, every
    block past the first naming one shared frame of zeros, and PAD bytes of nothing that
    make the file as large as NHOT blocks would really take. With APART, each block has
    a copy of that frame of its own, one after another, as stipple(5) requires of a
    valid image (so PAD is not needed). SRC: a real image of 64 KiB < block size (its
    superblock is reused). Returns (path, image size)."""
    base = bytearray(read_file(src)[:256])
    frames = Frames(base)
    hot_bs = 64 << 10
    first = frames.add(zstd(content + bytes(hot_bs - len(content))))
    zero_frame = zstd(bytes(hot_bs))
    zero = frames.add(zero_frame)
    if apart:  # the other NHOT - 2 copies, each at its own offset
        frames.data += zero_frame * (nhot - 2)
    frames.data += bytes(pad)
    root = inode(S_IFDIR | 0o755, 1, 0, 1)
    name = b"a"
    # header, 2 inodes, 1 dirent, 1 extent, the name; the block table a page further on
    inode_off = META_HDR_SIZE
    dirent_off = inode_off + 2 * INODE_SIZE
    extent_off = dirent_off + 16     # tables are 8-aligned
    strings_off = extent_off + EXTENT_SIZE
    block_off = META_PAGE_SIZE
    dirent = struct.pack("<IIHBB", 1, 0, len(name), 8, 0)
    extent = struct.pack("<QQQ", 0, 0, len(content))
    head = (meta_header(inode_count=2, dirent_count=1, extent_count=1, xattr_count=0,
                        block_count=nhot, strings_size=len(name), inode_off=inode_off,
                        dirent_off=dirent_off, extent_off=extent_off, xattr_off=strings_off,
                        block_off=block_off, strings_off=strings_off) +
            root + inode(S_IFREG | 0o644, len(content), 0, 1) + dirent + bytes(4) + extent +
            name)
    if apart:
        size = len(zero_frame)
        entries = (blockent(*first) if i == 0 else
                   blockent(zero[0] + (i - 1) * size, size, zero[2]) for i in range(nhot))
        pages = table_pages(head, entries, BLOCKENT_SIZE)
    else:
        pages = paginate(head, blockent(*zero), nhot, first_entries=blockent(*first))
    data = frames.data
    put(SB_FIELDS, "feat_incompat", data, FEAT_META_PAGES | FEAT_HOT_BLOCKS)
    struct.pack_into("<I", data, SB_HOT_BLOCK_LOG, 16)
    return write_paged(dst, data, pages, data_size=nhot * hot_bs, hot_size=nhot * hot_bs,
                       block_count=nhot, inode_count=2, dict_offset=0, dict_size=0,
                       dict_checksum=0, feat_compat=0)


def thrash_image(src, dst, ninodes, kpages):
    """An image of NINODES one-byte files whose extent records are spread over KPAGES
    metadata pages in turn: file i's extent lies on page i mod KPAGES of the extent
    table, so a walk over the files in inode order cycles through KPAGES pages (more
    than the daemon's page cache holds) and decodes a page for every file. Every extent
    page holds the same records and is stored once; the file's byte is the hot region.
    SRC: a real image (its superblock is reused). Returns (path, image size)."""
    per_page = META_PAGE_SIZE // EXTENT_SIZE - 1
    assert ninodes <= kpages * per_page
    frames = Frames(read_file(src)[:256])
    block = frames.add(b"x")
    block_off = META_HDR_SIZE
    inode_off = block_off + BLOCKENT_SIZE
    inodes_end = inode_off + INODE_SIZE * (ninodes + 1)
    extent_off = -(-inodes_end // META_PAGE_SIZE) * META_PAGE_SIZE
    nextents = kpages * META_PAGE_SIZE // EXTENT_SIZE

    def first_extent(i):
        page = i % kpages
        return -(-(page * META_PAGE_SIZE) // EXTENT_SIZE) + i // kpages

    head = bytearray(meta_header(inode_count=ninodes + 1, dirent_count=0,
                                 extent_count=nextents, xattr_count=0, block_count=1,
                                 strings_size=0, inode_off=inode_off, dirent_off=inode_off,
                                 extent_off=extent_off, xattr_off=inode_off,
                                 block_off=block_off, strings_off=inode_off))
    head += blockent(block[0], 1, block[2], codec=0)
    head += inode(S_IFDIR | 0o755, 0, 0, 0)
    for i in range(ninodes):
        head += inode(S_IFREG | 0o644, 1, first_extent(i), 1)
    extent = struct.pack("<QQQ", 0, 0, 1)
    pages = paginate(head, extent, nextents)
    data = frames.data
    put(SB_FIELDS, "feat_incompat", data, FEAT_META_PAGES)
    struct.pack_into("<I", data, SB_HOT_BLOCK_LOG, 0)
    return write_paged(dst, data, pages, data_size=1, hot_size=1, block_count=1,
                       inode_count=ninodes + 1, dict_offset=0, dict_size=0,
                       dict_checksum=0, feat_compat=0)


def repeat_extents_image(src, dst, nhot, nextents, tail=0):
    """An image of one file "a" of NEXTENTS extents, one after another in the file, each
    covering the whole stream of NHOT blocks of 64 KiB (each a frame of zeros of its own),
    then TAIL bytes of hole. Cheap to store, but as many stored bytes as NEXTENTS streams:
    what a reader that goes block by block pays for. SRC as for hot_blocks_image. Returns
    (path, image size)."""
    base = bytearray(read_file(src)[:256])
    frames = Frames(base)
    hot_bs = 64 << 10
    stream = nhot * hot_bs
    zero_frame = zstd(bytes(hot_bs))
    zero = frames.add(zero_frame)
    frames.data += zero_frame * (nhot - 1)
    name = b"a"
    inode_off = META_HDR_SIZE
    dirent_off = inode_off + 2 * INODE_SIZE
    extent_off = dirent_off + 16
    strings_off = extent_off + nextents * EXTENT_SIZE
    block_off = -(-(strings_off + len(name)) // META_PAGE_SIZE) * META_PAGE_SIZE
    dirent = struct.pack("<IIHBB", 1, 0, len(name), 8, 0)
    extents = b"".join(struct.pack("<QQQ", k * stream, 0, stream) for k in range(nextents))
    size = nextents * stream + tail
    head = (meta_header(inode_count=2, dirent_count=1, extent_count=nextents, xattr_count=0,
                        block_count=nhot, strings_size=len(name), inode_off=inode_off,
                        dirent_off=dirent_off, extent_off=extent_off, xattr_off=strings_off,
                        block_off=block_off, strings_off=strings_off) +
            inode(S_IFDIR | 0o755, 1, 0, 1) + inode(S_IFREG | 0o644, size, 0, nextents) +
            dirent + bytes(4) + extents + name)
    entries = (blockent(zero[0] + i * len(zero_frame), len(zero_frame), zero[2])
               for i in range(nhot))
    pages = table_pages(head, entries, BLOCKENT_SIZE)
    data = frames.data
    put(SB_FIELDS, "feat_incompat", data, FEAT_META_PAGES | FEAT_HOT_BLOCKS)
    struct.pack_into("<I", data, SB_HOT_BLOCK_LOG, 16)
    return write_paged(dst, data, pages, data_size=stream, hot_size=stream, block_count=nhot,
                       inode_count=2, dict_offset=0, dict_size=0, dict_checksum=0,
                       feat_compat=0)
