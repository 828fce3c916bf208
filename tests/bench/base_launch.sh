#!/bin/bash
# SPDX-License-Identifier: MIT
# Launch from images built on the last release (issue 31): for each release pair, v2
# built with `mkstipple --base v1.stp` against v2 built fresh (mkstipple's defaults, the
# layout without --base), both with the same hot list, timed by launch_bench.sh in the
# same interleaved rounds (plain folder, fresh image, --base image; each straight away on
# a fresh mount and after warming; ratios to the plain folder).
#
# For each PAIR (a line of RELEASES/pairs.txt whose name has a recipe in trees/), in
# WORKROOT-PAIR: launch_bench.sh (RUNS=0) records the hot list once, from one launch on
# v2 built without one at --level RECORD_LEVEL (hot.txt), and builds the fresh v2 with it
# (hot.stp); then v1.stp (v1's tree, V1_MKOPTS and the same hot list: the first release
# of a series) and v2-base.stp (`--base v1.stp`, the same hot list). Images already there
# are used as they are. The report goes to OUT/PAIR.txt, the images' sizes and hot
# regions to OUT/PAIR.images.
#
# TRACE=1 times nothing but runs fuse_requests.py on both v2 images (OUT/PAIR.trace):
# requests and decodes of a launch straight away on a fresh mount, then after warming.
#
# usage: tests/bench/base_launch.sh [PAIR...]   (default: jdk17 node-red firefox-esr)
#   env: RUNS=5 RELEASES=/work/releases WORKROOT=/var/tmp/stipple-baselaunch
#        OUT=/var/tmp/base-launch V1_MKOPTS=--cut-inside RECORD_LEVEL=3
#        STIPPLE_BUILD=build RELEASE_SCRATCH= (see trees/release.sh)
#        MORE="LABEL=IMAGE ..." (more images of v2, timed in the same rounds)
# Runs recorded in RESULTS.md were started under `chrt -f 10`, as launch runs there are.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${STIPPLE_BUILD:-$(cd "$here/../.." && pwd)/build}
releases=${RELEASES:-/work/releases}
workroot=${WORKROOT:-/var/tmp/stipple-baselaunch}
out=${OUT:-/var/tmp/base-launch}
runs=${RUNS:-5}
read -r -a v1_opts <<<"${V1_MKOPTS:---cut-inside}"
mk=$build/builder/mkstipple
st=$build/mounthelper/stipple
export STIPPLE_BUILD=$build RECORD_LEVEL=${RECORD_LEVEL:-3}
[ $# -gt 0 ] || set -- jdk17 node-red firefox-esr
mkdir -p "$out"

pair_dirs() { # PAIR: prints "V1DIR V2DIR" from pairs.txt
	awk -v p="$1" '$1 == p { print $3, $5; exit }' "$releases/pairs.txt"
}

# hot region of IMAGE: "BYTES (N hot blocks)" from stipple info
hot_of() {
	"$st" info "$1" | awk '/^hot region:/ { h = $3 } /^hot blocks:/ { n = $3 }
		END { printf "%s (%s hot blocks)", h, n }'
}

prepare() { # PAIR WORK V1 V2
	local pair=$1 work=$2 v1=$3 v2=$4
	RUNS=0 ONLY=stipple TREE=$v2 TREE_KIND=$pair "$here/launch_bench.sh" "$work" >&2
	[ -f "$work/v1.stp" ] || nice -n 10 "$mk" -q "${v1_opts[@]}" --hot-list "$work/hot.txt" \
		"$v1" "$work/v1.stp"
	[ -f "$work/v2-base.stp" ] || nice -n 10 "$mk" --hot-list "$work/hot.txt" \
		--base "$work/v1.stp" "$v2" "$work/v2-base.stp" >"$work/v2-base.log" 2>&1
	{
		echo "pair $pair: v1 $v1, v2 $v2; v1 built with: ${v1_opts[*]} --hot-list hot.txt"
		for img in v1 hot v2-base; do
			printf '%-8s %12d bytes, hot region %s\n' "$img" "$(stat -c %s "$work/$img.stp")" \
				"$(hot_of "$work/$img.stp")"
		done
		tail -3 "$work/v2-base.log"
	} >"$out/$pair.images"
}

trace() { # PAIR WORK V2
	local mnt=$2/trace-mnt img
	mkdir -p "$mnt"
	export STIPPLE=$st
	for img in hot v2-base; do
		echo "== $1 $img.stp: straight away on a fresh mount, then a second launch"
		/usr/bin/python3 "$here/fuse_requests.py" --image "$2/$img.stp" --repeat 2 "$mnt" -- \
			"$here/launch_one.sh" "$1" "$mnt"
		echo "== $1 $img.stp: after warming"
		/usr/bin/python3 "$here/fuse_requests.py" --image "$2/$img.stp" --warm-wait "$mnt" -- \
			"$here/launch_one.sh" "$1" "$mnt"
	done
}

for pair in "$@"; do
	[ -f "$here/trees/$pair.sh" ] || { echo "base_launch: no recipe trees/$pair.sh" >&2; exit 2; }
	read -r d1 d2 <<<"$(pair_dirs "$pair")"
	[ -n "${d2:-}" ] || { echo "base_launch: $pair is not in $releases/pairs.txt" >&2; exit 2; }
	work=$workroot-$pair
	echo "base_launch: $pair ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	prepare "$pair" "$work" "$releases/$d1" "$releases/$d2"
	if [ -n "${TRACE:-}" ]; then
		trace "$pair" "$work" >"$out/$pair.trace" 2>&1
		continue
	fi
	[ "$runs" -gt 0 ] || continue
	RUNS=$runs ONLY=stipple TREE=$releases/$d2 TREE_KIND=$pair \
		EXTRA="--base=$work/v2-base.stp ${MORE:-}" \
		EXTRA_WARM=1 "$here/launch_bench.sh" "$work" >"$out/$pair.txt" 2>"$out/$pair.log"
	echo "base_launch: $pair done ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
done
