# SPDX-License-Identifier: MIT
"""Sparse files on a mount (issue 29): lseek(SEEK_DATA/SEEK_HOLE) finds the holes, and
st_blocks counts the data really stored, so du, cp --sparse and rsync see the holes.

The source files are made sparse on the test's own file system, and every answer of the
mount is compared with the same call on the source file: the kernel's answer for the
source's layout. mkstipple leaves out the source's holes (SEEK_DATA) and runs of zeros
of at least 64 KiB in whole 4 KiB pages, and stores shorter ones: the holes here are of
64 KiB at least and page-aligned, so both layouts are the same. The mount counts blocks
as the 4 KiB pages that hold stored bytes, as ext4 allocates them.
"""
import os
import subprocess

import pytest

from conftest import build_image, mount_image
from imageutil import FAST

needs_root = pytest.mark.needs_root("mounting tests need root")
KIB = 1024

# name: (size, [(offset, length) of data]); the rest is hole
LAYOUTS = {
    "head-and-tail": (3 << 20, [(0, 4 * KIB), (3 * (1 << 20) - 8 * KIB, 8 * KIB)]),
    "middle": (2 << 20, [(512 * KIB, 100 * KIB)]),
    "hole-at-end": (1 << 20, [(0, 64 * KIB), (256 * KIB, 12 * KIB)]),
    "odd-size": (200 * KIB + 123, [(128 * KIB, 72 * KIB + 123)]),
    "all-hole": (5 << 20, []),
    "dense": (100 * KIB + 5, [(0, 100 * KIB + 5)]),
    "tiny": (100, [(0, 100)]),
    # a run longer than the image's 64 KiB blocks: one extent, cut at their edges
    "across-blocks": (1 << 20, [(128 * KIB, 200 * KIB)]),
}


def make_sparse(root):
    os.makedirs(root)
    for name, (size, data) in LAYOUTS.items():
        path = os.path.join(root, name)
        with open(path, "wb") as f:
            f.truncate(size)
            for off, length in data:
                f.seek(off)
                f.write(bytes((i * 7 + 1) % 251 or 1 for i in range(length)))
    return root


def seeks(path):
    """Every answer of SEEK_DATA and SEEK_HOLE from each 4 KiB step and a few odd offsets
    (ENXIO as None)."""
    size = os.path.getsize(path)
    out = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in sorted(set(range(0, size + 4 * KIB, 4 * KIB)) | {1, size - 1, size, size + 1}):
            for whence in (os.SEEK_DATA, os.SEEK_HOLE):
                try:
                    out.append((off, whence, os.lseek(fd, off, whence)))
                except OSError as e:
                    assert e.errno == 6, e  # ENXIO
                    out.append((off, whence, None))
    finally:
        os.close(fd)
    return out


def tool(args, cwd):
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=True).stdout


def holes_supported(root):
    st = os.stat(os.path.join(root, "all-hole"))
    return st.st_blocks == 0


@needs_root
def test_sparse_files_on_a_mount(tmp_path):
    src = make_sparse(str(tmp_path / "src"))
    if not holes_supported(src):
        pytest.skip("the test's file system stores no holes")
    image = build_image(src, tmp_path / "sparse.stipple", *FAST)
    with mount_image(image) as mnt:
        for name in LAYOUTS:
            a, b = os.path.join(src, name), os.path.join(mnt, name)
            with open(a, "rb") as f, open(b, "rb") as g:
                assert f.read() == g.read(), name
            assert os.stat(b).st_blocks == os.stat(a).st_blocks, name
            assert seeks(b) == seeks(a), name
        # the files only: a directory's blocks are the file system's own
        for args in (["du", "-k"], ["du", "-k", "--apparent-size"], ["stat", "-c", "%n %b %s"]):
            args += sorted(LAYOUTS)
            assert tool(args, mnt) == tool(args, src), args
        copy = tmp_path / "copy"
        subprocess.run(["cp", "--sparse=always", os.path.join(mnt, "head-and-tail"), copy],
                       check=True)
        assert os.stat(copy).st_blocks == os.stat(os.path.join(src, "head-and-tail")).st_blocks


@needs_root
def test_many_extents_over_one_stream_stat_and_seek_fast(tmp_path):
    """20,000 extents each covering a 256 MiB stream (a 160 KB image): st_blocks and
    SEEK_DATA/SEEK_HOLE come from the extents' file ranges, not from a walk of every block
    each extent crosses (before: 82 M pieces, about half a second each call)."""
    import time
    import craftmeta

    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a").write_bytes(b"hello\n")
    base = build_image(tmp_path / "tree", tmp_path / "base.stipple", "--block-size", "128K")
    nhot, nextents, tail = 4096, 20_000, 1 << 20
    stream = nhot * 64 * KIB
    image, _ = craftmeta.repeat_extents_image(base, tmp_path / "many.stipple", nhot,
                                              nextents, tail)
    data_end = nextents * stream
    with mount_image(image) as mnt:
        path = os.path.join(mnt, "a")
        start = time.monotonic()
        st = os.stat(path)
        fd = os.open(path, os.O_RDONLY)
        try:
            for _ in range(10):
                assert os.lseek(fd, 0, os.SEEK_HOLE) == data_end
                assert os.lseek(fd, stream + 5, os.SEEK_DATA) == stream + 5
                with pytest.raises(OSError) as e:
                    os.lseek(fd, data_end, os.SEEK_DATA)
                assert e.value.errno == 6  # ENXIO: only the hole at the end is left
            took = time.monotonic() - start
            assert os.pread(fd, 4, stream * 3 + 7) == bytes(4)
        finally:
            os.close(fd)
    assert st.st_size == data_end + tail
    assert st.st_blocks == data_end // 512  # the tail is a hole
    assert took < 2.0, "stat and 30 seeks took %.1f s" % took
