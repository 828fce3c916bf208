# SPDX-License-Identifier: MIT
"""Stable blocks (issue 31): a file that did not change keeps its stored block.

Two releases of a real tree (a copy of part of Debian's Python standard library, with
some of its machine code): v2 changes one file and adds one in the middle of the order.
The stored blocks are found by walking the image files (storedblocks.py: zstd's own
framing, not stipple's block table) and compared by SHA-256; which files lie in which
block comes from `stipple ls --blocks`. Content is checked against the source trees,
and the image against itself from other --threads and --memory.
"""

import collections
import filecmp
import json
import os
import re
import shutil

import pytest

from conftest import MKSTIPPLE, PYTHON_LIB, STIPPLE, extract_image, run
import imageutil
import storedblocks

BS = "64K"
ARGS = ("--level", "3", "--block-size", BS)
SUBDIRS = ("json", "email", "http", "xml", "urllib", "logging", "importlib")
FEAT_BCJ_RELATIVE = 1 << 5


def dynload(n):
    """N machine-code modules of the standard library, by name order."""
    d = os.path.join(PYTHON_LIB, "lib-dynload")
    return [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".so")][:n]


def sources(root):
    """Relative paths of the regular files below ROOT, in byte order."""
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(out, key=os.fsencode)


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """(v1, v2, changed paths): v2 edits the file in the middle of the text files and
    adds one right after the file a third of the way in."""
    base = tmp_path_factory.mktemp("stable")
    v1 = base / "v1"
    for sub in SUBDIRS:
        shutil.copytree(os.path.join(PYTHON_LIB, sub), v1 / sub,
                        ignore=shutil.ignore_patterns("__pycache__"))
    os.makedirs(v1 / "lib-dynload")
    for so in dynload(12):
        shutil.copyfile(so, v1 / "lib-dynload" / os.path.basename(so))
    v2 = base / "v2"
    shutil.copytree(v1, v2)
    text = [p for p in sources(v1) if p.endswith(".py")]
    edited, before_new = text[len(text) // 2], text[len(text) // 3]
    with open(v2 / edited, "r+b") as f:
        body = f.read()
        f.seek(0)
        f.write(b"# patched in v2\n" * 40 + body)
    added = before_new + "_added.py"
    # a few blocks' worth, so that everything after it moves by whole blocks
    (v2 / added).write_bytes(b"".join(b"x%d = %d\n" % (i, i * i) for i in range(20000)))
    return v1, v2, {edited, added}


def build(tree, image, *extra):
    return imageutil.build(tree, image, *ARGS, *extra)


def block_table(image):
    """[(offset, stored size, filter)] of IMAGE's blocks, as `stipple info --blocks`
    lists them."""
    out = run([STIPPLE, "info", "--blocks", image], check=True).stdout
    rows = [line.split() for line in out.splitlines()]
    return [(int(r[1]), int(r[2]), r[5]) for r in rows if len(r) == 6 and r[0].isdigit()]


def file_blocks(image):
    return storedblocks.file_blocks(STIPPLE, image)


def test_unchanged_files_keep_their_stored_blocks(releases, tmp_path):
    v1, v2, changed = releases
    i1, i2 = build(v1, tmp_path / "v1.stp"), build(v2, tmp_path / "v2.stp")
    old = storedblocks.block_hashes(STIPPLE, i1)
    have, new = set(old), storedblocks.block_hashes(STIPPLE, i2)
    held = file_blocks(i2)
    dirty = {b for b, paths in held.items() if paths & changed}
    assert dirty, "the changed files lie in no block"
    table = block_table(i2)
    assert [(o, len(b)) for o, b in storedblocks.stored_blocks(STIPPLE, i2)] == \
        [(o, n) for o, n, _ in table], "the walk and the block table disagree"
    # a changed file may move the files up to the next cut, in its block or the next
    moved = {b for b in range(len(new)) if new[b] not in have} - dirty
    assert len(moved) <= 2 * len(changed), (
        "%d of %d blocks holding only unchanged files came out different (blocks %s; "
        "those with changed files: %s)" % (len(moved), len(new) - len(dirty), sorted(moved),
                                           sorted(dirty)))
    # the machine code lies after both changes, moved along the stream: filtered from
    # each block's start, its blocks come out the same
    code = {b for b, paths in held.items() if any(p.endswith(".so") for p in paths)}
    assert code and not code & dirty
    assert max(dirty) < min(code) and len(new) > len(old)  # it moved
    assert any(table[b][2] == "x86" for b in code), "no block of machine code is filtered"
    assert all(new[b] in have for b in code), "blocks of unchanged machine code differ"
    sb = imageutil.superblock(open(i2, "rb").read(imageutil.SB_SIZE))
    assert sb["feat_incompat"] & FEAT_BCJ_RELATIVE, "filtered blocks without bcj-relative"
    # stipple diff --stat counts the same blocks shared, by their stored bytes
    left, shared = collections.Counter(old), 0
    for h in new:
        if left[h]:
            left[h] -= 1
            shared += 1
    stat = run([STIPPLE, "diff", "--stat", i1, i2]).stdout
    m = re.search(r"B shares (\d+) with A", stat)
    assert m and int(m.group(1)) == shared, stat.splitlines()[-1:]
    # a dictionary, trained anew for each release, would change every block using it
    info = json.loads(run([STIPPLE, "info", "--json", i2], check=True).stdout)
    assert "dictionary" not in info["features"] and info["dictionary"]["size"] == 0


def test_stable_images_read_back_as_their_trees(releases, tmp_path):
    for tree in releases[:2]:
        image = build(tree, tmp_path / (tree.name + ".stp"))
        out = extract_image(image, tmp_path / (tree.name + ".out"))
        for rel in sources(tree):
            assert filecmp.cmp(tree / rel, os.path.join(out, rel), shallow=False), rel
        assert sources(out) == sources(tree)


def test_the_packed_layout_shares_less(releases, tmp_path):
    """--no-stable-blocks gives back the old layout: blocks full to the brim, which an
    insertion shifts, and no bcj-relative bit."""
    v1, v2, _ = releases
    stable, packed = [], []
    for label, out, extra in (("s", stable, ()), ("p", packed, ("--no-stable-blocks",))):
        i1 = build(v1, tmp_path / (label + "1.stp"), *extra)
        i2 = build(v2, tmp_path / (label + "2.stp"), *extra)
        have = set(storedblocks.block_hashes(STIPPLE, i1))
        new = storedblocks.block_hashes(STIPPLE, i2)
        out += [sum(h in have for h in new), len(new), os.path.getsize(i2)]
        if extra:
            sb = imageutil.superblock(open(i2, "rb").read(imageutil.SB_SIZE))
            assert not sb["feat_incompat"] & FEAT_BCJ_RELATIVE
    assert packed[0] < stable[0] / 2, "shared blocks: packed %s, stable %s" % (packed, stable)
    assert packed[1] < stable[1]  # full blocks: fewer of them


def test_stable_image_is_the_same_whatever_threads_and_memory(releases, tmp_path):
    v2 = releases[1]
    one = build(v2, tmp_path / "t1.stp", "--threads", "1")
    two = build(v2, tmp_path / "t2.stp", "--threads", "2", "--memory", "2M")
    three = build(v2, tmp_path / "t3.stp", "--threads", "3", "--memory", "64M")
    assert filecmp.cmp(one, two, shallow=False)
    assert filecmp.cmp(one, three, shallow=False)


def test_hot_region_still_comes_first(releases, tmp_path):
    """With a hot list, its files fill the first blocks, and the cold blocks after it
    still come out the same in the next release."""
    v1, v2, changed = releases
    hot = [p for p in sources(v1) if p.startswith("json/")]
    listing = tmp_path / "hot.list"
    listing.write_text("".join(p + "\n" for p in hot))
    i1 = build(v1, tmp_path / "h1.stp", "--hot-list", listing)
    i2 = build(v2, tmp_path / "h2.stp", "--hot-list", listing)
    info = json.loads(run([STIPPLE, "info", "--json", i2], check=True).stdout)
    assert info["hot_size"] > 0
    held = file_blocks(i2)
    first_cold = min(b for b, paths in held.items() if any(p not in hot for p in paths))
    last_hot = max(b for b, paths in held.items() if paths & set(hot))
    assert last_hot < first_cold, "hot files in block %d, after cold ones" % last_hot
    have = set(storedblocks.block_hashes(STIPPLE, i1))
    new = storedblocks.block_hashes(STIPPLE, i2)
    dirty = {b for b, paths in held.items() if paths & changed}
    moved = {b for b in range(len(new)) if new[b] not in have} - dirty
    assert len(moved) <= 2 * len(changed), sorted(moved)
