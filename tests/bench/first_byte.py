#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""First-byte latency of a cold read through a fresh mount.

For each IMAGE, picks the middle one of the blocks without a filter (with --bcj: with a
BCJ filter) and three files that hold its first, middle and last 4 KiB; then, RUNS times and for each build given, mounts
the image afresh (no warming, no priming), opens the file, and times one 4 KiB pread at
that spot: the read has to decode the block. Builds are interleaved run by run, so that
a busy machine weighs on them alike. The image file itself is left in the page cache:
what is timed is the decode, not the disk. The file is read with POSIX_FADV_RANDOM, so
that the kernel asks for the 4 KiB alone (its readahead would otherwise reach into the
next block from the end of this one). Each spot is a page-aligned 4 KiB of one file that lies
whole inside the block, as near the block's start, middle or end as the files allow.

With --key PUBKEY the image is mounted verified (--verify PUBKEY): each block's signed hash
is checked before any of its bytes is served.

usage: first_byte.py [--runs N] [--mnt DIR] [--bcj] [--key PUBKEY] BUILD[,BUILD...] IMAGE...
  BUILD: a meson build directory (its mounthelper/stipple is used), or NAME=DIR.
Prints one line per image, build and spot: the median and the spread in ms.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from imageutil import CraftedImage, superblock  # noqa: E402

READ = 4096


def file_paths(img):
    """Maps each regular file's inode to its path, walking from the root."""
    paths, todo = {}, [(0, "")]
    while todo:
        ino, prefix = todo.pop()
        for _off, child, _start, name in img._dirents(ino):
            path = prefix + "/" + name.decode("utf-8", "surrogateescape")
            mode = img.inode_get(child, "mode")
            if mode & 0o170000 == 0o040000:
                todo.append((child, path))
            elif mode & 0o170000 == 0o100000:
                paths.setdefault(child, path)
    return paths


def spots(image, bcj):
    """(block size, block, [(name, path, file offset)]) for the first, middle and last 4 KiB
    of the middle block among those with (BCJ) or without a filter."""
    img = CraftedImage(image)
    sb = superblock(img.data)
    bs = 1 << sb["block_log"]
    blocks = [k for k, f in enumerate(img.block_filters()) if bool(f) == bcj]
    if not blocks:
        return bs, None, []
    block = blocks[len(blocks) // 2]
    base = block * bs
    size = min(bs, sb["data_size"] - base)
    want = {"start": base, "middle": base + size // 2, "end": base + size - READ}
    extents = [(path, e) for ino, path in file_paths(img).items() for e in img.extents(ino)]
    out = []
    for name, at in want.items():
        hit = page_near(extents, at, base, base + size)
        if hit:
            out.append((name,) + hit)
    return bs, block, out


def page_near(extents, at, lo, hi):
    """(path, file offset) of a page-aligned 4 KiB of some file that lies whole in stream
    [LO, HI) and in one extent, as near stream offset AT as can be found."""
    for step in range(64):
        for t in (at - step * READ, at + step * READ):
            for path, (file_off, stream_off, length) in extents:
                if not stream_off <= t < stream_off + length:
                    continue
                page = (file_off + (t - stream_off)) // READ * READ
                s = stream_off + (page - file_off)
                if stream_off <= s and s + READ <= stream_off + length and lo <= s and \
                        s + READ <= hi:
                    return path, page
    return None


def mount(stipple, image, mnt, key=None):
    verify = ["--verify", key] if key else []
    subprocess.run([stipple, "mount", "--warm-workers", "0", "--no-prime", *verify, image, mnt],
                   check=True, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.ismount(mnt):
        if time.monotonic() > deadline:
            raise RuntimeError("%s did not mount" % mnt)
        time.sleep(0.01)


def unmount(mnt):
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    deadline = time.monotonic() + 10
    while os.path.ismount(mnt) and time.monotonic() < deadline:
        time.sleep(0.01)


def one_read(stipple, image, mnt, path, off, key=None):
    mount(stipple, image, mnt, key)
    try:
        fd = os.open(mnt + path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # the kernel asks for 4 KiB only
            t0 = time.perf_counter_ns()
            data = os.pread(fd, READ, off)
            ns = time.perf_counter_ns() - t0
        finally:
            os.close(fd)
        assert len(data) == READ
        return ns
    finally:
        unmount(mnt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--mnt")
    ap.add_argument("--bcj", action="store_true", help="time a BCJ-filtered block instead")
    ap.add_argument("--key", help="mount verified with this public key")
    ap.add_argument("builds")
    ap.add_argument("images", nargs="+")
    a = ap.parse_args()
    builds = []
    for b in a.builds.split(","):
        name, _, d = b.rpartition("=")
        builds.append((name or d, os.path.join(d, "mounthelper", "stipple")))
    mnt = a.mnt or tempfile.mkdtemp(prefix="first-byte-")
    for image in a.images:
        bs, block, where = spots(image, a.bcj)
        times = {(b, s): [] for b, _ in builds for s, _, _ in where}
        for _ in range(a.runs):
            for name, stipple in builds:
                for spot, path, off in where:
                    times[(name, spot)].append(one_read(stipple, image, mnt, path, off, a.key))
        for name, _ in builds:
            for spot, path, off in where:
                t = sorted(x / 1e6 for x in times[(name, spot)])
                print("%s\t%d MiB\tblock %d%s%s\t%s\t%-6s\tmedian %.2f ms\t(min %.2f, max %.2f, "
                      "%d runs)\t%s" % (os.path.basename(image), bs >> 20, block,
                                       " (bcj)" if a.bcj else "",
                                       " (verified)" if a.key else "", name, spot,
                                       statistics.median(t), t[0], t[-1], len(t), path),
                      flush=True)
    if not a.mnt:
        os.rmdir(mnt)


if __name__ == "__main__":
    main()
