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

On a stipple mount it also prints the decode trace: what the daemon's counters (the
`stipple status` keys) did during each run: blocks decoded, reads that found their block
missing or waited for it, hot blocks warmed. --sample MS polls them every MS
milliseconds while COMMAND runs and prints their timeline, so that one sees whether the
launch ran ahead of warming (each poll is one GETXATTR request, listed with the rest).
The daemon's CPU over each run is in the trace too (from /proc, so in steps of a clock
tick): whether anything of warming still runs beside a launch after warming.

--image IMAGE mounts IMAGE at MOUNT first (with $STIPPLE, default `stipple`, and
--warm-wait: after warming has finished) and unmounts it at the end, so that the first
run is a launch straight away on a fresh mount, its counters taken from the mount on.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import mounts  # noqa: E402 (the mount table through libmount)

TRACEFS = "/sys/kernel/tracing"
# a trace instance of our own (instances/NAME), so that another tracer's settings and
# ours do not mix; made in main, removed at the end
trace_root = TRACEFS
EVENTS = ("fuse_request_send", "fuse_request_end")
LINE = re.compile(r"\s(\d+\.\d+): fuse_request_(send|end): connection \d+ req (\d+)"
                  r"(?: opcode \d+ \((\w+)\))?")


STATUS_XATTR = "user.stipple.status"
# the counters of a decode trace, and what each counts
DECODE_KEYS = (
    ("blocks_decoded", "blocks decoded"),
    ("cache_misses", "reads that found their block not decoded"),
    ("cache_waits", "reads that waited for a block being decoded"),
    ("cache_hits", "reads served from a decoded block"),
    ("warmed", "hot blocks warmed"),
    ("warm_stored_bytes", "bytes warming pushed into the page cache"),
    ("fill_stored_bytes", "bytes the filler pushed"),
    ("meta_pages_loaded", "metadata pages decoded"),
    # not a status key: the daemon's user + system CPU from /proc, in clock ticks' steps
    ("daemon_cpu_ms", "ms of CPU the daemon used (its decodes, pushes and answers)"),
)
CPU_KEY = "daemon_cpu_ms"


def stipple_status(mount):
    """The mount's status keys as integers, or None when it is not a stipple mount; with
    the daemon's CPU so far (user + system, ms) as CPU_KEY when /proc shows its pid."""
    try:
        text = os.getxattr(mount, STATUS_XATTR).decode()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if value.isdigit():
            out[key] = int(value)
    try:
        with open("/proc/%d/stat" % out["pid"]) as f:
            fields = f.read().rpartition(")")[2].split()
        out[CPU_KEY] = (int(fields[11]) + int(fields[12])) * 1000 // os.sysconf("SC_CLK_TCK")
    except (KeyError, OSError, ValueError, IndexError):
        pass
    return out


class Sampler(threading.Thread):
    """Polls the status every PERIOD seconds while a command runs."""

    def __init__(self, mount, period):
        super().__init__(daemon=True)
        self.mount, self.period, self.rows = mount, period, []
        self.stop = threading.Event()
        self.t0 = time.perf_counter()

    def run(self):
        while not self.stop.is_set():
            s = stipple_status(self.mount)
            if s:
                self.rows.append((time.perf_counter() - self.t0, s))
            self.stop.wait(self.period)


def report_decode(before, after, hot_blocks, rows):
    if before is None or after is None:
        return
    print("  decode trace (the daemon's counters over the run; the mount has %d hot blocks,"
          " block %d bytes):" % (hot_blocks, after.get("block_size", 0)))
    for key, what in DECODE_KEYS:
        if key in after:
            print("    %-20s %10d  %s" % (key, after[key] - before.get(key, 0), what))
    if rows:
        print("    timeline (ms: blocks decoded, hot warmed, misses, waits since the start):")
        last = None
        for t, s in rows:
            v = tuple(s.get(k, 0) - before.get(k, 0)
                      for k in ("blocks_decoded", "warmed", "cache_misses", "cache_waits"))
            if v != last:
                print("    %8.1f  %5d %5d %5d %5d" % ((t * 1e3,) + v))
                last = v


def event_path(name, leaf):
    return os.path.join(trace_root, "events", "fuse", name, leaf)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def connection_of(mount):
    """The connection number the events carry: the kernel's dev_t of the mount."""
    st = os.stat(mount)
    return (os.major(st.st_dev) << 20) | os.minor(st.st_dev)


def overruns():
    total = 0
    for cpu in os.listdir(os.path.join(trace_root, "per_cpu")):
        with open(os.path.join(trace_root, "per_cpu", cpu, "stats")) as f:
            for line in f:
                if line.startswith("overrun:"):
                    total += int(line.split()[1])
    return total


def traced_run(conn, command, sampler=None):
    """Runs COMMAND with the events on; returns (seconds, exit status, trace text, lost)."""
    write(os.path.join(trace_root, "trace"), "")
    lost0 = overruns()
    for name in EVENTS:
        write(event_path(name, "filter"), "connection == %d" % conn)
        write(event_path(name, "enable"), "1")
    try:
        t0 = time.perf_counter()
        if sampler:
            sampler.t0 = t0
            sampler.start()
        status = subprocess.run(command, stdin=subprocess.DEVNULL).returncode
        seconds = time.perf_counter() - t0
    finally:
        if sampler:
            sampler.stop.set()
            sampler.join()
        for name in EVENTS:
            write(event_path(name, "enable"), "0")
            write(event_path(name, "filter"), "0")
    with open(os.path.join(trace_root, "trace")) as f:
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
    ap.add_argument("--sample", type=float, default=0, metavar="MS",
                    help="poll a stipple mount's counters every MS ms during each run")
    ap.add_argument("--image", metavar="IMAGE", help="mount IMAGE at MOUNT first")
    ap.add_argument("--warm-wait", action="store_true",
                    help="with --image, run once warming has finished")
    ap.add_argument("mount")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        ap.error("no COMMAND after MOUNT")
    if not os.path.exists(event_path(EVENTS[0], "enable")):
        sys.exit("fuse_requests: %s has no fuse events (a recent kernel, tracefs "
                 "mounted, and root are needed)" % TRACEFS)
    global trace_root
    trace_root = os.path.join(TRACEFS, "instances", "fuse-requests-%d" % os.getpid())
    os.mkdir(trace_root)
    try:
        run_measured(a, command)
    finally:
        os.rmdir(trace_root)


def run_measured(a, command):
    mount = os.path.realpath(a.mount)
    stipple = os.environ.get("STIPPLE", "stipple")
    if a.image:
        subprocess.run([stipple, "mount", a.image, mount], check=True,
                       stderr=subprocess.DEVNULL)
    try:
        if a.image and a.warm_wait:
            subprocess.run([stipple, "status", "--wait", mount], check=True,
                           stdout=subprocess.DEVNULL)
        measure(a, mount, command, fresh=a.image and not a.warm_wait)
    finally:
        if a.image:
            subprocess.run(["umount", mount], check=True)


def measure(a, mount, command, fresh):
    if not getattr(mounts.at(mount), "fstype", "").startswith("fuse"):
        sys.exit("fuse_requests: %s is not a FUSE mount" % a.mount)
    conn = connection_of(mount)
    for run in range(1, a.repeat + 1):
        # a fresh mount: counted from the mount on (warming starts before us)
        before = stipple_status(mount)
        if before and fresh and run == 1:
            before = {}
        sampler = Sampler(mount, a.sample / 1e3) if a.sample > 0 and before is not None else None
        seconds, status, text, lost = traced_run(conn, command, sampler)
        after = stipple_status(mount)
        lat, unmatched = by_kind(text)
        report(run, seconds, status, lat, unmatched, lost)
        if before is not None:
            report_decode(before, after, after.get("hot_blocks", 0),
                          sampler.rows if sampler else [])


if __name__ == "__main__":
    main()
