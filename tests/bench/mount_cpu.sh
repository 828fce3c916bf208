#!/bin/sh
# SPDX-License-Identifier: MIT
# CPU cost of a mount: perf stat's task-clock (CPU time, summed over every process of
# the mount: front end, monitor, daemon, watcher, and the umount that ends them) for
# mount + umount cycles, interleaved between the kinds, median over ROUNDS. CPU time
# holds up on a loaded machine where wall time does not (mount_time.py gives wall time).
#
#   tests/bench/mount_cpu.sh STIPPLE_IMAGE SQUASH_IMAGE [BUILD...]
#
# Each BUILD (default: ./build) gives two kinds, `mount.stipple` and `stipple mount`;
# squashfuse_ll mounts SQUASH_IMAGE. Settings: ROUNDS (default 7), CYCLES per round and
# kind (default 10), PRIME=1 to let stipple prime (default: -o noprime / --no-prime).
# Needs root and perf.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 STIPPLE_IMAGE SQUASH_IMAGE [BUILD...]" >&2; exit 2; }
img=$1 sqfs=$2
shift 2
[ $# -gt 0 ] || set -- build
rounds=${ROUNDS:-7} cycles=${CYCLES:-10}
mnt=$(mktemp -d /tmp/mount-cpu.XXXXXX)
out=$(mktemp /tmp/mount-cpu-out.XXXXXX)
trap 'umount "$mnt" 2>/dev/null || true; rmdir "$mnt"; rm -f "$out"' EXIT
np="-o noprime" sp="--no-prime"
[ "${PRIME:-0}" = 1 ] && np="" sp=""

# one kind: NAME COMMAND...; appends "NAME ms-per-cycle" to $out
measure() {
	name=$1
	shift
	ms=$(perf stat -x, -e task-clock -- sh -c '
		n=$1; mnt=$2; shift 2
		i=0
		while [ $i -lt $n ]; do
			"$@" >/dev/null 2>&1 || exit 1
			umount "$mnt"
			i=$((i + 1))
		done' sh "$cycles" "$mnt" "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ {print $1}')
	echo "$name $(echo "$ms $cycles" | awk '{printf "%.2f", $1 / $2}')" >>"$out"
}

r=0
while [ $r -lt "$rounds" ]; do
	for b in "$@"; do
		h=$b/mounthelper
		label=$(basename "$(dirname "$(realpath "$b")")")
		measure "mount.stipple($label)" "$h/mount.stipple" "$img" "$mnt" $np
		measure "stipple-mount($label)" "$h/stipple" mount $sp "$img" "$mnt"
	done
	measure squashfuse_ll squashfuse_ll "$sqfs" "$mnt"
	r=$((r + 1))
done
echo "CPU ms per mount+umount (task-clock, all processes), median of $rounds rounds of $cycles;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
sort -k1,1 -k2n "$out" | awk '
	{ v[$1] = v[$1] " " $2; n[$1]++ }
	END { for (k in v) { split(substr(v[k], 2), a, " "); m = a[int((n[k] + 1) / 2)];
	      printf "  %-32s %7.2f ms\n", k, m } }' | sort
