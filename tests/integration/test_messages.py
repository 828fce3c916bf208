# SPDX-License-Identifier: MIT
"""Messages for users: no source file and line unless STIPPLE_DEBUG=1; a damaged block
told once, with a count of the files in it (named with -v), however many files it
holds; a file that is not an image (empty, an archive, squashfs, erofs) named for what
it is, with what to run instead."""

import gzip
import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, run
from imageutil import FAST
import treeutil

SOURCE_PLACE = re.compile(r"\(\S+\.c:\d+\)")


@pytest.fixture(scope="module")
def many_small(tmp_path_factory):
    """300 small files of text, packed together into few blocks; one block damaged.
    Returns the source, the sound image, the damaged copy and the block's number."""
    root = tmp_path_factory.mktemp("many")
    src = root / "src"
    src.mkdir()
    for i in range(300):
        (src / ("f%03d" % i)).write_bytes(b"line %d of some text\n" % i * 40)
    image = build_image(src, root / "many.stipple", *FAST)
    table = json.loads(run([STIPPLE, "info", "--json", "--blocks", image],
                                         check=True).stdout)["block_table"]
    victim = table[len(table) // 2]
    bad = root / "bad.stipple"
    shutil.copyfile(image, bad)
    treeutil.flip_byte(bad, victim["offset"] + victim["stored"] // 2)
    return src, image, bad, victim["block"]


def test_damage_is_one_line_per_block_with_a_count(many_small, tmp_path):
    src, image, bad, block = many_small
    out = tmp_path / "out"
    r = run([STIPPLE, "extract", bad, out])
    assert r.returncode == 1
    # the files lost, by an independent count: what the output lacks of the source
    lost = [n for n in sorted(os.listdir(src)) if not (out / n).exists()]
    assert len(lost) > 10, "the damaged block held too few files for this test"
    lines = r.stderr.splitlines()
    assert len(lines) == 3, r.stderr  # the block, the count, the verdict
    assert lines[0].endswith("damaged image: block %d: checksum mismatch" % block), lines
    assert lines[1].endswith("data block %d: damaged image; %d files have data in it, the "
                             "first /%s (-v names them all)" % (block, len(lost), lost[0]))
    assert "%d entries not extracted" % len(lost) in lines[2]
    # -v names each file, and still tells the block once
    rv = run([STIPPLE, "extract", "-v", bad, tmp_path / "out-v"])
    named = re.findall(r": /(f\d+): cannot read block %d" % block, rv.stderr)
    assert sorted(named) == lost
    assert rv.stderr.count("block %d: checksum mismatch" % block) == 1


@pytest.mark.parametrize("cmd", ["check", "cat"])
def test_damage_block_told_once_without_source_place(many_small, cmd):
    src, image, bad, block = many_small
    entries = json.loads(run([STIPPLE, "ls", "--json", "--blocks", image],
                             check=True).stdout)["entries"]
    inside = [e["path"] for e in entries if any(a <= block <= b for a, b in e["blocks"])]
    args = ["check", bad] if cmd == "check" else ["cat", bad, inside[0]]
    r = run([STIPPLE, *args])
    assert r.returncode == 1
    assert not SOURCE_PLACE.search(r.stderr), r.stderr
    assert r.stderr.count("block %d: checksum mismatch" % block) == 1, r.stderr
    if cmd == "check":  # the first line no longer comes twice
        assert r.stderr.count("data block %d: damaged image" % block) == 1, r.stderr
        assert len(r.stderr.splitlines()) == 3, r.stderr
    r = run([STIPPLE, *args], env=dict(os.environ, STIPPLE_DEBUG="1"))
    assert SOURCE_PLACE.search(r.stderr), r.stderr


def foreign_files(tmp_path):
    """{name: (path, what the message must say)} of files that are not images."""
    small = tmp_path / "small"
    small.mkdir()
    (small / "a").write_bytes(b"hello\n")
    files = {}
    empty = tmp_path / "empty.stp"
    empty.write_bytes(b"")
    files["empty"] = (empty, "an empty file, not a stipple image")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(small / "a", arcname="a")
    tar = tmp_path / "x.tar"
    tar.write_bytes(buf.getvalue())
    files["tar"] = (tar, "a tar archive, not a stipple image; build one with mkstipple %s "
                    "OUT.stp" % tar)
    tgz = tmp_path / "x.tar.gz"
    tgz.write_bytes(gzip.compress(buf.getvalue()))
    files["gzip"] = (tgz, "a gzip-compressed file, not a stipple image")
    if shutil.which("mksquashfs"):
        sq = tmp_path / "x.sqfs"
        subprocess.run(["mksquashfs", small, sq, "-quiet", "-noappend"], check=True,
                       capture_output=True)
        files["squashfs"] = (sq, "a squashfs image, not a stipple image; mount it with "
                             "mount -t squashfs")
    if shutil.which("mkfs.erofs"):
        er = tmp_path / "x.erofs"
        subprocess.run(["mkfs.erofs", "--quiet", er, small], check=True, capture_output=True)
        files["erofs"] = (er, "an erofs image, not a stipple image; mount it with "
                          "mount -t erofs")
    return files


@pytest.mark.parametrize("cmd", ["info", "ls", "check", "cat", "extract", "diff"])
def test_not_an_image_says_what_it_is(tmp_path, cmd):
    for kind, (path, says) in foreign_files(tmp_path).items():
        args = {"cat": [path, "/a"], "extract": [path, tmp_path / ("out-" + kind)],
                "diff": [path, tmp_path / "small"]}.get(cmd, [path])
        r = run([STIPPLE, cmd, *args])
        assert r.returncode == (2 if cmd == "diff" else 1), (kind, r.stderr)
        assert r.stderr == "stipple %s: %s: %s" % (cmd, path, says) + r.stderr[
            len("stipple %s: %s: %s" % (cmd, path, says)):], (kind, r.stderr)
        assert len(r.stderr.splitlines()) == 1, (kind, r.stderr)
        assert not (tmp_path / ("out-" + kind)).exists()


@pytest.mark.parametrize("cmd", ["info", "ls", "check", "cat", "extract"])
def test_an_image_that_cannot_be_opened_is_one_line(many_small, tmp_path, cmd):
    src, image, bad, block = many_small
    short = tmp_path / "short.stipple"
    short.write_bytes(open(image, "rb").read()[:os.path.getsize(image) * 2 // 3])
    args = {"cat": [short, "/f000"], "extract": [short, tmp_path / "out"]}.get(cmd, [short])
    r = run([STIPPLE, cmd, *args])
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["stipple %s: %s: damaged image: truncated: %d bytes of %d"
                                     % (cmd, short, os.path.getsize(short),
                                        os.path.getsize(image))], r.stderr


@pytest.mark.needs_root("mounts")
@pytest.mark.parametrize("prog", ["mount.stipple", "stipple mount"])
def test_not_an_image_at_mount_is_one_line(tmp_path, prog):
    """mount.stipple and stipple mount say what the file is in one line, not the library's
    "bad magic" first."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cmd = [MOUNT_STIPPLE] if prog == "mount.stipple" else [STIPPLE, "mount"]
    name = os.path.basename(cmd[-1]) if prog == "mount.stipple" else "stipple mount"
    for kind, (path, says) in foreign_files(tmp_path).items():
        r = run([*cmd, path, mnt])
        lines = [ln for ln in r.stderr.splitlines() if "warning: sandbox" not in ln]
        assert r.returncode == (32 if prog == "mount.stipple" else 1), (kind, r.stderr)
        assert len(lines) == 1, (kind, r.stderr)
        assert lines[0].startswith("%s: %s: %s" % (name, path, says)), (kind, r.stderr)
        assert not is_mounted(mnt)


def test_damage_told_once_per_image_and_block(many_small, tmp_path):
    """`stipple diff A B` with block N damaged in both: each image's block is told, B's
    not taken for A's (the same number). B's first files are longer: its block N holds
    files that A has in a sound block, so that diff reads both."""
    src, image, bad, block = many_small
    tree = tmp_path / "tree"
    shutil.copytree(src, tree)
    for i in range(100):
        (tree / ("f%03d" % i)).write_bytes(b"line %d of some text\n" % i * 60)
    other = build_image(tree, tmp_path / "other.stipple", *FAST)
    table = json.loads(run([STIPPLE, "info", "--json", "--blocks", other],
                           check=True).stdout)["block_table"]
    victim = next(b for b in table if b["block"] == block)
    treeutil.flip_byte(other, victim["offset"] + victim["stored"] // 2)
    r = run([STIPPLE, "diff", bad, other])
    assert r.returncode == 2, r.stderr
    for name in (bad, other):
        told = [ln for ln in r.stderr.splitlines()
                if ln.startswith("stipple diff: %s: damaged image" % name)]
        assert len(told) == 1 and told[0].endswith(": block %d: checksum mismatch" % block), \
            r.stderr
