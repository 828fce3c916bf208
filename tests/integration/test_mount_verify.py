# SPDX-License-Identifier: MIT
"""Mounting with a key (verify=PUBKEY, verify with the trusted keys of /etc/stipple/keys):
a signed image serves every byte; an unsigned one, one signed by another key, a bad
signature or changed metadata are refused; a changed data block gives EIO for exactly the
files that have bytes in it; a sweep of flipped bytes over a small signed image; the
sandbox denies nothing to OpenSSL.

Images are signed here by an independent signer written from SIGNING.md / stipple(5)
(hashlib's SHA-256 and the cryptography package's Ed25519), keys made by openssl(1)."""

import contextlib
import errno
import hashlib
import os
import random
import shutil
import struct
import subprocess
import tempfile
import time

import pytest

from conftest import (MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, mount_image, read_file,
                      run, unmount)
from imageutil import (BLOCKENT_FIELDS, BLOCKENT_SIZE, CraftedImage, SB_FIELDS, buffer_bytes, get,
                       put, reseal)
import treeutil
from test_mount import daemon_pids, foreground_mount, wait_gone

ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")

TRUSTED = "/etc/stipple/keys"
NOT_SIGNED = "not signed, and verify= asks for a signature"
FEAT_COMPAT_SIGNED = 1
FEAT_CONTENT_HASHES = 1 << 7  # incompat: the signature block hashes each block's content
SIG_OFF, SIG_SIZE = 148, 156  # superblock fields (SIGNING.md)
SIG_HDR = 120
PAGE = 4096


# ---- keys and an independent signer ----------------------------------------------------

class Key:
    """An Ed25519 key pair made by openssl genpkey, as PEM files in DIR."""

    def __init__(self, directory, name):
        self.sec = os.path.join(directory, name + ".key")
        self.pub = os.path.join(directory, name + ".pub")
        run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", self.sec], check=True)
        run(["openssl", "pkey", "-in", self.sec, "-pubout", "-out", self.pub], check=True)
        self.private = serialization.load_pem_private_key(read_file(self.sec), None)
        raw = self.private.public_key().public_bytes(serialization.Encoding.Raw,
                                                     serialization.PublicFormat.Raw)
        self.id = hashlib.sha256(raw).hexdigest()


def content_hash(c, k, stored):
    """Block K's content hash: its STORED bytes decoded by the zstd program when it is a
    zstd block (codec 1), else zeros."""
    if get(BLOCKENT_FIELDS, "codec", c.meta, c.header("block_off") + BLOCKENT_SIZE * k) != 1:
        return bytes(32)
    return hashlib.sha256(subprocess.run(["zstd", "-dc"], input=bytes(stored), check=True,
                                         capture_output=True).stdout).digest()


def sign(src, dst, key, content=True):
    """Writes DST: unsigned image SRC with a signature block by KEY appended, with the
    blocks' content hashes unless not CONTENT (as a stipple older than them signs)."""
    c = CraftedImage(src)
    data = bytearray(c.data)
    sb = lambda name: get(SB_FIELDS, name, data)  # noqa: E731
    assert not sb("feat_compat") & FEAT_COMPAT_SIGNED
    size = sb("image_size")
    meta = data[sb("meta_offset"):sb("meta_offset") + sb("meta_stored_size")]
    dsize = sb("dict_size")
    hashes = [hashlib.sha256(meta).digest(),
              hashlib.sha256(data[sb("dict_offset"):sb("dict_offset") + dsize]).digest()
              if dsize else bytes(32)]
    for off, stored in stored_blocks(c) + stored_pages(c):
        hashes.append(hashlib.sha256(data[off:off + stored]).digest())
    if content:
        hashes += [content_hash(c, k, data[off:off + stored])
                   for k, (off, stored) in enumerate(stored_blocks(c))]
        put(SB_FIELDS, "feat_incompat", data, sb("feat_incompat") | FEAT_CONTENT_HASHES)
    sig_size = SIG_HDR + 32 * len(hashes)
    put(SB_FIELDS, "feat_compat", data, sb("feat_compat") | FEAT_COMPAT_SIGNED)
    struct.pack_into("<QQ", data, SIG_OFF, size, sig_size)
    put(SB_FIELDS, "image_size", data, size + sig_size)
    reseal(data)
    block = bytearray(b"STPSIGN1" + struct.pack("<II", 1, 0) + bytes.fromhex(key.id) +
                      bytes(64) + struct.pack("<Q", len(hashes)) + b"".join(hashes))
    root = hashlib.sha256(b"stipple signature v1\n\0\0\0" + bytes(data[:248]) +
                          bytes(block[:48]) + bytes(block[112:])).digest()
    block[48:112] = key.private.sign(root)
    with open(dst, "wb") as f:
        f.write(bytes(data[:size]) + bytes(block))
    return dst


def stored_pages(c):
    """[(offset, stored size)] of every metadata page, from the page table."""
    table = c.data[get(SB_FIELDS, "meta_offset", c.data):][:get(SB_FIELDS, "meta_stored_size",
                                                                c.data)]
    if not c.paged:
        return []
    return [(get(BLOCKENT_FIELDS, "offset", table, k), get(BLOCKENT_FIELDS, "stored_size",
                                                          table, k))
            for k in range(0, len(table), BLOCKENT_SIZE)]


def stored_blocks(c):
    """[(offset, stored size)] of every block, from the block table."""
    base = c.header("block_off")
    return [(get(BLOCKENT_FIELDS, "offset", c.meta, base + BLOCKENT_SIZE * k),
             get(BLOCKENT_FIELDS, "stored_size", c.meta, base + BLOCKENT_SIZE * k))
            for k in range(c.header("block_count"))]


# ---- the tree, and which of its bytes lie in which block --------------------------------

def make_tree(root):
    """Files of several sizes: some within one 64 KiB block, some across many."""
    os.makedirs(os.path.join(root, "d"))
    rnd = random.Random(16)
    sizes = {"tiny": 10, "page": 4096, "d/small": 30000, "d/mid": 100000, "big": 400000,
             "text": 150000, "edge": 65536, "empty": 0}
    for name, size in sizes.items():
        with open(os.path.join(root, name), "wb") as f:
            if name == "text":
                f.write((b"signed and sealed text %d\n" * 8000)[:size])
            else:
                f.write(rnd.randbytes(size))
    return sorted(sizes)


def block_ranges(c, path, block_log):
    """{block: [(file_off, length)]} of the stream bytes of file PATH, per block."""
    out = {}
    bs = 1 << block_log
    for file_off, stream_off, length in c.extents(c.lookup(path)):
        end = stream_off + length
        while stream_off < end:
            k = stream_off // bs
            n = min(end, (k + 1) * bs) - stream_off
            out.setdefault(k, []).append((file_off, n))
            file_off, stream_off = file_off + n, stream_off + n
    return out


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A small signed image: {tree, files, unsigned, image, key, other, blocks, layout}."""
    base = tmp_path_factory.mktemp("verify")
    tree = str(base / "tree")
    files = make_tree(tree)
    unsigned = build_image(tree, str(base / "unsigned.stipple"), "--level", "3",
                           "--block-size", "64K")
    key, other = Key(str(base), "publisher"), Key(str(base), "other")
    image = sign(unsigned, str(base / "signed.stipple"), key)
    c = CraftedImage(image)
    block_log = get(SB_FIELDS, "block_log", c.data)
    layout = {f: block_ranges(c, f, block_log) for f in files}
    return {"tree": tree, "files": files, "unsigned": unsigned, "image": image, "key": key,
            "other": other, "blocks": stored_blocks(c), "layout": layout, "crafted": c}


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield str(path)
    unmount(str(path))


def mount_cmd(prog, image, mountpoint, opts):
    """The command for PROG (stipple or mount.stipple) with -o OPTS."""
    if prog == "stipple":
        return [STIPPLE, "mount", "-o", opts, image, mountpoint]
    return [MOUNT_STIPPLE, image, mountpoint, "-o", opts]


def refused(prog, image, mountpoint, opts):
    """Runs a mount that must be refused: its stderr."""
    r = run(mount_cmd(prog, image, mountpoint, opts), timeout=60)
    assert r.returncode == (1 if prog == "stipple" else 32), (r.returncode, r.stderr)
    assert not is_mounted(mountpoint)
    assert not daemon_pids(mountpoint)
    return r.stderr


def assert_tree(mountpoint, s):
    for f in s["files"]:
        assert read_file(os.path.join(mountpoint, f)) == read_file(os.path.join(s["tree"], f)), f


# ---- the tests --------------------------------------------------------------------------

@pytest.mark.parametrize("prog", ["stipple", "mount.stipple"])
def test_signed_image_serves_every_byte(signed, mnt, prog):
    r = run(mount_cmd(prog, signed["image"], mnt, "verify=" + signed["key"].pub), timeout=60)
    assert r.returncode == 0, r.stderr
    assert is_mounted(mnt)
    assert_tree(mnt, signed)


def test_stipple_mount_verify_option(signed):
    with mount_image(signed["image"], None, "--verify", signed["key"].pub) as m:
        assert_tree(m, signed)


def test_keygen_and_sign_then_mount(signed, tmp_path):
    """stipple keygen and stipple sign: the image mounts with their key, and is the same,
    byte for byte, as this file's signer makes with that key."""
    sec, pub = str(tmp_path / "k.key"), str(tmp_path / "k.pub")
    r = run([STIPPLE, "keygen", sec, pub])
    if r.returncode != 0 and "unknown command" in r.stderr:
        pytest.skip("no stipple keygen in this build")
    assert r.returncode == 0, r.stderr
    image = str(tmp_path / "s.stipple")
    shutil.copy(signed["unsigned"], image)
    run([STIPPLE, "sign", image, sec], check=True)
    key = Key.__new__(Key)
    key.private = serialization.load_pem_private_key(read_file(sec), None)
    raw = key.private.public_key().public_bytes(serialization.Encoding.Raw,
                                                serialization.PublicFormat.Raw)
    key.id = hashlib.sha256(raw).hexdigest()
    assert read_file(image) == read_file(sign(signed["unsigned"], str(tmp_path / "p.stipple"), key))
    with mount_image(image, None, "--verify", pub) as m:
        assert_tree(m, signed)
    r = run([STIPPLE, "mount", "--verify", signed["key"].pub, image, str(tmp_path)])
    assert r.returncode == 1 and key.id in r.stderr, r.stderr


@pytest.mark.parametrize("prog", ["stipple", "mount.stipple"])
def test_unsigned_image_refused(signed, mnt, prog):
    err = refused(prog, signed["unsigned"], mnt, "verify=" + signed["key"].pub)
    assert "%s: %s" % (signed["unsigned"], NOT_SIGNED) in err, err
    # and without verify it mounts
    r = run(mount_cmd(prog, signed["unsigned"], mnt, "nodev"), timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("prog", ["stipple", "mount.stipple"])
def test_other_key_refused(signed, mnt, prog):
    err = refused(prog, signed["image"], mnt, "verify=" + signed["other"].pub)
    assert signed["key"].id in err and signed["other"].id in err, err
    assert "signed by key %s" % signed["key"].id in err, err


def test_bad_signature_refused(signed, mnt, tmp_path):
    """The right key id, a signature of other bytes."""
    bad = str(tmp_path / "bad.stipple")
    data = bytearray(read_file(signed["image"]))
    sig_off, = struct.unpack_from("<Q", data, SIG_OFF)
    data[sig_off + 48] ^= 1
    with open(bad, "wb") as f:
        f.write(data)
    err = refused("mount.stipple", bad, mnt, "verify=" + signed["key"].pub)
    assert "bad signature" in err and signed["key"].id in err, err


def test_resigned_with_another_key_after_a_change_refused(signed, mnt, tmp_path):
    """Changed and re-signed by someone else: the publisher's key refuses it."""
    c = CraftedImage(signed["unsigned"])
    c.rename("/", "tiny", "tinY")
    changed = c.write(str(tmp_path / "changed.stipple"))
    forged = sign(changed, str(tmp_path / "forged.stipple"), signed["other"])
    err = refused("stipple", forged, mnt, "verify=" + signed["key"].pub)
    assert signed["other"].id in err, err


def test_flipped_metadata_refused(signed, mnt, tmp_path):
    bad = str(tmp_path / "meta.stipple")
    shutil.copy(signed["image"], bad)
    c = signed["crafted"]
    off = get(SB_FIELDS, "meta_offset", c.data) + get(SB_FIELDS, "meta_stored_size", c.data) // 2
    treeutil.flip_byte(bad, off)
    err = refused("mount.stipple", bad, mnt, "verify=" + signed["key"].pub)
    # its XXH3 checksum (in the signed superblock) or its signed hash, whichever first
    assert ("metadata page table does not match its signed hash" in err or
            "metadata page table checksum mismatch" in err), err
    assert "changed since it was signed" in err, err


def touching(s, block):
    """The files with bytes in BLOCK."""
    return {f for f in s["files"] if block in s["layout"][f]}


def read_clean_parts(path, ranges_in_block):
    """Reads, page by page without readahead, the pages of file PATH that hold no byte of
    the damaged block (RANGES_IN_BLOCK: its (file_off, length) there); returns them."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        size = os.fstat(fd).st_size
        bad = set()
        for off, n in ranges_in_block:
            bad.update(range(off // PAGE, (off + n - 1) // PAGE + 1))
        got = {}
        for page in range((size + PAGE - 1) // PAGE):
            # a neighbouring page too: the kernel may round a request up
            if not bad & {page - 1, page, page + 1}:
                got[page] = os.pread(fd, PAGE, page * PAGE)
        return got
    finally:
        os.close(fd)


def test_flipped_data_block_gives_eio(signed, tmp_path):
    """A byte of a block changed: its XXH3 checksum is no longer checked, the signed hash
    is, and only the files with bytes in that block fail, with EIO, the rest reading
    right, as do the parts of those files away from it."""
    blocks = signed["blocks"]
    k = max(range(len(blocks)), key=lambda b: len(touching(signed, b)))
    assert len(touching(signed, k)) >= 2 and len(blocks) >= 6
    bad = str(tmp_path / "block.stipple")
    shutil.copy(signed["image"], bad)
    off, stored = blocks[k]
    treeutil.flip_byte(bad, off + stored // 2)
    mountpoint = str(tmp_path / "mnt")
    os.mkdir(mountpoint)
    hit = touching(signed, k)
    with foreground_mount(bad, mountpoint, "--verify", signed["key"].pub, "--warm-workers",
                          "0") as fg:
        for f in signed["files"]:
            path = os.path.join(mountpoint, f)
            want = read_file(os.path.join(signed["tree"], f))
            if f in hit:
                with pytest.raises(OSError) as e:
                    read_file(path)
                assert e.value.errno == errno.EIO, (f, e.value)
                for page, data in read_clean_parts(path, signed["layout"][f][k]).items():
                    assert data == want[page * PAGE:(page + 1) * PAGE], (f, page)
            else:
                assert read_file(path) == want, f
        log = fg.log()
    assert "block %d does not match its signed hash" % k in log, log


@pytest.mark.needs_root("writes to /etc/stipple/keys")
def test_trusted_keys_directory(signed, mnt):
    """verify without a value: a *.pub of /etc/stipple/keys. The directory is created if
    missing and put back as it was."""
    made = [d for d in ("/etc/stipple", TRUSTED) if not os.path.isdir(d)]
    for d in made:
        os.mkdir(d, 0o755)
    name = os.path.join(TRUSTED, "zz-stipple-test-%d.pub" % os.getpid())
    other = os.path.join(TRUSTED, "zz-stipple-test-%d-other.pub" % os.getpid())
    try:
        if made:  # an empty directory is a clear error
            err = refused("mount.stipple", signed["image"], mnt, "verify")
            assert TRUSTED in err and "must hold 1 to" in err, err
        shutil.copy(signed["other"].pub, other)
        err = refused("mount.stipple", signed["image"], mnt, "verify")
        assert "none of the" in err and signed["key"].id in err, err
        shutil.copy(signed["key"].pub, name)
        r = run([MOUNT_STIPPLE, signed["image"], mnt, "-o", "verify"], timeout=60)
        assert r.returncode == 0, r.stderr
        assert_tree(mnt, signed)
        unmount(mnt)
        err = refused("stipple", signed["unsigned"], mnt, "verify")
        assert NOT_SIGNED in err, err
    finally:
        for f in (name, other):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f)
        for d in reversed(made):
            os.rmdir(d)


def test_trusted_keys_directory_missing(signed, mnt):
    if os.path.isdir(TRUSTED):
        pytest.skip("%s exists" % TRUSTED)
    err = refused("mount.stipple", signed["image"], mnt, "verify")
    assert "no trusted keys: %s" % TRUSTED in err, err


def test_bad_key_files(signed, mnt, tmp_path):
    link = str(tmp_path / "link.pub")
    os.symlink(signed["key"].pub, link)
    err = refused("mount.stipple", signed["image"], mnt, "verify=" + link)
    assert "link.pub: a symbolic link (refused)" in err, err
    err = refused("stipple", signed["image"], mnt, "verify=" + signed["key"].sec)
    assert "not a PEM Ed25519 public key" in err, err
    err = refused("stipple", signed["image"], mnt, "verify=" + str(tmp_path))
    assert "not a regular file" in err, err
    big = tmp_path / "big.pub"
    big.write_bytes(read_file(signed["key"].pub) + b"\n" * (64 << 10))
    err = refused("stipple", signed["image"], mnt, "verify=" + str(big))
    assert "at most 64 KiB" in err, err
    err = refused("stipple", signed["image"], mnt, "verify=" + str(tmp_path / "none.pub"))
    assert "none.pub: No such file" in err, err


@pytest.mark.needs_root("becomes nobody")
def test_user_mount_with_verify(signed, tmp_path):
    """A user's mount reads the key with the user's rights."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv to become nobody")
    import pwd
    nobody = pwd.getpwnam("nobody")
    work = tempfile.mkdtemp(prefix="stipple-user-")
    try:
        os.chmod(work, 0o755)
        image, pub = os.path.join(work, "s.stipple"), os.path.join(work, "k.pub")
        shutil.copy(signed["image"], image)
        shutil.copy(signed["key"].pub, pub)
        mountpoint = os.path.join(work, "mnt")
        os.mkdir(mountpoint)
        for p in (image, pub, mountpoint):
            os.chown(p, nobody.pw_uid, nobody.pw_gid)
        as_user = ["setpriv", "--reuid", str(nobody.pw_uid), "--regid", str(nobody.pw_gid),
                   "--clear-groups"]
        if os.stat("/dev/fuse").st_mode & 0o006:  # else a user cannot mount at all here
            try:
                r = run(as_user + [STIPPLE, "mount", "--verify", pub, image, mountpoint],
                        timeout=60)
                assert r.returncode == 0, r.stderr
                assert read_file(os.path.join(mountpoint, "big")) == \
                    read_file(os.path.join(signed["tree"], "big"))
            finally:
                unmount(mountpoint)
        os.chmod(pub, 0o600)
        os.chown(pub, 0, 0)  # now the user may not read it
        r = run(as_user + [STIPPLE, "mount", "--verify", pub, image, mountpoint], timeout=60)
        assert r.returncode == 1, r.stderr
        assert "public key %s: Permission denied" % pub in r.stderr, r.stderr
        assert not is_mounted(mountpoint)
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.mark.needs_root("sandbox=log is refused for a user's mount")
def test_verify_mount_denies_nothing_in_log_mode(signed):
    """OpenSSL runs inside the sandbox: under sandbox=log the kernel logs no denied call
    of a verify mount, from mount to umount."""
    from test_sandbox import kernel_log_time, sandbox_records
    since = kernel_log_time()
    with mount_image(signed["image"], None, "--verify", signed["key"].pub, "-o",
                     "sandbox=log") as m:
        pids = daemon_pids(m)
        assert len(pids) == 1
        assert_tree(m, signed)
    assert wait_gone(pids)
    records = sandbox_records(pids[0], since)
    if records is None:
        pytest.skip("dmesg is not readable")
    assert not records, "calls outside the filter:\n%s" % "\n".join(records)


# ---- the sweep ---------------------------------------------------------------------------

def sweep_offsets(s):
    """100 offsets: in the superblock, the signature block, the metadata, and every
    block, the rest spread evenly over the image."""
    c = s["crafted"]
    size = len(c.data)
    sig_off, sig_size = struct.unpack_from("<QQ", c.data, SIG_OFF)
    meta = get(SB_FIELDS, "meta_offset", c.data), get(SB_FIELDS, "meta_stored_size", c.data)
    rnd = random.Random(1600)
    picks = {0, 8, 16, 100, 247, 250, sig_off, sig_off + 20, sig_off + 60, sig_off + 115,
             sig_off + SIG_HDR + 5, size - 1, meta[0], meta[0] + meta[1] - 1}
    picks.update(rnd.randrange(meta[0], meta[0] + meta[1]) for _ in range(6))
    for off, stored in s["blocks"]:
        picks.update((off, off + stored - 1, rnd.randrange(off, off + stored)))
    while len(picks) < 100:
        picks.add(size * len(picks) // 100 + rnd.randrange(size // 100))
    return sorted(picks)[:100] if len(picks) > 100 else sorted(picks)


def block_at(s, offset):
    for k, (off, stored) in enumerate(s["blocks"]):
        if off <= offset < off + stored:
            return k
    return None


def covered(s, offset):
    """Whether OFFSET lies in a part the signature covers, other than a block: the
    superblock, the metadata, the dictionary, the signature block."""
    c = s["crafted"]
    sig_off, _ = struct.unpack_from("<QQ", c.data, SIG_OFF)
    parts = [(0, 256), (get(SB_FIELDS, "meta_offset", c.data),
                        get(SB_FIELDS, "meta_stored_size", c.data)),
             (get(SB_FIELDS, "dict_offset", c.data), get(SB_FIELDS, "dict_size", c.data)),
             (sig_off, len(c.data) - sig_off)]
    return any(off <= offset < off + n for off, n in parts)


def test_sweep_flipped_bytes(signed, tmp_path, capsys):
    offsets = sweep_offsets(signed)
    assert len(offsets) == 100
    mountpoint = str(tmp_path / "mnt")
    os.mkdir(mountpoint)
    counts = {"refused": 0, "served with EIO": 0, "served clean": 0}
    want = {f: read_file(os.path.join(signed["tree"], f)) for f in signed["files"]}
    for offset in offsets:
        bad = str(tmp_path / "swept.stipple")
        shutil.copy(signed["image"], bad)
        treeutil.flip_byte(bad, offset)
        k = block_at(signed, offset)
        r = run([STIPPLE, "mount", "--verify", signed["key"].pub, "--warm-workers", "0",
                 "--no-prime", bad, mountpoint], timeout=60)
        if r.returncode != 0:
            assert r.returncode == 1 and r.stderr, (offset, r.stderr)
            # a changed block is found when it is read, never at mount
            assert k is None, (offset, k, r.stderr)
            assert not is_mounted(mountpoint)
            counts["refused"] += 1
            continue
        # the superblock, metadata and signature block are checked before the mount is live
        assert not covered(signed, offset), (offset, "mounted")
        try:
            failed = set()
            for f in signed["files"]:
                try:
                    got = read_file(os.path.join(mountpoint, f))
                except OSError as e:
                    assert e.errno == errno.EIO, (offset, f, e)
                    failed.add(f)
                    continue
                assert got == want[f], (offset, f)
            expect = touching(signed, k) if k is not None else set()
            assert failed == expect, (offset, k, failed, expect)
            counts["served with EIO" if failed else "served clean"] += 1
        finally:
            unmount(mountpoint)
            assert not is_mounted(mountpoint)
    with capsys.disabled():
        print("\nverify sweep over %d offsets: %s" % (len(offsets), counts))
    assert counts["refused"] >= 1 and counts["served with EIO"] >= 1


def test_verified_mount_data_limit_counts_stored_copies(signed, mnt):
    """Verified, each decode holds its block's stored bytes apart while they are hashed
    (decompress.c): RLIMIT_DATA adds a compress bound per block to the unverified figure."""
    from test_trust import assert_data_limit, meta_memory, sb_fields
    r = run([STIPPLE, "mount", "--cache-budget", "3", "--warm-workers", "2",
             "-o", "verify=" + signed["key"].pub, signed["image"], mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    block_log, _, _, dict_size = sb_fields(signed["image"])
    bs = 1 << block_log
    bound = bs + (bs >> 8) + (((128 << 10) - bs) >> 11 if bs < (128 << 10) else 0)
    want = 6 * buffer_bytes(block_log) + 6 * bound + meta_memory(signed["image"]) + \
        2 * dict_size + (256 << 20)
    assert_data_limit(mnt, want)
    assert_tree(mnt, signed)
