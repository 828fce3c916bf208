#!/bin/bash
# SPDX-License-Identifier: MIT
# Hot lists recorded with the kernel's readahead on and down (issue 14, item 3), on a tree
# from a recipe in tests/bench/trees: records one launch through a recording mount of this
# build (readahead down) and of OLD_BUILD (a build from before readahead was turned down
# on recording mounts: readahead on), prints each list's size and tests/bench/hot_margin.py's
# table (the hot region and the run-time reads left outside it, by margin), then builds an
# image with each list and times launches straight away on fresh mounts of each, interleaved
# with the plain folder, RUNS rounds; and the image of the readahead-down list again with
# the mount's readahead at run time set to each of RUN_RA (KiB, through the mount's
# /sys/class/bdi/MAJ:MIN/read_ahead_kb; FUSE's default is 128). Run by hand, as root.
#
# usage: OLD_BUILD=DIR tests/bench/record_readahead.sh [WORKDIR]
#   env: TREE_KIND=blender TREE=WORKDIR/tree RUNS=3 LEVEL=19 STIPPLE_BUILD=build
#        RUN_RA="0 32"
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
common=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$repo/.git")
shared=${SHARED:-$(dirname "$common")/../shared}
kind=${TREE_KIND:-blender}
. "$here/trees/lib.sh"
. "$here/trees/$kind.sh"
work=${1:-/var/tmp/stipple-record-$kind}
tree=${TREE:-$work/tree}
build=${STIPPLE_BUILD:-$repo/build}
old=${OLD_BUILD:?OLD_BUILD: a build whose recording mounts keep readahead on}
runs=${RUNS:-3}
level=${LEVEL:-19}
run_ra=${RUN_RA:-0 32}
mnt=$work/mnt
mkdir -p "$work" "$mnt"
trap 'mountpoint -q "$mnt" && umount "$mnt" || true' EXIT
tree_ready "$tree" || tree_assemble "$tree"

record() { # STIPPLE LIST: one launch through a recording mount of base.stp
	local pid
	"$1" mount "$work/base.stp" "$mnt" --record "$2"
	pid=$("$1" status "$mnt" | sed -n 's/^daemon: *pid \([0-9]*\).*/\1/p')
	tree_launch "$mnt"
	umount "$mnt"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done # the list is written on exit
}

secs() { local t0; t0=$(date +%s.%N); "$@"; echo "$(date +%s.%N) - $t0" | bc -l; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

[ -f "$work/base.stp" ] || "$build/builder/mkstipple" -q --level "$level" "$tree" "$work/base.stp"
cat "$work/base.stp" >/dev/null
tree_launch "$tree" # the folder's page cache
[ -f "$work/hot-ra-on.txt" ] || record "$old/mounthelper/stipple" "$work/hot-ra-on.txt"
[ -f "$work/hot-ra-down.txt" ] || record "$build/mounthelper/stipple" "$work/hot-ra-down.txt"
for ra in on down; do
	[ -f "$work/hot-ra-$ra.stp" ] || "$build/builder/mkstipple" -q --level "$level" \
		--hot-list "$work/hot-ra-$ra.txt" "$tree" "$work/hot-ra-$ra.stp"
	printf 'readahead %-4s: %5d files, %8s recorded, hot region %8s\n' "$ra" \
		"$(wc -l <"$work/hot-ra-$ra.txt")" \
		"$(hot_list_bytes "$tree" "$work/hot-ra-$ra.txt" | numfmt --to=iec)" \
		"$("$build/mounthelper/stipple" info "$work/hot-ra-$ra.stp" |
			sed -n 's/^hot region: *\([0-9]*\).*/\1/p' | numfmt --to=iec)"
done
python3 "$here/hot_margin.py" "$tree" "$work/hot-ra-down.txt" "$work/hot-ra-on.txt"
cat "$work"/hot-ra-*.stp >/dev/null

declare -A t
for _ in $(seq "$runs"); do
	t[plain]+=" $(secs tree_launch "$tree")"
	for ra in on down $run_ra; do
		img=$work/hot-ra-$ra.stp
		[ -f "$img" ] || img=$work/hot-ra-down.stp
		"$build/mounthelper/stipple" mount "$img" "$mnt"
		[ "$img" = "$work/hot-ra-$ra.stp" ] ||
			echo "$ra" >"/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb"
		t[$ra]+=" $(secs tree_launch "$mnt")"
		umount "$mnt"
	done
done
plain=$(tr ' ' '\n' <<<"${t[plain]}" | grep . | median)
printf '\n%s: launch straight away on a fresh mount, median of %d (all:%s)\n' \
	"$(tree_describe)" "$runs" "${t[plain]}"
printf '%-30s %7.3f s\n' "plain folder" "$plain"
for ra in on down $run_ra; do
	m=$(tr ' ' '\n' <<<"${t[$ra]}" | grep . | median)
	name="hot list, readahead $ra"
	[ "$ra" = on ] || [ "$ra" = down ] || name="down list, run-time ra ${ra}K"
	printf '%-30s %7.3f s %5.2fx  (all:%s)\n' "$name" "$m" \
		"$(echo "$m / $plain" | bc -l)" "${t[$ra]}"
done
