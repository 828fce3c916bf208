# SPDX-License-Identifier: MIT
"""Published releases over HTTP (issue 31 item 2, the mount's half): two releases of a
real tree from this machine published into one directory (tests/tools/pubindex.py, an
independent writer of the index), served by a real nginx on loopback with the README's
caching lines, mounted through a real Squid with the README's refresh_pattern lines.
nginx's log says what was fetched: release 2 fetches only the blocks release 1 lacked,
each block leaves the origin once, a mount with a warm store fetches no block. A block
damaged on the server is refused by its hash (EIO, a log line naming its URL, never a
wrong byte); a damaged file in the store is fetched again; cache_size= bounds the store
without taking a block a live mount uses."""

import errno
import hashlib
import os
import pathlib
import re
import shutil
import sys
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment, squid_dir  # noqa: F401 (fixtures)
import treeutil
from test_memory import raw_status
from conftest import MOUNT_STIPPLE, PYTHON_LIB, STIPPLE, build_image, mount_image, run, unmount
from imageutil import FAST

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import pubindex  # noqa: E402

REPO = "repo"
SOURCES = ("json", "email", "http", "html", "urllib", "logging", "xml")


def readme_config():
    """The README's nginx locations and Squid refresh_pattern lines, for /repo/."""
    return httputil.readme_caching(REPO)


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """(v1 tree, v2 tree): parts of this machine's Python library; v2 changes a few
    files, adds one and removes one."""
    base = tmp_path_factory.mktemp("releases")
    v1, v2 = base / "v1", base / "v2"
    for name in SOURCES:
        src = os.path.join(PYTHON_LIB, name)
        if not os.path.isdir(src):
            pytest.skip("%s is not on this machine" % src)
        shutil.copytree(src, v1 / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(v1, v2)
    with open(v2 / "xml" / "dom" / "minidom.py", "a") as f:
        f.write("\n# release 2: a patch\n")
    (v2 / "urllib" / "parse.py").write_bytes((v1 / "urllib" / "parse.py").read_bytes()
                                             .replace(b"def ", b"def  ", 3))
    shutil.copy(os.path.join(PYTHON_LIB, "textwrap.py"), v2 / "xml" / "textwrap.py")
    os.unlink(v2 / "xml" / "etree" / "cElementTree.py")
    return v1, v2


@pytest.fixture(scope="module")
def images(releases, tmp_path_factory):
    """The two releases' one-file images, 64 KiB blocks."""
    d = tmp_path_factory.mktemp("images")
    return [build_image(tree, d / ("app-%d.stp" % (i + 1)), *FAST)
            for i, tree in enumerate(releases)]


def publish(images, www, tool="python", *args):
    """Publishes IMAGES into WWW/repo with `stipple publish ARGS` or with this suite's own
    writer (tests/tools/pubindex.py); returns the indexes' paths."""
    out = []
    os.makedirs(www, exist_ok=True)
    for img in images:
        if tool == "python":
            out.append(pubindex.publish(STIPPLE, os.fspath(img), os.fspath(www / REPO)))
            continue
        run([STIPPLE, "publish", "-q", *args, img, www / REPO], check=True)
        out.append(os.fspath(www / REPO / os.path.basename(img)))
    return out


def hashes(index):
    """The block names (hex SHA-256) an index lists, in order."""
    with open(index, "rb") as f:
        return [sha.hex() for _, _, sha in pubindex.parse(f.read())["entries"]]


def block_requests(origin, since=0):
    """The block names nginx served whole (200), from entry SINCE of its log on."""
    out = []
    for method, status, _, uri in origin.uris()[since:]:
        m = re.match(r"/%s/blocks/([0-9a-f]{2})/([0-9a-f]{64})$" % REPO, uri)
        if m:
            assert status == 200 and m.group(2).startswith(m.group(1)), (status, uri)
            out.append(m.group(2))
    return out


def read_all(root):
    """{relative path: bytes or None when the read failed with EIO} of every file."""
    out = {}
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            try:
                with open(path, "rb") as f:
                    out[os.path.relpath(path, root)] = f.read()
            except OSError as e:
                assert e.errno == errno.EIO, "%s: %s" % (path, e)
                out[os.path.relpath(path, root)] = None
    return out


def assert_same_tree(src, mnt):
    diffs = treeutil.compare_trees(src, mnt)
    assert not diffs, "\n".join(diffs[:20])


def store_files(cache):
    """{hex name: bytes} of the store's block files (not its key or ledger)."""
    out = {}
    for d, _, files in os.walk(os.path.join(cache, "blocks")):
        for name in files:
            if d != os.path.join(cache, "blocks"):
                with open(os.path.join(d, name), "rb") as f:
                    out[name] = f.read()
    return out


def fanout(cache, name):
    """The fan-out directory of block NAME in the store below CACHE (mount.stipple(8)):
    the first byte of SHA-256 of the store's key and the block's hash."""
    with open(os.path.join(cache, "blocks", "fanout.key"), "rb") as f:
        key = f.read()
    return "%02x" % hashlib.sha256(key + bytes.fromhex(name)).digest()[0]


def stored(cache, name):
    """The path of block NAME's file in the store below CACHE."""
    return pathlib.Path(cache, "blocks", fanout(cache, name), name)


def origin_of(www, workdir):
    return httputil.published_origin(www, workdir, REPO)


@pytest.mark.parametrize("tool", ["stipple", "python"])
def test_two_releases_through_squid_fetch_each_block_once(releases, images, tmp_path, squid_dir,
                                                          tool):
    """Published by `stipple publish` (its index read back by this suite's parser), and
    by the suite's own writer."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2 = publish(images, www, tool)
    h1, h2 = hashes(idx1), hashes(idx2)
    new = set(h2) - set(h1)
    assert new and set(h2) & set(h1), "the releases share no block, or all of them"
    _, refresh = readme_config()
    with origin_of(www, tmp_path / "nginx") as origin, \
            httputil.squid(squid_dir, refresh=refresh) as proxy:
        opts = "proxy=%s,cache_dir=%s" % (proxy, cache)
        url1, url2 = origin.url(REPO + "/app-1.stp"), origin.url(REPO + "/app-2.stp")
        with mount_image(url1, None, "-o", opts) as mnt:
            assert_same_tree(releases[0], mnt)
        got1 = block_requests(origin)
        assert sorted(got1) == sorted(set(h1)), "release 1 fetched other blocks than its own"
        seen = len(origin.uris())
        with mount_image(url2, None, "-o", opts) as mnt:
            assert_same_tree(releases[1], mnt)
        got2 = block_requests(origin, seen)
        # only what release 1 lacked, each once
        assert sorted(got2) == sorted(new), (len(got2), len(new))
        seen, squid_seen = len(origin.uris()), os.path.getsize(os.path.join(squid_dir, "access.log"))
        with mount_image(url2, None, "-o", opts) as mnt:
            assert_same_tree(releases[1], mnt)
            st = raw_status(mnt)
        assert block_requests(origin, seen) == [], "a warm store fetched blocks"
        # stipple status says so: the store answered, the network gave nothing
        assert st["net_bytes"] == 0 and st["disk_cache"] == 1, st
        assert st["disk_cache_bytes"] >= sum(os.path.getsize(www / REPO / "blocks" / n[:2] / n)
                                             for n in set(h2)) > 0, st
        with open(os.path.join(squid_dir, "access.log")) as f:
            f.seek(squid_seen)
            assert "/blocks/" not in f.read(), "a warm store asked the proxy for blocks"
        # the index is revalidated with the origin (no-cache), through the proxy
        assert any(u == "/%s/app-2.stp" % REPO for _, _, _, u in origin.uris()[seen:])
    files = store_files(cache)
    assert set(files) == set(h1) | set(h2)
    for name, data in files.items():
        assert hashlib.sha256(data).hexdigest() == name
        st = os.stat(stored(cache, name))
        assert st.st_mode & 0o777 == 0o600 and st.st_uid == os.geteuid()


def test_block_damaged_on_the_server_is_refused(releases, images, tmp_path):
    from test_readfail import received, syslog_listener
    www, cache = tmp_path / "www", tmp_path / "cache"
    (idx1,) = publish(images[:1], www)
    names = hashes(idx1)
    bad = names[len(names) // 2]
    path = www / REPO / "blocks" / bad[:2] / bad
    good = path.read_bytes()
    treeutil.flip_byte(path, len(good) // 2)
    with origin_of(www, tmp_path / "nginx") as origin, syslog_listener() as log:
        url = origin.url(REPO + "/app-1.stp")
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = run([MOUNT_STIPPLE, url, mnt, "-o", "cache_dir=%s" % cache])
        assert r.returncode == 0, r.stderr
        try:
            got = read_all(mnt)
        finally:
            unmount(mnt)
        failed = [p for p, data in got.items() if data is None]
        assert failed, "no read failed"
        for p, data in got.items():
            if data is not None:  # never a wrong byte
                assert data == (releases[0] / p).read_bytes(), p
        lines = received(log, url)
        assert any("blocks/%s/%s" % (bad[:2], bad) in ln and "SHA-256" in ln for ln in lines), lines
        # nothing of it was kept: with the server's file repaired, the next mount is whole
        assert store_files(cache).get(bad, b"") != path.read_bytes()
        path.write_bytes(good)
        with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt2:
            assert_same_tree(releases[0], mnt2)


def test_damaged_store_file_is_fetched_again(releases, images, tmp_path):
    www, cache = tmp_path / "www", tmp_path / "cache"
    (idx1,) = publish(images[:1], www)
    names = hashes(idx1)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[0], mnt)
        bad = names[1]
        path = stored(cache, bad)
        treeutil.flip_byte(path, os.path.getsize(path) // 3)
        seen = len(origin.uris())
        with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[0], mnt)
        assert block_requests(origin, seen) == [bad]
        # a file that holds bytes is the fetcher's to read only (another mount may be
        # serving it), but one no mount holds is hashed by the monitor when taken: the
        # damaged one was made anew and stored again (review 4 #6), not fetched past at
        # each mount
        with open(path, "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == bad
        seen = len(origin.uris())
        with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[0], mnt)
        assert block_requests(origin, seen) == []


def store_bytes(cache):
    return sum(len(b) for b in store_files(cache).values())


def test_cache_size_bounds_the_store_but_keeps_live_blocks(releases, images, tmp_path):
    www, cache = tmp_path / "www", tmp_path / "cache"
    idx1, idx2 = publish(images, www)
    h1, h2 = set(hashes(idx1)), set(hashes(idx2))
    with origin_of(www, tmp_path / "nginx") as origin:
        url1, url2 = origin.url(REPO + "/app-1.stp"), origin.url(REPO + "/app-2.stp")
        opts = "cache_dir=%s" % cache
        with mount_image(url1, None, "-o", opts) as m1:
            assert_same_tree(releases[0], m1)
            full = store_files(cache)
            assert set(full) == h1
            # a bound of 1 byte while release 1 is mounted: none of its blocks goes
            with mount_image(url2, None, "-o", opts + ",cache_size=1") as m2:
                assert h1 <= set(store_files(cache))
                assert_same_tree(releases[1], m2)
            assert_same_tree(releases[0], m1)
        # nothing mounted: a bound of half the store keeps it within that
        half = store_bytes(cache) // 2
        with mount_image(url1, None, "--no-prime", "-o", opts + ",cache_size=%d" % half):
            pass
        assert store_bytes(cache) <= max(half, sum(len(full[n]) for n in h1))
        # release 1's blocks were pinned by that mount: release 2's own went
        assert h1 <= set(store_files(cache))
        with mount_image(url2, None, "--no-prime", "-o", opts + ",cache_size=1"):
            pass
        assert set(store_files(cache)) <= h2, "an unused block of release 1 was kept"


def test_signed_release_is_verified_through_its_index(releases, images, tmp_path):
    """A signed image published: the mount with its key verifies it as the one-file form;
    a byte changed in the index's tail (the metadata, which the index's own checksum does
    not cover) is refused by the signature."""
    sec, pub = tmp_path / "k.key", tmp_path / "k.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    image = tmp_path / "app-s.stp"
    shutil.copy(images[0], image)
    run([STIPPLE, "sign", image, sec], check=True)
    www = tmp_path / "www"
    (idx,) = publish([image], www, "stipple", "--key", pub)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-s.stp")
        with mount_image(url, None, "--verify", pub, "-o", "cache_dir=%s" % (tmp_path / "c")) as mnt:
            assert_same_tree(releases[0], mnt)
        with open(idx, "rb") as f:
            parsed = pubindex.parse(f.read())
        # a byte of the metadata, in the tail the index carries verbatim
        tail_at = os.path.getsize(idx) - len(parsed["tail"])
        treeutil.flip_byte(idx, tail_at + 8)
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = run([STIPPLE, "mount", "--verify", pub, "-o", "cache_dir=%s" % (tmp_path / "c"),
                 url, mnt], timeout=120)
        if r.returncode == 0:
            unmount(mnt)
        assert r.returncode != 0, "a changed index mounted under the signature"
        assert "sign" in r.stderr or "damaged" in r.stderr, r.stderr


def test_store_follows_no_link_and_takes_no_foreign_file(releases, images, tmp_path):
    """What another hand left in the store is not trusted: a block's name that is a
    symbolic link to a file elsewhere is replaced, never written through; a fan-out
    directory that is a link is not used (its block is fetched, not stored); a block file
    another user owns is replaced by the mounting user's."""
    www, cache = tmp_path / "www", tmp_path / "cache"
    (idx1,) = publish(images[:1], www)
    names = hashes(idx1)
    victim = tmp_path / "victim"
    victim.write_bytes(b"not yours\n")
    os.makedirs(cache / "blocks", mode=0o700)
    os.chmod(cache, 0o700)
    key = cache / "blocks" / "fanout.key"  # the store's, made here to place the files
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    a = names[0]
    b = next(n for n in names if fanout(cache, n) != fanout(cache, a))
    c = next(n for n in reversed(names) if fanout(cache, n) != fanout(cache, b) and n != a)
    for n in (a, c):
        os.makedirs(cache / "blocks" / fanout(cache, n), mode=0o700, exist_ok=True)
    os.symlink(victim, stored(cache, a))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, cache / "blocks" / fanout(cache, b))
    foreign = stored(cache, c)
    foreign.write_bytes(b"x")
    os.chown(foreign, 65534, 65534)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app-1.stp")
        with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
            assert_same_tree(releases[0], mnt)
    assert victim.read_bytes() == b"not yours\n"
    assert os.listdir(elsewhere) == []
    for n in (a, c):
        st = os.lstat(stored(cache, n))
        assert not os.path.islink(stored(cache, n))
        assert st.st_uid == os.geteuid() and st.st_mode & 0o777 == 0o600
        with open(stored(cache, n), "rb") as f:
            assert hashlib.sha256(f.read()).hexdigest() == n


def test_blocks_larger_than_a_frame(tmp_path):
    """Blocks of 16 MiB, each sent to the daemon in several frames of 8 MiB: whole
    content, each fetched once, and the status counts every byte fetched, then every byte
    the store gave."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "noise").write_bytes(os.urandom(20 << 20))
    shutil.copytree(os.path.join(PYTHON_LIB, "json"), tree / "json")
    image = build_image(tree, tmp_path / "big.stp", "--level", "1", "--block-size", "16M")
    www, cache = tmp_path / "www", tmp_path / "cache"
    (idx,) = publish([image], www, "stipple")
    names = hashes(idx)
    assert len(names) >= 2
    total = sum(os.path.getsize(www / REPO / "blocks" / n[:2] / n) for n in names)
    with origin_of(www, tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/big.stp")
        for warm in (False, True):
            with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
                assert_same_tree(tree, mnt)
                st = raw_status(mnt)
            if warm:
                assert st["net_bytes"] == 0 and st["disk_cache_bytes"] >= total, st
            else:
                assert st["net_bytes"] >= total and st["net_requests"] == len(names), st
        assert sorted(block_requests(origin)) == sorted(names)


def test_a_users_mount_has_the_users_own_store(releases, images, tmp_path):
    """Root's mounts share root's store, a user's that user's: nobody's mount of the
    release root has in its store fetches every block into a store under its
    $XDG_CACHE_HOME, owned by nobody, and leaves root's alone."""
    from test_http import NOBODY as nobody, as_nobody, fuse_open_to_users
    www, rootcache = tmp_path / "www", tmp_path / "rootcache"
    (idx1,) = publish(images[:1], www)
    names = set(hashes(idx1))
    with as_nobody() as (as_user, env, mnt, home):
        with origin_of(www, tmp_path / "nginx") as origin:
            url = origin.url(REPO + "/app-1.stp")
            with mount_image(url, None, "-o", "cache_dir=%s" % rootcache) as m:
                assert_same_tree(releases[0], m)
            before = store_files(rootcache)
            assert set(before) == names
            seen = len(origin.uris())
            with fuse_open_to_users():
                r = run(as_user + [STIPPLE, "mount", url, mnt], env=env, timeout=60)
            assert r.returncode == 0, r.stderr
            # every file's bytes, in name order (root may not enter the user's mount)
            walk = "cd %s && find . -type f | LC_ALL=C sort | xargs cat | sha256sum"
            r = run(as_user + ["sh", "-c", walk % mnt], env=env)
            want = run(["sh", "-c", walk % releases[0]])
            assert r.returncode == 0 and r.stdout == want.stdout, r.stderr
            assert run(as_user + ["fusermount3", "-u", mnt], env=env).returncode == 0
            assert sorted(block_requests(origin, seen)) == sorted(names)
        store = os.path.join(home, "xdg", "stipple")
        assert set(store_files(store)) == names
        for d, dirs, files in os.walk(os.path.join(store, "blocks")):
            st = os.stat(d)
            assert st.st_uid == nobody and st.st_mode & 0o777 == 0o700, d
            for n in files:
                st = os.stat(os.path.join(d, n))
                assert st.st_uid == nobody and st.st_mode & 0o777 == 0o600, n
        assert store_files(rootcache) == before


def test_slow_block_is_waited_for(tmp_path):
    """A block arrives whole before a byte of it is handed on: over a slow link it takes
    longer than the daemon's receive bound (3 x timeout= + 30 s, 33 s here), and the
    fetcher's keepalive frames keep the read alive until it is there and checked."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "noise").write_bytes(os.urandom(2 << 20))
    image = build_image(tree, tmp_path / "slow.stp", "--level", "1", "--block-size", "4M")
    www = tmp_path / "www"
    publish([image], www, "stipple")
    nginx_conf, _ = readme_config()
    slow = nginx_conf.replace('immutable";', 'immutable";\n    limit_rate 56k;')
    assert "limit_rate" in slow
    with httputil.nginx(www, tmp_path / "nginx", server=slow) as origin:
        url = origin.url(REPO + "/slow.stp")
        start = time.monotonic()
        with mount_image(url, None, "--no-prime", "-o", "timeout=1,cache_size=0") as mnt:
            with open(os.path.join(mnt, "noise"), "rb") as f:
                data = f.read()
        took = time.monotonic() - start
    assert data == (tree / "noise").read_bytes()
    assert took > 34, "the block came faster than the bound: the test proves nothing (%.1f s)" % took


def test_missing_block_is_eio_naming_it(releases, images, tmp_path):
    """A block file the server lacks (404): EIO for the reads that need it, the log line
    names the block's URL and the status, every other file reads whole."""
    from test_readfail import received, syslog_listener
    www = tmp_path / "www"
    (idx1,) = publish(images[:1], www)
    names = hashes(idx1)
    gone = names[-1]
    os.unlink(www / REPO / "blocks" / gone[:2] / gone)
    with origin_of(www, tmp_path / "nginx") as origin, syslog_listener() as log:
        url = origin.url(REPO + "/app-1.stp")
        with mount_image(url, None, "-o", "cache_size=0") as mnt:
            got = read_all(mnt)
        assert any(data is None for data in got.values())
        for p, data in got.items():
            if data is not None:
                assert data == (releases[0] / p).read_bytes(), p
        lines = received(log, url)
        assert any("blocks/%s/%s" % (gone[:2], gone) in ln and "404" in ln for ln in lines), lines
