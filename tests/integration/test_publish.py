# SPDX-License-Identifier: MIT
"""stipple publish (issue 31 item 2): an image laid out as content-addressed block files
under DIR/blocks and an index DIR/NAME.stp (stipple(5), PUBLISHED INDEX).

The published directory is read back here with Python's struct and hashlib alone, an
independent reader: every block file must hold the image's bytes at its entry's offset
and hash to its name, and the index must hold the image's superblock and tail byte for
byte. The image's block table is read by imageutil's own decoder, not by stipple."""
import hashlib
import os
import shutil
import struct
import subprocess
import sysconfig
import tarfile

import pytest

from conftest import STIPPLE, read_file, run

import imageutil

HDR = struct.Struct("<8sIIQQQQ16s")   # magic, version, hash, image_size, tail_offset,
ENTRY = struct.Struct("<QII32s")      # block_count, checksum, reserved; offset, stored_size,
SB_SIZE = 256                         # reserved, sha256


def real_tree(dest):
    """A copy of a real tree: the email package of the Python running the tests."""
    shutil.copytree(os.path.join(sysconfig.get_path("stdlib"), "email"), dest,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def build(tree, image):
    # an explicit block size: many blocks from a small tree, whatever the default
    return imageutil.build(tree, image, "--block-size", "64K")


@pytest.fixture
def releases(tmp_path):
    """Images of v1 and v2 of a real tree, v2 differing in one file."""
    v1 = real_tree(tmp_path / "v1")
    v2 = tmp_path / "v2"
    shutil.copytree(v1, v2)
    with open(v2 / "charset.py", "a") as f:
        f.write("# a patch release changed this file\n")
    return dict(tmp=tmp_path, a1=build(v1, tmp_path / "app-1.1.stp"),
                a2=build(v2, tmp_path / "app-1.2.stp"), out=tmp_path / "pub")


def publish(image, out, *args):
    return run([STIPPLE, "publish", *args, image, out])


def block_table(image):
    """(offset, stored_size) of each block, from the image's metadata."""
    meta = imageutil.CraftedImage(image)
    return list(zip(meta._block_field("offset"), meta._block_field("stored_size")))


def read_index(path):
    """The index at PATH, parsed and checked by the layout of stipple(5)."""
    data = read_file(path)
    magic, version, hash_alg, image_size, tail, count, checksum, reserved = \
        HDR.unpack_from(data, 0)
    assert (magic, version, hash_alg, reserved) == (b"STPINDX1", 1, 1, bytes(16))
    entries_end = HDR.size + ENTRY.size * count
    assert len(data) == entries_end + SB_SIZE + (image_size - tail)
    assert checksum == imageutil.xxh3(data[:40] + data[HDR.size:entries_end])
    entries = [ENTRY.unpack_from(data, HDR.size + ENTRY.size * i) for i in range(count)]
    assert all(reserved == 0 for _, _, reserved, _ in entries)
    return dict(image_size=image_size, tail=tail, sb=data[entries_end:entries_end + SB_SIZE],
                tail_bytes=data[entries_end + SB_SIZE:],
                entries=[(off, size, sha.hex()) for off, size, _, sha in entries])


def check_published(image, out, name):
    """Reads OUT/NAME.stp back against IMAGE; returns the set of block hashes it names."""
    data = read_file(image)
    idx = read_index(out / (name + ".stp"))
    assert idx["image_size"] == len(data)
    assert idx["sb"] == data[:SB_SIZE]
    assert idx["tail_bytes"] == data[idx["tail"]:]
    assert [(off, size) for off, size, _ in idx["entries"]] == block_table(image)
    end, virtual = SB_SIZE, [idx["sb"]]
    for off, size, sha in idx["entries"]:
        assert off == end, "blocks not contiguous"
        end += size
        block = read_file(out / "blocks" / sha[:2] / sha)
        assert block == data[off:off + size]
        assert hashlib.sha256(block).hexdigest() == sha
        assert os.stat(out / "blocks" / sha[:2] / sha).st_mode & 0o777 == 0o644
        virtual.append(block)
    assert end == idx["tail"]
    # what a reader of the index presents: the one-file image, byte for byte
    assert b"".join(virtual + [idx["tail_bytes"]]) == data
    return {sha for _, _, sha in idx["entries"]}


def block_files(out):
    """Every file under OUT/blocks, relative: no temporary file may be left there."""
    return sorted(os.path.relpath(os.path.join(d, f), out / "blocks")
                  for d, _, files in os.walk(out / "blocks") for f in files)


def assert_refused(r, *names):
    assert r.returncode != 0, r.stdout
    for name in names:
        assert os.fspath(name) in r.stderr, r.stderr


def test_publish_two_releases_share_blocks(releases):
    a1, a2, out = releases["a1"], releases["a2"], releases["out"]
    r = publish(a1, out)
    assert r.returncode == 0, r.stderr
    h1 = check_published(a1, out, "app-1.1")
    assert len(block_files(out)) == len(h1)
    assert "written" in r.stdout and str(out / "app-1.1.stp") in r.stdout

    r = publish(a2, out)
    assert r.returncode == 0, r.stderr
    h2 = check_published(a2, out, "app-1.2")
    shared = h1 & h2
    # the blocks before and after the changed file compress alike: one file each
    assert shared, "v1 and v2 share no block: nothing to test"
    assert len(h2 - h1) > 0
    assert block_files(out) == sorted("%s/%s" % (h[:2], h) for h in h1 | h2)
    assert "%d already present" % len(shared) in r.stdout
    check_published(a1, out, "app-1.1")  # the first release is untouched


def test_publish_hot_blocks(releases, tmp_path):
    """An image whose hot region has blocks of their own size publishes alike."""
    hot = tmp_path / "hot.txt"
    hot.write_text("/charset.py\n/utils.py\n/message.py\n")
    image = imageutil.build(releases["tmp"] / "v1", tmp_path / "hot.stp", "--block-size",
                            "128K", "--hot-block-size", "64K", "--hot-list", hot)
    assert imageutil.superblock(read_file(image))["feat_incompat"] & (1 << 4)  # hot blocks
    run([STIPPLE, "publish", image, releases["out"]], check=True)
    check_published(image, releases["out"], "hot")


def test_publish_json_counts(releases):
    import json
    run([STIPPLE, "publish", releases["a1"], releases["out"]], check=True)
    r = run([STIPPLE, "publish", "--json", "--name", "second", releases["a2"],
             releases["out"]], check=True)
    doc = json.loads(r.stdout)
    h1 = check_published(releases["a1"], releases["out"], "app-1.1")
    h2 = check_published(releases["a2"], releases["out"], "second")
    table = dict(zip((sha for _, _, sha in read_index(releases["out"] / "second.stp")
                      ["entries"]), block_table(releases["a2"])))
    assert doc["blocks"] == len(block_table(releases["a2"]))
    assert doc["present"] == len(h1 & h2) and doc["written"] == len(h2 - h1)
    assert doc["bytes_shared"] == sum(table[h][1] for h in h1 & h2)
    assert doc["index"] == os.fspath(releases["out"] / "second.stp")


def test_republish_is_idempotent(releases):
    a1, out = releases["a1"], releases["out"]
    run([STIPPLE, "publish", a1, out], check=True)
    before = {f: (read_file(out / "blocks" / f), os.stat(out / "blocks" / f).st_ino)
              for f in block_files(out)}
    index = read_file(out / "app-1.1.stp")
    r = publish(a1, out)
    assert r.returncode == 0, r.stderr
    assert {f: (read_file(out / "blocks" / f), os.stat(out / "blocks" / f).st_ino)
            for f in block_files(out)} == before  # not even rewritten
    assert read_file(out / "app-1.1.stp") == index
    assert "0 written" in r.stdout
    assert sorted(os.listdir(out)) == ["app-1.1.stp", "blocks"]


def test_signed_and_unsigned_share_every_block(releases, tmp_path):
    """Signing changes the superblock and the tail only: the two indexes name the same
    block files, and the signed one verifies against its key."""
    sec, pub = tmp_path / "k.sec", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    signed = tmp_path / "signed.stp"
    shutil.copy(releases["a1"], signed)
    run([STIPPLE, "sign", signed, sec], check=True)
    out = releases["out"]
    run([STIPPLE, "publish", releases["a1"], out], check=True)
    r = run([STIPPLE, "publish", "--key", pub, signed, out], check=True)
    assert check_published(signed, out, "signed") == check_published(releases["a1"], out,
                                                                       "app-1.1")
    assert "0 written" in r.stdout
    # another key: refused before anything is written
    other_sec, other_pub = tmp_path / "o.sec", tmp_path / "o.pub"
    run([STIPPLE, "keygen", other_sec, other_pub], check=True)
    os.unlink(out / "signed.stp")
    assert_refused(publish(signed, out, "--key", other_pub), signed)
    assert not os.path.exists(out / "signed.stp")


def test_damaged_block_file_is_replaced(releases):
    a1, out = releases["a1"], releases["out"]
    run([STIPPLE, "publish", a1, out], check=True)
    files = block_files(out)
    flipped, truncated = out / "blocks" / files[0], out / "blocks" / files[-1]
    data = bytearray(read_file(flipped))
    data[len(data) // 2] ^= 0x40
    flipped.write_bytes(bytes(data))
    truncated.write_bytes(read_file(truncated)[:-1])
    r = publish(a1, out)
    assert r.returncode == 0, r.stderr
    assert "2 written" in r.stdout and "replaced" in r.stdout
    check_published(a1, out, "app-1.1")
    assert block_files(out) == files


def test_damaged_image_refused(releases):
    out = releases["out"]
    (offset, size), = block_table(releases["a1"])[1:2]
    data = bytearray(read_file(releases["a1"]))
    data[offset + size // 2] ^= 0x01
    bad = releases["tmp"] / "bad.stp"
    bad.write_bytes(bytes(data))
    r = publish(bad, out)
    assert_refused(r, bad)
    assert "damaged" in r.stderr
    assert not os.path.exists(out)  # every block is checked before DIR is touched


def test_foreign_file_refused(releases, tmp_path):
    tar = tmp_path / "app.tar"
    with tarfile.open(tar, "w") as t:
        t.add(releases["tmp"] / "v1", arcname="v1")
    out = releases["out"]
    r = publish(tar, out)
    assert_refused(r, tar)
    assert "tar" in r.stderr
    assert not os.path.exists(out)


def test_gap_between_blocks_refused(releases, tmp_path):
    """An image whose last block was moved past a gap is valid, but not publishable:
    the refusal names the image and the block."""
    image = imageutil.HostileImage(releases["a1"])
    table = block_table(releases["a1"])
    last = len(table) - 1
    offset, size = table[last]
    moved = len(image.data[:image.image_size])
    image.data[moved:moved] = image.data[offset:offset + size]
    image.image_size = moved + size
    image.set_block(last, offset=moved)
    gap = image.write(tmp_path / "gap.stp")
    run([STIPPLE, "check", gap], check=True)  # a sound image
    r = publish(gap, releases["out"])
    assert_refused(r, gap, "block %d" % last)
    assert not os.path.exists(releases["out"] / "gap.stp")


@pytest.mark.needs_root("a read-only bind mount")
def test_unwritable_dir_refused(releases, tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    subprocess.run(["mount", "--bind", out, out], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", out], check=True)
        r = publish(releases["a1"], out)
        assert_refused(r, out)
        assert "Read-only" in r.stderr
        assert os.listdir(out) == []
    finally:
        subprocess.run(["umount", out], check=True)


@pytest.mark.parametrize("where", ["fan", "blocks", "file"])
def test_symlink_under_dir_refused(releases, tmp_path, where):
    """A symlink planted under DIR/blocks (by a user who may write there) is refused,
    never followed: nothing is written where it leads."""
    a1, out = releases["a1"], releases["out"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # where the first block's file goes: an independent SHA-256 of the image's bytes
    offset, size = block_table(a1)[0]
    sha = hashlib.sha256(read_file(a1)[offset:offset + size]).hexdigest()
    (out / "blocks").mkdir(parents=True)
    if where == "blocks":
        os.rmdir(out / "blocks")
        planted = out / "blocks"
    elif where == "fan":
        planted = out / "blocks" / sha[:2]
    else:
        (out / "blocks" / sha[:2]).mkdir()
        planted = out / "blocks" / sha[:2] / sha
        elsewhere = elsewhere / "target"
        elsewhere.write_bytes(b"not a block")
    os.symlink(elsewhere, planted)
    r = publish(a1, out)
    assert_refused(r, planted)
    assert "symbolic link" in r.stderr
    assert not os.path.exists(out / "app-1.1.stp")
    if where == "file":
        assert read_file(elsewhere) == b"not a block"
    else:
        assert os.listdir(elsewhere) == []


def test_index_never_replaces_its_image(releases):
    out = releases["out"]
    out.mkdir()
    image = out / "app.stp"
    shutil.copy(releases["a1"], image)
    before = read_file(image)
    assert_refused(publish(image, out), image)
    assert read_file(image) == before
    # under another name it publishes
    r = publish(image, out, "--name", "app-copy")
    assert r.returncode == 0, r.stderr
    check_published(image, out, "app-copy")


def temp_files(out):
    """Temporary files under OUT: names with ".tmp." in them."""
    return [os.path.join(d, f) for d, _, files in os.walk(out) for f in files
            if ".tmp." in f]


def test_interrupted_publish_leaves_no_temporary_file(releases):
    """SIGTERM while a temporary file exists (each block file is one while it is written
    and synced): the file is removed, and no index is written."""
    a1, out = releases["a1"], releases["out"]
    caught = 0
    for attempt in range(20):
        if caught == 3:
            break
        p = subprocess.Popen([STIPPLE, "publish", a1, out], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        while p.poll() is None and not temp_files(out):
            pass
        if p.poll() is None:
            p.terminate()
            caught += 1
        p.wait()
        assert temp_files(out) == []
        if p.returncode != 0:
            assert p.returncode == -15
            assert not os.path.exists(out / "app-1.1.stp")
        shutil.rmtree(out, ignore_errors=True)
    assert caught, "never caught a temporary file: nothing was tested"


@pytest.mark.needs_root("gives a directory and a link to another user")
def test_publish_follows_no_link_of_a_directory_owner(releases, tmp_path):
    """DIR as her link (in her directory) to a directory of root's: nothing is planted
    there (review 7, finding 9)."""
    home = tmp_path / "home"
    home.mkdir()
    os.chown(home, 65534, 65534)
    rootdir = tmp_path / "rootdir"
    rootdir.mkdir()
    os.symlink(rootdir, home / "pub")
    os.lchown(home / "pub", 65534, 65534)
    r = publish(releases["a1"], home / "pub")
    assert r.returncode == 1, r.stderr
    assert "a symlink owned by uid 65534" in r.stderr, r.stderr
    assert os.listdir(rootdir) == []


def test_index_over_what_a_mount_takes_refused(tmp_path):
    """An image whose metadata stores more than 256 MiB (here incompressible extended
    attributes) makes an index no reader fetches: publish used to write it (exit 0).
    It is refused, naming both sizes, before DIR is made."""
    import base64
    tar = tmp_path / "big.tar"
    with open(tar, "wb") as f:
        for i in range(420):
            ti = tarfile.TarInfo("f%03d" % i)
            ti.pax_headers = {"SCHILY.xattr.user.a%02d" % j:
                              base64.b64encode(os.urandom(48000)).decode() for j in range(15)}
            f.write(ti.tobuf(tarfile.PAX_FORMAT))
        f.write(b"\0" * 1024)
    image = imageutil.build(tar, tmp_path / "big.stp", "--level", "1")
    os.unlink(tar)
    out = tmp_path / "pub"
    r = publish(image, out)
    assert_refused(r, image)
    assert "its index would be" in r.stderr and "over the 256 MiB" in r.stderr, r.stderr
    assert not os.path.exists(out)
