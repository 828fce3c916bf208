#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs the whole test suite with a build whose mounts default to sandbox=log, then lists
# every system call the sandboxes denied meanwhile (kernel audit records type=1326 from
# stipple's processes). A call the filter is missing shows here instead of killing a
# daemon in the field. Tests that check that a denied call kills, or that users are
# refused sandbox=log, fail in this build: their failures are expected; the count of
# denials at the end is the result.
#   tests/bench/sandbox_log_suite.sh [PYTEST ARGS...]
# Run as root, by hand (not in CI): it takes as long as the suite.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${STIPPLE_LOG_BUILD:-$repo/build-sandbox-log}

if [ -f "$build/build.ninja" ]; then
	meson configure "$build" -Dsandbox_default=log >/dev/null || exit 2
else
	meson setup "$build" -Dsandbox_default=log >/dev/null || exit 2
fi
stamp() { dmesg | tail -n 1 | sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
since=$(stamp)
STIPPLE_BUILD=$build "$repo/tests/run" "$@" | tail -n 1
echo "== denied system calls since [$since]:"
dmesg | awk -v since="${since:-0}" '
	match($0, /^\[ *[0-9.]+\]/) {
		t = substr($0, 2, RLENGTH - 2) + 0
		if (t > since && /type=1326/ && /comm="(stipple|mount\.stipple|mount\.fuse\.stip)/) {
			print; n++
		}
	}
	END { printf "%d denied\n", n }'
