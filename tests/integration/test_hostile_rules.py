# SPDX-License-Identifier: MIT
"""Rules of stipple(5) that a crafted image breaks to make a reader's work grow with
what the image claims rather than what it stores (issue 28): block table entries that
share stored bytes, inodes that share extent records, and floods of messages.

Every crafted image starts from a real one built by mkstipple and is changed field by
field with imageutil (stipple(5) offsets)."""

import os
import subprocess
import tempfile

import pytest

from conftest import MKSTIPPLE, STIPPLE, build_image, is_mounted, run, unmount
from imageutil import BLOCKENT_FIELDS, BLOCKENT_SIZE, HostileImage, get, put

FAST = ("--level", "3", "--block-size", "64K")
BIG = b"hello stipple %d\n" % 7 * 13000  # 221 KB of text: four zstd blocks of 64 KiB


def stipple(*args, timeout=120):
    return run([STIPPLE, *args], timeout=timeout)


@pytest.fixture(scope="module")
def built():
    for exe in (STIPPLE, MKSTIPPLE):
        if not os.access(exe, os.X_OK):
            pytest.skip("%s is not built" % exe)


@pytest.fixture(scope="module")
def rules_image(tmp_path_factory, built):
    """A few files, one of them several compressed 64 KiB blocks."""
    root = tmp_path_factory.mktemp("rules")
    src = root / "src"
    (src / "dir").mkdir(parents=True)
    (src / "a").write_bytes(b"alpha\n")
    (src / "big").write_bytes(BIG)
    (src / "dir" / "b").write_bytes(b"beta\n")
    (src / "dir" / "c").write_bytes(b"gamma\n")
    return build_image(src, root / "rules.stipple", *FAST)


def refused_by_every_reader(image, reason, tmp_path):
    """check, extract, cat, ls, bench and a mount all refuse IMAGE when they open it,
    saying REASON, and extract writes nothing."""
    dest = tmp_path / "out"
    for args in (("check", image), ("extract", image, dest), ("cat", image, "/big"),
                 ("ls", image, "/"), ("bench", "--reads", "10", image)):
        r = stipple(*args)
        assert r.returncode == 1, "%s exited %d:\n%s" % (args[0], r.returncode, r.stderr)
        assert reason in r.stderr, (args[0], r.stderr)
        assert r.stdout == "", (args[0], r.stdout[:200])
    assert not dest.exists() or not any(dest.iterdir())
    mnt = tempfile.mkdtemp(prefix="stipple-rules-")
    try:
        r = stipple("mount", image, mnt, timeout=60)
        assert r.returncode != 0 and not is_mounted(mnt), r.stderr
        assert reason in r.stderr, r.stderr
    finally:
        unmount(mnt)
        os.rmdir(mnt)


# --- item 16: blocks that share stored bytes ---


def block_entry(img, block):
    return img.header("block_off") + BLOCKENT_SIZE * block


def copy_block_entry(img, src, dst):
    """Points block DST's table entry at block SRC's stored frame."""
    for f in ("offset", "stored_size", "codec", "filter", "checksum"):
        put(BLOCKENT_FIELDS, f, img.meta, get(BLOCKENT_FIELDS, f, img.meta,
                                               block_entry(img, src)), block_entry(img, dst))


def test_blocks_sharing_a_frame_are_refused(rules_image, tmp_path):
    """Block 1 names block 0's frame (same checksum, same decoded size): before the rule
    every reader took it, and cat printed block 0's bytes twice."""
    img = HostileImage(rules_image)
    assert img.block_codecs()[:2] == [1, 1]
    copy_block_entry(img, 0, 1)
    bad = img.write(tmp_path / "shared.stipple")
    refused_by_every_reader(bad, "block 1: stored bytes overlap or precede those of block 0",
                            tmp_path)


def test_blocks_out_of_order_are_refused(rules_image, tmp_path):
    """Two blocks whose frames are swapped in the table lie apart but not in block order:
    the rule is the order mkstipple writes, which a reader checks in one pass."""
    img = HostileImage(rules_image)
    b0, b1 = block_entry(img, 0), block_entry(img, 1)
    saved = bytes(img.meta[b0:b0 + BLOCKENT_SIZE])
    img.meta[b0:b0 + BLOCKENT_SIZE] = img.meta[b1:b1 + BLOCKENT_SIZE]
    img.meta[b1:b1 + BLOCKENT_SIZE] = saved
    bad = img.write(tmp_path / "swapped.stipple")
    r = stipple("check", bad)
    assert r.returncode == 1 and "block 1: stored bytes overlap or precede" in r.stderr, r.stderr


def test_sound_image_passes_the_rules(rules_image, tmp_path):
    """The same image rewritten without a change still checks, lists and extracts."""
    good = HostileImage(rules_image).write(tmp_path / "good.stipple")
    assert stipple("check", good).returncode == 0
    assert stipple("cat", good, "/big").stdout.encode() == BIG
    r = stipple("extract", good, tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "big").read_bytes() == BIG
