# SPDX-License-Identifier: MIT
"""`stipple extract --tar`: an image's tree as a pax tar, checked against the source tree
by readers that are not ours: Python's tarfile (every member, its pax records, its sparse
map) and GNU tar, which extracts it as root with xattrs and ACLs; then standard output,
the refusal of a terminal, a closed pipe, a full device, a damaged image and a malformed
ACL, none of which may leave a FILE behind."""

import decimal
import fcntl
import hashlib
import os
import pty
import re
import shutil
import signal
import socket
import stat
import subprocess
import tarfile

import pytest

from conftest import STIPPLE, build_image, run
from imageutil import FAST, HostileImage
import treeutil

GIB = 1 << 30
SPARSE_DATA = {0: b"head", 512 << 20: os.urandom(4096), GIB - 4: b"tail"}
ACL_XATTRS = ("system.posix_acl_access", "system.posix_acl_default")

pytestmark = pytest.mark.needs_root("devices, owners and capabilities")


def tool(name):
    path = shutil.which(name)
    if not path:
        pytest.skip("%s is not installed" % name)
    return path


def make_source(root):
    """The tree every test exports: each kind of entry and attribute tar can carry, and a
    socket, which it cannot."""
    root.mkdir()
    d = root / "dir"
    d.mkdir()
    (root / "file.txt").write_bytes(b"some text\n" * 100)
    (root / "empty").write_bytes(b"")
    (root / "big").write_bytes(os.urandom(3 << 20))
    with open(root / "sparse", "wb") as f:
        f.truncate(GIB)
        for off, data in SPARSE_DATA.items():
            os.pwrite(f.fileno(), data, off)
    os.link(root / "file.txt", d / "hard")
    os.link(root / "file.txt", root / "zz-hard")
    os.symlink("../file.txt", d / "sym")
    os.symlink("/etc/nowhere", root / "abs-link")
    os.mkfifo(root / "fifo")
    os.mknod(root / "null", stat.S_IFCHR | 0o620, os.makedev(1, 3))
    os.mknod(root / "blk", stat.S_IFBLK | 0o600, os.makedev(7, 200))
    (root / "n\u00e4me").write_bytes(b"utf-8 name\n")
    s = socket.socket(socket.AF_UNIX)
    s.bind(os.fspath(root / "sock"))
    s.close()
    os.setxattr(root / "file.txt", "user.comment", b"a comment")
    os.setxattr(root / "file.txt", "user.binary", bytes(range(256)))
    os.setxattr(d, "user.dir", b"on a directory")
    run(["setfacl", "-m", "u:4321:rx,g:77:r", root / "file.txt"], check=True)
    run(["setfacl", "-d", "-m", "u:4321:rwx,g:55:rx", d], check=True)
    run([tool("setcap"), "cap_net_raw,cap_net_bind_service+ep", root / "big"], check=True)
    os.chmod(root / "big", 0o4755)
    sticky = root / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    setgid = root / "setgid"
    setgid.mkdir()
    os.chmod(setgid, 0o2750)
    os.chown(root / "empty", 1001, 1002)
    os.chown(setgid, 0, 4242)
    os.lchown(root / "abs-link", 3003, 3004)
    # times with nanoseconds, children before their directories
    paths = sorted((p for p in root.rglob("*")), key=lambda p: -len(p.parts)) + [root]
    for i, p in enumerate(paths):
        ns = 1_600_000_000 * 10**9 + i * 1_000_003_007 + 123_456_789
        os.utime(p, ns=(ns, ns), follow_symlinks=False)
    return root


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    tool("setfacl")
    return make_source(tmp_path_factory.mktemp("tarsrc") / "src")


@pytest.fixture(scope="module")
def image(source, tmp_path_factory):
    return build_image(source, tmp_path_factory.mktemp("tarimg") / "src.stipple", *FAST)


def export(image, *dest, **kw):
    """stipple extract --tar IMAGE DEST...; stdout as bytes, stderr as text."""
    kw.setdefault("stdout", subprocess.PIPE)
    r = subprocess.run([STIPPLE, "extract", "--tar", os.fspath(image), *map(os.fspath, dest)],
                       stderr=subprocess.PIPE, timeout=600, **kw)
    r.stderr = r.stderr.decode(errors="replace")
    return r


@pytest.fixture(scope="module")
def tar_file(image, tmp_path_factory):
    out = tmp_path_factory.mktemp("tarout") / "src.tar"
    r = export(image, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert re.search(r"src\.stipple: /sock: socket left out", r.stderr), r.stderr
    return out, r.stderr


def image_order(root):
    """Relative names as the image stores them: parents first, each directory's entries
    by name bytes; sockets left out."""
    out = []

    def walk(rel):
        for name in sorted(os.listdir(root / rel if rel else root), key=os.fsencode):
            p = os.path.join(rel, name) if rel else name
            st = os.lstat(root / p)
            if stat.S_ISSOCK(st.st_mode):
                continue
            out.append(p)
            if stat.S_ISDIR(st.st_mode):
                walk(p)

    walk("")
    return out


def decode_acl(value):
    """The kernel's ACL xattr, decoded here independently: {(tag, id), ...: perms}."""
    tags = {1: "user", 2: "user", 4: "group", 8: "group", 16: "mask", 32: "other"}
    assert int.from_bytes(value[:4], "little") == 2
    out = {}
    for off in range(4, len(value), 8):
        tag = int.from_bytes(value[off:off + 2], "little")
        perm = int.from_bytes(value[off + 2:off + 4], "little")
        qid = int.from_bytes(value[off + 4:off + 8], "little")
        out[(tags[tag], qid if tag in (2, 8) else None)] = perm
    return out


def parse_acl_text(text):
    """SCHILY.acl text ("user::rw-,user:4321:r-x,...", as acl_to_text writes it) the same
    way; a fourth field, the numeric id libarchive appends, is allowed."""
    out = {}
    for e in text.split(","):
        f = e.split(":")
        perm = sum(v for c, v in zip(f[2], (4, 2, 1)) if c != "-")
        out[(f[0], int(f[1]) if f[1] else None)] = perm
    return out


def pax_time_ns(text):
    return int(decimal.Decimal(text) * 10**9)


def expected_mode(path, st):
    """The mode as stat gives it, as GNU tar writes it: with an access ACL, its mask in
    the group bits (the ACL's own group entry travels in the ACL)."""
    return stat.S_IMODE(st.st_mode)


def plain_xattrs(path):
    if os.path.islink(path):
        return {}
    return {n: os.getxattr(path, n) for n in os.listxattr(path) if n not in ACL_XATTRS}


def tar_name(rel):
    return "./" + rel


def members(tar):
    with tarfile.open(tar, encoding="utf-8", errors="surrogateescape") as t:
        return t.getmembers()


def test_members_in_image_order(source, tar_file):
    names = [m.name for m in members(tar_file[0])]
    assert names[0] == "."  # "./": the root, with its own attributes
    assert names[1:] == [tar_name(p) for p in image_order(source)]


def check_member(source, m, first_of_inode, t):
    rel = m.name[2:]
    path = source / rel
    st = os.lstat(path)
    what = m.name
    assert m.uid == st.st_uid and m.gid == st.st_gid, what
    assert m.uname == "" and m.gname == "", what
    assert pax_time_ns(m.pax_headers["mtime"]) == st.st_mtime_ns, what
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and st.st_ino in first_of_inode:
        assert m.islnk() and m.linkname == first_of_inode[st.st_ino], what
        return
    first_of_inode.setdefault(st.st_ino, m.name)
    assert m.mode == expected_mode(path, st), "%s: %o" % (what, m.mode)
    assert stat.S_IFMT(st.st_mode) == {
        tarfile.REGTYPE: stat.S_IFREG, tarfile.DIRTYPE: stat.S_IFDIR,
        tarfile.SYMTYPE: stat.S_IFLNK, tarfile.CHRTYPE: stat.S_IFCHR,
        tarfile.BLKTYPE: stat.S_IFBLK, tarfile.FIFOTYPE: stat.S_IFIFO}[m.type], what
    xattrs = {k[len("SCHILY.xattr."):]: v.encode("utf-8", "surrogateescape")
              for k, v in m.pax_headers.items() if k.startswith("SCHILY.xattr.")}
    assert xattrs == plain_xattrs(path), what
    assert not any(k.startswith("LIBARCHIVE.") for k in m.pax_headers), what
    for xname, key in zip(ACL_XATTRS, ("SCHILY.acl.access", "SCHILY.acl.default")):
        raw = None if m.issym() else (os.getxattr(path, xname)
                                      if xname in os.listxattr(path) else None)
        if raw is None:
            assert key not in m.pax_headers, what
        else:
            assert parse_acl_text(m.pax_headers[key]) == decode_acl(raw), what
    if m.issym():
        assert m.linkname == os.readlink(path), what
    elif m.ischr() or m.isblk():
        assert (m.devmajor, m.devminor) == (os.major(st.st_rdev), os.minor(st.st_rdev)), what
    elif m.isreg():
        assert m.size == st.st_size, what
        if rel == "sparse":
            check_sparse_member(m, t)
        else:
            assert m.sparse is None, what
            with t.extractfile(m) as f, open(path, "rb") as g:
                assert f.read() == g.read(), what


def check_sparse_member(m, t):
    assert m.sparse, "the sparse file has no sparse map"
    stored = sum(size for _, size in m.sparse)
    assert stored <= 64 << 10, m.sparse
    for off, data in SPARSE_DATA.items():
        assert any(o <= off and off + len(data) <= o + s for o, s in m.sparse), (off, m.sparse)
    with t.extractfile(m) as f:
        for off, data in SPARSE_DATA.items():
            f.seek(off)
            assert f.read(len(data)) == data, off
        f.seek(256 << 20)
        assert f.read(1 << 16) == bytes(1 << 16)


def test_every_member_matches_the_source(source, tar_file):
    first_of_inode = {}
    seen = []
    with tarfile.open(tar_file[0], encoding="utf-8", errors="surrogateescape") as t:
        for m in t:
            seen.append(m.name)
            if m.name == ".":
                st = os.lstat(source)
                assert m.isdir() and m.mode == stat.S_IMODE(st.st_mode)
                assert pax_time_ns(m.pax_headers["mtime"]) == st.st_mtime_ns
                continue
            check_member(source, m, first_of_inode, t)
    assert "./sock" not in seen
    assert {"./dir/hard", "./zz-hard", "./sparse", "./null", "./blk", "./fifo",
            "./n\u00e4me", "./dir/sym"} <= set(seen)


def test_hard_links_name_the_first_entry(tar_file):
    """./dir comes first in image order, so ./dir/hard carries file.txt's data."""
    by_name = {m.name: m for m in members(tar_file[0])}
    assert by_name["./dir/hard"].isreg() and by_name["./dir/hard"].size == 1000
    assert "SCHILY.xattr.user.comment" in by_name["./dir/hard"].pax_headers
    for later in ("./file.txt", "./zz-hard"):
        assert by_name[later].islnk() and by_name[later].linkname == "./dir/hard", later
        assert by_name[later].size == 0


def test_the_sparse_file_keeps_the_tar_small(source, tar_file):
    assert os.path.getsize(tar_file[0]) < os.path.getsize(source / "big") + (1 << 20)


def tree_facts(root):
    """What GNU tar must restore, per relative path, read with os and getfacl/getcap."""
    facts = {}
    for rel in [""] + image_order(root):
        p = root / rel if rel else root
        st = os.lstat(p)
        f = dict(mode=st.st_mode, uid=st.st_uid, gid=st.st_gid, mtime=st.st_mtime_ns,
                 xattrs=plain_xattrs(p))
        if stat.S_ISREG(st.st_mode):
            f["size"] = st.st_size
            f["data"] = digest(p)
        elif stat.S_ISLNK(st.st_mode):
            f["target"] = os.readlink(p)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            f["rdev"] = st.st_rdev
        if not stat.S_ISLNK(st.st_mode):
            acl = run(["getfacl", "-n", "-p", "-c", p], check=True).stdout
            f["acl"] = acl
            f["cap"] = run(["getcap", p], check=True).stdout.split(" ", 1)[-1]
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            f["links"] = st.st_nlink
        facts[rel] = f
    return facts


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 << 20):
            h.update(chunk)
    return h.hexdigest()


def test_gnu_tar_extracts_the_source_tree(source, tar_file, tmp_path):
    dest = tmp_path / "x"
    dest.mkdir()
    r = run([tool("tar"), "--xattrs", "--xattrs-include=*", "--acls", "--numeric-owner",
             "-xpf", tar_file[0], "-C", dest])
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr  # no unknown keyword, nothing it could not restore
    want, got = tree_facts(source), tree_facts(dest)
    assert sorted(got) == sorted(want)
    for rel in want:
        assert got[rel] == want[rel], rel or "/"
    assert os.stat(dest / "dir/hard").st_ino == os.stat(dest / "file.txt").st_ino
    assert os.stat(dest / "sparse").st_blocks * 512 < 1 << 20
    assert "cap_net_bind_service,cap_net_raw=ep" in got["big"]["cap"]
    assert "user:4321:r-x" in got["file.txt"]["acl"]
    assert "default:user:4321:rwx" in got["dir"]["acl"]


def test_standard_output_is_the_same_bytes_every_time(image, tar_file, tmp_path):
    r = export(image, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    dash = export(image, "-", stdin=subprocess.DEVNULL)
    again = tmp_path / "again.tar"
    assert export(image, again, stdin=subprocess.DEVNULL).returncode == 0
    with open(tar_file[0], "rb") as f:
        first = f.read()
    assert r.stdout == first and dash.stdout == first
    assert again.read_bytes() == first
    assert len(first) % 10240 == 0  # whole tar records, as GNU tar writes them


def test_pipe_into_tar_list(image, source):
    p = subprocess.Popen([STIPPLE, "extract", "--tar", image], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    t = subprocess.run([tool("tar"), "t"], stdin=p.stdout, capture_output=True, text=True,
                       timeout=600)
    p.stdout.close()
    assert p.wait(timeout=600) == 0, p.stderr.read()
    p.stderr.close()
    assert t.returncode == 0, t.stderr
    assert t.stdout.splitlines() == ["./"] + [
        tar_name(n) + ("/" if os.path.isdir(source / n) and not os.path.islink(source / n)
                       else "") for n in image_order(source)]


@pytest.mark.parametrize("dest", [[], ["-"]])
def test_refuses_a_terminal(image, dest):
    master, slave = pty.openpty()
    try:
        r = subprocess.run([STIPPLE, "extract", "--tar", image, *dest], stdout=slave,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=60)
        fcntl.fcntl(master, fcntl.F_SETFL, os.O_NONBLOCK)
        try:
            written = os.read(master, 4096)
        except BlockingIOError:
            written = b""
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 2
    assert b"refusing to write a tar archive to a terminal" in r.stderr, r.stderr
    assert written == b""


def test_closed_pipe_stops_quietly_as_cat(image):
    # `| head`: ends by SIGPIPE without a word, as cat(1) does (issue 29)
    p = subprocess.Popen([STIPPLE, "extract", "--tar", image], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    p.stdout.read(1000)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    assert p.wait(timeout=600) == -signal.SIGPIPE, err
    assert err == ""


def test_full_device_is_reported(image):
    with open("/dev/full", "wb") as full:
        r = export(image, stdout=full, stdin=subprocess.DEVNULL)
    assert r.returncode == 1
    assert "standard output: cannot write: No space left on device" in r.stderr, r.stderr


def leftovers(directory):
    return sorted(n for n in os.listdir(directory) if ".tmp." in n)


def test_unwritable_destinations(image, tmp_path):
    r = export(image, tmp_path / "no" / "such" / "x.tar", stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "no/such/x.tar: cannot create" in r.stderr, r.stderr
    r = export(image, tmp_path, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "is a directory" in r.stderr.lower(), r.stderr
    r = export(tmp_path / "missing.stipple", tmp_path / "x.tar", stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "missing.stipple" in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def small_image(tmp_path_factory):
    root = tmp_path_factory.mktemp("tarsmall")
    src = root / "src"
    src.mkdir()
    (src / "data").write_bytes(os.urandom(1 << 20))
    (src / "acl").write_bytes(b"x\n")
    run(["setfacl", "-m", "u:4321:rx", src / "acl"], check=True)
    return build_image(src, root / "small.stipple", *FAST)


def test_damaged_block_fails_and_leaves_no_file(small_image, tmp_path):
    bad = tmp_path / "bad.stipple"
    shutil.copyfile(small_image, bad)
    info = run([STIPPLE, "info", "--blocks", bad], check=True).stdout
    blocks = [tuple(int(v) for v in line.split()[:3]) for line in info.splitlines()
              if re.match(r"\d+\s+\d+\s+\d+\s+\d+\s", line)]
    number, offset, stored = blocks[len(blocks) // 2]
    treeutil.flip_byte(bad, offset + stored // 2)
    out = tmp_path / "out.tar"
    out.write_bytes(b"the previous archive")
    r = export(bad, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert re.search(r"bad\.stipple: data block %d: damaged image; 1 file has data in it: /data$"
                     % number, r.stderr, re.M), r.stderr
    assert "tar export failed: 1 problem; nothing written to %s" % out in r.stderr, r.stderr
    assert out.read_bytes() == b"the previous archive"
    assert leftovers(tmp_path) == []
    out.unlink()
    r = export(bad, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and not out.exists() and leftovers(tmp_path) == []


def acl_record(img, path):
    for rec in img.xattr_records(path):
        name_off, value_off, value_len, name_len = img.xattr(rec)
        start = img.strings_off + name_off
        if bytes(img.meta[start:start + name_len]) == b"system.posix_acl_access":
            return rec, value_off, value_len
    raise AssertionError("no ACL xattr on %s" % path)


@pytest.mark.parametrize("change", ["version", "length", "tag", "perm", "order"])
def test_malformed_acl_is_refused(small_image, tmp_path, change):
    img = HostileImage(small_image)
    rec, value_off, value_len = acl_record(img, "/acl")
    v = img.strings_off + value_off
    if change == "version":
        img.meta[v] = 3
    elif change == "length":
        name_off, _, _, name_len = img.xattr(rec)
        img.set_xattr(rec, name_off, value_off, value_len - 1, name_len)
    elif change == "tag":
        img.meta[v + 4] = 0x40
    elif change == "perm":
        img.meta[v + 4 + 2] = 8
    elif change == "order":  # the second entry (user:4321) before the first (user::)
        first = bytes(img.meta[v + 4:v + 12])
        img.meta[v + 4:v + 12] = img.meta[v + 12:v + 20]
        img.meta[v + 12:v + 20] = first
    bad = img.write(tmp_path / "acl.stipple")
    out = tmp_path / "out.tar"
    r = export(bad, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "acl.stipple: /acl: extended attribute system.posix_acl_access: malformed ACL" \
        in r.stderr, r.stderr
    assert "nothing written to %s" % out in r.stderr, r.stderr
    assert not out.exists() and leftovers(tmp_path) == []


def test_sound_small_image_exports(small_image, tmp_path):
    """The same image unedited: what the damage tests change is all that fails."""
    out = tmp_path / "out.tar"
    r = export(small_image, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    names = [m.name for m in members(out)]
    assert names == [".", "./acl", "./data"]


def test_a_name_that_is_not_utf8_goes_out_as_its_bytes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / os.fsdecode(b"bad\xff")).write_bytes(b"x")
    image = build_image(src, tmp_path / "bad-name.stipple", *FAST)
    out = tmp_path / "out.tar"
    r = export(image, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert "/bad\\377: warning" in r.stderr, r.stderr  # named, escaped
    m = members(out)[1]
    assert m.name.encode("utf-8", "surrogateescape") == b"./bad\xff"
    assert m.pax_headers.get("hdrcharset") == "BINARY"
    dest = tmp_path / "x"
    dest.mkdir()
    run([tool("tar"), "-xf", out, "-C", dest], check=True)
    assert os.listdir(os.fsencode(dest)) == [b"bad\xff"]


def names_image(tmp_path, renames):
    """An image of: a symlink aa -> /victim, a directory ab holding evil, files b1 and c1;
    then entries of the root renamed (RENAMES: {old: new}, same lengths)."""
    src = tmp_path / "names"
    (src / "ab").mkdir(parents=True)
    (src / "ab" / "evil").write_bytes(b"written through the link\n")
    os.symlink("/victim", src / "aa")
    (src / "b1").write_bytes(b"b\n")
    (src / "c1").write_bytes(b"c\n")
    img = HostileImage(build_image(src, tmp_path / "names.stipple", *FAST))
    for old, new in renames.items():
        img.rename("/", old, new)
    return img.write(tmp_path / "crafted.stipple")


@pytest.mark.parametrize("renames, entry", [
    ({"ab": "aa"}, "/aa"),   # aa -> /victim, then aa/, then aa/evil
    ({"b1": "c1"}, "/c1"),   # a duplicate next to its twin
    ({"aa": "c1"}, "/c1"),   # c1, ab, b1, c1: a duplicate apart from its twin
    ({"b1": "zz"}, "/c1"),   # zz before c1: c1 comes out of order
], ids=["link-then-dir", "duplicate", "duplicate-apart", "out-of-order"])
def test_names_extract_refuses_are_refused(tmp_path, renames, entry):
    """What extract refuses, --tar refuses too (one check for both): a name twice or out
    of order, and so a path through a symlink. No FILE is left, and stdout fails too."""
    bad = names_image(tmp_path, renames)
    out = tmp_path / "out.tar"
    r = export(bad, out, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "crafted.stipple: %s: entry" % entry in r.stderr, r.stderr
    assert "out of order or a duplicate" in r.stderr, r.stderr
    assert not out.exists() and leftovers(tmp_path) == []
    r = export(bad, "-", stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and b"evil" not in r.stdout, r.stderr
    dest = tmp_path / "dest"
    r = run([STIPPLE, "extract", bad, dest])
    assert r.returncode == 1 and "out of order or a duplicate" in r.stderr, r.stderr
    assert not (dest / "aa" / "evil").exists()
    assert not os.path.lexists("/victim")


@pytest.fixture
def renamed_image(tmp_path):
    """/a, /b and /c all naming /c's inode, whose link count stays 1 (review 7, finding
    6): one inode whose bytes an honest extract writes once."""
    src = tmp_path / "src"
    src.mkdir()
    for n in "abc":
        (src / n).write_bytes(n.encode() * 6)
    img = HostileImage(build_image(src, tmp_path / "multi.stipple", *FAST))
    c = img.lookup("/c")
    img.set_target("/", "a", c)
    img.set_target("/", "b", c)
    return img.write(tmp_path / "multi-bad.stipple")


def test_an_inode_named_again_is_not_written_again(renamed_image, tmp_path):
    """`check` calls it damage; extract writes its bytes once (under /a), names the other
    two and exits 1, and --tar refuses the export: no copy per name."""
    r = run([STIPPLE, "check", renamed_image])
    assert r.returncode == 1 and "link count 1, but 3 names" in r.stderr, r.stderr
    out = tmp_path / "out"
    r = run([STIPPLE, "extract", "-q", renamed_image, out])
    assert r.returncode == 1, r.stderr
    for n in ("/b", "/c"):
        assert "%s: not extracted: its inode" % n in r.stderr, r.stderr
    assert sorted(os.listdir(out)) == ["a"] and (out / "a").read_bytes() == b"cccccc"
    tar = tmp_path / "out.tar"
    r = export(renamed_image, tar, stdin=subprocess.DEVNULL)
    assert r.returncode == 1, r.stderr
    assert "/b: left out: its inode" in r.stderr and "/c: left out" in r.stderr, r.stderr
    assert not tar.exists() and leftovers(tmp_path) == []


def test_a_claimed_size_costs_no_time(tmp_path):
    """A file whose size field says 2^62 and whose extents store 6 bytes: the export takes
    what the image stores, not the claimed holes (review 7, finding 4: days of CPU when
    holes were fed to the writer), and tarfile reads back the size and one 6-byte run."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"SECRET")
    img = HostileImage(build_image(src, tmp_path / "h.stipple", *FAST))
    img.set_size("/f", 1 << 62)
    huge = img.write(tmp_path / "huge.stipple")
    out = tmp_path / "out.tar"
    r = run([STIPPLE, "extract", "--tar", huge, out], timeout=10)
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size < 64 << 10
    with tarfile.open(out) as tar:
        m = tar.getmember("./f")
        assert (m.size, m.sparse) == (1 << 62, [(0, 6)])
        assert tar.extractfile(m).read(6) == b"SECRET"
