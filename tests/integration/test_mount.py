# SPDX-License-Identifier: MIT
"""The mount: `stipple mount` and the mount(8) helper, mounted for real and compared with
the source trees byte by byte and attribute by attribute."""

import contextlib
import errno
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import (MOUNT_STIPPLE, PYTHON, PYTHON_LIB, STIPPLE, build_image, is_mounted,
                      mount_image, run, unmount)
from imageutil import FAST
import mounts
import treeutil

pytestmark = pytest.mark.needs_root


# ---- helpers ---------------------------------------------------------------------------

def daemon_pids(mountpoint):
    """Pids of stipple daemons whose command line names MOUNTPOINT."""
    want = os.fsencode(os.path.realpath(mountpoint))
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
            with open("/proc/%s/comm" % d) as f:
                if f.read().strip() == "stipple-watch":  # the monitor's watcher
                    continue
        except OSError:
            continue
        if args and b"stipple" in os.path.basename(args[0]) and any(
                os.path.realpath(a) == want for a in args[1:] if a):
            pids.append(int(d))
    return pids


def wait_gone(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(os.path.exists("/proc/%d" % p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def wait_mounted(path, timeout=10):
    deadline = time.monotonic() + timeout
    while not is_mounted(path):
        assert time.monotonic() < deadline, "%s is not mounted" % path
        time.sleep(0.05)


def mount_fields(path):
    """(fstype, source) of the mount at PATH."""
    m = mounts.at(path)
    return (m.fstype, m.source) if m else None


class Foreground:
    """A `stipple mount -f` daemon whose stderr goes to a file, readable at any time."""

    def __init__(self, log_path):
        self.log_path = log_path
        self.proc = None

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


@contextlib.contextmanager
def foreground_mount(image, mountpoint, *args):
    """`stipple mount -f ARGS IMAGE MOUNTPOINT`: yields a Foreground once the mount is
    live, and always unmounts and waits for the daemon."""
    fg = Foreground(os.path.join(tempfile.mkdtemp(prefix="stipple-log-"), "stderr"))
    with open(fg.log_path, "wb") as err:
        fg.proc = subprocess.Popen([STIPPLE, "mount", "-f", *args, image, mountpoint],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err)
    try:
        deadline = time.monotonic() + 10
        while not is_mounted(mountpoint):
            if fg.proc.poll() is not None:
                pytest.fail("stipple mount -f exited %d: %s" % (fg.proc.returncode, fg.log()))
            assert time.monotonic() < deadline, "%s is not mounted" % mountpoint
            time.sleep(0.05)
        yield fg
    finally:
        unmount(mountpoint)
        try:
            fg.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fg.proc.kill()
            fg.proc.wait()


def noise_tree(root, count=24, size=256 << 10):
    """Incompressible files (every block of them stored as it is) plus a text file."""
    os.makedirs(root)
    for i in range(count):
        with open(os.path.join(root, "noise-%02d" % i), "wb") as f:
            f.write(random.Random(i).randbytes(size))
    with open(os.path.join(root, "text"), "wb") as f:
        f.write(b"plain text, compressible " * 4000)
    return root


def blocks_of(image):
    """[(offset, stored size)] from `stipple info --blocks`."""
    r = run([STIPPLE, "info", "--blocks", image], check=True)
    rows = re.findall(r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\S+", r.stdout, re.M)
    return [(int(off), int(stored)) for _, off, stored, _ in rows]


def file_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def read_tree(src, mnt):
    """Reads each file of SRC through MNT: (the names that gave EIO, the others, each
    equal to its source)."""
    failed, good = [], []
    for name in sorted(os.listdir(src)):
        try:
            data = file_bytes(os.path.join(mnt, name))
        except OSError as e:
            assert e.errno == errno.EIO, e
            failed.append(name)
            continue
        assert data == file_bytes(os.path.join(src, name)), name
        good.append(name)
    return failed, good


# ---- fixtures --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stdlib_image(tmp_path_factory):
    image = tmp_path_factory.mktemp("stdlib-image") / "stdlib.stipple"
    return build_image(PYTHON_LIB, image, "--level", "3", "--block-size", "1M")


@pytest.fixture
def mountpoint(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield str(path)
    unmount(str(path))


@pytest.fixture(scope="module")
def helper_in_sbin():
    """mount(8) looks for helpers only in /sbin: install mount.stipple and the
    mount.fuse.stipple link there for the test, and put back what was there before."""
    if not os.access(MOUNT_STIPPLE, os.X_OK):
        pytest.skip("%s is not built" % MOUNT_STIPPLE)
    names = ["/sbin/mount.stipple", "/sbin/mount.fuse.stipple"]
    saved = {}
    for n in names:
        if os.path.lexists(n):
            saved[n] = n + ".saved-by-test"
            os.rename(n, saved[n])
    try:
        # a link, not a copy: the helper finds stipple-mountd beside it only when it
        # runs from the build tree (progpath.h)
        os.symlink(MOUNT_STIPPLE, names[0])
        os.symlink("mount.stipple", names[1])
        yield names[0]
    finally:
        for n in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(n)
            if n in saved:
                os.rename(saved[n], n)


# ---- the trees, entry by entry ---------------------------------------------------------

def test_generated_tree_matches_source(gen_tree, gen_image, gen_tree_info):
    with mount_image(gen_image) as mnt:
        diffs = treeutil.compare_trees(gen_tree, mnt)
        assert not diffs, "\n".join(diffs[:50])
        # every kind of entry really is there
        st = os.lstat(os.path.join(mnt, "special", "fifo"))
        assert (st.st_mode & 0o170000) == 0o010000
        assert os.lstat(os.path.join(mnt, "hard", "one")).st_nlink == 3
        assert os.readlink(os.path.join(mnt, "links", "dangling")) == "does/not/exist"
        if gen_tree_info["trusted"]:
            assert os.getxattr(os.path.join(mnt, "xattrs", "file"),
                               "trusted.stipple") == b"trusted value"
        # hard links: one inode number for the three names
        ino = {os.lstat(os.path.join(mnt, p)).st_ino for p in ("hard/one", "hard/two", "a/three")}
        assert len(ino) == 1
        # a read-only mount
        with pytest.raises(OSError) as e:
            open(os.path.join(mnt, "files", "new"), "wb")
        assert e.value.errno == errno.EROFS
        assert os.statvfs(mnt).f_flag & os.ST_RDONLY


def test_missing_names_and_errors(gen_image):
    with mount_image(gen_image) as mnt:
        for _ in range(2):  # the second time from the kernel's negative entry
            assert not os.path.exists(os.path.join(mnt, "no-such-file"))
        with pytest.raises(NotADirectoryError):
            os.listdir(os.path.join(mnt, "files", "empty"))
        with pytest.raises(OSError) as e:
            os.getxattr(os.path.join(mnt, "xattrs", "file"), "user.absent")
        assert e.value.errno == errno.ENODATA
        assert sorted(os.listdir(os.path.join(mnt, "many")))[:2] == ["entry-00000",
                                                                     "entry-00001"]
        assert len(os.listdir(os.path.join(mnt, "many"))) == treeutil.MANY


def test_stdlib_matches_source(stdlib_image):
    with mount_image(stdlib_image) as mnt:
        diffs = treeutil.compare_trees(PYTHON_LIB, mnt)
        assert not diffs, "\n".join(diffs[:50])


def status_key(mnt, key):
    for line in os.getxattr(mnt, "user.stipple.status").decode().splitlines():
        k, _, v = line.partition("=")
        if k == key:
            return v
    raise AssertionError("no %s in the status of %s" % (key, mnt))


@pytest.mark.parametrize("args, budget", [((), "226"), (("--cache-budget", "3"), "3")])
def test_cache_budget_default_follows_the_block_size(stdlib_image, args, budget):
    """1 MiB blocks: as many buffers as fit in 256 MiB by default; a budget given is
    kept."""
    with mount_image(stdlib_image, None, *args) as mnt:
        assert status_key(mnt, "block_size") == str(1 << 20)
        assert status_key(mnt, "cache_budget") == budget


def test_status_counts_decode_time(stdlib_image):
    """cache_decode_ns: nothing before the first read, then the time of the blocks it
    decoded, which the read waited for at least in part."""
    with mount_image(stdlib_image, None, "--warm-workers", "0") as mnt:
        assert status_key(mnt, "cache_decode_ns") == "0"
        assert status_key(mnt, "cache_early") == "0"
        with open(os.path.join(mnt, "os.py"), "rb") as f:
            got = f.read()
        with open(os.path.join(PYTHON_LIB, "os.py"), "rb") as f:
            assert got == f.read()
        # the read is let go once its own bytes are decoded; the block's decode, and
        # its count, end a moment later on a decoder thread
        deadline = time.monotonic() + 10
        while int(status_key(mnt, "blocks_decoded")) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert int(status_key(mnt, "blocks_decoded")) >= 1
        assert int(status_key(mnt, "cache_decode_ns")) > 0


def machine_memory():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) << 10
    raise AssertionError("no MemTotal in /proc/meminfo")


def test_default_budget_of_small_blocks_fits_the_daemons_memory(tmp_path):
    """A 64 KiB-block image read whole through a default mount: the cache fills to its
    budget within the memory the daemon is allowed, and every byte reads back. The
    budget: as many buffers (a block and zstd's margin, 192 KiB) as fit in 256 MiB
    (1,337), or in a 32nd of this machine's memory when that is more, but no more than
    the image's blocks, so that an image of small blocks that fits is kept whole. (A
    budget that counted blocks without zstd's margin ran out of memory after some 2,500
    blocks.)"""
    tree = tmp_path / "tree"
    tree.mkdir()
    want = {}
    for i in range(4):
        want["f%d" % i] = os.urandom(50 << 20)  # noise: stored raw, quick to build
        (tree / ("f%d" % i)).write_bytes(want["f%d" % i])
    image = build_image(str(tree), str(tmp_path / "small.stipple"), "--level", "1",
                        "--block-size", "64K")
    with mount_image(image) as mnt:
        for name, data in want.items():
            with open(os.path.join(mnt, name), "rb") as f:
                assert f.read() == data, name
        blocks = int(status_key(mnt, "blocks_decoded"))  # read whole: each block once
        want = max(1337, min(blocks, machine_memory() // 32 // (192 << 10)))
        assert int(status_key(mnt, "cache_budget")) == want
        assert int(status_key(mnt, "cache_resident")) == min(want, blocks)


def test_python_imports_from_mount(stdlib_image, tmp_path):
    prefix = tmp_path / "prefix"
    lib = prefix / "lib" / os.path.basename(PYTHON_LIB)
    lib.mkdir(parents=True)
    with mount_image(stdlib_image, lib) as mnt:
        code = ("import json, email, email.parser, sqlite3, asyncio, decimal, os, sys;"
                "print(json.__file__); print(os.__file__); print(sys.prefix);"
                "print(json.dumps({'a': [1, 2]}));"
                "print(sqlite3.connect(':memory:').execute('select 40 + 2').fetchone()[0])")
        env = {"PYTHONHOME": str(prefix), "PATH": "/usr/bin:/bin", "LC_ALL": "C"}
        r = run([PYTHON, "-s", "-c", code], env=env, check=True)  # not -I: it ignores PYTHONHOME
        lines = r.stdout.splitlines()
        assert lines[0].startswith(mnt + "/json/"), lines
        assert lines[1] == mnt + "/os.py"
        assert lines[2] == str(prefix)
        assert lines[3] == '{"a": [1, 2]}'
        assert lines[4] == "42"


# ---- mount(8) ------------------------------------------------------------------------

@pytest.mark.parametrize("fstype", ["fuse.stipple", "stipple"])
def test_mount_t(helper_in_sbin, gen_tree, gen_image, mountpoint, fstype):
    r = run(["mount", "-t", fstype, "-o", "nofail,_netdev,x-test=1,cache_budget=2",
             gen_image, mountpoint])
    assert r.returncode == 0, r.stderr
    wait_mounted(mountpoint)
    fs, source = mount_fields(mountpoint)
    assert fs == "fuse.stipple"
    assert source == os.path.realpath(gen_image)
    assert file_bytes(os.path.join(mountpoint, "files", "large")) == \
        file_bytes(os.path.join(gen_tree, "files", "large"))
    pids = daemon_pids(mountpoint)
    assert pids
    assert run(["umount", mountpoint]).returncode == 0
    assert wait_gone(pids), "the daemon outlived umount"


def test_fstab_file(helper_in_sbin, gen_tree, gen_image, mountpoint, tmp_path):
    fstab = tmp_path / "fstab"
    fstab.write_text("# test\n%s %s fuse.stipple defaults,nofail,allow_other,cache_budget=1,"
                     "comment=x-gvfs 0 0\n" % (gen_image, mountpoint))
    r = run(["mount", "-T", fstab, mountpoint])
    assert r.returncode == 0, r.stderr
    wait_mounted(mountpoint)
    assert mount_fields(mountpoint)[0] == "fuse.stipple"
    m = mounts.at(mountpoint)
    assert "ro" in m.vfs_options.split(","), m
    assert "allow_other" in m.fs_options.split(","), m
    assert file_bytes(os.path.join(mountpoint, "a", "b", "mid.txt")) == b"in the middle\n"
    assert os.listdir(os.path.join(mountpoint, "links"))
    run(["umount", mountpoint], check=True)
    assert not is_mounted(mountpoint)


def test_helper_fake_and_errors(helper_in_sbin, gen_image, mountpoint, tmp_path):
    r = run([MOUNT_STIPPLE, gen_image, mountpoint, "-f", "-v"])
    assert r.returncode == 0, r.stderr
    assert not is_mounted(mountpoint)
    r = run([MOUNT_STIPPLE, gen_image, mountpoint, "-o", "bogus_option"])
    assert r.returncode != 0 and "bogus_option" in r.stderr
    r = run([MOUNT_STIPPLE, gen_image, mountpoint, "-o", "cache_budget=0"])
    assert r.returncode != 0 and "cache_budget" in r.stderr
    r = run([MOUNT_STIPPLE, gen_image, str(tmp_path / "missing")])
    assert r.returncode == 32 and "missing" in r.stderr
    r = run(["mount", "-t", "stipple", str(tmp_path / "no-image"), mountpoint])
    assert r.returncode == 32, r.stderr
    assert not is_mounted(mountpoint)


def test_junk_image(mountpoint, tmp_path):
    junk = tmp_path / "junk.stipple"
    junk.write_bytes(b"this is not an image\n" * 100)
    r = run([MOUNT_STIPPLE, junk, mountpoint])
    assert r.returncode == 32
    assert str(junk.name) in r.stderr and "not a stipple image" in r.stderr
    r = run([STIPPLE, "mount", junk, mountpoint])
    assert r.returncode != 0
    assert str(junk.name) in r.stderr and "not a stipple image" in r.stderr
    assert not is_mounted(mountpoint)


def test_cache_budget_zero_refused(gen_image, mountpoint):
    r = run([STIPPLE, "mount", "--cache-budget", "0", gen_image, mountpoint])
    assert r.returncode != 0
    assert "--cache-budget 0" in r.stderr and "at least 1" in r.stderr
    assert not is_mounted(mountpoint)


# ---- concurrency, damage, the daemon's life --------------------------------------------

@pytest.mark.parametrize("budget", ["8", "1"])
def test_concurrent_random_reads(gen_tree, gen_image, budget):
    files = []
    for dirpath, _, names in os.walk(os.path.join(gen_tree, "files")):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), gen_tree)
            files.append((rel, file_bytes(os.path.join(gen_tree, rel))))
    errors = []

    def reader(seed, mnt):
        rnd = random.Random(seed)
        try:
            for i in range(150):
                rel, data = rnd.choice(files)
                fd = os.open(os.path.join(mnt, rel), os.O_RDONLY)
                try:
                    if i % 10 == 0:  # send the next reads to the daemon, not the page cache
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    off = rnd.randrange(len(data) + 1)
                    n = rnd.choice([1, 100, 4096, 70000, 1 << 20])
                    got = os.pread(fd, n, off)
                    if got != data[off:off + n]:
                        errors.append("%s: %d bytes at %d differ" % (rel, n, off))
                finally:
                    os.close(fd)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("%s: %r" % (seed, e))

    with mount_image(gen_image, None, "--cache-budget", budget) as mnt:
        threads = [threading.Thread(target=reader, args=(s, mnt)) for s in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, "\n".join(errors[:20])


def test_damaged_block_gives_eio(tmp_path):
    src = noise_tree(str(tmp_path / "src"))
    image = build_image(src, tmp_path / "damaged.stipple", *FAST)
    blocks = blocks_of(image)
    assert len(blocks) > 20
    off, stored = blocks[len(blocks) // 2]
    treeutil.flip_byte(image, off + stored // 2, 0xFF)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with foreground_mount(image, str(mnt)) as fg:
        failed, good = read_tree(src, mnt)
        # the damage stays: reading again fails again, the rest still reads
        for name in failed:
            with pytest.raises(OSError):
                file_bytes(os.path.join(mnt, name))
        assert file_bytes(os.path.join(mnt, "text")) == file_bytes(os.path.join(src, "text"))
    assert 1 <= len(failed) <= 2, failed
    assert len(good) >= len(os.listdir(src)) - 2
    assert re.search(r"block %d\b" % (len(blocks) // 2), fg.log()), fg.log()


def test_umount_ends_daemon(gen_image, mountpoint):
    r = run([STIPPLE, "mount", gen_image, mountpoint], check=True)
    assert is_mounted(mountpoint), "stipple mount returned before the mount was live"
    assert r.stdout == ""
    pids = daemon_pids(mountpoint)
    assert len(pids) == 1
    assert os.listdir(mountpoint)
    run(["umount", mountpoint], check=True)
    assert wait_gone(pids), "the daemon outlived umount"
    # fusermount3 -u as well
    run([STIPPLE, "mount", gen_image, mountpoint], check=True)
    pids = daemon_pids(mountpoint)
    run(["fusermount3", "-u", mountpoint], check=True)
    assert wait_gone(pids)


def test_kill9_takes_the_mount(gen_image, mountpoint):
    """A daemon killed after the mount went live leaves no dead mount (ENOTCONN): its
    watcher unmounts it (issue 28, item 15; test_sandbox.py covers both front ends)."""
    run([STIPPLE, "mount", gen_image, mountpoint], check=True)
    pids = daemon_pids(mountpoint)
    assert len(pids) == 1
    os.kill(pids[0], signal.SIGKILL)
    assert wait_gone(pids)
    deadline = time.monotonic() + 2
    while is_mounted(mountpoint) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not is_mounted(mountpoint)
    assert os.listdir(mountpoint) == []


def test_foreground_stays(gen_image, mountpoint):
    with foreground_mount(gen_image, mountpoint) as fg:
        assert fg.proc.poll() is None
        assert os.listdir(mountpoint)
    assert fg.proc.returncode == 0, fg.log()


def test_unprivileged_user_mount(gen_tree, gen_image, tmp_path):
    """A user's mount goes through fusermount3."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv is missing")
    if not os.stat("/dev/fuse").st_mode & 0o006:
        pytest.skip("/dev/fuse is not open to other users on this machine")
    home = tempfile.mkdtemp(prefix="stipple-user-")
    try:
        os.chmod(home, 0o755)
        image = os.path.join(home, "gen.stipple")
        shutil.copy(gen_image, image)
        os.chmod(image, 0o644)
        mnt = os.path.join(home, "mnt")
        os.mkdir(mnt)
        os.chown(mnt, 65534, 65534)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        r = run(as_nobody + [STIPPLE, "mount", image, mnt])
        assert r.returncode == 0, r.stderr
        try:
            assert is_mounted(mnt)
            r = run(as_nobody + ["cat", os.path.join(mnt, "files", "text-65537")], check=True)
            assert r.stdout.encode() == file_bytes(os.path.join(gen_tree, "files", "text-65537"))
            pids = daemon_pids(mnt)
            run(as_nobody + ["fusermount3", "-u", mnt], check=True)
            assert wait_gone(pids)
        finally:
            unmount(mnt)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_kernel_caches_replies(gen_image, mountpoint):
    """Lookups (failed ones too), attributes, opens and file pages are asked for once:
    doing it all again sends the daemon nothing but a directory's OPENDIR and RELEASEDIR,
    and IOCTL (Python's open() asks isatty(), and the kernel forwards every ioctl of a
    FUSE file). A listing is kept by the kernel from a directory's second opening on (a
    walker lists each directory once, and keeping costs it more than the listing): the
    second pass lists again, later ones do not."""
    def workload():
        assert not os.path.exists(os.path.join(mountpoint, "a", "nothing-here"))
        assert sorted(os.listdir(os.path.join(mountpoint, "a", "b"))) == ["c", "mid.txt"]
        assert file_bytes(os.path.join(mountpoint, "a", "b", "mid.txt")) == b"in the middle\n"
        assert os.stat(os.path.join(mountpoint, "files", "large")).st_size > 0
        assert os.readlink(os.path.join(mountpoint, "links", "relative")) == "../files/text-100"
        assert os.path.isfile(os.path.join(mountpoint, "links", "relative"))

    def ops_since(fg, start):
        time.sleep(0.2)
        ops = re.findall(r"opcode: (\w+)", fg.log())
        return ops, [op for op in ops[start:] if op != "IOCTL"]

    with foreground_mount(gen_image, mountpoint, "-o", "debug") as fg:
        workload()
        log, first = ops_since(fg, 0)
        workload()
        log, second = ops_since(fg, len(log))
        for _ in range(3):
            workload()
        _, again = ops_since(fg, len(log))
    assert "LOOKUP" in first and "READ" in first, first
    listing = [op for op in second if op not in ("OPENDIR", "RELEASEDIR")]
    assert listing and set(listing) <= {"READDIR", "READDIRPLUS"}, second
    assert [op for op in again if op not in ("OPENDIR", "RELEASEDIR")] == [], again
    assert again.count("OPENDIR") == 3, again
