#!/bin/bash
# SPDX-License-Identifier: MIT
# What the isatty() round trips cost a launch (run by hand, as root). A FUSE kernel sends
# every TCGETS ioctl of a file to the server (fs/fuse/ioctl.c remembers no answer), and
# Ruby and CPython ask it of each source file they open: one round trip per file, which
# fuse_requests.py counts and times as the kernel sees it (send to answer). What the
# launch pays can be more: while it waits, its CPU may idle and the answer must wake it.
#
# This times, in ROUNDS interleaved rounds, a launch of the tree recipe KIND from the
# plain folder and from a mount of IMAGE after warming (a fresh mount each round), each
# as it is and with a preloaded isatty() that answers "not a terminal" for a regular
# file without the ioctl (built here with cc); the difference on the mount, less the one
# on the folder, is what the round trips cost. Medians in ms. Launches run as the caller
# runs this: under `chrt -f 10` for the figures in RESULTS.md.
#
# usage: tests/bench/isatty_share.sh KIND IMAGE [ROUNDS]
#   env: STIPPLE_BUILD=build WORK=/var/tmp/isatty-share (the shim and the mount point)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: isatty_share.sh KIND IMAGE [ROUNDS]" >&2; exit 2; }
kind=$1 image=$2 rounds=${3:-9}
build=${STIPPLE_BUILD:-$(cd "$here/../.." && pwd)/build}
st=$build/mounthelper/stipple
work=${WORK:-/var/tmp/isatty-share}
tree=$(dirname "$image")/tree
mnt=$work/mnt
mkdir -p "$mnt"
cat >"$work/notty.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
int isatty(int fd)
{
	static int (*real)(int);
	struct stat st;

	if (fd > 2 && !fstat(fd, &st) && S_ISREG(st.st_mode)) {
		errno = ENOTTY;
		return 0;
	}
	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "isatty");
	return real(fd);
}
C
cc -O2 -shared -fPIC -o "$work/notty.so" "$work/notty.c" -ldl
trap 'mountpoint -q "$mnt" && umount "$mnt" || true' EXIT

one() { # DIR [PRELOAD]: ms of one launch
	local t0 t1
	t0=$(date +%s%N)
	LD_PRELOAD=${2:-} "$here/launch_one.sh" "$kind" "$1" || { echo "isatty_share: the launch from $1 failed" >&2; exit 1; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000))
}
one "$tree" >/dev/null
for _ in $(seq "$rounds"); do
	"$st" mount "$image" "$mnt" 2>/dev/null
	"$st" status --wait "$mnt" >/dev/null
	one "$mnt" >/dev/null # the kernel meets the files once, as a second launch would
	echo "$(one "$tree") $(one "$tree" "$work/notty.so") $(one "$mnt") $(one "$mnt" "$work/notty.so")"
	umount "$mnt"
done | awk '{ for (i = 1; i <= 4; i++) v[i, NR] = $i } END {
	split("plain folder|folder, isatty() without ioctl|stipple, warmed, second launch|stipple, the same without ioctl", n, "|")
	for (i = 1; i <= 4; i++) {
		m = 0; for (r = 1; r <= NR; r++) a[r] = v[i, r]
		for (x = 1; x <= NR; x++) for (y = x + 1; y <= NR; y++) if (a[y] < a[x]) { t = a[x]; a[x] = a[y]; a[y] = t }
		med[i] = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
		printf "%-36s %8.1f ms\n", n[i], med[i] / 1000
	}
	printf "what the round trips cost the launch: %.1f ms (folder: %.1f ms), over %d rounds\n",
		(med[3] - med[4]) / 1000, (med[1] - med[2]) / 1000, NR }'
