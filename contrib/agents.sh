#!/usr/bin/env bash
# agents.sh installs the real agent CLIs pinned in contrib/agents.txt from
# npm into a cache outside the tree (reused between runs), and runs the
# end-to-end test against them (TestAgents) in a network namespace with no
# route off the machine: the agents and the built-in allowlists name vendor
# hosts, and a misconfigured profile must meet no route, never the internet.
#
#   contrib/agents.sh install     # only install (needs npm and the registry)
#   contrib/agents.sh test        # install, then the test (as root: the rig, in `unshare --net`)
#
# MOSAIC_AGENTS_CACHE (default /var/cache/mosaic/agents) is the cache.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${MOSAIC_AGENTS_CACHE:-/var/cache/mosaic/agents}

install() {
	command -v npm >/dev/null || { echo "agents: npm is missing (apt-get install npm)" >&2; exit 1; }
	mkdir -p "$cache"
	chmod 0755 "$cache"
	grep -v '^#' "$here/contrib/agents.txt" | while read -r pkg ver bin; do
		[ -n "$pkg" ] || continue
		dir="$cache/${pkg//\//+}@$ver"
		if [ -x "$dir/node_modules/.bin/$bin" ]; then
			continue
		fi
		echo "agents: installing $pkg@$ver into $dir"
		rm -rf "$dir.tmp"
		# npm 11 runs no install scripts unless approved; none is needed
		# (the native binaries come as optional dependencies).
		npm install --no-audit --no-fund --ignore-scripts --prefix "$dir.tmp" "$pkg@$ver" >/dev/null
		chmod -R a+rX "$dir.tmp"
		mv "$dir.tmp" "$dir"
	done
}

case "${1:-}" in
install) install ;;
test)
	install
	[ "$(id -u)" = 0 ] || { echo "agents: the test needs root (it boots contrib/rig.sh in a network namespace of its own)" >&2; exit 1; }
	# Fetch the modules while the module proxy is reachable; the rig reads
	# them from this cache.
	(cd "$here" && go mod download)
	exec unshare --net -- bash -c '
		ip link set lo up
		export GOPROXY=off MOSAIC_AGENTS_CACHE="$1"
		exec "$2/contrib/with-user-manager.sh" go test -count=1 -timeout 20m -run "$3" -v ./cmd/mosaic/
	' bash "$cache" "$here" "${MOSAIC_AGENTS_RUN:-^TestAgents}"
	;;
*) echo "usage: contrib/agents.sh install|test" >&2; exit 2 ;;
esac
