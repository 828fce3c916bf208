#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What a command asks of a FUSE server (run by hand, as root).

Runs COMMAND with the kernel's FUSE request events on (tracefs fuse/fuse_request_send
and fuse_request_end, which recent kernels have), counts the requests of the connection
that serves MOUNT, and prints, for each kind, how many, their total and mean latency
(send to end, as the kernel sees it), and the share of COMMAND's wall time. Latencies
of synchronous requests are time the command waited on the server; background ones
(RELEASE, RELEASEDIR, FORGET) are not, and requests of a threaded command overlap.

    tests/bench/fuse_requests.py [--repeat N] MOUNT -- COMMAND [ARG...]

--repeat N runs COMMAND N times and shows each run (say, a first launch and then
second ones). Any FUSE server can be measured: stipple, squashfuse_ll, dwarfs.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import mounts  # noqa: E402 (the mount table through libmount)

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("fuse_request_send", "fuse_request_end")
LINE = re.compile(r"\s(\d+\.\d+): fuse_request_(send|end): connection \d+ req (\d+)"
                  r"(?: opcode \d+ \((\w+)\))?")


def event_path(name, leaf):
    return os.path.join(TRACEFS, "events", "fuse", name, leaf)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def connection_of(mount):
    """The connection number the events carry: the kernel's dev_t of the mount."""
    st = os.stat(mount)
    return (os.major(st.st_dev) << 20) | os.minor(st.st_dev)


def overruns():
    total = 0
    for cpu in os.listdir(os.path.join(TRACEFS, "per_cpu")):
        with open(os.path.join(TRACEFS, "per_cpu", cpu, "stats")) as f:
            for line in f:
                if line.startswith("overrun:"):
                    total += int(line.split()[1])
    return total


def traced_run(conn, command):
    """Runs COMMAND with the events on; returns (seconds, exit status, trace text, lost)."""
    write(os.path.join(TRACEFS, "trace"), "")
    lost0 = overruns()
    for name in EVENTS:
        write(event_path(name, "filter"), "connection == %d" % conn)
        write(event_path(name, "enable"), "1")
    try:
        t0 = time.perf_counter()
        status = subprocess.run(command, stdin=subprocess.DEVNULL).returncode
        seconds = time.perf_counter() - t0
    finally:
        for name in EVENTS:
            write(event_path(name, "enable"), "0")
            write(event_path(name, "filter"), "0")
    with open(os.path.join(TRACEFS, "trace")) as f:
        text = f.read()
    return seconds, status, text, overruns() - lost0


def by_kind(text):
    """Per opcode: a list of latencies in seconds; and the count of unmatched events."""
    sent, lat, unmatched = {}, collections.defaultdict(list), 0
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        t, kind, req, name = float(m.group(1)), m.group(2), m.group(3), m.group(4)
        if kind == "send":
            sent[req] = (t, name)
        elif req in sent:
            t0, name = sent.pop(req)
            lat[name].append(t - t0)
        else:
            unmatched += 1
    # forgets have no reply and so no end
    no_reply = ("FUSE_FORGET", "FUSE_BATCH_FORGET")
    return lat, unmatched + sum(1 for _, n in sent.values() if n not in no_reply)


def report(run, seconds, status, lat, unmatched, lost):
    total = sum(sum(v) for v in lat.values())
    count = sum(len(v) for v in lat.values())
    print("run %d: %.1f ms, exit %d, %d requests, %.2f ms in them (%.1f%% of the run)"
          % (run, seconds * 1e3, status, count, total * 1e3, 100 * total / seconds))
    for name in sorted(lat, key=lambda k: -sum(lat[k])):
        v = sorted(lat[name])
        print("  %-18s %7d  total %8.2f ms  mean %7.1f us  p50 %7.1f us  p90 %7.1f us"
              "  max %8.1f us"
              % (name.replace("FUSE_", ""), len(v), sum(v) * 1e3, sum(v) / len(v) * 1e6,
                 v[len(v) // 2] * 1e6, v[min(len(v) - 1, len(v) * 9 // 10)] * 1e6,
                 v[-1] * 1e6))
    if unmatched or lost:
        print("  (%d events unmatched, %d lost to a full trace buffer: the counts are low)"
              % (unmatched, lost))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1, metavar="N")
    ap.add_argument("mount")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no COMMAND after MOUNT")
    if not os.path.exists(event_path(EVENTS[0], "enable")):
        sys.exit("fuse_requests: %s has no fuse events (a recent kernel, tracefs "
                 "mounted, and root are needed)" % TRACEFS)
    mount = os.path.realpath(a.mount)
    if not getattr(mounts.at(mount), "fstype", "").startswith("fuse"):
        sys.exit("fuse_requests: %s is not a FUSE mount" % a.mount)
    conn = connection_of(mount)
    for run in range(1, a.repeat + 1):
        seconds, status, text, lost = traced_run(conn, command)
        lat, unmatched = by_kind(text)
        report(run, seconds, status, lat, unmatched, lost)


if __name__ == "__main__":
    main()
