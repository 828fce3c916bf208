# SPDX-License-Identifier: MIT
"""stipple ls -R, -h, --blocks and the + of an ACL, against GNU ls on the source tree
and the sizes os.stat gives."""

import os
import random
import re
import subprocess

import pytest

from conftest import STIPPLE, build_image, run
from imageutil import FAST


def ls(*args, check=True):
    return run([STIPPLE, "ls", *args], check=check)


def gnu_ls(*args):
    return subprocess.run(["ls", *args], capture_output=True, text=True, check=True,
                          env=dict(os.environ, LC_ALL="C", TZ="UTC")).stdout


def test_ls_R_lists_as_gnu_ls_R(gen_tree, gen_image):
    # /a holds plain names: GNU ls prints them as stipple does
    ours = ls("-R", gen_image, "/a").stdout
    src = os.path.join(gen_tree, "a")
    theirs = gnu_ls("-R", src).replace(src, "/a")
    assert ours == theirs


def test_ls_R_from_the_root_reaches_every_directory(gen_tree, gen_image):
    headers = [line[:-1] for line in ls("-R", gen_image).stdout.splitlines()
               if line.startswith("/") and line.endswith(":")]
    want = ["/"]

    def walk(rel):  # ls -R's order: a directory's listing, then each subdirectory
        names = sorted(os.listdir(os.fsencode(os.path.join(gen_tree, rel))))
        for n in names:
            p = os.path.join(os.fsencode(gen_tree), os.fsencode(rel), n)
            if os.path.isdir(p) and not os.path.islink(p):
                sub = os.path.join(rel, os.fsdecode(n))
                if n.isascii() and n.decode().isprintable():
                    want.append("/" + sub)
                    walk(sub)
                else:
                    want.append(None)  # escaped in the output: compared by count only
                    walk(sub)
    walk("")
    assert len(headers) == len(want)
    assert [h for h, w in zip(headers, want) if w is not None] == [w for w in want if w]


def test_ls_h_sizes_as_gnu_ls_h(gen_tree, gen_image):
    ours = {line.split()[-1]: line.split()[4] for line in
            ls("-lh", gen_image, "/files").stdout.splitlines()}
    theirs = {line.split()[-1]: line.split()[4] for line in
              gnu_ls("-lnh", os.path.join(gen_tree, "files")).splitlines()[1:]}
    assert ours == theirs
    assert ours["large"] == "3.0M" and ours["noise-4097"] == "4.1K"


def test_ls_h_is_not_help():
    r = run([STIPPLE, "ls", "-h"])
    assert r.returncode == 2 and "missing operand" in r.stderr
    r = run([STIPPLE, "ls", "--help"], check=True)
    assert "-h, --human-readable" in r.stdout and "-h, --help" not in r.stdout


def test_ls_l_plus_marks_acls_as_gnu_ls(gen_tree_info, gen_image):
    if not gen_tree_info["acl"]:
        pytest.skip("this file system holds no POSIX ACLs")
    src = os.path.join(gen_tree_info["path"], "xattrs")
    ours = {line.split()[-1]: line.split()[0] for line in
            ls("-l", gen_image, "/xattrs").stdout.splitlines()}
    theirs = {line.split()[-1]: line.split()[0] for line in gnu_ls("-ln", src).splitlines()[1:]}
    assert ours == theirs
    assert ours["acl"].endswith("+") and ours["acl-dir"].endswith("+")
    assert not ours["file"].endswith("+")
    # a listing without ACLs keeps the plain ten-character mode
    assert all(len(line.split()[0]) == 10 for line in ls("-l", gen_image, "/files").stdout
               .splitlines())


@pytest.fixture(scope="module")
def noise_image(tmp_path_factory):
    """Files of random bytes (stored raw, so stored size == file size) across 64 KiB
    blocks, and a file of zeros (stored nowhere). Packed layout: stable cuts would pad a
    block of noise with zeros, and the block would no longer be stored raw."""
    root = tmp_path_factory.mktemp("blocks")
    src = root / "src"
    src.mkdir()
    rnd = random.Random(7)
    sizes = {"a": 1000, "b": 70_000, "c": 200_000, "d": 5}
    for name, size in sizes.items():
        (src / name).write_bytes(rnd.randbytes(size))
    (src / "zeros").write_bytes(bytes(100_000))
    (src / "empty").write_bytes(b"")
    return src, build_image(src, root / "n.stipple", *FAST, "--no-stable-blocks")


def block_set(field):
    out = set()
    for part in field.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def test_ls_blocks_stored_size_and_block_list(noise_image):
    src, image = noise_image
    lines = {line.split()[-1]: line.split() for line in
             ls("--blocks", image).stdout.splitlines()}
    blocks = {}
    for name in ("a", "b", "c", "d"):
        stored, where = int(lines[name][0]), lines[name][1]
        size = os.path.getsize(src / name)
        assert abs(stored - size) <= 1, (name, stored, size)
        blocks[name] = block_set(where)
        # as many blocks as the bytes span: no more, no fewer
        assert len(blocks[name]) in (-(-size // 65536), -(-size // 65536) + 1), (name, where)
    for name in ("zeros", "empty"):
        assert lines[name][:2] == ["0", "-"], lines[name]
    # the data stream has the files one after the other: their blocks cover 0..last once
    assert set().union(*blocks.values()) == set(range(max(max(b) for b in blocks.values()) + 1))
    doc = __import__("json").loads(ls("--blocks", "--json", image).stdout)
    for e in doc["entries"]:
        if e["path"] in ("/a", "/b", "/c", "/d"):
            got = set()
            for a, b in e["blocks"]:
                got.update(range(a, b + 1))
            assert got == blocks[e["path"][1:]]
            assert abs(e["stored"] - os.path.getsize(src / e["path"][1:])) <= 1
