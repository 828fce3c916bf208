#!/bin/bash
# SPDX-License-Identifier: MIT
# What warming costs the daemon in CPU, mount to warmed, for one or more builds (run by
# hand, as root): each round mounts IMAGE afresh with each build in turn, waits for
# warming (status --wait), and prints the daemon's user+system CPU time from /proc, the
# wall time from the mount command to warmed, and its resident memory then (VmRSS).
# Interleaved, so that a loaded machine weighs on every build alike; medians at the end.
#
# usage: tests/bench/warm_cpu.sh IMAGE LABEL=BUILD [LABEL=BUILD...]
#   env: RUNS=7 MNT=/var/tmp/warm-cpu-mnt
set -euo pipefail

img=$1
shift
runs=${RUNS:-7}
mnt=${MNT:-/var/tmp/warm-cpu-mnt}
tick=$(getconf CLK_TCK)
mkdir -p "$mnt"
trap 'mountpoint -q "$mnt" && umount "$mnt" || true' EXIT
declare -A cpu wall rss

for _ in $(seq "$runs"); do
	for lb in "$@"; do
		label=${lb%%=*} st=${lb#*=}/mounthelper/stipple
		t0=$(date +%s%N)
		"$st" mount "$img" "$mnt" 2>/dev/null
		"$st" status --wait "$mnt" >/dev/null
		t1=$(date +%s%N)
		pid=$("$st" status "$mnt" | sed -n 's/^daemon: *pid \([0-9]*\).*/\1/p')
		# utime and stime: fields 14 and 15 of /proc/PID/stat (the name may hold spaces)
		ticks=$(sed 's/.*) //' "/proc/$pid/stat" | awk '{ print $12 + $13 }')
		kib=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
		umount "$mnt"
		cpu[$label]+="$((ticks * 1000 / tick)) "
		wall[$label]+="$(((t1 - t0) / 1000000)) "
		rss[$label]+="$((kib / 1024)) "
	done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-12s %22s %22s %16s\n' build "daemon CPU ms (median)" "mount to warmed ms" "RSS MiB"
for lb in "$@"; do
	label=${lb%%=*}
	printf '%-12s %22s %22s %16s\n' "$label" "$(median <<<"${cpu[$label]}")" \
		"$(median <<<"${wall[$label]}")" "$(median <<<"${rss[$label]}")"
	echo "  cpu: ${cpu[$label]}" >&2
done
