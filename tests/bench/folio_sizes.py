#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The sizes of the page-cache folios that hold each FILE's cached pages (root only).

Maps each file read-only, touches only the pages mincore() says are cached (so that
nothing is read in), and looks up each page's frame in /proc/self/pagemap and its flags
in /proc/kpageflags: a compound head followed by tails on consecutive frames is one folio.
Prints, per file, the cached bytes by folio size, and the runs of pages that sit each on the
frame after its predecessor's (physically contiguous pages, which the CPU's TLB can
cover with fewer entries even when each is its own folio). Shows whether a file
system's page cache (or FUSE's, filled by reads or by notify_store) uses large folios.

--recache large|small drops each FILE's pages first (POSIX_FADV_DONTNEED) and reads it
again: large with 1 MiB reads (the file system's readahead may then make large folios),
small 4 KiB at a time under POSIX_FADV_RANDOM (order-0 folios). Not for files of a
mount: FUSE keeps its pages whatever the advice.

usage: folio_sizes.py [--recache large|small] FILE...
"""
import ctypes
import mmap
import os
import struct
import sys
from collections import Counter

PAGE = os.sysconf("SC_PAGE_SIZE")
HEAD, TAIL = 1 << 15, 1 << 16
libc = ctypes.CDLL(None, use_errno=True)
libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


def cached_pages(addr, size):
    npages = (size + PAGE - 1) // PAGE
    vec = ctypes.create_string_buffer(npages)
    if libc.mincore(ctypes.c_void_p(addr), size, vec) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return [i for i in range(npages) if vec.raw[i] & 1]


def folio_sizes(path):
    size = os.path.getsize(path)
    if size == 0:
        return Counter(), Counter(), 0, 0
    with open(path, "rb") as f:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
    if addr in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), f"mmap {path}")
    pages = cached_pages(addr, size)
    for i in pages:
        ctypes.string_at(addr + i * PAGE, 1)  # map it (a minor fault: the page is cached)
    pfn = {}
    with open("/proc/self/pagemap", "rb") as pm:
        for i in pages:
            pm.seek((addr // PAGE + i) * 8)
            e = struct.unpack("<Q", pm.read(8))[0]
            if e >> 63:
                pfn[i] = e & ((1 << 55) - 1)
    flags = {}
    with open("/proc/kpageflags", "rb") as kf:
        for i, p in pfn.items():
            kf.seek(p * 8)
            flags[i] = struct.unpack("<Q", kf.read(8))[0]
    libc.munmap(ctypes.c_void_p(addr), size)
    out = Counter()  # folio bytes -> cached bytes in folios of that size
    i, n = 0, len(pages)
    while i < n:
        pg = pages[i]
        run = 1
        if flags.get(pg, 0) & HEAD:
            while (i + run < n and pages[i + run] == pg + run and
                   flags.get(pg + run, 0) & TAIL and pfn.get(pg + run) == pfn[pg] + run):
                run += 1
        out[run * PAGE] += run * PAGE
        i += run
    # runs of file pages on consecutive frames, whatever their folios
    runs = Counter()
    i, n = 0, len(pages)
    while i < n:
        run = 1
        while (i + run < n and pages[i + run] == pages[i] + run and
               pfn.get(pages[i + run], -2) == pfn.get(pages[i], -1) + run):
            run += 1
        runs[run] += run * PAGE
        i += run
    down = sum(1 for j in range(n - 1) if pages[j + 1] == pages[j] + 1 and
               pfn.get(pages[j + 1], -2) == pfn.get(pages[j], -1) - 1)
    return out, runs, down, n


def human(n):
    for unit in ("B", "K", "M"):
        if n < 1024 or unit == "M":
            return f"{n:.0f}{unit}" if unit == "B" else f"{n:.1f}{unit}"
        n /= 1024


def recache(path, how):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)  # dirty pages are not dropped
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if how == "small":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        while os.read(fd, 4096 if how == "small" else 1 << 20):
            pass
    finally:
        os.close(fd)


def main():
    args = sys.argv[1:]
    how = None
    if args[:1] == ["--recache"] and len(args) > 1 and args[1] in ("large", "small"):
        how, args = args[1], args[2:]
    if not args:
        sys.exit(__doc__.strip().splitlines()[-1])
    total = Counter()
    for path in args:
        if how:
            recache(path, how)
        c, runs, down, npages = folio_sizes(path)
        total += c
        cached = sum(c.values())
        parts = ", ".join(f"{human(k)}: {human(v)}" for k, v in sorted(c.items()))
        print(f"{path}: {human(cached)} cached; by folio size {parts or '-'}")
        mean = sum(runs.values()) / max(1, sum(v / (k * PAGE) for k, v in runs.items()))
        print(f"  physically contiguous runs: mean {human(mean)}, "
              f"{human(sum(v for k, v in runs.items() if k * PAGE >= 65536))} in runs of 64K+; "
              f"{down} of {npages} pages on the frame below their predecessor's")
    if len(args) > 1:
        parts = ", ".join(f"{human(k)}: {human(v)}" for k, v in sorted(total.items()))
        print(f"all: {human(sum(total.values()))} cached; by folio size {parts}")


if __name__ == "__main__":
    main()
