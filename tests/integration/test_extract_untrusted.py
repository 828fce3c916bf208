# SPDX-License-Identifier: MIT
"""`stipple extract --no-devices --no-setuid` (mount(8)'s nodev and nosuid, also taken
as --nodev and --nosuid): root restoring an image it does not trust. The result is
compared with the source tree the image was built from, an independent listing that
is not stipple's: every entry but the devices is there, with its type, owner, mode (less
setuid and setgid on what is not a directory), bytes and xattrs (less
security.capability). Each name of a device is named once on stderr, and the exit status
stays 0. Then the options alone and by their other names, their refusal with --tar, and a
user's "device not created" warning, whose name (the image's) is escaped (review 8)."""

import io
import os
import pwd
import shutil
import stat
import subprocess
import tarfile
import tempfile

import pytest

from conftest import MKSTIPPLE, STIPPLE, build_image
from imageutil import FAST

CAP = "security.capability"
# VFS_CAP_REVISION_2, effective, cap_net_raw (13) permitted: what setcap cap_net_raw+ep sets
CAP_VALUE = bytes.fromhex("01000002" "00200000" "00000000" "00000000" "00000000")
SETID = stat.S_ISUID | stat.S_ISGID

pytestmark = pytest.mark.needs_root("devices, owners and capabilities")


def make_source(root):
    """Every kind of entry, with devices (one with two names, one deeper down), setuid
    and setgid files, a setgid directory and a file capability."""
    d = root / "dir"
    d.mkdir(parents=True)
    (root / "plain").write_bytes(b"plain\n")
    for name, mode in (("suid", 0o4755), ("sgid", 0o2711), ("both", 0o6750)):
        (root / name).write_bytes(b"#!/bin/sh\n")
        os.chmod(root / name, mode)
    (root / "capped").write_bytes(b"capped\n")
    os.setxattr(root / "capped", "user.keep", b"kept")
    os.setxattr(root / "capped", CAP, CAP_VALUE)
    os.chown(root / "capped", 1234, 5678)
    gdir = root / "gdir"
    gdir.mkdir()
    os.chmod(gdir, 0o2775)
    os.mknod(root / "mem", stat.S_IFCHR | 0o666, os.makedev(1, 1))
    os.link(root / "mem", d / "mem-again")
    os.mknod(d / "loop", stat.S_IFBLK | 0o660, os.makedev(7, 200))
    os.mkfifo(d / "fifo")
    os.symlink("../plain", d / "link")
    return root


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(the source tree, its image)"""
    base = tmp_path_factory.mktemp("untrusted")
    source = make_source(base / "src")
    return source, build_image(source, base / "u.stipple", *FAST)


def extract(image, dest, *options, **kw):
    return subprocess.run([STIPPLE, "extract", *options, os.fspath(image), os.fspath(dest)],
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120, **kw)


def entries(root):
    """Every path below ROOT, relative, with its lstat."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.lstat(p)
    return out


def xattrs(path):
    return {n: os.getxattr(path, n, follow_symlinks=False)
            for n in os.listxattr(path, follow_symlinks=False)}


def check_tree(source, dest, devices, setid):
    """DEST against SOURCE: devices there only when DEVICES, setuid, setgid and the
    capability only when SETID; everything else as the source has it."""
    src, out = entries(source), entries(dest)
    want = {p for p, st in src.items()
            if devices or not (stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode))}
    assert set(out) == want
    for path in want:
        s, o = src[path], out[path]
        mode = s.st_mode
        if not setid and not stat.S_ISDIR(mode):
            mode &= ~SETID
        assert (o.st_mode, o.st_uid, o.st_gid) == (mode, s.st_uid, s.st_gid), path
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            assert o.st_rdev == s.st_rdev, path
        if stat.S_ISREG(mode):
            with open(source / path, "rb") as a, open(dest / path, "rb") as b:
                assert a.read() == b.read(), path
        if not stat.S_ISLNK(mode):
            x = xattrs(source / path)
            if not setid:
                x.pop(CAP, None)
            assert xattrs(dest / path) == x, path


def test_no_devices_no_setuid_restores_the_rest(built, tmp_path):
    source, image = built
    dest = tmp_path / "out"
    r = extract(image, dest, "--no-devices", "--no-setuid", text=True)
    assert r.returncode == 0, r.stderr
    check_tree(source, dest, devices=False, setid=False)
    # each name of a device named once, nothing else said
    named = sorted(line for line in r.stderr.splitlines())
    assert named == sorted("stipple extract: %s/%s: device left out (--no-devices)" % (dest, p)
                           for p in ("mem", "dir/mem-again", "dir/loop")), r.stderr


def test_default_keeps_devices_setuid_and_capabilities(built, tmp_path):
    """What the options take away is there without them: the test above can fail."""
    source, image = built
    dest = tmp_path / "out"
    r = extract(image, dest, text=True)
    assert r.returncode == 0 and not r.stderr, r.stderr
    check_tree(source, dest, devices=True, setid=True)


@pytest.mark.parametrize("options, devices, setid", [
    (("--no-devices",), False, True),
    (("--nodev",), False, True),
    (("--no-setuid",), True, False),
    (("--nosuid",), True, False),
    (("--nodev", "--nosuid", "-v"), False, False),
])
def test_each_option_alone_and_by_mounts_name(built, tmp_path, options, devices, setid):
    source, image = built
    dest = tmp_path / "out"
    r = extract(image, dest, *options, text=True)
    assert r.returncode == 0, r.stderr
    check_tree(source, dest, devices, setid)
    assert ("device left out" in r.stderr) == (not devices), r.stderr
    if "-v" in options:  # a device left out is not listed as written
        assert "mem" not in r.stdout.split() and "dir/loop" not in r.stdout.split()
        assert "plain" in r.stdout.split()


@pytest.mark.parametrize("option", ["--no-devices", "--no-setuid"])
def test_refused_with_tar(built, tmp_path, option):
    image = built[1]
    out = tmp_path / "t.tar"
    r = subprocess.run([STIPPLE, "extract", "--tar", option, image, out],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and option in r.stderr, r.stderr
    assert not out.exists()


def test_users_device_warning_escapes_the_images_name(tmp_path):
    """A user cannot make devices: each is skipped with a warning naming it. The name is
    the image's, so it is escaped like every other message: no terminal control bytes
    reach stderr (7a05301 printed them raw)."""
    nobody = pwd.getpwnam("nobody")
    src = tmp_path / "src"
    src.mkdir()
    evil = "dev\x1b]2;owned\x07\x1b[31mred"
    os.mknod(src / evil, stat.S_IFCHR | 0o600, os.makedev(1, 3))
    arena = tempfile.mkdtemp(prefix="stp-untrusted-", dir="/tmp")
    try:
        os.chmod(arena, 0o755)
        image = build_image(src, os.path.join(arena, "e.stipple"), *FAST)
        os.chmod(image, 0o644)
        dest = os.path.join(arena, "out")
        os.mkdir(dest)
        os.chown(dest, nobody.pw_uid, nobody.pw_gid)
        r = subprocess.run([STIPPLE, "extract", "-q", image, os.path.join(dest, "x")],
                           user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    finally:
        shutil.rmtree(arena, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert b"device not created" in r.stderr, r.stderr
    assert b"\x1b" not in r.stderr and b"\x07" not in r.stderr, r.stderr


def test_users_linked_device_is_a_warning_for_each_name(tmp_path):
    """A device with two names, extracted by a user who cannot make devices: both names
    are left out with a warning, and the rest is extracted, exit 0, as for a device of
    one name (mkstipple from a tar: no root needed to build it). The second name was an
    error, "a hard link to a file that could not be extracted", exit 1."""
    nobody = pwd.getpwnam("nobody")
    arena = tempfile.mkdtemp(prefix="stp-untrusted-", dir="/tmp")
    try:
        os.chmod(arena, 0o755)
        arc = os.path.join(arena, "devs.tar")
        with tarfile.open(arc, "w", format=tarfile.PAX_FORMAT) as t:
            dev = tarfile.TarInfo("dev/one")
            dev.type, dev.devmajor, dev.devminor, dev.mode = tarfile.CHRTYPE, 1, 3, 0o600
            t.addfile(dev)
            link = tarfile.TarInfo("dev/two")
            link.type, link.linkname = tarfile.LNKTYPE, "dev/one"
            t.addfile(link)
            data = tarfile.TarInfo("dev/file")
            data.size = 5
            t.addfile(data, io.BytesIO(b"bytes"))
        image = os.path.join(arena, "devs.stp")
        subprocess.run([MKSTIPPLE, "-q", arc, image], check=True, timeout=60)
        os.chmod(image, 0o644)
        dest = os.path.join(arena, "out")
        os.mkdir(dest)
        os.chown(dest, nobody.pw_uid, nobody.pw_gid)
        x = os.path.join(dest, "x")
        r = subprocess.run([STIPPLE, "extract", "-q", image, x],
                           user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        made = sorted(os.listdir(os.path.join(x, "dev")))
        with open(os.path.join(x, "dev", "file"), "rb") as f:
            content = f.read()
    finally:
        shutil.rmtree(arena, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(b"device not created") == 2, r.stderr
    assert made == ["file"] and content == b"bytes", made
