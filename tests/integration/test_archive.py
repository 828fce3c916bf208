# SPDX-License-Identifier: MIT
"""mkstipple with an archive as SOURCE (a tar, cpio or zip file, plain or compressed, or
- for standard input). Archives no one here wrote (a Debian package's data, a Python
wheel, `git archive` of this repository, GNU tar with --xattrs --sparse, a newc cpio) are
built into images, mounted, and compared entry by entry with the archive as Python's
tarfile / zipfile read it. The image of a tree and the image of a pax tar of that tree
must be byte-identical. Bad archives fail with a message naming the archive and the
entry, and leave nothing behind."""

import glob
import os
import shutil
import stat
import subprocess
import tarfile
import time
import zipfile

import pytest

from conftest import MKSTIPPLE, REPO, build_image, run
from imageutil import FAST
import imageutil


# --- the archive as an independent reader sees it ---

def norm(name):
    """The path from the root, as tar extracts it: no leading '/' or './'."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return "/".join(parts)


def pax_ns(member, key, whole):
    """KEY of MEMBER's pax header in nanoseconds when there, else WHOLE seconds."""
    v = member.pax_headers.get(key)
    if v is None:
        return int(whole) * 10**9
    sec, _, frac = v.partition(".")
    neg = sec.startswith("-")
    ns = abs(int(sec)) * 10**9 + int((frac + "000000000")[:9])
    return -ns if neg else ns


def tar_entries(path):
    """{path: entry} from tarfile, a later member replacing an earlier one."""
    out = {}
    with tarfile.open(path) as tf:
        for m in tf:
            p = norm(m.name)
            e = {"mode": m.mode & 0o7777, "uid": m.uid, "gid": m.gid,
                 "mtime_ns": pax_ns(m, "mtime", m.mtime),
                 "xattrs": {k[len("SCHILY.xattr."):]: v.encode("utf-8", "surrogateescape")
                            for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}}
            if m.islnk():
                e.update(type="hard", target=norm(m.linkname))
            elif m.issym():
                e.update(type="sym", target=m.linkname)
            elif m.isdir():
                e.update(type="dir")
            elif m.ischr() or m.isblk():
                e.update(type="chr" if m.ischr() else "blk", rdev=os.makedev(m.devmajor, m.devminor))
            elif m.isfifo():
                e.update(type="fifo")
            else:
                e.update(type="file", data=tf.extractfile(m).read())
            old = out.get(p)
            if old and old["type"] == "dir" and e["type"] == "dir":
                pass  # a directory over a directory: new attributes, same children
            out[p] = e
    return out


def zip_entries(path):
    out = {}
    with zipfile.ZipFile(path) as zf:
        for i in zf.infolist():
            mode = i.external_attr >> 16
            p = norm(i.filename)
            e = {"mode": mode & 0o7777 if mode else None, "xattrs": {}}
            if i.is_dir():
                e["type"] = "dir"
            elif stat.S_ISLNK(mode):
                e.update(type="sym", target=zf.read(i).decode())
            else:
                e.update(type="file", data=zf.read(i))
            e["mtime"] = i.date_time
            out[p] = e
    return out


# --- the image, mounted ---

def image_xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return {}
    return {n: os.getxattr(path, n, follow_symlinks=False) for n in names}


def image_entries(mnt):
    out = {}
    for dirpath, dirs, files in os.walk(mnt):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, mnt)] = full
    return out


TYPES = {"dir": stat.S_ISDIR, "file": stat.S_ISREG, "hard": stat.S_ISREG, "sym": stat.S_ISLNK,
         "chr": stat.S_ISCHR, "blk": stat.S_ISBLK, "fifo": stat.S_ISFIFO}


def assert_matches(entries, mnt, zip_times=False, xattrs=True):
    """Every entry of the archive is in the mounted image, with what the archive records,
    and the image has nothing else (but the parents an archive implies)."""
    seen = image_entries(mnt)
    for p, e in entries.items():
        if p == "":
            continue
        full = os.path.join(mnt, p)
        st = os.lstat(full)
        kind = e["type"]
        if kind == "hard":
            t = entries[e["target"]]
            assert os.lstat(os.path.join(mnt, e["target"])).st_ino == st.st_ino, p
            assert st.st_nlink >= 2, p
            e = dict(t, type="hard" if t["type"] == "file" else t["type"])
        assert TYPES[e["type"]](st.st_mode), (p, oct(st.st_mode), e["type"])
        if e.get("mode") is not None:
            assert stat.S_IMODE(st.st_mode) == e["mode"], (p, oct(st.st_mode), oct(e["mode"]))
        if "uid" in e:
            assert (st.st_uid, st.st_gid) == (e["uid"], e["gid"]), p
        if "mtime_ns" in e:
            assert st.st_mtime_ns == e["mtime_ns"], (p, st.st_mtime_ns, e["mtime_ns"])
        if zip_times:
            assert time.localtime(st.st_mtime)[:5] == e["mtime"][:5] or \
                time.gmtime(st.st_mtime)[:5] == e["mtime"][:5], p
        if e["type"] == "sym":
            assert os.readlink(full) == e["target"], p
        if e["type"] in ("file", "hard"):
            with open(full, "rb") as f:
                assert f.read() == e["data"], p
        if e["type"] in ("chr", "blk"):
            assert st.st_rdev == e["rdev"], p
        if xattrs and e.get("xattrs") is not None:
            got = image_xattrs(full)
            for k, v in e["xattrs"].items():
                assert got.get(k) == v, (p, k)
    listed = set(entries)
    for p in seen:
        if p not in listed:
            # a parent the archive does not list: made 0755, root's
            st = os.lstat(seen[p])
            assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755, p
            assert (st.st_uid, st.st_gid) == (0, 0), p
            assert any(q.startswith(p + "/") for q in listed), p


def build(src, image, *args, stdin=None):
    with open(stdin, "rb") if stdin else open(os.devnull, "rb") as f:
        return imageutil.build(src, image, *FAST, *args, stdin=f)


# --- archives from elsewhere ---

DEBS = ["passwd_*.deb", "libcap2-bin_*.deb", "curl_*.deb", "coreutils_*.deb", "tar_*.deb"]


def find_debs():
    found = []
    for pat in DEBS:
        found += sorted(glob.glob(os.path.join("/var/cache/apt/archives", pat)))[:1]
    return found[:2]


@pytest.mark.needs_root
@pytest.mark.parametrize("deb", find_debs() or [pytest.param(None, marks=pytest.mark.skip(
    reason="no .deb in /var/cache/apt/archives"))])
def test_debian_package_data(deb, tmp_path, mounted):
    tar = tmp_path / "data.tar"
    with open(tar, "wb") as f:
        subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], stdout=f, check=True, timeout=300)
    entries = tar_entries(tar)
    assert len(entries) > 5
    image = build(tar, tmp_path / "deb.stp")
    with mounted(image) as mnt:
        assert_matches(entries, mnt)
        # the root-owned files, setuid ones among them, stay as the package has them
        if "/passwd_" in deb:
            assert any(e.get("mode", 0) & 0o4000 for e in entries.values())


@pytest.mark.needs_root
def test_python_wheel(tmp_path, mounted):
    wheels = sorted(glob.glob("/usr/share/python-wheels/*.whl"))
    if not wheels:
        pytest.skip("no wheel in /usr/share/python-wheels")
    entries = zip_entries(wheels[0])
    image = build(wheels[0], tmp_path / "wheel.stp")
    with mounted(image) as mnt:
        assert_matches(entries, mnt, zip_times=True)


@pytest.mark.needs_root
def test_git_archive_of_this_repository(tmp_path, mounted):
    if not os.path.isdir(os.path.join(REPO, ".git")) and not os.path.isfile(
            os.path.join(REPO, ".git")):
        pytest.skip("not a git checkout")
    tar = tmp_path / "repo.tar"
    r = run(["git", "-C", REPO, "archive", "--format=tar", "-o", tar, "HEAD"])
    if r.returncode:
        pytest.skip("git archive failed: " + r.stderr)
    entries = tar_entries(tar)
    image = build(tar, tmp_path / "repo.stp")
    with mounted(image) as mnt:
        assert_matches(entries, mnt)
    # the same stream on standard input, gzip-compressed: the same image
    gz = tmp_path / "repo.tar.gz"
    run(["sh", "-c", 'gzip -c "$0" > "$1"', tar, gz], check=True)
    build("-", tmp_path / "stdin.stp", stdin=gz)
    assert open(image, "rb").read() == open(tmp_path / "stdin.stp", "rb").read()


def gnu_tar_tree(root):
    """A tree holding what GNU tar --xattrs --sparse keeps: a sparse file, a user xattr,
    a file capability, a setgid directory, a FIFO, a hard link and a symlink."""
    os.makedirs(root / "bin")
    os.makedirs(root / "shared")
    with open(root / "sparse.img", "wb") as f:
        f.seek(3 << 20)
        f.write(b"middle" * 1000)
        f.seek(9 << 20)
        f.write(b"end")
    (root / "bin" / "ping").write_bytes(b"\x7fELF not really" * 100)
    os.chmod(root / "bin" / "ping", 0o755)
    (root / "notes").write_text("tagged\n")
    os.setxattr(root / "notes", "user.origin", b"test_archive")
    os.link(root / "notes", root / "notes.again")
    os.symlink("bin/ping", root / "ping")
    os.mkfifo(root / "fifo")
    os.chmod(root / "shared", 0o2775)
    r = run(["setcap", "cap_net_raw+ep", root / "bin" / "ping"])
    return r.returncode == 0


@pytest.mark.needs_root
def test_gnu_tar_sparse_xattrs_capability(tmp_path, mounted):
    root = tmp_path / "tree"
    root.mkdir()
    try:
        has_cap = gnu_tar_tree(root)
    except OSError as e:
        pytest.skip("this file system cannot hold the test tree: %s" % e)
    tar = tmp_path / "gnu.tar"
    run(["tar", "--format=posix", "--xattrs", "--xattrs-include=*", "--sparse", "-C", root,
         "-cf", tar, "."], check=True)
    entries = tar_entries(tar)
    assert entries["notes"]["xattrs"]["user.origin"] == b"test_archive"
    if has_cap:
        assert "security.capability" in entries["bin/ping"]["xattrs"]
    image = build(tar, tmp_path / "gnu.stp")
    with mounted(image) as mnt:
        assert_matches(entries, mnt)
        assert os.path.getsize(os.path.join(mnt, "sparse.img")) == (9 << 20) + 3
        if has_cap:
            r = run(["getcap", os.path.join(mnt, "bin", "ping")])
            assert "cap_net_raw" in r.stdout, r.stdout + r.stderr
    # the holes stay holes: the image holds the data, not 9 MiB of zeros
    assert os.path.getsize(image) < (1 << 20)
    for comp, ext in (("gzip", "gz"), ("xz", "xz"), ("zstd", "zst"), ("bzip2", "bz2")):
        if not shutil.which(comp):
            continue
        z = tmp_path / ("gnu.tar." + ext)
        run(["sh", "-c", '"$0" -c "$1" > "$2"', comp, tar, z], check=True)
        other = build(z, tmp_path / ("gnu-%s.stp" % ext))
        assert open(other, "rb").read() == open(image, "rb").read(), ext
        build("-", tmp_path / ("stdin-%s.stp" % ext), stdin=z)
        assert open(tmp_path / ("stdin-%s.stp" % ext), "rb").read() == open(image, "rb").read()


def cpio_entries(root):
    """The tree as `cpio -o -H newc` stores it, from the tree itself (cpio has no reader
    in Python): mode, owners, mtime in whole seconds, link targets, bytes, hard links."""
    out, inodes = {}, {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            p = os.path.relpath(full, root)
            e = {"mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid,
                 "mtime_ns": int(st.st_mtime) * 10**9, "xattrs": None}
            if stat.S_ISDIR(st.st_mode):
                e["type"] = "dir"
            elif stat.S_ISLNK(st.st_mode):
                e.update(type="sym", target=os.readlink(full))
            elif stat.S_ISFIFO(st.st_mode):
                e["type"] = "fifo"
            else:
                e.update(type="file", data=open(full, "rb").read())
                if st.st_nlink > 1:
                    e["ino"] = st.st_ino
            out[p] = e
    return out


@pytest.mark.needs_root
def test_newc_cpio(tmp_path, mounted):
    root = tmp_path / "tree"
    os.makedirs(root / "a" / "b")
    (root / "a" / "one").write_bytes(b"1" * 5000)
    os.link(root / "a" / "one", root / "a" / "b" / "two")
    os.link(root / "a" / "one", root / "three")
    os.symlink("a/one", root / "link")
    (root / "exe").write_bytes(bytes(range(256)) * 40)
    os.chmod(root / "exe", 0o4711)
    os.chown(root / "exe", 123, 456)
    os.mkfifo(root / "fifo")
    cpio = tmp_path / "t.cpio"
    with open(cpio, "wb") as f:
        subprocess.run("find . | cpio -o -H newc --quiet", shell=True, cwd=root, stdout=f,
                       check=True, timeout=300)
    entries = cpio_entries(root)
    image = build(cpio, tmp_path / "cpio.stp")
    with mounted(image) as mnt:
        assert_matches(entries, mnt)
        inos = {os.lstat(os.path.join(mnt, p)).st_ino for p in ("a/one", "a/b/two", "three")}
        assert len(inos) == 1
        assert os.lstat(os.path.join(mnt, "a/one")).st_nlink == 3


# --- the image of a tree and of its tar ---

def identity_tree(root):
    os.makedirs(root / "d" / "e")
    (root / "d" / "f").write_bytes(os.urandom(70000))
    (root / "d" / "e" / "g").write_text("g\n")
    os.link(root / "d" / "f", root / "h")
    os.symlink("d/f", root / "s")
    shutil.copy("/bin/true", root / "true")
    os.chmod(root / "true", 0o4755)
    with open(root / "holes", "wb") as f:
        f.truncate(4 << 20)
    (root / "empty").write_bytes(b"")
    os.mkfifo(root / "p")
    for i in range(40):
        (root / "d" / ("n%02d" % i)).write_bytes(b"same content\n" if i % 2 else os.urandom(i))
    os.utime(root / "d" / "e" / "g", ns=(1, 1_234_567_891))


@pytest.mark.parametrize("how", ["tar", "tar.zst", "stdin"])
def test_tree_and_its_tar_give_the_same_image(tmp_path, how):
    root = tmp_path / "tree"
    root.mkdir()
    identity_tree(root)
    tar = tmp_path / "t.tar"
    run(["tar", "--format=pax", "-C", root, "-cf", tar, "."], check=True)
    want = build_image(root, tmp_path / "dir.stp", *FAST)
    if how == "tar":
        got = build(tar, tmp_path / "tar.stp")
    else:
        z = tmp_path / "t.tar.zst"
        run(["zstd", "-q", "-f", tar, "-o", z], check=True)
        got = build(z, tmp_path / "z.stp") if how == "tar.zst" else \
            build("-", tmp_path / "stdin.stp", stdin=z)
    r = run(["cmp", want, got])
    assert r.returncode == 0, r.stdout


def test_in_place_offsets_are_where_tarfile_finds_the_data(tmp_path):
    """A plain tar is read in place: the image's bytes equal those at tarfile's
    offset_data (the image of a tar whose data was changed in place changes too)."""
    root = tmp_path / "tree"
    root.mkdir()
    (root / "a").write_bytes(b"A" * 3000)
    (root / "b").write_bytes(b"B" * 700)
    tar = tmp_path / "t.tar"
    run(["tar", "--format=gnu", "-C", root, "-cf", tar, "a", "b"], check=True)
    with tarfile.open(tar) as tf:
        off = {m.name: m.offset_data for m in tf}
    data = bytearray(open(tar, "rb").read())
    data[off["b"]:off["b"] + 700] = b"C" * 700
    open(tar, "wb").write(data)
    image = build(tar, tmp_path / "t.stp")
    r = run([MKSTIPPLE.replace("builder/mkstipple", "mounthelper/stipple"), "cat", image, "b"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "C" * 700


# --- bad archives ---

def assert_refused(tmp_path, src, *names, stdin=None, timeout=120):
    image = tmp_path / "out" / "bad.stp"
    image.parent.mkdir(exist_ok=True)
    t0 = time.monotonic()
    if stdin is not None:
        r = subprocess.run(["sh", "-c", stdin + ' | "$0" --quiet - "$1"', MKSTIPPLE, image],
                           capture_output=True, errors="replace", timeout=timeout)
    else:
        r = run([MKSTIPPLE, "--quiet", *FAST, src, image], timeout=timeout)
    assert r.returncode == 1, (r.returncode, r.stderr)
    for n in names:
        assert n in r.stderr, (n, r.stderr)
    assert r.stderr.count("\n") <= 3, r.stderr
    assert not os.path.exists(image)
    assert os.listdir(image.parent) == [], os.listdir(image.parent)
    return r, time.monotonic() - t0


def write_tar(path, members, fmt=tarfile.PAX_FORMAT):
    with tarfile.open(path, "w", format=fmt) as tf:
        for info, data in members:
            tf.addfile(info, None if data is None else __import__("io").BytesIO(data))


def file_info(name, size, **kw):
    i = tarfile.TarInfo(name)
    i.size = size
    for k, v in kw.items():
        setattr(i, k, v)
    return i


def test_truncated_tar(tmp_path):
    tar = tmp_path / "t.tar"
    write_tar(tar, [(file_info("ok", 10), b"x" * 10), (file_info("big", 100000), b"y" * 100000)])
    data = open(tar, "rb").read()
    open(tar, "wb").write(data[:len(data) // 2])
    assert_refused(tmp_path, tar, str(tar), "big")


def test_corrupt_gzip_stream(tmp_path):
    tar = tmp_path / "t.tar"
    write_tar(tar, [(file_info("file%d" % i, 20000), os.urandom(20000)) for i in range(10)])
    gz = tmp_path / "t.tar.gz"
    run(["sh", "-c", 'gzip -c "$0" > "$1"', tar, gz], check=True)
    data = bytearray(open(gz, "rb").read())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xA5
    open(gz, "wb").write(data)
    r, _ = assert_refused(tmp_path, gz, str(gz))
    assert "file" in r.stderr  # the entry being read


def test_dotdot_path(tmp_path):
    tar = tmp_path / "t.tar"
    write_tar(tar, [(file_info("ok", 2), b"ok"), (file_info("a/../../etc/evil", 4), b"evil")])
    assert_refused(tmp_path, tar, str(tar), "a/../../etc/evil", "..")


def test_hard_link_to_nowhere(tmp_path):
    tar = tmp_path / "t.tar"
    link = file_info("link", 0, type=tarfile.LNKTYPE, linkname="missing/file")
    write_tar(tar, [(file_info("ok", 2), b"ok"), (link, None)])
    assert_refused(tmp_path, tar, str(tar), "link", "missing/file")


def test_not_an_archive(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("just some text, not an archive\n" * 100)
    assert_refused(tmp_path, f, str(f), "not an archive")


def test_ten_gigabytes_of_zeros_fail_fast(tmp_path):
    r, secs = assert_refused(tmp_path, "-", "standard input",
                             stdin="head -c 10G /dev/zero", timeout=60)
    assert secs < 20, secs


# --- the generated tree (treeutil): devices, ACLs, capabilities, times before 1970 ---

@pytest.fixture
def full_tree(tmp_path):
    import treeutil
    root = tmp_path / "gen"
    info = treeutil.make_tree(root, many=200, large_size=1 << 20)
    # tar leaves sockets out: so must the tree it is compared with
    for dirpath, dirs, files in os.walk(root):
        for name in files:
            if stat.S_ISSOCK(os.lstat(os.path.join(dirpath, name)).st_mode):
                os.unlink(os.path.join(dirpath, name))
                os.utime(dirpath, ns=(0, os.lstat(dirpath).st_mtime_ns))
    return root, info


def test_generated_tree_and_its_tar_give_the_same_image(tmp_path, full_tree):
    root, _ = full_tree
    tar = tmp_path / "gen.tar"
    run(["tar", "--format=pax", "--xattrs", "--xattrs-include=*", "--acls", "-C", root,
         "-cf", tar, "."], check=True)
    want = build_image(root, tmp_path / "dir.stp", *FAST)
    got = build(tar, tmp_path / "tar.stp")
    r = run(["cmp", want, got])
    assert r.returncode == 0, r.stdout


@pytest.mark.needs_root
def test_acls_from_tar_text_are_the_kernels_bytes(tmp_path, full_tree, mounted):
    """GNU tar --acls stores ACLs as text (with names); the image must hold the kernel's
    own binary form of them, as getxattr on the source gives it, and the mode the source
    has (its group bits are the mask)."""
    root, info = full_tree
    if not info.get("acl"):
        pytest.skip("the file system holds no ACLs")
    tar = tmp_path / "acl.tar"
    run(["tar", "--format=pax", "--acls", "-C", root, "-cf", tar, "."], check=True)
    image = build(tar, tmp_path / "acl.stp")
    checked = 0
    with mounted(image) as mnt:
        for dirpath, dirs, files in os.walk(root):
            for name in dirs + files:
                src = os.path.join(dirpath, name)
                rel = os.path.relpath(src, root)
                for key in ("system.posix_acl_access", "system.posix_acl_default"):
                    try:
                        want = os.getxattr(src, key, follow_symlinks=False)
                    except OSError:
                        continue
                    got = os.getxattr(os.path.join(mnt, rel), key, follow_symlinks=False)
                    assert got == want, (rel, key, got.hex(), want.hex())
                    checked += 1
                assert os.lstat(os.path.join(mnt, rel)).st_mode == os.lstat(src).st_mode, rel
    assert checked >= 1


@pytest.mark.needs_root
def test_tar_semantics(tmp_path, mounted):
    """Later entries replace earlier ones, a directory over a directory keeps its
    children, leading '/' and './' go, '.' is the root, and unlisted parents are 0755,
    root's, dated SOURCE_DATE_EPOCH."""
    tar = tmp_path / "t.tar"

    def d(name, mode, mtime, uid=0):
        i = file_info(name, 0, type=tarfile.DIRTYPE, mode=mode, mtime=mtime, uid=uid, gid=uid)
        return (i, None)

    write_tar(tar, [
        d("./", 0o750, 1000, uid=7),
        (file_info("/abs/file", 3, mode=0o600, mtime=2000), b"one"),
        d("keep", 0o700, 3000),
        (file_info("keep/child", 5, mtime=4000), b"child"),
        (file_info("./abs/file", 3, mode=0o644, mtime=5000), b"two"),
        d("keep/", 0o755, 6000, uid=9),
        (file_info("deep/er/leaf", 4, mtime=7000), b"leaf"),
        (file_info("swap", 4, mtime=8000), b"file"),
        (file_info("swap", 0, type=tarfile.SYMTYPE, linkname="keep/child", mtime=9000), None),
    ])
    env = dict(os.environ, SOURCE_DATE_EPOCH="1234567890")
    image = tmp_path / "t.stp"
    r = run([MKSTIPPLE, "--quiet", *FAST, tar, image], env=env)
    assert r.returncode == 0, r.stderr
    with mounted(image) as mnt:
        st = os.lstat(mnt)
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_mtime) == (0o750, 7, 1000)
        assert sorted(os.listdir(mnt)) == ["abs", "deep", "keep", "swap"]
        assert open(os.path.join(mnt, "abs/file"), "rb").read() == b"two"
        st = os.lstat(os.path.join(mnt, "abs/file"))
        assert (stat.S_IMODE(st.st_mode), st.st_mtime) == (0o644, 5000)
        st = os.lstat(os.path.join(mnt, "keep"))
        assert (stat.S_IMODE(st.st_mode), st.st_uid, st.st_mtime) == (0o755, 9, 6000)
        assert os.listdir(os.path.join(mnt, "keep")) == ["child"]
        for implied in ("abs", "deep", "deep/er"):
            st = os.lstat(os.path.join(mnt, implied))
            assert (st.st_mode, st.st_uid, st.st_gid, st.st_mtime) == \
                (stat.S_IFDIR | 0o755, 0, 0, 1234567890), implied
        assert os.readlink(os.path.join(mnt, "swap")) == "keep/child"


def test_directory_not_empty_is_not_replaced(tmp_path):
    tar = tmp_path / "t.tar"
    write_tar(tar, [(file_info("dir/file", 1), b"x"), (file_info("dir", 1), b"y")])
    assert_refused(tmp_path, tar, str(tar), "dir", "not empty")


def test_entry_beneath_a_file(tmp_path):
    tar = tmp_path / "t.tar"
    write_tar(tar, [(file_info("f", 1), b"x"), (file_info("f/g", 1), b"y")])
    assert_refused(tmp_path, tar, str(tar), "f/g", "not a directory")


def test_stream_leaves_nothing_beside_the_image(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "f").write_bytes(os.urandom(100000))
    out = tmp_path / "out"
    out.mkdir()
    tar = tmp_path / "t.tar"
    run(["tar", "-C", root, "-cf", tar, "."], check=True)
    build("-", out / "s.stp", stdin=tar)
    assert os.listdir(out) == ["s.stp"]


# --- build options on archives, and the way back out ---

@pytest.mark.parametrize("how", ["tar", "stdin"])
def test_options_agree_for_a_tree_and_its_tar(tmp_path, how):
    """--exclude, --no-xattrs, --all-root and --mtime leave the same image whether the
    tree comes as a folder or as a GNU-format tar (whole-second times, no xattrs kept:
    the options make them agree)."""
    root = tmp_path / "tree"
    root.mkdir()
    identity_tree(root)
    os.setxattr(root / "empty", "user.note", b"dropped")
    tar = tmp_path / "t.tar"
    run(["tar", "--format=gnu", "-C", root, "-cf", tar, "."], check=True)
    opts = ("--exclude", "n0*", "--exclude", "d/e", "--no-xattrs", "--all-root",
            "--mtime", "1700000000")
    want = build_image(root, tmp_path / "dir.stp", *FAST, *opts)
    got = build(tar, tmp_path / "tar.stp", *opts) if how == "tar" else \
        build("-", tmp_path / "stdin.stp", *opts, stdin=tar)
    r = run(["cmp", want, got])
    assert r.returncode == 0, r.stdout
    names = image_names(got, tmp_path)
    assert "d/n11" in names and "d/f" in names, names
    assert not any(n.startswith("d/n0") or n.startswith("d/e") for n in names), names


def test_excluded_directory_takes_its_entries_with_it(tmp_path):
    """An entry below an excluded directory is left out even though the archive lists it
    on its own; a hard link to an excluded file is refused, naming both."""
    tar = tmp_path / "x.tar"
    write_tar(tar, [(file_info("keep/a", 3), b"aaa"), (file_info("skip/b", 3), b"bbb"),
                    (file_info("skip/deep/c", 3), b"ccc")])
    image = build(tar, tmp_path / "x.stp", "--exclude", "skip")
    assert image_names(image, tmp_path) == {"", "keep", "keep/a"}
    link = tarfile.TarInfo("keep/l")
    link.type, link.linkname = tarfile.LNKTYPE, "skip/b"
    write_tar(tar, [(file_info("skip/b", 3), b"bbb"), (link, None)])
    out = tmp_path / "refused.stp"
    r = run([MKSTIPPLE, "--quiet", *FAST, "--exclude", "skip", tar, out])
    assert r.returncode == 1 and "keep/l" in r.stderr and "--exclude" in r.stderr, r.stderr
    assert not os.path.exists(out)


def image_names(image, tmp_path):
    """The paths of IMAGE, as Python's tarfile reads them from its extract --tar."""
    return set(tar_entries(export_tar(image, tmp_path / "names.tar")))


def canonical(entries):
    """Archive entries with hard links resolved: each name carries its inode's content and
    the set of names sharing it, whichever name an archive wrote first."""
    groups = {}
    for p, e in entries.items():
        if e["type"] == "hard":
            groups.setdefault(e["target"], {e["target"]}).add(p)
    out = {}
    for p, e in entries.items():
        if e["type"] == "hard":
            e = dict(entries[e["target"]])
        out[p] = dict(e)
    for names in groups.values():
        for p in names:
            out[p]["links"] = frozenset(names)
    return out


def export_tar(image, dest):
    stp = MKSTIPPLE.replace("builder/mkstipple", "mounthelper/stipple")
    r = run([stp, "extract", "--tar", image, dest])
    assert r.returncode == 0, r.stderr
    return dest


def assert_round_trip(src_tar, image, tmp_path):
    """tar -> image -> extract --tar -> tar: every entry of SRC_TAR comes back with the
    same type, mode, owners, mtime, target, rdev, xattrs and bytes (tarfile both ways);
    what is added are only the parents SRC_TAR left implied."""
    want = canonical(tar_entries(src_tar))
    got = canonical(tar_entries(export_tar(image, tmp_path / "back.tar")))
    for p, e in want.items():
        assert p in got, p
        g = got[p]
        for k in ("type", "mode", "uid", "gid", "mtime_ns", "target", "rdev", "data", "links"):
            assert g.get(k) == e.get(k), (p, k, g.get(k), e.get(k))
        assert g["xattrs"] == e["xattrs"], p
    for p in set(got) - set(want):
        assert got[p]["type"] == "dir" and got[p]["mode"] == 0o755, p


@pytest.mark.parametrize("deb", find_debs()[:1] or [pytest.param(None, marks=pytest.mark.skip(
    reason="no .deb in /var/cache/apt/archives"))])
def test_round_trip_debian_package(deb, tmp_path):
    tar = tmp_path / "data.tar"
    with open(tar, "wb") as f:
        subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], stdout=f, check=True, timeout=300)
    assert_round_trip(tar, build(tar, tmp_path / "deb.stp"), tmp_path)


def test_round_trip_git_archive(tmp_path):
    tar = tmp_path / "repo.tar"
    r = run(["git", "-C", REPO, "archive", "--format=tar", "-o", tar, "HEAD"])
    if r.returncode:
        pytest.skip("git archive failed: " + r.stderr)
    assert_round_trip(tar, build(tar, tmp_path / "repo.stp"), tmp_path)


@pytest.mark.needs_root
def test_round_trip_gnu_tar_sparse_xattrs_capability(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    try:
        gnu_tar_tree(root)
    except OSError as e:
        pytest.skip("this file system cannot hold the test tree: %s" % e)
    tar = tmp_path / "gnu.tar"
    run(["tar", "--format=posix", "--xattrs", "--xattrs-include=*", "--sparse", "-C", root,
         "-cf", tar, "."], check=True)
    assert_round_trip(tar, build(tar, tmp_path / "gnu.stp"), tmp_path)


def test_round_trip_pax_tree(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    identity_tree(root)
    tar = tmp_path / "t.tar"
    run(["tar", "--format=pax", "-C", root, "-cf", tar, "."], check=True)
    assert_round_trip(tar, build(tar, tmp_path / "t.stp"), tmp_path)
