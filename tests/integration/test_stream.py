# SPDX-License-Identifier: MIT
"""A read waits only for its bytes (mount.stipple(8), cache_budget): a block whose zstd
frame breaks halfway, its checksum matching the broken bytes, serves the bytes decoded
before the break and fails the reads past it with EIO, through the mount; the block is
never kept, so a later read decodes it again. Main refused the whole block."""
import errno
import os
import random

import pytest

from conftest import build_image, mount_image, run, STIPPLE
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
