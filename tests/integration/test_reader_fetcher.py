# SPDX-License-Identifier: MIT
"""The readers read a URL through stipple-fetcher, the one program that links libcurl
(issue 30: programs link what they use): `stipple` itself has no libcurl among the
libraries the loader maps for it (ldd), a published block
tampered with on a real nginx is still refused by its SHA-256 (the reader fails naming
the block's URL and never writes a wrong byte), a user's reader works (the fetcher
confines itself in a user namespace), and a `stipple` that cannot find the fetcher says
so instead of reading anything."""

import os
import shutil
import subprocess

import pytest

import treeutil
from conftest import MOUNT_STIPPLE, STIPPLE, linked
from test_http import NOBODY
from test_published import REPO, hashes, images, origin_of, publish, releases  # noqa: F401
from test_published_readers import source_files

PROGRAMS = os.path.dirname(STIPPLE)


def test_only_the_fetcher_links_libcurl():
    needed = {name: linked(os.path.join(PROGRAMS, name))
              for name in ("stipple", "stipple-readers", "stipple-fetcher", "stipple-mountd")}
    needed["mount.stipple"] = linked(MOUNT_STIPPLE)
    # ldd read each program: libc everywhere, libcurl in the fetcher
    assert all("libc.so.6" in n for n in needed.values()), needed
    assert any(n.startswith("libcurl") for n in needed["stipple-fetcher"]), needed
    for name in ("stipple", "stipple-readers", "stipple-mountd", "mount.stipple"):
        assert not [n for n in needed[name] if n.startswith("libcurl")], (name, needed[name])


def tamper(www, index):
    """Flips a byte in the middle of the middle block's file; returns its name."""
    names = hashes(index)
    bad = names[len(names) // 2]
    path = www / REPO / "blocks" / bad[:2] / bad
    treeutil.flip_byte(path, os.path.getsize(path) // 2)
    return bad


def test_url_read_through_the_fetcher_checks_each_block(releases, images, tmp_path):
    """stipple cat of every file of a published release whose middle block was damaged
    on the server: the files of other blocks come out whole, the ones that need the bad
    block fail (status 1, the block's URL and SHA-256 named) with at most a correct
    prefix written."""
    www = tmp_path / "www"
    (idx,) = publish(images[:1], www)
    bad = tamper(www, idx)
    tree = releases[0]
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        block_url = origin.url("%s/blocks/%s/%s" % (REPO, bad[:2], bad))
        whole = refused = 0
        for rel in source_files(tree):
            r = subprocess.run([STIPPLE, "cat", url, "/" + rel], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=60)
            want = (tree / rel).read_bytes()
            if r.returncode == 0:
                assert r.stdout == want, rel
                whole += 1
                continue
            assert r.returncode == 1, (rel, r.returncode, r.stderr)
            assert want.startswith(r.stdout), rel  # never a wrong byte
            err = r.stderr.decode()
            assert block_url in err and "SHA-256" in err, err
            refused += 1
        assert whole and refused, (whole, refused)
        served = [u for _, _, _, u in origin.uris() if u.endswith("/" + bad)]
        assert served, "the damaged block never left nginx: no read needed it"


def parents(path):
    out = []
    while path != os.path.dirname(path):
        path = os.path.dirname(path)
        out.append(path)
    return out


def test_a_users_reader_of_a_url(releases, images, tmp_path):
    """As nobody: the fetcher enters a user namespace instead of changing its uid."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv")
    for d in [PROGRAMS] + parents(PROGRAMS):
        if not os.stat(d).st_mode & 0o001:
            pytest.skip("nobody cannot run %s (%s)" % (STIPPLE, d))
    www = tmp_path / "www"
    publish(images[:1], www)
    as_user = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    rel = next(iter(source_files(releases[0])))
    with origin_of(www, tmp_path / "nginx") as origin:
        r = subprocess.run(as_user + [STIPPLE, "cat", origin.url(REPO + "/app-1.stp"),
                                      "/" + rel], capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL, env={"PATH": os.environ["PATH"]})
    assert r.returncode == 0, r.stderr
    assert r.stdout == (releases[0] / rel).read_bytes()


def test_without_the_fetcher_a_url_is_not_read(releases, images, tmp_path):
    """Readers outside the build tree look for stipple-fetcher where it is installed
    only: where it is not, the reader says it cannot start it, naming the URL."""
    copy = tmp_path / "stipple-readers"
    shutil.copy(os.path.join(PROGRAMS, "stipple-readers"), copy)
    www = tmp_path / "www"
    publish(images[:1], www)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        if any(os.path.exists(os.path.join(d, "libexec/stipple/stipple-fetcher"))
               for d in ("/usr", "/usr/local")):
            pytest.skip("a stipple-fetcher is installed on this machine")
        r = subprocess.run([copy, "ls", url], capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and "cannot start stipple-fetcher" in r.stderr, r.stderr
        assert url in r.stderr and not r.stdout, r


def test_a_fetcher_gone_is_a_read_error_not_a_sigpipe(releases, images, tmp_path):
    """The reader's fetcher killed while `stipple cat` is writing a large file: the next
    read fails naming the URL (status 1), the reader is not killed by SIGPIPE, and what it
    wrote is a prefix of the file."""
    tree = tmp_path / "tree"
    tree.mkdir()
    data = os.urandom(24 << 20)
    (tree / "big").write_bytes(data)
    image = tmp_path / "big.stp"
    subprocess.run([os.path.join(PROGRAMS, "..", "builder", "mkstipple"), "-q", "--level",
                    "1", "--block-size", "1M", tree, image], check=True)
    www = tmp_path / "www"
    www.mkdir()
    shutil.copy(image, www / "big.stp")
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url("big.stp")
        p = subprocess.Popen([STIPPLE, "cat", url, "big"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            first = p.stdout.read(1)  # cat has read a block and waits on the pipe
            with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
                (fetcher,) = [int(c) for c in f.read().split()]
            with open("/proc/%d/comm" % fetcher) as f:
                assert f.read().strip() == "stipple-fetcher"
            os.kill(fetcher, 9)
            rest = p.stdout.read()
            err = p.stderr.read().decode()
        finally:
            p.kill()
            p.wait()
    out = first + rest
    assert p.returncode == 1, (p.returncode, err)
    assert len(out) < len(data) and data.startswith(out)
    assert url in err and "fetcher" in err, err
