# SPDX-License-Identifier: MIT
"""A recording mount turns the kernel's readahead off (issue 14, item 3): the hot list it
writes holds the pages an application read or faulted in, not what readahead fetched
around them. Plain reads (no fadvise) and a page fault on a mapping, checked against the
source bytes; the mount's read_ahead_kb from sysfs, beside mounts that do not record
(readahead=). And the run-time side: what a replay of the recorded start-up asks for,
with mkstipple's default margin and the mount's default readahead, stays in the hot
region.
"""

import mmap
import os
import random
import re
import time

import pytest

from conftest import MKSTIPPLE, STIPPLE, build_image, mount_image, run
from imageutil import FAST

PAGE = 4096


def noise(seed, size):
    return random.Random(seed).randbytes(size)


FILES = {"big.bin": noise(1, 3 << 20), "mapped.so": noise(2, 1 << 20)}
READ_AT = 1 << 20       # a 4 KiB read in big.bin, far from either end
FAULT_AT = 512 << 10    # the page of mapped.so touched through a mapping


def tree_of(d, files):
    tree = d / "tree"
    tree.mkdir()
    for name, body in files.items():
        (tree / name).write_bytes(body)
    return tree


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    d = tmp_path_factory.mktemp("rec-ra")
    return build_image(tree_of(d, FILES), d / "tree.stipple", *FAST)


def daemon_pid(mnt):
    r = run([STIPPLE, "status", mnt])
    assert r.returncode == 0, r.stderr
    return int(re.search(r"^daemon:\s+pid (\d+),", r.stdout, re.M).group(1))


def wait_gone(pid):
    """The daemon writes its list on the way out, a moment after umount returns."""
    deadline = time.monotonic() + 20
    while True:
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except FileNotFoundError:
            return
        assert time.monotonic() < deadline, "daemon %d outlived the unmount" % pid
        time.sleep(0.02)


def read_ahead_kb(mnt):
    dev = os.stat(mnt).st_dev
    with open("/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(dev), os.minor(dev))) as f:
        return int(f.read())


def parse(raw):
    """The files read and their ranges; not the names only looked up."""
    out = {}
    for line in raw.decode().splitlines():
        path, _, ranges = line.partition("\t")
        if ranges == "lookup":
            continue
        out[path] = [tuple(map(int, r.split("-"))) for r in ranges.split(",")] if ranges else None
    return out


@pytest.mark.needs_root
def test_recording_mount_reads_only_the_pages_touched(image, tmp_path):
    hot = tmp_path / "hot.list"
    with mount_image(image, None, "--record", str(hot)) as mnt:
        pid = daemon_pid(mnt)
        assert read_ahead_kb(mnt) == 0
        with open(os.path.join(mnt, "big.bin"), "rb") as f:  # no fadvise: readahead as usual
            f.seek(READ_AT)
            assert f.read(PAGE) == FILES["big.bin"][READ_AT:READ_AT + PAGE]
        with open(os.path.join(mnt, "mapped.so"), "rb") as f:
            m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
            try:
                assert m[FAULT_AT:FAULT_AT + 16] == FILES["mapped.so"][FAULT_AT:FAULT_AT + 16]
            finally:
                m.close()
    wait_gone(pid)
    got = parse(hot.read_bytes())
    assert got == {"big.bin": [(READ_AT, READ_AT + PAGE)],
                   "mapped.so": [(FAULT_AT, FAULT_AT + PAGE)]}, got


@pytest.mark.needs_root
@pytest.mark.parametrize("args,kb", [((), 16), (("--readahead", "64K"), 64),
                                     (("-o", "readahead=0"), 0), (("-o", "readahead=128K"), 128)])
def test_mount_readahead_follows_the_option(image, args, kb):
    """16 KiB by default (half of mkstipple's default margin), else as asked; reads of the
    whole file still come back whole."""
    with mount_image(image, None, *args) as mnt:
        assert read_ahead_kb(mnt) == kb
        with open(os.path.join(mnt, "big.bin"), "rb") as f:
            assert f.read() == FILES["big.bin"]


@pytest.mark.parametrize("bad", ["256K", "1M", "-1", "lots"])
def test_readahead_out_of_range_is_refused(image, tmp_path, bad):
    r = run([STIPPLE, "mount", "-o", "readahead=" + bad, image, str(tmp_path)])
    assert r.returncode != 0 and "readahead=" + bad in r.stderr and "128K" in r.stderr, r.stderr
    assert not os.path.ismount(tmp_path)


# --- what a replay asks for stays in the hot region ---------------------------------------

BLOCK = 64 << 10
READS = [(1 << 20, 4096), (2 << 20, 3 * 4096), (5 << 20, 4096)]  # (offset, size) in big.bin
FAULTS = [128 << 10, 2 << 20, 3 << 20]                             # pages of mapped.so


def touch(mnt):
    """The start-up being recorded and replayed: a few reads, a few page faults."""
    with open(os.path.join(mnt, "big.bin"), "rb") as f:
        for off, size in READS:
            f.seek(off)
            assert f.read(size) == FILES_HOT["big.bin"][off:off + size]
    with open(os.path.join(mnt, "mapped.so"), "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        try:
            for off in FAULTS:
                assert m[off:off + 8] == FILES_HOT["mapped.so"][off:off + 8]
        finally:
            m.close()


FILES_HOT = {"big.bin": noise(3, 8 << 20), "mapped.so": noise(4, 4 << 20)}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """The tree, and the hot list one recording mount of it wrote."""
    d = tmp_path_factory.mktemp("replay")
    tree = tree_of(d, FILES_HOT)
    base = build_image(tree, d / "base.stipple", "--level", "1", "--block-size", "64K")
    hot = d / "hot.list"
    with mount_image(base, None, "--record", str(hot)) as mnt:
        pid = daemon_pid(mnt)
        touch(mnt)
    wait_gone(pid)
    return d, tree, hot


def raw_status(mnt):
    out = {}
    for line in os.getxattr(mnt, "user.stipple.status").decode().splitlines():
        k, _, v = line.partition("=")
        out[k] = int(v) if v.isdigit() else v
    return out


@pytest.mark.needs_root
@pytest.mark.parametrize("margin,readahead,inside", [(None, None, True), ("0", "128K", False)])
def test_replay_decodes_only_hot_blocks(recorded, margin, readahead, inside):
    """With mkstipple's default margin and the mount's default readahead, replaying the
    recorded start-up decodes only blocks of the hot region; with no margin and the
    kernel's usual 128 KiB of readahead it reaches cold blocks (which shows the check
    can fail; when the kernel happens not to read ahead there, that case is skipped).
    Warming is off, so only reads decode."""
    d, tree, hot = recorded
    name = "hot-%s.stipple" % (margin or "default")
    args = ["--level", "1", "--block-size", "64K", "--hot-list", str(hot)]
    image = build_image(tree, d / name, *args, *(["--hot-margin", margin] if margin else []))
    mount_args = ["--warm-workers", "0", "--no-prime", "--cache-budget", "200"]
    with mount_image(image, None, *mount_args,
                     *(["--readahead", readahead] if readahead else [])) as mnt:
        hot_blocks = -(-raw_status(mnt)["hot_bytes"] // BLOCK)
        touch(mnt)
        decoded = raw_status(mnt)["blocks_decoded"]
    print("margin %s, readahead %s: %d blocks decoded, %d hot" % (margin, readahead, decoded,
                                                                 hot_blocks))
    assert decoded >= 1
    if inside:
        assert decoded <= hot_blocks, (decoded, hot_blocks)
    elif decoded <= hot_blocks:
        # the kernel's readahead heuristics did not reach past the recorded pages this time
        pytest.skip("no readahead past the recorded pages in this run (%d blocks)" % decoded)


def test_hot_margin_out_of_range_is_refused(recorded, tmp_path):
    d, tree, hot = recorded
    for bad in ("17M", "x"):
        r = run([MKSTIPPLE, "--hot-list", str(hot), "--hot-margin", bad, str(tree),
                 str(tmp_path / "x.stipple")])
        assert r.returncode == 2 and "--hot-margin " + bad in r.stderr, r.stderr
        assert not (tmp_path / "x.stipple").exists()
