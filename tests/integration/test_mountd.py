# SPDX-License-Identifier: MIT
"""The daemon as a program of its own (issue 30, item 1) and a second mount on the same
directory (issue 29): what the kernel, /proc and ldd say, not what stipple says.

- a mount is served by stipple-mountd, exec'd from the build tree beside the helper,
  with no environment and no descriptor beyond its own; the fetcher likewise links
  libcurl alone;
- told its sandbox mode first, root's daemon is in its empty root before it is given
  anything else;
- a directory that is already a mount point of any kind is refused, naming the source
  and type there, with exit 32 (mount.stipple) or 1 (stipple mount); -o stack mounts on
  top of it."""

import os
import shutil
import socket
import struct
import subprocess
import time

import pytest

import mounts

from conftest import (MKSTIPPLE, MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, linked, run,
                      unmount)

needs_root = pytest.mark.needs_root("mounting tests need root")
MOUNTD = os.path.join(os.path.dirname(MOUNT_STIPPLE), "stipple-mountd")
MOUNTD_CHECKED = os.path.join(os.path.dirname(MOUNT_STIPPLE), "stipple-mountd-checked")
FETCHER = os.path.join(os.path.dirname(MOUNT_STIPPLE), "stipple-fetcher")
READERS = os.path.join(os.path.dirname(STIPPLE), "stipple-readers")


def mounts_at(path):
    """(source, fstype) of each mount at PATH, in the order made, from the kernel."""
    path = os.path.realpath(path)
    return [(m.source, m.fstype) for m in mounts.table() if m.target == path]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    for exe in (STIPPLE, MKSTIPPLE, MOUNT_STIPPLE, MOUNTD):
        if not os.access(exe, os.X_OK):
            pytest.skip("%s is not built" % exe)
    base = tmp_path_factory.mktemp("mountd")
    made = {}
    for name in ("a", "b"):
        tree = base / ("tree-" + name)
        tree.mkdir()
        (tree / "which").write_text(name + "\n")
        made[name] = str(base / (name + ".stipple"))
        build_image(str(tree), made[name], "--level", "3")
    return made


@pytest.fixture
def mnt(tmp_path):
    path = tmp_path / "mnt"
    path.mkdir()
    yield str(path)
    for _ in range(4):
        unmount(str(path))


def test_programs_link_only_what_they_use():
    for exe in (STIPPLE, READERS, MOUNT_STIPPLE, MOUNTD, FETCHER):
        if not os.access(exe, os.X_OK):
            pytest.skip("%s is not built" % exe)
    stipple, readers, helper, mountd, fetcher = map(
        linked, (STIPPLE, READERS, MOUNT_STIPPLE, MOUNTD, FETCHER))
    # `stipple` runs the mount's monitor itself, as mount.stipple does, and execs the
    # readers for the rest: the same libraries as mount.stipple, none of the readers'
    for lib in ("libfuse3.so.3", "libseccomp.so.2"):
        assert lib not in readers, lib
        assert lib in helper and lib in stipple, lib
    for lib in ("libcrypto.so.3", "libjansson.so.4"):
        assert lib not in stipple and lib not in helper, lib
    assert "libjansson.so.4" in readers, readers
    assert "libfuse3.so.3" in mountd, mountd
    # its loop cancels no thread (mounthelper/mount/serveloop.h): glibc's unwinder,
    # libgcc_s, is neither loaded nor needed
    assert "libgcc_s.so.1" not in mountd, mountd
    # the monitor builds the daemon's seccomp filter while it execs and hands it over:
    # the daemon loads it with one system call, and neither compiles nor probes
    assert "libseccomp.so.2" not in mountd, mountd
    if os.access(MOUNTD_CHECKED, os.X_OK):
        assert "libseccomp.so.2" not in linked(MOUNTD_CHECKED)
    # the sandbox and the watcher make their capability calls themselves (every mount's
    # start skips libcap's)
    for exe in (stipple, readers, helper, mountd, fetcher):
        assert "libcap.so.2" not in exe, exe
    for lib in ("libcurl.so.4", "libarchive.so.13"):
        assert lib not in helper and lib not in mountd, lib
    # libcrypto only in the daemon of URLs and verify= (its start costs a plain mount)
    assert "libcrypto.so.3" not in mountd, mountd
    if os.access(MOUNTD_CHECKED, os.X_OK):
        checked = linked(MOUNTD_CHECKED)
        assert "libcrypto.so.3" in checked and "libfuse3.so.3" in checked, checked
        assert "libcurl.so.4" not in checked, checked
    # URLs are reached through stipple-fetcher alone (the readers start it too)
    assert "libcurl.so.4" in fetcher and "libcurl.so.4" not in readers
    assert "libfuse3.so.3" not in fetcher
    # extract --tar encodes its own headers: libarchive (and libxml2, ICU, libstdc++ with
    # it) would cost every stipple command, `stipple mount` first, about 5 ms of start
    assert "libarchive.so.13" not in readers and "libarchive.so.13" not in stipple, readers
    for exe in (STIPPLE, READERS):
        r = run(["nm", "-D", "--undefined-only", exe])
        assert "dlopen" not in r.stdout, exe
    # no libmount in any mount program: it and what it loads (libblkid, libselinux,
    # pcre2) cost every mount about 2 ms; options and mountinfo are read by our own code
    for exe in (stipple, helper, mountd, fetcher):
        assert "libmount.so.1" not in exe and "libblkid.so.1" not in exe, exe


def test_programs_say_their_version():
    for exe in (MOUNT_STIPPLE, MOUNTD, FETCHER):
        if not os.access(exe, os.X_OK):
            pytest.skip("%s is not built" % exe)
        for flag in ("-V", "--version"):
            r = run([exe, flag])
            assert r.returncode == 0 and r.stdout.startswith(os.path.basename(exe) + " "), r
    r = run([MOUNTD])  # by hand: it says what it is, and does nothing
    assert r.returncode == 2 and "mount.stipple" in r.stderr


def test_stipple_hands_every_command_but_mount_to_the_readers(tmp_path):
    """`stipple` execs stipple-readers for the other commands with the arguments as
    given; outside its build tree it looks only where the package installs it, and says
    so when it is not there."""
    r = run([STIPPLE, "--version"])
    assert r.returncode == 0 and r.stdout.startswith("stipple "), r
    r = run([STIPPLE])
    assert r.returncode == 2 and "mount " in r.stderr and "extract " in r.stderr, r
    r = run([STIPPLE, "no-such-command"])
    assert r.returncode == 2 and "unknown command 'no-such-command'" in r.stderr, r
    r = run([READERS, "mount", "a.stp", str(tmp_path)])
    assert r.returncode == 2 and "run by stipple itself" in r.stderr, r
    copy = tmp_path / "stipple"
    shutil.copy(STIPPLE, copy)
    if any(os.path.exists(os.path.join(d, "libexec/stipple/stipple-readers"))
           for d in ("/usr", "/usr/local")):
        pytest.skip("stipple-readers is installed on this machine")
    r = run([copy, "ls", "a.stp"])
    assert r.returncode == 1 and not r.stdout, r
    assert "/libexec/stipple/stipple-readers: No such file" in r.stderr, r.stderr


def daemons_of(mnt):
    """{pid: the program it runs} of each stipple daemon serving MNT, from /proc."""
    found = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink("/proc/%s/exe" % d)
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args[0] == b"stipple-mountd" and os.fsencode(os.path.realpath(mnt)) in args:
            found[d] = exe
    return found


@needs_root
def test_daemon_is_the_exec_d_program(images, mnt):
    r = run([STIPPLE, "mount", images["a"], mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "a\n"
    found = daemons_of(mnt)
    daemons = [d for d, exe in found.items() if exe == os.path.realpath(MOUNTD)]
    assert len(daemons) == 1 and len(found) == 1, found
    with open("/proc/%s/environ" % daemons[0], "rb") as f:
        assert f.read() == b""  # nothing of the caller's environment
    fds = os.listdir("/proc/%s/fd" % daemons[0])
    assert len(fds) <= 12, fds  # stdio, the image, /dev/fuse, the ending pipe: no leftovers


# The monitor protocol as monproto.h and sandbox.h number it: the SANDBOX message, and the
# modes it carries.
MSG_SANDBOX, SANDBOX_ON, SANDBOX_OFF = 11, 0, 2
MONITOR_FD = 3


def daemon_told(mode):
    """stipple-mountd started as the monitor starts it (its socket on fd 3), told MODE and
    nothing else yet: the process, and the monitor's end of the socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    p = subprocess.Popen([MOUNTD], env={}, stdin=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, close_fds=False,
                         preexec_fn=lambda: os.dup2(theirs.fileno(), MONITOR_FD))
    theirs.close()
    ours.send(struct.pack("=II", MSG_SANDBOX, mode))
    return p, ours


@needs_root
def test_daemon_enters_its_empty_root_before_its_setup():
    """Root's daemon, told the sandbox mode, has an empty tmpfs root at once, and sees no
    mount but that one (sandbox.c: a tmpfs made detached, or where the kernel refuses
    that, a private namespace): before the monitor has mounted or sent its SETUP.
    sandbox=off: it stays in the host's namespace. Without a SETUP it then fails, and
    exits."""
    for mode in (SANDBOX_ON, SANDBOX_OFF):
        p, sock = daemon_told(mode)
        root = "/proc/%d/root" % p.pid
        try:
            deadline = time.monotonic() + 10
            while (mode == SANDBOX_ON and os.path.samefile(root, "/") and
                   time.monotonic() < deadline and p.poll() is None):
                time.sleep(0.01)
            if mode == SANDBOX_OFF:
                time.sleep(0.3)
            assert p.poll() is None, "the daemon exited before its SETUP"
            seen = mounts.table(p.pid)
            if mode == SANDBOX_ON:
                assert len(seen) <= 1, seen
                assert all(m.target == "/" and m.fstype == "tmpfs" for m in seen), seen
                assert mounts.is_own_empty_root(p.pid, root)
            else:
                assert os.readlink("/proc/%d/ns/mnt" % p.pid) == os.readlink("/proc/self/ns/mnt")
                assert os.path.samefile(root, "/")
                assert len(seen) > 1
        finally:
            sock.close()  # no SETUP will come
            assert p.wait(timeout=30) == 1  # STP_DAEMON_FAILED


@needs_root
def test_verify_is_served_by_the_checked_daemon(images, mnt, tmp_path):
    """A plain mount runs stipple-mountd, which has no libcrypto; verify= needs the
    signature checked, so the monitor runs stipple-mountd-checked for it."""
    if not os.access(MOUNTD_CHECKED, os.X_OK):
        pytest.skip("stipple-mountd-checked is not built")
    sec, pub = str(tmp_path / "k.key"), str(tmp_path / "k.pub")
    image = str(tmp_path / "signed.stipple")
    with open(images["b"], "rb") as src, open(image, "wb") as dst:
        dst.write(src.read())
    run([STIPPLE, "keygen", sec, pub], check=True)
    run([STIPPLE, "sign", image, sec], check=True)
    r = run([MOUNT_STIPPLE, image, mnt, "-o", "verify=" + pub], timeout=60)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "b\n"
    found = daemons_of(mnt)
    assert list(found.values()) == [os.path.realpath(MOUNTD_CHECKED)], found
    unmount(mnt)
    r = run([MOUNT_STIPPLE, image, mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    assert list(daemons_of(mnt).values()) == [os.path.realpath(MOUNTD)]


@needs_root
@pytest.mark.parametrize("prog", ["mount.stipple", "stipple mount"])
def test_second_mount_on_a_mount_point_is_refused(images, mnt, prog):
    r = run([STIPPLE, "mount", "--no-prime", images["a"], mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    before = mounts_at(mnt)
    assert before == [(os.path.realpath(images["a"]), "fuse.stipple")]
    cmd = [MOUNT_STIPPLE, images["b"], mnt] if prog == "mount.stipple" else \
        [STIPPLE, "mount", images["b"], mnt]
    r = run(cmd, timeout=60)
    assert r.returncode == (32 if prog == "mount.stipple" else 1), r.stderr
    assert "already a mount point" in r.stderr
    assert os.path.realpath(images["a"]) in r.stderr and "fuse.stipple" in r.stderr
    assert mounts_at(mnt) == before
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "a\n"


@needs_root
def test_mount_point_of_another_kind_is_named(images, mnt):
    r = run(["mount", "-t", "tmpfs", "-o", "size=1m", "stipple-dbl-test", mnt])
    assert r.returncode == 0, r.stderr
    r = run([MOUNT_STIPPLE, images["a"], mnt], timeout=60)
    assert r.returncode == 32
    assert "stipple-dbl-test" in r.stderr and "tmpfs" in r.stderr, r.stderr
    assert mounts_at(mnt) == [("stipple-dbl-test", "tmpfs")]


@needs_root
def test_stack_mounts_on_top(images, mnt):
    r = run([STIPPLE, "mount", "--no-prime", images["a"], mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    r = run([MOUNT_STIPPLE, images["b"], mnt, "-o", "stack,noprime"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert mounts_at(mnt) == [(os.path.realpath(images["a"]), "fuse.stipple"),
                              (os.path.realpath(images["b"]), "fuse.stipple")]
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "b\n"
    subprocess.run(["umount", mnt], check=True)
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "a\n"
    assert is_mounted(mnt)


@needs_root
def test_option_too_long_to_hand_over_is_refused_before_mounting(images, mnt, tmp_path):
    """An image path near PATH_MAX makes the options given to the kernel (fsname=PATH)
    longer than the 4096 bytes the hand-over to the daemon carries: refused up front,
    naming them, rather than mounted and then undone."""
    deep = tmp_path
    while len(str(deep)) < 3900:
        deep = deep / ("d" * 200)
    deep.mkdir(parents=True)
    image = deep / "a.stipple"
    os.link(images["a"], image)
    r = run([MOUNT_STIPPLE, str(image), mnt], timeout=60)
    assert r.returncode == 32, r.stderr
    assert "fuse_opts" in r.stderr and "4096" in r.stderr, r.stderr
    assert "Protocol error" not in r.stderr, r.stderr
    assert mounts_at(mnt) == []


@pytest.mark.needs_root
@pytest.mark.parametrize("prog", ["mount.stipple", "stipple"])
def test_a_file_that_is_not_an_image_is_named_for_what_it_is(mnt, tmp_path, prog):
    """A tar or an empty file given as IMAGE: the mount says what it is and what to run,
    names no source file of stipple, exits as mount(8) does, and mounts nothing."""
    tar = tmp_path / "app.tar"
    subprocess.run(["tar", "-cf", str(tar), "-C", "/usr/share/doc", "bash"], check=True)
    empty = tmp_path / "empty.stp"
    empty.write_bytes(b"")
    for image, says in ((tar, "a tar archive, not a stipple image; build one with mkstipple"),
                        (empty, "an empty file, not a stipple image")):
        cmd = [MOUNT_STIPPLE, str(image), mnt] if prog == "mount.stipple" else \
            [STIPPLE, "mount", str(image), mnt]
        r = run(cmd, timeout=60)
        assert r.returncode == (32 if prog == "mount.stipple" else 1), r.stderr
        assert "%s: %s" % (image, says) in r.stderr, r.stderr
        assert ".c:" not in r.stderr, r.stderr
        assert not is_mounted(mnt)


@needs_root
def test_helper_leaves_without_the_libraries_destructors(images, mnt):
    """Once the mount is live, mount.stipple ends with _exit: the libraries' destructors
    (OpenSSL's, libmount's, libfuse's) only give memory back, and mount(8) would wait
    for them. The dynamic loader lists each one it runs under LD_DEBUG=libs ("calling fini"); the watcher,
    a fork of the helper, leaves the same way."""
    env = dict(os.environ, LD_DEBUG="libs")
    r = run([MOUNT_STIPPLE, images["a"], mnt], env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert is_mounted(mnt)
    with open(os.path.join(mnt, "which")) as f:
        assert f.read() == "a\n"
    assert "calling fini" not in r.stderr, r.stderr
    r = run([MOUNT_STIPPLE, "-V"], env=env)  # the check can fail: a plain exit does run them
    assert r.returncode == 0 and "calling fini" in r.stderr, r.stderr
