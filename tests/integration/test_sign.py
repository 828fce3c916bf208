# SPDX-License-Identifier: MIT
"""Signed images (issue 16): stipple keygen, sign, verify, mkstipple --sign, and what
info and check say of them. OpenSSL's own command reads the keys, as an independent
reader; the byte-flip sweep checks that no byte of a signed image can change unseen."""
import hashlib
import json
import os
import random
import re
import shutil
import stat
import subprocess

import pytest

from conftest import MKSTIPPLE, STIPPLE, read_file, run

import imageutil


def keygen(tmp_path, name):
    sec, pub = tmp_path / (name + ".sec"), tmp_path / (name + ".pub")
    r = run([STIPPLE, "keygen", sec, pub], check=True)
    key_id = re.search(r"key ([0-9a-f]{64})", r.stdout).group(1)
    return sec, pub, key_id


def small_tree(root):
    """A few files: 2 blocks of 64 KiB that make an image of a few KiB."""
    os.makedirs(root / "d")
    for i in range(4):
        (root / ("f%d.txt" % i)).write_text("line %d of a small file\n" % i * (40 + 17 * i))
    (root / "d" / "big.txt").write_text("".join("row %d\n" % (i % 700) for i in range(11000)))
    (root / "d" / "bin").write_bytes(random.Random(16).randbytes(2048))
    os.symlink("f0.txt", root / "link")


def build(src, image, *extra):
    return imageutil.build(src, image, "--block-size", "64K", "--level", "3", *extra)


@pytest.fixture
def signed(tmp_path):
    src = tmp_path / "src"
    small_tree(src)
    sec, pub, key_id = keygen(tmp_path, "k")
    image = build(src, tmp_path / "a.stp")
    unsigned = read_file(image)
    run([STIPPLE, "sign", image, sec], check=True)
    return dict(src=src, sec=sec, pub=pub, key_id=key_id, image=image, unsigned=unsigned,
                tmp=tmp_path)


def verify(image, pub):
    return run([STIPPLE, "verify", image, pub])


def test_keygen_writes_keys_openssl_reads(tmp_path):
    sec, pub, key_id = keygen(tmp_path, "k")
    assert stat.S_IMODE(os.stat(sec).st_mode) == 0o600
    assert b"-----BEGIN PRIVATE KEY-----" in read_file(sec)
    assert b"-----BEGIN PUBLIC KEY-----" in read_file(pub)
    if not shutil.which("openssl"):
        pytest.skip("no openssl command")
    # openssl derives the same public key from our secret key, and reads ours
    derived = run(["openssl", "pkey", "-in", sec, "-pubout"], check=True).stdout
    assert derived.encode() == read_file(pub)
    text = run(["openssl", "pkey", "-pubin", "-in", pub, "-text", "-noout"], check=True)
    assert "ED25519" in text.stdout
    # the key id is the SHA-256 of the raw 32-byte key: the DER's last 32 bytes
    der = subprocess.run(["openssl", "pkey", "-pubin", "-in", pub, "-outform", "DER"],
                         capture_output=True, check=True).stdout
    import hashlib
    assert hashlib.sha256(der[-32:]).hexdigest() == key_id


def test_keygen_refuses_to_overwrite(tmp_path):
    sec, pub, _ = keygen(tmp_path, "k")
    before = read_file(sec)
    r = run([STIPPLE, "keygen", sec, tmp_path / "other.pub"])
    assert r.returncode == 1 and "exists" in r.stderr and str(sec) in r.stderr
    assert read_file(sec) == before and not os.path.exists(tmp_path / "other.pub")
    r = run([STIPPLE, "keygen", "--force", sec, pub], check=True)
    assert read_file(sec) != before
    assert stat.S_IMODE(os.stat(sec).st_mode) == 0o600


def test_openssl_made_key_signs(signed):
    if not shutil.which("openssl"):
        pytest.skip("no openssl command")
    t = signed["tmp"]
    run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", t / "o.sec"], check=True)
    run(["openssl", "pkey", "-in", t / "o.sec", "-pubout", "-out", t / "o.pub"], check=True)
    run([STIPPLE, "sign", signed["image"], t / "o.sec"], check=True)
    assert verify(signed["image"], t / "o.pub").returncode == 0
    assert verify(signed["image"], signed["pub"]).returncode == 1


def test_sign_verify_round_trip(signed):
    image, pub = signed["image"], signed["pub"]
    r = verify(image, pub)
    assert r.returncode == 0, r.stderr
    assert signed["key_id"] in r.stdout
    data = read_file(image)
    sb = imageutil.superblock(data)
    # the unsigned image's bytes are kept; the signature block ends the file
    assert data[256:len(signed["unsigned"])] == signed["unsigned"][256:]
    assert data[len(signed["unsigned"]):][:8] == b"STPSIGN1"
    pages = -(-sb["meta_size"] // imageutil.META_PAGE_SIZE)  # a hash for each page too
    assert sb["meta_codec"] == imageutil.META_CODEC_PAGES
    # and a content hash for each block (stipple(5), feature bit 7)
    assert sb["feat_incompat"] & imageutil.FEAT_CONTENT_HASHES
    assert len(data) == len(signed["unsigned"]) + 120 + 32 * (2 * sb["block_count"] + 2 + pages)
    info = run([STIPPLE, "info", image], check=True).stdout
    assert re.search(r"signed:\s+yes, key %s" % signed["key_id"], info)
    unsigned = signed["tmp"] / "u.stp"
    unsigned.write_bytes(signed["unsigned"])
    assert re.search(r"signed:\s+no", run([STIPPLE, "info", unsigned], check=True).stdout)
    r = verify(unsigned, pub)
    assert r.returncode == 1 and "not signed" in r.stderr
    # the file is readable as before
    r = run([STIPPLE, "cat", image, "f1.txt"], check=True)
    assert r.stdout == (signed["src"] / "f1.txt").read_text()


def content_hashes(image):
    """Each block's content hash as the zstd program (an independent decoder) makes it from
    the block's stored bytes; zeros for a block that is not one zstd frame."""
    data = read_file(image)
    out = []
    for b in json.loads(run([STIPPLE, "info", "--blocks", "--json", image],
                            check=True).stdout)["block_table"]:
        stored = data[b["offset"]:b["offset"] + b["stored"]]
        if b["codec"] != "zstd":
            out.append(bytes(32))
            continue
        content = subprocess.run(["zstd", "-dc"], input=stored, check=True,
                                 capture_output=True).stdout
        assert len(content) == b["decoded"]
        out.append(hashlib.sha256(content).digest())
    return out


def test_signature_holds_content_hashes(signed, tmp_path):
    """The signature block's last block_count entries are the blocks' content hashes, by
    stipple sign and by mkstipple --sign alike; a BCJ-filtered block's is of its content
    still filtered (the zstd program knows no BCJ)."""
    big = tmp_path / "big"
    shutil.copytree(signed["src"], big)
    shutil.copy("/bin/ls", big / "ls")  # machine code: BCJ-filtered blocks
    with open(big / "r.bin", "wb") as f:
        f.write(random.Random(7).randbytes(200 << 10))  # stored raw
    image = build(big, tmp_path / "b.stp", "--sign", signed["sec"])
    table = json.loads(run([STIPPLE, "info", "--blocks", "--json", image],
                           check=True).stdout)["block_table"]
    assert any(b["filter"] != "none" for b in table) and any(b["codec"] == "raw" for b in table)
    for img in (signed["image"], image):
        data = read_file(img)
        sb = imageutil.superblock(data)
        n = sb["block_count"]
        assert data[-32 * n:] == b"".join(content_hashes(img)), img
    assert verify(image, signed["pub"]).returncode == 0
    assert re.search(r"features:.*\bcontent-hashes\b", run([STIPPLE, "info", image],
                                                            check=True).stdout)


def test_verify_with_another_key_fails(signed):
    _, other, other_id = keygen(signed["tmp"], "other")
    r = verify(signed["image"], other)
    assert r.returncode == 1
    assert signed["key_id"] in r.stderr and other_id in r.stderr
    r = run([STIPPLE, "check", "--key", other, signed["image"]])
    assert r.returncode == 1
    assert run([STIPPLE, "check", "--key", signed["pub"], signed["image"]]).returncode == 0


def test_resign_replaces_the_signature(signed):
    sec2, pub2, _ = keygen(signed["tmp"], "k2")
    first = read_file(signed["image"])
    run([STIPPLE, "sign", signed["image"], sec2], check=True)
    second = read_file(signed["image"])
    assert len(second) == len(first)
    assert verify(signed["image"], pub2).returncode == 0
    assert verify(signed["image"], signed["pub"]).returncode == 1
    run([STIPPLE, "sign", signed["image"], signed["sec"]], check=True)
    assert read_file(signed["image"]) == first


def test_changed_block_resigned_under_another_key_is_refused(signed, tmp_path):
    # the same tree with one file changed, built and signed by someone else
    src2 = tmp_path / "src2"
    shutil.copytree(signed["src"], src2, symlinks=True)
    (src2 / "f2.txt").write_text("not what the publisher shipped\n")
    sec2, pub2, _ = keygen(tmp_path, "evil")
    forged = build(src2, tmp_path / "forged.stp", "--sign", sec2)
    assert verify(forged, pub2).returncode == 0
    r = verify(forged, signed["pub"])
    assert r.returncode == 1 and "signed by key" in r.stderr
    # a block of the publisher's image changed in place: sign refuses to vouch for it
    # and verify refuses it under the first key
    data = bytearray(read_file(signed["image"]))
    data[300] ^= 0x40
    (tmp_path / "t.stp").write_bytes(data)
    r = run([STIPPLE, "sign", tmp_path / "t.stp", sec2])
    assert r.returncode == 1
    r = verify(tmp_path / "t.stp", signed["pub"])
    assert r.returncode == 1 and "block 0" in r.stderr


def test_mkstipple_sign_equals_build_then_sign(signed, tmp_path):
    at_build = build(signed["src"], tmp_path / "b.stp", "--sign", signed["sec"])
    assert read_file(at_build) == read_file(signed["image"])
    r = run([MKSTIPPLE, "-q", "--sign", tmp_path / "missing.sec", signed["src"],
             tmp_path / "c.stp"])
    assert r.returncode != 0 and "missing.sec" in r.stderr
    assert not os.path.exists(tmp_path / "c.stp")


def test_check_of_a_signed_image_checks_the_hashes(signed, tmp_path):
    r = run([STIPPLE, "check", signed["image"]], check=True)
    assert "signed hashes match" in r.stdout
    # a changed byte in the hash table itself, which only the signed hashes catch: the
    # last stored part's (a metadata page's), then the last block's content hash (the
    # table's last entry), which check decodes the block again for
    n = imageutil.superblock(read_file(signed["image"]))["block_count"]
    for at, says in ((-32 * n - 1, "metadata page 0 does not match its signed hash"),
                     (-1, "block 1 does not match its signed content hash")):
        data = bytearray(read_file(signed["image"]))
        data[at] ^= 1
        (tmp_path / "h.stp").write_bytes(data)
        r = run([STIPPLE, "check", tmp_path / "h.stp"])
        assert r.returncode == 1 and says in r.stderr, r.stderr
        assert run([STIPPLE, "cat", tmp_path / "h.stp", "f0.txt"]).returncode == 0


def test_byte_flip_sweep(signed, tmp_path):
    """Every byte of a small signed image, flipped alone: verify fails each time."""
    data = read_file(signed["image"])
    assert len(data) < 16384, len(data)
    assert imageutil.superblock(data)["block_count"] == 2
    target = tmp_path / "flip.stp"
    accepted = []
    for off in range(len(data)):
        flipped = bytearray(data)
        flipped[off] ^= 0xff
        target.write_bytes(flipped)
        if verify(target, signed["pub"]).returncode != 1:
            accepted.append(off)
    print("byte-flip sweep: %d bytes flipped, %d refused" % (len(data),
                                                            len(data) - len(accepted)))
    assert not accepted, "flips accepted at %s" % accepted[:20]
