# SPDX-License-Identifier: MIT
"""The Debian package, end to end: debian/ builds a .deb from a copy of the checkout
(dpkg-buildpackage, nocheck), lintian finds no error in it, apt-get installs it, the
stipple user exists, `mount -t fuse.stipple` and an fstab line mount an image through the
installed /sbin/mount.fuse.stipple with the daemon running as that user, the bytes read
match the source, and apt-get purge leaves none of the package's files behind.

Root only, and only where stipple is not installed already (the test must not remove an
administrator's package). The build takes most of the time (the whole project,
DEB_BUILD_OPTIONS=nocheck parallel=2)."""

import os
import pwd
import shutil
import subprocess
import time

import pytest

import mounts
from conftest import REPO, is_mounted, run, unmount

PKG = "stipple"

pytestmark = pytest.mark.needs_root("installs a package: needs root")


def installed(pkg):
    r = run(["dpkg-query", "-W", "-f=${Status}", pkg])
    return r.returncode == 0 and r.stdout.endswith(" installed")


def copy_checkout(dest):
    """The files git tracks or would track (the working tree as it is, build folders
    left out), so the build never writes into the repository."""
    r = run(["git", "-C", REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard"])
    if r.returncode != 0:
        shutil.copytree(REPO, dest, symlinks=True,
                        ignore=shutil.ignore_patterns("build", "build-*", ".git"))
        return
    for rel in filter(None, r.stdout.split("\0")):
        src = os.path.join(REPO, rel)
        if not os.path.lexists(src):
            continue  # deleted in the working tree
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        if os.path.islink(src):
            os.symlink(os.readlink(src), os.path.join(dest, rel))
        else:
            shutil.copy2(src, os.path.join(dest, rel))


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """Builds the package once; returns (path of the .deb, seconds the build took)."""
    for tool in ("dpkg-buildpackage", "dh", "apt-get"):
        if not shutil.which(tool):
            pytest.skip("needs %s (dpkg-dev, debhelper; .ci/run installs them)" % tool)
    if installed(PKG):
        pytest.skip("the %s package is installed on this machine: not touching it" % PKG)
    top = tmp_path_factory.mktemp("deb")
    src = top / "stipple"
    copy_checkout(src)
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck parallel=2", LC_ALL="C.UTF-8")
    start = time.monotonic()
    r = run(["nice", "dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env, timeout=1800)
    took = time.monotonic() - start
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    debs = [p for p in top.iterdir() if p.name.startswith(PKG + "_") and p.suffix == ".deb"]
    assert len(debs) == 1, list(top.iterdir())
    print("dpkg-buildpackage took %.0f s" % took)
    return debs[0], took


def test_lintian_finds_no_error(deb):
    if not shutil.which("lintian"):
        pytest.skip("needs lintian")
    r = run(["lintian", "--fail-on", "error", "--pedantic", "-I", str(deb[0])])
    print("lintian:\n" + r.stdout + r.stderr)
    errors = [ln for ln in r.stdout.splitlines() if ln.startswith("E: ")]
    assert not errors and r.returncode == 0, r.stdout + r.stderr


def test_contents_and_dependencies(deb):
    files = run(["dpkg-deb", "-c", str(deb[0])], check=True).stdout
    print("dpkg -c:\n" + files)
    names = {ln.split()[5] for ln in files.splitlines()}
    # mount(8) looks in /sbin only; nothing under /usr/local
    assert "./sbin/mount.stipple" in names and "./sbin/mount.fuse.stipple" in names
    assert "./usr/bin/stipple" in names and "./usr/bin/mkstipple" in names
    assert "./usr/lib/sysusers.d/stipple.conf" in names
    # the programs the monitor and the readers start, where they look for them
    for prog in ("stipple-mountd", "stipple-mountd-checked", "stipple-fetcher",
                 "mount.stipple-checked", "stipple-readers"):
        assert "./usr/libexec/stipple/" + prog in names, prog
    assert "./usr/share/bash-completion/completions/stipple" in names
    assert not any(n.startswith("./usr/local") for n in names), names
    depends = run(["dpkg-deb", "-f", str(deb[0]), "Depends"], check=True).stdout
    # from dpkg-shlibdeps: what the programs link
    for lib in ("libfuse3-3", "libzstd1", "libseccomp2", "libarchive13", "fuse3"):
        assert lib in depends, depends


def deb_files(path):
    """The paths of the files and links (not folders) the .deb holds, as dpkg -L gives
    them. On merged /usr the file system cannot tell: /sbin is a link there."""
    out = run(["dpkg-deb", "-c", str(path)], check=True).stdout
    return {ln.split()[5][1:] for ln in out.splitlines()
            if not ln.startswith("d")}


def processes_of(uid, mnt):
    """Pids running as UID whose command line names MNT (other mounts on this machine
    may run as the same user)."""
    want = os.fsencode(os.path.realpath(mnt))
    pids = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/status" % d) as f:
                uids = next(ln for ln in f if ln.startswith("Uid:")).split()[1:]
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
        except (OSError, StopIteration):
            continue
        if int(uids[0]) == uid and any(os.path.realpath(a) == want for a in args if a):
            pids.append(int(d))
    return pids


def running_from(paths):
    """Pids whose program is one of PATHS (even deleted since)."""
    pids = []
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            exe = os.readlink("/proc/%s/exe" % d)
        except OSError:
            continue
        if exe.removesuffix(" (deleted)") in paths:
            pids.append(int(d))
    return pids


def make_tree(root):
    """A small tree with a file of several blocks, so that a read decodes real blocks."""
    os.makedirs(root / "a" / "b")
    big = b"".join(b"line %08d of the stipple package test\n" % i for i in range(60000))
    (root / "a" / "b" / "big.txt").write_bytes(big)
    (root / "small").write_text("hello from the package\n")
    return {"a/b/big.txt": big, "small": b"hello from the package\n"}


def check_mount(mnt, want, uid):
    assert is_mounted(mnt)
    m = mounts.at(mnt)
    assert m is not None and m.fstype == "fuse.stipple", m
    for rel, data in want.items():
        with open(os.path.join(mnt, rel), "rb") as f:
            assert f.read() == data, rel
    assert processes_of(uid, mnt), "no process runs as the stipple user while mounted"


FSTAB_GENERATOR = "/lib/systemd/system-generators/systemd-fstab-generator"


def unit_settings(path):
    with open(path) as f:
        return dict(ln.strip().split("=", 1) for ln in f if "=" in ln and not ln.startswith("#"))


def mount_as_systemd_would(image, mnt, tmp_path, want, uid):
    """The README's automount line: systemd's own fstab generator turns it into an
    automount unit and a mount unit, and the mount unit's mount(8) command works through
    the installed helper. (PID 1 here is not systemd: the automount itself cannot be
    triggered.)"""
    if not os.access(FSTAB_GENERATOR, os.X_OK):
        return
    fstab = tmp_path / "fstab.automount"
    fstab.write_text("%s %s fuse.stipple ro,nofail,x-systemd.automount,"
                     "x-systemd.idle-timeout=10min 0 0\n" % (image, mnt))
    out = tmp_path / "generator"
    out.mkdir()
    r = run([FSTAB_GENERATOR, out, out, out], env=dict(os.environ, SYSTEMD_FSTAB=str(fstab)))
    assert r.returncode == 0, r.stderr
    units = {p.name: p for p in out.iterdir() if p.is_file()}
    automount = [n for n in units if n.endswith(".automount")]
    mount = [n for n in units if n.endswith(".mount")]
    assert len(automount) == 1 and len(mount) == 1, sorted(units)
    assert unit_settings(units[automount[0]])["TimeoutIdleSec"] == "10min"
    unit = unit_settings(units[mount[0]])
    assert unit["What"] == str(image) and unit["Where"] == str(mnt), unit
    assert unit["Type"] == "fuse.stipple", unit
    # what systemd runs for the mount unit
    r = run(["mount", unit["What"], unit["Where"], "-t", unit["Type"], "-o", unit["Options"]])
    try:
        assert r.returncode == 0, r.stderr
        check_mount(mnt, want, uid)
    finally:
        unmount(mnt)


def test_install_mount_purge(deb, tmp_path):
    had_user = True
    try:
        pwd.getpwnam(PKG)
    except KeyError:
        had_user = False
    dirs_before = set()
    try:
        start = time.monotonic()
        r = run(["apt-get", "install", "-y", "--no-install-recommends", str(deb[0])],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        listed = [p for p in run(["dpkg", "-L", PKG], check=True).stdout.split("\n")
                  if p and p != "/."]
        files = [p for p in listed if p.rstrip("/") in deb_files(deb[0])]
        dirs_before = set(listed) - set(files)
        assert "/sbin/mount.fuse.stipple" in files and "/usr/bin/stipple" in files

        user = pwd.getpwnam(PKG)
        assert 0 < user.pw_uid < 1000, user  # a system user
        assert user.pw_shell.endswith("nologin") or user.pw_shell == "/bin/false", user

        source = tmp_path / "src"
        want = make_tree(source)
        image = tmp_path / "t.stp"
        run(["/usr/bin/mkstipple", "-q", "-l", "3", "-b", "64K", source, image], check=True)
        mnt = tmp_path / "mnt"
        mnt.mkdir()

        r = run(["mount", "-t", "fuse.stipple", image, mnt])
        try:
            assert r.returncode == 0, r.stderr
            assert "nobody" not in r.stderr, r.stderr
            check_mount(mnt, want, user.pw_uid)
        finally:
            unmount(mnt)
        fstab = tmp_path / "fstab"
        fstab.write_text("%s %s fuse.stipple ro,nofail,cache_budget=2 0 0\n" % (image, mnt))
        r = run(["mount", "-T", fstab, mnt])
        try:
            assert r.returncode == 0, r.stderr
            check_mount(mnt, want, user.pw_uid)
        finally:
            unmount(mnt)
        assert not is_mounted(mnt)
        mount_as_systemd_would(image, mnt, tmp_path, want, user.pw_uid)
        # `stipple` finds its readers at their installed path, /proc or not (a chroot)
        r = run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                 "mount -t tmpfs none /proc && exec /usr/bin/stipple ls -R \"$0\"",
                 image], timeout=60)
        assert r.returncode == 0, r.stderr
        assert "stipple-readers" not in r.stderr and r.stdout.strip(), r
        print("install and mounts took %.1f s" % (time.monotonic() - start))

        start = time.monotonic()
        r = run(["apt-get", "purge", "-y", PKG],
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"), timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        print("purge took %.1f s" % (time.monotonic() - start))
        assert not installed(PKG)
        assert run(["dpkg-query", "-W", PKG]).returncode != 0, "dpkg still knows the package"
        left = [p for p in files if os.path.lexists(p)]
        assert not left, left
        # a folder the package made goes too, unless another package still uses it
        for d in sorted(dirs_before, reverse=True):
            if os.path.isdir(d) and run(["dpkg", "-S", d]).returncode != 0:
                assert os.listdir(d), "%s is left behind, empty" % d
        # The user stays (Debian keeps system users at purge: debian/stipple.postinst);
        # nothing of the package runs any more, as it or as anyone.
        uid = pwd.getpwnam(PKG).pw_uid
        assert not processes_of(uid, mnt), processes_of(uid, mnt)
        on_usr = set(files) | {"/usr" + p for p in files if p.startswith("/sbin/")}
        assert not running_from(on_usr), running_from(on_usr)
    finally:
        if installed(PKG) or run(["dpkg-query", "-W", PKG]).returncode == 0:
            run(["apt-get", "purge", "-y", PKG], env=dict(os.environ,
                DEBIAN_FRONTEND="noninteractive"), timeout=900)
        if not had_user:
            run(["userdel", PKG])
            run(["groupdel", PKG])


def test_postinst_without_sysusers(deb, tmp_path):
    """Where systemd-sysusers is absent, the postinst makes the user with adduser."""
    try:
        pwd.getpwnam(PKG)
        pytest.skip("a user %s exists already" % PKG)
    except KeyError:
        pass
    control = tmp_path / "control"
    run(["dpkg-deb", "-e", str(deb[0]), control], check=True)
    bindir = tmp_path / "bin"  # PATH without /usr/bin, where systemd-sysusers lives
    bindir.mkdir()
    for tool in ("getent",):
        os.symlink(shutil.which(tool), bindir / tool)
    env = {"PATH": "%s:/usr/sbin:/sbin" % bindir, "LC_ALL": "C"}
    try:
        r = subprocess.run(["/bin/sh", str(control / "postinst"), "configure"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        user = pwd.getpwnam(PKG)
        assert 0 < user.pw_uid < 1000 and user.pw_dir == "/nonexistent", user
        assert not os.path.exists(user.pw_dir)
    finally:
        run(["userdel", PKG])
        run(["groupdel", PKG])
