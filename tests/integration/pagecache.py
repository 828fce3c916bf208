# SPDX-License-Identifier: MIT
"""Which pages of a file the page cache holds, asked without reading any.

The kernel may reclaim a page that nobody has touched at any time, and a page that warming
or the filler pushed is untouched until the application reads it. Proactive reclaim (DAMON's
pageout scheme, which this project's CI machines run) does so within seconds, whatever the
free memory. A test that counts the decodes a read costs after a push must first ask which
pushed pages are still there."""
import ctypes
import mmap
import os

PAGE = 4096

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]


def nonresident_pages(path, spans=None):
    """The indexes of PATH's pages that are not in the page cache (mincore on a mapping
    that is never touched), within SPANS [(start, end)] of bytes if given."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if not size:
            return []
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap %s" % path)
        try:
            n = (size + PAGE - 1) // PAGE
            vec = (ctypes.c_ubyte * n)()
            if _libc.mincore(addr, size, vec):
                raise OSError(ctypes.get_errno(), "mincore %s" % path)
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)
    wanted = range(n) if spans is None else sorted(
        {p for a, b in spans for p in range(a // PAGE, (b + PAGE - 1) // PAGE)})
    return [p for p in wanted if p < n and not vec[p] & 1]
