# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): Node.js 20 and npm 10: the node binary (95 MiB,
# V8 and ICU linked in), npm with its own modules in lib/node_modules/npm, the C++
# libraries node links in DEST/native, and a small package in DEST/app. About 120 MiB.
# Packages: nodejs (Debian's 18 with npm, or NodeSource's 20, which bundles npm).
# Launch: node npm-cli.js pack --dry-run --json in DEST/app: npm loads its command
# modules, reads the package and lists what it would pack (offline, no cache written).

tree_describe() { echo "Node.js 20 + npm (npm pack --dry-run of a small package)"; }

tree_ready() { [ -x "$1/bin/node" ] && [ -f "$1/lib/node_modules/npm/bin/npm-cli.js" ]; }

tree_assemble() {
	local d=$1 npm=/usr/lib/node_modules/npm
	[ -x /usr/bin/node ] || apt-get install -y -qq nodejs npm >/dev/null
	[ -d $npm ] || npm=/usr/share/nodejs/npm # Debian's own npm package
	rm -rf "$d"
	mkdir -p "$d/bin" "$d/lib/node_modules" "$d/app"
	cp /usr/bin/node "$d/bin/node"
	cp -rL $npm "$d/lib/node_modules/npm"
	copy_libs "$d/native" "$d/bin/node"
	cat >"$d/app/package.json" <<'J'
{ "name": "launch-app", "version": "1.0.0", "main": "index.js", "license": "MIT",
  "files": ["index.js", "lib/"] }
J
	echo 'module.exports = require("./lib/words");' >"$d/app/index.js"
	mkdir -p "$d/app/lib"
	echo 'module.exports = (s) => s.split(/\s+/).sort();' >"$d/app/lib/words.js"
	expect_in_tree "$d" npm "$(npm_run "$d" -- exec --offline -c 'echo $npm_execpath' 2>/dev/null)"
}

npm_run() { # DIR [ARGS...]: npm from DIR, in DIR/app, offline, with a scratch cache
	local d=$1
	shift
	[ "${1:-}" != -- ] || shift
	(cd "$d/app" && npm_config_cache=/tmp/launch-npm-cache npm_config_update_notifier=false \
		npm_config_fund=false npm_config_audit=false LD_LIBRARY_PATH="$d/native" \
		"$d/bin/node" "$d/lib/node_modules/npm/bin/npm-cli.js" "$@")
}

# the listing must name the package's three files
tree_launch() {
	local out
	out=$(npm_run "$1" pack --dry-run --json --offline 2>/dev/null) || return 1
	[[ $out == *'"entryCount": 3'* && $out == *lib/words.js* ]]
}
