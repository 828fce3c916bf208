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
from imageutil import BLOCKENT_FIELDS, BLOCKENT_SIZE, FAST, HostileImage, get, put

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


# --- item 19: floods of messages ---


def flood_dir(img, dirpath, n):
    """Makes directory DIRPATH list N copies of its first entry: N records appended to
    the metadata, inside a longer directory entry table (tables may share bytes)."""
    from imageutil import DIRENT_SIZE
    ino = img.lookup(dirpath)
    _, first, _ = img.inode(ino)
    rec = bytes(img.meta[img.dirent_off + DIRENT_SIZE * first:
                         img.dirent_off + DIRENT_SIZE * (first + 1)])
    while (len(img.meta) - img.dirent_off) % DIRENT_SIZE:
        img.meta.append(0)
    start = (len(img.meta) - img.dirent_off) // DIRENT_SIZE
    img.meta += rec * n
    put({"dirent_count": (8, "<I")}, "dirent_count", img.meta, start + n)
    img.inode_put(ino, "data", start)
    img.inode_put(ino, "count", n)
    img.inode_put(ino, "size", n)


@pytest.fixture(scope="module")
def flood_image(rules_image, tmp_path_factory):
    """/dir lists its first entry 30,000 times: one message each, before the bound."""
    img = HostileImage(rules_image)
    flood_dir(img, "/dir", 30000)
    return img.write(tmp_path_factory.mktemp("flood") / "flood.stipple")


def stderr_writes(args):
    """Runs stipple ARGS under strace: (the run, the write(2) calls made on fd 2)."""
    log = tempfile.NamedTemporaryFile(prefix="stipple-strace-", delete=False)
    try:
        r = run(["strace", "-f", "-e", "trace=write", "-e", "signal=none", "-qq",
                 "-o", log.name, STIPPLE, *args], timeout=300)
        with open(log.name, errors="replace") as f:
            writes = sum(1 for line in f if "write(2," in line)
    finally:
        os.unlink(log.name)
    return r, writes


def test_check_bounds_a_flood_of_messages(flood_image):
    """30,000 duplicate entries: check names the first 20, then says how many more,
    in a few write(2) calls; with -v it names them all."""
    r, writes = stderr_writes(["check", flood_image])
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    dup = [l for l in lines if "is out of order or a duplicate" in l and "more messages" not in l]
    assert len(dup) == 20, len(dup)
    assert any("... and 29979 more messages like \"entry" in l for l in lines), lines[-5:]
    assert lines[-1].endswith("29999 problems found"), lines[-3:]
    assert len(lines) < 60, len(lines)
    assert writes <= 4, writes
    r = stipple("check", "-v", flood_image)
    assert sum("is out of order or a duplicate" in l for l in r.stderr.splitlines()) == 29999


def test_check_says_a_bad_superblock_once(rules_image, tmp_path):
    """Issue 29: check read the superblock, then opened the image, reporting twice."""
    from imageutil import patch_superblock
    bad = patch_superblock(rules_image, tmp_path / "r.stipple", raw={110: b"\x01"})
    r = stipple("check", bad)
    assert r.returncode == 1
    assert r.stderr.count("superblock reserved bytes not zero") == 1, r.stderr


def test_extract_bounds_a_flood_of_messages(flood_image, tmp_path):
    """The same directory extracted: the first copy of its entry is made, every other
    fails on the existing name; 20 are named."""
    r = stipple("extract", flood_image, tmp_path / "out", timeout=300)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert len(lines) < 60, (len(lines), lines[:5])
    assert any("more messages like" in l for l in lines), lines[-5:]


# --- item 18: inodes that share extent records ---


def share_extents(img, src, dst):
    """Points file DST's extent range at file SRC's records."""
    a, b = img.lookup(src), img.lookup(dst)
    for f in ("data", "count"):
        img.inode_put(b, f, img.inode_get(a, f))


def test_files_sharing_extent_records_are_refused(rules_image, tmp_path):
    """/dir/c names /dir/b's extent record (the counts still add up, as the walks
    checked before): check names both inodes; extract, info and bench refuse the image
    before they write or read anything."""
    img = HostileImage(rules_image)
    share_extents(img, "/dir/b", "/dir/c")
    b, c = img.lookup("/dir/b"), img.lookup("/dir/c")
    bad = img.write(tmp_path / "shared-extents.stipple")
    dest = tmp_path / "out"
    for args in (("extract", bad, dest), ("info", bad), ("bench", "--reads", "10", bad)):
        r = stipple(*args)
        assert r.returncode == 1, (args[0], r.returncode, r.stderr)
        assert "extent records overlap or precede" in r.stderr, (args[0], r.stderr)
    assert not dest.exists() or not any(dest.iterdir())
    r = stipple("check", bad)
    assert r.returncode == 1
    assert "inode %d: its extent records overlap or precede those of inode %d" % (
        max(b, c), min(b, c)) in r.stderr, r.stderr


def test_extent_ranges_out_of_inode_order_are_refused(rules_image, tmp_path):
    """Two files' ranges swapped: apart, but not in inode order, which is the order
    mkstipple writes and the one a reader checks in one pass without a sort."""
    img = HostileImage(rules_image)
    b, c = img.lookup("/dir/b"), img.lookup("/dir/c")
    (_, db, nb), (_, dc, nc) = img.inode(b), img.inode(c)
    assert nb == nc == 1
    img.inode_put(b, "data", dc)
    img.inode_put(c, "data", db)
    bad = img.write(tmp_path / "swapped-extents.stipple")
    r = stipple("check", bad)
    assert r.returncode == 1 and "its extent records overlap or precede" in r.stderr, r.stderr
    r = stipple("extract", bad, tmp_path / "out")
    assert r.returncode == 1 and "its extent records overlap or precede" in r.stderr, r.stderr
