# SPDX-License-Identifier: MIT
"""What a URL mount keeps from other local users, and what they cannot slip into it: the
server's credentials come from netrc=, never from the command line, and neither they nor
a presigned query show in mountinfo, in ps or in the status (issue 28, item 12)."""

import os
import secrets
import subprocess

import pytest

import httputil
from httputil import _no_proxy_from_the_environment  # noqa: F401 (autouse)
import treeutil
from conftest import MOUNT_STIPPLE, STIPPLE, is_mounted, mount_image, run
from test_http import www  # noqa: F401 (a fixture)


def mountinfo_line(mnt):
    with open("/proc/self/mountinfo") as f:
        return next(ln for ln in f if ln.split()[4] == os.path.realpath(mnt))


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
    # a password on the command line is refused, pointing at netrc=
    with_userinfo = url.replace("://", "://reader:%s@" % password)
    r = run([MOUNT_STIPPLE, with_userinfo, mnt, "-o", cache], timeout=60)
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


def test_netrc_that_cannot_be_read_fails_the_mount(guarded, tmp_path):
    origin, _, _ = guarded
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = run([MOUNT_STIPPLE, origin.url("gen.stp"), mnt, "-o",
             "cache_size=0,netrc=%s" % (tmp_path / "absent")], timeout=60)
    assert r.returncode == 32 and "netrc=" in r.stderr, r.stderr
    assert not is_mounted(mnt)
