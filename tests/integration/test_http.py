# SPDX-License-Identifier: MIT
"""Images served over HTTP by a real nginx on loopback: the readers, `stipple mount URL`,
mount.stipple from fstab with _netdev, the disk cache (a second mount fetches nothing but
the probe; a damaged cached block is fetched again, never used), an image replaced at the
URL, TLS with ca= and HTTP/2, and a URL that cannot be reached (exit 32)."""

import concurrent.futures
import contextlib
import errno
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
import treeutil
from conftest import (MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, mount_image, mount_status,
                      read_file, run, unmount)
import mounts


@pytest.fixture
def www(tmp_path, gen_image):
    root = tmp_path / "www"
    root.mkdir()
    shutil.copy(gen_image, root / "gen.stp")
    return root


@pytest.fixture
def origin(www, tmp_path):
    with httputil.nginx(www, tmp_path / "nginx") as n:
        yield n


def fetched(n):
    return n.bytes_sent()


def cache_files(cache):
    """The images' files in a cache directory (beside them: its secret)."""
    return [n for n in os.listdir(cache) if n.endswith(".cache")]


def test_readers_take_a_url(origin, gen_tree, tmp_path):
    url = origin.url("gen.stp")
    r = run([STIPPLE, "info", url], check=True)
    assert url in r.stdout
    r = run([STIPPLE, "ls", url, "/a/b"], check=True)
    assert "mid.txt" in r.stdout
    r = subprocess.run([STIPPLE, "cat", url, "files/large"], capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr
    assert r.stdout == read_file(gen_tree / "files" / "large")
    run([STIPPLE, "extract", url, tmp_path / "out"], check=True)
    diffs = treeutil.compare_trees(gen_tree, tmp_path / "out")
    assert not diffs, "\n".join(diffs[:20])
    r = run([STIPPLE, "check", url], check=True)
    assert "OK" in r.stdout
    r = run([STIPPLE, "bench", "--reads", "200", "--json", url], check=True)
    report = json.loads(r.stdout)
    assert report["image"] == url and report["reads"] == 200, report
    # every answer nginx gave was a range: no request read the whole file
    assert all(e[1] == 206 and e[3].startswith("bytes=") for e in origin.log_entries())


def test_reader_of_missing_url_names_it(origin):
    url = origin.url("absent.stp")
    r = run([STIPPLE, "info", url])
    assert r.returncode != 0
    assert url in r.stderr and "404" in r.stderr, r.stderr


def test_mount_url_then_from_disk_cache(origin, gen_tree, gen_image, tmp_path):
    url, cache = origin.url("gen.stp"), tmp_path / "cache"
    size = os.path.getsize(gen_image)
    with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
        diffs = treeutil.compare_trees(gen_tree, mnt)
        assert not diffs, "\n".join(diffs[:20])
        assert mounts.at(mnt).source == url
    first = fetched(origin)
    assert size <= first <= size * 1.05 + 4096, (first, size)
    files = cache_files(cache)
    assert len(files) == 1 and files[0].endswith(".cache"), files
    with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
        diffs = treeutil.compare_trees(gen_tree, mnt)
        assert not diffs, "\n".join(diffs[:20])
    again = fetched(origin) - first
    assert again <= 4096, "the second mount fetched %d bytes with a full disk cache" % again


def test_damaged_cache_is_fetched_again(origin, gen_tree, gen_image, tmp_path):
    url, cache = origin.url("gen.stp"), tmp_path / "cache"
    with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
        assert not treeutil.compare_trees(gen_tree, mnt)
    (name,) = cache_files(cache)
    size = os.path.getsize(gen_image)
    # a torn write: garbage over a stretch of blocks, in the middle of the data
    with open(cache / name, "r+b") as f:
        f.seek(size // 3)
        f.write(os.urandom(64 << 10))
    before = fetched(origin)
    with mount_image(url, None, "-o", "cache_dir=%s" % cache) as mnt:
        diffs = treeutil.compare_trees(gen_tree, mnt)
        assert not diffs, "\n".join(diffs[:20])
    assert fetched(origin) - before > (32 << 10), "the damaged blocks were not fetched again"


def test_image_replaced_at_url(origin, www, gen_tree, tmp_path):
    url = origin.url("gen.stp")
    other = tmp_path / "other-tree"
    (other / "a" / "b").mkdir(parents=True)
    (other / "a" / "b" / "mid.txt").write_bytes(b"another image\n")
    (other / "big").write_bytes(os.urandom(1 << 20))
    with mount_image(url, None, "-o", "cache_dir=%s,timeout=3" % (tmp_path / "cache")) as mnt:
        assert read_file(os.path.join(mnt, "a", "b", "mid.txt")) == b"in the middle\n"
        new = build_image(other, tmp_path / "new.stp", "--level", "3")
        os.replace(new, www / "gen.stp")
        t0 = time.monotonic()
        with pytest.raises(OSError) as e:
            read_file(os.path.join(mnt, "files", "large"))
        assert e.value.errno == errno.EIO
        assert time.monotonic() - t0 < 30
        # a new mount of the URL is another image, with nothing of the old one's cache
        with mount_image(url, None, "-o", "cache_dir=%s" % (tmp_path / "cache")) as mnt2:
            assert read_file(os.path.join(mnt2, "a", "b", "mid.txt")) == b"another image\n"
            assert read_file(os.path.join(mnt2, "big")) == read_file(other / "big")
    assert len(cache_files(tmp_path / "cache")) == 2


def test_unreachable_url_exits_32(tmp_path):
    url = "http://127.0.0.1:%d/app.stp" % httputil.free_port()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    t0 = time.monotonic()
    r = run([MOUNT_STIPPLE, url, mnt, "-o", "timeout=2,cache_dir=%s" % (tmp_path / "c")],
            timeout=60)
    assert r.returncode == 32, r.stderr
    assert url in r.stderr and "connect" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 20
    assert not is_mounted(mnt)


def test_missing_url_exits_32(origin, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, origin.url("nope.stp"), mnt, "-o", "cache_size=0"], timeout=60)
    assert r.returncode == 32 and "404" in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_https_with_ca_and_http2(www, gen_tree, tmp_path):
    cert, key = httputil.self_signed(tmp_path)
    with httputil.nginx(www, tmp_path / "nginx-tls", tls=(cert, key)) as n:
        url = n.url("gen.stp")
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        # not in the system's store: refused
        r = run([MOUNT_STIPPLE, url, mnt, "-o", "timeout=3,cache_size=0"], timeout=60)
        assert r.returncode == 32 and url in r.stderr and "TLS" in r.stderr, r.stderr
        assert not is_mounted(mnt)
        with mount_image(url, mnt, "-o", "ca=%s,cache_size=0" % cert):
            assert read_file(mnt / "files" / "large") == read_file(gen_tree / "files" / "large")
        protocols = {e[4] for e in n.log_entries() if e[1] == 206}
        assert protocols == {"HTTP/2.0"}, protocols


@pytest.fixture
def helper_in_sbin():
    """mount(8) runs helpers from /sbin only: mount.stipple there for the test, and what
    was there before put back."""
    names = ["/sbin/mount.stipple", "/sbin/mount.fuse.stipple"]
    saved = {}
    for n in names:
        if os.path.lexists(n):
            saved[n] = n + ".saved-by-http-test"
            os.rename(n, saved[n])
    try:
        # a link, not a copy: the helper finds stipple-mountd beside it only when it
        # runs from the build tree (progpath.h)
        os.symlink(MOUNT_STIPPLE, names[0])
        os.symlink("mount.stipple", names[1])
        yield
    finally:
        for n in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(n)
            if n in saved:
                os.rename(saved[n], n)


def test_fstab_netdev(helper_in_sbin, origin, gen_tree, tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fstab = tmp_path / "fstab"
    fstab.write_text("%s %s fuse.stipple ro,_netdev,nofail,timeout=5,cache_dir=%s 0 0\n"
                     % (origin.url("gen.stp"), mnt, tmp_path / "cache"))
    try:
        r = run(["mount", "-T", fstab, mnt], timeout=60)
        assert r.returncode == 0, r.stderr
        deadline = time.monotonic() + 10
        while not is_mounted(mnt):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert read_file(mnt / "a" / "b" / "mid.txt") == b"in the middle\n"
        assert read_file(mnt / "files" / "large") == read_file(gen_tree / "files" / "large")
        assert run(["umount", mnt]).returncode == 0
    finally:
        unmount(mnt)


@contextlib.contextmanager
def fuse_open_to_users():
    mode = os.stat("/dev/fuse").st_mode & 0o7777
    os.chmod("/dev/fuse", 0o666)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", mode)


NOBODY = 65534


@contextlib.contextmanager
def as_nobody():
    """(command prefix, environment, mount point, home) for mounting as nobody: a mount
    point and a home of nobody's, $XDG_CACHE_HOME under it; all removed afterwards."""
    if not shutil.which("setpriv") or not shutil.which("fusermount3"):
        pytest.skip("needs setpriv and fusermount3")
    base = tempfile.mkdtemp(prefix="stipple-http-user-")
    os.chmod(base, 0o755)
    mnt, home = os.path.join(base, "mnt"), os.path.join(base, "home")
    for d in (mnt, home):
        os.mkdir(d)
        os.chown(d, NOBODY, NOBODY)
    as_user = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
           "XDG_CACHE_HOME": os.path.join(home, "xdg")}
    try:
        yield as_user, env, mnt, home
    finally:
        unmount(mnt)
        shutil.rmtree(base, ignore_errors=True)


def test_user_mounts_a_url(origin, gen_tree):
    """A user's `stipple mount URL`: the fetcher and the daemon confine themselves in a
    user namespace, the disk cache goes under $XDG_CACHE_HOME, owned by the user."""
    nobody = NOBODY
    with as_nobody() as (as_user, env, mnt, home):
        with fuse_open_to_users():
            r = run(as_user + [STIPPLE, "mount", origin.url("gen.stp"), mnt], env=env,
                    timeout=60)
        assert r.returncode == 0, r.stderr
        r = subprocess.run(as_user + ["cat", os.path.join(mnt, "files", "large")], env=env,
                           capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        assert r.returncode == 0, r.stderr
        assert r.stdout == read_file(gen_tree / "files" / "large")
        (name,) = cache_files(os.path.join(home, "xdg", "stipple"))
        st = os.stat(os.path.join(home, "xdg", "stipple", name))
        assert st.st_uid == nobody and st.st_mode & 0o777 == 0o600
        assert run(as_user + ["fusermount3", "-u", mnt], env=env).returncode == 0


def allocated(path):
    return os.stat(path).st_blocks * 512


def test_cache_size_bounds_the_cache(origin, www, gen_tree, gen_image, tmp_path):
    """cache_size=: a mount keeps its own file within the bound (least recently used
    ranges punched out), and a later mount removes other images' files beyond it, and
    only the cache's own files."""
    cache = tmp_path / "cache"
    size = os.path.getsize(gen_image)
    bound = size // 4
    with mount_image(origin.url("gen.stp"), None, "-o",
                     "cache_dir=%s,cache_size=%d" % (cache, bound)) as mnt:
        diffs = treeutil.compare_trees(gen_tree, mnt)
        assert not diffs, "\n".join(diffs[:20])
        (name,) = cache_files(cache)
        # a range is punched out once the file is over the bound: at most one block over
        assert allocated(cache / name) <= bound + (128 << 10), (allocated(cache / name), bound)
    other = tmp_path / "small"
    other.mkdir()
    (other / "x").write_bytes(b"small image\n")
    build_image(other, www / "small.stp", "--level", "3")
    # a file of the user's own in the directory, older and larger: not the cache's to evict
    theirs = cache / "ld.so.cache"
    theirs.write_bytes(os.urandom(64 << 10))
    os.utime(theirs, (1, 1))
    with mount_image(origin.url("small.stp"), None, "-o",
                     "cache_dir=%s,cache_size=4096" % cache) as mnt:
        assert read_file(os.path.join(mnt, "x")) == b"small image\n"
        # the other image's file was over the bound and in no mount's use: removed
        assert name not in cache_files(cache)
        assert theirs.exists(), "eviction removed a file the cache did not make"


@pytest.mark.parametrize("kind", ["empty", "text", "random"])
def test_not_an_image_at_url(origin, www, tmp_path, kind):
    content = {"empty": b"", "text": b"not an image\n", "random": os.urandom(300 << 10)}[kind]
    (www / "junk.stp").write_bytes(content)
    url = origin.url("junk.stp")
    r = run([STIPPLE, "info", url])
    assert r.returncode == 1 and url in r.stderr, r.stderr
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, url, mnt, "-o", "timeout=3,cache_size=0"], timeout=60)
    assert r.returncode == 32 and url in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_mounts_share_a_cache(origin, www, gen_tree, gen_image, tmp_path):
    """Two mounts of one image share its cache file, reading at once; a file in use is
    never removed to make room, and is once no mount holds it."""
    url, cache = origin.url("gen.stp"), tmp_path / "cache"
    opts = "cache_dir=%s" % cache
    with mount_image(url, None, "-o", opts) as a, mount_image(url, None, "-o", opts) as b:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda m: treeutil.compare_trees(gen_tree, m), [a, b]))
        assert results == [[], []], results
        (name,) = cache_files(cache)
        assert fetched(origin) <= 2 * os.path.getsize(gen_image) + 8192
        other = tmp_path / "small"
        other.mkdir()
        (other / "x").write_bytes(b"small image\n")
        build_image(other, www / "small.stp", "--level", "3")
        with mount_image(origin.url("small.stp"), None, "-o", opts + ",cache_size=4096") as c:
            assert read_file(os.path.join(c, "x")) == b"small image\n"
        assert name in cache_files(cache), "a cache file in use was removed"
    with mount_image(origin.url("small.stp"), None, "-o", opts + ",cache_size=4096"):
        assert name not in cache_files(cache)


def test_verified_mount_of_a_url(origin, www, gen_tree, gen_image, tmp_path):
    """verify= over HTTP: a signed image mounts, and is checked against its signature
    before its metadata is parsed, as a local one; an unsigned one is refused."""
    sec, pub = tmp_path / "key.sec", tmp_path / "key.pub"
    run([STIPPLE, "keygen", sec, pub], check=True)
    shutil.copy(gen_image, www / "signed.stp")
    run([STIPPLE, "sign", www / "signed.stp", sec], check=True)
    with mount_image(origin.url("signed.stp"), None, "--verify", pub, "-o",
                     "cache_dir=%s" % (tmp_path / "cache")) as mnt:
        assert read_file(os.path.join(mnt, "files", "large")) == \
            read_file(gen_tree / "files" / "large")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, origin.url("gen.stp"), mnt, "-o", "verify=%s,cache_size=0" % pub],
            timeout=60)
    assert r.returncode == 32 and "not signed" in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_status_counts_the_network_and_the_disk_cache(origin, gen_tree, tmp_path):
    url, cache = origin.url("gen.stp"), tmp_path / "cache"
    large = read_file(gen_tree / "files" / "large")
    with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s" % cache) as mnt:
        assert read_file(os.path.join(mnt, "files", "large")) == large
        st = mount_status(mnt)
        human = run([STIPPLE, "status", mnt], check=True).stdout
    served = origin.log_entries()
    requests, got = int(st["net_requests"]), int(st["net_bytes"])
    # the daemon's requests and bytes are the origin's, less the mount's probe and
    # superblock (the fetcher's and the monitor's reads)
    assert 0 < requests <= len(served), (st, len(served))
    assert len(large) // 2 < got <= sum(e[2] for e in served), (st, served)
    assert st["net_retries"] == "0" and st["net_failures"] == "0", st
    assert st["disk_cache"] == "1", st
    assert "network:   %d requests (0 retries)" % requests in human, human
    assert "reads failed: 0\n" in human, human
    assert "disk cache: " in human, human
    with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s" % cache) as mnt:
        assert read_file(os.path.join(mnt, "files", "large")) == large
        st = mount_status(mnt)
        human = run([STIPPLE, "status", mnt], check=True).stdout
    hits, from_disk = int(st["disk_cache_hits"]), int(st["disk_cache_bytes"])
    assert hits > 0 and from_disk >= len(large) // 2, st
    assert int(st["net_bytes"]) <= 4096, st
    assert "disk cache: %d hits" % hits in human, human


def test_status_of_a_local_mount_has_no_network(gen_image):
    with mount_image(gen_image, None, "--no-prime") as mnt:
        st = mount_status(mnt)
        human = run([STIPPLE, "status", mnt], check=True).stdout
    assert "image" in st and not any(k.startswith(("net_", "disk_cache")) for k in st), st
    assert "network:" not in human, human


def processes_of(exe, arg):
    """The pids running EXE with ARG among their arguments."""
    out = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink("/proc/%s/exe" % d) != os.path.realpath(exe):
                continue
            with open("/proc/%s/cmdline" % d, "rb") as f:
                if os.fsencode(arg) in f.read().split(b"\0"):
                    out.append(d)
        except OSError:
            continue
    return out


def test_fetcher_gets_proxy_variables_and_no_blocked_signal(origin, monkeypatch):
    """The fetcher is given only the variables libcurl takes a proxy from, not the rest
    of root's environment, and none of the signals the monitor blocks stays blocked."""
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("STIPPLE_TEST_NOT_FOR_THE_FETCHER", "secret")
    url = origin.url("gen.stp")
    fetcher = os.path.join(os.path.dirname(MOUNT_STIPPLE), "stipple-fetcher")
    with mount_image(url, None, "--no-prime"):
        pids = processes_of(fetcher, url)
        assert len(pids) == 1, pids
        with open("/proc/%s/environ" % pids[0], "rb") as f:
            assert f.read() == b"no_proxy=127.0.0.1,localhost\0"
        with open("/proc/%s/status" % pids[0]) as f:
            blocked = [line.split()[1] for line in f if line.startswith("SigBlk:")]
        assert blocked == ["0000000000000000"], blocked
