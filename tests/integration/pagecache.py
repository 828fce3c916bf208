# SPDX-License-Identifier: MIT
"""Which pages of a file the page cache holds, asked without reading any.

The kernel may reclaim a page that nobody has touched at any time, and a page that warming
or the filler pushed is untouched until the application reads it. Proactive reclaim (DAMON's
pageout scheme, which this project's CI machines run) does so within seconds, whatever the
free memory, and takes pages that were read as well. A test that counts the decodes or the
FUSE reads a read costs after a push must first ask which pushed pages are still there.

Reclaim is told from the product's own faults by the trace it leaves: a reclaimed page
leaves a shadow entry in the file's page cache, which cachestat(2) (Linux 6.5) counts as
evicted. A page that was never stored, or that an invalidation dropped (an open without
keep_cache, FADV_DONTNEED), leaves none. gone_pages() splits the missing pages so, and a
test allows only the reclaimed ones.

Two more ways pages go without a trace, neither the product's: the kernel drops an inode
nobody holds, with its pages (memory pressure, or drop_caches=2, which test_fill and
test_warm_forget write), and drop_caches=1 or 3 drops every clean page (benchmarks on a
shared machine write it). A test holds the inodes whose pages it counts (held()), and
unless_dropped() turns a failure into a skip when someone told the kernel to drop its
caches during the test (/proc/vmstat counts each time)."""
import contextlib
import ctypes
import mmap
import os

import pytest

PAGE = 4096
_SYS_CACHESTAT = 451  # the same number on every architecture

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.syscall.restype = ctypes.c_long


class _Range(ctypes.Structure):
    _fields_ = [("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Cachestat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in
                ("nr_cache", "nr_dirty", "nr_writeback", "nr_evicted", "nr_recently_evicted")]


def _map(fd, path, size):
    addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap %s" % path)
    return addr


def _missing(fd, path, spans):
    """The indexes of FD's pages not in the page cache, within SPANS if given."""
    size = os.fstat(fd).st_size
    if not size:
        return []
    addr = _map(fd, path, size)
    try:
        n = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * n)()
        if _libc.mincore(addr, size, vec):
            raise OSError(ctypes.get_errno(), "mincore %s" % path)
    finally:
        _libc.munmap(addr, size)
    wanted = range(n) if spans is None else sorted(
        {p for a, b in spans for p in range(a // PAGE, (b + PAGE - 1) // PAGE)})
    return [p for p in wanted if p < n and not vec[p] & 1]


def _evicted(fd, path, page):
    """Whether the kernel evicted page PAGE of FD (cachestat counts its shadow entry)."""
    rng, st = _Range(page * PAGE, PAGE), _Cachestat()
    if _libc.syscall(_SYS_CACHESTAT, fd, ctypes.byref(rng), ctypes.byref(st), 0):
        raise OSError(ctypes.get_errno(), "cachestat %s (Linux 6.5 or later)" % path)
    return st.nr_evicted > 0


def nonresident_pages(path, spans=None):
    """The indexes of PATH's pages that are not in the page cache (mincore on a mapping
    that is never touched), within SPANS [(start, end)] of bytes if given."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _missing(fd, path, spans)
    finally:
        os.close(fd)


def gone_pages(path, spans=None):
    """(reclaimed, lost): the indexes of PATH's pages (within SPANS if given) that are not
    in the page cache, split into those the kernel reclaimed, and those it holds no trace
    of (never stored, or dropped by an invalidation). Call it just before the reads it
    explains: a read brings a page back and consumes its trace."""
    fd = os.open(path, os.O_RDONLY)
    try:
        missing = _missing(fd, path, spans)
        reclaimed = [p for p in missing if _evicted(fd, path, p)]
    finally:
        os.close(fd)
    return reclaimed, [p for p in missing if p not in set(reclaimed)]


def read_pushed(path, spans=None):
    """Reads pushed pages of PATH: whole (readahead as usual), or SPANS [(start, end)] of
    bytes with readahead off, asking gone_pages() first (of each span just before it is
    read, so that the kernel has next to no time to reclaim in between). Asserts that no
    page is lost. Returns (the bytes: one string, or a list of one per span; how many
    pages the kernel reclaimed, each of which may cost the read a FUSE read and a decode)."""
    if spans is None:
        reclaimed, lost = gone_pages(path)
        assert not lost, "%s: pages neither in the page cache nor reclaimed: %s" % (path, lost)
        with open(path, "rb") as f:
            return f.read(), len(reclaimed)
    out, count = [], 0
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for a, b in spans:
            reclaimed, lost = gone_pages(path, [(a, b)])
            assert not lost, "%s [%d, %d): pages neither in the page cache nor reclaimed: %s" % (
                path, a, b, lost)
            out.append(os.pread(fd, b - a, a))
            count += len(reclaimed)
    finally:
        os.close(fd)
    return out, count


@contextlib.contextmanager
def pinned(path, length):
    """Keeps PATH's first LENGTH bytes in the page cache while the context lasts (mlock on
    a mapping, which reads any page missing now): for a test that needs a later reader to
    find them there however long it waits. Needs CAP_IPC_LOCK or RLIMIT_MEMLOCK."""
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = _map(fd, path, length)
        try:
            if _libc.mlock(addr, length):
                raise OSError(ctypes.get_errno(), "mlock %s" % path)
            yield
        finally:
            _libc.munmap(addr, length)
    finally:
        os.close(fd)


def drops():
    """How many times the kernel was told to drop its caches: (drop_pagecache,
    drop_slab) of /proc/vmstat, for unless_dropped()."""
    with open("/proc/vmstat") as f:
        counts = dict(line.split() for line in f)
    return int(counts["drop_pagecache"]), int(counts["drop_slab"])


@contextlib.contextmanager
def unless_dropped(mark):
    """Re-raises a failure of the context, unless the kernel was told to drop its caches
    since MARK (drops(), taken before the pages were pushed): that drops pushed pages or
    their inodes without a trace, and the test is skipped."""
    try:
        yield
    except AssertionError as e:
        if drops() == mark:
            raise
        pytest.skip("the kernel's caches were dropped during the test (/proc/vmstat "
                    "drop_pagecache, drop_slab: %s, then %s): %s" % (mark, drops(), e))


@contextlib.contextmanager
def held(paths):
    """Holds the inodes of PATHS (O_PATH descriptors, which make no FUSE request and read
    nothing), so that the kernel cannot drop them, and their pages with them."""
    fds = []
    try:
        for path in paths:
            fds.append(os.open(path, os.O_PATH))
        yield
    finally:
        for fd in fds:
            os.close(fd)
