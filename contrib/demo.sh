#!/usr/bin/env bash
# demo.sh shows one confined session: what the agent sees of the machine,
# and a background session inspected the systemd way. `make demo` runs it
# where a user manager is reachable (inside contrib/rig.sh otherwise).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mosaic=$here/bin/mosaic
[ -x "$mosaic" ] || { echo "demo: $mosaic is missing: run make build" >&2; exit 1; }

ws=$(mktemp -d "$HOME/mosaic-demo-XXXXXX")
secret=$HOME/.ssh/mosaic-demo-key
mkdir -p "$HOME/.ssh"
echo "a private key stand-in" >"$secret"
trap 'rm -rf "$ws" "$secret"; "$mosaic" stop demo >/dev/null 2>&1 || true' EXIT

# Bold headings on a terminal, plain text into a pipe or with NO_COLOR.
if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
	say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
	say() { printf '\n== %s\n' "$*"; }
fi

say "on the host: $secret exists, and so do the user bus and systemd's socket"
ls -l "$secret" "$XDG_RUNTIME_DIR/bus" "$XDG_RUNTIME_DIR/systemd/private"

say "mosaic run: the same checks from inside a confined session"
"$mosaic" run --workspace "$ws" -- sh -c '
	echo "whoami: $(id -un), pid $$ (its own PID namespace)"
	echo "HOME=$HOME holds: $(ls -A "$HOME" | tr "\n" " ")(the session'"'"'s own home)"
	cat "$1" 2>&1 | sed "s/^/reading the key: /"
	ls "$2" 2>&1 | sed "s/^/the runtime dir: /"
	echo "processes visible: $(ls -d /proc/[0-9]* | wc -l)"
	echo "workspace write: $(echo hello > "$PWD/hello.txt" && echo ok)"
	touch /usr/x 2>&1 | sed "s/^/writing \/usr: /"
	echo "environment: $(env | cut -d= -f1 | sort | tr "\n" " ")"
' sh "$secret" "$XDG_RUNTIME_DIR"
echo "exit code: $?; the host sees the workspace write: $(cat "$ws/hello.txt")"

say "mosaic start: a background session, a transient unit of the user's systemd"
"$mosaic" start --name demo --workspace "$ws" -- sh -c 'while :; do echo "agent working in $PWD"; sleep 1; done'
"$mosaic" list
say "systemctl --user status mosaic-demo.service"
systemctl --user status mosaic-demo.service --no-pager --lines=0 | sed -n '1,6p'
sleep 1.2
say "mosaic logs demo (the same lines: journalctl --user -t mosaic-demo)"
"$mosaic" logs demo | head -3
say "mosaic status demo"
"$mosaic" status demo
say "mosaic stop demo"
"$mosaic" stop demo
