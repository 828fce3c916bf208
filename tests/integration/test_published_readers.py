# SPDX-License-Identifier: MIT
"""The readers (stipple ls, cat, extract, check) given the URL of a published index
read the image it stands for, as they read a one-file image at a URL: the same tree as
the source, blocks fetched from nginx and checked against their SHA-256. A block
damaged on the server fails the reader with a message naming its URL, and no wrong
byte is written."""

import hashlib
import os
import re
import shutil
import subprocess

import treeutil
from conftest import STIPPLE, run
from test_published import (REPO, assert_same_tree, hashes, images, origin_of,  # noqa: F401
                            publish, releases)


def gnu_ls_R(tree):
    gnu = subprocess.run(["ls", "-R", "."], cwd=tree, capture_output=True, text=True,
                         check=True, env=dict(os.environ, LC_ALL="C")).stdout
    return re.sub(r"^\.(/|:)", lambda m: "/" if m.group(1) == "/" else "/:", gnu, flags=re.M)


def source_files(tree):
    for d, _, files in os.walk(tree):
        for name in sorted(files):
            yield os.path.relpath(os.path.join(d, name), tree)


def test_readers_read_a_published_url(releases, images, tmp_path):
    www = tmp_path / "www"
    publish(images[:1], www)
    tree = releases[0]
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        r = run([STIPPLE, "ls", "-R", url], check=True)
        assert r.stdout == gnu_ls_R(tree)
        for rel in list(source_files(tree))[::7]:
            got = subprocess.run([STIPPLE, "cat", url, "/" + rel], stdin=subprocess.DEVNULL,
                                 capture_output=True, check=True).stdout
            assert got == (tree / rel).read_bytes(), rel
        run([STIPPLE, "extract", "-q", url, tmp_path / "out"], check=True)
        assert_same_tree(tree, tmp_path / "out")
        run([STIPPLE, "check", "-q", url], check=True)
        # the index's own bytes are not an image: only the readers' index support reads it
        assert any("/%s/blocks/" % REPO in u for _, _, _, u in origin.uris())


def test_reader_refuses_a_damaged_block_naming_its_url(releases, images, tmp_path):
    www = tmp_path / "www"
    (idx,) = publish(images[:1], www)
    names = hashes(idx)
    bad = names[len(names) // 2]
    path = www / REPO / "blocks" / bad[:2] / bad
    treeutil.flip_byte(path, os.path.getsize(path) // 2)
    assert hashlib.sha256(path.read_bytes()).hexdigest() != bad
    tree = releases[0]
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        block_url = origin.url("%s/blocks/%s/%s" % (REPO, bad[:2], bad))
        r = run([STIPPLE, "check", "-q", url])
        assert r.returncode != 0
        assert block_url in r.stderr and "SHA-256" in r.stderr, r.stderr
        out = tmp_path / "out"
        r = run([STIPPLE, "extract", "-q", url, out])
        assert r.returncode != 0
        assert block_url in r.stderr, r.stderr
        failed = 0
        for rel in source_files(tree):  # never a wrong byte: a file is whole, or short
            if not os.path.isfile(out / rel):
                failed += 1
                continue
            got, want = (out / rel).read_bytes(), (tree / rel).read_bytes()
            failed += got != want
            assert want.startswith(got), rel
        assert failed, "no file was refused"


def test_verify_of_a_signed_published_url(releases, images, tmp_path):
    """stipple verify of a signed release's index: the signature covers it as the
    one-file image; another key is refused."""
    sec, pub, other = tmp_path / "k.key", tmp_path / "k.pub", tmp_path / "o.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    run([STIPPLE, "keygen", tmp_path / "o.key", other], check=True)
    image = tmp_path / "app-s.stp"
    shutil.copy(images[0], image)
    run([STIPPLE, "sign", image, sec], check=True)
    www = tmp_path / "www"
    publish([image], www, "stipple", "--key", pub)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-s.stp")
        run([STIPPLE, "verify", url, pub], check=True)
        r = run([STIPPLE, "verify", url, other])
        assert r.returncode != 0 and r.stderr, r
