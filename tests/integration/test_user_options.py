# SPDX-License-Identifier: MIT
"""User mounts: an fstab line with `user`, mounted by an ordinary user through mount(8)
and fusermount3, refuses the options unsafe for users and serves the tree otherwise; a
mount.stipple made setuid refuses to run.

The test appends its lines to /etc/fstab (mount(8) reads no other table for a user) and
puts the file back as it was; it makes /dev/fuse open to users for its duration and puts
its mode back; it installs the helper in /sbin through test_mount's fixture."""

import contextlib
import os
import shutil
import stat
import subprocess
import tempfile
import time

import pytest

from conftest import MOUNT_STIPPLE, STIPPLE, _need, build_image, is_mounted, run, unmount
import mounts
from test_mount import helper_in_sbin  # noqa: F401 (a fixture)

pytestmark = pytest.mark.needs_root("user mounts are set up by root")

FSTAB = "/etc/fstab"
NOBODY = 65534
AS_NOBODY = ["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY, "--clear-groups"]
FILES = {"hello.txt": b"hello from a user mount\n", "sub/data.bin": bytes(range(256)) * 300}

# fstab line options -> what the refusal must name
REFUSED = {
    "suid": "user,suid",
    "dev": "user,dev",
    "record=": "user,record=%(base)s/rec/hot.list",
    "sandbox=off": "users,sandbox=off",
    "sandbox=log": "user,sandbox=log",
    "sandbox_user=": "user,sandbox_user=daemon",
}


@contextlib.contextmanager
def fstab_with(lines):
    """Appends LINES to /etc/fstab; afterwards the file holds exactly what it held, even if
    someone else changed it meanwhile (then only our lines are taken out)."""
    with open(FSTAB, "rb") as f:
        saved = f.read()
    mode = stat.S_IMODE(os.stat(FSTAB).st_mode)
    ours = "".join(line + "\n" for line in lines).encode()
    body = saved + (b"\n" if saved and not saved.endswith(b"\n") else b"")
    with open(FSTAB, "wb") as f:
        f.write(body + ours)
    try:
        yield
    finally:
        with open(FSTAB, "rb") as f:
            now = f.read()
        back = saved if now == body + ours else now.replace(ours, b"")
        with open(FSTAB, "wb") as f:
            f.write(back)
        os.chmod(FSTAB, mode)


@contextlib.contextmanager
def fuse_open_to_users():
    st = os.stat("/dev/fuse")
    os.chmod("/dev/fuse", 0o666)
    try:
        yield
    finally:
        os.chmod("/dev/fuse", stat.S_IMODE(st.st_mode))


def user_dir(path):
    os.mkdir(path)
    os.chown(path, NOBODY, NOBODY)
    return str(path)


@pytest.fixture(scope="module")
def user_lines(helper_in_sbin):  # noqa: F811
    """An image readable by nobody, one mount point per fstab line (owned by nobody, as
    fusermount3 wants), the lines in /etc/fstab and /dev/fuse open to users."""
    fusermount = shutil.which("fusermount3")
    if not shutil.which("setpriv") or not fusermount:
        pytest.skip("needs setpriv and fusermount3")
    if not os.stat(fusermount).st_mode & stat.S_ISUID:
        pytest.skip("fusermount3 is not setuid on this machine")
    base = tempfile.mkdtemp(prefix="stipple-useropts-")
    try:
        os.chmod(base, 0o755)
        tree = os.path.join(base, "tree")
        for rel, data in FILES.items():
            os.makedirs(os.path.dirname(os.path.join(tree, rel)), exist_ok=True)
            with open(os.path.join(tree, rel), "wb") as f:
                f.write(data)
        image = str(build_image(tree, os.path.join(base, "img.stipple"), "--level", "3"))
        os.chmod(image, 0o644)
        os.mkdir(os.path.join(base, "rec"))
        os.chmod(os.path.join(base, "rec"), 0o777)  # so only the refusal keeps it empty
        mnts = {"ok": user_dir(os.path.join(base, "ok"))}
        lines = ["%s %s fuse.stipple user,exec,cache_budget=2 0 0" % (image, mnts["ok"])]
        for i, (name, opts) in enumerate(REFUSED.items()):
            mnts[name] = user_dir(os.path.join(base, "refused-%d" % i))
            lines.append("%s %s fuse.stipple %s 0 0" % (image, mnts[name], opts % {"base": base}))
        with fstab_with(lines), fuse_open_to_users():
            try:
                yield {"base": base, "image": image, "mnts": mnts}
            finally:
                for m in mnts.values():
                    unmount(m)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def daemon_uids(image):
    """The real, effective, saved and fs uids of every process serving IMAGE."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            if image.encode() in argv:
                with open("/proc/%s/status" % pid) as f:
                    uid = next(ln for ln in f if ln.startswith("Uid:"))
                found.append([int(x) for x in uid.split()[1:]])
    return found


def mount_options(path):
    m = mounts.at(path)
    return m.vfs_options.split(",") if m else None


def test_user_line_mounts_for_the_user(user_lines):
    mnt = user_lines["mnts"]["ok"]
    r = run(AS_NOBODY + ["mount", mnt], timeout=60)
    assert r.returncode == 0, r.stderr
    try:
        deadline = time.monotonic() + 10
        while not is_mounted(mnt):
            assert time.monotonic() < deadline, "%s is not mounted" % mnt
            time.sleep(0.05)
        for rel, data in FILES.items():
            got = subprocess.run(AS_NOBODY + ["cat", os.path.join(mnt, rel)],
                                 stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
            assert got.returncode == 0 and got.stdout == data, (rel, got.stderr)
        opts = mount_options(mnt)
        assert "ro" in opts and "nosuid" in opts and "nodev" in opts, opts
        assert "noexec" not in opts, opts  # the line's exec overrides user's noexec
        uids = daemon_uids(user_lines["image"])
        assert uids and all(u == [NOBODY] * 4 for u in uids), uids
        r = run(AS_NOBODY + ["fusermount3", "-u", mnt], timeout=60)
        assert r.returncode == 0, r.stderr
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)


@pytest.mark.parametrize("option", list(REFUSED))
def test_user_line_refuses_unsafe_option(user_lines, option):
    mnt = user_lines["mnts"][option]
    r = run(AS_NOBODY + ["mount", mnt], timeout=60)
    assert r.returncode == 32, (r.returncode, r.stderr)
    assert "mount.stipple: option " + option in r.stderr, r.stderr
    assert "refused" in r.stderr, r.stderr
    assert not is_mounted(mnt)
    assert os.listdir(os.path.join(user_lines["base"], "rec")) == []
    assert daemon_uids(user_lines["image"]) == []


def test_root_mounting_a_user_line_is_refused_too(user_lines):
    """The line has to be safe for whoever mounts it: mount(8) passes `user` to the helper
    when root mounts it as well."""
    mnt = user_lines["mnts"]["sandbox=off"]
    r = run(["mount", mnt], timeout=60)
    try:
        assert r.returncode == 32, (r.returncode, r.stderr)
        assert "option sandbox=off: refused" in r.stderr, r.stderr
        assert not is_mounted(mnt)
    finally:
        unmount(mnt)


def test_user_running_the_helper_is_restricted(user_lines):
    """Run by hand as a user (no fstab line), the helper refuses what the user cannot have,
    -N among them, and `stipple mount` refuses the same options."""
    image, mnt = user_lines["image"], user_lines["mnts"]["ok"]
    cases = [(["-o", "nodev,suid"], "option suid: refused"),
             (["-o", "sandbox=off"], "option sandbox=off: refused"),
             (["-N", "1"], "option -N 1: refused")]
    for args, message in cases:
        r = run(AS_NOBODY + [_need(MOUNT_STIPPLE), image, mnt] + args, timeout=60)
        assert r.returncode == 32, (args, r.returncode, r.stderr)
        assert message in r.stderr, (args, r.stderr)
        assert not is_mounted(mnt)
    r = run(AS_NOBODY + [_need(STIPPLE), "mount", "-o", "dev", image, mnt], timeout=60)
    assert r.returncode == 1, r.stderr
    assert "option dev: refused" in r.stderr, r.stderr
    assert not is_mounted(mnt)


@contextlib.contextmanager
def setid_copy(program, base, bits):
    """A copy of PROGRAM in BASE, owned by root, with mode 0755 and BITS; removed after.
    Yields its path."""
    if os.statvfs(base).f_flag & os.ST_NOSUID:
        pytest.skip("%s is on a nosuid file system" % base)
    copy = os.path.join(base, os.path.basename(program) + ".setid")
    shutil.copy(_need(program), copy)
    try:
        os.chown(copy, 0, 0)
        os.chmod(copy, 0o755 | bits)
        yield copy
    finally:
        os.unlink(copy)


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID], ids=["setuid", "setgid"])
def test_setuid_stipple_refuses_to_run(user_lines, bits):
    """`stipple mount` runs the monitor in its own process, and the other commands run as
    `stipple` does: a copy made setuid or setgid refuses before it reads a single option
    (--help included), whatever the command."""
    with setid_copy(STIPPLE, user_lines["base"], bits) as copy:
        for command in ("mount", "extract"):
            r = run(AS_NOBODY + [copy, command, "--help"], timeout=60)
            assert r.returncode == 1 and not r.stdout, (r.returncode, r.stdout, r.stderr)
            assert "refusing to run setuid or setgid" in r.stderr, r.stderr
        os.chmod(copy, 0o755)
        r = run(AS_NOBODY + [copy, "mount", "--help"], timeout=60)
        assert r.returncode == 0 and "usage: stipple mount" in r.stdout, r


@pytest.mark.parametrize("bits", [stat.S_ISUID, stat.S_ISGID], ids=["setuid", "setgid"])
def test_setuid_helper_refuses_to_run(user_lines, bits):
    with setid_copy(MOUNT_STIPPLE, user_lines["base"], bits) as copy:
        mnt = user_lines["mnts"]["ok"]
        r = run(AS_NOBODY + [copy, user_lines["image"], mnt, "-f"], timeout=60)
        assert r.returncode == 1, (r.returncode, r.stderr)
        assert "refusing to run setuid or setgid" in r.stderr, r.stderr
        assert not is_mounted(mnt)
        # the same copy without the bit: no such refusal (-f checks without mounting)
        os.chmod(copy, 0o755)
        r = run(AS_NOBODY + [copy, user_lines["image"], mnt, "-f"], timeout=60)
        assert "refusing to run" not in r.stderr, r.stderr
