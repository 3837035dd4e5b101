#!/usr/bin/env bash
# with-user-manager.sh runs COMMAND where a real systemd user manager is
# reachable: directly when this user has one (a desktop session), else, as
# root, inside contrib/rig.sh as an unprivileged test user with a copy of
# this tree. It is how `make test` and `make demo` work on any machine.
#
#   contrib/with-user-manager.sh [--systemd host|257|host,257] COMMAND [ARG...]
#
# --systemd picks the rigs (as root): host, the machine's own systemd (252 on
# Debian 12; the default), and 257, a Debian 13 root (contrib/rig-root.sh
# builds it once and caches it). With both, COMMAND runs in each in turn, and
# the exit status is the first failure's; each failure names its systemd.
# MOSAIC_RIG_USER picks the host rig's test user (default mosaic-rig) and
# MOSAIC_RIG_USER_257 the 257 rig's (default: the same name with -257), so
# that several rigs can run at once.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

rigs=host
if [ "${1:-}" = "--systemd" ]; then
	rigs=$2
	shift 2
fi
[ $# -gt 0 ] || { echo "usage: with-user-manager.sh [--systemd host|257|host,257] COMMAND [ARG...]" >&2; exit 2; }

if [ "$(id -u)" != 0 ] && [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -S "$XDG_RUNTIME_DIR/systemd/private" ]; then
	[ "$rigs" = host ] || echo "with-user-manager: using your own user manager; the $rigs rigs need root" >&2
	cd "$here"
	exec "$@"
fi
if [ "$(id -u)" != 0 ]; then
	echo "with-user-manager: no systemd user manager is reachable (no \$XDG_RUNTIME_DIR/systemd/private), and booting the private rig needs root: log in to a systemd user session, or run as root" >&2
	exit 1
fi
# The rig's user builds with its own build cache and root's settings and
# module cache (read-only, filled here: nothing is downloaded inside a rig).
if command -v go >/dev/null; then
	export GOPROXY="${GOPROXY:-$(go env GOPROXY)}" GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)}" GOTOOLCHAIN="${GOTOOLCHAIN:-$(go env GOTOOLCHAIN)}"
	(cd "$here" && go mod download) || { echo "with-user-manager: go mod download failed" >&2; exit 1; }
	export RIG_GOMODCACHE="$(go env GOMODCACHE)"
fi
user=${MOSAIC_RIG_USER:-mosaic-rig}

rc=0 failed=()
for rig in ${rigs//,/ }; do
	case "$rig" in
	host) args=(--user "$user") ;;
	257)
		root=$("$here/contrib/rig-root.sh")
		args=(--user "${MOSAIC_RIG_USER_257:-$user-257}" --root "$root") ;;
	*) echo "with-user-manager: unknown rig $rig (host or 257)" >&2; exit 2 ;;
	esac
	[ "$rigs" = "$rig" ] && exec "$here/contrib/rig.sh" "${args[@]}" run --src "$here" -- "$@"
	echo "with-user-manager: systemd $rig rig: $*" >&2
	r=0
	"$here/contrib/rig.sh" "${args[@]}" run --src "$here" -- "$@" || r=$?
	if [ $r != 0 ]; then
		[ $rc != 0 ] || rc=$r
		failed+=("$rig")
	fi
done
if [ $rc != 0 ]; then
	echo "with-user-manager: FAILED on the ${failed[*]} rig(s) (the rig's last line names the systemd version)" >&2
fi
exit $rc
