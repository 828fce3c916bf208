# SPDX-License-Identifier: MIT
"""Trees for the integration tests.

make_tree() writes a tree holding every kind of entry and attribute an image must keep;
compare_trees() compares two trees entry by entry and returns the differences as readable
lines (an empty list means equal), so that a failed assertion says which path differs and
how.
"""

import errno
import hashlib
import os
import random
import socket
import stat
import struct

# Whether the tests run as root: trees and copies made without root hold less.
IS_ROOT = os.geteuid() == 0

# Fixed timestamps (ns) so that a tree is the same from one run to the next.
T0 = 1_600_000_000_123_456_789
OLD = -31_535_999_999_999_995  # before 1970, with nanoseconds

LONG_NAME = "n" * 240 + "-\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"  # 255 bytes in UTF-8
MANY = 3000


def read_file(path):
    """The bytes of the file at PATH."""
    with open(path, "rb") as f:
        return f.read()


def _data(seed, size, text=False):
    """Deterministic bytes: compressible text or incompressible noise."""
    rnd = random.Random(seed)
    if not text:
        return rnd.randbytes(size)
    words = [b"stipple", b"image", b"block", b"zstd", b"extent", b"inode", b"\n", b"fuse"]
    out = bytearray()
    while len(out) < size:
        out += rnd.choice(words) + b" "
    return bytes(out[:size])


def _write(path, data, mode=0o644):
    with open(path, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def _cap_bytes(caps):
    """security.capability, VFS_CAP_REVISION_2 with the effective bit: permitted CAPS."""
    lo = sum(1 << c for c in caps if c < 32)
    hi = sum(1 << (c - 32) for c in caps if c >= 32)
    return struct.pack("<IIIII", 0x02000000 | 1, lo, 0, hi, 0)


def _acl_bytes(entries):
    """system.posix_acl_* value: version 2, then (tag, perm, id) sorted by tag and id."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", t, p, i) for t, p, i in entries)


ACL_UNDEFINED = 0xFFFFFFFF
ACL_ACCESS = _acl_bytes([(0x01, 6, ACL_UNDEFINED), (0x02, 4, 1000), (0x02, 6, 1001),
                         (0x04, 4, ACL_UNDEFINED), (0x08, 4, 100), (0x10, 6, ACL_UNDEFINED),
                         (0x20, 4, ACL_UNDEFINED)])
ACL_DEFAULT = _acl_bytes([(0x01, 7, ACL_UNDEFINED), (0x02, 5, 1000), (0x04, 5, ACL_UNDEFINED),
                          (0x10, 5, ACL_UNDEFINED), (0x20, 5, ACL_UNDEFINED)])


def _try_setxattr(path, name, value, follow=True):
    try:
        os.setxattr(path, name, value, follow_symlinks=follow)
        return True
    except OSError as e:
        if e.errno in (errno.EOPNOTSUPP, errno.EPERM, errno.EINVAL):
            return False
        raise


def make_tree(root, many=MANY, large_size=3 << 20):
    """Writes the tree under ROOT (created if missing) and returns what it could create:
    a dict with keys 'devices', 'trusted', 'capability', 'acl' (bools: each needs root or
    filesystem support) and 'files' (count of regular files).

    Entries: regular files of many sizes, an empty file, a large file spanning many
    64 KiB blocks, a sparse file and a written file both with a long run of zeros, nested
    directories, relative/absolute/dangling symlinks, three hard links to one inode,
    char and block devices, a FIFO, a socket, setuid/setgid/sticky modes, several owners,
    mtimes with nanoseconds (one before 1970), user.* (binary and empty values), trusted.*,
    security.capability and POSIX ACL xattrs, names with spaces, unicode, control
    characters and 255 bytes, and a directory of MANY entries.
    """
    root = os.fspath(root)
    os.makedirs(root, exist_ok=True)
    info = {"devices": False, "trusted": False, "capability": False, "acl": False}
    p = lambda *parts: os.path.join(root, *parts)  # noqa: E731
    is_root = IS_ROOT

    # Regular files of various sizes around page and block boundaries.
    os.mkdir(p("files"))
    for i, size in enumerate([1, 100, 4095, 4096, 4097, 65535, 65536, 65537, 200_000]):
        _write(p("files", "noise-%d" % size), _data(i, size))
        _write(p("files", "text-%d" % size), _data(100 + i, size, text=True))
    _write(p("files", "empty"), b"")
    _write(p("files", "large"), _data(7, large_size // 2) + _data(8, large_size // 2, text=True))
    # A sparse file: data, a 2 MiB hole, data, and a hole at the end.
    with open(p("files", "sparse"), "wb") as f:
        f.write(b"head" * 1000)
        f.seek(2 << 20, os.SEEK_CUR)
        f.write(b"tail" * 1000)
        f.truncate(f.tell() + (1 << 20))
    _write(p("files", "zeros-written"), b"a" * 5000 + bytes(1536 * 1024) + b"z" * 5000)
    _write(p("files", "all-zeros"), bytes(300_000))

    # Nested directories.
    deep = p("a", "b", "c", "d", "e")
    os.makedirs(deep)
    _write(os.path.join(deep, "deep.txt"), b"at the bottom\n")
    _write(p("a", "b", "mid.txt"), b"in the middle\n")

    # Symlinks.
    os.mkdir(p("links"))
    os.symlink("../files/text-100", p("links", "relative"))
    os.symlink("/etc/hostname", p("links", "absolute"))
    os.symlink("does/not/exist", p("links", "dangling"))
    os.symlink("../a/b", p("links", "to-dir"))
    os.symlink("x" * 1000, p("links", "long-target"))

    # Three names for one inode, in two directories.
    os.mkdir(p("hard"))
    _write(p("hard", "one"), b"shared by three names\n")
    os.link(p("hard", "one"), p("hard", "two"))
    os.link(p("hard", "one"), p("a", "three"))
    # A second group of two names, with xattrs that belong to the inode.
    _write(p("hard", "pair-a"), _data(11, 10_000))
    os.link(p("hard", "pair-a"), p("hard", "pair-b"))
    os.setxattr(p("hard", "pair-a"), "user.shared", b"inode attr")

    # Special files.
    os.mkdir(p("special"))
    if is_root:
        os.mknod(p("special", "null-like"), 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.mknod(p("special", "block"), 0o660 | stat.S_IFBLK, os.makedev(7, 200))
        os.mknod(p("special", "big-rdev"), 0o600 | stat.S_IFCHR, os.makedev(4095, 1048575))
        info["devices"] = True
    os.mkfifo(p("special", "fifo"), 0o640)
    cwd = os.getcwd()
    os.chdir(p("special"))  # sun_path is short: bind a relative name
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("socket")
        s.close()
    finally:
        os.chdir(cwd)
    for name, mode in [("null-like", 0o666), ("block", 0o660), ("big-rdev", 0o600),
                       ("fifo", 0o640), ("socket", 0o755)]:
        if os.path.lexists(p("special", name)):
            os.chmod(p("special", name), mode)  # not left to the umask

    # Modes.
    os.mkdir(p("modes"))
    for name, mode in [("setuid", 0o4755), ("setgid", 0o2711), ("both", 0o6750),
                       ("private", 0o600), ("none", 0o000), ("exec", 0o755)]:
        _write(p("modes", name), name.encode())
    os.mkdir(p("modes", "sticky"))
    os.mkdir(p("modes", "setgid-dir"))
    os.mkdir(p("modes", "locked-dir"))

    # Owners (chown clears setuid bits and capabilities: modes and xattrs come after).
    if is_root:
        os.chown(p("modes", "setuid"), 1000, 1000)
        os.chown(p("modes", "both"), 12345, 54321)
        os.chown(p("modes", "private"), 65534, 65534)
        os.chown(p("modes", "sticky"), 4242, 4343)
        os.lchown(p("links", "relative"), 2000, 3000)
        os.chown(p("hard", "one"), 777, 888)
    for name, mode in [("setuid", 0o4755), ("setgid", 0o2711), ("both", 0o6750),
                       ("private", 0o600), ("none", 0o000), ("exec", 0o755)]:
        os.chmod(p("modes", name), mode)
    os.chmod(p("modes", "sticky"), 0o1777)
    os.chmod(p("modes", "setgid-dir"), 0o2775)

    # Extended attributes.
    os.mkdir(p("xattrs"))
    x = p("xattrs", "file")
    _write(x, b"file with attributes\n")
    os.setxattr(x, "user.text", b"hello")
    os.setxattr(x, "user.binary", bytes(range(256)))
    os.setxattr(x, "user.empty", b"")
    os.setxattr(x, "user.nul\u00e9", b"\x00\x01\x00")
    os.setxattr(x, "user.long", _data(3, 1500))
    os.setxattr(p("xattrs"), "user.on-a-dir", b"dir value")
    if is_root:
        info["trusted"] = _try_setxattr(x, "trusted.stipple", b"trusted value")
        _try_setxattr(p("links", "absolute"), "trusted.on-link", b"L", follow=False)
    cap = p("xattrs", "capable")
    _write(cap, b"#!/bin/sh\n", 0o755)
    if is_root:
        # cap_net_bind_service (10) and cap_sys_admin (21) and cap_bpf (39)
        info["capability"] = _try_setxattr(cap, "security.capability", _cap_bytes([10, 21, 39]))
    acl = p("xattrs", "acl")
    _write(acl, b"acl file\n")
    info["acl"] = _try_setxattr(acl, "system.posix_acl_access", ACL_ACCESS)
    if info["acl"]:
        os.mkdir(p("xattrs", "acl-dir"))
        _try_setxattr(p("xattrs", "acl-dir"), "system.posix_acl_default", ACL_DEFAULT)

    # Names.
    os.mkdir(p("names"))
    for name in ["with space", " leading space", "\u00fcn\u00efc\u00f8d\u00e9 \u2713 \u6587\u5b57",
                 "tab\tand\nnewline", "-dash", "...", "emoji \U0001f600", LONG_NAME,
                 "a" * 255]:
        _write(p("names", name), name.encode("utf-8", "surrogateescape"))
    os.mkdir(p("names", "dir with space"))
    _write(p("names", "dir with space", "inner"), b"inner\n")
    # A name that is not valid UTF-8.
    bad = os.path.join(os.fsencode(p("names")), b"latin1-\xe9")
    with open(bad, "wb") as f:
        f.write(b"latin1")

    # A directory with many entries.
    os.mkdir(p("many"))
    for i in range(many):
        with open(p("many", "entry-%05d" % i), "wb") as f:
            f.write(b"%d\n" % i)

    # Timestamps, last and bottom-up so that no later change moves them.
    n = 0
    for dirpath, dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames + dirnames:
            n += 1
            full = os.path.join(dirpath, name)
            ns = T0 + n * 1_000_000_007
            os.utime(full, ns=(ns, ns), follow_symlinks=False)
    os.utime(p("files", "text-100"), ns=(OLD, OLD))
    os.utime(root, ns=(T0, T0))
    os.chmod(p("modes", "locked-dir"), 0o000)  # last: nothing can be created in it after
    info["files"] = sum(len(f) for _, _, f in os.walk(root))
    return info


def _xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError as e:
        if e.errno == errno.EOPNOTSUPP:
            return {}
        raise
    return {n: os.getxattr(path, n, follow_symlinks=False) for n in names}


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                return h.hexdigest()
            h.update(chunk)


def _walk(root):
    """Relative path (bytes; b'.' for the root) -> lstat result, sorted."""
    root = os.fsencode(root)
    out = {b".": os.lstat(root)}
    stack = [b""]
    while stack:
        rel = stack.pop()
        full = os.path.join(root, rel) if rel else root
        for name in sorted(os.listdir(full)):
            r = os.path.join(rel, name) if rel else name
            st = os.lstat(os.path.join(root, r))
            out[r] = st
            if stat.S_ISDIR(st.st_mode):
                stack.append(r)
    return dict(sorted(out.items()))


FIELDS = ("type", "mode", "uid", "gid", "mtime", "size", "content", "target", "nlink",
          "dir_nlink", "links", "rdev", "xattrs")


def compare_trees(src, dst, ignore=(), ignore_xattrs=()):
    """Compares the trees SRC and DST entry by entry and returns a list of differences,
    each a line "PATH: what differs". IGNORE names fields of FIELDS not to compare (e.g.
    {'uid', 'gid'} when the copy was made without root, 'dir_nlink' for a filesystem
    that counts directory links differently). IGNORE_XATTRS lists xattr names or name
    prefixes ending in '.' not to compare."""
    ignore = set(ignore)
    unknown = ignore - set(FIELDS)
    if unknown:
        raise ValueError("unknown fields %s" % sorted(unknown))
    a, b = _walk(src), _walk(dst)
    diffs = []
    show = lambda rel: os.fsdecode(rel)  # noqa: E731
    for rel in sorted(a.keys() - b.keys()):
        diffs.append("%s: missing from %s" % (show(rel), dst))
    for rel in sorted(b.keys() - a.keys()):
        diffs.append("%s: not in %s" % (show(rel), src))

    def skip_xattr(name):
        return any(name == i or (i.endswith(".") and name.startswith(i)) for i in ignore_xattrs)

    for rel in sorted(a.keys() & b.keys()):
        sa, sb = a[rel], b[rel]
        pa, pb = os.path.join(os.fsencode(src), rel), os.path.join(os.fsencode(dst), rel)
        d = []

        def check(field, va, vb, fmt=repr):
            if field not in ignore and va != vb:
                d.append("%s %s != %s" % (field, fmt(va), fmt(vb)))

        ta, tb = stat.S_IFMT(sa.st_mode), stat.S_IFMT(sb.st_mode)
        check("type", ta, tb, oct)
        if ta != tb:
            diffs.append("%s: %s" % (show(rel), "; ".join(d)))
            continue
        check("mode", stat.S_IMODE(sa.st_mode), stat.S_IMODE(sb.st_mode), oct)
        check("uid", sa.st_uid, sb.st_uid)
        check("gid", sa.st_gid, sb.st_gid)
        check("mtime", sa.st_mtime_ns, sb.st_mtime_ns)
        if stat.S_ISDIR(ta):
            check("dir_nlink", sa.st_nlink, sb.st_nlink)
        else:
            check("nlink", sa.st_nlink, sb.st_nlink)
        if stat.S_ISREG(ta) or stat.S_ISLNK(ta):
            check("size", sa.st_size, sb.st_size)
        if stat.S_ISREG(ta) and "content" not in ignore and sa.st_size == sb.st_size:
            mode_a = stat.S_IMODE(sa.st_mode)
            try:
                if _sha256(pa) != _sha256(pb):
                    d.append("content differs")
            except PermissionError as e:
                d.append("content unreadable (%s, mode %o)" % (e, mode_a))
        if stat.S_ISLNK(ta):
            check("target", os.readlink(pa), os.readlink(pb))
        if stat.S_ISCHR(ta) or stat.S_ISBLK(ta):
            check("rdev", (os.major(sa.st_rdev), os.minor(sa.st_rdev)),
                  (os.major(sb.st_rdev), os.minor(sb.st_rdev)))
        if "xattrs" not in ignore:
            xa = {k: v for k, v in _xattrs(pa).items() if not skip_xattr(k)}
            xb = {k: v for k, v in _xattrs(pb).items() if not skip_xattr(k)}
            for k in sorted(xa.keys() - xb.keys()):
                d.append("xattr %s missing" % k)
            for k in sorted(xb.keys() - xa.keys()):
                d.append("xattr %s extra" % k)
            for k in sorted(xa.keys() & xb.keys()):
                if xa[k] != xb[k]:
                    d.append("xattr %s %r != %r" % (k, xa[k][:64], xb[k][:64]))
        if d:
            diffs.append("%s: %s" % (show(rel), "; ".join(d)))

    if "links" not in ignore:
        diffs += _compare_link_groups(a, b)
    return diffs


def _groups(entries):
    """Sets of paths that share one inode (only files with more than one name)."""
    by_ino = {}
    for rel, st in entries.items():
        if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
            by_ino.setdefault((st.st_dev, st.st_ino), set()).add(rel)
    return {rel: frozenset(group) for group in by_ino.values() for rel in group}


def _compare_link_groups(a, b):
    ga, gb = _groups(a), _groups(b)
    diffs = []
    for rel in sorted(a.keys() & b.keys()):
        if stat.S_ISDIR(a[rel].st_mode):
            continue
        want = ga.get(rel, frozenset([rel]))
        got = gb.get(rel, frozenset([rel]))
        if want != got:
            diffs.append("%s: hard links %s != %s" % (
                os.fsdecode(rel), sorted(map(os.fsdecode, want)), sorted(map(os.fsdecode, got))))
    return diffs


def tree_bytes(root):
    """Total size of the regular files under ROOT (each inode once)."""
    seen, total = set(), 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return total


# What a copy made without root cannot hold.
NON_ROOT_IGNORE = dict(ignore={"uid", "gid"}, ignore_xattrs=("trusted.", "security."))


def assert_same_tree(src, dst, **kw):
    """Asserts DST holds SRC entry by entry; without root, owners and privileged xattrs
    are left out unless KW says what to ignore."""
    if not kw and not IS_ROOT:
        kw = NON_ROOT_IGNORE
    diffs = compare_trees(src, dst, **kw)
    assert not diffs, "%d differences between %s and %s:\n%s" % (
        len(diffs), src, dst, "\n".join(diffs[:60]))


def flip_byte(path, offset, mask=0x5A):
    """Damages PATH in place: the byte at OFFSET is XORed with MASK."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ mask]))
