# SPDX-License-Identifier: MIT
"""The reader subcommands of stipple: info, ls, cat, extract, check, on sound images and on
damaged ones (flipped bytes in the superblock, the metadata and a data block; a truncated
file)."""

import os
import re
import shutil
import stat
import subprocess
import time

import pytest

from conftest import IS_ROOT, PYTHON_LIB, STIPPLE, build_image, read_file, run
import treeutil
from imageutil import FAST, CraftedImage, escape_name

# What a copy made without root cannot hold.
NON_ROOT_IGNORE = treeutil.NON_ROOT_IGNORE


assert_same_tree = treeutil.assert_same_tree


def stipple_bytes(*args):
    """Runs stipple ARGS; stdout as bytes, stderr as text."""
    r = subprocess.run([STIPPLE, *map(os.fspath, args)], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=600)
    r.stderr = r.stderr.decode(errors="replace")
    return r


def stipple_text(*args):
    r = run([STIPPLE, *args])
    return r


def assert_fails_cleanly(r, image, what):
    """Exit status 1 (not a signal, not a usage error) and a message naming the image."""
    assert r.returncode == 1, "%s exited %d (want 1):\n%s" % (what, r.returncode, r.stderr)
    assert os.fspath(image) in r.stderr, "%s: no message naming %s:\n%s" % (
        what, image, r.stderr)


@pytest.fixture(scope="module")
def python_image(tmp_path_factory, stipple):
    return build_image(PYTHON_LIB, tmp_path_factory.mktemp("readers") / "python.stipple",
                       "--level", "3", "--block-size", "1M")


def info_fields(image):
    r = stipple_text("info", "--blocks", image)
    assert r.returncode == 0, r.stderr
    fields = {}
    for line in r.stdout.splitlines():
        m = re.match(r"([a-z][a-z -]*):\s+(.*)$", line)
        if m:
            fields[m.group(1)] = m.group(2)
    blocks = [tuple(int(v) for v in line.split()[:4]) for line in r.stdout.splitlines()
              if re.match(r"\d+\s+\d+\s+\d+\s+\d+\s", line)]
    return fields, blocks


def first_int(text):
    return int(re.match(r"\d+", text).group(0))


# extract


def test_extract_generated_tree_equals_source(gen_tree, gen_image, tmp_path):
    out = tmp_path / "out"
    r = stipple_text("extract", gen_image, out)
    assert r.returncode == 0, r.stderr
    assert_same_tree(gen_tree, out)


def test_extract_keeps_holes(gen_tree, gen_image, tmp_path):
    out = tmp_path / "out"
    assert stipple_text("extract", gen_image, out).returncode == 0
    st = os.stat(out / "files" / "sparse")
    assert st.st_size > 3 << 20
    assert st.st_blocks * 512 < 1 << 20, "the 3 MiB of holes were written as data"


def test_extract_python_lib_equals_source(python_image, tmp_path):
    out = tmp_path / "out"
    r = stipple_text("extract", python_image, out)
    assert r.returncode == 0, r.stderr
    assert_same_tree(PYTHON_LIB, out)


def test_extract_into_existing_empty_directory(gen_tree, gen_image, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert stipple_text("extract", gen_image, out).returncode == 0
    assert_same_tree(gen_tree, out)


def test_extract_refuses_a_non_empty_directory(gen_image, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_bytes(b"mine")
    r = stipple_text("extract", gen_image, out)
    assert r.returncode == 1
    assert "not empty" in r.stderr and os.fspath(out) in r.stderr
    assert os.listdir(out) == ["keep"] and (out / "keep").read_bytes() == b"mine"


def test_extract_refuses_a_file_as_destination(gen_image, tmp_path):
    dest = tmp_path / "file"
    dest.write_bytes(b"x")
    r = stipple_text("extract", gen_image, dest)
    assert r.returncode == 1 and os.fspath(dest) in r.stderr
    assert dest.read_bytes() == b"x"


def test_extract_symlinks_are_not_followed(tmp_path, stipple):
    """A tree whose symlinks point outside: extraction creates the links, writes nothing
    through them."""
    src = tmp_path / "src"
    outside = tmp_path / "outside"
    outside.mkdir()
    (src / "d").mkdir(parents=True)
    os.symlink(outside, src / "escape")
    os.symlink("../../outside", src / "d" / "up")
    (src / "d" / "file").write_bytes(b"inside")
    image = build_image(src, tmp_path / "img.stipple", *FAST)
    out = tmp_path / "out"
    assert stipple_text("extract", image, out).returncode == 0
    assert os.listdir(outside) == []
    assert os.readlink(out / "escape") == os.fspath(outside)
    assert_same_tree(src, out)


# cat


CAT_FILES = ["files/noise-65537", "files/text-200000", "files/large", "files/sparse",
             "files/empty", "files/zeros-written", "hard/two", "a/b/c/d/e/deep.txt",
             "names/with space", "names/" + treeutil.LONG_NAME, "xattrs/file", "modes/none"]


@pytest.mark.parametrize("rel", CAT_FILES)
def test_cat_equals_source(gen_tree, gen_image, rel):
    r = stipple_bytes("cat", gen_image, rel)
    assert r.returncode == 0, r.stderr
    assert r.stdout == read_file(os.path.join(gen_tree, rel)), rel


def test_cat_python_lib_files(python_image):
    for rel in ["os.py", "json/__init__.py", "encodings/cp1252.py"]:
        r = stipple_bytes("cat", python_image, "/" + rel)
        assert r.returncode == 0, r.stderr
        assert r.stdout == read_file(os.path.join(PYTHON_LIB, rel)), rel


@pytest.mark.parametrize("rel,why", [("files", "is a directory"),
                                     ("links/relative", "symbolic link"),
                                     ("special/fifo", "not a regular file"),
                                     ("files/missing", "No such file"),
                                     ("files/empty/below", "not a directory")])
def test_cat_refuses(gen_image, rel, why):
    r = stipple_bytes("cat", gen_image, rel)
    assert_fails_cleanly(r, gen_image, "cat " + rel)
    assert why in r.stderr and rel in r.stderr
    assert r.stdout == b""


# ls


def test_ls_lists_names_in_order(gen_tree, gen_image):
    for rel in ["", "files", "names", "many"]:
        r = stipple_bytes("ls", gen_image, rel or "/")
        assert r.returncode == 0, r.stderr
        want = sorted(os.listdir(os.fsencode(os.path.join(gen_tree, rel))))
        # escaped as stipple(1) says: the name with a newline stays on one line
        assert r.stdout == b"".join(escape_name(n) + b"\n" for n in want), rel


def test_ls_long_shows_modes_owners_sizes_targets(gen_tree, gen_image):
    for rel in ["files", "modes", "links", "special", "hard"]:
        r = stipple_text("ls", "-l", gen_image, rel)
        assert r.returncode == 0, r.stderr
        lines = {line.rsplit(" ", 1)[-1] if " -> " not in line
                 else line.split(" -> ")[0].rsplit(" ", 1)[-1]: line
                 for line in r.stdout.splitlines()}
        for name in os.listdir(os.path.join(gen_tree, rel)):
            st = os.lstat(os.path.join(gen_tree, rel, name))
            line = lines[name]
            fields = line.split()
            assert fields[0] == stat.filemode(st.st_mode), line
            assert (int(fields[1]), int(fields[2]), int(fields[3])) == (
                st.st_nlink if not stat.S_ISDIR(st.st_mode) else int(fields[1]),
                st.st_uid, st.st_gid), line
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
                assert "%d, %d" % (os.major(st.st_rdev), os.minor(st.st_rdev)) in \
                    re.sub(r",\s+", ", ", line), line
            elif not stat.S_ISDIR(st.st_mode):
                assert int(fields[4]) == st.st_size, line
            if stat.S_ISLNK(st.st_mode):
                assert line.endswith(" -> " + os.readlink(os.path.join(gen_tree, rel, name)))
            mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(st.st_mtime))
            assert mtime in line, line


def test_ls_of_a_file_lists_itself(gen_image):
    r = stipple_text("ls", "-l", gen_image, "/links/relative")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("lrwxrwxrwx")
    assert r.stdout.rstrip("\n").endswith("/links/relative -> ../files/text-100")


def test_ls_missing_path(gen_image):
    r = stipple_text("ls", gen_image, "no/such")
    assert_fails_cleanly(r, gen_image, "ls no/such")


# info


def source_counts(root):
    kinds = {"regular files": stat.S_ISREG, "directories": stat.S_ISDIR,
             "symlinks": stat.S_ISLNK, "char devices": stat.S_ISCHR,
             "block devices": stat.S_ISBLK, "fifos": stat.S_ISFIFO, "sockets": stat.S_ISSOCK}
    counts = dict.fromkeys(kinds, 0)
    seen, links = set(), 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames + ([] if dirpath != os.fspath(root) else ["."]):
            st = os.lstat(os.path.join(dirpath, name))
            for kind, test in kinds.items():
                if test(st.st_mode):
                    counts[kind] += 1
            if not stat.S_ISDIR(st.st_mode):
                links += st.st_ino in seen
                seen.add(st.st_ino)
    counts["hard links"] = links
    return counts


@pytest.mark.parametrize("which", ["gen", "python"])
def test_info_counts_match_source(which, gen_tree, request):
    image = request.getfixturevalue("gen_image" if which == "gen" else "python_image")
    root = gen_tree if which == "gen" else PYTHON_LIB
    fields, blocks = info_fields(image)
    for key, want in source_counts(root).items():
        assert first_int(fields[key]) == want, "%s: info says %s, source has %d" % (
            key, fields[key], want)
    assert first_int(fields["file bytes"]) == treeutil.tree_bytes(root)
    assert first_int(fields["format version"]) == 1
    assert first_int(fields["image size"]) == os.path.getsize(image)
    block_size = first_int(fields["block size"])
    data_size = first_int(fields["data size"])
    assert block_size == (64 << 10 if which == "gen" else 1 << 20)
    assert first_int(fields["blocks"]) == len(blocks) == -(-data_size // block_size)
    assert [b[0] for b in blocks] == list(range(len(blocks)))


# check


@pytest.mark.parametrize("which", ["gen", "python"])
def test_check_passes_on_a_sound_image(which, request):
    image = request.getfixturevalue("gen_image" if which == "gen" else "python_image")
    r = stipple_text("check", image)
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout and r.stderr == ""


# damaged images


def damage_offset(image, where):
    """An offset inside the part WHERE of IMAGE, from `stipple info --blocks`."""
    fields, blocks = info_fields(image)
    if where == "superblock":
        return 40
    m = re.match(r"(\d+) pages, (\d+) bytes stored, \d+ decoded; page table at offset (\d+), "
                 r"(\d+) bytes", fields["metadata"])
    assert m, fields["metadata"]
    pages_stored, table, table_len = (int(m.group(k)) for k in (2, 3, 4))
    if where == "metadata":  # the page table, read when the image is opened
        return table + table_len // 2
    if where == "metapage":  # the pages before it, each read when first needed
        return table - pages_stored // 2
    number, offset, stored = blocks[len(blocks) // 2][:3]
    return offset + stored // 2


def damaged_copy(image, tmp_path, where):
    bad = tmp_path / ("damaged-%s.stipple" % where)
    shutil.copyfile(image, bad)
    if where == "truncated":
        os.truncate(bad, os.path.getsize(image) * 2 // 3)
        return bad
    treeutil.flip_byte(bad, damage_offset(image, where))
    return bad


WHERE = ["superblock", "metadata", "metapage", "block", "truncated"]


@pytest.mark.parametrize("where", WHERE)
def test_check_reports_damage(gen_image, tmp_path, where):
    bad = damaged_copy(gen_image, tmp_path, where)
    r = stipple_text("check", bad)
    assert_fails_cleanly(r, bad, "check of a damaged image")
    assert "damaged" in r.stderr or "truncated" in r.stderr, r.stderr
    if where == "block":
        assert re.search(r"data block \d+: damaged", r.stderr), r.stderr
        # the files in the block are counted; -v names each
        assert re.search(r"data block \d+: damaged image; \d+ files? ha", r.stderr), r.stderr
        assert "its data lies in damaged block" in stipple_text("check", "-v", bad).stderr
    if where == "metapage":
        assert re.search(r"metadata page \d+: checksum mismatch", r.stderr), r.stderr
        assert re.search(r"metadata page \d+: damaged", r.stderr), r.stderr


def damaged_paths(image, check_stderr):
    return re.findall(re.escape(os.fspath(image)) + r": (/[^\n]*): its data lies in damaged block",
                      check_stderr)


def check_v_stderr(image):
    """What check -v says of IMAGE: every file in a damaged block named."""
    return stipple_text("check", "-v", image).stderr


@pytest.mark.parametrize("where", WHERE)
def test_cat_on_damage_fails_without_wrong_bytes(gen_tree, gen_image, tmp_path, where):
    bad = damaged_copy(gen_image, tmp_path, where)
    if where == "block":
        paths = damaged_paths(bad, check_v_stderr(bad))
        assert paths, "check named no file in the damaged block"
    else:
        paths = ["/files/large", "/files/text-100"]
    for path in paths[:5]:
        r = stipple_bytes("cat", bad, path)
        source = read_file(os.path.join(gen_tree, path.lstrip("/")))
        if where == "metapage" and r.returncode == 0:
            # the damaged page holds none of what this file needs
            assert r.stdout == source, "cat %s wrote bytes that are not the file's" % path
            continue
        assert_fails_cleanly(r, bad, "cat %s of a damaged image" % path)
        assert source.startswith(r.stdout), "cat %s wrote bytes that are not the file's" % path


@pytest.mark.parametrize("where", WHERE)
def test_extract_on_damage_never_writes_wrong_bytes(gen_tree, gen_image, tmp_path, where):
    bad = damaged_copy(gen_image, tmp_path, where)
    out = tmp_path / "out"
    r = stipple_text("extract", "-v", bad, out)  # -v: every file in a damaged block named
    assert_fails_cleanly(r, bad, "extract of a damaged image")
    if where not in ("block", "metapage"):
        # nothing can be trusted before the metadata is: nothing is extracted
        assert not out.exists() or os.listdir(out) == []
        return
    missing = []
    for line in treeutil.compare_trees(gen_tree, out, **({} if IS_ROOT else NON_ROOT_IGNORE)):
        path, _, what = line.partition(": ")
        if where == "metapage" and what.startswith("dir_nlink"):
            continue  # a directory that lost subdirectories counts fewer links
        assert what.startswith("missing from"), "extracted wrong: %s" % line
        missing.append("/" + path)
    assert missing, "a damaged %s lost no file" % where
    if where == "metapage":
        return  # what a lost directory held is missing, not reported one by one
    for path in missing:
        assert path + ":" in r.stderr, "%s is missing but not reported:\n%s" % (path, r.stderr)


# options


@pytest.mark.parametrize("cmd", ["info", "ls", "cat", "extract", "check"])
def test_help_and_version(cmd):
    r = stipple_text(cmd, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: stipple %s" % cmd), r.stdout
    r = stipple_text(cmd, "--version")
    assert r.returncode == 0 and re.match(r"stipple \d+\.\d+", r.stdout), r.stdout


@pytest.mark.parametrize("args", [["info"], ["ls"], ["cat", "x"], ["extract", "x"],
                                  ["check"], ["check", "a", "b"], ["info", "--bogus", "x"]])
def test_usage_errors_exit_2(args):
    r = stipple_text(*args)
    assert r.returncode == 2, r.stderr
    assert "usage: stipple %s" % args[0] in r.stderr


@pytest.mark.parametrize("cmd", ["info", "ls", "check"])
def test_missing_image(cmd, tmp_path):
    missing = tmp_path / "nope.stipple"
    r = stipple_text(cmd, missing)
    assert_fails_cleanly(r, missing, cmd)
    assert "No such file" in r.stderr


# crafted images: metadata rewritten to hold what no real tree can (cycles, bad names,
# duplicate names), with valid checksums, so that only the readers' own checks stand in
# the way. The layout follows common/format.c and stipple(5).

def crafted(tmp_path, make, edit):
    src = tmp_path / "src"
    src.mkdir()
    make(src)
    img = CraftedImage(build_image(src, tmp_path / "sound.stipple", *FAST))
    edit(img)
    return img.write(tmp_path / "crafted.stipple")


def test_crafted_rewrite_keeps_a_sound_image_sound(tmp_path, stipple):
    """The crafting itself (raw metadata, new checksums) yields a valid image."""
    def make(src):
        (src / "d").mkdir()
        (src / "d" / "f").write_bytes(b"data")
    image = crafted(tmp_path, make, lambda img: None)
    assert stipple_text("check", image).returncode == 0
    out = tmp_path / "out"
    assert stipple_text("extract", image, out).returncode == 0
    assert_same_tree(tmp_path / "src", out)


def test_crafted_directory_cycle(tmp_path, stipple):
    def make(src):
        (src / "a" / "b" / "c").mkdir(parents=True)
        (src / "a" / "b" / "c" / "f").write_bytes(b"leaf")

    image = crafted(tmp_path, make, lambda img: img.set_target("a/b", "c", img.lookup("a")))
    r = stipple_text("check", image)
    assert_fails_cleanly(r, image, "check of a cycle")
    assert "reached twice" in r.stderr
    out = tmp_path / "out"
    r = stipple_text("extract", image, out)
    assert_fails_cleanly(r, image, "extract of a cycle")
    assert "/a/b/c: directory inode" in r.stderr
    assert sorted(os.listdir(out / "a" / "b")) == []
    assert stipple_text("ls", image, "a/b/c/b/c/b").returncode == 0  # a loop, but finite


@pytest.mark.parametrize("bad", ["..", ".", "a/"])
def test_crafted_unsafe_names(tmp_path, stipple, bad):
    def make(src):
        (src / "d").mkdir()
        (src / "d" / ("x" * len(bad))).write_bytes(b"escape attempt")
        (src / "d" / "ok").write_bytes(b"fine")

    image = crafted(tmp_path, make, lambda img: img.rename("d", "x" * len(bad), bad))
    before = sorted(os.listdir(tmp_path))
    out = tmp_path / "out"
    r = stipple_text("extract", image, out)
    assert_fails_cleanly(r, image, "extract of a name %r" % bad)
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["out"])
    assert os.listdir(out / "d") == ["ok"]
    assert stipple_text("check", image).returncode == 1


def test_crafted_duplicate_name_cannot_redirect_through_a_symlink(tmp_path, stipple):
    """A symlink 'lnk' to a directory outside, then a directory also named 'lnk': the
    second must not be created through the first."""
    outside = tmp_path / "outside"
    outside.mkdir()

    def make(src):
        os.symlink(outside, src / "lnk")
        (src / "lnl").mkdir()
        (src / "lnl" / "payload").write_bytes(b"must not land outside")

    image = crafted(tmp_path, make, lambda img: img.rename("", "lnl", "lnk"))
    out = tmp_path / "out"
    r = stipple_text("extract", image, out)
    assert_fails_cleanly(r, image, "extract of a duplicate name")
    assert os.listdir(outside) == []
    assert os.path.islink(out / "lnk")
    r = stipple_text("check", image)
    assert_fails_cleanly(r, image, "check of a duplicate name")
    assert "out of order or a duplicate" in r.stderr


def test_crafted_link_count_and_unreachable_inode(tmp_path, stipple):
    """Entry b made to name a's inode: a's link count is wrong, b's inode unreachable."""
    def make(src):
        (src / "d").mkdir()
        (src / "d" / "a").write_bytes(b"first")
        (src / "d" / "b").write_bytes(b"second")

    holder = {}

    def edit(img):
        holder["b"] = img.lookup("d/b")
        img.set_target("d", "b", img.lookup("d/a"))

    image = crafted(tmp_path, make, edit)
    r = stipple_text("check", image)
    assert_fails_cleanly(r, image, "check of a wrong link count")
    assert "inode %d is not reached from the root" % holder["b"] in r.stderr, r.stderr
    assert "/d/a: link count 1, but 2 names" in r.stderr, r.stderr


def test_crafted_extent_past_the_file_size(tmp_path, stipple):
    def make(src):
        (src / "f").write_bytes(os.urandom(10000))
        (src / "g").write_bytes(b"fine")

    def edit(img):
        img.inode_put(img.lookup("f"), "size", 5000)

    image = crafted(tmp_path, make, edit)
    r = stipple_text("check", image)
    assert_fails_cleanly(r, image, "check of an extent past the size")
    assert "/f: extent 0" in r.stderr, r.stderr
    out = tmp_path / "out"
    r = stipple_text("extract", image, out)
    assert_fails_cleanly(r, image, "extract of an extent past the size")
    assert "/f:" in r.stderr
    assert sorted(os.listdir(out)) == ["g"]
