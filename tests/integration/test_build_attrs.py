# SPDX-License-Identifier: MIT
"""mkstipple's owners and times set at build (--all-root, --uid, --gid, --mtime,
SOURCE_DATE_EPOCH) and paths left out (--exclude, --exclude-from, --one-file-system,
--no-xattrs). Each image is read back by `stipple extract` as root or through a mount
and compared with os.lstat of the source tree, never with mkstipple's own output."""

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from conftest import MKSTIPPLE, build_image, extract_image, read_file, run
from imageutil import FAST
import imageutil

EPOCH = 1600000000  # 2020-09-13T12:26:40Z

pytestmark = pytest.mark.needs_root("sets owners")


def make_src(root, base_time=EPOCH, owner=(1001, 1002)):
    """A small tree with every entry type, owned by OWNER, times around BASE_TIME with
    nanoseconds; returns ROOT."""
    os.makedirs(root / "a" / "b")
    os.mkdir(root / "empty")
    (root / "top.txt").write_bytes(b"top\n")
    (root / "a" / "one.o").write_bytes(b"o" * 5000)
    (root / "a" / "b" / "two.txt").write_bytes(b"two\n" * 300)
    (root / "a" / "b" / "three.o").write_bytes(b"3")
    os.link(root / "top.txt", root / "a" / "hard.txt")
    os.symlink("../top.txt", root / "a" / "link")
    os.mkfifo(root / "a" / "fifo")
    os.chmod(root / "a" / "one.o", 0o4755)
    entries = [p for p in walk(root)]
    for i, rel in enumerate(entries):
        path = os.path.join(root, rel) if rel else os.fspath(root)
        os.lchown(path, owner[0] + i % 2, owner[1] + i % 3)
    # times last, deepest first, so that no later change touches a directory's mtime
    for i, rel in enumerate(sorted(entries, key=lambda r: -r.count("/") - bool(r))):
        path = os.path.join(root, rel) if rel else os.fspath(root)
        ns = (base_time + 1000 * i) * 10**9 + 123456789 + i
        os.utime(path, ns=(ns, ns), follow_symlinks=False)
    return root


def walk(root):
    """Paths of every entry under ROOT relative to it ("" for ROOT itself)."""
    out = [""]
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(out)


def stats(root):
    return {rel: os.lstat(os.path.join(root, rel) if rel else root) for rel in walk(root)}


def build(src, image, *args, env=None):
    return imageutil.build(src, image, *FAST, *args, env=env)


def extracted(image, tmp_path, name="out"):
    return stats(extract_image(image, tmp_path / name))


def env_with(**kw):
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env.update(kw)
    return env


@pytest.fixture
def src(tmp_path):
    return make_src(tmp_path / "src")


# Owners


def test_default_keeps_owners_and_times(src, tmp_path):
    """The baseline the other tests depart from: the extract matches the source."""
    want, got = stats(src), extracted(build(src, tmp_path / "i.stp"), tmp_path)
    assert got.keys() == want.keys()
    for rel, st in want.items():
        assert (got[rel].st_uid, got[rel].st_gid) == (st.st_uid, st.st_gid), rel
        assert got[rel].st_mtime_ns == st.st_mtime_ns, rel
    assert {st.st_uid for st in want.values()} == {1001, 1002}


@pytest.mark.parametrize("args, uid, gid", [
    (("--all-root",), 0, 0),
    (("--uid", "1234"), 1234, None),
    (("--gid", "567"), None, 567),
    (("--uid", "1234", "--gid", "0"), 1234, 0),
    (("--all-root", "--gid", "9"), 0, 9),
    (("--gid", "9", "--all-root"), 0, 9),    # --uid/--gid win whatever the order
    (("--uid", "4294967294", "--all-root"), 4294967294, 0),
])
def test_forced_owners(src, tmp_path, args, uid, gid):
    want = stats(src)
    got = extracted(build(src, tmp_path / "i.stp", *args), tmp_path)
    assert got.keys() == want.keys()
    for rel, st in want.items():
        assert got[rel].st_uid == (st.st_uid if uid is None else uid), rel
        assert got[rel].st_gid == (st.st_gid if gid is None else gid), rel
        assert got[rel].st_mtime_ns == st.st_mtime_ns, rel  # times untouched
        assert got[rel].st_mode == st.st_mode, rel
    # a hard link still one inode
    assert got["top.txt"].st_ino == got["a/hard.txt"].st_ino


def test_owners_through_a_mount(src, tmp_path, mounted):
    image = build(src, tmp_path / "i.stp", "--uid", "77", "--gid", "88")
    with mounted(image) as mnt:
        got = stats(mnt)
    assert got.keys() == stats(src).keys()
    assert {(st.st_uid, st.st_gid) for st in got.values()} == {(77, 88)}


# Times


@pytest.mark.parametrize("value, seconds", [
    ("1600000000", EPOCH),
    ("@1600000000", EPOCH),
    ("2020-09-13T12:26:40Z", EPOCH),
    ("2020-09-13T12:26:40", EPOCH),
    ("2020-09-13", EPOCH - (12 * 3600 + 26 * 60 + 40)),
    ("0", 0),
])
def test_mtime_every_entry(src, tmp_path, mounted, value, seconds):
    image = build(src, tmp_path / "i.stp", "--mtime", value)
    with mounted(image) as mnt:
        got = stats(mnt)
    assert got.keys() == stats(src).keys()
    for rel, st in got.items():
        assert st.st_mtime_ns == seconds * 10**9, rel
    # owners are untouched
    ext = extracted(image, tmp_path)
    assert {rel: (s.st_uid, s.st_gid) for rel, s in ext.items()} == {
        rel: (s.st_uid, s.st_gid) for rel, s in stats(src).items()}


def test_source_date_epoch_clamps_newer_only(src, tmp_path):
    want = stats(src)
    times = sorted(st.st_mtime_ns for st in want.values())
    # half the entries newer than the clamp, one exactly on its second with nanoseconds
    clamp = times[len(times) // 2] // 10**9
    image = build(src, tmp_path / "i.stp", env=env_with(SOURCE_DATE_EPOCH=str(clamp)))
    got = extracted(image, tmp_path)
    newer = older = 0
    for rel, st in want.items():
        if st.st_mtime_ns > clamp * 10**9:
            assert got[rel].st_mtime_ns == clamp * 10**9, rel
            newer += 1
        else:
            assert got[rel].st_mtime_ns == st.st_mtime_ns, rel  # nanoseconds kept
            older += 1
        assert got[rel].st_uid == st.st_uid, rel
    assert newer and older
    # the entry on the clamp's own second was later by its nanoseconds: clamped to .0
    on = [rel for rel, st in want.items() if st.st_mtime_ns // 10**9 == clamp]
    assert on and all(got[rel].st_mtime_ns == clamp * 10**9 for rel in on)


def test_mtime_wins_over_source_date_epoch(src, tmp_path):
    image = build(src, tmp_path / "i.stp", "--mtime", str(EPOCH + 10**6),
                  env=env_with(SOURCE_DATE_EPOCH=str(EPOCH)))
    got = extracted(image, tmp_path)
    assert {st.st_mtime_ns for st in got.values()} == {(EPOCH + 10**6) * 10**9}


def test_empty_source_date_epoch_is_unset(src, tmp_path):
    image = build(src, tmp_path / "i.stp", env=env_with(SOURCE_DATE_EPOCH=""))
    got, want = extracted(image, tmp_path), stats(src)
    assert {r: s.st_mtime_ns for r, s in got.items()} == {r: s.st_mtime_ns for r, s in want.items()}


@pytest.mark.parametrize("option, value", [
    ("--uid", "-1"), ("--uid", "x"), ("--uid", "4294967295"), ("--uid", ""),
    ("--gid", "1e3"), ("--gid", "99999999999"),
    ("--mtime", "1.5"), ("--mtime", "-5"), ("--mtime", "@"), ("--mtime", "yesterday"),
    ("--mtime", "2021-02-29"), ("--mtime", "2021-01-01T24:00:00"), ("--mtime", "1969-12-31"),
    ("--mtime", "2021-01-01T10"), ("--exclude", "/"), ("--exclude", ""),
])
def test_bad_values(src, tmp_path, option, value):
    image = tmp_path / "i.stp"
    r = run([MKSTIPPLE, option, value, src, image])
    assert r.returncode == 2, r.stderr
    assert "%s %s:" % (option, value) in r.stderr
    assert not image.exists()
    assert os.listdir(tmp_path) == ["src"]


@pytest.mark.parametrize("value", ["abc", "-5", "1.5", " 1", "1 ", "0x10", "@5"])
def test_bad_source_date_epoch(src, tmp_path, value):
    image = tmp_path / "i.stp"
    r = run([MKSTIPPLE, src, image], env=env_with(SOURCE_DATE_EPOCH=value))
    assert r.returncode == 2, r.stderr
    assert "SOURCE_DATE_EPOCH=%s:" % value in r.stderr
    assert not image.exists()


def test_missing_exclude_from(src, tmp_path):
    # a file an option names that cannot be read: 1, as in stipple(1), and no usage hint
    r = run([MKSTIPPLE, "--exclude-from", tmp_path / "none", src, tmp_path / "i.stp"])
    assert r.returncode == 1
    assert "Try 'mkstipple --help'" not in r.stderr
    assert "--exclude-from %s: No such file" % (tmp_path / "none") in r.stderr


# Reproducibility


def test_same_image_whatever_owners_and_times(tmp_path):
    a = make_src(tmp_path / "a", base_time=EPOCH, owner=(1001, 1002))
    b = make_src(tmp_path / "b", base_time=EPOCH + 5555, owner=(2001, 3002))
    plain_a, plain_b = build(a, tmp_path / "pa.stp"), build(b, tmp_path / "pb.stp")
    assert read_file(plain_a) != read_file(plain_b)  # the test can tell them apart
    for args in (("--all-root", "--mtime", "2024-01-01"),
                 ("--uid", "5", "--gid", "6", "--mtime", "@7")):
        ia = build(a, tmp_path / "a.stp", *args)
        ib = build(b, tmp_path / "b.stp", *args)
        assert subprocess.run(["cmp", ia, ib]).returncode == 0, args
    # every real mtime is later than the clamp: the clamp alone makes them agree
    env = env_with(SOURCE_DATE_EPOCH=str(EPOCH - 1))
    ia = build(a, tmp_path / "a.stp", "--all-root", env=env)
    ib = build(b, tmp_path / "b.stp", "--all-root", env=env)
    assert subprocess.run(["cmp", ia, ib]).returncode == 0


# Leaving paths out


def kept(image, tmp_path, name="out"):
    return set(extracted(image, tmp_path, name)) - {""}


ALL = {"a", "a/b", "a/b/two.txt", "a/b/three.o", "a/one.o", "a/hard.txt", "a/link", "a/fifo",
       "empty", "top.txt"}


@pytest.mark.parametrize("patterns, gone", [
    (["*.o"], {"a/one.o", "a/b/three.o"}),
    (["three.?"], {"a/b/three.o"}),
    (["b"], {"a/b", "a/b/two.txt", "a/b/three.o"}),          # a directory and its contents
    (["a/b"], {"a/b", "a/b/two.txt", "a/b/three.o"}),
    (["a/*.o"], {"a/one.o"}),                                  # '*' does not cross '/'
    (["*/*.o"], {"a/one.o"}),
    (["a/**/*.o"], {"a/one.o", "a/b/three.o"}),
    (["**/two.txt"], {"a/b/two.txt"}),
    (["a/b/**"], {"a/b/two.txt", "a/b/three.o"}),              # a/b itself stays
    (["/top.txt"], {"top.txt"}),
    (["./top.txt"], {"top.txt"}),
    (["b/two.txt"], set()),                                    # anchored at the root
    (["empty/"], {"empty"}),                                   # directories only
    (["top.txt/"], set()),
    (["link", "fifo"], {"a/link", "a/fifo"}),
    (["hard.txt"], {"a/hard.txt"}),
    (["*"], ALL),
])
def test_exclude(src, tmp_path, patterns, gone):
    assert set(walk(src)) - {""} == ALL
    args = [x for p in patterns for x in ("--exclude", p)]
    assert kept(build(src, tmp_path / "i.stp", *args), tmp_path) == ALL - gone


def test_exclude_keeps_the_rest_intact(src, tmp_path, mounted):
    image = build(src, tmp_path / "i.stp", "--exclude", "b")
    want = stats(src)
    with mounted(image) as mnt:
        got = stats(mnt)
        assert read_file(os.path.join(mnt, "top.txt")) == b"top\n"
        assert os.readlink(os.path.join(mnt, "a", "link")) == "../top.txt"
    assert set(got) == set(want) - {"a/b", "a/b/two.txt", "a/b/three.o"}
    for rel in got:
        assert got[rel].st_mtime_ns == want[rel].st_mtime_ns, rel
        assert got[rel].st_mode == want[rel].st_mode, rel
    assert got["a"].st_nlink == 2  # no subdirectory left under a


def test_excluded_directory_is_not_entered(tmp_path):
    """Run as nobody, the scan fails on a directory it cannot read, unless that directory
    is excluded: then it is never opened."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv to run mkstipple as an unprivileged user")
    d = tempfile.mkdtemp(prefix="stipple-nobody-")
    try:
        os.chmod(d, 0o755)
        src = os.path.join(d, "src")
        os.makedirs(os.path.join(src, "sub", "secret"))
        with open(os.path.join(src, "sub", "secret", "inside"), "w") as f:
            f.write("hidden\n")
        with open(os.path.join(src, "ok.txt"), "w") as f:
            f.write("readable\n")
        os.chmod(os.path.join(src, "sub", "secret"), 0)
        out = os.path.join(d, "out")
        os.mkdir(out)
        os.chown(out, 65534, 65534)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", MKSTIPPLE,
                  "-q", *FAST]
        r = run([*nobody, src, os.path.join(out, "all.stp")])
        assert r.returncode == 1 and "sub/secret" in r.stderr, r.stderr
        for pattern in ("secret", "sub/secret", "secret/"):
            image = os.path.join(out, "x.stp")
            r = run([*nobody, "--exclude", pattern, src, image])
            assert r.returncode == 0, "--exclude %s: %s" % (pattern, r.stderr)
            got = stats(extract_image(image, tmp_path / ("out-" + pattern.replace("/", "_"))))
            assert set(got) == {"", "sub", "ok.txt"}
            os.unlink(image)
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", d])
        shutil.rmtree(d, ignore_errors=True)


def test_exclude_from(src, tmp_path):
    lst = tmp_path / "exclude.list"
    lst.write_text("# build products\n\n*.o\n#top.txt\n   \nempty/\n")
    image = build(src, tmp_path / "i.stp", "--exclude-from", lst, "--exclude", "link")
    # "   " is a pattern of three spaces, matching nothing here
    assert kept(image, tmp_path) == ALL - {"a/one.o", "a/b/three.o", "empty", "a/link"}


def test_hot_list_naming_an_excluded_file(src, tmp_path):
    hot = tmp_path / "hot.list"
    hot.write_text("a/b/two.txt\ntop.txt\n")
    image = tmp_path / "i.stp"
    r = run([MKSTIPPLE, *FAST, "--hot-list", hot, "--exclude", "b", src, image])
    assert r.returncode == 0, r.stderr
    assert "%s:1: a/b/two.txt: not in the tree, skipped" % hot in r.stderr
    assert "top.txt" not in r.stderr
    assert kept(image, tmp_path) == ALL - {"a/b", "a/b/two.txt", "a/b/three.o"}


@contextlib.contextmanager
def tmpfs_at(path):
    os.mkdir(path)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M,mode=0750", "stipple-test",
                        path], capture_output=True, text=True)
    if r.returncode:
        pytest.skip("cannot mount a tmpfs: %s" % r.stderr.strip())
    try:
        yield path
    finally:
        subprocess.run(["umount", path], capture_output=True)
        subprocess.run(["umount", "-l", path], capture_output=True)


def test_one_file_system(src, tmp_path):
    with tmpfs_at(src / "a" / "mnt") as mnt:
        (mnt / "inner.txt").write_bytes(b"on another file system\n")
        os.mkdir(mnt / "sub")
        os.utime(mnt, ns=(EPOCH * 10**9 + 5,) * 2)
        want = os.lstat(mnt)
        crossed = build(src, tmp_path / "all.stp")
        stayed = build(src, tmp_path / "one.stp", "--one-file-system")
    all_ = extracted(crossed, tmp_path, "all")
    one = extracted(stayed, tmp_path, "one")
    assert {"a/mnt", "a/mnt/inner.txt", "a/mnt/sub"} <= set(all_)
    assert set(one) == set(all_) - {"a/mnt/inner.txt", "a/mnt/sub"}
    # the mount point is kept, empty, with the mounted root's attributes
    assert stat.S_IMODE(one["a/mnt"].st_mode) == 0o750
    assert one["a/mnt"].st_mtime_ns == want.st_mtime_ns
    assert os.listdir(tmp_path / "one" / "a" / "mnt") == []


def test_no_xattrs(src, tmp_path, mounted):
    try:
        os.setxattr(src / "top.txt", "user.stipple", b"value")
        os.setxattr(src / "a", "user.dir", b"d")
    except OSError as e:
        pytest.skip("no user xattrs here: %s" % e)
    with_x = build(src, tmp_path / "x.stp")
    without = build(src, tmp_path / "n.stp", "--no-xattrs")
    with mounted(with_x) as mnt:
        assert os.getxattr(os.path.join(mnt, "top.txt"), "user.stipple") == b"value"
        assert os.getxattr(os.path.join(mnt, "a"), "user.dir") == b"d"
    with mounted(without) as mnt:
        for rel in walk(mnt):
            assert os.listxattr(os.path.join(mnt, rel), follow_symlinks=False) == [], rel
        assert read_file(os.path.join(mnt, "top.txt")) == b"top\n"
    out = extract_image(without, tmp_path / "out")
    assert os.listxattr(out / "top.txt") == []
