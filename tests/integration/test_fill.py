# SPDX-License-Identifier: MIT
"""Filling the page cache from blocks that reads decode, and reads ahead of warming
(issue 14, items 1 and 4).

A read of one page decodes its whole block; the daemon pushes the other pages of that
block, of every regular file the kernel knows, into the page cache, and the pages of a
file looked up later from blocks still cached. Residency is checked with mincore
(util-linux fincore), which reads nothing, and a pushed page missing must be one the kernel
reclaimed since (cachestat: pagecache.py); the bytes are compared with the source tree,
and the FUSE reads that reach the daemon are counted by the cache's hit and miss counters
(`stipple status`): a page served from the page cache never reaches them. With nofill
nothing but the pages read lands there. A hot block that a read wants before warming has
taken it is decoded by the read itself (warm_ahead), never behind warming.
"""
import contextlib
import os
import random
import re
import time

import pytest

from conftest import STIPPLE, mount_image, run
import imageutil
from test_memory import raw_status
from pagecache import drops, gone_pages, held, read_pushed, unless_dropped
from test_warm import daemon_gone

PAGE = 4096
MIB = 1 << 20

# 40 small files of 14-27 KiB, sizes not page multiples: all in the first 1 MiB block.
SMALL = {"a/f%02d" % i: random.Random(i).randbytes(14_000 + 337 * i) for i in range(40)}
LATE = "a/f39"  # looked up only after the read: pushed from the block still cached


def build(tree, image, *args):
    return os.fspath(imageutil.build(tree, image, *args))


def write_tree(root, files):
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    return os.fspath(root)


def fincore_bytes(path):
    r = run(["fincore", "--bytes", "--noheadings", "--output", "RES", path])
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip())


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what()
        time.sleep(0.02)


def seccomp_mode(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^Seccomp:\s+(\d+)", f.read(), re.M).group(1))


def pread_one(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no readahead: one page asked
        return os.pread(fd, n, off)
    finally:
        os.close(fd)


def lost_pages(mnt, rel):
    """REL's pages that are not in the page cache, but for those the kernel reclaimed
    since they were pushed (pagecache.py)."""
    return gone_pages(os.path.join(mnt, rel))[1]


def fuse_reads(st):
    return st["cache_hits"] + st["cache_misses"]


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory):
    return write_tree(tmp_path_factory.mktemp("fill") / "tree", SMALL)


@pytest.fixture(scope="module")
def small_image(small_tree, tmp_path_factory):
    # Packed: the tests count on every small file sharing one block; stable cuts may start
    # a new block after any of them.
    return build(small_tree, tmp_path_factory.mktemp("fill-image") / "fill.stipple",
                 "--level", "3", "--block-size", "1M", "--no-stable-blocks")


def read_one_page(mnt):
    """Looks up every small file but LATE, then reads one page of a/f00."""
    for rel in SMALL:
        if rel != LATE:
            os.stat(os.path.join(mnt, rel))
    assert pread_one(os.path.join(mnt, "a/f00"), PAGE, PAGE) == SMALL["a/f00"][PAGE:2 * PAGE]


@pytest.mark.needs_root
def test_read_fills_the_pages_of_known_files(small_tree, small_image):
    mark = drops()
    with mount_image(small_image, None, "--warm-workers", "0") as mnt:
        st = raw_status(mnt)
        pid = st["pid"]
        assert st["fill"] == 1 and st["block_size"] == MIB
        assert seccomp_mode(pid) == 2
        read_one_page(mnt)
        others = [rel for rel in SMALL if rel not in ("a/f00", LATE)]
        # the files' inodes held until the drop below (pagecache.held)
        with contextlib.ExitStack() as hold, unless_dropped(mark):
            hold.enter_context(held(os.path.join(mnt, rel) for rel in others))
            wait_for(lambda: not any(lost_pages(mnt, rel) for rel in others), 10,
                     lambda: "not all pushed: %s, %s" % (
                         {rel: lost_pages(mnt, rel) for rel in others[:5]}, raw_status(mnt)))
            st = raw_status(mnt)
            assert st["blocks_decoded"] == 1 and st["fill_store_failures"] == 0, "%s" % st
            assert st["fill_stored_bytes"] >= sum(len(SMALL[r]) for r in others), st
            assert st["fill_known"] == len(SMALL) - 1, st
            # a file the kernel learns of now (the hold looks it up) gets its pages from
            # the block still cached
            hold.enter_context(held([os.path.join(mnt, LATE)]))
            wait_for(lambda: not lost_pages(mnt, LATE), 10,
                     lambda: "%s: pages %s not pushed; %s" % (LATE, lost_pages(mnt, LATE),
                                                              raw_status(mnt)))
            # the pushed pages are the files' bytes, and reading them asks the daemon
            # nothing but for the pages the kernel reclaimed since (pagecache.py)
            before, reclaimed = fuse_reads(raw_status(mnt)), 0
            for rel in others + [LATE]:
                got, n = read_pushed(os.path.join(mnt, rel))
                assert got == SMALL[rel], rel
                reclaimed += n
                with open(os.path.join(small_tree, rel), "rb") as f:
                    assert f.read() == SMALL[rel], rel
            assert fuse_reads(raw_status(mnt)) - before <= reclaimed, \
                (reclaimed, raw_status(mnt))
        assert raw_status(mnt)["fill_dropped"] == 0
        # forgotten files leave the index: the kernel drops unused inodes
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("2\n")
        wait_for(lambda: raw_status(mnt)["fill_known"] == 0, 10,
                 lambda: "files still known after the kernel dropped them: %s" % raw_status(mnt))
        st = raw_status(mnt)
        assert st["fill_pieces"] == 0, st
        assert seccomp_mode(pid) == 2 and not daemon_gone(pid)
    wait_for(lambda: daemon_gone(pid), 20, lambda: "the daemon %d outlived the unmount" % pid)


@pytest.mark.needs_root
@pytest.mark.parametrize("how", [("--no-fill",), ("-o", "nofill")])
def test_nofill_pushes_nothing(small_image, how):
    with mount_image(small_image, None, "--warm-workers", "0", *how) as mnt:
        assert raw_status(mnt)["fill"] == 0
        read_one_page(mnt)
        time.sleep(0.5)  # what a filler would have pushed by now (the test above waits less)
        resident = {rel: fincore_bytes(os.path.join(mnt, rel)) for rel in SMALL if rel != "a/f00"}
        assert not any(resident.values()), resident
        st = raw_status(mnt)
        assert st["fill_stored_bytes"] == 0 and st["blocks_decoded"] == 1, st


@pytest.mark.needs_root
def test_nofill_takes_no_value(small_image, tmp_path):
    r = run([STIPPLE, "mount", "-o", "nofill=1", small_image, os.fspath(tmp_path)])
    assert r.returncode != 0 and "nofill takes no value" in r.stderr, r.stderr


# ---- item 4: a read ahead of warming decodes its own block --------------------------------

BIG = 32 * MIB
NBIG = 4


def big_content(i):
    """32 MiB that zstd shrinks but must still work at: 4 KiB noise pieces, reused."""
    rnd = random.Random(1000 + i)
    pieces = [rnd.randbytes(PAGE) for _ in range(64)]
    return b"".join(rnd.choice(pieces) for _ in range(BIG // PAGE))


@pytest.fixture(scope="module")
def hot_image(tmp_path_factory):
    d = tmp_path_factory.mktemp("fill-hot")
    tree = d / "tree"
    for i in range(NBIG):
        write_tree(tree, {"h/b%d" % i: big_content(i)})
    hot = d / "hot.list"
    hot.write_bytes(b"".join(b"h/b%d\n" % i for i in range(NBIG)))
    # hot blocks as large as the rest: one 32 MiB block per hot file
    return build(tree, d / "hot.stipple", "--level", "3", "--block-size", "32M",
                 "--hot-block-size", "32M", "--hot-list", hot), tree


@pytest.mark.needs_root
def test_read_ahead_of_warming_decodes_its_block_itself(hot_image):
    """One worker holding one block (budget 2) waits for reads before it moves on: the
    last hot file's block is still untaken when the mount is live. A read of it right
    away is decoded by the read (warm_ahead), waits for no buffer, and is right."""
    image, tree = hot_image
    with mount_image(image, None, "--warm-workers", "1", "--cache-budget", "2") as mnt:
        st = raw_status(mnt)
        assert st["hot_blocks"] >= NBIG and st["block_size"] == BIG, st
        last = "h/b%d" % (NBIG - 1)
        off = BIG - 3 * PAGE
        with open(os.path.join(tree, last), "rb") as f:
            f.seek(off)
            want = f.read(PAGE)
        assert pread_one(os.path.join(mnt, last), off, PAGE) == want
        st = raw_status(mnt)
        assert st["warm_ahead"] >= 1, st
        assert st["warmed"] < st["hot_blocks"], st
        assert st["cache_waits"] == 0, st


@pytest.mark.needs_root
def test_hot_region_is_pushed_once_by_the_warmer(hot_image):
    """The filler leaves the hot region to warming, which pushes it for the files the
    kernel knows: a hot block a read decodes ahead of warming is not pushed twice, and
    once warming is done every hot file is whole in the page cache all the same (but for
    pages the kernel reclaimed since)."""
    image, tree = hot_image
    mark = drops()
    with mount_image(image, None, "--warm-workers", "1", "--cache-budget", "2") as mnt, \
            held(os.path.join(mnt, "h/b%d" % i) for i in range(NBIG)), unless_dropped(mark):
        last = "h/b%d" % (NBIG - 1)
        with open(os.path.join(tree, last), "rb") as f:
            want = f.read(PAGE)
        assert pread_one(os.path.join(mnt, last), 0, PAGE) == want
        r = run([STIPPLE, "status", "--wait", "--timeout", "120", mnt])
        assert r.returncode == 0, r.stdout + r.stderr
        st = raw_status(mnt)
        assert st["warm_done"] == 1 and st["fill_stored_bytes"] == 0, st
        assert st["warm_stored_bytes"] >= (NBIG - 1) * BIG, st
        for i in range(NBIG):
            lost = lost_pages(mnt, "h/b%d" % i)
            assert not lost, "h/b%d: %d pages never pushed, from %d; %s" % (
                i, len(lost), lost[0], raw_status(mnt))
