# SPDX-License-Identifier: MIT
"""`stipple extract` as root flushes a setuid or setgid file's bytes before it sets those
bits, so that a write error a file system reports late (NFS: at close) is met while the
file has none, and the file is then removed and named. The late error is injected: a
preloaded fdatasync that fails with EIO, and notes whether the file already had a
setuid or setgid bit when it was called."""

import os
import shutil
import stat
import subprocess

import pytest

from conftest import STIPPLE, build_image

pytestmark = pytest.mark.needs_root("setuid and setgid files restored")

SHIM = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int fdatasync(int fd)
{
	struct stat st;
	const char *log = getenv("FLUSH_LOG");

	if (log && !fstat(fd, &st)) {
		int out = open(log, O_WRONLY | O_APPEND | O_CREAT, 0600);

		if (out >= 0) {
			write(out, st.st_mode & (S_ISUID | S_ISGID) ? "setid\n" : "plain\n", 6);
			close(out);
		}
	}
	errno = EIO;
	return -1;
}
"""

FILES = {"plain": 0o644, "suid": 0o4755, "sgid": 0o2711}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("needs a C compiler for the injected fault")
    base = tmp_path_factory.mktemp("flush")
    tree = base / "tree"
    tree.mkdir()
    for name, mode in FILES.items():
        (tree / name).write_bytes(name.encode() * 20000)
        os.chmod(tree / name, mode)
    (base / "shim.c").write_text(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", base / "shim.so", base / "shim.c"],
                   check=True)
    return tree, build_image(tree, base / "app.stp"), base / "shim.so"


def extract(image, dest, env=None):
    return subprocess.run([STIPPLE, "extract", image, dest], capture_output=True, text=True,
                          timeout=120, env=env)


def test_setid_files_flushed_before_their_bits(built, tmp_path):
    tree, image, shim = built
    dest = tmp_path / "out"
    log = tmp_path / "flushes"
    env = dict(os.environ, LD_PRELOAD=str(shim), FLUSH_LOG=str(log))
    r = extract(image, dest, env)
    # a write error stops the extraction (as ENOSPC does), at the first setid file
    assert r.returncode == 1, r.stderr
    assert "cannot write %s/sgid: Input/output error" % dest in r.stderr, r.stderr
    assert "extraction stopped" in r.stderr, r.stderr
    for name in ("suid", "sgid"):
        assert not (dest / name).exists(), name
    # flushed once, before any bit was set; the plain file, before it, never
    assert log.read_text().split() == ["plain"]
    assert (dest / "plain").read_bytes() == (tree / "plain").read_bytes()
    assert stat.S_IMODE(os.stat(dest / "plain").st_mode) == FILES["plain"]


def test_without_the_fault_the_bits_are_set(built, tmp_path):
    """The same extract without the injected error: the test above can fail."""
    tree, image, _ = built
    dest = tmp_path / "out"
    r = extract(image, dest)
    assert r.returncode == 0 and not r.stderr, r.stderr
    for name, mode in FILES.items():
        assert stat.S_IMODE(os.stat(dest / name).st_mode) == mode, name
        assert (dest / name).read_bytes() == (tree / name).read_bytes(), name
