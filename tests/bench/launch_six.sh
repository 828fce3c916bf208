#!/bin/bash
# SPDX-License-Identifier: MIT
# Launch on six trees of different kinds (issue 32 item 1), in one command: runs
# launch_bench.sh for each tree recipe with ONLY="stipple erofs", keeps each full report
# in OUT/KIND.txt, and prints one table of the ratios to the plain folder (medians of
# RUNS interleaved rounds, see launch_bench.sh for how each is taken).
#
# Each tree's images and recorded hot list live in /var/tmp/stipple-launch-KIND and are
# reused as they are: RUNS=0 prepares what is missing (assembles the tree, builds, records
# the hot list with one launch, rebuilds with it) and times nothing, so that a later run
# only times.
#
# The hot list is recorded from an image at --level 3 (RECORD_LEVEL, quicker to build; the
# list names file ranges, which the level does not change); the images timed are built at
# mkstipple's defaults.
#
# WORKROOT=/var/tmp/stipple-names uses /var/tmp/stipple-names-KIND instead (images and
# hot lists prepared apart, say by a builder whose images older readers cannot mount),
# with the tree of /var/tmp/stipple-launch-KIND when that directory has none.
#
# TABLE=1 times nothing and prints the table from the reports already in OUT.
# TRACE=1 times nothing but traces each prepared tree with fuse_requests.py (OUT/KIND.trace):
# the requests and the decode trace of a launch straight away on a fresh mount and of a
# second one, then of a launch after warming; and hot_floor.py's decode-and-push time of
# the hot region (OUT/KIND.floor).
#
# usage: tests/bench/launch_six.sh
#   env: RUNS=5 KINDS="gcc jvm clang node office ruby" OUT=/var/tmp/launch-six
#        ONLY="stipple erofs" RECORD_LEVEL=3 STIPPLE_BUILD=build (passed on to
#        launch_bench.sh) WORKROOT=/var/tmp/stipple-launch (each tree's work folder is
#        WORKROOT-KIND; WORK= is the same setting)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
kinds=${KINDS:-gcc jvm clang node office ruby}
out=${OUT:-/var/tmp/launch-six}
workroot=${WORKROOT:-${WORK:-/var/tmp/stipple-launch}}
# the tree of KIND: its work directory's, else the shared one's
tree_of() { if [ -d "$workroot-$1/tree" ]; then echo "$workroot-$1/tree"; else echo "/var/tmp/stipple-launch-$1/tree"; fi; }
export RUNS=${RUNS:-5} ONLY=${ONLY:-stipple erofs} RECORD_LEVEL=${RECORD_LEVEL:-3}
mkdir -p "$out"

if [ -n "${TRACE:-}" ]; then
	build=${STIPPLE_BUILD:-$(cd "$here/../.." && pwd)/build}
	export STIPPLE=$build/mounthelper/stipple
	mnt=/var/tmp/launch-six-trace-mnt
	mkdir -p "$mnt"
	for kind in $kinds; do
		work=$workroot-$kind
		[ -f "$work/hot.stp" ] || { echo "launch_six: $kind is not prepared (RUNS=0)" >&2; continue; }
		echo "launch_six: tracing $kind ($(date -u +%H:%M:%S))" >&2
		run=("$here/launch_one.sh" "$kind" "$mnt")
		{
			echo "== $kind: straight away on a fresh mount, then a second launch"
			/usr/bin/python3 "$here/fuse_requests.py" --image "$work/hot.stp" --sample 5 \
				--repeat 2 "$mnt" -- "${run[@]}"
			echo "== $kind: after warming"
			/usr/bin/python3 "$here/fuse_requests.py" --image "$work/hot.stp" --warm-wait \
				--sample 5 "$mnt" -- "${run[@]}"
		} >"$out/$kind.trace" 2>&1
		/usr/bin/python3 "$here/hot_floor.py" --rounds 5 "$work/hot.stp" "$mnt" >"$out/$kind.floor" 2>&1
	done
	exit 0
fi

for kind in $kinds; do
	[ -z "${TABLE:-}" ] || break
	echo "launch_six: $kind ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	TREE=$(tree_of "$kind") TREE_KIND=$kind "$here/launch_bench.sh" "$workroot-$kind" \
		>"$out/$kind.txt" 2>"$out/$kind.log" || {
		echo "launch_six: $kind failed, see $out/$kind.log" >&2
		continue
	}
done
[ "$RUNS" -gt 0 ] || [ -n "${TABLE:-}" ] || exit 0

# one row a tree: plain seconds, then ratio (first / second launch) per column
row() { # FILE LABEL: "ratio/second-ratio" of the row starting with LABEL
	awk -v l="$2" 'index($0, l) == 1 { n = split(substr($0, length(l) + 1), f, " +");
		for (i = 1; i <= n && f[i] == ""; i++); printf "%s/%s", f[i + 1], f[i + 4]; exit }' "$1"
}
printf '\nLaunch, six trees, interleaved rounds, ratios to the plain folder\n'
printf '(first launch / second launch on the same mount; load average at the end: %s)\n' \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '(from mount: the mount command and the first launch straight away, against plain)\n'
printf '| %-44s | %6s | %8s | %8s | %11s | %10s | %11s | %11s | %11s |\n' tree size "hot reg." \
	"plain s" "straight" "from mount" "warmed" "erofs lz4hc" "control"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..46})" -------- ---------- \
	---------- ------------- ------------ ------------- ------------- -------------
for kind in $kinds; do
	f=$out/$kind.txt
	[ -s "$f" ] || { printf '| %-44s | (failed: %s) |\n' "$kind" "$out/$kind.log"; continue; }
	desc=$(awk -F', tree ' 'NR == 2 { print $1 }' "$f")
	size=$(sed -n '2s/.*(\([^)]*\)); medians.*/\1/p' "$f")
	hot=$(sed -n 's/.*hot region \([^ ]*\)$/\1/p' "$f")
	plain=$(awk '/^plain folder  / { print $3; exit }' "$f")
	mounted=$(awk -v l="stipple, fresh mount straight away" 'index($0, l) == 1 { print $NF; exit }' "$f")
	printf '| %-44s | %6s | %8s | %8s | %11s | %10s | %11s | %11s | %11s |\n' "$desc" "$size" "$hot" \
		"$plain" "$(row "$f" "stipple, fresh mount straight away")" "$mounted" \
		"$(row "$f" "stipple, fresh mount after warming")" \
		"$(row "$f" "kernel erofs (lz4hc)")" "$(row "$f" "plain folder (control)")"
done
