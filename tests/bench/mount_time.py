#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Mount time: how long `stipple mount`, `mount.stipple` and squashfuse_ll take to mount
an image, interleaved (A B C A B C ...), warm (the image in the page cache) or cold
(page, dentry and inode caches dropped before each mount).

The kinds take turns to go first, round by round, so that none always follows the same
one. Three times per mount, medians over --rounds: until the mount is live (listed in
/proc/self/mountinfo, polled every 0.2 ms), until it serves (a stat of the mount point
answers: the kernel holds it until the daemon has answered FUSE's INIT, then a GETATTR),
and until the command returns (for stipple, once its daemon serves and, unless
--no-prime, the hot files are looked up; squashfuse_ll returns before it serves).

With --before DIR (another build, e.g. of the commit before a change; repeatable) its two
front ends join the same rounds, named after DIR's parent folder, so a change is measured against its base on the same load. Every
stipple kind is also given with its ratio to squashfuse_ll.

The sandbox's user: root's daemon runs as the system user "stipple", which the Debian
package creates (debian/stipple.postinst). Without it, the monitor's look-up asks every
source in nsswitch.conf before it falls back to "nobody" (about 3 ms here), which is not
what an installed system pays. So the run creates "stipple" as the package would
(systemd-sysusers with mounthelper/sysusers.d/stipple.conf, else adduser --system) when
it does not exist, and removes it (userdel, groupdel) at the end; --without-user measures
with no such user instead (and refuses to run if one exists), to see what the look-up costs.

usage: mount_time.py --stipple-image IMG [--squash-image IMG] [--build DIR] [--rounds N]
                     [--cold] [--before DIR] [--no-prime] [--only mount.stipple,...]
                     [--options OPTS] [--without-user]
Needs root. The images are built beforehand, e.g. for a tree of a million files:
    mkstipple TREE scale.stp
    mksquashfs TREE scale.sqfs -comp zstd -Xcompression-level 19 -b 1M
"""

import argparse
import contextlib
import os
import grp
import pwd
import shutil
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def mounted(mnt):
    # By hand, not through libmount (tests/integration/mounts.py): its parse of the whole
    # table takes about 0.5 ms here, more than the 0.2 ms this poll resolves.
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


SANDBOX_USER = "stipple"
SYSUSERS = os.path.join(HERE, "..", "..", "mounthelper", "sysusers.d", "stipple.conf")


def exists(lookup, name):
    try:
        lookup(name)
        return True
    except KeyError:
        return False


@contextlib.contextmanager
def sandbox_user(without):
    """The package's sandbox user for the run: created as debian/stipple.postinst would if
    missing, removed after; with WITHOUT, makes sure there is none."""
    if exists(pwd.getpwnam, SANDBOX_USER):
        if without:
            raise SystemExit("mount_time: --without-user, but user %s exists" % SANDBOX_USER)
        yield "present before the run"
        return
    if without:
        yield "absent (--without-user)"
        return
    if shutil.which("systemd-sysusers"):
        subprocess.run(["systemd-sysusers", os.path.abspath(SYSUSERS)], check=True)
    else:
        subprocess.run(["adduser", "--system", "--group", "--no-create-home", "--home",
                        "/nonexistent", "--quiet", SANDBOX_USER], check=True)
    try:
        yield "created for the run"
    finally:
        subprocess.run(["userdel", SANDBOX_USER], check=True)
        if exists(grp.getgrnam, SANDBOX_USER):
            subprocess.run(["groupdel", SANDBOX_USER], check=True)


@contextlib.contextmanager
def mount_point(prefix):
    """A temporary folder to mount on: unmounted if still mounted, and removed, after."""
    mnt = tempfile.mkdtemp(prefix=prefix)
    try:
        yield mnt
    finally:
        if mounted(mnt):
            subprocess.run(["umount", mnt])
        os.rmdir(mnt)


def one_mount(cmd, mnt, cold):
    if cold:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not mounted(mnt):
        if p.poll() not in (None, 0):
            raise SystemExit("mount_time: %s failed (exit %d)" % (cmd[0], p.returncode))
        time.sleep(0.0002)
    live = time.perf_counter() - t0
    os.stat(mnt)  # the kernel holds it until the daemon answered INIT, then GETATTR
    serving = time.perf_counter() - t0
    p.wait()
    done = time.perf_counter() - t0
    subprocess.run(["umount", mnt], check=True)
    while mounted(mnt):
        time.sleep(0.001)
    return live * 1000, serving * 1000, done * 1000


def stipple_kinds(build, label, a, mnt):
    """The two front ends of BUILD, named with LABEL."""
    helpers = os.path.join(os.path.abspath(build), "mounthelper")
    opts = ["-o", a.options] if a.options else []
    kinds = {
        "stipple mount": [os.path.join(helpers, "stipple"), "mount"] + opts +
                         (["--no-prime"] if a.no_prime else []) + [a.stipple_image, mnt],
        "mount.stipple": [os.path.join(helpers, "mount.stipple"), a.stipple_image, mnt] +
                         opts + (["-o", "noprime"] if a.no_prime else []),
    }
    only = a.only.split(",") if a.only else kinds
    return {k + label: v for k, v in kinds.items() if k in only}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stipple-image", required=True)
    ap.add_argument("--squash-image")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--cold", action="store_true")
    ap.add_argument("--before", action="append", default=[],
                    help="another build, measured in the same rounds (may be repeated)")
    ap.add_argument("--no-prime", action="store_true", help="stipple mounts without priming")
    ap.add_argument("--options", help="-o OPTIONS for both stipple front ends (verify=KEY)")
    ap.add_argument("--only", help="comma-separated front ends: stipple mount, mount.stipple")
    ap.add_argument("--without-user", action="store_true",
                    help="no sandbox user %s (the daemon runs as nobody)" % SANDBOX_USER)
    a = ap.parse_args()
    with sandbox_user(a.without_user) as user, mount_point("mount-time-") as mnt:
        res = measure(a, mnt)
    report(a, res, user)


def measure(a, mnt):
    """Each kind's three times per round, interleaved."""
    kinds = {}
    for label, build in [("", a.build)] + [(" (%s)" % os.path.basename(os.path.dirname(
            os.path.abspath(b))), b) for b in a.before]:
        kinds.update(stipple_kinds(build, label, a, mnt))
    if a.squash_image:
        kinds["squashfuse_ll"] = ["squashfuse_ll", a.squash_image, mnt]
    for image in [a.stipple_image] + ([a.squash_image] if a.squash_image else []):
        if "://" in image:  # a URL: the server's files are its own
            continue
        with open(image, "rb") as f:  # into the page cache
            while f.read(1 << 24):
                pass
    res = {k: ([], [], []) for k in kinds}
    for r in range(a.rounds):
        # each round starts one kind later: on a loaded machine the kind that follows
        # squashfuse_ll's unmount measured up to 20% slower, whichever it was
        order = list(kinds.items())
        order = order[r % len(order):] + order[:r % len(order)]
        for k, cmd in order:
            for times, t in zip(res[k], one_mount(cmd, mnt, a.cold)):
                times.append(t)
            time.sleep(0.05)
    return res


def report(a, res, user):
    print("%s, %s, medians of %d interleaved rounds, sandbox user %s: %s" % (
        a.stipple_image, "caches dropped before each mount" if a.cold else "warm", a.rounds,
        SANDBOX_USER, user))
    base = res.get("squashfuse_ll")
    for k, times in res.items():
        med = [statistics.median(t) for t in times]
        ratio = ""
        if base and k != "squashfuse_ll":
            ratio = "  (%s squashfuse_ll)" % ", ".join(
                "%.2fx" % (m / statistics.median(b)) for m, b in zip(med, base))
        print("  %-24s live after %6.1f ms, serving after %6.1f ms, returned after %6.1f ms%s"
              % (k, *med, ratio))
    print("  load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
