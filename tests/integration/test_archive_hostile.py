# SPDX-License-Identifier: MIT
"""mkstipple reading an archive made to hurt it: a path tens of thousands of names deep, a
sparse entry that claims a terabyte in a few KB, a thousand hard links to a file with
megabytes of extended attributes. Each must cost what its bytes cost, never the square
of it nor what it claims, and be refused with a message naming the entry where the
readers could not take it (mkstipple(1), ARCHIVES)."""

import gzip
import io
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import unicodedata
import warnings
import zipfile

import pytest

from conftest import MKSTIPPLE, STIPPLE, mount_image, run

needs_gnu_tar = pytest.mark.skipif(not shutil.which("tar"), reason="needs GNU tar")

# The longest path the readers take (extract, ls, check): "/" + path + NUL in 4096 bytes.
PATH_MAX = 4094


def pax_tar(path, name, data=b"deep\n"):
    """A pax tar holding one file NAME (its parents implied) with DATA."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return path


def mkstipple(src, image, timeout=30, stack_kib=None):
    """Runs mkstipple SRC IMAGE, with the stack cut to STACK_KIB when given."""
    limit = None
    if stack_kib:
        def limit():
            resource.setrlimit(resource.RLIMIT_STACK, (stack_kib << 10, stack_kib << 10))
    return run([MKSTIPPLE, "--quiet", src, image], timeout=timeout, preexec_fn=limit)


@pytest.mark.parametrize("depth", [2048, 40000])
def test_deep_path_refused_fast(tmp_path, depth):
    """A path one name past what the readers take, or 40,000 names deep (50 s on the old
    reader, quadratic in depth), is refused at once with the entry and the bound."""
    name = "a/" * (depth - 1) + "f"
    tar = pax_tar(tmp_path / "deep.tar", name)
    r = mkstipple(tar, tmp_path / "deep.stp")
    assert r.returncode != 0, "a path of %d names was taken" % depth
    assert "deep.tar: a/a/a/" in r.stderr and "/a/f: refused" in r.stderr, r.stderr[-600:]
    assert "%d bytes long, %d names deep" % (len(name), depth) in r.stderr, r.stderr[-600:]
    assert "at most %d bytes" % PATH_MAX in r.stderr, r.stderr[-600:]
    assert len(r.stderr) < 1000, "the message should not spell out the whole path"
    assert not os.path.exists(tmp_path / "deep.stp")


def test_deep_path_at_the_bound_small_stack(tmp_path, stipple):
    """A path of exactly the readers' bound (2,047 names) is built with a 64 KiB stack
    (the old reader freed the tree recursively and crashed), checks and extracts."""
    name = "a/" * ((PATH_MAX - 2) // 2) + "ff"
    assert len(name) == PATH_MAX
    tar = pax_tar(tmp_path / "cap.tar", name, b"at the bound\n")
    image = tmp_path / "cap.stp"
    r = mkstipple(tar, image, stack_kib=64)
    assert r.returncode == 0, r.stderr[-2000:]
    run([stipple, "check", image], check=True)
    out = tmp_path / "out"
    try:
        run([stipple, "extract", image, out], check=True)
    finally:
        # 2,047 levels are too deep for Python's recursive removal (pytest's included)
        run(["rm", "-rf", out], check=True)
    r = run([stipple, "cat", image, name], check=True)
    assert r.stdout == "at the bound\n"


def gnu_sparse_tar(tmp_path, size, pieces, names=("bomb",)):
    """A GNU tar --sparse (pax) archive of files NAMES, each of SIZE bytes, holes but
    PIECES ({offset: bytes}); the files are made sparse here and removed."""
    src = tmp_path / "sparse-src"
    src.mkdir()
    for name in names:
        with open(src / name, "wb") as out:
            out.truncate(size)
            for off, data in pieces.items():
                out.seek(off)
                out.write(data)
    tar = tmp_path / "sparse.tar"
    try:
        run(["tar", "--format=posix", "--sparse", "-C", src, "-cf", tar, *names], check=True)
    finally:
        shutil.rmtree(src)
    return tar


def tar_read(tar, name, off, length):
    """LENGTH bytes at OFF of NAME, as Python's tarfile reads the archive."""
    with tarfile.open(tar) as t:
        f = t.extractfile(name)
        f.seek(off)
        return f.read(length)


@needs_gnu_tar
@pytest.mark.needs_root
def test_sparse_bomb_costs_its_data(tmp_path, stipple):
    """A 20 KB tar claiming a 1 TiB file: built in seconds (the old reader read every
    zero of it back from the spool: over an hour), stored as holes, and the ranges read
    through a mount match Python's tarfile."""
    size = 1 << 40
    pieces = {0: b"head", 5_000_000_000: b"middle" * 700, size - 4: b"tail"}
    tar = gnu_sparse_tar(tmp_path, size, pieces)
    assert os.path.getsize(tar) < 64 << 10
    image = tmp_path / "bomb.stp"
    r = mkstipple(tar, image, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert os.path.getsize(image) < 64 << 10, "holes must be stored as holes"
    ranges = [(0, 4096), (4090, 20), (5_000_000_000 - 10, 4300), (1 << 39, 65536),
              (size - 100, 100), (size - 4, 8)]
    with mount_image(image) as mnt:
        path = os.path.join(mnt, "bomb")
        assert os.path.getsize(path) == size
        fd = os.open(path, os.O_RDONLY)
        try:
            for off, length in ranges:
                want = tar_read(tar, "bomb", off, length)
                assert os.pread(fd, length, off) == want, (off, length)
        finally:
            os.close(fd)


@needs_gnu_tar
def test_sparse_file_reads_back(tmp_path, stipple):
    """Two sparse entries of 96 MiB with the same data across page and hole edges: each
    reads back through `stipple cat` as Python's tarfile reads it, and the second is
    stored as a copy of the first (found without reading their holes)."""
    size = 96 << 20
    pieces = {4093: b"x" * 10, 1 << 20: os.urandom(70000), (64 << 20) + 1: b"y", size - 1: b"z"}
    tar = gnu_sparse_tar(tmp_path, size, pieces, names=("one", "two"))
    image = tmp_path / "sparse.stp"
    r = mkstipple(tar, image)
    assert r.returncode == 0, r.stderr[-2000:]
    assert os.path.getsize(image) < 1 << 20
    for name in ("one", "two"):
        with tarfile.open(tar) as t:
            want = t.extractfile(name).read()
        got = subprocess.run([STIPPLE, "cat", image, name], capture_output=True,
                             timeout=60).stdout
        assert len(got) == size and got == want, name
    info = run([stipple, "info", image], check=True).stdout
    data = int(info.split("data size:")[1].split()[0])
    assert data < 2 * 70000, "the copy was stored twice: %d bytes of data" % data


def links_tar(path, nlinks, nvalues):
    """A pax tar of a file with NVALUES extended attributes of 65,000 bytes and NLINKS
    hard links to it."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("target")
        ti.size = 1
        ti.pax_headers = {"SCHILY.xattr.user.v%02d" % i: chr(ord("a") + i) * 65000
                          for i in range(nvalues)}
        t.addfile(ti, io.BytesIO(b"x"))
        for i in range(nlinks):
            li = tarfile.TarInfo("l%05d" % i)
            li.type = tarfile.LNKTYPE
            li.linkname = "target"
            t.addfile(li)
    return path


def peak_rss_kib(cmd, timeout):
    """Runs CMD in a child of a fresh Python, returning (returncode, its peak RSS in KiB)."""
    probe = ("import resource, subprocess, sys; "
             "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
             "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = run([sys.executable, "-c", probe, *cmd], timeout=timeout, check=True)
    rc, rss = r.stdout.split()
    return int(rc), int(rss)


def test_hard_links_share_attributes(tmp_path, stipple):
    """1,000 hard links to a file with 1 MiB of extended attributes: the old reader copied
    the attributes to each link (1 GiB held, 8 s); they are the inode's, held once."""
    tar = links_tar(tmp_path / "links.tar", 1000, 16)
    image = tmp_path / "links.stp"
    rc, rss = peak_rss_kib([MKSTIPPLE, "--quiet", tar, image], timeout=120)
    assert rc == 0
    assert rss < 128 << 10, "mkstipple held %d KiB" % rss
    out = tmp_path / "out.tar"  # a file system may not take 1 MiB of attributes: a tar
    run([stipple, "extract", "--tar", image, out], check=True)
    with tarfile.open(out) as t:
        members = {m.name.lstrip("./"): m for m in t}
    first = [m for m in members.values() if m.isfile()]
    assert len(first) == 1 and len(members) >= 1001
    assert first[0].pax_headers.get("SCHILY.xattr.user.v03") == "d" * 65000
    for name in ("target", "l00000", "l00999"):
        m = members[name]
        assert m.isfile() or m.linkname.lstrip("./") == first[0].name.lstrip("./"), name


def newc_header(name, ino, mode, links):
    """A newc cpio header of an empty entry."""
    name = name.encode() + b"\0"
    fields = (ino, mode, 0, 0, links, 0, 0, 0, 0, 0, 0, len(name), 0)
    b = b"070701" + b"".join(b"%08X" % v for v in fields) + name
    return b + b"\0" * (-len(b) % 4)


def newc_cpio(path, n, nlink, mode=0o100644, prefix="f", shared=1):
    """A gzip'd newc cpio of N empty entries of MODE, each claiming NLINK links, SHARED
    consecutive entries to an inode."""
    body = b"".join(newc_header("%s%07d" % (prefix, i), i // shared + 1, mode, nlink)
                    for i in range(n))
    with gzip.open(path, "wb") as f:
        f.write(body + newc_header("TRAILER!!!", 0, 0, 1))
    return path


# libarchive walks its list of linked entries for each new one; mkstipple refuses the
# archive once the walks pass 2^31 steps, which the 65,537th unpaired entry does.
CPIO_FIRST_REFUSED = 65536


def test_cpio_hard_links_bounded(tmp_path):
    """libarchive pairs a cpio entry that has links with every earlier one: 200,000 in a
    1 MB cpio.gz took minutes. Past 2^31 steps of its list walks the archive is refused;
    10,000 are built."""
    r = mkstipple(newc_cpio(tmp_path / "many.cpio.gz", 200000, 2), tmp_path / "many.stp",
                  timeout=120)
    assert r.returncode != 0
    assert "f%07d: refused: libarchive pairs" % CPIO_FIRST_REFUSED in r.stderr, r.stderr[-600:]
    r = mkstipple(newc_cpio(tmp_path / "some.cpio.gz", 10000, 2), tmp_path / "some.stp")
    assert r.returncode == 0, r.stderr[-600:]


def test_cpio_directories_count_and_pairs_do_not(tmp_path, stipple):
    """Every cpio directory has two links or more, and libarchive keeps each on its list
    for good: 80,000 in a 420 KB cpio.gz cost 12 s, and the old bound did not count them.
    They are refused where unpaired files would be. Files whose links all come (100,000
    entries, two to an inode) leave the list as they are paired and cost nothing: the old
    bound refused them past 10,000."""
    dirs = newc_cpio(tmp_path / "dirs.cpio.gz", 80000, 2, mode=0o040755, prefix="d")
    r = mkstipple(dirs, tmp_path / "dirs.stp", timeout=120)
    assert r.returncode != 0
    assert "d%07d: refused: libarchive pairs" % CPIO_FIRST_REFUSED in r.stderr, r.stderr[-600:]
    assert not os.path.exists(tmp_path / "dirs.stp")
    pairs = newc_cpio(tmp_path / "pairs.cpio.gz", 100000, 2, shared=2)
    image = tmp_path / "pairs.stp"
    r = mkstipple(pairs, image, timeout=120)
    assert r.returncode == 0, r.stderr[-600:]
    out = run([stipple, "ls", "-l", image, "/f0099999"], check=True).stdout
    assert out.split()[1] == "2", out


def test_entry_names_are_escaped_in_messages(tmp_path):
    """An entry's name is the archive author's: the message that refuses it shows its
    control characters escaped (as the readers show names), never raw to the terminal."""
    name = "evil\x1b]0;owned\x07\u009b31m/../x"
    arc = tmp_path / "a.tar"
    with tarfile.open(arc, "w", format=tarfile.PAX_FORMAT) as t:
        info = tarfile.TarInfo(name)
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    r = run([MKSTIPPLE, "-q", arc, tmp_path / "a.stp"], timeout=60)
    assert r.returncode == 1, r.stderr
    assert "evil\\033]0;owned\\007\\302\\23331m" in r.stderr, r.stderr
    assert not any(c in r.stderr for c in "\x1b\x07\u009b"), repr(r.stderr)


def acl_tar(path, users, dup=False):
    """A pax tar of one file whose SCHILY.acl.access names USERS users by number, and
    when DUP uid 0 twice: by the name root, and by number (libarchive merges entries that
    repeat the same number or name, not those that resolve to one)."""
    ents = ["user::rwx", "group::r-x", "other::r--", "mask::rwx"]
    ents += ["user:u%d:rwx:%d" % (i, 1000 + i) for i in range(users)]
    if dup:
        ents += ["user:root:rwx", "user:zero:r--:0"]
    ti = tarfile.TarInfo("f")
    ti.pax_headers = {"SCHILY.acl.access": ",".join(ents)}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        t.addfile(ti)
    return path


@pytest.mark.parametrize("users, dup", [(10000, False), (3, True)])
def test_acl_past_what_linux_takes_is_refused(tmp_path, users, dup):
    """An ACL of more entries than a 64 KiB attribute holds, or naming a user twice, was
    stored (exit 0) as an attribute `check` then calls damaged: refused, naming the entry."""
    image = tmp_path / "acl.stp"
    r = mkstipple(acl_tar(tmp_path / "acl.tar", users, dup), image, timeout=5)
    assert r.returncode == 1, r.stderr
    why = "more than 8,191 entries" if users > 8191 else "one user or group twice"
    assert "acl.tar: f: refused: its ACL" in r.stderr and why in r.stderr, r.stderr
    assert not image.exists()


def test_acl_within_the_bound_is_stored(tmp_path, stipple):
    """8,000 named users (64,036 bytes as the kernel's value) still build, and the image is
    sound; Python's tarfile reads the ACL back from `extract --tar`."""
    image = tmp_path / "acl.stp"
    r = mkstipple(acl_tar(tmp_path / "acl.tar", 8000), image, timeout=60)
    assert r.returncode == 0, r.stderr
    run([stipple, "check", image], check=True)
    out = tmp_path / "out.tar"
    run([stipple, "extract", "--tar", image, out], check=True)
    with tarfile.open(out) as t:
        m = [m for m in t if m.name.lstrip("./") == "f"][0]
    acl = m.pax_headers.get("SCHILY.acl.access") or ""
    assert acl.count("user:") == 8001 and "user:8999:rwx" in acl, acl[:200]


def test_metadata_past_what_readers_take_is_refused(tmp_path):
    """1,150 entries of 15 x 65,000-byte attributes: 1.1 GB of metadata from a few MB of
    .tar.gz. The old mkstipple held it all (2 GB of RSS) and wrote an image every reader
    refuses ("metadata size above 1 GiB"), exit 0. It stops at the entry that passes
    1 GiB, within 1.5 GiB of address space, and leaves no image."""
    arc = tmp_path / "meta.tar.gz"
    with gzip.open(arc, "wb", compresslevel=1) as f:
        for i in range(1150):
            ti = tarfile.TarInfo("f%04d" % i)
            ti.pax_headers = {"SCHILY.xattr.user.a%02d" % j: "v" * 65000 for j in range(15)}
            f.write(ti.tobuf(tarfile.PAX_FORMAT))
        f.write(b"\0" * 1024)
    image = tmp_path / "meta.stp"

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))
    r = run([MKSTIPPLE, "--quiet", arc, image], timeout=600, preexec_fn=limit)
    assert r.returncode == 1, r.stderr[-600:]
    assert "meta.tar.gz: f1" in r.stderr and "passes 1 GiB here" in r.stderr, r.stderr[-600:]
    assert not image.exists()


def flipped(data, at):
    """DATA with the byte at AT changed."""
    b = bytearray(data)
    b[at] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize("method", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_damaged_zip_member_is_refused(tmp_path, method):
    """A zip member whose bytes no longer match its CRC: libarchive says so as a warning,
    which the old reader took for success, storing the damaged bytes, exit 0. The build
    now stops at the member, names it, and leaves no image. Stored, a byte of its data
    is changed; deflated, its CRC in both headers (a changed deflate stream may fail
    otherwise, as zlib's build decides)."""
    arc = tmp_path / "bad.zip"
    content = bytes(range(256)) * 64
    with zipfile.ZipFile(arc, "w", compression=method) as z:
        z.writestr("ok.txt", b"fine\n")
        z.writestr("lib/data.bin", content)
    raw = arc.read_bytes()
    local = raw.index(b"PK\x03\x04", raw.index(b"lib/data.bin") - 30)
    if method == zipfile.ZIP_STORED:
        name_len, extra_len = struct.unpack_from("<HH", raw, local + 26)
        raw = flipped(raw, local + 30 + name_len + extra_len + 100)
    else:
        central = raw.index(b"PK\x01\x02", raw.rindex(b"lib/data.bin") - 46)
        raw = flipped(flipped(raw, local + 14), central + 16)
    arc.write_bytes(raw)
    with zipfile.ZipFile(arc) as z:  # an independent reader agrees it is damaged
        assert z.testzip() == "lib/data.bin"
    image = tmp_path / "bad.stp"
    r = mkstipple(arc, image)
    assert r.returncode == 1, r.stderr[-600:]
    assert "bad.zip: lib/data.bin: ZIP bad CRC" in r.stderr, r.stderr[-600:]
    assert not image.exists()


def deep_tar(f, count, depth):
    """Writes COUNT pax entries to the open stream F, each a file DEPTH names below a top
    directory of its own: every entry makes DEPTH directories the archive never lists."""
    for i in range(count):
        ti = tarfile.TarInfo("d%03d/" % i + "a/" * (depth - 1) + "f")
        f.write(ti.tobuf(tarfile.PAX_FORMAT))


def test_implied_directories_count_toward_the_metadata_bound(tmp_path):
    """A path of 2,000 names makes 2,000 directories, each an inode and an entry of the
    image, from one header; the old reader charged only the file at its end, so a few KB
    of .tar.xz could make millions of nodes (9 GB held) under the 1 GiB bound. Here 300
    such paths come first (600,000 directories, 46 MB of metadata), then entries with 1 MB
    of attributes each: the build must stop at the one that passes 1 GiB counting the
    directories, about 47 entries sooner than without them."""
    depth, deep, values, size = 2000, 300, 15, 65000
    arc = tmp_path / "dirs.tar.gz"
    with gzip.open(arc, "wb", compresslevel=1) as f:
        deep_tar(f, deep, depth)
        for i in range(1150):
            ti = tarfile.TarInfo("f%04d" % i)
            ti.pax_headers = {"SCHILY.xattr.user.a%02d" % j: "v" * size for j in range(values)}
            f.write(ti.tobuf(tarfile.PAX_FORMAT))
        f.write(b"\0" * 1024)
    # what count_meta charges (stipple(5): an entry 12 bytes and its name, an inode 64, an
    # attribute 16 and its name and value)
    dirent, inode, xattr = 12, 64, 16
    dirs = deep * ((dirent + len("d000") + inode) + (depth - 1) * (dirent + 1 + inode))
    files = deep * (dirent + 1 + inode)
    per_entry = dirent + len("f0000") + inode + values * (xattr + len("user.a00") + size)

    def first_past(charged):
        return "f%04d" % (((1 << 30) - charged) // per_entry)

    expected, without = first_past(dirs + files), first_past(files)
    assert expected != without
    image = tmp_path / "dirs.stp"
    r = run([MKSTIPPLE, "--quiet", arc, image], timeout=600)
    assert r.returncode == 1, r.stderr[-600:]
    assert "dirs.tar.gz: %s: refused" % expected in r.stderr, (expected, without,
                                                                r.stderr[-600:])
    assert not image.exists()


def elf_with_table(size):
    """An x86-64 ELF header whose section table (65,535 entries of 64 bytes, all zero)
    fills a file of SIZE bytes: reading it costs 4 MiB."""
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<HHI", head, 16, 3, 62, 1)  # ET_DYN, EM_X86_64, EV_CURRENT
    # e_shoff, e_flags, e_ehsize, e_phentsize, e_phnum, e_shentsize, e_shnum, e_shstrndx
    struct.pack_into("<QIHHHHHH", head, 40, 64, 0, 64, 56, 0, 64, 65535, 0)
    return bytes(head) + b"\0" * (size - len(head))


def test_hard_links_to_a_program_read_its_table_once(tmp_path, stipple):
    """A program whose section table is 4 MiB, with 200,000 hard links to it in a 1 MB
    tar.gz: the old reader read the table again for each name (800 GB of reads, 0.7 ms a
    name, 2.5 minutes); it is read once for the inode (about a second), and every name is
    the same file in the image."""
    arc = tmp_path / "links.tar.gz"
    data = elf_with_table(65535 * 64 + 64)
    with tarfile.open(arc, "w:gz", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("prog")
        ti.size = len(data)
        ti.mode = 0o755
        t.addfile(ti, io.BytesIO(data))
        for i in range(200000):
            li = tarfile.TarInfo("l%06d" % i)
            li.type = tarfile.LNKTYPE
            li.linkname = "prog"
            t.addfile(li)
    image = tmp_path / "links.stp"
    r = mkstipple(arc, image, timeout=30)
    assert r.returncode == 0, r.stderr[-600:]
    out = run([stipple, "ls", "-l", image, "/l199999"], check=True).stdout
    assert " 200001 " in out and str(len(data)) in out, out
    got = subprocess.run([stipple, "cat", image, "/l123456"], capture_output=True, check=True)
    assert got.stdout == data


@needs_gnu_tar
def test_sparse_programs_cost_their_stored_bytes(tmp_path, stipple):
    """4,000 sparse entries, each 64 stored bytes of an ELF header whose section table,
    4 MiB, lies in the entry's hole: the old reader read each table whole from the spool
    (32.9 s for 3,000 here, 11 ms an entry); the table is read where it holds data only
    (5.2 s, most of it the packer's own reading of the holes). Every file is the same
    in the image."""
    data = elf_with_table(65535 * 64 + 64)
    names = ["p%05d" % i for i in range(4000)]
    tar = gnu_sparse_tar(tmp_path, len(data), {0: data[:64]}, names)
    image = tmp_path / "progs.stp"
    r = mkstipple(tar, image, timeout=30)
    assert r.returncode == 0, r.stderr[-600:]
    got = subprocess.run([stipple, "cat", image, "/p03999"], capture_output=True, check=True)
    assert got.stdout == data


def pax_with_record(path, record):
    """A pax tar of one file "x" whose extended header holds RECORD (bytes) as it is."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        ti = tarfile.TarInfo("x")
        ti.size = 5
        ti.pax_headers = {"comment": "abc"}
        t.addfile(ti, io.BytesIO(b"hello"))
    raw = bytearray(path.read_bytes())
    at = raw.index(b"15 comment=abc\n")
    raw[at:at + len(record)] = record
    head = raw[:512]  # the extended header's own header: its checksum again
    head[148:156] = b" " * 8
    raw[148:156] = b"%06o\0 " % sum(head)
    path.write_bytes(bytes(raw))
    return path


def cpio_with_junk(path):
    """A newc cpio of "a" and "b", with 16 bytes of junk between them."""
    def member(name, ino, data):
        name = name.encode() + b"\0"
        fields = (ino, 0o100644, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name), 0)
        b = b"070701" + b"".join(b"%08X" % v for v in fields) + name
        b += b"\0" * (-len(b) % 4) + data
        return b + b"\0" * (-len(b) % 4)
    path.write_bytes(member("a", 1, b"first\n") + b"J" * 16 + member("b", 2, b"second\n")
                     + member("TRAILER!!!", 0, b""))
    return path


def zip_with_two_crcs(path):
    """A zip whose member "lib/b" says one CRC in its local header and another in the
    central directory: readers that trust one or the other disagree about it."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("a", b"fine\n")
        z.writestr("lib/b", b"which crc?\n")
    raw = path.read_bytes()
    local = raw.index(b"PK\x03\x04", raw.index(b"lib/b") - 30)
    path.write_bytes(flipped(raw, local + 14))
    return path


@pytest.mark.parametrize("kind", ["pax", "zip"])
def test_header_warnings_refuse_the_entry(tmp_path, kind):
    """libarchive reads some damaged headers with a warning and goes on: a pax record
    whose length runs past its header (the attribute dropped), a zip member whose local
    header and central directory disagree. The old reader took each as read and built an
    image, exit 0; each now stops the build at the entry, with libarchive's words, and
    leaves no image."""
    if kind == "pax":
        arc, entry, said = pax_with_record(tmp_path / "a.tar", b"99"), "x", "malformed pax"
    else:
        arc, entry, said = zip_with_two_crcs(tmp_path / "a.zip"), "lib/b", "Inconsistent CRC32"
    image = tmp_path / "a.stp"
    r = mkstipple(arc, image)
    assert r.returncode == 1, r.stderr[-600:]
    assert "%s: %s: a damaged header (libarchive: " % (arc.name, entry) in r.stderr, r.stderr
    assert said in r.stderr, r.stderr
    assert not image.exists()


def test_a_bad_header_names_the_entry_before_it(tmp_path):
    """A tar whose second header fails its checksum: the header that fails is the one
    after "a", which was read whole. The old message named "a" as if it were damaged."""
    arc = tmp_path / "a.tar"
    with tarfile.open(arc, "w", format=tarfile.USTAR_FORMAT) as t:
        for name in ("a", "b"):
            ti = tarfile.TarInfo(name)
            ti.size = 6
            t.addfile(ti, io.BytesIO(b"bytes\n"))
    raw = bytearray(arc.read_bytes())
    raw[1024 + 100] ^= 0x01  # b's mode field: its checksum no longer matches
    arc.write_bytes(bytes(raw))
    image = tmp_path / "a.stp"
    r = mkstipple(arc, image)
    assert r.returncode == 1, r.stderr[-600:]
    assert "a.tar: after a: Damaged tar archive" in r.stderr, r.stderr
    assert not image.exists()


def test_a_cut_inside_data_read_in_place_names_its_entry(tmp_path):
    """A plain tar is read in place: its files' bytes are not copied, only skipped. Cut
    inside "b"'s bytes, the cut is "b"'s, not the next header's (it once read "after
    b"), as it is when the same tar comes on standard input and is copied."""
    arc = tmp_path / "cut.tar"
    with tarfile.open(arc, "w", format=tarfile.USTAR_FORMAT) as t:
        for name, size in (("a", 10), ("b", 100000), ("c", 10)):
            ti = tarfile.TarInfo(name)
            ti.size = size
            t.addfile(ti, io.BytesIO(b"x" * size))
    arc.write_bytes(arc.read_bytes()[:512 * 4 + 50000])
    r = mkstipple(arc, tmp_path / "cut.stp")
    assert r.returncode == 1, r.stderr[-600:]
    assert "cut.tar: b: " in r.stderr and "after b" not in r.stderr, r.stderr
    assert not (tmp_path / "cut.stp").exists()


def test_pax_names_beyond_ascii_in_the_c_locale(tmp_path, stipple):
    """A pax archive says its names are UTF-8; libarchive converts them to the locale's
    charset and, in mkstipple's C locale, warns on every name beyond ASCII. Those are no
    damage: names, a symbolic link's target and a hard link's target come into the image
    byte for byte as tarfile reads them, whatever the caller's locale. "cafe" with a
    combining accent (NFD) and with a precomposed one (NFC) stay two files: a UTF-8
    locale would have libarchive normalize both to NFC, one replacing the other."""
    arc = tmp_path / "u.tar"
    names = ["caf\u00e9", "caf\u00e9/na\u00efve.txt", "caf\u00e9/\u65e5\u672c", "caf\u00e9/l\u00efnk"]
    with tarfile.open(arc, "w", format=tarfile.PAX_FORMAT) as t:
        d = tarfile.TarInfo(names[0])
        d.type = tarfile.DIRTYPE
        t.addfile(d)
        f = tarfile.TarInfo(names[1])
        f.size = 3
        t.addfile(f, io.BytesIO(b"na\n"))
        s = tarfile.TarInfo(names[2])
        s.type, s.linkname = tarfile.SYMTYPE, "na\u00efve.txt"
        t.addfile(s)
        h = tarfile.TarInfo(names[3])
        h.type, h.linkname = tarfile.LNKTYPE, names[1]
        t.addfile(h)
        for i, name in enumerate(("cafe\u0301", "caf\u00e9/nfc")):
            f = tarfile.TarInfo(name)
            f.size = 2
            t.addfile(f, io.BytesIO(b"%d\n" % i))
    for lang in ("C.UTF-8", "C"):
        env = dict(os.environ, LC_ALL=lang, LANG=lang)
        image = tmp_path / ("u-%s.stp" % lang)
        r = run([MKSTIPPLE, "--quiet", arc, image], env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        ls = subprocess.run([stipple, "ls", image], capture_output=True, check=True).stdout
        assert b"cafe\xcc\x81\n" in ls and b"caf\xc3\xa9\n" in ls, (lang, ls)
    out = tmp_path / "out"
    run([stipple, "extract", image, out], env=env, check=True)
    with tarfile.open(arc) as t:
        want = {m.name.encode() for m in t.getmembers()}
    assert (out / "cafe\u0301").read_bytes() == b"0\n"
    got = {os.path.relpath(os.path.join(d, n), out).encode()
           for d, ds, fs in os.walk(out) for n in ds + fs}
    assert got == want
    lnk = os.path.join(out, names[2])
    assert os.readlink(lnk.encode()) == "na\u00efve.txt".encode()
    assert os.stat(os.path.join(out, names[3])).st_nlink == 2
    assert (out / names[3]).read_bytes() == b"na\n"


def test_a_name_warning_hides_no_other_of_a_plain_field(tmp_path):
    """The one header warning taken is libarchive's that a name could not be converted.
    A byte that is not UTF-8 in a field it never converts (a ustar owner name) is no such
    warning: a malformed pax record in the same header is still refused."""
    arc = pax_with_record(tmp_path / "a.tar", b"99")
    raw = bytearray(arc.read_bytes())
    head = 1024  # the file's own ustar header, after the extended one and its record
    raw[head + 265:head + 269] = b"r\xffot"  # uname
    raw[head + 148:head + 156] = b" " * 8
    raw[head + 148:head + 156] = b"%06o\0 " % sum(raw[head:head + 512])
    arc.write_bytes(bytes(raw))
    r = mkstipple(arc, tmp_path / "a.stp")
    assert r.returncode == 1, r.stderr[-600:]
    assert "a.tar: x: a damaged header (libarchive: " in r.stderr, r.stderr
    assert not (tmp_path / "a.stp").exists()


def extracted_names(stipple, image, out):
    run([stipple, "extract", image, out], check=True)
    return {os.path.relpath(os.path.join(d, n), out).encode()
            for d, ds, fs in os.walk(out) for n in ds + fs}


def test_zip_names_marked_utf8(tmp_path, stipple):
    """A zip marks names beyond ASCII as UTF-8 (Python, Java and Info-ZIP do), and
    libarchive gives such a name only in a UTF-8 locale: in mkstipple's C locale the old
    reader refused the zip ("an entry without a path"). A zip is read under C.UTF-8,
    whether it is a file, a file behind a self-extracting stub, or a stream on standard
    input or through a pipe; its names come out as zipfile reads them."""
    arc = tmp_path / "u.zip"
    names = ["caf\u00e9/na\u00efve.txt", "\u65e5\u672c.txt", "plain.txt"]
    with zipfile.ZipFile(arc, "w") as z:
        for i, name in enumerate(names):
            z.writestr(name, b"%d\n" % i)
    with zipfile.ZipFile(arc) as z:
        assert all(i.flag_bits & 0x800 for i in z.infolist()[:2])
        want = {n.encode() for n in z.namelist()} | {"caf\u00e9".encode()}
    sfx = tmp_path / "u.run"
    sfx.write_bytes(b"#!/bin/sh\necho a stub\nexit 0\n" + bytes(5000) + arc.read_bytes())
    with zipfile.ZipFile(sfx) as z:  # zipfile reads it too, past the stub
        assert {n.encode() for n in z.namelist()} | {"caf\u00e9".encode()} == want
    ways = {"file": ([MKSTIPPLE, "--quiet", arc], None),
            "self-extracting": ([MKSTIPPLE, "--quiet", sfx], None),
            "standard input": ([MKSTIPPLE, "--quiet", "-"], arc),
            "a pipe": (["sh", "-c", 'cat "$0" | "$1" --quiet - "$2"', arc, MKSTIPPLE], None)}
    for way, (argv, stdin) in ways.items():
        image = tmp_path / (way.replace(" ", "-") + ".stp")
        with open(stdin or os.devnull, "rb") as f:
            r = subprocess.run(argv + [image], stdin=f, capture_output=True,
                               errors="replace", timeout=60)
        assert r.returncode == 0, (way, r.stderr)
        out = tmp_path / ("out-" + way.replace(" ", "-"))
        assert extracted_names(stipple, image, out) == want, way
        assert (out / names[1]).read_bytes() == b"1\n", way


def test_tar_ending_in_a_zip_keeps_its_name_bytes(tmp_path, stipple):
    """A tar whose last member is a zip ends as a zip does (its end record lies in the
    tar's last bytes). It is still read as a tar, in the C locale: a name with a
    combining accent keeps its bytes, where a zip's would come out in NFC."""
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("inner.txt", b"inner\n")
    nfd = unicodedata.normalize("NFD", "caf\u00e9.txt")
    arc = tmp_path / "t.tar"
    with tarfile.open(arc, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in ((nfd, b"nfd\n"), ("last.zip", zbuf.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    assert b"PK\x05\x06" in arc.read_bytes()[-66000:]
    image = tmp_path / "t.stp"
    r = mkstipple(arc, image)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    assert extracted_names(stipple, image, out) == {nfd.encode(), b"last.zip"}
    assert (out / "last.zip").read_bytes() == zbuf.getvalue()


def test_zip_names_that_meet_are_refused(tmp_path, stipple):
    """libarchive gives a zip's UTF-8 names in NFC form, so a name spelled with a
    combining accent and the same name precomposed would become one file, and one of
    them lost; a zip that names a file twice loses one too. Both are refused, naming the
    entry, and no image is left. A directory entry that meets a directory brings only
    attributes, and is taken."""
    nfc = unicodedata.normalize("NFC", "caf\u00e9.txt")
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfc != nfd
    cases = {"spellings.zip": ([(nfc, b"composed\n"), (nfd, b"decomposed\n")], nfc),
             "twice.zip": ([("a/x", b"1\n"), ("a/x", b"2\n")], "a/x"),
             "dir-then-file.zip": ([("a/", b""), ("a", b"file\n")], "a")}
    for arc, (members, shown) in cases.items():
        with warnings.catch_warnings(), zipfile.ZipFile(tmp_path / arc, "w") as z:
            warnings.simplefilter("ignore")  # zipfile: "Duplicate name"
            for name, data in members:
                z.writestr(name, data)
        image = tmp_path / (arc + ".stp")
        r = mkstipple(tmp_path / arc, image)
        assert r.returncode == 1, (arc, r.stderr)
        assert f"{arc}: {shown}: refused: an earlier entry of the zip has this name" in r.stderr, r.stderr
        assert not image.exists()
    # the same bytes under another mode lose the mode: refused too
    arc = tmp_path / "modes.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(arc, "w") as z:
        warnings.simplefilter("ignore")
        for mode in (0o644, 0o755):
            info = zipfile.ZipInfo("bin/tool")
            info.external_attr = (stat.S_IFREG | mode) << 16
            z.writestr(info, b"same\n")
    r = mkstipple(arc, tmp_path / "modes.stp")
    assert r.returncode == 1 and "bin/tool: refused: an earlier entry" in r.stderr, r.stderr
    assert not (tmp_path / "modes.stp").exists()
    # a directory named twice, and after a file beneath it: one directory, every file;
    # a file given twice with the same bytes and mode (Gradle's duplicates): one file
    big = os.urandom(100000)
    arc = tmp_path / "dirs.zip"
    with warnings.catch_warnings(), zipfile.ZipFile(arc, "w") as z:
        warnings.simplefilter("ignore")
        z.writestr("d/f", b"f\n")
        z.writestr("d/", b"")
        z.writestr("d/", b"")
        z.writestr(nfc, b"composed\n")
        z.writestr("d/big", big)
        z.writestr("d/big", big)
        z.writestr("d/empty", b"")
        z.writestr("d/empty", b"")
    image = tmp_path / "dirs.stp"
    r = mkstipple(arc, image)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "out"
    run([stipple, "extract", image, out], check=True)
    assert sorted(os.listdir(out)) == sorted(["d", nfc])
    assert sorted(os.listdir(out / "d")) == ["big", "empty", "f"]
    assert (out / "d" / "f").read_bytes() == b"f\n"
    assert (out / "d" / "big").read_bytes() == big
    assert (out / "d" / "empty").read_bytes() == b""


def test_zip_on_redirected_stdin_keeps_modes_and_links(tmp_path, stipple):
    """Standard input redirected from a zip file can seek: libarchive reads the zip's
    central directory there, as from the file, which holds the Unix modes and symlinks
    (the local headers do not). Through a pipe the local headers are all there is."""
    arc = tmp_path / "modes.zip"
    run_info = zipfile.ZipInfo("bin/run")
    run_info.external_attr = (stat.S_IFREG | 0o755) << 16
    link_info = zipfile.ZipInfo("lnk")
    link_info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(arc, "w") as z:
        z.writestr(run_info, b"#!/bin/sh\n")
        z.writestr(link_info, b"bin/run")
    for way in ("file", "stdin"):
        image = tmp_path / (way + ".stp")
        if way == "file":
            r = mkstipple(arc, image)
        else:
            with open(arc, "rb") as f:
                r = subprocess.run([MKSTIPPLE, "--quiet", "-", image], stdin=f,
                                   capture_output=True, errors="replace", timeout=60)
        assert r.returncode == 0, (way, r.stderr)
        out = tmp_path / ("out-" + way)
        run([stipple, "extract", image, out], check=True)
        assert stat.S_IMODE(os.lstat(out / "bin" / "run").st_mode) == 0o755, way
        assert os.readlink(out / "lnk") == "bin/run", way


def test_tar_named_like_a_zip_keeps_its_names(tmp_path, stipple):
    """A tar whose first name begins with a zip's signature is a tar (its header's
    checksum holds): read in the C locale, file or pipe, a name precomposed and the same
    name with a combining accent stay two files."""
    nfc = unicodedata.normalize("NFC", "caf\u00e9")
    nfd = unicodedata.normalize("NFD", nfc)
    arc = tmp_path / "pk.tar"
    with tarfile.open(arc, "w", format=tarfile.PAX_FORMAT) as t:
        for name, data in (("PK\x03\x04lead", b"x"), (nfc, b"nfc"), (nfd, b"nfd")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    assert arc.read_bytes()[:4] == b"PK\x03\x04"
    for way in ("file", "pipe"):
        image = tmp_path / (way + ".stp")
        if way == "file":
            r = mkstipple(arc, image)
        else:
            r = subprocess.run(["sh", "-c", 'cat "$0" | "$1" --quiet - "$2"', arc, MKSTIPPLE,
                                image], capture_output=True, errors="replace", timeout=60)
        assert r.returncode == 0, (way, r.stderr)
        out = tmp_path / ("out-" + way)
        assert extracted_names(stipple, image, out) == {
            b"PK\x03\x04lead", nfc.encode(), nfd.encode()}, way
        assert (out / nfd).read_bytes() == b"nfd", way


def test_pipe_formats_told_as_libarchive_tells_them(tmp_path, stipple):
    """Through a pipe, the first bytes tell a zip: every signature libarchive's streaming
    zip reader takes (a split archive's "PK00" marker among them), but not a tar header
    whose checksum holds, signed as some old tars wrote it as well as unsigned."""
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w") as z:
        z.writestr("caf\u00e9.txt", b"c")
    pk00 = tmp_path / "pk00.zip"
    pk00.write_bytes(b"PK00" + zbuf.getvalue())
    tbuf = io.BytesIO()
    name = "PK\x03\x04-\u00e9t\u00e9.txt"
    with tarfile.open(fileobj=tbuf, mode="w", format=tarfile.USTAR_FORMAT,
                      encoding="utf-8") as t:
        for n, data in ((name, b"x"), ("plain", b"y")):
            info = tarfile.TarInfo(n)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    raw = bytearray(tbuf.getvalue())
    signed = sum(b - 256 if b >= 128 else b for b in raw[:148] + raw[156:512]) + 8 * 32
    assert signed != sum(raw[:148] + raw[156:512]) + 8 * 32
    raw[148:156] = b"%06o\0 " % signed
    old_tar = tmp_path / "signed.tar"
    old_tar.write_bytes(bytes(raw))
    with tarfile.open(old_tar, encoding="utf-8") as t:  # Python takes it too
        assert t.getnames() == [name, "plain"]
    for arc, want in ((pk00, {"caf\u00e9.txt".encode()}),
                      (old_tar, {name.encode(), b"plain"})):
        image = tmp_path / (arc.name + ".stp")
        r = subprocess.run(["sh", "-c", 'cat "$0" | "$1" --quiet - "$2"', arc, MKSTIPPLE,
                            image], capture_output=True, errors="replace", timeout=60)
        assert r.returncode == 0, (arc.name, r.stderr)
        assert extracted_names(stipple, image, tmp_path / ("out-" + arc.name)) == want
