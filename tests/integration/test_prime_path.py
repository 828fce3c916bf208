# SPDX-License-Identifier: MIT
"""Priming looks the hot files up beneath the mount point's parent pinned before the
mount, never by the path again (review 2 #8), and only in the mount made (review 3 #6)."""

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import STIPPLE, build_image, is_mounted, unmount


def _hot_image(tmp_path):
    """A tree of 4 files, all hot, and its image (absolute path)."""
    tree = tmp_path / "tree"
    (tree / "hot").mkdir(parents=True)
    for i in range(4):
        (tree / "hot" / ("f%d" % i)).write_bytes(os.urandom(8192))
    hot = tmp_path / "hot.list"
    hot.write_text("".join("hot/f%d\n" % i for i in range(4)))
    return tree, os.fspath(build_image(tree, tmp_path / "app.stp", "--level", "1",
                                       "--hot-list", hot))


@pytest.mark.needs_root
def test_priming_follows_no_path_swapped_after_the_mount(tmp_path):
    """The monitor reopened the mount point by its path to prime: a user who owns a
    directory on that path renames it once the mount is live and leaves a link in its
    place, and root's lookups go to a directory of hers (here a plain one: priming
    fails, a warning). strace holds each open of the mount point's full path 3 s while
    the path is swapped: the lookups still reach the mount, no warning."""
    if not shutil.which("strace"):
        pytest.skip("needs strace")
    tree, image = _hot_image(tmp_path)
    apps = tmp_path / "apps"
    (apps / "mnt").mkdir(parents=True)
    decoy = tmp_path / "decoy"
    (decoy / "mnt").mkdir(parents=True)
    mnt = os.fspath(apps / "mnt")
    log = tmp_path / "stderr"
    # the monitor only (no -f): the daemon and the watcher outlive the command
    p = subprocess.Popen(["strace", "-o", "/dev/null", "-P", mnt, "-e", "trace=open,openat",
                          "-e", "inject=open,openat:delay_enter=3000000",
                          STIPPLE, "mount", "--warm-workers", "2", image, mnt],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    moved = tmp_path / "apps-moved"
    try:
        deadline = time.monotonic() + 60
        while not is_mounted(mnt):
            assert time.monotonic() < deadline and p.poll() is None, log.read_text()
            time.sleep(0.01)
        os.rename(apps, moved)
        os.symlink(decoy, apps)
        p.wait(timeout=60)
        err = log.read_text()
    finally:
        if moved.exists():
            unmount(moved / "mnt")
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "priming" not in err, err


def _holds_dev_fuse(tracer):
    """Whether the process TRACER runs (the monitor) has /dev/fuse open."""
    with contextlib.suppress(OSError):
        with open("/proc/%d/task/%d/children" % (tracer, tracer)) as f:
            for pid in f.read().split():
                for fd in os.listdir("/proc/%s/fd" % pid):
                    with contextlib.suppress(OSError):
                        if os.readlink("/proc/%s/fd/%s" % (pid, fd)) == "/dev/fuse":
                            return True
    return False


@contextlib.contextmanager
def _temporary_user():
    """A user of its own (fusermount3 wants a name for the uid), removed afterwards."""
    if not shutil.which("useradd"):
        pytest.skip("needs useradd")
    name = "stpprime%d" % os.getpid()
    subprocess.run(["useradd", "-M", "-N", "-s", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    try:
        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@contextlib.contextmanager
def _users_may_mount_for_others():
    """/dev/fuse open to every user and user_allow_other in /etc/fuse.conf, both put back
    afterwards: what a user needs to mount a FUSE file system root's processes can enter."""
    mode = os.stat("/dev/fuse").st_mode & 0o7777
    with open("/etc/fuse.conf") as f:
        conf = f.read()
    os.chmod("/dev/fuse", 0o666)
    try:
        if "\nuser_allow_other" not in "\n" + conf:
            with open("/etc/fuse.conf", "a") as f:
                f.write("\nuser_allow_other\n")
        yield
    finally:
        with open("/etc/fuse.conf", "w") as f:
            f.write(conf)
        os.chmod("/dev/fuse", mode)


@pytest.mark.needs_root
def test_priming_never_reaches_a_users_mount_put_where_the_mount_point_was(tmp_path):
    """Root mounts on the directory pinned at the check; a user who owns its parent
    renames it while the monitor is about to mount (strace holds mount(2) 4 s), makes a
    new one by the old name and mounts her own FUSE file system there (squashfuse, named
    like ours: fsname the image, subtype stipple, allow_other). Root's mount lands on the
    renamed directory; priming used to look the mount point up again by its name and
    sent her file system the hot files' names as LOOKUPs (libfuse's -d log shows them).
    Now it primes only the mount made: none reaches her, and the monitor says so."""
    for tool in ("strace", "squashfuse", "mksquashfs", "setpriv", "fusermount3"):
        if not shutil.which(tool):
            pytest.skip("needs " + tool)
    tree, image = _hot_image(tmp_path)
    base = tempfile.mkdtemp(prefix="stipple-prime-user-")
    os.chmod(base, 0o755)
    apps = os.path.join(base, "apps")
    mnt, moved = os.path.join(apps, "mnt"), os.path.join(apps, "mnt.old")
    os.mkdir(apps)
    os.mkdir(mnt)
    hers = os.path.join(base, "hers.sqfs")
    subprocess.run(["mksquashfs", tree, hers, "-quiet", "-noappend"], check=True,
                   capture_output=True)
    log, her_log = tmp_path / "stderr", tmp_path / "hers.log"
    with _temporary_user() as uid, _users_may_mount_for_others():
        for d in (apps, mnt):
            os.chown(d, uid, uid)
        as_her = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % uid, "--clear-groups"]
        p = q = None
        try:
            # libfuse opens /dev/fuse just before mount(2), which then waits 4 s
            p = subprocess.Popen(["strace", "-o", "/dev/null", "-e", "trace=mount",
                                  "-e", "inject=mount:delay_enter=4000000",
                                  STIPPLE, "mount", "--warm-workers", "2", image, mnt],
                                 stdout=subprocess.DEVNULL, stderr=open(log, "w"))
            deadline = time.monotonic() + 60
            while not _holds_dev_fuse(p.pid):
                assert time.monotonic() < deadline and p.poll() is None, log.read_text()
                time.sleep(0.01)
            os.rename(mnt, moved)
            os.mkdir(mnt)
            os.chown(mnt, uid, uid)
            q = subprocess.Popen(as_her + ["squashfuse", "-f", "-d", "-o",
                                           "allow_other,subtype=stipple,fsname=" + image,
                                           hers, mnt],
                                 stdout=subprocess.DEVNULL, stderr=open(her_log, "w"))
            while not is_mounted(mnt):
                assert time.monotonic() < deadline and q.poll() is None, her_log.read_text()
                time.sleep(0.01)
            p.wait(timeout=60)
            err = log.read_text()
            assert p.returncode == 0, err
            assert is_mounted(moved)  # root's mount: on the directory it checked
            with open(os.path.join(moved, "hot", "f1"), "rb") as f:
                assert f.read() == (tree / "hot" / "f1").read_bytes()
        finally:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
            unmount(moved)
            unmount(mnt)
            if q is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    q.wait(timeout=10)
                if q.poll() is None:
                    q.kill()
                    q.wait()
            shutil.rmtree(base, ignore_errors=True)
    looked_up = [line for line in her_log.read_text().splitlines() if "LOOKUP" in line]
    assert not looked_up, looked_up
    assert "priming" in err and "not the mount made" in err, err
