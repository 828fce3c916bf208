# SPDX-License-Identifier: MIT
"""mkstipple --cut-inside (issue 31): large files are cut where their bytes say, each cut
a block of its own, so that the unchanged runs of a changed large file come out as the
same stored blocks in the next release.

Two releases of two large files made from the real Python standard library, the way a
JDK ships its classes: one uncompressed archive of many sources (like lib/modules), one
zip of them, deflated (like src.zip, whose bytes zstd cannot shrink). v2 edits three
sources, so both files change in three places and their bytes move. Stored blocks are
found by walking the image files (storedblocks.py) and compared by SHA-256; the blocks
of each file come from `stipple ls --blocks`; contents and attributes are compared with
the source trees.
"""

import os
import shutil
import zipfile

import pytest

from conftest import PYTHON_LIB, STIPPLE, extract_image
import imageutil
import storedblocks
import treeutil

ARGS = ("--level", "3", "--block-size", "1M")  # cuts of 64 KiB on average
BIG = ("lib/modules", "lib/src.zip")
SIZE = 3 << 20


def stdlib_sources():
    """Up to SIZE bytes of the standard library's .py files, in path order."""
    out, total = [], 0
    for d, dirs, files in os.walk(PYTHON_LIB):
        dirs[:] = sorted(x for x in dirs if x not in ("test", "tests", "__pycache__",
                                                      "site-packages", "dist-packages"))
        for f in sorted(files):
            if f.endswith(".py") and total < SIZE:
                p = os.path.join(d, f)
                out.append((os.path.relpath(p, PYTHON_LIB), open(p, "rb").read()))
                total += len(out[-1][1])
    return out


def make_release(root, sources):
    """ROOT/lib/modules (the sources one after the other, each after its name),
    ROOT/lib/src.zip (deflated, fixed dates) and a small file."""
    os.makedirs(root / "lib")
    with open(root / "lib" / "modules", "wb") as f:
        for name, body in sources:
            f.write(b"\0%s\0%s" % (name.encode(), body))
    with zipfile.ZipFile(root / "lib" / "src.zip", "w", zipfile.ZIP_DEFLATED) as z:
        for name, body in sources:
            z.writestr(zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0)), body)
    (root / "release").write_bytes(b"%d\n" % len(sources))


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    top = tmp_path_factory.mktemp("cut")
    src = stdlib_sources()
    assert sum(len(b) for _, b in src) >= 2 << 20, "too little of the stdlib found"
    make_release(top / "v1", src)
    for i in (len(src) // 5, len(src) // 2, 4 * len(src) // 5):
        name, body = src[i]
        src[i] = (name, b"# patched in v2\n" + body[: len(body) // 2] + b"\nx = 1\n")
    make_release(top / "v2", src)
    return top / "v1", top / "v2"


def blocks_of(image, path):
    """The SHA-256 of the stored blocks that hold PATH's bytes and no other file's."""
    held = storedblocks.file_blocks(STIPPLE, image)
    hashes = storedblocks.block_hashes(STIPPLE, image)
    return [hashes[b] for b, paths in sorted(held.items()) if paths == {path}]


def shared_share(old, new, path):
    """The part of NEW's blocks of PATH that OLD stores byte for byte too."""
    a, b = set(blocks_of(old, path)), blocks_of(new, path)
    return sum(h in a for h in b) / len(b)


def test_unchanged_runs_of_changed_files_share_blocks(releases, tmp_path):
    v1, v2 = releases
    i1 = imageutil.build(v1, tmp_path / "v1.stp", *ARGS, "--cut-inside")
    i2 = imageutil.build(v2, tmp_path / "v2.stp", *ARGS, "--cut-inside")
    p1 = imageutil.build(v1, tmp_path / "p1.stp", *ARGS)
    p2 = imageutil.build(v2, tmp_path / "p2.stp", *ARGS)
    for path in BIG:
        # three edits disturb a few cuts each; the rest come out the same
        assert len(blocks_of(i2, path)) >= 20, path
        assert shared_share(i1, i2, path) >= 0.75, path
        # without the option the first edit shifts every block after it
        assert shared_share(p1, p2, path) <= 0.35, path
    for tree, image in ((v1, i1), (v2, i2)):
        out = tmp_path / (image.name + ".out")
        extract_image(image, out)
        treeutil.assert_same_tree(os.fspath(tree), os.fspath(out))


def test_a_cut_ends_its_zstd_data_where_its_bytes_end(releases, tmp_path):
    """Each cut's frame holds the cut's bytes, then zero blocks alone: the blocks of
    lib/modules decode, before their zero blocks, to the file's size exactly, so a reader
    that stops at the zero blocks decodes no padding (without the flush, the last zstd
    block of each cut carried up to 128 KiB of zeros)."""
    _, v2 = releases
    image = imageutil.build(v2, tmp_path / "v2.stp", *ARGS, "--cut-inside")
    held = storedblocks.file_blocks(STIPPLE, image)
    frames = [b for _, b in storedblocks.stored_blocks(STIPPLE, image)]
    for path in BIG:
        mine = [b for b, paths in sorted(held.items()) if paths == {path}]
        assert len(mine) >= 20 and all(frames[b][:4] == storedblocks.ZSTD_MAGIC for b in mine)
        assert sum(storedblocks.body_len(frames[b]) for b in mine) == os.path.getsize(v2 / path)


def test_cuts_follow_the_bytes_not_the_build(releases, tmp_path):
    _, v2 = releases
    one = imageutil.build(v2, tmp_path / "a.stp", *ARGS, "--cut-inside", "--threads", "1")
    many = imageutil.build(v2, tmp_path / "b.stp", *ARGS, "--cut-inside", "--threads", "4",
                           "--memory", "8M")
    assert open(one, "rb").read() == open(many, "rb").read()


def test_cuts_with_base_share_both_ways(releases, tmp_path):
    v1, v2 = releases
    i1 = imageutil.build(v1, tmp_path / "v1.stp", *ARGS, "--cut-inside")
    i2 = imageutil.build(v2, tmp_path / "v2.stp", *ARGS, "--cut-inside", "--base", i1)
    again = imageutil.build(v2, tmp_path / "again.stp", *ARGS, "--cut-inside", "--base", i1,
                            "--threads", "1", "--memory", "8M")
    assert open(i2, "rb").read() == open(again, "rb").read()
    for path in BIG:
        assert shared_share(i1, i2, path) >= 0.75, path
    # the small file did not change: its block is carried whole
    assert set(blocks_of(i2, "release")) <= set(blocks_of(i1, "release"))
    out = tmp_path / "v2.out"
    extract_image(i2, out)
    treeutil.assert_same_tree(os.fspath(v2), os.fspath(out))


def test_base_cuts_unless_told_not_to(releases, tmp_path):
    """With --base, --cut-inside is the default: the image is the one the explicit option
    makes, byte for byte; --no-cut-inside packs the large files whole."""
    v1, v2 = releases
    i1 = imageutil.build(v1, tmp_path / "v1.stp", *ARGS, "--cut-inside")
    plain = imageutil.build(v2, tmp_path / "plain.stp", *ARGS, "--base", i1)
    told = imageutil.build(v2, tmp_path / "told.stp", *ARGS, "--cut-inside", "--base", i1)
    whole = imageutil.build(v2, tmp_path / "whole.stp", *ARGS, "--base", i1,
                            "--no-cut-inside")
    assert open(plain, "rb").read() == open(told, "rb").read()
    for path in BIG:
        assert shared_share(i1, plain, path) >= 0.75, path
        assert len(blocks_of(whole, path)) <= os.path.getsize(v2 / path) // (1 << 20) + 1
        assert shared_share(i1, whole, path) == 0, path
    for image in (plain, whole):
        out = tmp_path / (image.name + ".out")
        extract_image(image, out)
        treeutil.assert_same_tree(os.fspath(v2), os.fspath(out))


@pytest.mark.parametrize("extra,words", [
    (("--cut-inside", "--no-stable-blocks"), "--no-stable-blocks"),
    (("--cut-inside=300K",), "power of two"),
    (("--cut-inside=512K",), "quarter block"),
])
def test_bad_cut_options_are_usage_errors(releases, tmp_path, extra, words):
    _, v2 = releases
    r = imageutil.mkstipple(v2, tmp_path / "x.stp", *ARGS, *extra)
    assert r.returncode == 2, r.stderr
    assert words in r.stderr and "--cut-inside" in r.stderr
    assert not os.path.exists(tmp_path / "x.stp")


def test_with_base_a_file_sharing_nothing_stays_whole(releases, tmp_path):
    v1, v2 = releases
    v3 = tmp_path / "v3"
    shutil.copytree(v2, v3)
    modules = v3 / "lib" / "modules"
    modules.write_bytes(bytes(b ^ 0x5A for b in modules.read_bytes()))  # no cut of v1's left
    i1 = imageutil.build(v1, tmp_path / "v1.stp", *ARGS, "--cut-inside")
    i3 = imageutil.build(v3, tmp_path / "v3.stp", *ARGS, "--cut-inside", "--base", i1)
    size = os.path.getsize(modules)
    # whole: in as few blocks as its size takes, not in a cut per 64 KiB
    assert len(blocks_of(i3, "lib/modules")) <= size // (1 << 20) + 1
    assert shared_share(i1, i3, "lib/src.zip") >= 0.75  # still cut: it shares
    out = tmp_path / "v3.out"
    extract_image(i3, out)
    treeutil.assert_same_tree(os.fspath(v3), os.fspath(out))
