#!/bin/bash
# SPDX-License-Identifier: MIT
# One launch of a tree recipe from a folder, as launch_bench.sh times it: exits 0 only
# when the launch did its work (each recipe checks its output). For tracing tools.
#
# usage: tests/bench/launch_one.sh KIND DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -eq 2 ] && [ -f "$here/trees/$1.sh" ] || { echo "usage: launch_one.sh KIND DIR" >&2; exit 2; }
. "$here/trees/lib.sh"
. "$here/trees/$1.sh"
tree_launch "$2"
