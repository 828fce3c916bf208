# SPDX-License-Identifier: MIT
"""What a published release's server, proxy or index may not do to a mount (review 2):
hang a read without end, make the monitor fill the store with files, send the netrc
credentials to another host, take the disk past cache_size=. Real nginx on loopback, real
mounts; each test failed on the code before its fix."""

import json
import os
import shutil
import subprocess
import time

import pytest

import httputil
from httputil import _no_proxy_from_the_environment, squid_dir  # noqa: F401 (fixtures)
from conftest import PYTHON_LIB, STIPPLE, build_image, mount_image
from imageutil import FAST
from test_published import REPO, publish, readme_config, stored


def small_release(tmp_path, size=48 << 10, block="64K"):
    """A tree of one incompressible file of SIZE bytes and a small one, published with
    `stipple publish` into tmp_path/www: (tree, index)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "noise").write_bytes(os.urandom(size))
    (tree / "small.txt").write_bytes(b"small\n")
    image = build_image(tree, tmp_path / "app.stp", "--level", "1", "--block-size", block)
    (idx,) = publish([image], tmp_path / "www", "stipple")
    return tree, idx


def timed_cat(path, timeout):
    """`cat PATH` in a process of its own: (exit status or None when still blocked after
    TIMEOUT seconds, stderr, seconds taken)."""
    start = time.monotonic()
    p = subprocess.Popen(["cat", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=timeout)
        return p.returncode, err.decode(), time.monotonic() - start
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, "", time.monotonic() - start


def test_trickled_block_fails_within_its_deadline(tmp_path):
    """A server sends the blocks at 16 bytes a second: above libcurl's low-speed floor of
    1 byte a second, and the fetcher's keepalive frames kept the daemon's receive timeout
    from firing, so the read hung for the hour the block takes. A whole block may take
    timeout= plus its length at 16 KiB/s (5 s here): the read fails with EIO."""
    small_release(tmp_path)
    with httputil.trickle_server(tmp_path / "www") as base:
        with mount_image(base + REPO + "/app.stp", None, "--no-prime", "--warm-workers", "0",
                         "-o", "timeout=2,cache_size=0") as mnt:
            rc, err, took = timed_cat(os.path.join(mnt, "noise"), 90)
    assert rc is not None, "the read was still blocked after %.0f s" % took
    assert rc != 0 and "Input/output error" in err, (rc, err)
    assert took < 40, "the read failed only after %.1f s" % took


def store_names(cache):
    """The names of the block files below CACHE/blocks (not the store's key or ledger)."""
    return [n for d, _, files in os.walk(cache / "blocks") for n in files
            if d != str(cache / "blocks")]


def test_mount_refused_by_its_budget_makes_no_store_file(tmp_path):
    """The monitor made (and the fetcher pinned) a store file for every block the index
    claims before it had read the superblock: a mount the budget then refused left them.
    The store is attached only once the budget passed."""
    small_release(tmp_path, size=256 << 10)
    cache = tmp_path / "cache"
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = subprocess.run([STIPPLE, "mount", "--cache-budget", "1048576", "-o",
                            "cache_dir=%s" % cache, origin.url(REPO + "/app.stp"), mnt],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "half of this machine's memory" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)
    assert store_names(cache) == []


def test_trim_removes_every_unused_empty_file(tmp_path):
    """Empty files (blocks no mount fetched: what a hostile index leaves) past the first
    262144 files of the store were never listed, so never removed. Now each is removed as
    the listing meets it, in every fan-out directory."""
    small_release(tmp_path)
    blocks = tmp_path / "cache" / "blocks"
    planted = set()
    for sub, count in (("00", 1 << 18), ("ff", 64)):
        os.makedirs(blocks / sub, mode=0o700)
        for i in range(count):
            planted.add("%s%062x" % (sub, i))
            os.close(os.open(blocks / sub / ("%s%062x" % (sub, i)), os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(tmp_path / "cache", 0o700)
    os.chmod(blocks, 0o700)
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app.stp"), None, "--no-prime", "-o",
                         "cache_dir=%s" % (tmp_path / "cache"), timeout=180):
            pass
    # a block the mount itself stored may also start with 00 or ff (1 in 128)
    left = [n for n in store_names(tmp_path / "cache") if n in planted]
    assert left == [], "%d empty files were left, e.g. %s" % (len(left), left[:3])


def fetcher_of(url):
    """The pid of the stipple-fetcher serving URL (its argument names the URL)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"stipple-fetcher") and url.encode() in argv[1:]:
            pids.append(int(pid))
    assert len(pids) == 1, pids
    return pids[0]


def test_fetcher_cannot_change_a_stored_block(tmp_path):
    """The fetcher (the process the network may turn hostile) was handed read-write
    descriptors to every block file of its owner's store, another mount's too, and could
    grow each to 1.25 GiB. As the kernel shows it: a file that holds a block is handed
    read-only, and the fetcher's RLIMIT_FSIZE is the largest block of its index."""
    small_release(tmp_path, size=256 << 10)
    cache = tmp_path / "cache"
    largest = max(os.path.getsize(os.path.join(d, n))
                  for d, _, files in os.walk(tmp_path / "www" / REPO / "blocks") for n in files)
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app.stp")
        opts = ("--no-prime", "-o", "cache_dir=%s" % cache)
        with mount_image(url, None, *opts) as mnt:
            shutil.copytree(mnt, tmp_path / "copy")  # every block into the store
        with mount_image(url, None, *opts):
            pid = fetcher_of(url)
            held = {}
            for fd in os.listdir("/proc/%d/fd" % pid):
                target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                if target.startswith(os.fspath(cache / "blocks")):
                    with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                        flags = next(int(ln.split()[1], 8) for ln in f if ln.startswith("flags:"))
                    held[target] = flags & os.O_ACCMODE
            with open("/proc/%d/limits" % pid) as f:
                fsize = next(ln.split()[3] for ln in f if ln.startswith("Max file size"))
    assert len(held) == len(store_names(cache)) >= 4, held
    assert set(held.values()) == {os.O_RDONLY}, held
    assert int(fsize) == largest, (fsize, largest)


def test_index_at_a_url_without_path(tmp_path):
    """An index served at http://HOST:PORT (no path): the blocks were asked of
    http://blocks/HH/H64, a host named "blocks", with the netrc credentials; reads failed
    (through a proxy the credentials went to that host). They lie at /blocks/ of the
    index's own host."""
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copytree(os.path.join(PYTHON_LIB, "json"), tree / "json")
    image = build_image(tree, tmp_path / "app.stp", *FAST)
    www = tmp_path / "www"
    www.mkdir()
    subprocess.run([STIPPLE, "publish", "-q", image, www], check=True)
    root = "location = / { default_type application/octet-stream; try_files /app.stp =404; }"
    with httputil.nginx(www, tmp_path / "nginx", server=root) as origin:
        url = "http://127.0.0.1:%d" % origin.port
        with mount_image(url, None, "--no-prime", "-o", "cache_size=0") as mnt:
            for d, _, files in os.walk(tree):
                for n in files:
                    p = os.path.join(d, n)
                    with open(os.path.join(mnt, os.path.relpath(p, tree)), "rb") as f:
                        assert f.read() == open(p, "rb").read(), p
        uris = [u for _, _, _, u in origin.uris()]
    assert any(u.startswith("/blocks/") for u in uris), uris


def store_bytes(cache):
    return sum(os.path.getsize(os.path.join(d, n))
               for d, _, files in os.walk(cache / "blocks") for n in files
               if d != str(cache / "blocks"))


def test_cache_size_holds_while_a_mount_runs(tmp_path):
    """Every block a mount fetched was written into the store, whatever cache_size= said:
    the bound was only applied by the next mount's trim. A mount now writes only the
    room its trim left."""
    tree, _ = small_release(tmp_path, size=1 << 20)
    cache = tmp_path / "cache"
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app.stp"), None, "--no-prime", "-o",
                         "cache_dir=%s,cache_size=256K" % cache) as mnt:
            assert open(os.path.join(mnt, "noise"), "rb").read() == (tree / "noise").read_bytes()
            held = store_bytes(cache)
    assert 0 < held <= 256 << 10, held


def test_publish_key_refuses_metadata_changed_after_the_check(tmp_path):
    """`publish --key` verified the image, then read its superblock and tail (metadata,
    dictionary, signature block) again, raw, into the index: whoever can write the image
    changed the metadata in between and the index carried it. strace holds that read
    (delay injected into that pread64) while a byte of the metadata is changed: the index
    is opened from memory and verified again, so publish refuses and writes nothing."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    tree = tmp_path / "tree"
    shutil.copytree(os.path.join(PYTHON_LIB, "json"), tree)
    image = build_image(tree, tmp_path / "app.stp", *FAST)
    sec, pub = tmp_path / "k.key", tmp_path / "k.pub"
    subprocess.run([STIPPLE, "keygen", sec, pub], check=True, capture_output=True)
    subprocess.run([STIPPLE, "sign", image, sec], check=True, capture_output=True)
    cmd = [STIPPLE, "publish", "-q", "--key", pub, image]
    # which pread64 reads the superblock again (the second of 256 bytes at 0), and the tail
    log = tmp_path / "count.log"
    subprocess.run(["strace", "-e", "trace=pread64", "-o", log] + cmd + [tmp_path / "www0"],
                   check=True, capture_output=True)
    calls = [ln for ln in log.read_text().splitlines() if ln.startswith("pread64(")]
    again = [i for i, ln in enumerate(calls) if ln.split("..., ")[-1].startswith("256, 0)")][1]
    tail_at = int(calls[again + 1].split(", ")[-1].split(")")[0])
    log = tmp_path / "run.log"
    p = subprocess.Popen(["strace", "-e", "trace=pread64", "-o", log, "-e",
                          "inject=pread64:delay_enter=3000000:when=%d" % (again + 1)] +
                         cmd + [tmp_path / "www"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (log.exists() and sum(ln.startswith("pread64(") for ln in
                                    log.read_text().splitlines()) >= again):
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.02)
    with open(image, "r+b") as f:  # the metadata, in place, while the read waits
        f.seek(tail_at + 8)
        b = f.read(1)
        f.seek(tail_at + 8)
        f.write(bytes([b[0] ^ 0xff]))
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "changed while it was being published" in err, err
    assert not (tmp_path / "www" / "app.stp").exists()


def test_store_locked_by_another_waits_only_the_mount_deadline(tmp_path):
    """A mount took the store's lock (its blocks directory's exclusive flock) without a
    deadline: a mount or a trim that held it (here the test) held every later mount,
    and mount(8) and the boot with it. It is now waited for 10 s at most; the mount
    goes on without the store."""
    import fcntl
    tree, _ = small_release(tmp_path)
    blocks = tmp_path / "cache" / "blocks"
    os.makedirs(blocks, mode=0o700)
    os.chmod(tmp_path / "cache", 0o700)
    fd = os.open(blocks, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
            mnt = tmp_path / "mnt"
            mnt.mkdir()
            start = time.monotonic()
            r = subprocess.run([STIPPLE, "mount", "--no-prime", "-o",
                                "cache_dir=%s" % (tmp_path / "cache"),
                                origin.url(REPO + "/app.stp"), mnt],
                               capture_output=True, text=True, timeout=60)
            took = time.monotonic() - start
            try:
                assert r.returncode == 0, r.stderr
                assert (mnt / "noise").read_bytes() == (tree / "noise").read_bytes()
            finally:
                subprocess.run(["umount", "-l", mnt])
    finally:
        os.close(fd)
    assert 9 < took < 30, took
    assert "another mount holds it" in r.stderr, r.stderr
    assert store_names(tmp_path / "cache") == []


def test_publish_replaces_block_files_a_server_or_another_user_spoils(tmp_path):
    """A block file already in DIR with the right bytes was kept whatever its owner, mode
    or links: one left 0600 is a 403 for every release that shares it, another user's
    may change under them all. Such files are written anew (the publisher's, 0644, one
    link), a fan-out directory of the publisher's that a server cannot read made 0755."""
    image = small_release(tmp_path, size=256 << 10)[1]
    www = tmp_path / "www" / REPO
    names = sorted(store_names(www))
    assert len(names) >= 4
    spoiled = {}
    for n, how in zip(names, ("0600", "owner", "link")):
        path = www / "blocks" / n[:2] / n
        if how == "0600":
            os.chmod(path, 0o600)
        elif how == "owner":
            os.chown(path, 65534, 65534)
        else:
            os.link(path, tmp_path / "second-link")
        spoiled[n] = path
    os.chmod(www / "blocks" / names[-1][:2], 0o700)
    r = subprocess.run([STIPPLE, "publish", "--json", tmp_path / "app.stp", www],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["replaced"] == 3, r.stdout
    for n, path in spoiled.items():
        st = os.lstat(path)
        assert (st.st_uid, st.st_mode & 0o777, st.st_nlink) == (os.geteuid(), 0o644, 1), n
    assert os.stat(www / "blocks" / names[-1][:2]).st_mode & 0o777 == 0o755
    assert os.path.exists(image)


def test_block_a_proxy_kept_damaged_is_asked_again_past_it(tmp_path, squid_dir):
    """A block briefly wrong on the origin is kept by Squid for the README's year: every
    client refused it, and the release was unreadable behind that proxy even once the
    origin was repaired. A block that does not match is asked once more with no-cache:
    once the origin is right, the mount reads whole."""
    import treeutil
    from test_published import origin_of
    tree, idx = small_release(tmp_path, size=256 << 10)
    www = tmp_path / "www" / REPO
    name = sorted(store_names(www))[0]
    path = www / "blocks" / name[:2] / name
    good = path.read_bytes()
    treeutil.flip_byte(path, len(good) // 2)
    _, refresh = readme_config()
    with origin_of(tmp_path / "www", tmp_path / "nginx") as origin, \
            httputil.squid(squid_dir, refresh=refresh) as proxy:
        url = origin.url(REPO + "/app.stp")
        opts = ("--no-prime", "-o", "proxy=%s,cache_size=0" % proxy)
        with mount_image(url, None, *opts) as mnt:
            failed = 0
            for n in ("noise", "small.txt"):
                try:
                    open(os.path.join(mnt, n), "rb").read()
                except OSError:
                    failed += 1
            assert failed, "the damaged block was not read"
        path.write_bytes(good)  # the origin repaired; Squid still holds the bad copy
        with mount_image(url, None, *opts) as mnt:
            for n in ("noise", "small.txt"):
                assert open(os.path.join(mnt, n), "rb").read() == (tree / n).read_bytes()


def budget_need(url, mnt, budget):
    """`stipple mount --cache-budget BUDGET` refused for memory: (MiB needed, blocks
    counted, MiB for the fetcher: 0 when the message names none)."""
    import re
    r = subprocess.run([STIPPLE, "mount", "--no-prime", "--cache-budget", str(budget), "-o",
                        "cache_size=0", url, mnt], capture_output=True, text=True, timeout=60)
    m = re.search(r"may need (\d+) MiB \((\d+) blocks of", r.stderr)
    assert r.returncode != 0 and m, r.stderr
    f = re.search(r"(\d+) MiB for the fetcher", r.stderr)
    return int(m.group(1)), int(m.group(2)), int(f.group(1)) if f else 0


def test_budget_counts_the_fetchers_index_and_blocks(tmp_path):
    """The fetcher of a published image holds its index and a block buffer per busy
    channel (up to 1.25 GiB), which the half-of-memory rule did not count. With a
    cache budget that brings the daemon alone just below half of this machine's memory,
    the mount is now refused, naming the fetcher's part; it was mounted."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "f").write_bytes(b"x" * 4096)
    image = build_image(tree, tmp_path / "app.stp", "--level", "1", "--block-size", "32M")
    subprocess.run([STIPPLE, "publish", "-q", image, tmp_path / "www"], check=True)
    with open("/proc/meminfo") as f:
        half = int(f.readline().split()[1]) // 1024 // 2  # MiB
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        url = origin.url("app.stp")
        b1, b2 = (1 << 20) - 4096, 1 << 20
        x1, n1, f1 = budget_need(url, mnt, b1)
        x2, n2, _ = budget_need(url, mnt, b2)
        per_block = (x2 - x1) / (n2 - n1)  # MiB, a 32 MiB block and its margin
        fixed = x1 - f1 - n1 * per_block
        extra = n1 - b1
        budget = int((half - 64 - fixed) / per_block) - extra
        assert budget > 0
        r = subprocess.run([STIPPLE, "mount", "--no-prime", "--cache-budget", str(budget),
                            "-o", "cache_size=0", url, mnt],
                           capture_output=True, text=True, timeout=60)
        if r.returncode == 0:
            subprocess.run(["umount", "-l", mnt])
    assert r.returncode != 0, "mounted: the daemon's %d MiB fit, the fetcher was not counted" % (
        fixed + (budget + extra) * per_block)
    assert "for the fetcher's index and blocks" in r.stderr, r.stderr


def test_store_files_follow_cache_size(tmp_path):
    """A mount made a store file (a descriptor, an inode and a lock) for every block its
    image has, up to a fixed 65,536, whatever cache_size= could hold. It now makes files
    only for the blocks cache_size= holds: 256 KiB of 64 KiB blocks is 4 files, not 65;
    the reads and the bound hold as before."""
    tree, _ = small_release(tmp_path, size=4 << 20)
    cache = tmp_path / "cache"
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        with mount_image(origin.url(REPO + "/app.stp"), None, "--no-prime", "-o",
                         "cache_dir=%s,cache_size=256K" % cache) as mnt:
            files = store_names(cache)
            assert open(os.path.join(mnt, "noise"), "rb").read() == (tree / "noise").read_bytes()
            held = store_bytes(cache)
    assert 1 <= len(files) <= 6, "%d store files for a store of 256 KiB" % len(files)
    assert 0 < held <= 256 << 10, held


def test_cache_size_holds_for_small_blocks(tmp_path):
    """The room a mount was told counted each block's stored bytes (a few dozen for a
    64 KiB block that compresses well), while the disk holds a 4 KiB file system block
    and an inode for each file, and every empty file was writable: 600 such blocks took
    the store past ten times cache_size=256K. Now a block costs the room its disk blocks,
    and no more files are writable than cache_size= holds of the largest blocks."""
    tree = tmp_path / "tree"
    tree.mkdir()
    with open(tree / "chunks", "wb") as f:
        for i in range(600):
            f.write(i.to_bytes(8, "little") + bytes((64 << 10) - 8))
    image = build_image(tree, tmp_path / "app.stp", "--level", "1", "--block-size", "64K")
    subprocess.run([STIPPLE, "publish", "-q", image, tmp_path / "www"], check=True)
    cache = tmp_path / "cache"
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        with mount_image(origin.url("app.stp"), None, "--no-prime", "--warm-workers", "0",
                         "-o", "cache_dir=%s,cache_size=256K" % cache) as mnt:
            assert open(os.path.join(mnt, "chunks"), "rb").read() == (tree / "chunks").read_bytes()
            files = store_names(cache)
            disk = sum(os.stat(os.path.join(d, n)).st_blocks * 512
                       for d, _, ns in os.walk(cache / "blocks") for n in ns)
    assert disk <= (256 << 10) + (64 << 10), "%d bytes on disk for cache_size=256K" % disk
    assert len(files) < (256 >> 2) + 32, "%d store files" % len(files)


def test_wrong_block_asked_again_within_its_one_deadline(tmp_path):
    """A block whose bytes do not match is asked once more past the caches, and that ask
    started a deadline of its own: a server that sends wrong bytes just slowly enough held
    each read twice the bound. 48 KiB at 12 KiB/s takes 4 s an ask; the block's one
    deadline with timeout=2 is 2 s + 48 KiB at 16 KiB/s = 5 s: the read fails then, not
    after the 8 s two asks take. The kernel reads the page again once the read failed:
    twice 5 s, against twice 8 s before."""
    small_release(tmp_path)
    with httputil.trickle_server(tmp_path / "www", rate=12 << 10, corrupt=True) as base:
        with mount_image(base + REPO + "/app.stp", None, "--no-prime", "--warm-workers", "0",
                         "-o", "timeout=2,cache_size=0") as mnt:
            rc, err, took = timed_cat(os.path.join(mnt, "noise"), 60)
    assert rc is not None and rc != 0 and "Input/output error" in err, (rc, err)
    assert took < 13, "the read failed only after %.1f s" % took


def data_limit(pid):
    """The hard "Max data size" of process PID, in bytes."""
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            if line.startswith("Max data size "):
                return int(line.split()[4])
    raise AssertionError("no Max data size")


def test_fetchers_memory_is_bounded_as_the_budget_counts_it(tmp_path):
    """The budget counted the fetcher by the index length its HELLO said, while the
    fetcher's real bound was a fixed 1.9 GiB RLIMIT_DATA: a fetcher turned hostile
    before HELLO held 1.5 GiB the rule never allowed. It now lowers its hard limit to its
    index and a block buffer per channel past the fixed part, and the budget counts what
    the limit allows: here 4 channels of 64 KiB blocks, well under 1.9 GiB."""
    small_release(tmp_path)
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        url = origin.url(REPO + "/app.stp")
        with mount_image(url, None, "--no-prime", "--warm-workers", "0", "-o",
                         "cache_size=0"):
            limit = data_limit(fetcher_of(url))
    fixed = 4 * (8 << 20) + (256 << 20)  # 4 channels' pieces and libcurl's state
    assert limit <= fixed + (1 << 20), "the fetcher may hold %d MiB" % (limit >> 20)


def test_a_mount_lists_part_of_a_large_store(tmp_path):
    """Every mount listed and stat'ed the whole store under its lock before going live
    (seconds with 262144 files, and mounts queued behind it lost the store). A trim now
    lists fan-out directories until it has seen 1024 files: with 65536 files, about 256
    a directory, a handful of the 256 directories (each listing shows in its atime).
    Only the first mount, which makes the store's ledger, lists it whole."""
    small_release(tmp_path)
    cache = tmp_path / "cache"
    blocks = cache / "blocks"
    os.makedirs(blocks, mode=0o700)
    os.chmod(cache, 0o700)
    key = blocks / "fanout.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    for h in range(256):
        os.makedirs(blocks / ("%02x" % h), mode=0o700)
    for i in range(65536):
        name = "%064x" % i
        with open(stored(cache, name), "wb") as f:
            f.write(b"x")
    with httputil.nginx(tmp_path / "www", tmp_path / "nginx") as origin:
        for _ in range(2):
            for h in range(256):
                sub = blocks / ("%02x" % h)
                os.utime(sub, (1, os.stat(sub).st_mtime))
            with mount_image(origin.url(REPO + "/app.stp"), None, "--no-prime", "-o",
                             "cache_dir=%s" % cache):
                pass
    listed = sum(os.stat(blocks / ("%02x" % h)).st_atime > 1 for h in range(256))
    assert 1 <= listed < 32, "%d of 256 directories listed" % listed
