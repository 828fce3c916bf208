# SPDX-License-Identifier: MIT
"""What a URL mount keeps from other local users, and what they cannot slip into it: the
server's credentials come from netrc=, never from the command line, and neither they nor
a presigned query show in mountinfo, in ps or in the status (issue 28, item 12); the disk
cache is keyed by the URL and a secret, uses only its own private files and directory,
and serves no range whose tag does not match (item 10)."""

import ctypes
import os
import secrets
import shutil
import struct
import subprocess

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
import treeutil
from conftest import (MOUNT_STIPPLE, STIPPLE, build_image, is_mounted, mount_image,
                      read_file, run, unmount)
import mounts
from test_mount_safety import damaged_metadata
from test_http import cache_files, www  # noqa: F401 (www: a fixture)


def mountinfo_line(mnt):
    """Every field of MNT's mount table entry, in one line."""
    return " ".join(str(f) for f in mounts.at(mnt))


def cmdlines_naming(text):
    """The command lines of the processes whose command line holds TEXT."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                line = f.read()
        except OSError:
            continue
        if text.encode() in line:
            out.append(line)
    return out


@pytest.fixture
def guarded(www, tmp_path):
    """nginx asking for a password (auth_basic), and a netrc file that has it."""
    password = "pw-" + secrets.token_hex(8)
    hashed = subprocess.run(["openssl", "passwd", "-apr1", password], check=True,
                            capture_output=True, text=True).stdout.strip()
    users = tmp_path / "htpasswd"
    users.write_text("reader:%s\n" % hashed)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine other.example login x password y\n"
                     "machine 127.0.0.1\n  login reader\n  password \"%s\"\n" % password)
    netrc.chmod(0o600)
    location = 'auth_basic "stipple"; auth_basic_user_file %s;' % users
    with httputil.nginx(www, tmp_path / "nginx", location=location) as n:
        yield n, password, netrc


def test_credentials_come_from_netrc_and_never_show(guarded, gen_tree, tmp_path):
    origin, password, netrc = guarded
    signature = "sig-" + secrets.token_hex(8)
    url = origin.url("gen.stp") + "?X-Amz-Signature=" + signature + "#frag"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cache = "cache_dir=%s" % (tmp_path / "cache")
    # without the password, the server says no
    r = run([MOUNT_STIPPLE, url, mnt, "-o", "timeout=3," + cache], timeout=60)
    assert r.returncode == 32 and "401" in r.stderr, r.stderr
    assert origin.url("gen.stp") in r.stderr and signature not in r.stderr, r.stderr
    # a password on the command line is refused, pointing at netrc=
    with_userinfo = url.replace("://", "://reader:%s@" % password)
    r = run([MOUNT_STIPPLE, with_userinfo, mnt, "-o", cache], timeout=60)
    if is_mounted(mnt):
        unmount(mnt)
    assert r.returncode != 0 and "netrc=" in r.stderr, r.stderr
    assert password not in r.stderr, r.stderr
    assert not is_mounted(mnt)
    with mount_image(url, None, "-o", "netrc=%s,%s" % (netrc, cache)) as m:
        diffs = treeutil.compare_trees(gen_tree, m)
        assert not diffs, "\n".join(diffs[:20])
        line = mountinfo_line(m)
        assert origin.url("gen.stp") + " " in line, line
        assert password not in line and signature not in line and "frag" not in line, line
        # the daemon (forked from the mount command) and the fetcher carry its command line
        lines = cmdlines_naming(os.path.realpath(m))
        assert lines, "no process names the mount point"
        assert not [ln for ln in lines if signature.encode() in ln or password.encode() in ln], \
            lines
        status = run([STIPPLE, "status", m], check=True).stdout
        assert signature not in status and origin.url("gen.stp") in status, status
        text = os.getxattr(m, "user.stipple.status").decode()
        assert signature not in text, text


def test_readers_take_credentials_from_stipple_netrc(guarded, gen_tree, tmp_path):
    """The readers refuse a URL with a password, as the mount does, and read the login
    from the netrc file that STIPPLE_NETRC names."""
    origin, password, netrc = guarded
    url = origin.url("gen.stp")
    r = run([STIPPLE, "info", url.replace("://", "://reader:%s@" % password)])
    assert r.returncode == 1 and "STIPPLE_NETRC" in r.stderr, r.stderr
    assert password not in r.stderr and url in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1, r.stderr
    env = dict(os.environ, STIPPLE_NETRC=str(netrc))
    r = run([STIPPLE, "info", url])
    assert r.returncode == 1 and "401" in r.stderr, r.stderr
    name = next(os.path.relpath(os.path.join(d, f), gen_tree)
                for d, _, files in sorted(os.walk(gen_tree)) for f in sorted(files)
                if os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f)))
    r = subprocess.run([STIPPLE, "cat", url, name], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(gen_tree, name), "rb") as f:
        assert r.stdout == f.read()
    r = run([STIPPLE, "info", url], env=dict(env, STIPPLE_NETRC=str(tmp_path / "absent")))
    assert r.returncode == 1 and "STIPPLE_NETRC=" in r.stderr, r.stderr


def test_monitor_names_a_url_without_its_query(www, tmp_path):
    """What the mounting process says of a URL that serves no image names it as fsname
    would, without a presigned query."""
    (www / "junk.stp").write_bytes(b"not an image\n" * 100)
    signature = "sig-" + secrets.token_hex(8)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        url = origin.url("junk.stp")
        r = run([MOUNT_STIPPLE, url + "?X-Amz-Signature=" + signature, mnt, "-o",
                 "timeout=3,cache_size=0"], timeout=60)
    assert r.returncode == 32 and url in r.stderr, r.stderr
    assert signature not in r.stderr, r.stderr
    assert not is_mounted(mnt)


def test_netrc_that_cannot_be_read_fails_the_mount(guarded, tmp_path):
    origin, _, _ = guarded
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, origin.url("gen.stp"), mnt, "-o",
             "cache_size=0,netrc=%s" % (tmp_path / "absent")], timeout=60)
    assert r.returncode == 32 and "netrc=" in r.stderr, r.stderr
    assert not is_mounted(mnt)


# ---- the disk cache (item 10) ----------------------------------------------------------

def test_two_urls_serving_one_image_have_two_files(www, tmp_path):
    """The file's name is keyed by the URL: a server cannot have its image taken for
    another URL's, even when superblock, size and validator are the same."""
    shutil.copy(www / "gen.stp", www / "copy.stp")
    st = os.stat(www / "gen.stp")
    os.utime(www / "copy.stp", ns=(st.st_atime_ns, st.st_mtime_ns))  # the same ETag
    cache = tmp_path / "cache"
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        for name in ("gen.stp", "copy.stp"):
            with mount_image(origin.url(name), None, "--no-prime", "-o",
                             "cache_dir=%s" % cache):
                pass
    assert len(cache_files(cache)) == 2, cache_files(cache)


def owned_private(path):
    st = os.lstat(path)
    return st.st_uid == os.geteuid() and (st.st_mode & 0o7777) == 0o600 and st.st_nlink == 1


@pytest.mark.parametrize("how", ["other-uid", "mode-0644", "hard-link"])
def test_cache_file_not_ours_is_not_used(www, gen_tree, tmp_path, how):
    """A cache file that another user owns, that others may read or write, or that has a
    name elsewhere too, is removed and made anew, never used."""
    cache = tmp_path / "cache"
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        url = origin.url("gen.stp")
        with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s" % cache):
            pass
        (name,) = cache_files(cache)
        path = cache / name
        if how == "other-uid":
            os.chown(path, 65534, 65534)
        elif how == "mode-0644":
            os.chmod(path, 0o644)
        else:
            os.link(path, tmp_path / "elsewhere")
        with mount_image(url, None, "--no-prime", "-o", "cache_dir=%s" % cache) as mnt:
            diffs = treeutil.compare_trees(gen_tree, mnt)
            assert not diffs, "\n".join(diffs[:20])
    assert cache_files(cache) == [name], cache_files(cache)
    # made anew (the same inode number may come back): ours, private, one name
    assert owned_private(path), "the planted file was used: %r" % (os.stat(path),)


def test_secret_not_ours_is_replaced(www, tmp_path):
    """The directory's secret keys every name and tag: one that another user owns (and
    so may have chosen, or read) is replaced, and nothing keyed by it is found again."""
    cache = tmp_path / "cache"
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        opts = ("--no-prime", "-o", "cache_dir=%s" % cache)
        with mount_image(origin.url("gen.stp"), None, *opts):
            pass
        secret = (cache / "secret").read_bytes()
        assert len(secret) == 32 and owned_private(cache / "secret")
        os.chown(cache / "secret", 65534, 65534)
        with mount_image(origin.url("gen.stp"), None, *opts):
            pass
    assert owned_private(cache / "secret") and (cache / "secret").read_bytes() != secret
    assert len(cache_files(cache)) == 2  # the old name is left for the LRU to remove


@pytest.mark.parametrize("how", ["other-uid", "symlink"])
def test_cache_dir_not_ours_is_not_used(www, gen_tree, tmp_path, how):
    cache, real = tmp_path / "cache", tmp_path / "real"
    real.mkdir(mode=0o700)
    if how == "other-uid":
        os.rename(real, cache)
        os.chown(cache, 65534, 65534)
    else:
        os.symlink(real, cache)
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        r = run([STIPPLE, "mount", "--no-prime", "-o", "cache_dir=%s" % cache,
                 origin.url("gen.stp"), mnt], timeout=60)
        try:
            assert r.returncode == 0, r.stderr
            assert "going on without it" in r.stderr, r.stderr
            assert not treeutil.compare_trees(gen_tree, mnt)
        finally:
            subprocess.run(["umount", mnt])
    assert os.listdir(cache) == [], os.listdir(cache)


def xxh3(data):
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib.XXH3_64bits(bytes(data), len(data))


# XXH3's default secret, its first 16 bytes (xxhash.h, XXH3_kSecret): they key the mix of
# the first 16 input bytes, which is what the forgery below replaces.
XXH3_SECRET_HEAD = bytes.fromhex("b8fe6c3923a44bbe7c01812cf721ad1c")


def forge_same_xxh3(data):
    """DATA (32, 48-64 or 80-128 bytes) with its first 16 bytes changed and the same
    XXH3-64: XXH3 adds mul128_fold64(w0 ^ s0, w1 ^ s1) of the first 16 bytes, and
    fold(1, x) is x, so (1 ^ s0, old ^ s1) gives the same sum."""
    mask = (1 << 64) - 1
    s0, s1 = struct.unpack("<QQ", XXH3_SECRET_HEAD)
    w0, w1 = struct.unpack("<QQ", bytes(data[:16]))
    product = (w0 ^ s0) * (w1 ^ s1)
    old = (product & mask) ^ (product >> 64)
    out = bytearray(data)
    out[:16] = struct.pack("<QQ", 1 ^ s0, old ^ s1)
    assert out != data and xxh3(out) == xxh3(data), "the forgery does not hold"
    return out


def test_poisoned_range_is_never_served(tmp_path):
    """A stored range changed on disk, its XXH3 (the image's checksum) still matching,
    is not served: its tag does not match, the range is fetched again and counted."""
    tree, www = tmp_path / "tree", tmp_path / "www"
    tree.mkdir()
    www.mkdir()
    text = os.urandom(88)  # incompressible, stored as it is: a frame of 80 to 128 bytes
    (tree / "f").write_bytes(text)
    build_image(tree, www / "one.stp")
    cache = tmp_path / "cache"
    opts = ("--no-prime", "-o", "cache_dir=%s" % cache)
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        url = origin.url("one.stp")
        with mount_image(url, None, *opts) as mnt:
            assert read_file(os.path.join(mnt, "f")) == text
        (name,) = cache_files(cache)
        with open(cache / name, "r+b") as f:
            stored = f.read()
            at = stored.find(text)
            assert at > 0, "the file's bytes are not in the cache file as they are"
            # the range holding them: the block, as fetched
            ranges = [tuple(map(int, e[3][6:].split("-"))) for e in origin.log_entries()
                      if e[3].startswith("bytes=")]
            lo, hi = next((a, b + 1) for a, b in ranges if a <= at and at + len(text) <= b + 1)
            assert hi - lo in [32] + list(range(48, 65)) + list(range(80, 129)), (lo, hi)
            f.seek(lo)
            f.write(forge_same_xxh3(stored[lo:hi]))
        before = origin.bytes_sent()
        with mount_image(url, None, *opts) as mnt:
            assert read_file(os.path.join(mnt, "f")) == text
            st = dict(ln.split("=", 1) for ln in
                      os.getxattr(mnt, "user.stipple.status").decode().splitlines() if "=" in ln)
        assert int(st["disk_cache_rejected"]) >= 1, st
        assert origin.bytes_sent() - before >= hi - lo


def test_daemon_cannot_grow_files_past_its_cache(www, gen_image, tmp_path):
    """RLIMIT_FSIZE: the daemon writes at most its cache file's size (image, tags)."""
    size = os.path.getsize(gen_image)
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        with mount_image(origin.url("gen.stp"), None, "--no-prime", "-o",
                         "cache_dir=%s" % (tmp_path / "cache")) as mnt:
            text = os.getxattr(mnt, "user.stipple.status").decode()
            pid = dict(ln.split("=", 1) for ln in text.splitlines() if "=" in ln)["pid"]
            with open("/proc/%s/limits" % pid) as f:
                line = next(ln for ln in f if ln.startswith("Max file size"))
            (name,) = cache_files(tmp_path / "cache")
            file_size = os.path.getsize(tmp_path / "cache" / name)
    soft, hard = line.split()[3:5]
    assert soft == hard and soft.isdigit(), line
    assert size < file_size <= int(soft) <= file_size + (1 << 20), (line, file_size, size)


@pytest.mark.skipif(not shutil.which("strace"), reason="needs strace")
def test_presigned_query_is_not_on_the_helpers_command_line(www, gen_tree, tmp_path):
    """`stipple mount URL` runs mount.stipple(-checked) with the URL without its query on its
    command line (which every user can read before the helper blanks it), the whole URL
    in its environment; strace shows the exec exactly as /proc/PID/cmdline would."""
    signature = "sig-" + secrets.token_hex(8)
    log = tmp_path / "strace.log"
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        url = origin.url("gen.stp") + "?X-Amz-Signature=" + signature
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        try:
            r = run(["strace", "-v", "-s", "8192", "-e", "trace=execve", "-o", log,
                     STIPPLE, "mount", "--no-prime", url, mnt], timeout=60)
            assert r.returncode == 0, r.stderr
            assert is_mounted(mnt)
            diffs = treeutil.compare_trees(gen_tree, mnt)
            assert not diffs, "\n".join(diffs[:20])
            assert not cmdlines_naming(signature)
        finally:
            unmount(mnt)
    execs = [line for line in log.read_text().splitlines() if "execve(" in line]
    # a URL needs the checks: `stipple mount` runs mount.stipple's twin, mount.stipple-checked
    helper = [line for line in execs if os.path.basename(MOUNT_STIPPLE) + '-checked", [' in line]
    assert len(execs) == 2 and len(helper) == 1, execs
    argv = helper[0].split("], [")[0]
    assert signature not in argv and origin.url("gen.stp") in argv, argv
    assert '"STIPPLE_MOUNT_URL=%s"' % url in helper[0], helper[0]


def test_damaged_metadata_at_a_url_is_named_without_its_query(www, tmp_path):
    """A URL whose superblock is sound and whose metadata is damaged: the daemon is the
    one that finds out, and what it says names the URL as fsname would. It is never
    given the query (a presigned one signs requests), nor proxy= or netrc=."""
    damaged_metadata(www / "gen.stp", www / "bad.stp")
    signature = "sig-" + secrets.token_hex(8)
    netrc = tmp_path / ("netrc-" + secrets.token_hex(4))
    netrc.write_text("machine 127.0.0.1 login reader password x\n")
    netrc.chmod(0o600)
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with httputil.nginx(www, tmp_path / "nginx") as origin:
        url = origin.url("bad.stp")
        r = run([MOUNT_STIPPLE, url + "?X-Amz-Signature=" + signature, mnt, "-o",
                 "timeout=3,cache_size=0,netrc=%s" % netrc], timeout=60)
    if is_mounted(mnt):
        unmount(mnt)
    assert r.returncode == 32 and "damaged" in r.stderr, r.stderr
    assert url in r.stderr, r.stderr
    assert signature not in r.stderr and netrc.name not in r.stderr, r.stderr
