# SPDX-License-Identifier: MIT
"""Reading (and, for crafted images, rewriting) an image's metadata from Python, field by
field as common/format.c lays it out and stipple(5) documents it."""
import ctypes
import struct


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class CraftedImage:
    """An image's decoded metadata, editable, written back raw with fresh checksums."""

    _xxh = ctypes.CDLL("libxxhash.so.0")
    _xxh.XXH3_64bits.restype = ctypes.c_uint64
    _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    _zstd = ctypes.CDLL("libzstd.so.1")
    _zstd.ZSTD_decompress.restype = ctypes.c_size_t
    _zstd.ZSTD_decompress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                      ctypes.c_size_t]

    def __init__(self, image):
        self.data = bytearray(read_file(image))
        meta_off, stored, size = struct.unpack_from("<QQQ", self.data, 72)
        codec, = struct.unpack_from("<I", self.data, 104)
        raw = bytes(self.data[meta_off:meta_off + stored])
        if codec == 1:
            out = ctypes.create_string_buffer(size)
            n = self._zstd.ZSTD_decompress(out, size, raw, len(raw))
            assert n == size, "metadata did not decode"
            raw = out.raw
        self.meta = bytearray(raw)
        self.image_size, = struct.unpack_from("<Q", self.data, 136)
        self.inode_off, self.dirent_off = struct.unpack_from("<QQ", self.meta, 32)
        self.strings_off, = struct.unpack_from("<Q", self.meta, 72)

    def extents(self, ino):
        """The extents (file_off, stream_off, length) of regular file INO."""
        _, first, count = self.inode(ino)
        ext_off, = struct.unpack_from("<Q", self.meta, 48)
        return [struct.unpack_from("<QQQ", self.meta, ext_off + 24 * k)
                for k in range(first, first + count)]

    def block_filters(self):
        """The filter of each block, in block order."""
        count, = struct.unpack_from("<I", self.meta, 20)
        block_off, = struct.unpack_from("<Q", self.meta, 64)
        return [self.meta[block_off + 24 * k + 13] for k in range(count)]

    def inode(self, ino):
        mode, = struct.unpack_from("<I", self.meta, self.inode_off + 64 * ino)
        first, count = struct.unpack_from("<QI", self.meta, self.inode_off + 64 * ino + 40)
        return mode, first, count

    def _dirents(self, dir_ino):
        _, first, count = self.inode(dir_ino)
        for k in range(first, first + count):
            off = self.dirent_off + 12 * k
            ino, name_off, name_len = struct.unpack_from("<IIH", self.meta, off)
            start = self.strings_off + name_off
            yield off, ino, start, bytes(self.meta[start:start + name_len])

    def lookup(self, path):
        ino = 0
        for part in filter(None, path.split("/")):
            ino = next(i for _, i, _, n in self._dirents(ino) if n == part.encode())
        return ino

    def set_target(self, dirpath, name, ino):
        """Points entry NAME of DIRPATH at inode INO."""
        off = next(o for o, _, _, n in self._dirents(self.lookup(dirpath)) if n == name.encode())
        struct.pack_into("<I", self.meta, off, ino)

    def rename(self, dirpath, name, new):
        """Overwrites the bytes of entry NAME with NEW, of the same length."""
        assert len(new) == len(name)
        start = next(s for _, _, s, n in self._dirents(self.lookup(dirpath))
                     if n == name.encode())
        self.meta[start:start + len(new)] = new.encode()

    def write(self, path):
        data = self.data[:self.image_size] + self.meta
        struct.pack_into("<QQQQ", data, 72, self.image_size, len(self.meta), len(self.meta),
                         self._xxh.XXH3_64bits(bytes(self.meta), len(self.meta)))
        struct.pack_into("<I", data, 104, 0)  # raw metadata
        struct.pack_into("<Q", data, 136, len(data))
        struct.pack_into("<Q", data, 248, self._xxh.XXH3_64bits(bytes(data[:248]), 248))
        with open(path, "wb") as f:
            f.write(data)
        return path


# --- the superblock, field by field (stipple(5), SUPERBLOCK) ---

SB_FIELDS = {
    "version": (8, "<I"), "sb_size": (12, "<I"), "feat_compat": (16, "<Q"),
    "feat_ro_compat": (24, "<Q"), "feat_incompat": (32, "<Q"), "block_log": (40, "<I"),
    "data_size": (48, "<Q"), "block_count": (56, "<Q"), "hot_size": (64, "<Q"),
    "meta_offset": (72, "<Q"), "meta_stored_size": (80, "<Q"), "meta_size": (88, "<Q"),
    "meta_checksum": (96, "<Q"), "meta_codec": (104, "<I"), "dict_offset": (112, "<Q"),
    "dict_size": (120, "<Q"), "dict_checksum": (128, "<Q"), "image_size": (136, "<Q"),
    "inode_count": (144, "<I"),
}


def xxh3(data):
    return CraftedImage._xxh.XXH3_64bits(bytes(data), len(data))


def superblock(data):
    """The superblock fields of image bytes DATA, as a dict."""
    return {k: struct.unpack_from(f, data, off)[0] for k, (off, f) in SB_FIELDS.items()}


def reseal(data):
    """Recomputes the superblock checksum (bytes 248..255, XXH3-64 of bytes 0..247)."""
    struct.pack_into("<Q", data, 248, xxh3(data[:248]))
    return data


def patch_superblock(src, dst, raw=None, pad=0, **fields):
    """Copies image SRC to DST with the named superblock fields set, RAW ({offset:
    bytes}) written over the superblock, PAD zero bytes appended, and the superblock
    re-sealed. Returns DST."""
    data = bytearray(read_file(src)) + bytes(pad)
    for name, value in fields.items():
        off, f = SB_FIELDS[name]
        struct.pack_into(f, data, off, value)
    for off, b in (raw or {}).items():
        data[off:off + len(b)] = b
    reseal(data)
    with open(dst, "wb") as f:
        f.write(data)
    return dst


class HostileImage(CraftedImage):
    """A CraftedImage with the edits the hostile-input tests make: inode sizes, link
    targets, extended attribute records and block table entries."""

    def inode_field(self, ino, off, fmt, value):
        """Sets the field at OFF (struct FMT) of inode INO's 64-byte record."""
        struct.pack_into(fmt, self.meta, self.inode_off + 64 * ino + off, value)

    def rename_bytes(self, dirpath, name, new):
        """Overwrites the bytes of entry NAME (bytes) of DIRPATH with NEW, of the same
        length; DIRPATH's components are looked up as UTF-8."""
        assert len(new) == len(name)
        start = next(s for _, _, s, n in self._dirents(self.lookup(dirpath)) if n == name)
        self.meta[start:start + len(new)] = new

    def set_size(self, path, size):
        self.inode_field(self.lookup(path), 32, "<Q", size)

    def set_link_target(self, path, new):
        """Overwrites the target bytes of symlink PATH with NEW, of the same length."""
        ino = self.lookup(path)
        size, data = struct.unpack_from("<QQ", self.meta, self.inode_off + 64 * ino + 32)
        assert len(new) == size
        start = self.strings_off + data
        self.meta[start:start + size] = new

    def xattr_records(self, path):
        """Offsets in the metadata of the extended attribute records of PATH."""
        ino = self.lookup(path)
        count, = struct.unpack_from("<I", self.meta, self.inode_off + 64 * ino + 28)
        first, = struct.unpack_from("<I", self.meta, self.inode_off + 64 * ino + 52)
        xattr_off, = struct.unpack_from("<Q", self.meta, 56)
        return [xattr_off + 16 * k for k in range(first, first + count)]

    def xattr(self, rec):
        """(name_off, value_off, value_len, name_len) of the record at REC."""
        return struct.unpack_from("<IIIH", self.meta, rec)

    def set_xattr(self, rec, name_off, value_off, value_len, name_len):
        struct.pack_into("<IIIH", self.meta, rec, name_off, value_off, value_len, name_len)

    def block_codecs(self):
        """The codec of each block, in block order."""
        count, = struct.unpack_from("<I", self.meta, 20)
        block_off, = struct.unpack_from("<Q", self.meta, 64)
        return [self.meta[block_off + 24 * k + 12] for k in range(count)]

    def strings_size(self):
        return struct.unpack_from("<Q", self.meta, 24)[0]

    def set_block(self, block, offset=None, stored_size=None):
        """Changes the offset or stored size of block BLOCK's table entry."""
        block_off, = struct.unpack_from("<Q", self.meta, 64)
        rec = block_off + 24 * block
        if offset is not None:
            struct.pack_into("<Q", self.meta, rec, offset)
        if stored_size is not None:
            struct.pack_into("<I", self.meta, rec + 8, stored_size)


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
