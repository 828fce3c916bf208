# SPDX-License-Identifier: MIT
"""Hot blocks (issue 14): the hot region cut into blocks smaller than the rest.

The layout is checked from the outside: the superblock's fields with Python's struct
(stipple(5): hot_block_log at byte 44, feature bit 4), the block count against the rule
of stipple(5), every file read back through a mount and through `stipple extract`
against the source tree (a machine-code file whose hot and cold pieces go through the
BCJ filter at block starts that are not multiples of either size), warming counting the
small blocks, the same image from one thread and from two, and the options refused.
"""

import os
import random
import re
import shutil
import struct
import subprocess

import pytest

from conftest import MKSTIPPLE, STIPPLE, mount_image, run
import imageutil
import treeutil


HOT_BS = 64 << 10
BS = 256 << 10
FEAT_HOT_BLOCKS = 1 << 4
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"  # machine code, for the BCJ filter


def text(seed, size):
    rnd = random.Random(seed)
    words = [b"hot", b"block", b"stipple", b"edge", b"\n", b"%d" % seed]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words) + b" "
    return bytes(out[:size])


FILES = {"hot/%d" % i: text(i, 150_000 + 7_777 * i) for i in range(5)}
FILES["cold/noise"] = random.Random(9).randbytes(300_000)
FILES["cold/text"] = text(10, 500_000)


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("hotblocks") / "tree"
    for rel, content in FILES.items():
        os.makedirs(root / os.path.dirname(rel), exist_ok=True)
        (root / rel).write_bytes(content)
    os.makedirs(root / "lib")
    shutil.copyfile(LIBC, root / "lib" / "libc.so.6")
    return root


@pytest.fixture(scope="module")
def hot_list(tree):
    path = tree.parent / "hot.list"
    names = sorted(k for k in FILES if k.startswith("hot/"))
    path.write_text("".join(n + "\n" for n in names) +
                    "lib/libc.so.6\t0-200704,1048576-1200128\n")
    return path


mkstipple = imageutil.mkstipple
build = imageutil.build


@pytest.fixture(scope="module")
def image(tree, hot_list):
    return build(tree, tree.parent / "hb.stp", "--level", "3", "--block-size", "256K",
                 "--hot-block-size", "64K", "--hot-list", hot_list)


def superblock(image):
    """(feat_incompat, block_log, hot_block_log, data_size, block_count, hot_size)."""
    with open(image, "rb") as f:
        raw = f.read(256)
    assert raw[:8] == b"STIPPLE\0"
    feat, block_log, hot_log, data, blocks, hot = struct.unpack_from("<QIIQQQ", raw, 32)
    return feat, block_log, hot_log, data, blocks, hot


def ceil_div(a, b):
    return -(-a // b)


def info(image):
    r = run([STIPPLE, "info", os.fspath(image)])
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_superblock_states_the_layout(image):
    feat, block_log, hot_log, data, blocks, hot = superblock(image)
    assert feat & FEAT_HOT_BLOCKS and (block_log, hot_log) == (18, 16)
    assert hot > 6 * HOT_BS, hot  # the region spans many hot blocks, and cold blocks follow
    assert blocks == ceil_div(hot, HOT_BS) + ceil_div(data - hot, BS), (data, hot, blocks)
    text_ = info(image)
    assert re.search(r"^features:.* hot-blocks", text_, re.M), text_
    assert re.search(r"^features:.* bcj-x86", text_, re.M), text_
    assert re.search(r"^hot blocks:\s+%d of 64\.0 KiB" % ceil_div(hot, HOT_BS), text_, re.M), text_


def test_check_and_extract_match_the_tree(image, tree, tmp_path):
    r = run([STIPPLE, "check", os.fspath(image)])
    assert r.returncode == 0, r.stdout + r.stderr
    dest = tmp_path / "out"
    r = run([STIPPLE, "extract", os.fspath(image), os.fspath(dest)])
    assert r.returncode == 0, r.stderr
    diffs = treeutil.compare_trees(os.fspath(tree), os.fspath(dest))
    assert not diffs, "\n".join(diffs[:50])


def edges(size):
    """Offsets around every 64 KiB edge of a file of SIZE bytes."""
    return [e + d for e in range(HOT_BS, size, HOT_BS) for d in (-3, 0) if 0 <= e + d < size]


@pytest.mark.needs_root
def test_reads_across_block_edges_through_a_mount(image, tree):
    with mount_image(os.fspath(image), None, "--warm-workers", "2") as mnt:
        for rel in sorted(FILES) + ["lib/libc.so.6"]:
            want = (tree / rel).read_bytes()
            fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
            try:
                for off in edges(len(want)):
                    assert os.pread(fd, 9000, off) == want[off:off + 9000], (rel, off)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                assert os.pread(fd, len(want) + 1, 0) == want, rel
            finally:
                os.close(fd)
        r = run([STIPPLE, "status", "--wait", mnt], timeout=120)
        assert r.returncode == 0, r.stderr
        raw = dict(line.partition("=")[::2] for line in
                   os.getxattr(mnt, "user.stipple.status").decode().splitlines())
        hot = superblock(image)[5]
        assert int(raw["hot_blocks"]) == int(raw["warmed"]) == ceil_div(hot, HOT_BS), raw


def test_same_image_from_any_thread_count(tree, hot_list, image, tmp_path):
    args = ("--level", "3", "--block-size", "256K", "--hot-block-size", "64K",
            "--hot-list", hot_list)
    one = build(tree, tmp_path / "t1.stp", "--threads", "1", *args)
    two = build(tree, tmp_path / "t2.stp", "--threads", "2", "--memory", "6M", *args)
    assert one.read_bytes() == two.read_bytes() == image.read_bytes()


def test_hot_blocks_of_the_block_size_mean_none(tree, hot_list, tmp_path):
    """Hot blocks as large as the others are no hot blocks: the layout of earlier
    images. So is the 4 MiB default under a smaller block size."""
    for args in (("--hot-block-size", "256K"), ()):
        img = build(tree, tmp_path / "plain.stp", "--level", "3", "--block-size", "256K",
                    "--hot-list", hot_list, *args)
        feat, _, hot_log, data, blocks, hot = superblock(img)
        assert not feat & FEAT_HOT_BLOCKS and hot_log == 0 and hot > 0
        assert blocks == ceil_div(data, BS)
        assert "hot blocks:" not in info(img)


@pytest.mark.parametrize("value, why", [
    ("1M", "--hot-block-size 1M: larger than --block-size"),
    ("3M", "--hot-block-size 3M: not a power of two"),
    ("32K", "--hot-block-size 32K: must be from 64K to 1G"),
])
def test_bad_hot_block_sizes_are_refused(tree, tmp_path, value, why):
    out = tmp_path / "bad.stp"
    r = mkstipple(tree, out, "--block-size", "256K", "--hot-block-size", value)
    assert r.returncode == 2 and why in r.stderr, (r.returncode, r.stderr)
    assert not out.exists()


def test_hot_list_that_is_a_fifo_is_refused_at_once(tree, tmp_path):
    """A FIFO in the hot list's place (someone swapped the recorded list) must not hang
    the build: refused at once, naming the list, and no image."""
    fifo = tmp_path / "hot.fifo"
    os.mkfifo(fifo)
    out = tmp_path / "fifo.stp"
    r = mkstipple(tree, out, "--hot-list", fifo, timeout=20)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert str(fifo) in r.stderr and "not a regular file" in r.stderr, r.stderr
    assert not out.exists()


@pytest.mark.parametrize("through", ["/dev/fd/../../..", "/proc/self/fd/../../.."])
def test_hot_list_fifo_spelled_through_dev_fd_is_refused(tree, tmp_path, through):
    """/dev/fd/ followed by anything but a number names any file: a named FIFO spelled
    so is refused as it is under its own name, not waited on while its writer is silent
    (review 8 #1)."""
    fifo = tmp_path / "hot.fifo"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)  # a writer that never writes
    try:
        out = tmp_path / "fifo.stp"
        r = mkstipple(tree, out, "--hot-list", through + str(fifo), timeout=20)
    finally:
        os.close(writer)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "not a regular file" in r.stderr, r.stderr
    assert not out.exists()


def test_hot_list_through_a_handed_pipe_is_read(tree, hot_list, image, tmp_path):
    """A pipe handed over as /dev/fd/N (what `--hot-list <(...)` gives) is read as the
    file would be: the same image, byte for byte."""
    out = tmp_path / "piped.stp"
    rfd, wfd = os.pipe()
    p = subprocess.Popen([MKSTIPPLE, "--level", "3", "--block-size", "256K",
                          "--hot-block-size", "64K", "--hot-list", "/dev/fd/%d" % rfd,
                          tree, out], pass_fds=(rfd,), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, errors="replace")
    os.close(rfd)
    os.write(wfd, hot_list.read_bytes())
    os.close(wfd)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert out.read_bytes() == image.read_bytes()


def test_hot_list_without_an_end_of_line_is_refused(tree, tmp_path):
    """A 64 MiB 'line' is no hot list: refused with its number, not held whole and
    taken for a path."""
    huge = tmp_path / "hot.huge"
    with open(huge, "wb") as f:
        f.truncate(64 << 20)
    out = tmp_path / "huge.stp"
    r = mkstipple(tree, out, "--hot-list", huge)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert str(huge) in r.stderr and "record 1 is longer than 16 MiB" in r.stderr, r.stderr
    assert not out.exists()
