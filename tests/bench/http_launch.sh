#!/bin/bash
# SPDX-License-Identifier: MIT
# HTTP launch benchmark (run by hand, as root, on a quiet machine): the same hot image
# launched from a local file and from http://127.0.0.1 (nginx on loopback, started here
# with its own config in WORKDIR/http), every mount fresh, interleaved A B C A B C:
#
#   A  local file, fresh mount, launch straight away
#   B  URL, fresh mount, empty disk cache, launch straight away
#   C  URL, fresh mount, the disk cache B filled, launch straight away
#
# and reports the medians, their ratios to A (the issue's targets: B <= 1.10 x A,
# C <= 1.02 x A), and the bytes nginx served for B's mount and launch against the hot
# region plus the metadata (target <= 1.10 x).
#
# The tree and its hot image come from launch_bench.sh's recipes (tests/bench/trees/), and
# WORKDIR/hot.stp is used when it is there (launch_bench.sh leaves it): otherwise the
# tree is assembled, a hot list recorded from one launch, and the image built here.
#
# usage: tests/bench/http_launch.sh [WORKDIR]
#   env: TREE_KIND=blender RUNS=5 STIPPLE_BUILD=build LEVEL= TREE=WORKDIR/tree
#   WORKDIR defaults to /var/tmp/stipple-launch (blender) or /var/tmp/stipple-launch-KIND.
#   a check that it runs: RUNS=1 TREE_KIND=tiny LEVEL=3 tests/bench/http_launch.sh /tmp/hl
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kind=${TREE_KIND:-blender}
[ -f "$here/trees/$kind.sh" ] || { echo "http_launch: no tree recipe $here/trees/$kind.sh" >&2; exit 2; }
. "$here/trees/lib.sh"
. "$here/trees/$kind.sh"

if [ "$kind" = blender ]; then work=${1:-/var/tmp/stipple-launch}; else work=${1:-/var/tmp/stipple-launch-$kind}; fi
build=${STIPPLE_BUILD:-$repo/build}
runs=${RUNS:-5}
tree=${TREE:-$work/tree}
mk=$build/builder/mkstipple
st=$build/mounthelper/stipple
mk_args=()
[ -z "${LEVEL:-}" ] || mk_args=(--level "$LEVEL")
mnt=$work/mnt
http=$work/http
cache=$http/cache
mkdir -p "$work" "$mnt" "$http/www"
command -v nginx >/dev/null || { echo "http_launch: needs nginx (apt-get install nginx-light)" >&2; exit 2; }

nginx_pid=
cleanup() {
	mountpoint -q "$mnt" && umount "$mnt" || true
	[ -z "$nginx_pid" ] || { kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null || true; }
}
trap cleanup EXIT

launch() { # DIR: one launch, prints seconds
	local t0 t1
	t0=$(date +%s.%N)
	tree_launch "$1" || { echo "http_launch: the launch from $1 failed" >&2; exit 1; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
daemon_pid() { "$st" status "$mnt" | sed -n 's/^daemon: *pid \([0-9]*\).*/\1/p'; }

# --- the image ------------------------------------------------------------------------
tree_ready "$tree" || tree_assemble "$tree"
if [ ! -f "$work/hot.stp" ]; then
	[ -f "$work/base.stp" ] || "$mk" -q "${mk_args[@]}" "$tree" "$work/base.stp"
	if [ ! -f "$work/hot.txt" ]; then
		"$st" mount "$work/base.stp" "$mnt" --record "$work/hot.txt"
		pid=$(daemon_pid)
		launch "$mnt" >/dev/null
		umount "$mnt"
		while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done # written as the daemon exits
	fi
	"$mk" -q "${mk_args[@]}" --hot-list "$work/hot.txt" "$tree" "$work/hot.stp"
fi
ln -f "$work/hot.stp" "$http/www/app.stp" 2>/dev/null || cp "$work/hot.stp" "$http/www/app.stp"
cat "$work/hot.stp" >/dev/null # both in the page cache: the network, not the disk, is measured

# --- nginx on loopback ------------------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$http/nginx.conf" <<CONF
daemon off;
master_process off;
worker_processes 1;
user root;
pid $http/nginx.pid;
error_log $http/error.log;
events { worker_connections 512; }
http {
  log_format counted '\$body_bytes_sent';
  access_log $http/access.log counted;
  client_body_temp_path $http/client_body;
  proxy_temp_path $http/proxy;
  fastcgi_temp_path $http/fastcgi;
  uwsgi_temp_path $http/uwsgi;
  scgi_temp_path $http/scgi;
  keepalive_requests 100000;
  sendfile on;
  server { listen 127.0.0.1:$port; root $http/www; location / { } }
}
CONF
: >"$http/access.log"
nginx -c "$http/nginx.conf" -p "$http" &
nginx_pid=$!
for _ in $(seq 200); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break
	sleep 0.05
done
url=http://127.0.0.1:$port/app.stp
served() { awk '{ s += $1 } END { printf "%.0f\n", s }' "$http/access.log"; }

# --- A B C A B C ...------------------------------------------------------------------------
declare -a ta tb tc fetched
launch "$tree" >/dev/null
for round in $(seq "$runs"); do
	"$st" mount "$work/hot.stp" "$mnt"
	ta+=("$(launch "$mnt")")
	umount "$mnt"

	rm -rf "$cache"
	before=$(served)
	"$st" mount -o "cache_dir=$cache" "$url" "$mnt"
	tb+=("$(launch "$mnt")")
	fetched+=("$(( $(served) - before ))")
	umount "$mnt"

	"$st" mount -o "cache_dir=$cache" "$url" "$mnt"
	tc+=("$(launch "$mnt")")
	umount "$mnt"
	echo "round $round/$runs done" >&2
done

# --- report -------------------------------------------------------------------------
a=$(printf '%s\n' "${ta[@]}" | median)
b=$(printf '%s\n' "${tb[@]}" | median)
c=$(printf '%s\n' "${tc[@]}" | median)
f=$(printf '%s\n' "${fetched[@]}" | median)
info=$("$st" info --blocks "$work/hot.stp")
# the hot region as stored: the blocks that hold its decoded bytes
hot=$(awk '/^block size:/ { bs = $3 } /^hot region:/ { h = $3 }
	/^[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ / { if ($1 * bs < h) s += $3 } END { print s + 0 }' <<<"$info")
# the stored metadata: whole, or pages and their table
meta=$(sed -n -e 's/^metadata: *offset [0-9]*, \([0-9]*\) bytes stored.*/\1/p' \
	-e 's/^metadata: *[0-9]* pages, \([0-9]*\) bytes stored.*, \([0-9]*\) bytes$/\1 \2/p' <<<"$info" |
	awk '{ print $1 + $2 }')
need=$(( ${hot:-0} + ${meta:-0} ))
printf '\n%s, tree %s; medians of %d interleaved rounds\n' "$(tree_describe)" "$tree" "$runs"
printf '%-48s %8s %7s\n' "launch straight away after a fresh mount" "seconds" "ratio"
printf '%-48s %8.3f %7.2f\n' "A  local file" "$a" 1
printf '%-48s %8.3f %7.2f   (target <= 1.10)\n' "B  $url, empty disk cache" "$b" "$(echo "$b / $a" | bc -l)"
printf '%-48s %8.3f %7.2f   (target <= 1.02)\n' "C  the same, disk cache filled" "$c" "$(echo "$c / $a" | bc -l)"
printf 'bytes served for B (mount and launch): %s; hot region (stored) + metadata: %s' "$f" "$need"
[ "$need" -gt 0 ] && printf ' (%.2f x, target <= 1.10)' "$(echo "$f / $need" | bc -l)"
printf '\n'
