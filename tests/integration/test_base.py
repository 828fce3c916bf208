# SPDX-License-Identifier: MIT
"""mkstipple --base OLD (issue 31): the blocks of the last release that hold unchanged
files are carried into the next one as they are stored.

Two releases of a real tree (part of Debian's Python standard library and some of its
machine code): v2 edits a few files, adds one, removes one and changes the mode of an
unchanged one. Stored blocks are found by walking the image files (storedblocks.py:
zstd's framing, not stipple's block table) and compared by SHA-256; which files lie in
which block comes from `stipple ls --blocks`; what `stipple publish` adds to a directory
is counted from the directory. Contents and attributes are compared with the source
trees (treeutil.compare_trees over `stipple extract`).
"""

import collections
import filecmp
import itertools
import json
import os
import shutil
import stat

import pytest

from conftest import PYTHON_LIB, STIPPLE, extract_image, run
import imageutil
import storedblocks
import treeutil

BS = "64K"
ARGS = ("--level", "3", "--block-size", BS)
SUBDIRS = ("json", "email", "http", "xml", "urllib", "logging", "importlib")


def sources(root):
    """Relative paths of the regular files below ROOT, in byte order."""
    out = []
    for d, _, files in os.walk(root):
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(out, key=os.fsencode)


def patch(path):
    """Changes the file at PATH in place, keeping its size close."""
    with open(path, "r+b") as f:
        body = f.read()
        f.seek(0)
        f.write(b"# patched\n" + body[: max(0, len(body) - 200)])
        f.truncate()


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """(v1, v2, paths of v1 that v2 changed or removed, paths v2 added)."""
    top = tmp_path_factory.mktemp("base")
    v1 = top / "v1"
    for sub in SUBDIRS:
        shutil.copytree(os.path.join(PYTHON_LIB, sub), v1 / sub,
                        ignore=shutil.ignore_patterns("__pycache__"))
    dyn = os.path.join(PYTHON_LIB, "lib-dynload")
    os.makedirs(v1 / "lib-dynload")
    for so in sorted(f for f in os.listdir(dyn) if f.endswith(".so"))[:8]:
        shutil.copyfile(os.path.join(dyn, so), v1 / "lib-dynload" / so)
    v2 = top / "v2"
    shutil.copytree(v1, v2, symlinks=True)
    text = [p for p in sources(v1) if p.endswith(".py")]
    edited = [text[len(text) // 5], text[len(text) // 2], text[4 * len(text) // 5]]
    for p in edited:
        patch(v2 / p)
    removed = text[len(text) // 3]
    os.unlink(v2 / removed)
    added = text[2 * len(text) // 3] + "_new.py"
    (v2 / added).write_bytes(b"".join(b"y%d = %d\n" % (i, 3 * i) for i in range(3000)))
    os.chmod(v2 / text[len(text) // 4], 0o600)  # same bytes, other mode
    return v1, v2, set(edited) | {removed}, {added}


def build(tree, image, *extra):
    return imageutil.build(tree, image, *ARGS, *extra)


def file_blocks(image):
    return storedblocks.file_blocks(STIPPLE, image)


def assert_reads_as(image, tree, tmp_path):
    out = tmp_path / (os.path.basename(image) + ".out")
    shutil.rmtree(out, ignore_errors=True)
    extract_image(image, out)
    diffs = treeutil.compare_trees(os.fspath(tree), os.fspath(out))
    assert not diffs, diffs[:10]


def published_blocks(image, out):
    """Publishes IMAGE into OUT; returns the block files it added."""
    def files():
        return {os.path.join(d, f) for d, _, fs in os.walk(out / "blocks") for f in fs}
    before = files()
    run([STIPPLE, "publish", image, out], check=True)
    return files() - before


def test_unchanged_files_keep_their_stored_blocks(releases, tmp_path):
    v1, v2, gone, added = releases
    i1 = build(v1, tmp_path / "v1.stp")
    i2 = build(v2, tmp_path / "v2.stp", "--base", i1)
    fresh = build(v2, tmp_path / "fresh.stp")
    old, new = storedblocks.block_hashes(STIPPLE, i1), storedblocks.block_hashes(STIPPLE, i2)
    # every block of v1 whose files are all unchanged is in v2, stored the same
    clean = [b for b, paths in file_blocks(i1).items() if not paths & gone]
    assert len(clean) > len(old) // 2
    missing = [b for b in clean if old[b] not in set(new)]
    assert not missing, "blocks of unchanged files not carried: %s" % missing
    # and v2's other blocks hold the changed and added files, after the carried ones
    held = file_blocks(i2)
    fresh_blocks = [b for b in range(len(new)) if new[b] not in set(old)]
    assert fresh_blocks and min(fresh_blocks) >= len(clean) - 1
    changed_now = (gone | added) & set(sources(v2))
    assert all(any(p in held[b] for b in fresh_blocks) for p in changed_now)
    # a fresh v2 shares fewer: a change moves the files after it
    shared_fresh = len(set(storedblocks.block_hashes(STIPPLE, fresh)) & set(old))
    assert sum(h in set(old) for h in new) > shared_fresh
    # published into one directory, v2 adds only its new blocks
    pub = tmp_path / "pub"
    assert len(published_blocks(i1, pub)) == len(set(old))
    assert len(published_blocks(i2, pub)) == len(set(new) - set(old))
    # what it serves is v2, contents, modes and all
    assert_reads_as(i2, v2, tmp_path)
    run([STIPPLE, "check", i2], check=True)


def test_a_chain_of_releases(releases, tmp_path):
    """v3 built on v2 (itself built on v1) reads as v3, and carries v2's blocks; OLD may
    be the file IMAGE replaces."""
    v1, v2, _, _ = releases
    v3 = tmp_path / "v3"
    shutil.copytree(v2, v3, symlinks=True)
    text = [p for p in sources(v3) if p.endswith(".py")]
    patch(v3 / text[len(text) // 7])
    image = tmp_path / "app.stp"
    build(v1, image)
    build(v2, image, "--base", image)
    two = storedblocks.block_hashes(STIPPLE, image)
    assert_reads_as(image, v2, tmp_path)
    shutil.copyfile(image, tmp_path / "v2.stp")
    build(v3, image, "--base", image)
    three = storedblocks.block_hashes(STIPPLE, image)
    assert sum(h in set(two) for h in three) >= len(two) - 2
    assert_reads_as(image, v3, tmp_path)


def test_blocks_mostly_dead_are_repacked(releases, tmp_path):
    """A block whose changed files held more than half its bytes is not carried (its
    unchanged files go into new blocks); one with a small change is."""
    v1 = releases[0]
    i1 = build(v1, tmp_path / "v1.stp")
    held = file_blocks(i1)
    where = collections.defaultdict(set)
    for b, paths in held.items():
        for p in paths:
            where[p].add(b)
    sizes = {p: os.path.getsize(v1 / p) for p in sources(v1)}
    # blocks whose files all lie in them alone, two files at least
    alone = sorted(b for b, paths in held.items() if len(paths) >= 3 and
                   all(where[p] == {b} and sizes[p] for p in paths))
    assert len(alone) >= 2
    dead, light = alone[0], alone[-1]
    v2 = tmp_path / "v2"
    shutil.copytree(v1, v2, symlinks=True)
    by_size = sorted(held[dead], key=lambda p: -sizes[p])
    total, gone = sum(sizes[p] for p in by_size), 0
    changed = []
    for p in by_size:  # the largest files first, until over 60% of the block
        if gone * 10 > total * 6:
            break
        changed.append(p)
        gone += sizes[p]
    kept_there = set(held[dead]) - set(changed)
    assert kept_there, "every file of block %d changed" % dead
    small = min(held[light], key=lambda p: sizes[p])
    assert sizes[small] * 4 < sum(sizes[p] for p in held[light])
    for p in changed + [small]:
        patch(v2 / p)
    i2 = build(v2, tmp_path / "v2.stp", "--base", i1)
    old, new = storedblocks.block_hashes(STIPPLE, i1), set(storedblocks.block_hashes(STIPPLE, i2))
    assert old[light] in new, "a block 3/4 live was not carried"
    assert old[dead] not in new, "a block under half live was carried"
    # its unchanged files were packed again, with the changed ones
    held2 = file_blocks(i2)
    old_set = set(old)
    hashes2 = storedblocks.block_hashes(STIPPLE, i2)
    for p in kept_there:
        assert all(hashes2[b] not in old_set for b, paths in held2.items() if p in paths), p
    assert_reads_as(i2, v2, tmp_path)


def split_block(image, tree):
    """A block of IMAGE whose files lie in it alone, and two sets of its files: changing
    the first leaves it 52 to 70% live; then changing the second too leaves 30 to 45% of
    its bytes live, yet over 55% of those the first left live."""
    held = file_blocks(image)
    where = collections.defaultdict(set)
    for b, paths in held.items():
        for p in paths:
            where[p].add(b)
    for b, paths in sorted(held.items()):
        if len(paths) > 10 or not all(where[p] == {b} for p in paths):
            continue
        names = sorted(paths)
        sizes = [os.path.getsize(tree / p) for p in names]
        total = sum(sizes)
        for pick in itertools.product((0, 1, 2), repeat=len(names)):
            a = sum(s for s, k in zip(sizes, pick) if k == 1) / total
            live3 = sum(s for s, k in zip(sizes, pick) if k == 0) / total
            if 0.3 <= a <= 0.48 and 0.3 <= live3 <= 0.45 and live3 / (1 - a) > 0.55:
                return (b, [p for p, k in zip(names, pick) if k == 1],
                        [p for p, k in zip(names, pick) if k == 2])
    pytest.fail("no block of %s splits so" % image)


def test_dead_bytes_of_earlier_releases_count(releases, tmp_path):
    """A block carried into v2 with 40% of its bytes dead holds them still in v3, though
    no file of v2 refers to them: when v3 changes another 20%, it is repacked."""
    v1 = releases[0]
    i1 = build(v1, tmp_path / "v1.stp")
    block, first, second = split_block(i1, v1)
    v2, v3 = tmp_path / "v2", tmp_path / "v3"
    shutil.copytree(v1, v2, symlinks=True)
    for p in first:
        patch(v2 / p)
    shutil.copytree(v2, v3, symlinks=True)
    for p in second:
        patch(v3 / p)
    i2 = build(v2, tmp_path / "v2.stp", "--base", i1)
    i3 = build(v3, tmp_path / "v3.stp", "--base", i2)

    mark = storedblocks.block_hashes(STIPPLE, i1)[block]
    assert mark in storedblocks.block_hashes(STIPPLE, i2), "the block was not carried"
    assert mark not in storedblocks.block_hashes(STIPPLE, i3), "carried under half live"
    assert_reads_as(i3, v3, tmp_path)


def test_base_images_do_not_depend_on_threads_or_memory(releases, tmp_path):
    v1, v2, _, _ = releases
    i1 = build(v1, tmp_path / "v1.stp")
    one = build(v2, tmp_path / "t1.stp", "--base", i1, "--threads", "1")
    two = build(v2, tmp_path / "t2.stp", "--base", i1, "--threads", "3", "--memory", "2M")
    assert filecmp.cmp(one, two, shallow=False)


def test_hot_region_is_built_anew_and_comes_first(releases, tmp_path):
    """The hot region comes from the new tree and its hot list: unchanged, its blocks
    come out as in OLD; the carried blocks follow it."""
    v1, v2, gone, _ = releases
    hot = [p for p in sources(v1) if p.startswith("json/")]
    assert not set(hot) & gone
    listing = tmp_path / "hot.list"
    listing.write_text("".join(p + "\n" for p in hot))
    i1 = build(v1, tmp_path / "h1.stp", "--hot-list", listing)
    i2 = build(v2, tmp_path / "h2.stp", "--hot-list", listing, "--base", i1)
    info1 = json.loads(run([STIPPLE, "info", "--json", i1], check=True).stdout)
    info2 = json.loads(run([STIPPLE, "info", "--json", i2], check=True).stdout)
    # at 64K the hot region has no blocks of its own: it fills whole blocks
    assert info1["hot_size"] and info2["hot_size"] == info1["hot_size"]
    nhot = -(-info1["hot_size"] // (64 << 10))
    old, new = storedblocks.block_hashes(STIPPLE, i1), storedblocks.block_hashes(STIPPLE, i2)
    assert new[:nhot] == old[:nhot], "unchanged hot region stored differently"
    assert sum(h in set(old[nhot:]) for h in new[nhot:]) > (len(old) - nhot) // 2
    held = file_blocks(i2)
    assert all(not paths - set(hot) for b, paths in held.items() if b < nhot)
    assert all(not paths & set(hot) for b, paths in held.items() if b >= nhot)
    assert_reads_as(i2, v2, tmp_path)


def refused(tree, image, old, *extra, words=()):
    """mkstipple --base OLD fails naming OLD (and WORDS), leaving IMAGE as it was."""
    before = open(image, "rb").read() if os.path.exists(image) else None
    r = imageutil.mkstipple(tree, image, "--base", old, *extra)
    assert r.returncode != 0, "built on %s" % old
    assert os.fspath(old) in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    after = open(image, "rb").read() if os.path.exists(image) else None
    assert after == before, "the output changed"
    assert not [f for f in os.listdir(os.path.dirname(image)) if f.startswith(".")], \
        "a temporary file was left"
    return r


def test_bases_that_cannot_be_reused_are_refused(releases, tmp_path):
    v1, v2, _, _ = releases
    out = tmp_path / "out"
    out.mkdir()
    image = out / "v2.stp"
    i1 = build(v1, tmp_path / "v1.stp")
    refused(v2, image, i1, "--level", "3", "--block-size", "128K", words=("64",))
    # a dictionary (the packed layout below 512K, on a tree where it pays: Python's
    # byte code) and position-dependent filters
    lib = tmp_path / "lib"
    for sub in ("email", "json", "asyncio", "unittest", "xml", "http", "encodings"):
        shutil.copytree(os.path.join(PYTHON_LIB, sub), lib / sub)
    packed = build(lib, tmp_path / "packed.stp", "--no-stable-blocks")
    feats = json.loads(run([STIPPLE, "info", "--json", packed], check=True).stdout)["features"]
    assert "dictionary" in feats
    refused(v2, image, packed, *ARGS, words=("dictionary",))
    big = imageutil.build(v1, tmp_path / "big.stp", "--level", "3", "-b", "512K",
                          "--no-stable-blocks")
    feats = json.loads(run([STIPPLE, "info", "--json", big], check=True).stdout)["features"]
    assert "bcj-x86" in feats and "bcj-relative" not in feats
    refused(v2, image, big, "--level", "3", "-b", "512K", words=("filtered",))
    refused(v2, image, i1, *ARGS, "--no-bcj", words=("--no-bcj",))
    r = imageutil.mkstipple(v2, image, *ARGS, "--base", i1, "--no-stable-blocks")
    assert r.returncode == 2 and "--no-stable-blocks" in r.stderr, r.stderr
    refused(v2, image, tmp_path / "none.stp", *ARGS)
    # an existing IMAGE stays as it was
    build(v2, image)
    refused(v2, image, big, "--level", "3", "-b", "512K")


def test_a_damaged_base_is_refused(releases, tmp_path):
    v1, v2, _, _ = releases
    i1 = build(v1, tmp_path / "v1.stp")
    out = tmp_path / "out"
    out.mkdir()
    blocks = storedblocks.stored_blocks(STIPPLE, i1)
    data = bytearray(open(i1, "rb").read())
    off, raw = blocks[len(blocks) // 2]
    data[off + len(raw) // 2] ^= 0x40  # a carried block's stored bytes
    bad = tmp_path / "bad-block.stp"
    bad.write_bytes(bytes(data))
    r = refused(v2, out / "v2.stp", bad, *ARGS, words=("damaged",))
    assert r.returncode == 1
    data = bytearray(open(i1, "rb").read())
    data[40] ^= 1  # the superblock
    bad = tmp_path / "bad-sb.stp"
    bad.write_bytes(bytes(data))
    refused(v2, out / "v2.stp", bad, *ARGS, words=("damaged",))
    # a metadata page (they lie between the last block and the page table), checked
    # only when it is read
    info = json.loads(run([STIPPLE, "info", "--json", i1], check=True).stdout)
    data = bytearray(open(i1, "rb").read())
    off, raw = blocks[-1]
    data[(off + len(raw) + info["metadata"]["offset"]) // 2] ^= 0x10
    bad = tmp_path / "bad-meta.stp"
    bad.write_bytes(bytes(data))
    refused(v2, out / "v2.stp", bad, *ARGS, words=("damaged",))
    assert not os.listdir(out)
    assert stat.S_ISREG(os.stat(i1).st_mode)
