# SPDX-License-Identifier: MIT
"""Building test images (the one place the tests run mkstipple for an image: build and
mkstipple), and reading (and, for crafted images, rewriting) an image's metadata from
Python, field by field as common/format.c lays it out and stipple(5) documents it."""
import ctypes
import os
import struct
import subprocess

from treeutil import read_file


# The options of a quick test image: a low level, and blocks small enough that a small
# tree makes many of them.
FAST = ("--level", "3", "--block-size", "64K")


def mkstipple(tree, image, *args, quiet=True, timeout=900, **kw):
    """Runs mkstipple [--quiet] ARGS TREE IMAGE (never reading stdin unless KW gives one,
    KW going to subprocess.run) and returns the finished run, its output decoded without
    newline translation."""
    from conftest import MKSTIPPLE, _need  # conftest imports this module
    cmd = [_need(MKSTIPPLE), *(["--quiet"] if quiet else []), *args, tree, image]
    kw.setdefault("stdin", subprocess.DEVNULL)
    r = subprocess.run([os.fspath(c) for c in cmd], capture_output=True, timeout=timeout, **kw)
    r.stdout = r.stdout.decode(errors="replace")
    r.stderr = r.stderr.decode(errors="replace")
    return r


def build(tree, image, *args, **kw):
    """mkstipple(TREE, IMAGE, *ARGS, **KW), asserting that it succeeded and wrote IMAGE;
    returns IMAGE."""
    r = mkstipple(tree, image, *args, **kw)
    assert r.returncode == 0, "mkstipple %s exited %d:\n%s" % (
        " ".join(map(os.fspath, args)), r.returncode, r.stderr[-4000:])
    assert os.path.isfile(image), "mkstipple succeeded but wrote no %s" % image
    return image


# --- the on-disk records, each field named once: (offset, struct format) in its record,
# as stipple(5) tables them (common/format.c encodes them); little-endian throughout ---

SB_SIZE = 256
SB_FIELDS = {
    "version": (8, "<I"), "sb_size": (12, "<I"), "feat_compat": (16, "<Q"),
    "feat_ro_compat": (24, "<Q"), "feat_incompat": (32, "<Q"), "block_log": (40, "<I"),
    "data_size": (48, "<Q"), "block_count": (56, "<Q"), "hot_size": (64, "<Q"),
    "meta_offset": (72, "<Q"), "meta_stored_size": (80, "<Q"), "meta_size": (88, "<Q"),
    "meta_checksum": (96, "<Q"), "meta_codec": (104, "<I"), "dict_offset": (112, "<Q"),
    "dict_size": (120, "<Q"), "dict_checksum": (128, "<Q"), "image_size": (136, "<Q"),
    "inode_count": (144, "<I"),
    "checksum": (248, "<Q"),  # XXH3-64 of the 248 bytes before it
}
META_FIELDS = {
    "magic": (0, "<I"), "inode_count": (4, "<I"), "dirent_count": (8, "<I"),
    "extent_count": (12, "<I"), "xattr_count": (16, "<I"), "block_count": (20, "<I"),
    "strings_size": (24, "<Q"), "inode_off": (32, "<Q"), "dirent_off": (40, "<Q"),
    "extent_off": (48, "<Q"), "xattr_off": (56, "<Q"), "block_off": (64, "<Q"),
    "strings_off": (72, "<Q"), "lookup_count": (80, "<I"), "lookup_off": (88, "<Q"),
}
INODE_SIZE = 64
INODE_FIELDS = {
    "mode": (0, "<I"), "uid": (4, "<I"), "gid": (8, "<I"), "nlink": (12, "<I"),
    "mtime_sec": (16, "<q"), "mtime_nsec": (24, "<I"), "xattr_count": (28, "<I"),
    "size": (32, "<Q"), "data": (40, "<Q"), "count": (48, "<I"), "xattr_first": (52, "<I"),
    "parent": (56, "<I"),
}
DIRENT_SIZE = 12
DIRENT_FIELDS = {"ino": (0, "<I"), "name_off": (4, "<I"), "name_len": (8, "<H"),
                 "dtype": (10, "<B")}
EXTENT_SIZE = 24
EXTENT_FIELDS = {"file_off": (0, "<Q"), "stream_off": (8, "<Q"), "length": (16, "<Q")}
XATTR_SIZE = 16
XATTR_FIELDS = {"name_off": (0, "<I"), "value_off": (4, "<I"), "value_len": (8, "<I"),
                "name_len": (12, "<H")}
BLOCKENT_SIZE = 24
BLOCKENT_FIELDS = {"offset": (0, "<Q"), "stored_size": (8, "<I"), "codec": (12, "<B"),
                   "filter": (13, "<B"), "checksum": (16, "<Q")}
LOOKUP_SIZE = 12
LOOKUP_FIELDS = {"dir": (0, "<I"), "name_off": (4, "<I"), "name_len": (8, "<H")}
XATTR_ORDER = ("name_off", "value_off", "value_len", "name_len")
CODEC_RAW, CODEC_ZSTD = 0, 1
META_CODEC_PAGES = 2       # meta_codec of paged metadata: the stored bytes are the page table
FEAT_META_PAGES = 1 << 3   # its incompatible feature bit
FEAT_LOOKUPS = 1 << 6      # incompatible: the metadata has a lookup table
FEAT_CONTENT_HASHES = 1 << 7  # incompatible: the signature block hashes each block's content
META_PAGE_SIZE = 64 << 10  # decoded bytes of a metadata page


# --- mkstipple's layout choices the tests predict an image from: each stated once here,
# after the C definition named beside it (change both together) ---

HOT_PAGE = 4096            # common/format.h STP_HOT_PAGE: hot files start on a stream page
HOLE_MIN = 64 << 10        # builder/pack.c HOLE_MIN: zero runs this long are holes
RANGE_MARGIN = 32 << 10    # common/hotlist.h STP_HOT_MARGIN_DEFAULT: hot ranges widened by this


def buffer_bytes(block_log):
    """What one block buffer of a reader maps (common/cache.c stp_cache_buffer_bytes): the
    block and zstd's in-place margin (zstd.h ZSTD_DECOMPRESSION_MARGIN, with 128 KiB zstd
    blocks and an 18-byte frame header at most), in whole 4 KiB pages."""
    bs, zblock = 1 << block_log, 128 << 10
    margin = 18 + 4 + 3 * (-(-bs // zblock)) + zblock
    return -(-(bs + margin) // 4096) * 4096


def get(fields, name, buf, base=0):
    """Field NAME of the record at BASE of BUF."""
    off, f = fields[name]
    return struct.unpack_from(f, buf, base + off)[0]


def put(fields, name, buf, value, base=0):
    """Sets field NAME of the record at BASE of BUF."""
    off, f = fields[name]
    struct.pack_into(f, buf, base + off, value)


class CraftedImage:
    """An image's decoded metadata, editable, written back raw with fresh checksums: as
    raw pages when the image's metadata is paged, else as one raw run."""

    _xxh = ctypes.CDLL("libxxhash.so.0")
    _xxh.XXH3_64bits.restype = ctypes.c_uint64
    _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    _zstd = ctypes.CDLL("libzstd.so.1")
    _zstd.ZSTD_decompress.restype = ctypes.c_size_t
    _zstd.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                      ctypes.c_size_t]

    def __init__(self, image):
        self.data = bytearray(read_file(image))
        sb = superblock(self.data)
        meta_off, stored, size = sb["meta_offset"], sb["meta_stored_size"], sb["meta_size"]
        raw = bytes(self.data[meta_off:meta_off + stored])
        self.paged = sb["meta_codec"] == META_CODEC_PAGES
        if self.paged:
            raw = b"".join(self._page(raw, p) for p in range(stored // BLOCKENT_SIZE))
        elif sb["meta_codec"] == CODEC_ZSTD:
            raw = self._inflate(raw, size)
        assert len(raw) == size, "metadata did not decode"
        self.meta = bytearray(raw)
        self.image_size = sb["image_size"]
        self.inode_off = self.header("inode_off")
        self.dirent_off = self.header("dirent_off")
        self.strings_off = self.header("strings_off")

    def _inflate(self, raw, size):
        """RAW, one zstd frame, decoded: at most SIZE bytes."""
        out = ctypes.create_string_buffer(size)
        n = self._zstd.ZSTD_decompress(out, size, raw, len(raw))
        assert n <= size, "metadata did not decode"
        return out.raw[:n]

    def _page(self, table, p):
        """Decoded metadata page P, found through the page TABLE."""
        base = BLOCKENT_SIZE * p
        off, size, codec = (get(BLOCKENT_FIELDS, f, table, base)
                            for f in ("offset", "stored_size", "codec"))
        stored = bytes(self.data[off:off + size])
        return stored if codec == CODEC_RAW else self._inflate(stored, META_PAGE_SIZE)

    def header(self, name):
        """Field NAME of the metadata header."""
        return get(META_FIELDS, name, self.meta)

    def inode_at(self, ino):
        """Where inode INO's record starts in the metadata."""
        return self.inode_off + INODE_SIZE * ino

    def inode_get(self, ino, name):
        return get(INODE_FIELDS, name, self.meta, self.inode_at(ino))

    def inode_put(self, ino, name, value):
        put(INODE_FIELDS, name, self.meta, value, self.inode_at(ino))

    def extents(self, ino):
        """The extents (file_off, stream_off, length) of regular file INO."""
        _, first, count = self.inode(ino)
        base = self.header("extent_off")
        return [tuple(get(EXTENT_FIELDS, f, self.meta, base + EXTENT_SIZE * k)
                      for f in ("file_off", "stream_off", "length"))
                for k in range(first, first + count)]

    def block_filters(self):
        """The filter of each block, in block order."""
        return self._block_field("filter")

    def _block_field(self, name):
        base = self.header("block_off")
        return [get(BLOCKENT_FIELDS, name, self.meta, base + BLOCKENT_SIZE * k)
                for k in range(self.header("block_count"))]

    def inode(self, ino):
        """(mode, data, count) of inode INO."""
        return tuple(self.inode_get(ino, f) for f in ("mode", "data", "count"))

    def _dirents(self, dir_ino):
        _, first, count = self.inode(dir_ino)
        for k in range(first, first + count):
            off = self.dirent_off + DIRENT_SIZE * k
            ino = get(DIRENT_FIELDS, "ino", self.meta, off)
            name_len = get(DIRENT_FIELDS, "name_len", self.meta, off)
            start = self.strings_off + get(DIRENT_FIELDS, "name_off", self.meta, off)
            yield off, ino, start, bytes(self.meta[start:start + name_len])

    def lookup(self, path):
        ino = 0
        for part in filter(None, path.split("/")):
            ino = next(i for _, i, _, n in self._dirents(ino) if n == part.encode())
        return ino

    def set_target(self, dirpath, name, ino):
        """Points entry NAME of DIRPATH at inode INO."""
        off = next(o for o, _, _, n in self._dirents(self.lookup(dirpath)) if n == name.encode())
        put(DIRENT_FIELDS, "ino", self.meta, ino, off)

    def rename(self, dirpath, name, new):
        """Overwrites the bytes of entry NAME with NEW, of the same length."""
        assert len(new) == len(name)
        start = next(s for _, _, s, n in self._dirents(self.lookup(dirpath))
                     if n == name.encode())
        self.meta[start:start + len(new)] = new.encode()

    def _raw_pages(self, start):
        """The metadata as raw pages from offset START, and their page table."""
        table = bytearray()
        for p in range(0, len(self.meta), META_PAGE_SIZE):
            page = self.meta[p:p + META_PAGE_SIZE]
            entry = bytearray(BLOCKENT_SIZE)
            for f, v in (("offset", start + p), ("stored_size", len(page)),
                         ("codec", CODEC_RAW), ("checksum", xxh3(page))):
                put(BLOCKENT_FIELDS, f, entry, v)
            table += entry
        return bytes(self.meta), bytes(table)

    def write(self, path):
        data = self.data[:self.image_size]
        if self.paged:
            pages, stored = self._raw_pages(len(data))
            data += pages
        else:
            stored = bytes(self.meta)
        meta_offset = len(data)
        data += stored
        for name, value in (("meta_offset", meta_offset), ("meta_stored_size", len(stored)),
                            ("meta_size", len(self.meta)), ("meta_checksum", xxh3(stored)),
                            ("meta_codec", META_CODEC_PAGES if self.paged else CODEC_RAW),
                            ("image_size", len(data))):
            put(SB_FIELDS, name, data, value)
        reseal(data)
        with open(path, "wb") as f:
            f.write(data)
        return path


def xxh3(data):
    return CraftedImage._xxh.XXH3_64bits(bytes(data), len(data))


def superblock(data):
    """The superblock fields of image bytes DATA, as a dict."""
    return {k: get(SB_FIELDS, k, data) for k in SB_FIELDS if k != "checksum"}


def reseal(data):
    """Recomputes the superblock checksum (XXH3-64 of the bytes before it)."""
    off = SB_FIELDS["checksum"][0]
    put(SB_FIELDS, "checksum", data, xxh3(data[:off]))
    return data


def patch_superblock(src, dst, raw=None, pad=0, **fields):
    """Copies image SRC to DST with the named superblock fields set, RAW ({offset:
    bytes}) written over the superblock, PAD zero bytes appended, and the superblock
    re-sealed. Returns DST."""
    data = bytearray(read_file(src)) + bytes(pad)
    for name, value in fields.items():
        put(SB_FIELDS, name, data, value)
    for off, b in (raw or {}).items():
        data[off:off + len(b)] = b
    reseal(data)
    with open(dst, "wb") as f:
        f.write(data)
    return dst


class HostileImage(CraftedImage):
    """A CraftedImage with the edits the hostile-input tests make: inode sizes, link
    targets, extended attribute records and block table entries."""


    def rename_bytes(self, dirpath, name, new):
        """Overwrites the bytes of entry NAME (bytes) of DIRPATH with NEW, of the same
        length; DIRPATH's components are looked up as UTF-8."""
        assert len(new) == len(name)
        start = next(s for _, _, s, n in self._dirents(self.lookup(dirpath)) if n == name)
        self.meta[start:start + len(new)] = new

    def set_size(self, path, size):
        self.inode_put(self.lookup(path), "size", size)

    def set_link_target(self, path, new):
        """Overwrites the target bytes of symlink PATH with NEW, of the same length."""
        ino = self.lookup(path)
        size, data = self.inode_get(ino, "size"), self.inode_get(ino, "data")
        assert len(new) == size
        start = self.strings_off + data
        self.meta[start:start + size] = new

    def xattr_records(self, path):
        """Offsets in the metadata of the extended attribute records of PATH."""
        ino = self.lookup(path)
        count, first = self.inode_get(ino, "xattr_count"), self.inode_get(ino, "xattr_first")
        base = self.header("xattr_off")
        return [base + XATTR_SIZE * k for k in range(first, first + count)]

    def xattr(self, rec):
        """(name_off, value_off, value_len, name_len) of the record at REC."""
        return tuple(get(XATTR_FIELDS, f, self.meta, rec) for f in XATTR_ORDER)

    def set_xattr(self, rec, name_off, value_off, value_len, name_len):
        for f, v in zip(XATTR_ORDER, (name_off, value_off, value_len, name_len)):
            put(XATTR_FIELDS, f, self.meta, v, rec)

    def block_codecs(self):
        """The codec of each block, in block order."""
        return self._block_field("codec")

    def strings_size(self):
        return self.header("strings_size")

    def set_block(self, block, offset=None, stored_size=None):
        """Changes the offset or stored size of block BLOCK's table entry."""
        rec = self.header("block_off") + BLOCKENT_SIZE * block
        if offset is not None:
            put(BLOCKENT_FIELDS, "offset", self.meta, offset, rec)
        if stored_size is not None:
            put(BLOCKENT_FIELDS, "stored_size", self.meta, stored_size, rec)


def escape_name(name):
    """NAME (bytes) as stipple(1) prints names: each byte of a C0 or C1 control, of DEL,
    of a backslash or of a sequence that is not UTF-8 as a backslash and three octal
    digits. Written apart from the C code, on Python's own UTF-8 decoder."""
    out = []
    for ch in name.decode("utf-8", "surrogateescape"):
        c = ord(ch)
        if 0xdc80 <= c <= 0xdcff:  # a byte the decoder could not take
            out.append("\\%03o" % (c - 0xdc00))
        elif c < 0x20 or 0x7f <= c <= 0x9f or ch == "\\":
            out.extend("\\%03o" % b for b in ch.encode())
        else:
            out.append(ch)
    return "".join(out).encode("utf-8", "surrogateescape")
