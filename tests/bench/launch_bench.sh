#!/bin/bash
# SPDX-License-Identifier: MIT
# Launch benchmark (run by hand, as root; the full Blender run takes about an hour on 2 cores).
#
# Assembles a tree by a recipe (tests/bench/trees/KIND.sh: how to put the tree together
# from installed packages, and how to launch from it), builds it with mkstipple, records
# a hot list from one launch, rebuilds with it, and times a launch from the plain folder
# and from each mount below, interleaved: every round mounts each one afresh in turn, and
# launches from it twice between two launches from the plain folder (P A A' P P B B' P
# ...). Each ratio is the median over RUNS rounds of a launch against the mean of its two
# plain brackets, with the quartiles beside it; a control column does the same with the
# folder itself, to show the noise. The serving daemon's peak memory is shown too.
#
# Tree kinds (TREE_KIND=, default blender; the packages each needs are in its recipe):
#   blender   Blender 3.4, import bpy                  (blender)
#   python    Python 3.11 + NumPy, import numpy         (python3-numpy)
#   gcc       GCC 12, gcc -O2 -c a small file           (gcc-12 binutils)
#   jvm       OpenJDK 17, a hello world                 (openjdk-17-jre-headless, -jdk-headless)
#   clang     Clang 14, clang -O2 -c a small file       (clang-14)
#   node      Node.js 20 + npm, npm pack --dry-run      (nodejs, with npm)
#   office    LibreOffice 7.4, --convert-to pdf         (libreoffice-writer-nogui)
#   ruby      Ruby 3.1, yaml/json/openssl/erb loaded    (ruby)
# tests/bench/launch_six.sh runs six of them (gcc jvm clang node office ruby) in one go.
#
# Groups of columns (ONLY="...", default all of them; the plain folder is always there):
#   stipple     the hot image: fresh mount straight away, after warming (status --wait);
#               each with a second launch on the same mount
#   variants    unprimed, whole-file hot list, no hot list, --warm-workers 0, and level 3
#               images when WORKDIR has hot3.stp / hotw3.stp
#   sweep       --warm-workers 0 1 2 4 8
#   squashfuse  squashfuse_ll, mksquashfs -comp zstd -Xcompression-level 19 -b 1M
#   squashfs    the kernel's squashfs, a loop mount of the same image
#   erofs       the kernel's erofs, mkfs.erofs -zlz4hc, a loop mount
#   dwarfs      DwarFS (DWARFS=/opt/dwarfs/bin), mkdwarfs --categorize=hotness with the
#               files of stipple's hot list as --hotness-list (mkdwarfs defaults otherwise;
#               DWARFS_ARGS= adds options), mounted -o preload_category=hotness; left out
#               with a note when DWARFS has no dwarfs and mkdwarfs
#
# Images already in WORKDIR are used as they are (base.stp, hot.stp, hot-whole.stp,
# tree.sqfs, tree.erofs, tree.dwarfs, and hot.txt, the recorded hot list: remove it to
# record again). Every image file stays in the page cache between runs, as the folder's
# files do: what is measured is what a mount adds, not disk speed. Memory is the peak RSS
# (VmHWM) of the FUSE daemon after two launches; the kernel's file systems have no
# daemon, and their page cache is not counted.
#
# usage: tests/bench/launch_bench.sh [WORKDIR]
#   env: TREE_KIND=blender RUNS=5 ONLY="stipple variants ..." STIPPLE_BUILD=build LEVEL=
#        TREE=WORKDIR/tree DWARFS=/opt/dwarfs/bin DWARFS_ARGS= SKIP_OTHERS=1 (no other tools)
#        EXTRA="LABEL=IMAGE ..." (more images of the tree, each a straight-away column;
#        EXTRA_WARM=1 adds an after-warming column for each)
#        COMPARE="LABEL=BUILD ..." (another build's stipple mounts hot.stp: its straight-away
#        and after-warming columns, interleaved with this build's, for an A/B of the daemon)
#        RECORD_LEVEL=N (base.stp, the image the hot list is recorded from, at --level N:
#        the list names file ranges, which the level does not change; quicker to prepare.
#        Not with the variants group, whose "no hot list" column mounts base.stp)
#        STEADY=N (after the second launch, N more on the same mount, each between two
#        plain launches: a finer measure of what a mount costs once everything is cached)
#   WORKDIR defaults to /var/tmp/stipple-launch (blender) or /var/tmp/stipple-launch-KIND.
#   a quick run: RUNS=1 ONLY="stipple erofs dwarfs" TREE_KIND=gcc tests/bench/launch_bench.sh
#   RUNS=0 builds and records what is missing, and times nothing
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# ../shared beside the main checkout (a worktree's common git dir is the main one's .git)
common=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "$repo/.git")
shared=${SHARED:-$(dirname "$common")/../shared} # the corpus scripts, for the recipes
kind=${TREE_KIND:-blender}
[ -f "$here/trees/$kind.sh" ] || { echo "launch_bench: no tree recipe $here/trees/$kind.sh" >&2; exit 2; }
. "$here/trees/lib.sh"
. "$here/trees/$kind.sh"

if [ "$kind" = blender ]; then work=${1:-/var/tmp/stipple-launch}; else work=${1:-/var/tmp/stipple-launch-$kind}; fi
build=${STIPPLE_BUILD:-$repo/build}
runs=${RUNS:-5}
tree=${TREE:-$work/tree}
only=" ${ONLY:-stipple variants sweep squashfuse squashfs erofs dwarfs} "
if [ -n "${SKIP_OTHERS:-}" ]; then
	for other in squashfuse squashfs erofs dwarfs; do only=${only/ $other / }; done
fi
dwarfs_bin=${DWARFS:-/opt/dwarfs/bin}
mk=$build/builder/mkstipple
# LEVEL=N: mkstipple --level N for the images (quick runs); mkstipple's default otherwise
mk_args=()
[ -z "${LEVEL:-}" ] || mk_args=(--level "$LEVEL")
st=$build/mounthelper/stipple
mnt=$work/mnt
mkdir -p "$work" "$mnt"

want() { [[ $only == *" $1 "* ]]; }

if want dwarfs && { ! [ -x "$dwarfs_bin/dwarfs" ] || ! [ -x "$dwarfs_bin/mkdwarfs" ]; }; then
	echo "launch_bench: no $dwarfs_bin/dwarfs and mkdwarfs: DwarFS columns left out" >&2
	only=${only/ dwarfs / }
fi

tree_ready "$tree" || tree_assemble "$tree"

launch() { # DIR: one launch, prints seconds
	local t0 t1
	t0=$(date +%s.%N)
	tree_launch "$1" || { echo "launch_bench: the launch from $1 failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

fg_pid= # a FUSE server started in the foreground (squashfuse_ll, dwarfs)
cleanup() {
	mountpoint -q "$mnt" && umount "$mnt" || true
	[ -z "$fg_pid" ] || wait "$fg_pid" 2>/dev/null || true
}
trap cleanup EXIT

stp_mount() { # IMAGE [OPTIONS...]
	local img=$1
	shift
	"$st" mount "$img" "$mnt" "$@"
}

# A launch's last files can still be closing when it returns (a loaded machine, a JVM
# ending): umount then says "target is busy" for a moment. Try again for up to 5 s.
unmount() {
	for _ in $(seq 50); do
		umount "$mnt" 2>/dev/null && return 0
		sleep 0.1
	done
	umount "$mnt"
}

daemon_pid() { "$st" status "$mnt" | sed -n 's/^daemon: *pid \([0-9]*\).*/\1/p'; }

fg_mount() { # COMMAND...: starts a FUSE server in the foreground, waits for its mount
	"$@" &
	fg_pid=$!
	for _ in $(seq 500); do
		mountpoint -q "$mnt" && return 0
		kill -0 "$fg_pid" 2>/dev/null || break
		sleep 0.02
	done
	echo "launch_bench: $* did not mount" >&2
	exit 1
}

# --- images -------------------------------------------------------------------------
base_args=("${mk_args[@]}")
if [ -n "${RECORD_LEVEL:-}" ]; then
	want variants && { echo "launch_bench: RECORD_LEVEL with the variants group" >&2; exit 2; }
	base_args=(--level "$RECORD_LEVEL")
fi
[ -f "$work/base.stp" ] || "$mk" -q "${base_args[@]}" "$tree" "$work/base.stp"
if [ ! -f "$work/hot.txt" ]; then
	stp_mount "$work/base.stp" --record "$work/hot.txt"
	pid=$(daemon_pid)
	launch "$mnt" >/dev/null
	unmount
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done # the list is written on exit
fi
# whole files, each once, in the order of its first line (a file read again is listed
# again); not the names only looked up
awk -F'\t' '$2 != "lookup" && !seen[$1]++ { print $1 }' "$work/hot.txt" >"$work/hot-whole.txt"
[ -f "$work/hot.stp" ] || "$mk" -q "${mk_args[@]}" --hot-list "$work/hot.txt" "$tree" "$work/hot.stp"
if want variants; then
	[ -f "$work/hot-whole.stp" ] || "$mk" -q "${mk_args[@]}" --hot-list "$work/hot-whole.txt" "$tree" "$work/hot-whole.stp"
fi
if want squashfuse || want squashfs; then
	[ -f "$work/tree.sqfs" ] || mksquashfs "$tree" "$work/tree.sqfs" -comp zstd \
		-Xcompression-level 19 -b 1M -noappend -quiet >/dev/null
fi
want erofs && { [ -f "$work/tree.erofs" ] || mkfs.erofs -zlz4hc "$work/tree.erofs" "$tree" >/dev/null; }
if want dwarfs && [ ! -f "$work/tree.dwarfs" ]; then
	# DwarFS takes whole files, one path a line (names with a tab, newline or backslash,
	# which stipple's list escapes, do not occur in these trees)
	# shellcheck disable=SC2086
	"$dwarfs_bin/mkdwarfs" -i "$tree" -o "$work/tree.dwarfs" --categorize=hotness \
		--hotness-list="$work/hot-whole.txt" --progress=none --log-level=warn ${DWARFS_ARGS:-}
fi
cat "$work"/*.stp "$work"/tree.* >/dev/null 2>&1 || true # into the page cache

# --- the columns ----------------------------------------------------------------------
names=() cmds=()
column() { names+=("$1"); cmds+=("$2"); } # NAME MOUNT-COMMAND (evaluated)

warmed_mount() { stp_mount "$@" && "$st" status --wait "$mnt" >/dev/null; }

if want stipple; then
	column "stipple, fresh mount straight away" 'stp_mount "$work/hot.stp"'
	column "stipple, fresh mount after warming" 'warmed_mount "$work/hot.stp"'
fi
if want variants; then
	column "stipple, unprimed, straight away" 'stp_mount "$work/hot.stp" --no-prime'
	column "stipple, unprimed, after warming" 'warmed_mount "$work/hot.stp" --no-prime'
	column "stipple, whole-file hot list, straight away" 'stp_mount "$work/hot-whole.stp"'
	column "stipple, no hot list" 'stp_mount "$work/base.stp"'
	column "stipple, hot list, --warm-workers 0" 'stp_mount "$work/hot.stp" --warm-workers 0'
	# ranges against whole files, both at --level 3 when those images are there
	[ ! -f "$work/hot3.stp" ] ||
		column "stipple, ranges, level 3, straight away" 'stp_mount "$work/hot3.stp"'
	[ ! -f "$work/hotw3.stp" ] ||
		column "stipple, whole files, level 3, straight away" 'stp_mount "$work/hotw3.stp"'
fi
# EXTRA="LABEL=IMAGE ...": more stipple images of the same tree, each a column (say,
# the same hot list built with another --hot-block-size)
# (EXTRA_WARM=1: each after warming too)
for extra in ${EXTRA:-}; do
	column "stipple, ${extra%%=*}, straight away" "stp_mount \"${extra#*=}\""
	[ -z "${EXTRA_WARM:-}" ] ||
		column "stipple, ${extra%%=*}, after warming" "warmed_mount \"${extra#*=}\""
done
# COMPARE="LABEL=BUILD ...": the same image mounted by another build's daemon
for other in ${COMPARE:-}; do
	ost=${other#*=}/mounthelper/stipple
	column "stipple ${other%%=*}, straight away" "\"$ost\" mount \"\$work/hot.stp\" \"\$mnt\""
	column "stipple ${other%%=*}, after warming" \
		"\"$ost\" mount \"\$work/hot.stp\" \"\$mnt\" && \"$ost\" status --wait \"\$mnt\" >/dev/null"
done
want squashfuse && column "squashfuse_ll" 'fg_mount squashfuse_ll -f "$work/tree.sqfs" "$mnt"'
want squashfs && column "kernel squashfs" 'mount -t squashfs -o loop,ro "$work/tree.sqfs" "$mnt"'
want erofs && column "kernel erofs (lz4hc)" 'mount -t erofs -o loop,ro "$work/tree.erofs" "$mnt"'
want dwarfs && column "dwarfs (hotness, preload)" \
	'fg_mount "$dwarfs_bin/dwarfs" "$work/tree.dwarfs" "$mnt" -f -o preload_category=hotness'
if want sweep; then
	for n in 0 1 2 4 8; do
		column "sweep: --warm-workers $n" "stp_mount \"\$work/hot.stp\" --warm-workers $n"
	done
fi

# --- measurements ----------------------------------------------------------------------
# This machine's speed drifts by a third within a minute, more than the gaps measured. So
# each column's launches are bracketed by two plain launches (P A A' P, then P B B' P, ...)
# and every ratio is the median over the rounds of a launch against the mean of its two
# brackets. Each round starts one column later than the one before, so that a drift that
# repeats with the rounds does not fall on the same column every time. The control column
# launches the folder itself in the same way: its ratios show what the estimate resolves.
declare -A first second mounts peak rfirst rsecond rsteady rmounted
plain_runs=()
column "plain folder (control)" ':'
launch "$tree" >/dev/null # warm the folder's page cache
ratio() { echo "$1 / (($2 + $3) / 2)" | bc -l; }
ncols=${#names[@]}
for round in $(seq "$runs"); do
	for k in $(seq 0 $((ncols - 1))); do
		i=$(((k + round - 1) % ncols))
		dir=$mnt
		[ "${cmds[$i]}" != : ] || dir=$tree
		before=$(launch "$tree")
		fg_pid=
		t0=$(date +%s.%N)
		eval "${cmds[$i]}"
		m=$(echo "$(date +%s.%N) - $t0" | bc -l)
		mounts[$i]+=" $m"
		pid=$fg_pid
		[ "$dir" = "$tree" ] || [ -n "$pid" ] || pid=$(daemon_pid 2>/dev/null || true)
		f=$(launch "$dir")
		s=$(launch "$dir")
		# STEADY=N: N more launches, each between two plain ones (P X P X ... P)
		if [ "${STEADY:-0}" -gt 0 ]; then
			p0=$(launch "$tree")
			for _ in $(seq "$STEADY"); do
				x=$(launch "$dir")
				p1=$(launch "$tree")
				rsteady[$i]+=" $(ratio "$x" "$p0" "$p1")"
				p0=$p1
			done
		fi
		if [ -n "$pid" ]; then
			peak[$i]+=" $(awk '/VmHWM/ { print $2 / 1024 }' "/proc/$pid/status")"
		fi
		[ "$dir" = "$tree" ] || unmount
		[ -z "$fg_pid" ] || wait "$fg_pid" || true
		fg_pid=
		after=$(launch "$tree")
		plain_runs+=("$before" "$after")
		first[$i]+=" $f"
		second[$i]+=" $s"
		rfirst[$i]+=" $(ratio "$f" "$before" "$after")"
		rmounted[$i]+=" $(ratio "$(echo "$m + $f" | bc -l)" "$before" "$after")"
		rsecond[$i]+=" $(ratio "$s" "$before" "$after")"
	done
	echo "round $round/$runs done" >&2
done

# stipple's memory, peak during a launch and settled a few seconds later
if want stipple; then
	stp_mount "$work/hot.stp"
	pid=$(daemon_pid)
	launch "$mnt" >/dev/null
	sleep 3
	st_peak=$(awk '/VmHWM/ { print $2 / 1024 }' "/proc/$pid/status")
	st_settled=$(awk '/VmRSS/ { print $2 / 1024 }' "/proc/$pid/status")
	unmount
fi

# --- report -------------------------------------------------------------------------
if [ "$runs" -eq 0 ]; then # RUNS=0: the images are ready, nothing was timed
	echo "launch_bench: images ready in $work" >&2
	exit 0
fi
med() { tr ' ' '\n' | grep . | median; }
quartiles() { # the first and third quartiles of the words on stdin
	tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END {
		lo = int((NR + 3) / 4); hi = NR + 1 - lo; printf "%.2f-%.2f", v[lo], v[hi] }'
}
plain=$(printf '%s\n' "${plain_runs[@]}" | median)
printf '\n%s, tree %s (%s); medians of %d interleaved rounds\n' "$(tree_describe)" "$tree" \
	"$(du -sh "$tree" | cut -f1)" "$runs"
printf 'ratio: median over the rounds of a launch against its two plain brackets (quartiles beside)\n'
printf 'from mount: the mount command and the first launch together, against the plain launch\n'
printf '(a launch straight away gains what warming did before the mount returned)\n'
printf '%-46s %8s %6s %10s %8s %6s %10s %7s %9s %10s\n' "launch" "first" "ratio" "quartiles" \
	"second" "ratio" "quartiles" "mount" "peak MiB" "from mount"
printf '%-46s %8.3f   (median of %d plain launches through the run)\n' "plain folder" \
	"$plain" "${#plain_runs[@]}"
for i in "${!names[@]}"; do
	f=$(med <<<"${first[$i]}")
	s=$(med <<<"${second[$i]}")
	m=$(med <<<"${mounts[$i]}")
	p=-
	[ -z "${peak[$i]:-}" ] || p=$(printf '%.0f' "$(tr ' ' '\n' <<<"${peak[$i]}" | grep . | sort -g | tail -1)")
	printf '%-46s %8.3f %6.2f %10s %8.3f %6.2f %10s %7.3f %9s %10.2f\n' "${names[$i]}" "$f" \
		"$(med <<<"${rfirst[$i]}")" "$(quartiles <<<"${rfirst[$i]}")" "$s" \
		"$(med <<<"${rsecond[$i]}")" "$(quartiles <<<"${rsecond[$i]}")" "$m" "$p" \
		"$(med <<<"${rmounted[$i]}")"
done
if [ "${STEADY:-0}" -gt 0 ]; then
	printf '\nlater launches on the same mount, %d a round, each between two plain ones:\n' "$STEADY"
	for i in "${!names[@]}"; do
		printf '%-46s %6.3f %10s  (%d launches)\n' "${names[$i]}" "$(med <<<"${rsteady[$i]}")" \
			"$(quartiles <<<"${rsteady[$i]}")" "$(wc -w <<<"${rsteady[$i]}")"
	done
fi
printf '\npeak MiB: the FUSE daemon'\''s VmHWM after two launches (highest over the rounds); '
printf 'kernel file systems: - (their page cache is not counted)\n'
printf 'images: '
ls -lL "$work"/*.stp "$work"/tree.* 2>/dev/null | awk '{ printf "%s %d  ", $9, $5 }' || true # -L: images may be links; tree.* may be none
printf '\nhot list: %s files, %s recorded (whole files at their size), hot region %s\n' \
	"$(grep -cv $'\tlookup$' "$work/hot.txt")" "$(hot_list_bytes "$tree" "$work/hot.txt" | numfmt --to=iec)" \
	"$("$st" info "$work/hot.stp" | sed -n 's/^hot region: *\([0-9]*\).*/\1/p' | numfmt --to=iec)"
if want stipple; then
	printf 'stipple daemon memory: peak %.0f MiB, settled %.0f MiB (block %s)\n' "$st_peak" \
		"$st_settled" "$("$st" info "$work/hot.stp" | sed -n 's/^block size: *[0-9]* (\(.*\))/\1/p')"
fi
