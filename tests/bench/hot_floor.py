#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How long a fresh mount takes to decode and push its hot region (run by hand, as root).

The floor of a launch straight away on a fresh mount: the application cannot finish
before the bytes it reads at start-up have been decoded and pushed into the page cache,
and those are the hot region. This mounts IMAGE at MOUNT ROUNDS times, with nothing
reading, polls the mount's counters (the `stipple status` keys) every millisecond, and
prints, per round, the time from the mount command's start and from its return to
warm_done, with the bytes decoded and pushed, and the medians: the decode-and-push rate
of this machine at this moment, on the mount's own workers.

    tests/bench/hot_floor.py [--rounds N] IMAGE MOUNT

With a plain launch of P seconds and a warming of D seconds, a launch straight away can
take no less than max(P, D) (warming wholly behind the launch) and, if the launch needs
the region's last bytes early, up to P + D; launch_bench.sh gives P.
"""

import argparse
import os
import statistics
import subprocess
import time

from benchlib import mount_status


def one_round(stipple, image, mount):
    t0 = time.perf_counter()
    subprocess.run([stipple, "mount", image, mount], check=True, stderr=subprocess.DEVNULL)
    t1 = time.perf_counter()
    try:
        while True:
            s = mount_status(mount)
            if s.get("warm_done") == "1" or s.get("warm_workers") == "0":
                break
            time.sleep(0.001)
        t2 = time.perf_counter()
    finally:
        subprocess.run(["umount", mount], check=True)
    return t2 - t0, t2 - t1, int(s.get("warm_stored_bytes", 0)), int(s.get("hot_bytes", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("image")
    ap.add_argument("mount")
    a = ap.parse_args()
    stipple = os.environ.get("STIPPLE", "stipple")
    rows = [one_round(stipple, a.image, a.mount) for _ in range(a.rounds)]
    for i, (full, after, pushed, hot) in enumerate(rows, 1):
        print("round %d: warm done %.1f ms after the mount started, %.1f ms after it returned;"
              " %d bytes pushed, hot region %d" % (i, full * 1e3, after * 1e3, pushed, hot))
    full = statistics.median(r[0] for r in rows)
    after = statistics.median(r[1] for r in rows)
    hot = rows[-1][3]
    print("median: %.1f ms from the start (%.0f MB/s over the hot region), %.1f ms from the"
          " return; hot region %d bytes" % (full * 1e3, hot / full / 1e6, after * 1e3, hot))


if __name__ == "__main__":
    main()
