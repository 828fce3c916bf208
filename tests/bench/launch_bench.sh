#!/bin/bash
# SPDX-License-Identifier: MIT
# Launch benchmark (run by hand, as root; takes about an hour on 2 cores).
#
# Assembles the Blender tree (../shared/corpora/blender-tree.sh), builds it with mkstipple,
# records a hot list from one launch, rebuilds with it, and times
#   blender -b --factory-startup -noaudio --python-expr "import bpy"
# from the plain folder, from stipple mounts (straight away, after warming, a second
# launch, without a hot list, without warming), and from squashfuse_ll, the kernel's
# squashfs and erofs. Prints medians over RUNS fresh mounts with ratios to the plain
# folder, the daemon's peak and settled memory, and a sweep of --warm-workers.
#
# Images already in WORKDIR are used as they are (base.stp, hot.stp, hot-whole.stp,
# hot3.stp and hotw3.stp, the last two ranges and whole files at --level 3).
#
# Every image file stays in the page cache between runs, as the folder's files do: what
# is measured is what a mount adds, not disk speed.
#
# usage: tests/bench/launch_bench.sh [WORKDIR]   (env: RUNS=5, STIPPLE_BUILD=build,
#        TREE=WORKDIR/tree, SKIP_OTHERS=1 to leave out squashfs and erofs)
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
work=${1:-/var/tmp/stipple-launch}
build=${STIPPLE_BUILD:-$repo/build}
runs=${RUNS:-5}
tree=${TREE:-$work/tree}
mk=$build/builder/mkstipple
st=$build/mounthelper/stipple
mnt=$work/mnt
mkdir -p "$work" "$mnt"

[ -x "$tree/blender" ] || sh "$repo/../shared/corpora/blender-tree.sh" "$tree"

launch() { # DIR: one launch, prints seconds
	local t0 t1
	t0=$(date +%s.%N)
	LD_LIBRARY_PATH="$1/lib" "$1/blender" -b --factory-startup -noaudio \
		--python-expr "import bpy" >/dev/null 2>&1
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

cleanup() { mountpoint -q "$mnt" && umount "$mnt" || true; }
trap cleanup EXIT

stp_mount() { # IMAGE [OPTIONS...]
	local img=$1
	shift
	"$st" mount "$img" "$mnt" "$@"
}

daemon_pid() { "$st" status "$mnt" | sed -n 's/^daemon: *pid \([0-9]*\).*/\1/p'; }

# --- images -------------------------------------------------------------------------
[ -f "$work/base.stp" ] || "$mk" -q "$tree" "$work/base.stp"
if [ ! -f "$work/hot.txt" ]; then
	stp_mount "$work/base.stp" --record "$work/hot.txt"
	launch "$mnt" >/dev/null
	umount "$mnt"
fi
cut -f1 "$work/hot.txt" >"$work/hot-whole.txt"
[ -f "$work/hot.stp" ] || "$mk" -q --hot-list "$work/hot.txt" "$tree" "$work/hot.stp"
[ -f "$work/hot-whole.stp" ] || "$mk" -q --hot-list "$work/hot-whole.txt" "$tree" "$work/hot-whole.stp"
if [ -z "${SKIP_OTHERS:-}" ]; then
	[ -f "$work/tree.sqfs" ] || mksquashfs "$tree" "$work/tree.sqfs" -comp zstd \
		-Xcompression-level 19 -b 1M -noappend -quiet >/dev/null
	[ -f "$work/tree.erofs" ] || mkfs.erofs -zlz4hc "$work/tree.erofs" "$tree" >/dev/null
fi
cat "$work"/*.stp "$work"/tree.* >/dev/null 2>&1 || true # into the page cache

# --- measurements -------------------------------------------------------------------
declare -A result
plain_runs=()
launch "$tree" >/dev/null # warm the folder's page cache
for _ in $(seq "$runs"); do plain_runs+=("$(launch "$tree")"); done
result[plain]=$(printf '%s\n' "${plain_runs[@]}" | median)

# Sets result[NAME], result[NAME-second] and result[NAME-mount] (how long the mount
# command took: priming happens there). A plain launch after each round keeps the plain
# median taken over the whole run, beside everything else.
measure() { # NAME MOUNT-COMMAND...
	local name=$1 times=() seconds=() mounts=() t0
	shift
	for _ in $(seq "$runs"); do
		t0=$(date +%s.%N)
		"$@"
		mounts+=("$(echo "$(date +%s.%N) - $t0" | bc -l)")
		times+=("$(launch "$mnt")")
		seconds+=("$(launch "$mnt")")
		umount "$mnt"
		plain_runs+=("$(launch "$tree")")
	done
	result[$name]=$(printf '%s\n' "${times[@]}" | median)
	result[$name-second]=$(printf '%s\n' "${seconds[@]}" | median)
	result[$name-mount]=$(printf '%s\n' "${mounts[@]}" | median)
}

warmed_mount() { stp_mount "$@" && "$st" status --wait "$mnt" >/dev/null; }
unprimed_warmed_mount() { warmed_mount "$@" --no-prime; }

measure "stipple, fresh mount straight away" stp_mount "$work/hot.stp"
measure "stipple, fresh mount after warming" warmed_mount "$work/hot.stp"
measure "stipple, unprimed, straight away" stp_mount "$work/hot.stp" --no-prime
measure "stipple, unprimed, after warming" unprimed_warmed_mount "$work/hot.stp"
measure "stipple, whole-file hot list, straight away" stp_mount "$work/hot-whole.stp"
measure "stipple, no hot list" stp_mount "$work/base.stp"
# ranges against whole files, both at --level 3 when those images are there
[ -f "$work/hot3.stp" ] && measure "stipple, ranges, level 3, straight away" stp_mount "$work/hot3.stp"
[ -f "$work/hotw3.stp" ] && measure "stipple, whole files, level 3, straight away" stp_mount "$work/hotw3.stp"
measure "stipple, hot list, --warm-workers 0" stp_mount "$work/hot.stp" --warm-workers 0
if [ -z "${SKIP_OTHERS:-}" ]; then
	measure "squashfuse_ll" squashfuse_ll "$work/tree.sqfs" "$mnt"
	measure "kernel squashfs" mount -t squashfs -o loop,ro "$work/tree.sqfs" "$mnt"
	measure "kernel erofs" mount -t erofs -o loop,ro "$work/tree.erofs" "$mnt"
fi
for n in 0 1 2 4 8; do
	measure "sweep: --warm-workers $n" stp_mount "$work/hot.stp" --warm-workers "$n"
done

# memory: peak during a launch on a fresh mount, settled a few seconds later
stp_mount "$work/hot.stp"
pid=$(daemon_pid)
launch "$mnt" >/dev/null
sleep 3
peak=$(awk '/VmHWM/ { print $2 / 1024 }' "/proc/$pid/status")
settled=$(awk '/VmRSS/ { print $2 / 1024 }' "/proc/$pid/status")
"$st" status "$mnt"
umount "$mnt"

# --- report -------------------------------------------------------------------------
plain=$(printf '%s\n' "${plain_runs[@]}" | median)
printf '\n%-46s %8s %7s %9s %7s %7s\n' "launch (median of $runs)" "first" "ratio" "second" \
	"ratio" "mount"
printf '%-46s %8.3f %7.2f   (median of %d plain launches through the run)\n' "plain folder" \
	"$plain" 1 "${#plain_runs[@]}"
for key in "${!result[@]}"; do
	case $key in plain|*-second|*-mount) continue ;; esac
	first=${result[$key]}
	second=${result[$key-second]}
	printf '%-46s %8.3f %7.2f %9.3f %7.2f %7.3f\n' "$key" "$first" \
		"$(echo "$first / $plain" | bc -l)" "$second" "$(echo "$second / $plain" | bc -l)" \
		"${result[$key-mount]}"
done | sort
printf '\nimages: '
ls -l "$work"/*.stp "$work"/tree.* 2>/dev/null | awk '{ printf "%s %d  ", $9, $5 }'
printf '\ndaemon memory: peak %.0f MiB, settled %.0f MiB (block %s)\n' "$peak" "$settled" \
	"$("$st" info "$work/hot.stp" | sed -n 's/^block size: *[0-9]* (\(.*\))/\1/p')"
