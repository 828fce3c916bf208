# SPDX-License-Identifier: MIT
"""Walks over the mount: what the kernel is allowed to cache for good (entries, negative
entries, attributes, listings) and what the FUSE side's shortcuts (attributes in
READDIRPLUS replies only where a walker uses them, EOPNOTSUPP for the xattrs of an image
that stores none) must keep true, checked against the source tree through libc's own
readdir, telldir and seekdir."""

import ctypes
import ctypes.util
import errno
import os
import random
import re
import stat
import subprocess
import time

import pytest

from conftest import STIPPLE, build_image, mount_image, run
from test_mount import foreground_mount
import treeutil

pytestmark = pytest.mark.needs_root

BIG = 3000  # entries of the large directory


# ---- libc's directory stream -------------------------------------------------------------

class Dirent64(ctypes.Structure):
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.opendir.restype = ctypes.c_void_p
libc.opendir.argtypes = [ctypes.c_char_p]
libc.readdir64.restype = ctypes.POINTER(Dirent64)
libc.readdir64.argtypes = [ctypes.c_void_p]
libc.telldir.restype = ctypes.c_long
libc.telldir.argtypes = [ctypes.c_void_p]
libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
libc.closedir.argtypes = [ctypes.c_void_p]

DT = {stat.S_IFDIR: 4, stat.S_IFREG: 8, stat.S_IFLNK: 10, stat.S_IFIFO: 1, stat.S_IFSOCK: 12,
      stat.S_IFCHR: 2, stat.S_IFBLK: 6}


class DirStream:
    def __init__(self, path):
        self.d = libc.opendir(os.fsencode(path))
        assert self.d, "opendir %s: %s" % (path, os.strerror(ctypes.get_errno()))

    def read(self):
        """(name bytes, d_ino, d_type) or None at the end."""
        ctypes.set_errno(0)
        e = libc.readdir64(self.d)
        if not e:
            assert ctypes.get_errno() == 0, os.strerror(ctypes.get_errno())
            return None
        return e.contents.d_name, e.contents.d_ino, e.contents.d_type

    def tell(self):
        return libc.telldir(self.d)

    def seek(self, pos):
        libc.seekdir(self.d, pos)

    def close(self):
        libc.closedir(self.d)


def read_all(path, stat_each=False):
    """Every entry of PATH as libc returns it, in order; STAT_EACH lstats each entry as it
    comes (the way ls -l walks, which the kernel answers with READDIRPLUS)."""
    d, out = DirStream(path), []
    try:
        while (e := d.read()) is not None:
            out.append(e)
            if stat_each:
                os.lstat(os.path.join(os.fsencode(path), e[0]))
    finally:
        d.close()
    return out


# ---- the tree ----------------------------------------------------------------------------

def long_name(i):
    """Names of 6 to 255 bytes, all distinct, sorting apart from their numbers."""
    return "n%05d-" % i + "abcdefghijklmnopqrstuvwxyz"[i % 26] * (i * 37 % 249)


def make_walk_tree(root, xattrs=True):
    """A large directory of files, directories, links and FIFOs with long names and
    distinct mtimes, a nested chain, hard links across directories."""
    big = os.path.join(root, "big")
    os.makedirs(big)
    for i in range(BIG):
        p = os.path.join(big, long_name(i))
        if i % 10 == 3:
            os.mkdir(p)
            with open(os.path.join(p, "inside"), "w") as f:
                f.write("in %d\n" % i)
        elif i % 17 == 5:
            os.symlink("../target-%d" % i, p)
        elif i % 101 == 7:
            os.mkfifo(p)
        else:
            with open(p, "w") as f:
                f.write("x" * (i % 300))
            os.chmod(p, 0o600 + (i % 3) * 0o44)
        os.utime(p, ns=(0, 1_600_000_000_000_000_000 + i * 1_000_003), follow_symlinks=False)
    deep = os.path.join(root, "a", "b", "c", "d")
    os.makedirs(deep)
    with open(os.path.join(deep, "leaf.py"), "w") as f:
        f.write("VALUE = 42\n")
    os.link(os.path.join(big, long_name(0)), os.path.join(root, "a", "hard"))
    os.link(os.path.join(big, long_name(0)), os.path.join(deep, "hard2"))
    if xattrs:
        os.setxattr(os.path.join(root, "a", "hard"), "user.walk", b"value")
    return root


@pytest.fixture(scope="module")
def walk_tree(tmp_path_factory):
    return make_walk_tree(str(tmp_path_factory.mktemp("walk") / "tree"))


@pytest.fixture(scope="module")
def walk_image(walk_tree, tmp_path_factory):
    image = tmp_path_factory.mktemp("walk-image") / "walk.stipple"
    return build_image(walk_tree, image, "--level", "3")


@pytest.fixture(scope="module")
def bare_image(tmp_path_factory):
    """The same tree stored without extended attributes."""
    tree = make_walk_tree(str(tmp_path_factory.mktemp("bare") / "tree"), xattrs=False)
    image = tmp_path_factory.mktemp("bare-image") / "bare.stipple"
    return build_image(tree, image, "--level", "3", "--no-xattrs")


def opcodes(fg):
    return re.findall(r"opcode: (\w+)", fg.log())


def settle(fg):
    """Waits until the daemon's debug log stops growing (its replies are all written)."""
    size = -1
    while size != len(fg.log()):
        size = len(fg.log())
        time.sleep(0.2)


# ---- the tests ---------------------------------------------------------------------------

def test_walk_matches_source(walk_tree, walk_image):
    """os.walk and os.lstat over the mount give the source's modes, sizes, mtimes, link
    counts and contents; inode numbers agree between readdir, lstat, "." and "..", and
    hard links share theirs."""
    with mount_image(walk_image) as mnt:
        diffs = treeutil.compare_trees(walk_tree, mnt)
        assert not diffs, "\n".join(diffs[:40])
        seen = {}
        for top, dirs, files in os.walk(mnt):
            here = os.lstat(top)
            for e in read_all(top):
                name = os.fsdecode(e[0])
                if name == ".":
                    assert e[1] == here.st_ino, top
                    continue
                if name == "..":
                    if top != mnt:
                        assert e[1] == os.lstat(os.path.dirname(top)).st_ino, top
                    continue
                st = os.lstat(os.path.join(top, name))
                assert e[1] == st.st_ino, (top, name)
                assert st.st_dev == here.st_dev
                src = os.lstat(os.path.join(walk_tree, os.path.relpath(top, mnt), name))
                if src.st_nlink == 1 or stat.S_ISDIR(src.st_mode):
                    assert st.st_ino not in seen, (name, seen.get(st.st_ino))
                seen.setdefault(st.st_ino, name)
        hard = {os.lstat(os.path.join(mnt, p)).st_ino
                for p in ("big/" + long_name(0), "a/hard", "a/b/c/d/hard2")}
        assert len(hard) == 1


@pytest.mark.parametrize("stat_each", [False, True], ids=["names", "ls-l"])
def test_large_directory_every_name_once(walk_tree, walk_image, stat_each):
    """A directory of thousands of long names lists each name once, with its type, on a
    fresh mount and again from the kernel's cached listing; whether or not the walker
    stats what it reads (which changes which replies carry attributes), the attributes
    it then gets are the source's."""
    src = os.path.join(walk_tree, "big")
    want = {os.fsencode(n): DT[stat.S_IFMT(os.lstat(os.path.join(src, n)).st_mode)]
            for n in os.listdir(src)}
    assert len(want) == BIG
    with mount_image(walk_image) as mnt:
        for _ in range(2):
            got = read_all(os.path.join(mnt, "big"), stat_each=stat_each)
            names = [e[0] for e in got if e[0] not in (b".", b"..")]
            assert len(names) == len(set(names)) == BIG
            assert {e[0]: e[2] for e in got if e[0] not in (b".", b"..")} == want
            assert sorted(e[0] for e in got if e[0] in (b".", b"..")) == [b".", b".."]
        for name in sorted(want)[::97]:
            a = os.lstat(os.path.join(os.fsencode(src), name))
            b = os.lstat(os.path.join(os.fsencode(mnt), b"big", name))
            size = lambda st: None if stat.S_ISDIR(st.st_mode) else st.st_size  # noqa: E731
            assert (a.st_mode, size(a), a.st_mtime_ns, a.st_nlink) == \
                (b.st_mode, size(b), b.st_mtime_ns, b.st_nlink), name


def test_seekdir_telldir_round_trip(walk_image):
    """telldir before an entry and seekdir back to it returns that entry again, on the
    first pass (answered by the daemon) and once the listing is cached."""
    rng = random.Random(17)
    with mount_image(walk_image) as mnt:
        for _ in range(2):
            d = DirStream(os.path.join(mnt, "big"))
            try:
                marks = []
                while True:
                    pos = d.tell()
                    e = d.read()
                    if e is None:
                        break
                    marks.append((pos, e[0]))
                assert len(marks) == BIG + 2
                for pos, name in rng.sample(marks, 200) + [marks[0], marks[-1]]:
                    d.seek(pos)
                    e = d.read()
                    assert e is not None and e[0] == name, (pos, name, e)
                d.seek(marks[-1][0])
                d.read()
                assert d.read() is None
            finally:
                d.close()


def test_negative_lookup_cached_and_real_names_found(walk_tree, walk_image, tmp_path):
    """A name that is not there is asked for once (the kernel keeps the negative entry),
    and names next to it, prefixes and extensions of it included, still resolve to the
    source's entries."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    present = long_name(1234)
    missing = [present + "x", present[:-1], "n01234", "zzz", long_name(1234).upper()]
    with foreground_mount(walk_image, mnt, "-o", "debug") as fg:
        big = os.path.join(mnt, "big")
        for name in missing:
            assert not os.path.lexists(os.path.join(big, name)), name
        settle(fg)
        before = opcodes(fg).count("LOOKUP")
        for _ in range(3):
            for name in missing:
                with pytest.raises(FileNotFoundError):
                    os.lstat(os.path.join(big, name))
        settle(fg)
        assert opcodes(fg).count("LOOKUP") == before, "a cached negative entry was asked again"
        for name in (present, long_name(1233), long_name(1235)):
            a = os.lstat(os.path.join(walk_tree, "big", name))
            b = os.lstat(os.path.join(big, name))
            assert (a.st_mode, a.st_mtime_ns) == (b.st_mode, b.st_mtime_ns), name
            assert stat.S_ISDIR(a.st_mode) or a.st_size == b.st_size, name
        with pytest.raises(FileNotFoundError):
            os.lstat(os.path.join(big, present + "x"))
        # a missing name inside a directory and one in a missing directory
        with pytest.raises(NotADirectoryError):
            os.lstat(os.path.join(big, present, "below"))
        with pytest.raises(FileNotFoundError):
            os.lstat(os.path.join(big, "zzz", "below"))


def test_xattrs_of_image_without_any(bare_image, walk_image, tmp_path):
    """An image that stores no extended attribute answers getxattr with EOPNOTSUPP, so
    that ls -l asks once per mount and not twice per file; listxattr is empty; the status
    attribute of the root still answers. An image with attributes says ENODATA for a name
    it lacks and gives the ones it has."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with foreground_mount(bare_image, mnt, "-o", "debug") as fg:
        f = os.path.join(mnt, "a", "hard")
        for name in ("security.selinux", "system.posix_acl_access", "user.walk"):
            with pytest.raises(OSError) as e:
                os.getxattr(f, name, follow_symlinks=False)
            assert e.value.errno == errno.EOPNOTSUPP, name
        assert os.listxattr(f) == []
        r = run([STIPPLE, "status", mnt], check=True)
        assert "daemon:" in r.stdout
        settle(fg)
        first = len(opcodes(fg))
        r = subprocess.run(["ls", "-l", os.path.join(mnt, "big")], capture_output=True, text=True,
                           check=True)
        assert len(r.stdout.splitlines()) == BIG + 1
        settle(fg)
        ops = opcodes(fg)[first:]
        assert ops.count("GETXATTR") <= 4, ops.count("GETXATTR")
        # the walker stats what it lists: the listing's later replies carry attributes
        assert ops.count("LOOKUP") < BIG // 2, ops.count("LOOKUP")
    with mount_image(walk_image) as mnt2:
        f = os.path.join(mnt2, "a", "hard")
        assert os.getxattr(f, "user.walk") == b"value"
        with pytest.raises(OSError) as e:
            os.getxattr(f, "user.absent")
        assert e.value.errno == errno.ENODATA


def test_find_asks_no_file_attributes(walk_tree, walk_image, tmp_path):
    """find, which only needs names and types, makes the daemon look nothing up but
    directories, and lists the source's names; the kernel was given no attributes of
    files it did not ask for."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with foreground_mount(walk_image, mnt, "-o", "debug") as fg:
        r = subprocess.run(["find", mnt], capture_output=True, text=True, check=True)
        settle(fg)
        ops = opcodes(fg)
        # The first listing of big gave its subdirectories attributes, not its files:
        # a stat of one of each looks up the file only.
        os.lstat(os.path.join(mnt, "big", long_name(0)))
        os.lstat(os.path.join(mnt, "big", long_name(3)))
        settle(fg)
        assert opcodes(fg)[len(ops):].count("LOOKUP") == 1
    want = subprocess.run(["find", "."], cwd=walk_tree, capture_output=True, text=True,
                          check=True).stdout.splitlines()
    got = [os.path.join(".", os.path.relpath(p, mnt)) if p != str(mnt) else "." for p in r.stdout.splitlines()]
    assert sorted(got) == sorted(want)
    dirs = sum(1 for p in want if os.path.isdir(os.path.join(walk_tree, p)) and
               not os.path.islink(os.path.join(walk_tree, p)))
    assert ops.count("LOOKUP") <= dirs, ops.count("LOOKUP")


def test_caches_end_with_the_mount(walk_image, bare_image, tmp_path):
    """What the kernel cached for one mount is not served for the next one at the same
    place: an image whose a/hard has no xattr, then one whose a/hard has, and the status
    attribute, which changes, is answered afresh each time."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with mount_image(bare_image, mnt):
        with pytest.raises(OSError):
            os.getxattr(os.path.join(mnt, "a", "hard"), "user.walk")
        assert not os.path.exists(os.path.join(mnt, "a", "nothing"))
        before = run([STIPPLE, "status", mnt], check=True).stdout
        with open(os.path.join(mnt, "a", "b", "c", "d", "leaf.py"), "rb") as f:
            assert f.read() == b"VALUE = 42\n"
        after = run([STIPPLE, "status", mnt], check=True).stdout
        assert before != after
    with mount_image(walk_image, mnt):
        assert os.getxattr(os.path.join(mnt, "a", "hard"), "user.walk") == b"value"
