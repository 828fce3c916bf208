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
