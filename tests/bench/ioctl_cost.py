#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What one isatty() costs on a file of a FUSE mount, against a file elsewhere (by hand).

Ruby (and CPython) call isatty() on every source file they open, and a FUSE kernel sends
every ioctl of a file to the server, which can only answer "not a tty": a round trip per
call, on every launch (the kernel remembers no answer). This times COUNT TCGETS ioctls on
FILE (a file of the mount) and on LOCAL (a file of a local file system), alternated in
ROUNDS rounds, and prints the median cost of one call on each, in microseconds, and their
difference: what each of a launch's ioctls adds. Run it at the launch's priority
(`chrt -f 10`) to see what a launch under chrt sees.

usage: ioctl_cost.py [--count 2000] [--rounds 7] FILE LOCAL
"""
import argparse
import errno
import fcntl
import os
import statistics
import termios
import time


def per_call_us(path, count):
    fd = os.open(path, os.O_RDONLY)
    try:
        t0 = time.perf_counter_ns()
        for _ in range(count):
            try:
                fcntl.ioctl(fd, termios.TCGETS, bytes(64))
            except OSError as e:
                if e.errno != errno.ENOTTY:
                    raise
        return (time.perf_counter_ns() - t0) / count / 1000
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("file")
    ap.add_argument("local")
    a = ap.parse_args()
    fuse, local = [], []
    for _ in range(a.rounds):
        fuse.append(per_call_us(a.file, a.count))
        local.append(per_call_us(a.local, a.count))
    mf, ml = statistics.median(fuse), statistics.median(local)
    print(f"isatty on {a.file}: {mf:.1f} us (rounds {min(fuse):.1f}-{max(fuse):.1f})")
    print(f"isatty on {a.local}: {ml:.1f} us (rounds {min(local):.1f}-{max(local):.1f})")
    print(f"each ioctl through FUSE adds {mf - ml:.1f} us; load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
