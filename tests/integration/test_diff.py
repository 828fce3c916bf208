# SPDX-License-Identifier: MIT
"""stipple diff: two images, or an image and a directory. The differences made by hand
to a copy of the source tree are exactly the lines printed, the exit status follows
diff(1), and --stat's shared blocks match the stored bytes Python compares itself."""

import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import STIPPLE, build_image, read_file, run
from imageutil import FAST
import treeutil


def diff(*args):
    return run([STIPPLE, "diff", *args])


def copy_tree(src, dst):
    subprocess.run(["cp", "-a", os.fspath(src), os.fspath(dst)], check=True)
    return dst


def changed_copy(gen_tree, dst):
    """A copy of the tree with one change of each kind; returns it and the lines
    stipple diff must print for it, in path order."""
    copy_tree(gen_tree, dst)
    p = lambda *parts: os.path.join(dst, *parts)  # noqa: E731
    shutil.rmtree(p("a", "b", "c"))
    os.mkdir(p("newdir"))
    with open(p("files", "text-100"), "ab") as f:
        f.write(b"more")
    data = bytearray(read_file(p("files", "noise-4096")))
    data[100] ^= 1
    with open(p("files", "noise-4096"), "wb") as f:
        f.write(data)
    os.chmod(p("a", "b", "mid.txt"), 0o600)
    os.lchown(p("files", "noise-1"), 5, 6)
    os.unlink(p("files", "empty"))
    os.symlink("x", p("files", "empty"))
    os.unlink(p("links", "dangling"))
    os.symlink("elsewhere", p("links", "dangling"))
    os.lchown(p("links", "dangling"), *(lambda st: (st.st_uid, st.st_gid))(
        os.lstat(os.path.join(gen_tree, "links", "dangling"))))
    os.setxattr(p("xattrs", "file"), "user.text", b"changed")
    os.setxattr(p("xattrs", "file"), "user.added", b"new")
    os.removexattr(p("xattrs", "file"), "user.empty")
    st = os.stat(os.path.join(gen_tree, "files", "text-100"))
    want = [
        "- /a/b/c: directory",
        "M /a/b/mid.txt: mode 0644 -> 0600",
        "M /files/empty: type file -> symlink",
        "M /files/noise-1: owner %d:%d -> 5:6" % (
            os.lstat(os.path.join(gen_tree, "files", "noise-1")).st_uid,
            os.lstat(os.path.join(gen_tree, "files", "noise-1")).st_gid),
        "M /files/noise-4096: contents",
        "M /files/text-100: contents (size %d -> %d)" % (st.st_size, st.st_size + 4),
        "M /links/dangling: target does/not/exist -> elsewhere",
        "+ /newdir: directory",
        "M /xattrs/file: xattr user.added only in B",
        "M /xattrs/file: xattr user.empty only in A",
        "M /xattrs/file: xattr user.text",
    ]
    return dst, want


def test_diff_image_and_its_source_are_the_same(gen_tree, gen_image):
    r = diff(gen_image, gen_tree)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = diff(gen_tree, gen_image)
    assert (r.returncode, r.stdout) == (0, "")


def test_diff_names_each_change(gen_tree, gen_image, tmp_path):
    changed, want = changed_copy(gen_tree, tmp_path / "changed")
    r = diff(gen_image, changed)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == want
    # two images: the same lines
    image = build_image(changed, tmp_path / "changed.stipple", *FAST)
    r = diff(gen_image, image)
    assert r.returncode == 1, r.stderr
    assert r.stdout.splitlines() == want
    r = diff("-q", gen_image, image)
    assert (r.returncode, r.stdout) == (1, "")


def test_diff_trouble_exits_2(gen_image, tmp_path):
    r = diff(gen_image, tmp_path / "missing")
    assert r.returncode == 2 and "missing" in r.stderr
    r = diff(gen_image)
    assert r.returncode == 2 and "usage: stipple diff" in r.stderr
    bad = tmp_path / "bad.stipple"
    shutil.copyfile(gen_image, bad)
    table = json.loads(run([STIPPLE, "info", "--json", "--blocks", bad], check=True).stdout)
    victim = table["block_table"][len(table["block_table"]) // 2]
    treeutil.flip_byte(bad, victim["offset"] + victim["stored"] // 2)
    r = diff(gen_image, bad)
    assert r.returncode == 2 and os.fspath(bad) in r.stderr


@pytest.mark.needs_root("a directory only another user can open")
def test_diff_directory_that_cannot_be_opened_is_named():
    """A directory operand stat says is one, that the user cannot open: one line naming it
    and why, exit 2 (before: exit 2 and not a word)."""
    top = pathlib.Path(tempfile.mkdtemp(prefix="stipple-diff-"))  # others may search /tmp
    try:
        diff_closed_directory(top)
    finally:
        shutil.rmtree(top)


def diff_closed_directory(top):
    (top / "closed").mkdir(parents=True)
    (top / "closed" / "f").write_text("x\n")
    (top / "open").mkdir()
    (top / "open" / "f").write_text("x\n")
    image = build_image(top / "open", top / "i.stp")
    os.chmod(top / "closed", 0)
    for p in (top, image):
        os.chmod(p, os.stat(p).st_mode | 0o755)
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    r = run([*nobody, STIPPLE, "diff", image, top / "closed"])
    assert r.returncode == 2, r.stderr
    assert r.stderr == "stipple diff: %s: cannot open: Permission denied\n" % (
        top / "closed"), r.stderr


def stored_blocks(image):
    """The SHA-256 of each block's stored bytes, read by Python at the offsets the block
    table gives."""
    table = json.loads(run([STIPPLE, "info", "--json", "--blocks", image],
                           check=True).stdout)["block_table"]
    with open(image, "rb") as f:
        out = []
        for b in table:
            f.seek(b["offset"])
            out.append((hashlib.sha256(f.read(b["stored"])).digest(), b["stored"]))
    return out


@pytest.mark.parametrize("change", ["mode", "tail"])
def test_diff_stat_counts_shared_blocks(gen_tree, gen_image, tmp_path, change):
    src = copy_tree(gen_tree, tmp_path / "src")
    if change == "mode":  # metadata alone: every block is shared
        os.chmod(src / "files" / "large", 0o600)
    else:  # the last file in the stream grows: the blocks before it stay
        with open(src / "xattrs" / "file", "ab") as f:
            f.write(os.urandom(100_000))
    image = build_image(src, tmp_path / "b.stipple", *FAST)
    r = diff("--stat", gen_image, image)
    assert r.returncode == 1, r.stderr
    a, b = stored_blocks(gen_image), stored_blocks(image)
    shared = [blk for blk in b if blk in set(a)]
    line = r.stdout.splitlines()[-1]
    want = "B shares %d with A" % len(shared)
    assert want in line, (line, want)
    assert line.startswith("blocks: A %d " % len(a))
    if change == "mode":
        assert len(shared) == len(b) and "100.0% of B" in line
    else:
        assert 0 < len(shared) < len(b)
    r = diff("--stat", gen_image, src)
    assert r.returncode == 2 and "--stat compares two images" in r.stderr


# --- a directory side that changes under diff: nothing outside it read, nothing blocks ---

def swapping(tree, swap, seconds=3.0):
    """Runs `stipple diff IMAGE TREE` over and over for SECONDS while SWAP(stop) changes
    TREE in another thread; returns every run."""
    stop = threading.Event()
    t = threading.Thread(target=swap, args=(stop,))
    runs = []
    t.start()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            runs.append(run([STIPPLE, "diff", tree.parent / "img.stipple", tree], timeout=20))
    finally:
        stop.set()
        t.join()
    return runs


def swap_tree(tmp_path):
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "f").write_bytes(b"x" * 5000)
    build_image(tree, tmp_path / "img.stipple", *FAST)
    return tree


def test_diff_never_blocks_on_a_fifo_put_in_a_files_place(tmp_path):
    tree = swap_tree(tmp_path)
    f = os.fspath(tree / "a" / "f")
    spare = os.fspath(tmp_path / "spare")  # outside the tree, on its filesystem

    def swap(stop):
        while not stop.is_set():
            os.mkfifo(spare)
            os.rename(spare, f)
            with open(spare, "wb") as out:
                out.write(b"x" * 5000)
            os.rename(spare, f)

    runs = swapping(tree, swap)  # a run that blocks in open raises TimeoutExpired
    assert len(runs) > 10
    for r in runs:
        assert r.returncode in (0, 1, 2), r.stderr
        assert r.stdout in ("", "M /a/f: type file -> fifo\n"), r.stdout
    # and once it holds still: a type difference
    os.unlink(f)
    os.mkfifo(f)
    r = run([STIPPLE, "diff", tmp_path / "img.stipple", tree], timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (1, "M /a/f: type file -> fifo\n", "")


def test_diff_never_follows_a_directory_swapped_for_a_symlink(tmp_path):
    tree = swap_tree(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"s")
    a = os.fspath(tree / "a")

    def swap(stop):
        while not stop.is_set():
            os.rename(a, a + ".real")
            os.symlink(tmp_path / "outside", a)
            os.unlink(a)
            os.rename(a + ".real", a)

    runs = swapping(tree, swap)
    assert len(runs) > 10
    for r in runs:
        assert r.returncode in (0, 1, 2), r.stderr
        assert "secret" not in r.stdout + r.stderr
    # and once it holds still: a type difference, nothing below the link
    os.rename(a, tmp_path / "a.real")
    os.symlink(tmp_path / "outside", a)
    r = run([STIPPLE, "diff", tmp_path / "img.stipple", tree], timeout=20)
    assert (r.returncode, r.stdout, r.stderr) == (1, "M /a: type dir -> symlink\n", "")
