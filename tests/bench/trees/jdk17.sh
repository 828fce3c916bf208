# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): a JDK 17 release as Debian ships it, unpacked
# (openjdk-17-jre-headless, -jre, -jdk-headless, -jdk, -source at one version, about 313
# MiB; /work/releases/jdk17-*). Its conf links point into the system's /etc/java-17-openjdk.
# Launch: TREE/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp SCRATCH/jdk17 Hello, lib.sh's
# hello world, compiled once by the tree's javac into the scratch directory.
. "$(dirname "${BASH_SOURCE[0]}")/release.sh"

jdk17_java() { echo "$1/usr/lib/jvm/java-17-openjdk-amd64/bin/java"; }

tree_describe() { echo "JDK 17 release (java Hello)"; }

tree_ready() { [ -x "$(jdk17_java "$1")" ] && [ -f "$(release_scratch)/jdk17/Hello.class" ]; }

tree_assemble() {
	local d=$1 app
	app=$(release_scratch)/jdk17
	[ -x "$(jdk17_java "$d")" ] || release_missing "$d" || return 1
	mkdir -p "$app"
	write_hello_java "$app/Hello.java"
	"$d/usr/lib/jvm/java-17-openjdk-amd64/bin/javac" -d "$app" "$app/Hello.java"
}

# the word counts must come out
tree_launch() {
	local out
	out=$("$(jdk17_java "$1")" -cp "$(release_scratch)/jdk17" Hello 2>/dev/null) || return 1
	[ "$out" = "$HELLO_JAVA_OUT" ]
}
