# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): OpenJDK 17, the runtime and its modules image
# (lib/modules, 123 MiB) and class-data archive, without jmods, docs and headers, and a
# hello world compiled with its javac. About 185 MiB.
# Packages: openjdk-17-jre-headless openjdk-17-jdk-headless (javac, for the hello world).
# Launch: DEST/jdk/bin/java -cp DEST/app Hello.

tree_describe() { echo "OpenJDK 17 (java Hello, with a few collections and a string format)"; }

tree_ready() { [ -x "$1/jdk/bin/java" ] && [ -f "$1/app/Hello.class" ]; }

tree_assemble() {
	local d=$1 jdk=/usr/lib/jvm/java-17-openjdk-amd64
	[ -x $jdk/bin/javac ] || apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
	rm -rf "$d"
	mkdir -p "$d/jdk" "$d/app"
	# links into /etc are followed; lib/src.zip points at a source package not installed
	for part in bin conf lib legal release; do cp -rL "$jdk/$part" "$d/jdk/" 2>/dev/null || true; done
	write_hello_java "$d/app/Hello.java"
	"$jdk/bin/javac" -d "$d/app" "$d/app/Hello.java"
	expect_in_tree "$d" java.home "$("$d/jdk/bin/java" -XshowSettings:properties -version 2>&1 |
		grep 'java.home')"
}

# the word counts must come out
tree_launch() {
	local out
	out=$("$1/jdk/bin/java" -cp "$1/app" Hello 2>/dev/null) || return 1
	[ "$out" = "$HELLO_JAVA_OUT" ]
}
