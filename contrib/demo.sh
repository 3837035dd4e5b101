#!/usr/bin/env bash
# demo.sh shows one confined session: what the agent sees of the machine,
# and a background session inspected the systemd way. `make demo` runs it
# where a user manager is reachable (inside contrib/rig.sh otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mosaic=${MOSAIC_BIN:-$here/bin/mosaic}
[ -x "$mosaic" ] || { echo "demo: $mosaic is missing: run make build" >&2; exit 1; }

# Everything the demo makes lives in one directory of its own (0700), removed
# at the end: the workspace, the key stand-in and mosaic's state for the
# demo's sessions (XDG_STATE_HOME). Nothing else of the home is touched.
demo=$(mktemp -d "$HOME/mosaic-demo-XXXXXX")
export XDG_STATE_HOME=$demo/state
ws=$demo/workspace
secret=$demo/ssh/id_demo
mkdir -p "$ws" "$demo/ssh"
(umask 077 && echo "a private key stand-in" >"$secret")
# A session name no other session has; stopped only if the demo started it.
name=demo-$$ started="" run=demo-run-$$
cleanup() {
	"$mosaic" rm --force "$run" >/dev/null 2>&1 || true
	[ -z "$started" ] || { "$mosaic" stop "$name" >/dev/null 2>&1; "$mosaic" rm "$name" >/dev/null 2>&1; } || true
	rm -rf "$demo"
}
trap cleanup EXIT

# Bold headings on a terminal, plain text into a pipe or with NO_COLOR.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi

say "on the host: a key stand-in in your home ($secret), the user bus and systemd's socket"
ls -l "$secret" "$XDG_RUNTIME_DIR/bus" "$XDG_RUNTIME_DIR/systemd/private"

say "mosaic run: the same checks from inside a confined session, in its own copy of the workspace (clone mode, the default)"
"$mosaic" run --name "$run" --workspace "$ws" -- sh -c '
	echo "whoami: $(id -un), pid $$ (its own PID namespace)"
	echo "HOME=$HOME holds: $(ls -A "$HOME" | tr "\n" " ")(the session'"'"'s own home)"
	cat "$1" 2>&1 | sed "s/^/reading the key: /"
	ls "$2" 2>&1 | sed "s/^/the runtime dir: /"
	echo "processes visible: $(ls -d /proc/[0-9]* | wc -l)"
	echo "workspace write: $(echo hello > "$PWD/hello.txt" && echo ok)"
	touch /usr/x 2>&1 | sed "s/^/writing \/usr: /"
	echo "environment: $(env | cut -d= -f1 | sort | tr "\n" " ")"
' sh "$secret" "$XDG_RUNTIME_DIR"
echo "exit code: $?; the host sees the workspace write before apply: $(cat "$ws/hello.txt" 2>/dev/null || echo no)"
say "mosaic diff $run --stat, then mosaic apply $run: the change comes into the workspace once you take it"
"$mosaic" diff --stat "$run"
"$mosaic" apply "$run"
echo "the host sees the workspace write: $(cat "$ws/hello.txt")"

say "mosaic start: a background session, a transient unit of the user's systemd"
"$mosaic" start --name "$name" --workspace "$ws" -- sh -c 'while :; do echo "agent working in $PWD"; sleep 1; done'
started=1
"$mosaic" list
say "systemctl --user status mosaic-$name.service"
systemctl --user status "mosaic-$name.service" --no-pager --lines=0 | sed -n '1,6p'
sleep 1.2
say "mosaic logs $name (the same lines: journalctl --user -t mosaic-$name)"
"$mosaic" logs "$name" | head -3
say "mosaic status $name"
"$mosaic" status "$name"
say "mosaic stop $name"
"$mosaic" stop "$name"
