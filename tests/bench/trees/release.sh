# SPDX-License-Identifier: MIT
# Helpers for the recipes of release trees (jdk17.sh, node-red.sh, firefox-esr.sh): trees
# unpacked as shipped, as /work/releases/README.md says how (tests/bench/release_update.py
# measures their updates, tests/bench/base_launch.sh their launches). Such a tree is not
# assembled here; what a launch needs beside it (a class, a script, a profile) is made in
# a scratch directory, outside the tree, shared by every launch directory.

release_scratch() { echo "${RELEASE_SCRATCH:-/var/tmp/stipple-release-launch}"; }

release_missing() { # TREE: fails, naming the tree and how to make it
	echo "tree recipe: $1 is not unpacked: see /work/releases/README.md (apt-get download" \
		"PKG=VERSION; dpkg-deb -x), or give TREE=" >&2
	return 1
}
