# SPDX-License-Identifier: MIT
"""Hostile images against the readers: superblocks that promise more than the file
holds (refused at open, naming the rule), extended attributes beyond Linux's bounds,
names, link targets and status text with terminal control bytes (escaped, stipple(1)),
and file sizes crafted to wrap the arithmetic of `stipple bench --sequential`.

Every crafted image starts from a real one built by mkstipple and is changed field by
field with imageutil (stipple(5) offsets); expected output is computed in Python."""

import contextlib
import errno
import json
import os
import re
import subprocess
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, build_image, run
from imageutil import (BLOCKENT_FIELDS, BLOCKENT_SIZE, FEAT_META_PAGES, META_CODEC_PAGES,
                       META_PAGE_SIZE, SB_FIELDS, HostileImage, escape_name, get,
                       CraftedImage, patch_superblock, put, read_file, reseal, superblock,
                       xxh3, FAST)


def stipple(*args, timeout=60):
    return run([STIPPLE, *args], timeout=timeout)


def stipple_bytes(*args, timeout=60):
    """Runs stipple ARGS; stdout and stderr as bytes."""
    return subprocess.run([STIPPLE, *map(os.fspath, args)], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=timeout)


def assert_refused(r, image, reason):
    """R (a finished run) failed on IMAGE as damaged, giving REASON."""
    assert r.returncode == 1, "exit %d:\n%s%s" % (r.returncode, r.stdout, r.stderr)
    assert os.fspath(image) in r.stderr and "damaged image" in r.stderr, r.stderr
    assert reason in r.stderr, r.stderr
    assert r.stdout == "", r.stdout


@pytest.fixture(scope="module")
def small_image(tmp_path_factory, stipple_built):
    """An image of a few files, one of them 200 KiB of text (several 64 KiB blocks,
    zstd-compressed)."""
    root = tmp_path_factory.mktemp("hostile")
    src = root / "src"
    src.mkdir()
    (src / "a").write_bytes(b"alpha\n")
    (src / "big").write_bytes(b"hello stipple %d\n" % 7 * 13000)
    (src / "dir").mkdir()
    (src / "dir" / "b").write_bytes(b"beta\n")
    return build_image(src, root / "small.stipple", *FAST)


@pytest.fixture(scope="module")
def whole_image(tmp_path_factory, small_image):
    """The same tree with its metadata in one zstd frame (--no-meta-pages), as images
    were before paged metadata."""
    src = small_image.parent / "src"
    return build_image(src, small_image.parent / "whole.stipple", *FAST, "--no-meta-pages")


@pytest.fixture(scope="module")
def stipple_built():
    if not os.access(STIPPLE, os.X_OK):
        pytest.skip("%s is not built" % STIPPLE)


# --- item: a header that promises more than the image can hold ---


def test_reserved_bytes_108_to_111(small_image, tmp_path):
    bad = patch_superblock(small_image, tmp_path / "r.stipple", raw={110: b"\x01"})
    assert_refused(stipple("info", bad), bad, "superblock reserved bytes not zero")


def test_image_size_past_the_file_is_truncated(small_image, tmp_path):
    size = os.path.getsize(small_image)
    bad = patch_superblock(small_image, tmp_path / "t.stipple", image_size=size + (1 << 40))
    assert_refused(stipple("ls", bad), bad, "truncated: %d bytes of %d" % (size, size + (1 << 40)))


def test_metadata_range_that_wraps(small_image, tmp_path):
    bad = patch_superblock(small_image, tmp_path / "w.stipple", meta_offset=(1 << 64) - 16)
    assert_refused(stipple("ls", bad), bad, "metadata lies outside image_size")
    bad = patch_superblock(small_image, tmp_path / "w2.stipple", meta_stored_size=(1 << 64) - 1)
    assert_refused(stipple("ls", bad), bad, "metadata lies outside image_size")


def test_metadata_in_the_superblock(small_image, tmp_path):
    bad = patch_superblock(small_image, tmp_path / "s.stipple", meta_offset=128)
    assert_refused(stipple("ls", bad), bad, "metadata lies outside image_size")


def test_metadata_too_small_for_its_inodes(small_image, tmp_path):
    sb = superblock(read_file(small_image))
    bad = patch_superblock(small_image, tmp_path / "m.stipple",
                           meta_size=96 + 64 * sb["inode_count"] - 1)
    assert_refused(stipple("ls", bad), bad,
                   "metadata size too small for inode_count and block_count")


def test_metadata_above_one_gib(small_image, tmp_path):
    bad = patch_superblock(small_image, tmp_path / "g.stipple", meta_size=(1 << 30) + 8)
    assert_refused(stipple("ls", bad), bad, "metadata size above 1 GiB")


def test_metadata_bomb_beyond_what_zstd_can_decode(whole_image, tmp_path):
    sb = superblock(read_file(whole_image))
    assert sb["meta_codec"] == 1
    bad = patch_superblock(whole_image, tmp_path / "z.stipple",
                           meta_size=sb["meta_stored_size"] * 32768 + 32768)
    assert_refused(stipple("ls", bad), bad,
                   "metadata size more than its stored size can decode to")


def test_raw_metadata_of_another_size(whole_image, tmp_path):
    bad = patch_superblock(whole_image, tmp_path / "raw.stipple", meta_codec=0)
    assert_refused(stipple("ls", bad), bad, "raw metadata: stored size differs")


def test_whole_metadata_still_reads(small_image, whole_image):
    """An image whose metadata is one frame lists and checks as the paged one does."""
    assert superblock(read_file(small_image))["meta_codec"] == META_CODEC_PAGES
    for image in (small_image, whole_image):
        r = stipple("check", image)
        assert r.returncode == 0, r.stderr
    assert stipple("ls", whole_image, "/").stdout == stipple("ls", small_image, "/").stdout
    assert stipple("cat", whole_image, "/big").stdout == "hello stipple 7\n" * 13000


def test_paged_metadata_without_its_bit(small_image, tmp_path):
    sb = superblock(read_file(small_image))
    bad = patch_superblock(small_image, tmp_path / "nobit.stipple",
                           feat_incompat=sb["feat_incompat"] & ~FEAT_META_PAGES)
    assert_refused(stipple("ls", bad), bad, "paged metadata without its feature bit")


def test_page_table_of_another_length(small_image, tmp_path):
    sb = superblock(read_file(small_image))
    bad = patch_superblock(small_image, tmp_path / "len.stipple",
                           meta_size=sb["meta_size"] + META_PAGE_SIZE)
    assert_refused(stipple("ls", bad), bad, "page table size does not match meta_size")


def page_table(image):
    data = read_file(image)
    sb = superblock(data)
    return data, sb, sb["meta_offset"]


@pytest.mark.parametrize("field,value,reason", [
    ("offset", 1 << 40, "metadata page 0: table entry invalid"),
    ("offset", 100, "metadata page 0: table entry invalid"),
    ("stored_size", 65536 + 256 + 65, "metadata page 0: table entry invalid"),
    ("stored_size", 1, "metadata page 0: checksum mismatch"),  # a small page: not bounded
    ("codec", 2, "metadata page 0: table entry invalid"),
    ("filter", 1, "metadata page 0: table entry invalid"),
    ("checksum", 12345, "metadata page 0: checksum mismatch"),
])
def test_bad_page_table_entry(small_image, tmp_path, field, value, reason):
    """Page 0 holds the header: every damage to its entry refuses the image at open,
    naming the page; the page table's own checksum is made to match."""
    data, sb, table = page_table(small_image)
    data = bytearray(data)
    put(BLOCKENT_FIELDS, field, data, value, table)
    put(SB_FIELDS, "meta_checksum", data, xxh3(data[table:table + sb["meta_stored_size"]]))
    reseal(data)
    bad = tmp_path / "entry.stipple"
    bad.write_bytes(data)
    assert_refused(stipple("ls", bad), bad, reason)


def test_damaged_later_page_fails_only_what_needs_it(tmp_path, stipple_built):
    """A tree whose metadata spans several pages; a byte of the last page (the names of
    the last directories) is flipped: the image opens, a file whose records lie in sound
    pages reads, and what needs the damaged page fails as damage naming the page, while
    check reports it."""
    src = tmp_path / "src"
    for d in range(40):
        (src / ("d%02d" % d)).mkdir(parents=True)
        for f in range(60):
            (src / ("d%02d" % d) / ("file-with-a-long-name-%04d" % f)).write_bytes(b"%d" % f)
    image = build_image(src, tmp_path / "pages.stipple", *FAST)
    data, sb, table = page_table(image)
    npages = sb["meta_stored_size"] // BLOCKENT_SIZE
    assert npages >= 3, npages
    last = table + BLOCKENT_SIZE * (npages - 1)
    off = get(BLOCKENT_FIELDS, "offset", data, last)
    size = get(BLOCKENT_FIELDS, "stored_size", data, last)
    data = bytearray(data)
    data[off + size // 2] ^= 0x40
    bad = tmp_path / "bad.stipple"
    bad.write_bytes(data)
    assert stipple("cat", bad, "/d00/file-with-a-long-name-0007").stdout == "7"
    r = stipple("ls", bad, "/d39")
    assert r.returncode == 1 and "metadata page %d: checksum mismatch" % (npages - 1) in r.stderr, \
        r.stderr
    r = stipple("check", bad)
    assert r.returncode == 1 and "metadata page %d: damaged image" % (npages - 1) in r.stderr, \
        r.stderr


def test_dictionary_above_16_mib_is_not_read(small_image, tmp_path):
    """The file really holds 16 MiB + 1 byte at dict_offset: the bound, not the file
    size, refuses it, before anything is allocated for it."""
    size = os.path.getsize(small_image)
    pad = (16 << 20) + 1
    bad = patch_superblock(small_image, tmp_path / "d.stipple", pad=pad, dict_offset=size,
                           dict_size=pad, image_size=size + pad)
    assert_refused(stipple("ls", bad), bad, "dictionary above 16 MiB")
    good = patch_superblock(small_image, tmp_path / "d2.stipple", pad=pad - 1,
                            dict_offset=size, dict_size=pad - 1, image_size=size + pad - 1)
    assert_refused(stipple("ls", good), good, "dictionary checksum mismatch")


def test_dictionary_past_image_size(small_image, tmp_path):
    size = os.path.getsize(small_image)
    bad = patch_superblock(small_image, tmp_path / "dp.stipple", dict_offset=size - 10,
                           dict_size=11)
    assert_refused(stipple("ls", bad), bad, "dictionary lies outside image_size")


def test_block_past_the_end_refused_at_open(small_image, tmp_path):
    """ls reads no block, yet a block table entry that points past the image refuses
    the image when it is opened."""
    img = HostileImage(small_image)
    img.set_block(1, offset=1 << 40)
    bad = img.write(tmp_path / "b.stipple")
    r = stipple("ls", bad)
    assert_refused(r, bad, "block 1: table entry invalid")


def test_block_that_zstd_cannot_decode_to_its_size(small_image, tmp_path):
    """A zstd block of 64 KiB needs at least 2 stored bytes (65536 / 32768)."""
    img = HostileImage(small_image)
    assert img.block_codecs()[0] == 1
    img.set_block(0, stored_size=1)
    bad = img.write(tmp_path / "b1.stipple")
    assert_refused(stipple("ls", bad), bad, "block 0: table entry invalid")


def test_crafted_sound_image_still_reads(small_image, tmp_path):
    """The rewritten image (raw metadata, fresh checksums) is sound: what the tests above
    refuse is their one change."""
    good = HostileImage(small_image).write(tmp_path / "ok.stipple")
    r = stipple("check", good)
    assert r.returncode == 0, r.stderr
    r = stipple("ls", good, "/dir")
    assert r.returncode == 0 and r.stdout == "b\n", r.stderr


# --- item: extended attributes beyond Linux's bounds ---


@pytest.fixture(scope="module")
def xattr_image(tmp_path_factory, stipple_built):
    """An image whose file x has one attribute and whose string pool holds more than
    64 KiB (long symlink targets), so that a value of 65537 bytes still lies in it."""
    root = tmp_path_factory.mktemp("xattr")
    src = root / "src"
    src.mkdir()
    (src / "x").write_bytes(b"x\n")
    os.setxattr(src / "x", "user.abcdef", b"value")
    for i in range(20):
        os.symlink("t" * 4000 + "%02d" % i, src / ("l%02d" % i))
    return build_image(src, root / "x.stipple", *FAST)


def crafted_xattr(xattr_image, path, change):
    img = HostileImage(xattr_image)
    rec, = img.xattr_records("/x")
    name_off, value_off, value_len, name_len = img.xattr(rec)
    assert img.strings_size() > 70000
    if change == "nul":
        start = img.strings_off + name_off
        img.meta[start:start + name_len] = b"user.a\0cdef"
    elif change == "long-name":
        img.set_xattr(rec, 0, value_off, value_len, 256)
    elif change == "long-value":
        img.set_xattr(rec, name_off, 0, 65537, name_len)
    return img.write(path)


@pytest.mark.parametrize("change", ["nul", "long-name", "long-value"])
def test_xattr_beyond_linux_bounds_is_damage(xattr_image, tmp_path, change):
    bad = crafted_xattr(xattr_image, tmp_path / ("%s.stipple" % change), change)
    r = stipple("check", bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "extended attribute 0: name or value too long, or a NUL in the name" in r.stderr, \
        r.stderr


def test_xattr_at_linux_bounds_is_accepted(xattr_image, tmp_path):
    img = HostileImage(xattr_image)
    rec, = img.xattr_records("/x")
    img.set_xattr(rec, 0, 0, 65536, 255)  # names and values may share pool bytes
    good = img.write(tmp_path / "edge.stipple")
    r = stipple("check", good)
    assert "extended attribute" not in r.stderr, r.stderr


def xattr_tar(path, files, count):
    """A pax tar of empty FILES, each with COUNT one-byte attributes user.a0000..., and
    20 symlinks of 4 KB targets, so that the string pool holds more than 64 KiB."""
    import tarfile
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for f in files:
            ti = tarfile.TarInfo(f)
            ti.pax_headers = {"SCHILY.xattr.user.a%04d" % i: "v" for i in range(count)}
            t.addfile(ti)
        for i in range(20):
            ti = tarfile.TarInfo("l%02d" % i)
            ti.type, ti.linkname = tarfile.SYMTYPE, "t" * 4000 + "%02d" % i
            t.addfile(ti)
    return path


@pytest.fixture(scope="module")
def two_files_image(tmp_path_factory, stipple_built):
    root = tmp_path_factory.mktemp("xattr2")
    return build_image(xattr_tar(root / "two.tar", ["f1", "f2"], 40), root / "two.stp", *FAST)


def with_big_values(img, recs):
    """Every record of RECS keeps its name and takes the pool's first 64 KiB as value:
    each record alone is sound (values may share pool bytes)."""
    for rec in recs:
        name_off, _, _, name_len = img.xattr(rec)
        img.set_xattr(rec, name_off, 0, 65536, name_len)


def run_limited(args, gib=1):
    """stipple ARGS in at most GIB GiB of address space."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (gib << 30, gib << 30))
    return run([STIPPLE, *args], timeout=60, preexec_fn=limit)


def test_xattr_range_claimed_by_one_inode_is_damage(two_files_image, tmp_path):
    """One file claiming the whole table (its own 40 records and the next file's: the
    names start over at the 41st) with 64 KiB values: check said OK, and diff and
    extract --tar held count x 64 KiB (32 GiB for a 15 MB image). An inode's names
    strictly increase (stipple(5)): every reader calls this damaged."""
    img = HostileImage(two_files_image)
    first, second = sorted(("/f1", "/f2"), key=lambda p: img.xattr_records(p)[0])
    recs = img.xattr_records(first) + img.xattr_records(second)
    img.inode_put(img.lookup(first), "xattr_count", 80)
    with_big_values(img, recs)
    bad = img.write(tmp_path / "claim.stp")
    r = stipple("check", bad)
    assert r.returncode == 1 and first in r.stderr, r.stdout + r.stderr
    assert "names out of order or repeated" in r.stderr, r.stderr
    r = run_limited(["diff", bad, two_files_image])
    assert r.returncode == 2 and first in r.stderr and "damaged image" in r.stderr, r.stderr
    r = run_limited(["extract", "--tar", bad, tmp_path / "out.tar"])
    assert r.returncode == 1 and first in r.stderr and "damaged image" in r.stderr, r.stderr
    assert not os.path.exists(tmp_path / "out.tar")


def test_xattr_range_shared_between_inodes_is_damage(two_files_image, tmp_path):
    """Every file pointing at one range made check, ls -l and a mount cost files x
    records; the builder never shares a range, and check now says so."""
    img = HostileImage(two_files_image)
    f1 = img.lookup("/f1")
    for field in ("xattr_first", "xattr_count"):
        img.inode_put(img.lookup("/f2"), field, img.inode_get(f1, field))
    bad = img.write(tmp_path / "share.stp")
    r = stipple("check", bad)
    assert r.returncode == 1, r.stdout + r.stderr
    assert re.search(r"/f[12]: extended attribute \d+: another inode's too", r.stderr), r.stderr
    r = stipple("check", two_files_image)
    assert r.returncode == 0, r.stdout + r.stderr


def test_xattr_values_past_what_diff_and_tar_hold(tmp_path):
    """1,100 sorted names, each value the pool's first 64 KiB: sound for the format
    (Linux bounds each value, not their total) but 69 MiB to hold at once. diff and
    extract --tar refuse it, naming the file, instead of allocating it."""
    src = build_image(xattr_tar(tmp_path / "many.tar", ["f"], 1100), tmp_path / "m.stp", *FAST)
    img = HostileImage(src)
    with_big_values(img, img.xattr_records("/f"))
    big = img.write(tmp_path / "big.stp")
    r = stipple("check", big)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_limited(["diff", big, src])
    assert r.returncode == 2 and "/f: File too large" in r.stderr, r.stderr
    r = run_limited(["extract", "--tar", big, tmp_path / "out.tar"])
    assert r.returncode == 1 and "/f: extended attributes of 72089600 bytes, over the " \
        "64 MiB" in r.stderr, r.stderr


@pytest.mark.parametrize("change", ["nul", "long-value"])
def test_xattr_beyond_bounds_never_reaches_listxattr(xattr_image, tmp_path, mounted, change):
    bad = crafted_xattr(xattr_image, tmp_path / ("m-%s.stipple" % change), change)
    with mounted(bad) as mnt:
        with pytest.raises(OSError) as e:
            os.listxattr(os.path.join(mnt, "x"))
        assert e.value.errno == errno.EIO, e.value
        with pytest.raises(OSError) as e:
            os.getxattr(os.path.join(mnt, "x"), "user.abcdef")
        assert e.value.errno == errno.EIO, e.value


# --- item: control bytes in names, targets and status text ---

# name in the source tree (placeholder) -> the bytes the crafted image gives it
CRAFTED = {
    "n1x": b"a\nb",
    "n2-xxxxxxxxx": b"\x1b[31mred\x1b[0m",
    "n3-xxxx": b"c1-\xc2\x9b2J",
    "n4-xxx": b"bad-\xff\xfe",
    "n5-x": b"del\x7f",
    "n6-xxxx": b"\xe2\x80\xae-rlo",  # valid UTF-8 (U+202E), printed as it is
}
TARGET = b"\x1b]0;pwn\x07"


def no_raw_control(out):
    """OUT holds no C0 control but newlines, no DEL, no C1 control, no invalid UTF-8."""
    assert not re.search(rb"[\x00-\x09\x0b-\x1f\x7f]", out), out
    text = out.decode("utf-8")  # raises on invalid UTF-8
    assert not re.search("[\x80-\x9f]", text), out


@pytest.fixture(scope="module")
def names_image(tmp_path_factory, stipple_built):
    """Placeholder names (the lengths of the crafted ones), a link and a directory."""
    root = tmp_path_factory.mktemp("names")
    src = root / "src"
    (src / "names").mkdir(parents=True)
    for name in CRAFTED:
        (src / "names" / name).write_bytes(b"x")
    (src / "names" / "back\\slash").write_bytes(b"x")
    os.symlink("T" * len(TARGET), src / "link")
    (src / "dir-xxxx").mkdir()
    (src / "dir-xxxx" / "child").write_bytes(b"c")
    return build_image(src, root / "names.stipple", *FAST)


def crafted_names(names_image):
    """The names image with the CRAFTED names and the link TARGET put in."""
    img = HostileImage(names_image)
    for name, new in CRAFTED.items():
        img.rename_bytes("/names", name.encode(), new)
    img.set_link_target("/link", TARGET)
    return img


def test_ls_escapes_names(names_image, tmp_path):
    image = crafted_names(names_image).write(tmp_path / "n.stipple")
    r = stipple_bytes("ls", image, "/names")
    assert r.returncode == 0, r.stderr
    no_raw_control(r.stdout)
    names = sorted([n.encode() for n in CRAFTED] + [b"back\\slash"])
    want = [escape_name(CRAFTED.get(n.decode(), n)) for n in names]
    assert r.stdout == b"".join(n + b"\n" for n in want)
    assert b"a\\012b\n" in r.stdout and b"\\033[31mred\\033[0m\n" in r.stdout
    assert b"back\\134slash\n" in r.stdout and "\u202e".encode() in r.stdout


def test_ls_long_escapes_link_targets(names_image, tmp_path):
    image = crafted_names(names_image).write(tmp_path / "l.stipple")
    r = stipple_bytes("ls", "-l", image, "/")
    assert r.returncode == 0, r.stderr
    no_raw_control(r.stdout)
    line, = [x for x in r.stdout.split(b"\n") if x.startswith(b"l")]
    assert line.endswith(b" link -> \\033]0;pwn\\007"), line


def test_info_escapes_image_path_and_problem_paths(names_image, tmp_path):
    img = crafted_names(names_image)
    # a directory named with an escape sequence, holding an entry named with a '/'
    img.rename_bytes("/", b"dir-xxxx", b"d\x1b[2J\x1b[H")
    img.rename_bytes("/d\x1b[2J\x1b[H", b"child", b"ch/ld")
    image = img.write(os.path.join(os.fsencode(tmp_path), b"img-\x1b[31m.stipple"))
    r = stipple_bytes("info", image)
    assert r.returncode == 1, r.stderr
    no_raw_control(r.stdout)
    no_raw_control(r.stderr)
    assert b"image:" in r.stdout and b"img-\\033[31m.stipple\n" in r.stdout
    assert b"img-\\033[31m.stipple: /d\\033[2J\\033[H: entry 0: damaged or unsafe name" \
        in r.stderr, r.stderr


def test_messages_escape_the_path_operand(small_image):
    r = stipple_bytes("ls", small_image, "no\x1bsuch")
    assert r.returncode == 1
    no_raw_control(r.stderr)
    assert b"no\\033such" in r.stderr, r.stderr


def test_status_escapes_the_image_path(small_image, tmp_path, mounted):
    # valid UTF-8 throughout
    odd = os.path.join(os.fsencode(tmp_path), b"st-\x1b[31m\t\xc2\x9b.stipple")
    with open(odd, "wb") as f:
        f.write(read_file(small_image))
    with mounted(odd) as mnt:
        r = stipple_bytes("status", mnt)
    assert r.returncode == 0, r.stderr
    no_raw_control(r.stdout)
    line, = [x for x in r.stdout.split(b"\n") if x.startswith(b"image:")]
    assert line.endswith(b"st-\\033[31m\\011\\302\\233.stipple"), line


# --- item: bench --sequential with sizes that wrap ---


@pytest.fixture(scope="module")
def bench_image(tmp_path_factory, stipple_built):
    root = tmp_path_factory.mktemp("bench")
    src = root / "src"
    src.mkdir()
    for name in ("f1", "f2", "f3"):
        (src / name).write_bytes(name.encode() * 1000)
    return build_image(src, root / "b.stipple", *FAST)


def sized(bench_image, path, sizes):
    img = HostileImage(bench_image)
    for name, size in sizes.items():
        img.set_size("/" + name, size)
    return img.write(path)


def test_bench_sizes_that_wrap_are_refused(bench_image, tmp_path):
    """2^63 + 6 and 2^63 - 3 bytes: the sum wraps to 3 and, in 1-byte reads, so would
    the number of reads planned."""
    bad = sized(bench_image, tmp_path / "wrap.stipple",
                {"f1": (1 << 63) + 6, "f2": (1 << 63) - 3})
    for args in (["--sequential", "--read-size", "1"], ["--sequential"], []):
        r = stipple("bench", *args, bad, timeout=30)
        assert r.returncode == 1, (args, r.stdout, r.stderr)
        assert "file sizes add up to more than 2^64 bytes" in r.stderr, r.stderr
        assert r.stdout == ""


def test_bench_plan_too_large_is_refused(bench_image, tmp_path):
    """Sizes that do not wrap, but whose reads could not all be recorded."""
    bad = sized(bench_image, tmp_path / "huge.stipple", {"f1": 1 << 62})
    r = stipple("bench", "--sequential", "--threads", "2", bad, timeout=30)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "in 4096-byte reads takes more than 1000000000 reads; use a larger --read-size" \
        in r.stderr, r.stderr
    assert "Argument list too long" not in r.stderr


def test_bench_sequential_still_reads_every_byte(bench_image):
    r = stipple("bench", "--sequential", "--read-size", "7", "--threads", "2", "--json",
                bench_image)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert (j["bytes"], j["reads"]) == (6000, 3 * -(-2000 // 7)), j


# --- item 14 of issue 28: the mount's monitor escapes what it prints, as the readers do ---

C1_NAME = b"c1-\xc2\x9b31m-\x9b-\x1b]0;x\x07.stipple"  # CSI (U+009B), a lone 0x9b, OSC


def mount_bytes(image, mnt):
    """`stipple mount IMAGE MNT`, its stderr as bytes; unmounts if it did mount."""
    try:
        return stipple_bytes("mount", "--no-prime", image, mnt)
    finally:
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", os.fspath(mnt)], check=False)


def assert_escaped(r, where):
    err = r.stderr
    assert r.returncode != 0, (where, err)
    assert b"\\302\\233" in err and b"\\233" in err and b"\\033" in err, (where, err)
    for raw in (b"\x9b", b"\x1b", b"\x07"):
        assert raw not in err, (where, raw, err)


@pytest.mark.needs_root
def test_monitor_escapes_c1_controls(small_image, tmp_path):
    """A damaged image whose name holds C1 and C0 controls: the monitor's own messages
    (a superblock that promises more than the file), and the text the daemon sends it
    (metadata that fails its checksum), reach root's terminal escaped."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    name = os.fsdecode(C1_NAME)
    bad_sb = patch_superblock(small_image, tmp_path / ("sb-" + name),
                              image_size=os.path.getsize(small_image) + 4096)
    assert_escaped(mount_bytes(bad_sb, mnt), "monitor")
    sb = superblock(read_file(small_image))
    bad_meta = patch_superblock(small_image, tmp_path / ("meta-" + name),
                                meta_checksum=sb["meta_checksum"] ^ 1)
    r = mount_bytes(bad_meta, mnt)
    assert b"metadata" in r.stderr, r.stderr  # the daemon's own words
    assert_escaped(r, "daemon")


def test_mount_helper_escapes_c1_controls(small_image, tmp_path):
    """mount.stipple's own lines, before the monitor (an image that is not there, and
    -v's summary with -f, which checks without mounting), name the image escaped."""
    image = tmp_path / os.fsdecode(b"mh-" + C1_NAME)
    image.write_bytes(read_file(small_image))
    absent = tmp_path / os.fsdecode(b"absent-" + C1_NAME)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for path, args in ((absent, []), (image, ["-f", "-v"])):
        r = subprocess.run([MOUNT_STIPPLE, path, mnt, *args], stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=60)
        if os.path.ismount(mnt):
            subprocess.run(["umount", "-l", os.fspath(mnt)], check=False)
        err = r.stderr
        assert b"\\302\\233" in err and b"\\033" in err, (args, err)
        for raw in (b"\x9b", b"\x1b", b"\x07"):
            assert raw not in err, (args, raw, err)


@pytest.mark.needs_root
def test_foreground_daemon_escapes_c1_controls(small_image, tmp_path):
    """With -f the daemon itself writes to the terminal once the mount is live: a block
    that fails its checksum, in an image whose name holds C1 and C0 controls, is reported
    escaped."""
    data = bytearray(read_file(small_image))
    data[256 + 8] ^= 0xff  # inside the first stored block, past the superblock
    image = tmp_path / os.fsdecode(b"fg-" + C1_NAME)
    image.write_bytes(bytes(data))
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    p = subprocess.Popen([STIPPLE, "mount", "-f", "--no-prime", image, mnt],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while not os.path.ismount(mnt):
            assert time.monotonic() < deadline and p.poll() is None, "no mount"
            time.sleep(0.05)
        for name in ("a", "big", "dir/b"):
            with contextlib.suppress(OSError):
                with open(mnt / name, "rb") as f:
                    f.read()
    finally:
        subprocess.run(["umount", os.fspath(mnt)], check=False)
        _, err = p.communicate(timeout=30)
    assert b"checksum" in err or b"does not decode" in err or b"block" in err, err
    assert b"\\302\\233" in err and b"\\033" in err, err
    for raw in (b"\x9b", b"\x1b", b"\x07"):
        assert raw not in err, (raw, err)


# --- item: trees deeper than the readers' C stack, and directories that loop ---

DEEP = 2040  # "/d" per level: 4,080 bytes of path, under PATH_MAX; deeper than any stack


def deep_tree(root, depth, leaf):
    """ROOT/d/d/.../d/f, DEPTH directories deep, made through descriptors: with ROOT's
    own path in front, the whole path runs past PATH_MAX."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = sub
    out = os.open("f", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fd)
    os.write(out, leaf)
    os.close(out)
    os.close(fd)


@pytest.fixture(scope="module")
def deep(tmp_path_factory, stipple_built):
    root = tmp_path_factory.mktemp("deep")
    (root / "src").mkdir()
    deep_tree(root / "src", DEEP, b"first\n")
    first = build_image(root / "src", root / "first.stipple", *FAST)
    deep_tree_leaf = "d/" * DEEP + "f"
    fd = os.open(root / "src", os.O_RDONLY | os.O_DIRECTORY)
    out = os.open(deep_tree_leaf, os.O_WRONLY | os.O_TRUNC, dir_fd=fd)
    os.write(out, b"other\n")  # same size: found by the bytes, not the size
    os.close(out)
    os.close(fd)
    yield root, first, build_image(root / "src", root / "other.stipple", *FAST)
    # pytest's own clean-up recurses once per level and would fail on it, for everyone
    subprocess.run(["rm", "-rf", os.fspath(root / "src")], check=True)


def test_ls_R_of_a_tree_2040_directories_deep(deep):
    root, image, _ = deep
    r = stipple("ls", "-R", image)
    assert r.returncode == 0, r.stderr
    gnu = subprocess.run(["ls", "-R", "."], cwd=root / "src", capture_output=True,
                         text=True, check=True, env=dict(os.environ, LC_ALL="C")).stdout
    want = re.sub(r"^\.(/|:)", lambda m: "/" if m.group(1) == "/" else "/:", gnu,
                  flags=re.M)
    assert r.stdout == want
    assert r.stdout.count(":\n") == DEEP + 1


def test_diff_of_trees_2040_directories_deep(deep):
    root, first, other = deep
    leaf = "/d" * DEEP + "/f"
    r = stipple("diff", first, first)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = stipple("diff", first, other)
    assert (r.returncode, r.stdout, r.stderr) == (1, "M %s: contents\n" % leaf, "")
    # the directory side: paths past PATH_MAX with the root's in front
    r = stipple("diff", other, root / "src")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = stipple("diff", first, root / "src")
    assert (r.returncode, r.stdout, r.stderr) == (1, "M %s: contents\n" % leaf, "")


@pytest.fixture(scope="module")
def looping_image(tmp_path_factory, stipple_built):
    """/a/b/c made to be /a again: /a/b/c/b/c/... for ever to a reader that trusts it."""
    root = tmp_path_factory.mktemp("loop")
    (root / "src" / "a" / "b" / "c").mkdir(parents=True)
    (root / "src" / "a" / "b" / "c" / "f").write_bytes(b"leaf")
    img = CraftedImage(build_image(root / "src", root / "sound.stipple", *FAST))
    img.set_target("a/b", "c", img.lookup("a"))
    return img.write(root / "loop.stipple")


def test_ls_R_reports_a_directory_loop(looping_image):
    r = stipple("ls", "-R", looping_image)
    assert r.returncode == 1, r.stderr
    assert "/a/b/c: directory reached twice: skipped" in r.stderr
    assert r.stdout == "/:\na\n\n/a:\nb\n\n/a/b:\nc\n"


@pytest.mark.parametrize("other", ["itself", "sound"])
def test_diff_reports_a_directory_loop(looping_image, other):
    b = looping_image if other == "itself" else looping_image.parent / "sound.stipple"
    r = stipple("diff", looping_image, b, timeout=30)
    assert r.returncode == 2, r.stderr
    assert "/a/b/c: directory reached twice: skipped" in r.stderr
    # the pair at /a/b/c is skipped whole: nothing below it is compared
    assert r.stdout == ""


# --- directories sharing one range of entries: ls -R and diff walk the whole image ---


@pytest.fixture(scope="module")
def dirs_image(tmp_path_factory, stipple_built):
    root = tmp_path_factory.mktemp("dirs")
    src = root / "src"
    for i in range(300):
        os.makedirs(src / ("d%03d" % i))
    return build_image(src, root / "dirs.stp", *FAST)


def test_directories_sharing_entries_refused_by_ls_and_diff(dirs_image, tmp_path):
    """Each of 300 directories naming the root's 300 entries: every directory is entered
    once, but each lists 300 names, so ls -R and diff printed 90,000 lines of 300 records
    (9e8 for 30,000). They check the record-ownership rule first, as check does."""
    img = HostileImage(dirs_image)
    root_data, root_count = img.inode_get(0, "data"), img.inode_get(0, "count")
    for i in range(300):
        ino = img.lookup("/d%03d" % i)
        img.inode_put(ino, "data", root_data)
        img.inode_put(ino, "count", root_count)
        img.inode_put(ino, "size", root_count)
    bad = img.write(tmp_path / "dd.stp")
    why = "its directory entry records overlap or precede those of inode"
    for args, status in ((["ls", "-R", bad], 1), (["diff", bad, dirs_image], 2)):
        r = stipple(*args)
        assert r.returncode == status and why in r.stderr, (args, r.returncode, r.stderr[-500:])
        assert r.stdout.count("\n") < 1000, (args, len(r.stdout))
    r = stipple("ls", "-R", dirs_image)
    assert r.returncode == 0 and r.stdout.count("d299") == 2, r.stderr
