#!/usr/bin/env bash
# agents.sh installs the real agent CLIs pinned in contrib/agents.txt from
# npm into a cache outside the tree (reused between runs), and runs the
# end-to-end tests against them (TestAgents, TestAgentsAttach: on both rigs,
# systemd 252 and 257) in a network namespace with no route off the
# machine: the agents and the built-in allowlists name vendor hosts, and a
# misconfigured profile must meet no route, never the internet.
#
#   contrib/agents.sh install     # only install (needs node, npm and the registry)
#   contrib/agents.sh test        # install, then the test (as root: the rig, in `unshare --net`)
#
# MOSAIC_AGENTS_CACHE (default /var/cache/mosaic/agents) is the cache.
#
# Each package is installed the way its vendor supports, `npm install` with
# its install scripts run (Claude Code and opencode place their native binary
# in their postinstall): agents.txt names the packages whose scripts are
# approved, and npm's --strict-allow-scripts fails the install on any other,
# so none is skipped unseen. Then, on the host, the CLI must answer
# `--version` with the pinned version, or the entry is removed and the
# install fails naming the package, the command and what it printed. Each
# entry keeps a stamp of its recipe (a hash of this script, its line of
# agents.txt and the node and npm versions); an entry of another recipe is
# rebuilt, and every run checks `--version` again, so no test runs on an
# entry this script did not make.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${MOSAIC_AGENTS_CACHE:-/var/cache/mosaic/agents}
# The oldest Node every pinned CLI runs on: pi's engines (>=20.6.0) and
# Codex's (>=16) are for the JavaScript they run. Claude Code asks for
# >=22.0.0, but its CLI is a native binary that needs no Node at all; only
# its postinstall (install.cjs) runs on Node, and it runs on 20. opencode's
# CLI is native too.
node_min=20.6.0

die() { echo "agents: $*" >&2; exit 1; }

# printable keeps what a terminal shows as text of a CLI's output.
printable() { LC_ALL=C tr -c '\t\n\40-\176' '?'; }

# recipe prints the stamp of how an entry is made from LINE of agents.txt:
# this script, the line, and the node and npm that install it ($tools).
recipe() { { cat "$here/contrib/agents.sh"; printf '%s\n%s\n' "$1" "$tools"; } | sha256sum | cut -d' ' -f1; }

# verify DIR PKG VERSION BIN runs the entry's BIN --version on the host, with
# a throwaway HOME (a CLI may write its state there), and says what is wrong
# unless it exits 0 printing VERSION.
verify() {
	local dir=$1 pkg=$2 ver=$3 bin=$4 scratch out rc=0
	local cmd="$dir/node_modules/.bin/$bin --version"
	scratch=$(mktemp -d)
	out=$(cd "$scratch" && timeout 60 env -i PATH="$PATH" HOME="$scratch" TMPDIR="$scratch" LANG=C.UTF-8 \
		"$dir/node_modules/.bin/$bin" --version </dev/null 2>&1) || rc=$?
	rm -rf "$scratch"
	# VERSION as a word of its own (3.0.0 is not in 3.0.0.1), or vVERSION.
	if [ $rc = 0 ] && tr -c '0-9A-Za-z.+-' '\n' <<<"$out" | grep -qxF -e "$ver" -e "v$ver"; then
		return 0
	fi
	{
		echo "agents: $pkg@$ver does not work: \`$cmd\` exited $rc, want $ver; it printed:"
		printf '%s\n' "${out:-(nothing)}" | head -n 20 | printable | sed 's/^/  /'
	} >&2
	return 1
}

# install_one LINE installs, or checks, the entry of one line of agents.txt.
install_one() {
	local line=$1 pkg ver bin scripts dir stamp allow="" p log start
	read -r pkg ver bin scripts <<<"$line"
	[ -n "$bin" ] || die "contrib/agents.txt: \"$line\": want PACKAGE VERSION BINARY SCRIPTS"
	dir="$cache/${pkg//\//+}@$ver"
	stamp=$(recipe "$line")
	if [ -e "$dir" ]; then
		if [ "$(cat "$dir/.mosaic-recipe" 2>/dev/null)" = "$stamp" ]; then
			if verify "$dir" "$pkg" "$ver" "$bin"; then
				echo "agents: $pkg@$ver: cached by this recipe, answers --version" >&2
				return 0
			fi
			echo "agents: removing $dir; installing it again" >&2
		else
			echo "agents: $dir was made by another recipe (contrib/agents.sh, its line of agents.txt, node or npm changed): installing it again" >&2
		fi
		rm -rf "$dir"
	fi
	for p in ${scripts//,/ }; do
		[ "$p" = - ] || allow+="${allow:+,}\"$p\":true"
	done
	echo "agents: installing $pkg@$ver into $dir" >&2
	start=$SECONDS
	rm -rf "$dir.tmp"
	mkdir -p "$dir.tmp"
	printf '{"private":true,"allowScripts":{%s}}\n' "$allow" >"$dir.tmp/package.json"
	log=$dir.tmp/.npm-install.log
	# Whatever an npmrc says, optional dependencies (the native binaries)
	# are installed and the approved scripts run.
	if ! npm install --no-audit --no-fund --save-exact --include=optional --ignore-scripts=false --strict-allow-scripts \
		--prefix "$dir.tmp" "$pkg@$ver" >"$log" 2>&1; then
		tail -n 20 "$log" | printable >&2
		rm -rf "$dir.tmp"
		die "npm install $pkg@$ver failed (its last lines above)"
	fi
	rm -f "$log"
	chmod -R a+rX "$dir.tmp"
	mv -T "$dir.tmp" "$dir"
	if ! verify "$dir" "$pkg" "$ver" "$bin"; then
		rm -rf "$dir"
		die "removed $dir: $pkg@$ver is not installed"
	fi
	echo "$stamp" >"$dir/.mosaic-recipe"
	chmod 0644 "$dir/.mosaic-recipe"
	echo "agents: $pkg@$ver installed in $((SECONDS - start)) s" >&2
}

install() {
	command -v npm >/dev/null || die "npm is missing (apt-get install npm)"
	command -v node >/dev/null || die "node is missing (apt-get install nodejs)"
	local v
	v=$(node --version)
	v=${v#v}
	[ "$(printf '%s\n%s\n' "$node_min" "$v" | sort -V | head -n 1)" = "$node_min" ] ||
		die "the pinned CLIs need Node $node_min or newer (pi's engines) and this machine has $v: install a newer nodejs (Debian 13's, or NodeSource's for Debian 12)"
	tools="node $v, npm $(npm --version)"
	mkdir -p "$cache"
	chmod 0755 "$cache"
	# One install at a time; a test holds it shared (below) so that no
	# install rebuilds an entry under it.
	exec 9>"$cache/.lock"
	flock 9
	local line
	while IFS= read -r line; do
		case "$line" in '#'* | '') continue ;; esac
		install_one "$line"
	done <"$here/contrib/agents.txt"
}

case "${1:-}" in
install) install ;;
test)
	install
	flock -s 9
	[ "$(id -u)" = 0 ] || die "the test needs root (it boots contrib/rig.sh in a network namespace of its own)"
	# Fetch the modules while the module proxy is reachable; the rig reads
	# them from this cache.
	(cd "$here" && go mod download)
	# And the 257 rig's root, which the test runs on too (its TUI test
	# drives a full-screen agent there as on the host's 252).
	"$here/contrib/rig-root.sh" >/dev/null
	exec unshare --net -- bash -c '
		ip link set lo up
		export GOPROXY=off MOSAIC_AGENTS_CACHE="$1" MOSAIC_AGENTS_TEST=1
		# This shell keeps the lock (fd 9); the test does not inherit it.
		"$2/contrib/with-user-manager.sh" --systemd host,257 go test -count=1 -timeout 20m -run "$3" -v ./cmd/mosaic/ 9>&-
	' bash "$cache" "$here" "${MOSAIC_AGENTS_RUN:-^TestAgents}"
	;;
*) echo "usage: contrib/agents.sh install|test" >&2; exit 2 ;;
esac
