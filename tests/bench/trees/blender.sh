# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): Blender from Debian's blender package, as
# $shared/corpora/blender-tree.sh assembles it (about 670 MiB in 3,700 files).
# Packages: blender (the corpus script installs it when missing).
# Launch: blender -b --factory-startup -noaudio --python-expr "import bpy".

tree_describe() { echo "Blender 3.4 (blender -b --factory-startup, import bpy)"; }

tree_ready() { [ -x "$1/blender" ]; }

tree_assemble() { sh "$shared/corpora/blender-tree.sh" "$1" >/dev/null; }

tree_launch() {
	LD_LIBRARY_PATH="$1/lib" "$1/blender" -b --factory-startup -noaudio \
		--python-expr "import bpy" >/dev/null 2>&1
}
