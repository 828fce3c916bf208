# SPDX-License-Identifier: MIT
"""stipple extract IMAGE DIR PATH...: only the named paths, what lies below them and the
directories leading to them, byte for byte as the source has them; -v lists each path
written, as tar -v does."""

import os
import stat
import subprocess

import pytest

from conftest import STIPPLE, read_file, run


def extract(*args):
    return run([STIPPLE, "extract", *args])


def tree_paths(root):
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, name), root))
    return out


def expected(gen_tree, asked):
    """What extracting ASKED (paths relative to the root) must make: each, all below
    each, and each directory on the way."""
    want = set()
    for a in asked:
        parts = a.split("/")
        want.update("/".join(parts[:i]) for i in range(1, len(parts)))
        want.add(a)
        if os.path.isdir(os.path.join(gen_tree, a)) and not os.path.islink(
                os.path.join(gen_tree, a)):
            want.update(os.path.join(a, p) for p in tree_paths(os.path.join(gen_tree, a)))
    return want


ASKED = ["a/b/c", "files/text-100", "hard/two", "links/relative"]


def test_extract_named_paths_only(gen_tree, gen_image, tmp_path):
    out = tmp_path / "out"
    r = extract("-v", gen_image, out, "/a/b/c/", "files//text-100", "./hard/two",
                "links/relative")
    assert r.returncode == 0, r.stderr
    want = expected(gen_tree, ASKED)
    assert tree_paths(out) == want
    for rel in want:
        src, dst = os.path.join(gen_tree, rel), os.path.join(out, rel)
        s, d = os.lstat(src), os.lstat(dst)
        assert stat.S_IFMT(s.st_mode) == stat.S_IFMT(d.st_mode), rel
        assert stat.S_IMODE(s.st_mode) == stat.S_IMODE(d.st_mode), rel
        if stat.S_ISREG(s.st_mode):
            assert read_file(src) == read_file(dst), rel
        if stat.S_ISLNK(s.st_mode):
            assert os.readlink(src) == os.readlink(dst), rel
    # -v: one line per path written, directories with a slash, as tar -v
    listed = r.stdout.splitlines()
    assert len(listed) == len(set(listed))
    assert set(listed) == {p + "/" if os.path.isdir(os.path.join(out, p)) and
                           not os.path.islink(os.path.join(out, p)) else p for p in want}


def test_extract_without_v_lists_nothing(gen_image, tmp_path):
    r = extract(gen_image, tmp_path / "out", "files/text-100")
    assert (r.returncode, r.stdout) == (0, "")


@pytest.mark.parametrize("bad", ["no/such", "files/text-100/below", "../etc"])
def test_extract_refuses_a_path_not_in_the_image(gen_image, tmp_path, bad):
    out = tmp_path / "out"
    r = extract(gen_image, out, "files/text-100", bad)
    assert r.returncode == 1, r.stderr
    assert bad in r.stderr
    assert not out.exists(), "something was written for a command that failed"


def test_extract_tar_v_lists_each_member_on_stderr(gen_image, tmp_path):
    import io
    import tarfile
    r = subprocess.run([STIPPLE, "extract", "--tar", "-v", gen_image, "-"],
                       stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr
    with tarfile.open(fileobj=io.BytesIO(r.stdout)) as t:
        members = [m.name + ("/" if m.isdir() and m.name != "." else "") for m in t]
    members = ["./" if m == "." else m if m.startswith("./") else "./" + m for m in members]
    listed = [line for line in r.stderr.decode("utf-8", "replace").splitlines()
              if line.startswith("./")]
    # the names a terminal could be fooled by are escaped in the list: compare the rest
    plain = [m for m in members if m.isprintable() and "\\" not in m and m.isascii()]
    assert [m for m in listed if m in set(plain)] == plain
    assert len(listed) == len(members)


def test_the_image_is_opened_once(gen_image, tmp_path):
    """The PATHs are checked in the image that is extracted: opened once, so an image
    replaced in between cannot have its PATHs checked in one file and extracted from
    another (the old extract opened it twice and, the PATHs gone, made DIR and exited
    0). strace counts the look-ups of the image's path: one for the check that it is not
    another program's format (its first bytes), one for the image's open; the old
    extract made four."""
    out = tmp_path / "out"
    trace = tmp_path / "trace"
    r = run(["strace", "-f", "-e", "trace=open,openat,openat2", "-o", trace,
             STIPPLE, "extract", gen_image, out, "files/text-100"])
    assert r.returncode == 0, r.stderr
    opens = [line for line in trace.read_text().splitlines()
             if '"%s"' % os.fspath(gen_image) in line]
    assert len(opens) == 2, opens
    assert os.path.exists(out / "files" / "text-100")
