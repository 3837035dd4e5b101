#!/usr/bin/env bash
# rig-root.sh prints the path of a Debian 13 (trixie) root with systemd 257, for
# `contrib/rig.sh --root DIR`, building it first when it is missing or was made
# from another package list. The root is cached between runs outside the tree
# (MOSAIC_RIG_CACHE, default /var/cache/mosaic) and never written to by a rig,
# which mounts it read-only under a throwaway overlay.
#
#   contrib/rig-root.sh          # needs root and debootstrap (apt-get install debootstrap)
#
# The Debian mirror is the one this machine's apt sources name (a machine may
# reach only its own mirror), read at run time; MOSAIC_RIG_MIRROR overrides it.
# The build is atomic: debootstrap into a temporary directory beside the cache,
# then a rename, under a lock so that two rigs starting at once build it once.
#
# A root is made by one version of this script: its path and its stamp carry a
# hash of the script (the package list, the debootstrap line, what is done
# after), so a root an older script made is never used, and a script that
# changed builds afresh. Roots of other versions are removed once no rig holds
# them (contrib/rig.sh --root holds its root with a shared flock).
set -euo pipefail

suite=trixie
# systemd-journal-remote: the audit shipping test (journal-upload to journal-remote on loopback).
# gh: the lent repository's pull request made by the real gh (TestLendGitGHPRCreate).
# vim, less: full-screen programs and a pager through the terminal filter (TestTerminalFilterFullScreen).
packages=systemd,dbus,bubblewrap,dbus-user-session,python3,iproute2,socat,util-linux,procps,ca-certificates,curl,git,openssh-client,openssh-server,systemd-journal-remote,gh,vim,less
# Installed by apt inside the root after debootstrap: debootstrap's resolver
# does not follow virtual packages, and npm's node-* dependencies need them
# (node-cli-table3 is provided by node-cli-table, ...).
extra="npm python3-pip"
cache=${MOSAIC_RIG_CACHE:-/var/cache/mosaic}
stamp="$(sha256sum <"$0" | cut -d' ' -f1) debootstrap --variant=minbase --include=$packages $suite; apt-get install $extra"
root=$cache/rig-$suite-${stamp:0:12}

die() { echo "rig-root: $*" >&2; exit 1; }

# mirror prints the first Debian archive URI (not the security archive) of the
# apt sources, in either format: deb822 (*.sources) or one-line (*.list).
mirror() {
	if [ -n "${MOSAIC_RIG_MIRROR:-}" ]; then
		echo "$MOSAIC_RIG_MIRROR"
		return
	fi
	local f
	for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		awk '
			/^[[:space:]]*#/ { next }
			/^URIs:/ { for (i = 2; i <= NF; i++) print $i; next }
			$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/ && $i ~ /:\/\//) { print $i; break } }
		' "$f"
	done | grep -E '/debian/?$' | head -n 1
}

# unmount_under DIR unmounts every mount at or below DIR, deepest first (a
# lazy unmount: a process still inside does not keep it).
unmount_under() {
	local m
	# The mount point is mountinfo's fifth field, with " " written \040.
	D=$1 awk 'BEGIN { d = ENVIRON["D"]; gsub(/ /, "\\040", d) }
		$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do
			umount -l "$(printf '%b' "$m")" 2>/dev/null || true
		done
}

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap)"
if [ -f "$root/.mosaic-rig-stamp" ] && [ "$(cat "$root/.mosaic-rig-stamp")" = "$stamp" ]; then
	echo "$root"
	exit 0
fi
command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
mkdir -p "$cache"
exec 9>"$cache/rig-$suite.lock"
flock 9
# Another rig may have built it while this one waited for the lock.
if [ -f "$root/.mosaic-rig-stamp" ] && [ "$(cat "$root/.mosaic-rig-stamp")" = "$stamp" ]; then
	echo "$root"
	exit 0
fi
url=$(mirror)
[ -n "$url" ] || die "no Debian mirror in /etc/apt/sources.list*: set MOSAIC_RIG_MIRROR=URL"
# A build killed earlier (kill -9, a lost machine: no trap ran) may have left
# its temporary directory with debootstrap's /proc or /sys still mounted
# inside: unmounted first, so that no rm walks the host's /proc.
for stale in "$cache/.rig-$suite".*; do
	[ -e "$stale" ] || continue
	unmount_under "$stale"
	rm -rf --one-file-system "$stale"
done
tmp=$(mktemp -d "$cache/.rig-$suite.XXXXXX")
# On every exit, a failed or interrupted debootstrap's mounts go first
# (--one-file-system then keeps rm off anything still mounted).
cleanup() { unmount_under "$tmp"; rm -rf --one-file-system "$tmp" "$tmp.log" "$tmp.hosts"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM HUP
echo "rig-root: building a $suite root from $url (once; cached in $root)" >&2
start=$SECONDS
if ! debootstrap --variant=minbase --include="$packages" "$suite" "$tmp" "$url" >"$tmp.log" 2>&1; then
	tail -n 20 "$tmp.log" >&2
	rm -f "$tmp.log"
	die "debootstrap $suite failed (log above)"
fi
# apt reaches the mirror as this machine does (its /etc/hosts may name it);
# the root keeps its own files.
cp "$tmp/etc/hosts" "$tmp.hosts"
cp /etc/hosts "$tmp/etc/hosts"
cp -L /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
if ! chroot "$tmp" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
	sh -c "apt-get update -qq && apt-get install -y -qq --no-install-recommends $extra" >"$tmp.log" 2>&1; then
	tail -n 20 "$tmp.log" >&2
	rm -f "$tmp.log" "$tmp.hosts"
	die "apt-get install $extra in the $suite root failed (log above)"
fi
mv "$tmp.hosts" "$tmp/etc/hosts"
rm -f "$tmp.log"
rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
echo "$stamp" >"$tmp/.mosaic-rig-stamp"
chmod 0755 "$tmp"
if [ -d "$root" ]; then
	mv -T "$root" "$tmp.old"
fi
mv -T "$tmp" "$root"
trap - EXIT
rm -rf --one-file-system "$tmp.old"
echo "rig-root: $suite root ready in $((SECONDS - start)) s" >&2
# Roots older versions of this script made, unless a rig runs on one.
for old in "$cache/rig-$suite"-*; do
	[ "$old" != "$root" ] && [ -f "$old/.mosaic-rig-stamp" ] || continue
	flock -n -x "$old" rm -rf --one-file-system "$old" && echo "rig-root: removed $old (an older recipe)" >&2 || true
done
echo "$root"
