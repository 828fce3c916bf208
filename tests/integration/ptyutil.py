# SPDX-License-Identifier: MIT
"""A program run with its stderr on a pseudo-terminal, for the tests of what is drawn
only on a terminal (progress lines)."""

import os
import pty
import select
import subprocess
import time


def run_on_pty(cmd, timeout=60):
    """Runs CMD (a list; paths may be path objects) with stdin and stdout on /dev/null
    and stderr on a pty, reading what it draws until it closes the terminal or has
    exited. Returns (exit status, the bytes drawn, seconds taken). TIMEOUT bounds the
    wait for the next output and for the exit."""
    master, slave = pty.openpty()
    start = time.monotonic()
    p = subprocess.Popen([os.fspath(c) for c in cmd], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    got = b""
    quiet_since = time.monotonic()
    while True:
        ready, _, _ = select.select([master], [], [], 1)
        if not ready:
            if p.poll() is not None or time.monotonic() - quiet_since > timeout:
                break
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        got += chunk
        quiet_since = time.monotonic()
    status = p.wait(timeout=timeout)
    os.close(master)
    return status, got, time.monotonic() - start
