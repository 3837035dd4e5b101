#!/usr/bin/env bash
# with-user-manager.sh runs COMMAND where a real systemd user manager is
# reachable: directly when this user has one (a desktop session), else, as
# root, inside contrib/rig.sh as an unprivileged test user with a copy of
# this tree. It is how `make test` and `make demo` work on any machine.
#
#   contrib/with-user-manager.sh COMMAND [ARG...]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ "$(id -u)" != 0 ] && [ -n "${XDG_RUNTIME_DIR:-}" ] && [ -S "$XDG_RUNTIME_DIR/systemd/private" ]; then
	cd "$here"
	exec "$@"
fi
if [ "$(id -u)" != 0 ]; then
	echo "with-user-manager: no systemd user manager is reachable (no \$XDG_RUNTIME_DIR/systemd/private), and booting the private rig needs root: log in to a systemd user session, or run as root" >&2
	exit 1
fi
# The rig's user builds with its own Go caches; hand it root's Go settings.
if command -v go >/dev/null; then
	export GOPROXY="${GOPROXY:-$(go env GOPROXY)}" GOFLAGS="${GOFLAGS:-$(go env GOFLAGS)}" GOTOOLCHAIN="${GOTOOLCHAIN:-$(go env GOTOOLCHAIN)}"
fi
# MOSAIC_RIG_USER picks the rig's test user, so that two rigs can run at once.
exec "$here/contrib/rig.sh" --user "${MOSAIC_RIG_USER:-mosaic-rig}" run --src "$here" -- "$@"
