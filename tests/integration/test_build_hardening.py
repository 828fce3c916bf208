# SPDX-License-Identifier: MIT
"""mkstipple reads the tree it scanned or nothing: swapped-in symlinks, directories and
FIFOs, and files replaced behind its back, fail the build without an image; a file that
changed in place is read again, whole, as tar does (issue 29); the output is
durable and cleaned up past RLIMIT_FSIZE and on signals. `stipple extract` treats modes
as tar does: a user's umask applies and setuid/setgid are dropped, root restores all.

A build is paused between its scan and the reading of the files with a FIFO as the hot
list: mkstipple opens the hot list only once the scan is done, and blocks there until
the test, having changed the tree, closes the FIFO (an empty hot list)."""

import contextlib
import os
import resource
import shutil
import signal
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import MKSTIPPLE, STIPPLE, run
import imageutil

FAST = (*imageutil.FAST, "--threads", "1")
HANG = 30  # seconds after which a build counts as hung


def assert_no_output(out):
    left = sorted(os.listdir(out))
    assert not left, "the failed build left files in %s: %s" % (out, left)


@pytest.fixture
def out(tmp_path):
    d = tmp_path / "out"
    d.mkdir()
    return d


def finish(p, timeout=HANG):
    """Waits for P; a build still running after TIMEOUT is killed and fails the test."""
    try:
        o, e = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        o, e = p.communicate()
        pytest.fail("mkstipple hung for %d s:\n%s" % (timeout, e))
    return p.returncode, o, e


def reading_pipe(pid, pipe_fd):
    """Whether PID's main thread waits in read(2) on the pipe PIPE_FD is an end of."""
    try:
        with open("/proc/%d/syscall" % pid) as f:
            call = f.read().split()
        if call[0] != "0":  # read(2) on x86_64 and the other 64-bit ABIs but arm64's
            return False
        return os.readlink("/proc/%d/fd/%d" % (pid, int(call[1], 16))) == \
            os.readlink("/proc/self/fd/%d" % pipe_fd)
    except (OSError, IndexError, ValueError):
        return False


@contextlib.contextmanager
def paused_build(tmp_path, src, image, *args):
    """Starts mkstipple on SRC and yields once its scan is done and it waits on the hot
    list, a pipe handed over as /dev/fd/N (as `<(...)` does); the build goes on, with an
    empty list, when the block ends. Yields a dict that gets 'rc', 'err'."""
    rfd, wfd = os.pipe()
    p = subprocess.Popen([MKSTIPPLE, "--quiet", *FAST, "--hot-list", "/dev/fd/%d" % rfd,
                          *args, src, image], pass_fds=(rfd,),
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, errors="replace")
    os.close(rfd)
    result = {"proc": p}
    try:
        deadline = time.monotonic() + HANG
        while not reading_pipe(p.pid, wfd):
            if p.poll() is not None:
                pytest.fail("mkstipple ended before reading the hot list:\n%s"
                            % p.stderr.read())
            assert time.monotonic() < deadline, "mkstipple never read the hot list"
            time.sleep(0.01)
        yield result
        os.close(wfd)
        wfd = -1
        result["rc"], _, result["err"] = finish(p)
    finally:
        if wfd >= 0:
            os.close(wfd)
        if p.poll() is None:
            p.kill()
            p.wait()


def expect_refused(res, out, *names):
    rc, err = res["rc"], res["err"]
    assert rc != 0, "mkstipple read a tree changed behind its back and exited 0"
    assert 0 < rc < 128, "crashed: exit %d\n%s" % (rc, err)
    for n in names:
        assert n in err, "message does not name %s:\n%s" % (n, err)
    assert_no_output(out)


def same_times(path, like):
    st = os.lstat(like)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def make_src(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "keep").write_bytes(b"stays the same\n" * 100)
    (src / "sub" / "secret.txt").write_bytes(b"inside-the-tree-" * 8)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"OUTSIDE-THE-TREE" * 8)  # same size
    same_times(outside / "secret.txt", src / "sub" / "secret.txt")
    return src, outside


# Swapped entries


def test_directory_swapped_for_symlink_is_not_followed(tmp_path, out):
    """A directory replaced by a symlink to outside, with a look-alike file of the same
    size and mtime there: opening by full path would read it; beneath fds it is refused."""
    src, outside = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        os.rename(src / "sub", tmp_path / "sub.moved")
        os.symlink(outside, src / "sub")
    expect_refused(res, out, "sub", "changed during the build")


def test_directory_swapped_for_another_is_refused(tmp_path, out):
    src, outside = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        os.rename(src / "sub", tmp_path / "sub.moved")
        os.rename(outside, src / "sub")
    expect_refused(res, out, "sub", "changed during the build")


def test_file_swapped_for_symlink_is_not_followed(tmp_path, out):
    src, outside = make_src(tmp_path)
    image = out / "x.stipple"
    victim = src / "sub" / "secret.txt"
    with paused_build(tmp_path, src, image) as res:
        victim.unlink()
        os.symlink(outside / "secret.txt", victim)
    expect_refused(res, out, "sub/secret.txt", "symbolic link")


def test_file_swapped_for_fifo_does_not_hang(tmp_path, out):
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    victim = src / "sub" / "secret.txt"
    t0 = time.monotonic()
    with paused_build(tmp_path, src, image) as res:
        victim.unlink()
        os.mkfifo(victim)
    assert time.monotonic() - t0 < HANG
    expect_refused(res, out, "sub/secret.txt", "no longer a regular file")


def test_fifo_present_at_scan_is_stored_not_opened(tmp_path, out):
    """A FIFO the scan sees is an entry like any other: stored, never opened."""
    src, _ = make_src(tmp_path)
    os.mkfifo(src / "pipe", 0o640)
    image = out / "x.stipple"
    p = subprocess.Popen([MKSTIPPLE, "--quiet", *FAST, src, image], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, errors="replace")
    rc, _, err = finish(p)
    assert rc == 0, err
    r = run([STIPPLE, "ls", "-l", image, "/"], timeout=60)
    assert r.returncode == 0, r.stderr
    line = [l for l in r.stdout.splitlines() if l.rstrip().endswith("pipe")]
    assert line and line[0].startswith("p"), "the FIFO is not stored as one:\n" + r.stdout


# Files changed behind the build's back


def rewrite_same_size_and_mtime(path):
    before = os.lstat(path)
    time.sleep(0.05)  # the change time moves on
    data = bytearray(path.read_bytes())
    data[0] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = os.lstat(path)
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns


def replace_by_lookalike(path):
    """Another file of the same size and mtime renamed over PATH: a new inode."""
    other = path.with_name(path.name + ".new")
    other.write_bytes(b"Z" * os.lstat(path).st_size)
    same_times(other, path)
    os.rename(other, path)


CHANGES = {
    "appended": lambda p: p.open("ab").write(b"more\n"),
    "truncated": lambda p: os.truncate(p, 10),
    "rewritten, mtime put back": rewrite_same_size_and_mtime,
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_file_changed_after_scan_is_read_again(tmp_path, out, change):
    """A file changed in place after the scan, and still after that, is read again and
    stored as it is now: the image holds its new bytes, not a mix, and no warning."""
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        CHANGES[change](src / "sub" / "secret.txt")
    assert res["rc"] == 0, res["err"]
    r = run([STIPPLE, "extract", image, tmp_path / "x"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "x" / "sub" / "secret.txt").read_bytes() == \
        (src / "sub" / "secret.txt").read_bytes()


def test_file_replaced_after_scan_is_reported(tmp_path, out):
    """Another inode in its place is another file: refused, as a swapped link is."""
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        replace_by_lookalike(src / "sub" / "secret.txt")
    expect_refused(res, out, "sub/secret.txt", "changed during the build")


def test_file_appended_by_background_writer(tmp_path, out):
    src, _ = make_src(tmp_path)
    for i in range(8):
        (src / ("data-%d" % i)).write_bytes(os.urandom(200 << 10))
    log = src / "sub" / "growing.log"
    log.write_bytes(os.urandom(1 << 20))
    writer = subprocess.Popen(
        ["/usr/bin/python3", "-c",
         "import sys, time\n"
         "f = open(sys.argv[1], 'ab', buffering=0)\n"
         "while True:\n"
         "    f.write(b'x' * 512); time.sleep(0.001)\n", log], stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.1)
        p = subprocess.Popen([MKSTIPPLE, "--quiet", "--level", "19", "--block-size", "1M",
                              src, out / "x.stipple"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, errors="replace")
        rc, _, err = finish(p, timeout=300)
    finally:
        writer.kill()
        writer.wait()
    # read again while it changes (a read between two writes is a good one: exit 0), then
    # stored whole as it last read, with a warning and exit 1
    assert rc in (0, 1), err
    assert rc == 0 or "sub/growing.log: file changed as we read it" in err, err
    r = run([STIPPLE, "extract", out / "x.stipple", tmp_path / "x"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert log.read_bytes().startswith((tmp_path / "x" / "sub" / "growing.log").read_bytes())


def test_unchanged_tree_still_builds(tmp_path, out):
    """The pause itself changes nothing: the same build, untouched, succeeds."""
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        pass
    assert res["rc"] == 0, res["err"]
    r = run([STIPPLE, "cat", image, "/sub/secret.txt"], timeout=60)
    assert r.returncode == 0 and r.stdout == "inside-the-tree-" * 8, r.stderr


# The output file


def test_file_size_limit_gives_efbig_and_no_temp(tmp_path, out):
    src = tmp_path / "src"
    src.mkdir()
    (src / "noise").write_bytes(os.urandom(2 << 20))
    image = out / "x.stipple"
    limit = 256 << 10

    def small_fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    r = run([MKSTIPPLE, "--quiet", *FAST, src, image], timeout=300, preexec_fn=small_fsize)
    assert r.returncode > 0, "exit %d (a signal, or success past the limit):\n%s" % (
        r.returncode, r.stderr)
    assert r.returncode < 128, r.stderr
    assert str(image) in r.stderr and "File too large" in r.stderr, r.stderr
    assert_no_output(out)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: s.name)
def test_signal_removes_temp_file(tmp_path, out, sig):
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    with paused_build(tmp_path, src, image) as res:
        temps = os.listdir(out)
        assert len(temps) == 1 and temps[0].startswith("x.stipple.tmp."), temps
        res["proc"].send_signal(sig)
        res["proc"].wait(timeout=HANG)
    assert res["rc"] == -sig, "exit %s, not killed by %s:\n%s" % (res["rc"], sig.name,
                                                                   res["err"])
    assert_no_output(out)


def test_directory_synced_after_rename(tmp_path, out):
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    src, _ = make_src(tmp_path)
    image = out / "x.stipple"
    log = tmp_path / "trace"
    # -y: every descriptor shown with its path, whether the calls name paths or use dirfds
    r = run(["strace", "-f", "-qq", "-y", "-o", log, "-e",
             "trace=openat,open,rename,renameat,renameat2,fsync,fdatasync",
             MKSTIPPLE, "--quiet", *FAST, src, image], timeout=300)
    assert r.returncode == 0, r.stderr
    lines = log.read_text().splitlines()
    renames = [i for i, l in enumerate(lines) if "rename" in l and '%s"' % image.name in l
               and str(out) in l and l.endswith("= 0")]
    assert renames, "no rename into %s:\n%s" % (image, "\n".join(lines[-20:]))
    for l in lines[renames[-1]:]:
        if "fsync(" in l and "<%s>" % out in l and l.endswith("= 0"):
            return
    pytest.fail("the directory %s was not fsynced after the rename:\n%s"
                % (out, "\n".join(lines[renames[-1]:])))


# stipple extract and modes


@contextlib.contextmanager
def world_dir():
    """A directory under /tmp the user nobody can reach (pytest's tmp_path is not)."""
    d = tempfile.mkdtemp(prefix="stipple-modes-")
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        run(["chmod", "-R", "u+rwx", d])
        shutil.rmtree(d, ignore_errors=True)


MODES = {"suid": (stat.S_IFREG, 0o6755), "sgid-only": (stat.S_IFREG, 0o2711),
         "plain": (stat.S_IFREG, 0o666), "private": (stat.S_IFREG, 0o600),
         "sgid-dir": (stat.S_IFDIR, 0o2775), "sticky-dir": (stat.S_IFDIR, 0o1777),
         "ro-dir": (stat.S_IFDIR, 0o555), "fifo": (stat.S_IFIFO, 0o666)}


def modes_image(d):
    """An image of files in every mode of MODES (the tests that use it need root)."""
    if not shutil.which("setpriv"):
        pytest.skip("needs setpriv")
    src = os.path.join(d, "src")
    os.mkdir(src)
    for name, (kind, mode) in MODES.items():
        p = os.path.join(src, name)
        if kind == stat.S_IFDIR:
            os.mkdir(p)
        elif kind == stat.S_IFIFO:
            os.mkfifo(p)
        else:
            with open(p, "wb") as f:
                f.write(b"#!/bin/sh\n")
        os.chown(p, 1234, 5678)
        os.chmod(p, mode)
    image = os.path.join(d, "modes.stipple")
    imageutil.build(src, image, *FAST)
    os.chmod(image, 0o644)
    return src, image


def extract_with_umask(image, dest, mask, user):
    def prepare():
        os.umask(mask)

    cmd = [STIPPLE, "extract", image, dest]
    if user:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return run(cmd, timeout=120, preexec_fn=prepare)


@pytest.mark.needs_root("extracts as another user")
def test_extract_as_user_applies_umask_and_drops_setid():
    with world_dir() as d:
        src, image = modes_image(d)
        area = os.path.join(d, "area")
        os.mkdir(area)
        os.chmod(area, 0o777)
        dest = os.path.join(area, "tree")
        mask = 0o027
        r = extract_with_umask(image, dest, mask, user=True)
        assert r.returncode == 0, r.stderr
        for name, (kind, mode) in MODES.items():
            st = os.lstat(os.path.join(dest, name))
            want = mode & 0o1777 & ~mask
            assert stat.S_IFMT(st.st_mode) == kind, name
            assert stat.S_IMODE(st.st_mode) == want, "%s: %o, want %o (stored %o, umask %o)" % (
                name, stat.S_IMODE(st.st_mode), want, mode, mask)
            assert (st.st_uid, st.st_gid) == (65534, 65534), name


@pytest.mark.needs_root("restores owners")
def test_extract_as_root_restores_modes_and_owners():
    with world_dir() as d:
        src, image = modes_image(d)
        dest = os.path.join(d, "tree")
        r = extract_with_umask(image, dest, 0o077, user=False)
        assert r.returncode == 0, r.stderr
        for name in MODES:
            a, b = os.lstat(os.path.join(src, name)), os.lstat(os.path.join(dest, name))
            assert b.st_mode == a.st_mode, "%s: %o, stored %o" % (name, b.st_mode, a.st_mode)
            assert (b.st_uid, b.st_gid) == (1234, 5678), name


def test_folder_deeper_than_the_readers_reach_is_refused(tmp_path):
    """A folder nested past the 4,094-byte paths the readers walk is refused with a
    message naming the path, as an archive entry is; one at the bound builds. The scan
    recurses once per level, so the bound also keeps its stack small."""
    src = tmp_path / "src"
    out = tmp_path / "deep.stp"
    src.mkdir()
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(2047):  # "d/d/.../d" is 4,093 bytes: within reach
            os.mkdir("d", dir_fd=fd)
            sub = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = sub
        os.mkdir("ok", dir_fd=fd)  # 4,096 bytes: one past
    finally:
        os.close(fd)
    try:
        res = run([MKSTIPPLE, "-q", "--level", "1", src, out], timeout=HANG)
        assert res.returncode == 1, res.stderr
        assert "ok: refused: the readers take paths of at most 4094 bytes" in res.stderr
        assert not os.path.exists(out)
    finally:
        subprocess.run(["rm", "-rf", str(src)], check=True)
