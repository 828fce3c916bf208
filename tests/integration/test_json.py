# SPDX-License-Identifier: MIT
"""--json of info, ls, check and status: each output parses with Python's json, and its
figures match what an independent reader says (the source tree through os.lstat and
os.listxattr, the kernel's /proc, a byte flipped by hand)."""

import json
import os
import shutil
import stat

import pytest

from conftest import STIPPLE, run
import treeutil

KINDS = {"file": stat.S_ISREG, "dir": stat.S_ISDIR, "symlink": stat.S_ISLNK,
         "chardev": stat.S_ISCHR, "blockdev": stat.S_ISBLK, "fifo": stat.S_ISFIFO,
         "socket": stat.S_ISSOCK}
ACL_XATTRS = {"system.posix_acl_access", "system.posix_acl_default"}


def stipple_json(*args, status=0):
    r = run([STIPPLE, *args])
    assert r.returncode == status, r.stderr
    return json.loads(r.stdout)


def json_path(rel):
    """The JSON string of image path /REL (bytes): UTF-8 as it is, else escaped as the
    text is (stipple(1), JSON OUTPUT)."""
    path = b"/" + rel
    try:
        text = path.decode("utf-8")
        if "\0" not in text:
            return text
    except UnicodeDecodeError:
        pass
    from imageutil import escape_name
    return escape_name(path).decode("utf-8")


def source_entries(root):
    """{json path: (bytes path, lstat)} of everything below ROOT."""
    out = {}
    broot = os.fsencode(root)
    for dirpath, dirnames, filenames in os.walk(broot):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            out[json_path(os.path.relpath(p, broot))] = (p, os.lstat(p))
    return out


def kind_of(mode):
    return next(k for k, test in KINDS.items() if test(mode))


def test_ls_json_matches_lstat(gen_tree, gen_image):
    doc = stipple_json("ls", "--json", "-R", gen_image)
    assert doc["image"] == os.fspath(gen_image)
    entries = {e["path"]: e for e in doc["entries"]}
    assert len(entries) == len(doc["entries"]), "a path listed twice"
    source = source_entries(gen_tree)
    assert set(entries) == set(source)
    for path, (p, st) in source.items():
        e = entries[path]
        assert e["type"] == kind_of(st.st_mode), path
        assert e["mode"] == stat.S_IMODE(st.st_mode), path
        assert (e["uid"], e["gid"]) == (st.st_uid, st.st_gid), path
        assert e["mtime"] * 10**9 + e["mtime_nsec"] == st.st_mtime_ns, path
        names = set(os.listxattr(p, follow_symlinks=False))
        assert e["acl"] == bool(names & ACL_XATTRS), path
        if e["type"] != "dir":
            assert e["nlink"] == st.st_nlink, path
        if e["type"] in ("file", "symlink"):
            assert e["size"] == st.st_size, path
        if e["type"] == "symlink":
            assert e["target"] == os.readlink(p).decode("utf-8", "surrogateescape"), path
        if e["type"] in ("chardev", "blockdev"):
            assert e["rdev"] == [os.major(st.st_rdev), os.minor(st.st_rdev)], path


def test_ls_json_of_one_directory_and_one_file(gen_tree, gen_image):
    doc = stipple_json("ls", "--json", gen_image, "/files")
    assert [e["path"] for e in doc["entries"]] == \
        ["/files/" + n for n in sorted(os.listdir(os.path.join(gen_tree, "files")))]
    doc = stipple_json("ls", "--json", gen_image, "files/large")  # rooted in the JSON
    e, = doc["entries"]
    assert (e["path"], e["type"], e["size"]) == (
        "/files/large", "file", os.path.getsize(os.path.join(gen_tree, "files", "large")))


def test_info_json_matches_the_source(gen_tree, gen_image):
    doc = stipple_json("info", "--json", "--blocks", gen_image)
    counts = dict.fromkeys(KINDS, 0)
    seen, links, file_bytes, xattrs = set(), 0, 0, 0
    for p, st in [(os.fsencode(gen_tree), os.lstat(gen_tree))] + \
            list(source_entries(gen_tree).values()):
        counts[kind_of(st.st_mode)] += 1
        if not stat.S_ISDIR(st.st_mode) and st.st_ino in seen:
            links += 1
            continue
        seen.add(st.st_ino)
        xattrs += len(os.listxattr(p, follow_symlinks=False))
        file_bytes += st.st_size if stat.S_ISREG(st.st_mode) else 0
    tree = doc["tree"]
    assert {k: tree[k + "s"] for k in KINDS} == counts
    assert tree["hard_links"] == links
    assert tree["file_bytes"] == file_bytes
    assert tree["xattrs"] == xattrs
    assert doc["image_size"] == os.path.getsize(gen_image)
    assert doc["block_size"] == 64 << 10 and doc["format_version"] == 1
    assert doc["inodes"] == len(seen)
    assert doc["signer"] is None
    table = doc["block_table"]
    assert [b["block"] for b in table] == list(range(doc["blocks"]))
    # the blocks, the metadata and the superblock tile the file
    assert table[0]["offset"] == 256
    for a, b in zip(table, table[1:]):
        assert a["offset"] + a["stored"] == b["offset"]
    assert sum(b["decoded"] for b in table) == doc["data_size"]


def test_check_json_sound_and_damaged(gen_image, tmp_path):
    doc = stipple_json("check", "--json", gen_image)
    assert doc["ok"] is True and doc["problems"] == [] and doc["problem_count"] == 0
    assert doc["blocks"] == stipple_json("info", "--json", gen_image)["blocks"]
    table = stipple_json("info", "--json", "--blocks", gen_image)["block_table"]
    victim = table[len(table) // 2]
    bad = tmp_path / "bad.stipple"
    shutil.copyfile(gen_image, bad)
    treeutil.flip_byte(bad, victim["offset"] + victim["stored"] // 2)
    doc = stipple_json("check", "--json", bad, status=1)
    assert doc["ok"] is False and doc["problem_count"] == len(doc["problems"]) > 0
    assert any(p["path"] is None and ("block %d" % victim["block"]) in p["message"]
               for p in doc["problems"]), doc["problems"]
    doc = stipple_json("check", "--json", tmp_path / "missing", status=1)
    assert doc["ok"] is False and "No such file" in doc["problems"][0]["message"]


def test_status_json_matches_the_mount(gen_image, mounted):
    with mounted(gen_image) as mnt:
        text = run([STIPPLE, "status", mnt], check=True).stdout
        doc = stipple_json("status", "--json", mnt)
    assert doc["mount"] == os.fspath(mnt)
    assert doc["image"] == os.fspath(gen_image)
    assert isinstance(doc["pid"], int) and doc["pid"] > 1
    assert doc["block_size"] == 64 << 10
    assert "daemon:    pid %d," % doc["pid"] in text
    assert doc["rss_bytes"] > 0 and doc["peak_bytes"] >= doc["rss_bytes"]
    for key in ("cache_hits", "cache_misses", "cache_budget", "metadata_bytes"):
        assert isinstance(doc[key], int), key
