# SPDX-License-Identifier: MIT
"""A read waits only for its bytes (mount.stipple(8), cache_budget): a block whose zstd
frame breaks halfway, its checksum matching the broken bytes, serves the bytes decoded
before the break and fails the reads past it with EIO, through the mount; the block is
never kept, so a later read decodes it again. Main refused the whole block.

Blocks of x86 code (real shared objects, so that the BCJ filter is kept) are read by many
threads at once on a fresh mount, at spots spread over each filtered block (its start,
the 64 KiB points where a copy restarts the filter, its last bytes), while the block
decodes: every byte must be the source file's, then the whole files once the blocks are
whole; the same through a mount that verifies a signed image."""
import errno
import os
import random
import shutil
import threading

import pytest

from conftest import PYTHON_SONAME, STIPPLE, build_image, mount_image, run
from imageutil import BLOCKENT_FIELDS, CraftedImage, get, put, xxh3

BLOCK = 2 << 20
BREAK_AT = 8  # the zstd block made invalid: its output would start at 8 x 128 KiB


def text(n, seed):
    """N bytes of words: compressible, unlike random bytes, so zstd blocks are compressed."""
    rng = random.Random(seed)
    words = [bytes(rng.choice(b"abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(500)]
    out = bytearray()
    while len(out) < n:
        out += rng.choice(words) + b" "
    return bytes(out[:n])


def frame_header_size(frame):
    fhd = frame[4]
    single = (fhd >> 5) & 1
    did = (0, 1, 2, 4)[fhd & 3]
    fcs = (1 if single else 0, 2, 4, 8)[fhd >> 6]
    return 5 + (0 if single else 1) + did + fcs


def break_frame(frame, k):
    """Makes zstd block K of FRAME (a bytearray) of the reserved type."""
    at = frame_header_size(frame)
    for i in range(k + 1):
        h = frame[at] | frame[at + 1] << 8 | frame[at + 2] << 16
        if i == k:
            frame[at] |= 6
            return
        assert not h & 1, "the frame ended before block %d" % k
        at += 3 + (1 if (h >> 1) & 3 == 1 else h >> 3)


def pread(path, off, n=4096):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # the 4 KiB alone, no readahead
        return os.pread(fd, n, off)
    finally:
        os.close(fd)


@pytest.fixture
def broken_image(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    content = text(2 * BLOCK + 12345, 1)
    (tree / "big").write_bytes(content)
    image = build_image(tree, tmp_path / "good.stp", "--block-size", "2M", "--level", "3",
                        "--no-bcj")
    img = CraftedImage(image)
    assert img.extents(img.lookup("big")) == [(0, 0, len(content))]
    base = img.header("block_off")
    off = get(BLOCKENT_FIELDS, "offset", img.meta, base)
    size = get(BLOCKENT_FIELDS, "stored_size", img.meta, base)
    assert get(BLOCKENT_FIELDS, "codec", img.meta, base) == 1
    frame = bytearray(img.data[off:off + size])
    break_frame(frame, BREAK_AT)
    img.data[off:off + size] = frame
    put(BLOCKENT_FIELDS, "checksum", img.meta, xxh3(frame), base)
    return img.write(os.fspath(tmp_path / "broken.stp")), content


def test_bytes_before_the_break_are_served(broken_image):
    image, content = broken_image
    # the library's readers wait for the whole block: they refuse it
    r = run([STIPPLE, "cat", image, "big"])
    assert r.returncode != 0 and "block 0" in r.stderr
    with mount_image(image, None, "--warm-workers", "0") as mnt:
        big = os.path.join(mnt, "big")
        assert pread(big, 0) == content[:4096]
        with pytest.raises(OSError) as e:
            pread(big, BLOCK - 8192)
        assert e.value.errno == errno.EIO
        # not kept: a read of another page before the break decodes the block again
        assert pread(big, 64 << 10) == content[64 << 10:(64 << 10) + 4096]
        with pytest.raises(OSError) as e:
            pread(big, (BREAK_AT + 1) * (128 << 10))
        assert e.value.errno == errno.EIO
        # the next block is whole and fine
        assert pread(big, BLOCK + 4096) == content[BLOCK + 4096:BLOCK + 8192]


CODE_LIBS = ("libstdc++.so.6", PYTHON_SONAME, "libzstd.so.1")
CODE_BLOCK = 1 << 20
MARK = 64 << 10  # STP_DECODE_MARK


@pytest.fixture
def code_image(tmp_path):
    """An image of real x86 shared objects and a text file in 1 MiB blocks: (image,
    {path: source path}, CraftedImage)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    files = {}
    for name in CODE_LIBS:
        src = os.path.join("/usr/lib/x86_64-linux-gnu", name)
        if not os.path.exists(src):
            pytest.skip("%s is not installed" % src)
        shutil.copyfile(src, tree / name)
        files[name] = os.fspath(tree / name)
    (tree / "words").write_bytes(text(3 * CODE_BLOCK // 2, 2))
    files["words"] = os.fspath(tree / "words")
    image = build_image(tree, tmp_path / "code.stp", "--block-size", "1M", "--level", "3")
    img = CraftedImage(image)
    filters = img.block_filters()
    assert filters.count(1) >= 4, filters  # x86, kept: the code compresses better so
    assert 0 in filters
    return image, files, img


def spots(img, files):
    """(name, file offset, length) of reads spread over every filtered block: its first
    bytes, each restart point give or take a few bytes, its last bytes, and at random."""
    bs = CODE_BLOCK
    filters = img.block_filters()
    rng = random.Random(7)
    out = []
    for name in files:
        for file_off, stream_off, length in img.extents(img.lookup(name)):
            for k in range(stream_off // bs, (stream_off + length - 1) // bs + 1):
                if filters[k] != 1:
                    continue
                lo, hi = max(k * bs, stream_off), min((k + 1) * bs, stream_off + length)
                wanted = [lo, hi - 1, hi - 4, hi - 4096, (lo + hi) // 2]
                wanted += [m + d for m in range(k * bs, (k + 1) * bs, MARK) for d in (-3, 0, 2)]
                wanted += [rng.randrange(lo, hi) for _ in range(8)]
                for at in wanted:
                    if lo <= at < hi:
                        n = rng.choice((1, 3, 4096, 5000, 128 << 10))
                        n = min(n, stream_off + length - at)
                        out.append((name, file_off + at - stream_off, n))
    rng.shuffle(out)
    return out


def read_concurrently(mnt, files, reads, threads=8):
    """Reads READS from THREADS threads started together; returns the wrong ones."""
    source = {name: open(path, "rb").read() for name, path in files.items()}
    todo = list(reads)
    lock = threading.Lock()
    bad = []
    start = threading.Barrier(threads)

    def worker():
        start.wait()
        while True:
            with lock:
                if not todo:
                    return
                name, off, n = todo.pop()
            try:
                got = pread(os.path.join(mnt, name), off, n)
            except OSError as e:
                got = e
            if got != source[name][off:off + n]:
                with lock:
                    bad.append((name, off, n, got if isinstance(got, OSError) else len(got)))

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return bad


def whole_files_right(mnt, files):
    for name, path in files.items():
        with open(os.path.join(mnt, name), "rb") as f:
            assert f.read() == open(path, "rb").read(), name


def test_filtered_blocks_stream(code_image):
    image, files, img = code_image
    reads = spots(img, files)
    assert len(reads) > 200
    # a fresh mount, no warming: the reads meet blocks that are still decoding
    with mount_image(image, None, "--warm-workers", "0", "--no-prime") as mnt:
        assert read_concurrently(mnt, files, reads) == []
        whole_files_right(mnt, files)
    # a budget of one block: blocks are decoded again and again under the readers
    with mount_image(image, None, "--warm-workers", "0", "--no-prime",
                     "-o", "cache_budget=1") as mnt:
        assert read_concurrently(mnt, files, reads[:300], threads=4) == []


def test_filtered_blocks_stream_verified(code_image, tmp_path):
    from test_mount_verify import Key, sign
    image, files, img = code_image
    key = Key(os.fspath(tmp_path), "k")
    signed = os.fspath(tmp_path / "signed.stp")
    sign(image, signed, key)
    reads = spots(img, files)
    with mount_image(signed, None, "--verify", key.pub, "--warm-workers", "0",
                     "--no-prime") as mnt:
        assert read_concurrently(mnt, files, reads[:400]) == []
        whole_files_right(mnt, files)
