#!/usr/bin/env bash
# install-deps.sh installs, as root on a Debian or Ubuntu machine, what
# mosaic's demo and tests need and the machine lacks: bubblewrap, dbus,
# systemd's binaries (for the rig's private user manager and journald),
# util-linux (setpriv, unshare), iproute2, socat and python3 (the rig's test
# network), git (the host-executed files' tests), debootstrap (the systemd 257 rig's Debian 13 root), npm (the real
# agent CLIs, and with python3-pip the package managers' egress tests),
# openssh-server and -client (the --host tests' sshd on loopback),
# systemd-journal-remote (the audit shipping test's journal-upload and
# journal-remote on loopback), gh (the lent pr test's gh pr create; nothing
# installed is started). It changes nothing when all are there; as another user it only
# says what is missing.
#
#   contrib/install-deps.sh        # what the tests need (make test, .ci/run)
#   contrib/install-deps.sh demo   # what a session needs, and the rig for one (make demo): bubblewrap,
#                                  # dbus, systemd, util-linux and git (clone mode's copy) only
set -euo pipefail

set_=${1:-test}
case "$set_" in demo | test) ;; *) echo "usage: contrib/install-deps.sh [demo|test]" >&2; exit 2 ;; esac
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
{ [ -x /lib/systemd/systemd ] && [ -x /lib/systemd/systemd-journald ]; } || need+=(systemd)
{ command -v setpriv >/dev/null && command -v unshare >/dev/null; } || need+=(util-linux)
# Clone mode (the default) copies a workspace with git.
command -v git >/dev/null || need+=(git)
if [ "$set_" = test ]; then
command -v ip >/dev/null || need+=(iproute2)
command -v socat >/dev/null || need+=(socat)
command -v python3 >/dev/null || need+=(python3)
# The systemd 257 rig's root (contrib/rig-root.sh, cached in /var/cache/mosaic).
command -v debootstrap >/dev/null || need+=(debootstrap)
# The real agent CLIs come from npm (contrib/agents.sh); the egress tests
# run npm and pip against a stand-in registry.
command -v npm >/dev/null || need+=(npm)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# mosaic --host's tests log in to a real sshd on loopback, started by the test.
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
# A test only: the audit's shipping test runs a real systemd-journal-upload
# sending to a real systemd-journal-remote on loopback.
{ [ -x /lib/systemd/systemd-journal-remote ] && [ -x /lib/systemd/systemd-journal-upload ]; } || need+=(systemd-journal-remote)
# The lent git credential's pr test runs the real gh pr create against a
# stand-in of GitHub's API.
command -v gh >/dev/null || need+=(gh)
fi
[ ${#need[@]} -gt 0 ] || exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing ${need[*]}: sudo apt-get install ${need[*]}" >&2
	exit 1
fi
if ! command -v apt-get >/dev/null; then
	echo "install-deps: missing ${need[*]}, and this is not a Debian or Ubuntu machine: install them with your package manager" >&2
	exit 1
fi
echo "install-deps: installing ${need[*]}" >&2
apt-get update -qq
# Nothing installed is started (openssh-server would start an sshd on port
# 22 of every address): the tests start what they need themselves.
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made_policy=1
fi
rc=0
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null || rc=$?
[ -z "$made_policy" ] || rm -f "$policy"
exit $rc
