#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A mount's timeline: when each step of mount.stipple and its daemon happens, from perf
trace's record of a few system calls, medians over --rounds mounts.

Steps, in ms after perf started mount.stipple (the program's own exec and loading come
first; perf's start is not the exec's, so compare rows, not the first one):
  monitor: the daemon's spawn (vfork or fork), mount(2) ("live"), the SETUP sent, the
           FILTER sent, its exit ("returned")
  daemon:  loaded (its first poll for the SANDBOX), the SETUP received, the filter loaded
           (seccomp), LIVE sent, FUSE's INIT read and answered, its threads started
           (the first clone after INIT: filling, ending, then libfuse's worker), the
           stat's GETATTR read, the thread libfuse's worker starts before it answers
           (it keeps one worker idle), the GETATTR answered ("serving")
perf trace adds its own cost to every traced call and to the exec (it follows the new
mappings): use the steps' order and the gaps between them, and mount_time.py for the
totals. An image with no hot list keeps priming out of the way.

The sandbox user "stipple" is created for the run, as mount_time.py does (and says).

usage: mount_timeline.py --image IMG [--build DIR] [--rounds N] [--keep DIR]
Needs root and perf.
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

from mount_time import mount_point, mounted, sandbox_user

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = "vfork,clone,mount,sendmsg,recvmsg,writev,read,seccomp,poll,exit_group"
LINE = re.compile(r"^\s*([\d.]+|\?) \(\s*([\d.]*)(?: ms)?\s*\): (\S+?)/(\d+) (.*)$")
STEPS = ["monitor: spawn", "daemon: loaded", "monitor: mount(2)", "monitor: SETUP sent",
         "daemon: SETUP received", "monitor: FILTER sent", "daemon: seccomp loaded",
         "daemon: LIVE sent", "daemon: INIT read", "daemon: INIT answered",
         "daemon: threads started", "daemon: GETATTR read", "daemon: worker's clone",
         "daemon: GETATTR answered",
         "monitor: exit"]


def parse(path):
    """The calls as (end ms, pid, text); a call split in two is kept at its end."""
    calls = []
    for line in open(path):
        m = LINE.match(line)
        if not m or m.group(1) == "?":
            continue
        start, dur = float(m.group(1)), float(m.group(2) or 0)
        text = m.group(5)
        if text.endswith("...") and "[continued]" not in text:
            continue  # the start of a call that ends later: its end line counts
        calls.append((start + dur, int(m.group(4)), text))
    return sorted(calls)


def first(calls, pid, pattern, after=0.0):
    rx = re.compile(pattern)
    for t, p, text in calls:
        if (pid is None or p == pid) and t >= after and rx.search(text):
            return t
    return None


def steps(calls):
    mon = calls[0][1]
    spawn = first(calls, mon, r"(vfork|clone)\(.*= \d+")
    child = [p for t, p, text in calls if p != mon and "poll(" in text]
    d = child[0] if child else None
    out = {
        "monitor: spawn": spawn,
        "daemon: loaded": first(calls, d, r"poll\("),
        "monitor: mount(2)": first(calls, mon, r"mount\(.*= 0"),
        "monitor: SETUP sent": first(calls, mon, r"sendmsg\("),
        "daemon: SETUP received": first(calls, d, r"recvmsg\(.*= (\d{3,})", 0),
        "monitor: FILTER sent": first(calls, mon, r"writev\(.*= \d{3,}"),
        "daemon: seccomp loaded": first(calls, d, r"seccomp\(op: FILTER.*= 0"),
        "daemon: LIVE sent": first(calls, d, r"writev\(fd: 3,.*= 4$"),
        "daemon: INIT read": first(calls, None, r"read\(.*count: 1052672\)\s+= 104"),
        "monitor: exit": first(calls, mon, r"exit_group\("),
    }
    init = out["daemon: INIT read"]
    answered = init and first(calls, None, r"writev\(fd: 5,.*= 80", init)
    out["daemon: INIT answered"] = answered
    # a GETATTR is 56 bytes, its answer 120 (fuse_attr_out)
    out["daemon: threads started"] = answered and first(calls, None, r"clone\(.*= \d+",
                                                         answered)
    got = answered and first(calls, None, r"read\(.*count: 1052672\)\s+= 56$", answered)
    out["daemon: GETATTR read"] = got
    done = got and first(calls, None, r"writev\(fd: 5,.*= 120", got)
    out["daemon: GETATTR answered"] = done
    clone = got and first(calls, None, r"clone\(.*= \d+", got)
    out["daemon: worker's clone"] = clone if clone and done and clone < done else None
    return out


def one(build, image, mnt, keep, r):
    out = os.path.join(keep, "trace-%d.txt" % r)
    prog = os.path.join(build, "mounthelper", "mount.stipple")
    p = subprocess.Popen(["perf", "trace", "-o", out, "-e", CALLS, "--", prog, image, mnt],
                         stdin=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not mounted(mnt):
        if p.poll() is not None:
            raise SystemExit("mount_timeline: perf trace %s ended (%d)" % (prog, p.returncode))
        time.sleep(0.001)
    os.stat(mnt)
    time.sleep(0.3)  # let the monitor exit and the daemon settle
    subprocess.run(["umount", mnt], check=True)
    p.wait()  # perf ends with the daemon
    return steps(parse(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--image", required=True)
    ap.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--keep", help="a folder for the traces (default: a temporary one)")
    a = ap.parse_args()
    keep = a.keep or tempfile.mkdtemp(prefix="mount-timeline-")
    os.makedirs(keep, exist_ok=True)
    res = {s: [] for s in STEPS}
    with sandbox_user(False), mount_point("mount-timeline-") as mnt:
        for r in range(a.rounds):
            for s, t in one(os.path.abspath(a.build), a.image, mnt, keep, r).items():
                if t is not None:
                    res[s].append(t)
            time.sleep(0.05)
    print("%s, %s, medians of %d mounts under perf trace (traces in %s)" % (
        a.image, a.build, a.rounds, keep))
    for s in sorted(STEPS, key=lambda s: statistics.median(res[s]) if res[s] else 1e9):
        if res[s]:
            print("  %-24s %7.2f ms  (%d of %d)" % (s, statistics.median(res[s]),
                                                    len(res[s]), a.rounds))
    print("  load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
