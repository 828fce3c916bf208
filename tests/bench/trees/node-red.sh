# SPDX-License-Identifier: MIT
# Tree recipe (sourced by launch_bench.sh): a Node-RED application as npm installs it
# (node_modules of node-red and its 279 packages, about 96 MiB; /work/releases/node-red-*).
# Node.js itself is the system's (/usr/bin/node, nodejs), outside the tree.
# Launch: node SCRATCH/node-red/start.js TREE: Node-RED's runtime started with its core
# nodes (no HTTP server listening, no editor, nothing fetched), then stopped.
. "$(dirname "${BASH_SOURCE[0]}")/release.sh"

tree_describe() { echo "Node-RED application (runtime start with core nodes)"; }

tree_ready() { [ -f "$1/node_modules/node-red/red.js" ] && [ -f "$(release_scratch)/node-red/start.js" ]; }

tree_assemble() {
	local d=$1 s
	s=$(release_scratch)/node-red
	[ -f "$d/node_modules/node-red/red.js" ] || release_missing "$d" || return 1
	[ -x /usr/bin/node ] || apt-get install -y -qq nodejs >/dev/null
	mkdir -p "$s/user"
	cat >"$s/start.js" <<'J'
// start Node-RED's runtime from the tree in argv[2], print how many node sets it loaded
const path = require('path');
const RED = require(path.join(process.argv[2], 'node_modules/node-red'));
const settings = { httpAdminRoot: false, httpNodeRoot: false, userDir: process.argv[3],
    flowFile: 'flows.json', logging: { console: { level: 'off' } } };
RED.init(require('http').createServer(), settings);
RED.start()
    .then(() => { const n = RED.nodes.getNodeList().length;
        return RED.stop().then(() => { console.log('nodes ' + n); process.exit(0); }); })
    .catch((e) => { console.error(e); process.exit(1); });
J
}

# the core node sets must load (37 in 4.1.14 and 4.1.15)
tree_launch() {
	local s out
	s=$(release_scratch)/node-red
	out=$(/usr/bin/node "$s/start.js" "$1" "$s/user" 2>/dev/null) || return 1
	[[ $out =~ ^nodes\ [1-9][0-9]$ ]]
}
