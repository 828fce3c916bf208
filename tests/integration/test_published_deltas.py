# SPDX-License-Identifier: MIT
"""Delta files of a published release (issue 31; stipple(5), PUBLISHED INDEX, Delta
entry): release 2 published with `stipple publish --base` release 1's image into the
directory release 1 is in, served by nginx with the README's caching lines. Each delta
is checked with the zstd program (an independent decoder): it rebuilds the content the
index hashes from its bases. A mount of release 2 through the store release 1's mount
filled, direct and through Squid, fetches the deltas and not their full blocks, and
reads the source tree, and a second mount of it fetches nothing (the deltas and the
rebuilt blocks are kept in
the store); a fresh store fetches the full blocks; a delta damaged on the
server costs the full block (fetched after it), never a wrong byte. A mount that verifies
a signed release fetches the deltas too, and checks each rebuilt block against its signed
content hash: a delta that rebuilds other content, under an index edited to vouch for it
(a hostile server), is refused by the daemon and the block read, where a mount that does
not verify serves the lie; a release signed without content hashes (by this suite's own
signer, as an older stipple signs) gets blocks only. --base may name release 1's index.
The deltas and the index do not depend on --threads."""

import base64
import contextlib
import hashlib
import os
import random
import shutil
import struct
import subprocess

import pytest

import httputil
import imageutil
from httputil import _no_proxy_from_the_environment, squid_dir  # noqa: F401 (fixtures)
import treeutil
from conftest import STIPPLE, build_image, mount_image, run
from imageutil import FAST
from test_published import (REPO, assert_same_tree, block_requests, hashes, images,  # noqa: F401
                            origin_of, publish, raw_status, read_all, readme_config,
                            releases, stored, store_files)

import pubindex
from test_no_device_open import BlockedWriter


def publish_pair(images, www):
    """Release 1 published, then release 2 with --base: (index 1, index 2, release 2's
    index parsed by this suite's reader)."""
    idx1, = publish(images[:1], www, "stipple")
    r = run([STIPPLE, "publish", "-q", "--json", "--base", images[0], images[1], www / REPO],
            check=True)
    idx2 = os.fspath(www / REPO / os.path.basename(images[1]))
    with open(idx2, "rb") as f:
        parsed = pubindex.parse(f.read())
    assert parsed["deltas"], "no delta paid on this pair: " + r.stdout
    return idx1, idx2, parsed


def block_file(www, sha):
    return www / REPO / "blocks" / pubindex.block_name(sha)


def test_deltas_rebuild_with_zstd(releases, images, tmp_path):
    """Every delta, decoded by the zstd program with its bases' contents as the prefix,
    gives the content the index hashes; and that content is the block's (its full
    block file decoded)."""
    www = tmp_path / "www"
    idx1, idx2, parsed = publish_pair(images, www)
    entries = parsed["entries"]
    for d in parsed["deltas"]:
        prefix = b"".join(subprocess.run(["zstd", "-dc", block_file(www, b)], check=True,
                                         capture_output=True).stdout for b in d["bases"])
        (tmp_path / "prefix").write_bytes(prefix)
        got = subprocess.run(["zstd", "-dc", "--long=31", "--patch-from=%s" % (tmp_path / "prefix"),
                              block_file(www, d["delta"])], check=True, capture_output=True).stdout
        assert len(got) == d["content_size"] and hashlib.sha256(got).digest() == d["content"]
        full = subprocess.run(["zstd", "-dc", block_file(www, entries[d["block"]][2])],
                              check=True, capture_output=True).stdout
        assert full == got, "block %d" % d["block"]
        assert d["size"] * 4 <= entries[d["block"]][1] * 3  # it pays
        assert set(d["bases"]) <= set(bytes.fromhex(h) for h in hashes(idx1))


def mount_pair(releases, www, tmp_path, cache, opts="", again=False, args=()):
    """Release 1 then release 2 mounted (with mount ARGS) through one store, every file
    read and compared: the block names nginx served for release 2 (with AGAIN, and for a
    second mount of it)."""
    with origin_of(www, tmp_path / "nginx") as origin:
        o = "cache_dir=%s%s" % (cache, opts and "," + opts)
        with mount_image(origin.url(REPO + "/app-1.stp"), None, *args, "-o", o) as mnt:
            assert_same_tree(releases[0], mnt)
        seen = len(origin.uris())
        with mount_image(origin.url(REPO + "/app-2.stp"), None, *args, "-o", o) as mnt:
            assert_same_tree(releases[1], mnt)
        got = block_requests(origin, seen)
        if not again:
            return got
        seen = len(origin.uris())
        with mount_image(origin.url(REPO + "/app-2.stp"), None, *args, "-o", o) as mnt:
            assert_same_tree(releases[1], mnt)
        return got, block_requests(origin, seen)


@pytest.mark.parametrize("proxy", [False, True])
def test_update_fetches_deltas(releases, images, tmp_path, squid_dir, proxy):
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    h1, h2 = hashes(idx1), hashes(idx2)
    if proxy:
        _, refresh = readme_config()
        with httputil.squid(squid_dir, refresh=refresh) as p:
            got, again = mount_pair(releases, www, tmp_path, cache, "proxy=" + p, True)
    else:
        got, again = mount_pair(releases, www, tmp_path, cache, again=True)
    # the deltas were kept in the store: a second mount rebuilds from there
    assert again == [], again
    assert_fetched_deltas(got, parsed, h1, h2)


def test_nodeltas_fetches_the_blocks(releases, images, tmp_path):
    """-o nodeltas (for a link faster than a rebuild): release 2 through release 1's
    store fetches each block it lacks whole, no delta file, and reads the source tree;
    the blocks release 1 left in the store are still read from there, and a second mount
    fetches nothing."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    h1, h2 = hashes(idx1), hashes(idx2)
    got, again = mount_pair(releases, www, tmp_path, cache, "nodeltas", True)
    assert sorted(got) == sorted(set(h for h in h2 if h not in h1)), (got, parsed["deltas"])
    assert not {d["delta"].hex() for d in parsed["deltas"]} & set(got)
    assert again == [], again


def assert_fetched_deltas(got, parsed, h1, h2):
    """GOT, the names fetched for release 2, are its new blocks, a delta for each that has
    one."""
    by_block = {d["block"]: d for d in parsed["deltas"]}
    want = set()
    for i, h in enumerate(h2):
        if h in h1:
            continue
        want.add(by_block[i]["delta"].hex() if i in by_block else h)
    assert sorted(got) == sorted(want), (len(got), len(want))
    for d in parsed["deltas"]:
        assert h2[d["block"]] not in got, "block %d fetched whole" % d["block"]


def test_deltas_that_share_a_base_rebuild_in_turn(tmp_path):
    """A file shifted by an insert: each block of release 2 has two blocks of release 1
    as its bases, one of them the next block's too (publish puts the one with the most
    bytes first: [k, k-1], then [k+1, k]). Read in order, a
    rebuild keeps the base it shares with the one before in memory rather than decode
    it again (published.c); each delta must still rebuild its block exactly (none fetched
    whole after its delta) and the file read back is release 2's."""
    body = base64.b64encode(random.Random(31).randbytes(9 * 65536))  # zstd stores it
    trees = [tmp_path / "v1", tmp_path / "v2"]
    for t, data in zip(trees, (body, b"release 2\n" * 10 + body)):
        t.mkdir()
        (t / "f").write_bytes(data)
    images = [build_image(t, tmp_path / ("app-%d.stp" % (i + 1)), *FAST)
              for i, t in enumerate(trees)]
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    deltas = sorted(parsed["deltas"], key=lambda d: d["block"])
    chained = [b for a, b in zip(deltas, deltas[1:]) if set(a["bases"]) & set(b["bases"])]
    assert len(chained) >= 8, [d["bases"] for d in deltas]
    got = mount_pair(trees, www, tmp_path, cache)
    h2 = hashes(idx2)
    for d in deltas:
        assert d["delta"].hex() in got, "block %d: its delta was not asked for" % d["block"]
        assert h2[d["block"]] not in got, "block %d fetched whole" % d["block"]


def test_machine_code_rebuilt_from_deltas(tmp_path):
    """Blocks of machine code go through the x86 BCJ filter: their contents, rebuilt
    from deltas, reach the daemon still filtered, and the unfilter goes step by step
    while reads wait for their own bytes (decompress.c). Release 2 changes a few bytes
    all through a native library: every file read through release 1's store, and again
    from the contents the store kept, is release 2's, byte for byte."""
    lib = "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"
    if not os.path.isfile(lib):
        pytest.skip(lib + " is not on this machine")
    code = bytearray(open(lib, "rb").read()[:3 << 20])
    trees = [tmp_path / "v1", tmp_path / "v2"]
    for t in trees:
        t.mkdir()
    (trees[0] / "lib.so").write_bytes(code)
    for at in range(4096, len(code), 200 << 10):
        code[at:at + 8] = b"release2"
    (trees[1] / "lib.so").write_bytes(code)
    images = [build_image(t, tmp_path / ("app-%d.stp" % (i + 1)), "--level", "3",
                          "--block-size", "256K") for i, t in enumerate(trees)]
    filters = imageutil.CraftedImage(images[1]).block_filters()
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    rebuilt = [d["block"] for d in parsed["deltas"] if filters[d["block"]]]
    assert len(rebuilt) >= 4, (filters, [d["block"] for d in parsed["deltas"]])
    got, again = mount_pair(trees, www, tmp_path, cache, again=True)
    h2 = hashes(idx2)
    assert not [b for b in rebuilt if h2[b] in got], "a filtered block was fetched whole"
    assert again == [], again


def test_status_counts_a_deltas_bytes_not_its_blocks(releases, images, tmp_path):
    """A mount of release 2 through release 1's store: `stipple status` counts as fetched
    the bytes nginx sent for it (its deltas and the blocks that have none), not the
    contents the deltas rebuilt; a second mount, served the kept contents, fetches
    nothing and counts the store's bytes."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    o = "cache_dir=%s" % cache
    with origin_of(www, tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app-1.stp"), None, "-o", o) as mnt:
            assert_same_tree(releases[0], mnt)
        sts, seen = [], []
        for _ in range(2):
            seen.append(len(origin.uris()))
            with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o", o) as mnt:
                assert_same_tree(releases[1], mnt)
                sts.append(raw_status(mnt))
    # nginx logs a request once it is done, which may be after the fetcher has the
    # bytes the status counts: its log is read once it has stopped
    got, got2 = (block_requests(origin, k) for k in seen)
    got = got[:len(got) - len(got2)]
    st, st2 = sts
    sent = sum(os.path.getsize(block_file(www, bytes.fromhex(n))) for n in got)
    rebuilt = sum(d["content_size"] for d in parsed["deltas"])
    assert got and sent < rebuilt, (sent, rebuilt)
    index = os.path.getsize(idx2)
    assert sent <= st["net_bytes"] <= sent + index, (st["net_bytes"], sent, rebuilt)
    assert got2 == [] and st2["net_bytes"] <= index, st2
    assert st2["disk_cache_bytes"] >= rebuilt, (st2, rebuilt)


def test_fresh_store_fetches_full_blocks(releases, images, tmp_path):
    www = tmp_path / "www"
    idx1, idx2, parsed = publish_pair(images, www)
    with origin_of(www, tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o",
                         "cache_dir=%s" % (tmp_path / "cache")) as mnt:
            assert_same_tree(releases[1], mnt)
        got = block_requests(origin)
    assert sorted(got) == sorted(set(hashes(idx2))), "a fresh store fetched a delta"


def test_damaged_delta_falls_back_to_the_block(releases, images, tmp_path):
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    h2 = hashes(idx2)
    d = parsed["deltas"][0]
    path = block_file(www, d["delta"])
    treeutil.flip_byte(path, os.path.getsize(path) // 2)
    got = mount_pair(releases, www, tmp_path, cache)  # the trees compared: no wrong byte
    assert d["delta"].hex() in got, "the delta was not asked for"
    assert h2[d["block"]] in got, "the block was not fetched after its delta failed"
    assert got.index(d["delta"].hex()) < got.index(h2[d["block"]])


def test_damaged_base_in_the_store_costs_its_delta(releases, images, tmp_path):
    """A base release 1 left in the store, damaged before release 2 is mounted: the
    monitor finds it (store.c) or, past its hashing budget, the fetcher does as it applies
    a delta. Each block with a delta on that base is fetched whole (after its delta, if
    that was fetched), and the tree read is release 2's; the other deltas still serve."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    h2 = hashes(idx2)
    bad = parsed["deltas"][0]["bases"][0]
    hit = [d for d in parsed["deltas"] if bad in d["bases"]]
    o = "cache_dir=%s" % cache
    with origin_of(www, tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app-1.stp"), None, "-o", o) as mnt:
            assert_same_tree(releases[0], mnt)
        path = stored(cache, bad.hex())
        treeutil.flip_byte(path, os.path.getsize(path) // 2)
        seen = len(origin.uris())
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o", o) as mnt:
            assert_same_tree(releases[1], mnt)
        got = block_requests(origin, seen)
    for d in hit:
        assert h2[d["block"]] in got, "block %d: not fetched past its damaged base" % d["block"]
        if d["delta"].hex() in got:
            assert got.index(d["delta"].hex()) < got.index(h2[d["block"]])
    rest = [d for d in parsed["deltas"] if bad not in d["bases"]]
    assert all(d["delta"].hex() in got for d in rest), "a sound delta was not used"


def test_bad_base_is_refused_before_dir(images, tmp_path):
    """An OLD that is not an image, or a bad level: a message naming it, a non-zero exit,
    nothing written."""
    www = tmp_path / "www"
    junk = tmp_path / "junk.stp"
    junk.write_bytes(b"not an image" * 100)
    for args, says in (([junk], str(junk)), ([tmp_path / "none.stp"], "none.stp")):
        r = run([STIPPLE, "publish", "--base", *args, images[1], www])
        assert r.returncode != 0 and says in r.stderr, r.stderr
        assert not (www / "blocks").exists() or not any((www / "blocks").iterdir())
        assert not (www / "app-2.stp").exists()
    r = run([STIPPLE, "publish", "--base", images[0], "--delta-level", "23", images[1], www])
    assert r.returncode == 2 and "--delta-level 23" in r.stderr, r.stderr


def test_base_may_be_the_published_index(images, tmp_path):
    """--base DIR/app-1.stp (the index, its blocks beside it) writes the same index and
    deltas as --base app-1.stp; a base block file damaged in DIR is refused, naming it."""
    www, www2 = tmp_path / "www", tmp_path / "www2"
    _, idx2, _ = publish_pair(images, www)
    idx1b, = publish(images[:1], www2, "stipple")
    run([STIPPLE, "publish", "-q", "--base", idx1b, images[1], www2 / REPO], check=True)
    with open(idx2, "rb") as a, open(www2 / REPO / "app-2.stp", "rb") as b:
        assert a.read() == b.read()
    v1 = hashes(idx1b)
    treeutil.flip_byte(www2 / REPO / "blocks" / v1[0][:2] / v1[0], 100)
    r = run([STIPPLE, "publish", "-q", "--base", idx1b, images[1], tmp_path / "www3"])
    assert r.returncode != 0 and "app-1.stp" in r.stderr and "blocks/%s/%s" % (
        v1[0][:2], v1[0]) in r.stderr, r.stderr
    assert not (tmp_path / "www3").exists()


def dir_contents(top):
    """{relative path: bytes} of every file under TOP."""
    out = {}
    for d, _, names in os.walk(top):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, top)] = f.read()
    return out


def test_deltas_do_not_depend_on_threads(images, tmp_path):
    """--threads 1, 2 and 5 write the same index and the same files, byte for byte (the
    deltas are made on threads and taken in block order); a bad count is refused."""
    got = []
    for n in (1, 2, 5):
        www = tmp_path / ("www%d" % n)
        publish(images[:1], www, "stipple")
        run([STIPPLE, "publish", "-q", "--threads", str(n), "--base", images[0], images[1],
             www / REPO], check=True)
        got.append(dir_contents(www))
    deltas = pubindex.parse(got[0][os.path.join(REPO, "app-2.stp")])["deltas"]
    assert len(deltas) >= 2, "too few deltas for the threads to matter"
    assert got[1] == got[0] and got[2] == got[0]
    for bad in ("0", "1025", "two"):
        r = run([STIPPLE, "publish", "--threads", bad, "--base", images[0], images[1],
                 tmp_path / "www9"])
        assert r.returncode == 2 and "--threads %s" % bad in r.stderr, r.stderr
        assert not (tmp_path / "www9").exists()


def signed_pair(images, tmp_path, signer=None):
    """Both releases signed (by `stipple sign`, or SIGNER(src, dst, key)) and published as
    publish_pair does: (public key, index 1, index 2, index 2 parsed)."""
    sec, pub = tmp_path / "k.key", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    signed = []
    for img in images:
        signed.append(tmp_path / os.path.basename(img))
        if signer:
            signer(img, signed[-1], sec)
            continue
        shutil.copy(img, signed[-1])
        run([STIPPLE, "sign", signed[-1], sec], check=True)
    return (pub,) + publish_pair(signed, tmp_path / "www")


def test_verified_mount_fetches_deltas(releases, images, tmp_path):
    """Signed releases mounted with their key through one store: release 2 fetches the
    deltas, each rebuilt block checked against its signed content hash."""
    pub, idx1, idx2, parsed = signed_pair(images, tmp_path)
    got = mount_pair(releases, tmp_path / "www", tmp_path, tmp_path / "cache",
                     args=("--verify", pub))
    assert_fetched_deltas(got, parsed, hashes(idx1), hashes(idx2))


def window_log(size):
    """common/delta.c's: the least power of two (from 2^10) that holds SIZE bytes."""
    log = 10
    while (1 << log) < size:
        log += 1
    return log


def forge_delta(www, idx2, parsed, tmp_path):
    """Replaces release 2's first delta by one that rebuilds other content (every 512th
    byte changed) from the same bases, checked with the zstd program, and edits the
    index to vouch for it, checksum and all, as a hostile server could: (the delta
    entry, the forged delta's name)."""
    d = parsed["deltas"][0]
    full = hashes(idx2)[d["block"]]
    zstd = lambda *a: subprocess.run(["zstd", *a], check=True,  # noqa: E731
                                     capture_output=True).stdout
    content = bytearray(zstd("-dc", block_file(www, bytes.fromhex(full))))
    for i in range(0, len(content), 512):
        content[i] ^= 0x55
    prefix = b"".join(zstd("-dc", block_file(www, b)) for b in d["bases"])
    (tmp_path / "prefix").write_bytes(prefix)
    (tmp_path / "lie").write_bytes(content)
    delta = zstd("-19", "-c", "--no-check", "--long=%d" % window_log(len(prefix) + len(content)),
                 "--patch-from=%s" % (tmp_path / "prefix"), tmp_path / "lie")
    (tmp_path / "forged").write_bytes(delta)
    assert zstd("-dc", "--long=31", "--patch-from=%s" % (tmp_path / "prefix"),
                tmp_path / "forged") == content
    sha = hashlib.sha256(delta).digest()
    block_file(www, sha).parent.mkdir(parents=True, exist_ok=True)
    block_file(www, sha).write_bytes(delta)
    with open(idx2, "rb") as f:
        index = bytearray(f.read())
    at = len(index) - pubindex.DELTA * len(parsed["deltas"])
    struct.pack_into("<I", index, at + 8, len(delta))
    index[at + 24:at + 56] = sha
    index[at + 56:at + 88] = hashlib.sha256(content).digest()
    count = len(parsed["entries"])
    entries = index[pubindex.HDR:pubindex.HDR + pubindex.ENTRY * count]
    struct.pack_into("<Q", index, 40, pubindex.xxh3(bytes(index[:40] + index[48:64] + entries +
                                                          index[at - 0:])))
    assert pubindex.parse(bytes(index))["deltas"][0]["delta"] == sha  # a valid index
    with open(idx2, "wb") as f:
        f.write(index)
    return d, sha.hex()


def test_hostile_delta_is_refused_by_the_verifying_daemon(releases, images, tmp_path):
    """A forged delta the fetcher cannot tell from a good one (the index vouches for it):
    a mount that does not verify serves its bytes, the proof it is a lie the fetcher lets
    through; a verified mount refuses it after fetching it and reads the block: the tree
    is the source's."""
    www = tmp_path / "www"
    pub, idx1, idx2, parsed = signed_pair(images, tmp_path)
    d, forged = forge_delta(www, idx2, parsed, tmp_path)
    full = hashes(idx2)[d["block"]]
    with origin_of(www, tmp_path / "nginx") as origin:
        for args, cache in (((), "plain"), (("--verify", pub), "verified")):
            o = "cache_dir=%s" % (tmp_path / cache)
            with mount_image(origin.url(REPO + "/app-1.stp"), None, *args, "-o", o) as mnt:
                assert_same_tree(releases[0], mnt)
            seen = len(origin.uris())
            with mount_image(origin.url(REPO + "/app-2.stp"), None, *args, "-o", o) as mnt:
                diffs = treeutil.compare_trees(releases[1], mnt)
            got = block_requests(origin, seen)
            assert forged in got, "the forged delta was not asked for"
            if not args:
                assert diffs, "the forged delta was not used: the test proves nothing"
                assert full not in got
                continue
            assert not diffs, "\n".join(diffs[:20])
            assert full in got and got.index(forged) < got.index(full)


def test_verified_mount_of_a_release_signed_without_content_hashes(releases, images,
                                                                   tmp_path):
    """Signed as an older stipple signs (no content hashes; this suite's own signer): a
    verified mount fetches the blocks, never the deltas."""
    mount_verify = pytest.importorskip("test_mount_verify")
    key = mount_verify.Key(tmp_path, "old")

    def signer(src, dst, sec):
        mount_verify.sign(src, dst, key, content=False)
        shutil.copy(key.pub, tmp_path / "k.pub")

    pub, idx1, idx2, parsed = signed_pair(images, tmp_path, signer)
    got = mount_pair(releases, tmp_path / "www", tmp_path, tmp_path / "cache",
                     args=("--verify", pub))
    assert sorted(got) == sorted(set(hashes(idx2)) - set(hashes(idx1))), \
        "a verified mount used a delta it could not check"


@pytest.mark.parametrize("plant", ["linked_fanout", "fifo"])
def test_base_index_blocks_are_not_followed_nor_waited_on(images, tmp_path, plant):
    """The old release's directory is untrusted: a fan-out directory that is a symbolic
    link (to a copy holding the right block) is not followed, and a FIFO under a block's
    name is neither waited on nor even opened (review 13 #5: what is planted there could
    be a device, whose open runs its driver); either is refused, naming the block file."""
    www = tmp_path / "www"
    idx1, = publish(images[:1], www, "stipple")
    sha = hashes(idx1)[0]
    fanout = www / REPO / "blocks" / sha[:2]
    writer = None
    if plant == "linked_fanout":
        os.rename(fanout, tmp_path / "elsewhere")
        os.symlink(tmp_path / "elsewhere", fanout)
    else:
        os.unlink(fanout / sha)
        os.mkfifo(fanout / sha)
        writer = BlockedWriter(fanout / sha)  # its open returns once someone opens it
    try:
        r = run([STIPPLE, "publish", "-q", "--base", idx1, images[1], tmp_path / "out"],
                timeout=60)
        assert r.returncode != 0 and "blocks/%s/%s" % (sha[:2], sha) in r.stderr, r.stderr
        assert not (tmp_path / "out").exists()
        if writer:
            assert not writer.opened.wait(0.5), "publish opened the FIFO"
            assert "not a regular file" in r.stderr, r.stderr
    finally:
        if writer:
            writer.release()


def decoded(path):
    """The content of the block file at PATH, decoded by the zstd program."""
    return subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout


def test_block_in_the_store_is_read_without_its_delta(releases, images, tmp_path):
    """Release 2's blocks already in the store (a mount of release 2 published without
    --base filled it): a mount of the release with deltas rebuilds nothing, and asks for
    no delta."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    shutil.copy(images[1], tmp_path / "full.stp")
    publish([tmp_path / "full.stp"], www, "stipple")  # the same blocks, no delta table
    with origin_of(www, tmp_path / "nginx") as origin:
        o = "cache_dir=%s" % cache
        for name in ("app-1.stp", "full.stp", "app-2.stp"):
            seen = len(origin.uris())
            with mount_image(origin.url(REPO + "/" + name), None, "-o", o) as mnt:
                assert_same_tree(releases[name != "app-1.stp"], mnt)
        got = block_requests(origin, seen)
    assert got == [], "release 2's blocks were in the store, yet it fetched %s" % got


def test_rebuilt_content_is_kept_in_the_store(releases, images, tmp_path):
    """A block rebuilt from its delta is kept under its content's SHA-256 (the content,
    as the zstd program decodes its block): a later mount reads it without its bases or
    its delta (both removed from the store here) and fetches nothing."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    entries, h2 = parsed["entries"], hashes(idx2)
    mount_pair(releases, www, tmp_path, cache)
    removed = set()
    for d in parsed["deltas"]:
        kept = stored(cache, d["content"].hex())
        assert kept.exists(), "block %d's content was not kept" % d["block"]
        assert kept.read_bytes() == decoded(block_file(www, entries[d["block"]][2]))
        for sha in d["bases"] + [d["delta"]]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(stored(cache, sha.hex()))
            removed.add(sha.hex())
    with origin_of(www, tmp_path / "nginx") as origin:
        seen = len(origin.uris())  # the log goes on from mount_pair's
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o",
                         "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[1], mnt)
        got = block_requests(origin, seen)
    # a base release 2 holds as a block of its own is fetched again, nothing else
    assert sorted(got) == sorted(removed & set(h2)), "a kept content was not used"


def test_a_small_store_keeps_contents_before_blocks(releases, images, tmp_path):
    """Room in cache_size= for few files past release 1's (as many as release 2 has
    deltas, twice, and one): the contents and deltas the store's bases make useful are
    offered first, so every rebuilt content is kept, and the blocks they spare are not."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    with origin_of(www, tmp_path / "nginx") as origin:
        o = "cache_dir=%s" % cache
        with mount_image(origin.url(REPO + "/app-1.stp"), None, "-o", o) as mnt:
            assert_same_tree(releases[0], mnt)
        # the fetcher writes files of at most a content's size: 64 KiB here
        held = sum(os.stat(stored(cache, name)).st_blocks * 512 for name in store_files(cache))
        limit = held + (2 * len(parsed["deltas"]) + 1) * 65536
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o",
                         "%s,cache_size=%d" % (o, limit)) as mnt:
            assert_same_tree(releases[1], mnt)
    for d in parsed["deltas"]:
        assert stored(cache, d["content"].hex()).exists(), d["block"]


def test_damaged_kept_content_is_not_served(releases, images, tmp_path):
    """A kept content damaged in the store is refused by its hash: the block is rebuilt
    again from the delta and bases the store holds (nothing fetched), the tree is the
    source's, and the content is kept again, whole."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    mount_pair(releases, www, tmp_path, cache)
    d = parsed["deltas"][0]
    kept = stored(cache, d["content"].hex())
    good = kept.read_bytes()
    treeutil.flip_byte(kept, len(good) // 2)
    with origin_of(www, tmp_path / "nginx") as origin:
        seen = len(origin.uris())
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o",
                         "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[1], mnt)
        assert block_requests(origin, seen) == []
    assert kept.read_bytes() == good


def test_bases_are_offered_first_when_store_files_are_cut(releases, images, tmp_path):
    """Descriptors for few store files (the mount's RLIMIT_NOFILE, which the fetcher
    inherits, less the 64 it keeps for itself): the bases come first, so release 2 still
    fetches its deltas, not their blocks."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2, parsed = publish_pair(images, www)
    h2 = hashes(idx2)
    nbases = len({b for d in parsed["deltas"] for b in d["bases"]})
    assert nbases + 4 < len(parsed["entries"]), "the cut would not cut"
    with origin_of(www, tmp_path / "nginx") as origin:
        o = "cache_dir=%s" % cache
        with mount_image(origin.url(REPO + "/app-1.stp"), None, "-o", o) as mnt:
            assert_same_tree(releases[0], mnt)
        seen = len(origin.uris())
        nofile = "--nofile=%d:%d" % (64 + nbases + 4, 64 + nbases + 4)
        with mount_image(origin.url(REPO + "/app-2.stp"), None, "-o", o,
                         wrapper=("prlimit", nofile)) as mnt:
            assert_same_tree(releases[1], mnt)
        got = block_requests(origin, seen)
    for d in parsed["deltas"]:
        assert d["delta"].hex() in got and h2[d["block"]] not in got, d["block"]
