# SPDX-License-Identifier: MIT
"""Reads of a --cut-inside image on a real mount (issue 31): a cut is a block of its own,
padded with zeros to the block size, and the cache holds it for what it decodes to, not
for a whole block, so a small cache keeps every cut of the large files.

The tree is test_cut_inside's first release (an archive of stdlib sources and its zip),
with two more large files: a real ELF program (its cuts go through the BCJ filter) and a
file with a long run of zeros inside, whose cuts end in zstd's zero blocks while holding
file bytes. Every byte read is compared with the source tree; the decodes counted are
the daemon's (its status).
"""

import os
import subprocess

import pytest

from conftest import STIPPLE, mount_image, mount_status, run
import imageutil
import storedblocks
from test_cut_inside import ARGS, BIG, make_release, stdlib_sources
from test_store_shrunk import read_uncached

ZEROS = "lib/zeros"
PROGRAM = "lib/program"


@pytest.fixture(scope="module")
def cut_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("cutreads") / "tree"
    make_release(root, stdlib_sources())
    with open(root / ZEROS, "wb") as f:
        f.write(os.urandom(300 << 10) + bytes(700 << 10) + os.urandom(200 << 10))
    with open(os.path.realpath("/usr/bin/python3"), "rb") as f:
        (root / PROGRAM).write_bytes(f.read())
    return root


@pytest.fixture(scope="module")
def cut_image(cut_tree, tmp_path_factory):
    image = tmp_path_factory.mktemp("cutreads-img") / "cut.stp"
    return imageutil.build(cut_tree, image, *ARGS, "--cut-inside")


@pytest.mark.needs_root
def test_a_small_cache_keeps_every_cut(cut_tree, cut_image):
    files = (*BIG, ZEROS, PROGRAM)
    held = storedblocks.file_blocks(STIPPLE, cut_image)
    cuts = {b for b, paths in held.items() if len(paths) == 1 and paths <= set(files)}
    per_file = {rel: sum(1 for b in cuts if held[b] == {rel}) for rel in files}
    assert all(n >= 4 for n in per_file.values()), per_file  # every file was cut
    # 24 blocks' buffers (about 26 MiB) hold all the cuts' bytes: they are far fewer
    assert sum(os.path.getsize(cut_tree / rel) for rel in files) < 16 << 20
    with mount_image(cut_image, None, "-o", "cache_budget=24", "--warm-workers", "0") as mnt:
        for rel in files:
            with open(os.path.join(mnt, rel), "rb") as f:
                assert f.read() == (cut_tree / rel).read_bytes(), rel
        st = mount_status(mnt)
        first = int(st["blocks_decoded"])
        assert len(cuts) <= first <= len(held), (first, len(cuts))
        # read in order, each file's next cut was decoded ahead of its reader
        assert int(st["blocks_ahead"]) >= len(files), st
        for rel in files:
            # the kernel's copy goes first: the daemon is asked again
            assert read_uncached(os.path.join(mnt, rel)) == (cut_tree / rel).read_bytes(), rel
        again = int(mount_status(mnt)["blocks_decoded"])
    # the old cache kept 24 cuts and decoded nearly every one again
    assert again == first, (first, again, len(cuts))


# ---- a zero tail after a short zstd block (review 5 #1) ------------------------------

def short_block_frame(body, size):
    """One zstd frame of SIZE bytes: BODY (64-128 KiB, mostly literals) as one compressed
    block, then RLE blocks of zeros. zstd's own decoder gives BODY and zeros."""
    import ctypes
    import ctypes.util
    import struct
    zstd = ctypes.CDLL(ctypes.util.find_library("zstd") or "libzstd.so.1")
    zstd.ZSTD_createCCtx.restype = ctypes.c_void_p
    zstd.ZSTD_compressBegin.argtypes = [ctypes.c_void_p, ctypes.c_int]
    zstd.ZSTD_compressBlock.restype = ctypes.c_size_t
    zstd.ZSTD_compressBlock.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                        ctypes.c_char_p, ctypes.c_size_t]
    zstd.ZSTD_freeCCtx.argtypes = [ctypes.c_void_p]
    cctx = zstd.ZSTD_createCCtx()
    zstd.ZSTD_compressBegin(cctx, 3)
    out = ctypes.create_string_buffer(1 << 18)
    n = zstd.ZSTD_compressBlock(cctx, out, len(out), body, len(body))
    zstd.ZSTD_freeCCtx(cctx)
    assert 0 < n < len(body), "zstd made no compressed block (%d)" % n

    def header(length, kind, last):
        return struct.pack("<I", length << 3 | kind << 1 | last)[:3]

    frame = b"\x28\xb5\x2f\xfd\xa0" + struct.pack("<I", size) + header(n, 2, 0) + out.raw[:n]
    left = size - len(body)
    while left:
        b = min(left, 128 << 10)
        left -= b
        frame += header(b, 1, left == 0) + b"\0"
    return frame


@pytest.fixture(scope="module")
def short_block_image(tmp_path_factory):
    """File a: 100000 base64 bytes then 2000 zeros, in an image of 1 MiB blocks whose
    block 0 is re-stored as short_block_frame (data_size 1 MiB): a zero tail that starts
    after a block of fewer than 128 KiB."""
    import base64
    from imageutil import BLOCKENT_FIELDS, SB_FIELDS, CraftedImage, put, xxh3
    top = tmp_path_factory.mktemp("shortblock")
    body = base64.b64encode(os.urandom(75000))
    assert len(body) == 100000
    (top / "tree").mkdir()
    (top / "tree" / "a").write_bytes(body + bytes(2000))
    base = top / "base.stp"
    imageutil.build(top / "tree", base, "-b", "1M", "-l", "3")
    frame = short_block_frame(body, 1 << 20)
    ci = CraftedImage(str(base))
    data = ci.data[:ci.image_size]
    ci.data = data + frame
    ci.image_size = len(ci.data)
    rec = ci.header("block_off")
    for field, value in (("offset", len(data)), ("stored_size", len(frame)),
                         ("checksum", xxh3(frame)), ("codec", 1)):
        put(BLOCKENT_FIELDS, field, ci.meta, value, rec)
    put(SB_FIELDS, "data_size", ci.data, 1 << 20)
    image = top / "evil.stp"
    ci.write(str(image))
    return top / "tree" / "a", image


def test_a_zero_tail_after_a_short_block_reads_as_zeros(short_block_image):
    """zstd puts a block's literals (over 64 KiB of them) at the end of the room it is
    given; past a short block that room reached into the zero tail, which no later block
    overwrote: `stipple cat` served 2000 literal bytes where the frame says zeros, while
    `stipple check` (a whole decode) said OK."""
    src, image = short_block_image
    r = run([STIPPLE, "check", str(image)])
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([STIPPLE, "cat", str(image), "a"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    want = src.read_bytes()
    bad = sum(1 for x, y in zip(r.stdout, want) if x != y)
    assert r.stdout == want, "%d bytes differ" % bad


def test_every_reader_serves_zeros_past_a_short_block(short_block_image, tmp_path):
    """The cache keeps no memory past a short block's body: every reader that copies out
    of a cached block (cat above; extract and extract --tar here) zero-fills past it,
    and the whole decode of `stipple check` agrees. Checked against the source file and
    Python's tarfile."""
    import tarfile
    src, image = short_block_image
    want = src.read_bytes()
    r = run([STIPPLE, "check", str(image)])
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "ext"
    r = run([STIPPLE, "extract", "-q", str(image), str(out)])
    assert r.returncode == 0, r.stderr
    assert (out / "a").read_bytes() == want
    tar = tmp_path / "a.tar"
    r = run([STIPPLE, "extract", "--tar", str(image), str(tar)])
    assert r.returncode == 0, r.stderr
    with tarfile.open(tar) as t:
        [a] = [m for m in t.getmembers() if m.isfile() and m.name.lstrip("./") == "a"]
        assert t.extractfile(a).read() == want


@pytest.mark.needs_root
def test_a_zero_tail_after_a_short_block_reads_as_zeros_mounted(short_block_image):
    src, image = short_block_image
    with mount_image(str(image), None, "--warm-workers", "0") as mnt:
        with open(os.path.join(mnt, "a"), "rb") as f:
            got = f.read()
    assert got == src.read_bytes()


# ---- blocks of zeros only, charged nothing (review 5 #2) -----------------------------

def zero_blocks_image(base, dst, count, log):
    """An image of one file "a" over COUNT blocks of 2^LOG bytes, each its own zstd frame
    of RLE zero blocks (a body of nothing: the cache charges an idle one nothing), apart.
    BASE lends its superblock."""
    import struct
    from craftmeta import (META_HDR_SIZE, S_IFDIR, S_IFREG, Frames, blockent, inode,
                           meta_header, table_pages, write_paged)
    from imageutil import (BLOCKENT_SIZE, EXTENT_SIZE, INODE_SIZE, META_PAGE_SIZE, SB_FIELDS,
                           put, xxh3)
    bs = 1 << log
    frame = b"\x28\xb5\x2f\xfd\xa0" + struct.pack("<I", bs)
    left = bs
    while left:
        b = min(left, 128 << 10)
        left -= b
        frame += struct.pack("<I", b << 3 | 1 << 1 | (left == 0))[:3] + b"\0"
    frames = Frames(bytearray(base.read_bytes()[:256]))
    ents = []
    for _ in range(count):  # apart: each block a stored range of its own
        ents.append(blockent(len(frames.data), len(frame), xxh3(frame)))
        frames.data += frame
    inode_off = META_HDR_SIZE
    dirent_off = inode_off + 2 * INODE_SIZE
    extent_off = dirent_off + 16
    strings_off = extent_off + EXTENT_SIZE
    size = count * bs
    head = (meta_header(inode_count=2, dirent_count=1, extent_count=1, xattr_count=0,
                        block_count=count, strings_size=1, inode_off=inode_off,
                        dirent_off=dirent_off, extent_off=extent_off, xattr_off=strings_off,
                        block_off=META_PAGE_SIZE, strings_off=strings_off) +
            inode(S_IFDIR | 0o755, 1, 0, 1) + inode(S_IFREG | 0o644, size, 0, 1) +
            struct.pack("<IIHBB", 1, 0, 1, 8, 0) + bytes(4) + struct.pack("<QQQ", 0, 0, size) +
            b"a")
    data = frames.data
    put(SB_FIELDS, "block_log", data, log)
    put(SB_FIELDS, "feat_incompat", data, 1 << 3)
    struct.pack_into("<I", data, 44, 0)
    write_paged(str(dst), data, table_pages(head, ents, BLOCKENT_SIZE), data_size=size,
                hot_size=0, block_count=count, inode_count=2, dict_offset=0, dict_size=0,
                dict_checksum=0, feat_compat=0)
    return size


def daemon_pid(mnt):
    from test_mount import daemon_pids
    pids = daemon_pids(mnt)
    assert len(pids) == 1, pids
    return pids[0]


def daemon_status(mnt):
    from test_sandbox import status_fields
    fields = status_fields("/proc/%d/status" % daemon_pid(mnt))
    return int(fields["RssAnon"].split()[0]), int(fields["VmPTE"].split()[0])


def read_only_anon_maps(pid):
    """The anonymous mappings of PID that can be read and not written (no file, no
    [name]): zero tails once were such, outside RLIMIT_DATA."""
    found = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            fields = line.split()
            if fields[1].startswith("r-") and fields[4] == "0" and len(fields) == 5:
                found.append(line.strip())
    return found


@pytest.mark.needs_root
def test_zero_tails_cost_no_memory_past_the_budget(tmp_path):
    """A block's zero tail was read-only zero pages, charged nothing once idle; reading it
    faulted pages in (real ones on some kernels, page tables on all). They were kept with
    the block: 32 blocks of 8 MiB read under cache_budget=2 left 256 MiB resident in the
    daemon. Now a tail maps nothing (readers copy zeros past the body): the growth stays
    within a few buffers, and the daemon holds no read-only anonymous mapping."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "x").write_bytes(b"x")
    base = tmp_path / "base.stp"
    imageutil.build(tmp_path / "tree", base)
    image = tmp_path / "zeros.stp"
    log = 23
    size = zero_blocks_image(base, image, 32, log)
    assert os.path.getsize(image) < 100 << 10
    with mount_image(str(image), None, "-o", "cache_budget=2", "--warm-workers", "0",
                     "--no-fill") as mnt:
        rss0, _ = daemon_status(mnt)
        fd = os.open(os.path.join(mnt, "a"), os.O_RDONLY | os.O_DIRECT)
        try:
            got = 0
            while True:
                n = len(os.read(fd, 1 << 20))
                if not n:
                    break
                got += n
        finally:
            os.close(fd)
        rss1, pte = daemon_status(mnt)
        read_only = read_only_anon_maps(daemon_pid(mnt))
    assert got == size
    assert not read_only, read_only
    grown = (rss1 - rss0) << 10
    assert grown < 8 << log, "the daemon holds %d MiB more after reading %d MiB" % (
        grown >> 20, size >> 20)
    assert pte < 1024, "VmPTE %d kB" % pte
