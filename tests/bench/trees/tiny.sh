# SPDX-License-Identifier: MIT
# Tree recipe (sourced by the launch benchmarks): a tiny tree to check that a benchmark
# script runs end to end in seconds (RUNS=1 TREE_KIND=tiny), not to measure anything. A
# shell script that reads a few files of the tree. Packages: none.

tree_describe() { echo "a tiny tree (script check only)"; }

tree_ready() { [ -f "$1/bin/start" ]; }

tree_assemble() {
	local d=$1
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/data"
	head -c 3000000 /dev/urandom >"$d/data/big"
	for i in 1 2 3 4 5; do seq 1 20000 >"$d/data/list-$i"; done
	cat >"$d/bin/start" <<'SH'
#!/bin/sh
here=$(dirname "$0")/..
cat "$here"/data/list-* "$here/data/big" | cksum >/dev/null
SH
	chmod +x "$d/bin/start"
}

tree_launch() { sh "$1/bin/start"; }
