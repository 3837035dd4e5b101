#!/usr/bin/env bash
# rig.sh boots a private, real systemd user manager on a machine whose PID 1 is
# not systemd (CI, the developers' VMs), and runs one command inside it as an
# unprivileged test user: the real case mosaic is built for.
#
#   contrib/rig.sh [--user NAME] [--root DIR] run [--src DIR] -- COMMAND [ARG...]
#   contrib/rig.sh pick-testnet     # print the test network's range, or fail
#
# What it starts, all inside a private mount namespace so the host is untouched:
# a tmpfs /run with /run/systemd/system (systemd --user refuses without it), a
# tmpfs /tmp, systemd-journald as root with per-user journals on tmpfs, a session
# dbus-daemon and `systemd --user` as the test user, in a delegated cgroup at
# user.slice/user-UID.slice/user@UID.service in both hierarchies (so journald
# attributes entries to _SYSTEMD_USER_UNIT as on a real machine). With --src the
# tree is copied into ~/mosaic-rig-src of the test user and COMMAND runs there
# (the user cannot read a checkout under /root). The test user is one the rig
# made (marked in its passwd comment): an existing user it did not make is
# refused, and so is a ~/mosaic-rig-src without the rig's mark in it.
# Everything is stopped by PID at the end, and COMMAND's exit status is the
# script's. COMMAND gets MOSAIC_RIG_SYSTEMD,
# the major version of the systemd it runs under.
#
# With --root DIR (a Debian root from contrib/rig-root.sh: systemd 257) the same
# boot happens inside that root instead of on the host's systemd (252): the
# private mount namespace gets a throwaway overlay of DIR (the cache is never
# written), fresh /proc, /dev and /sys (with the cgroup hierarchies) bound in,
# the host's Go toolchain (/usr/local/go) and the test user's home, and
# pivot_root makes it the root. Not chroot: a chrooted process may
# not make user namespaces (the kernel refuses CLONE_NEWUSER there), so bwrap
# fails. In either rig, RIG_GOMODCACHE (root's Go module cache, which
# with-user-manager.sh fills) is bound in read-only and the command builds
# with GOPROXY=off: nothing is downloaded inside.
#
# The test network: where ip and socat are installed, a network namespace of
# the rig's own holds two test hosts (N.2 and N.3 of a documentation range
# N.0/24 that nothing of this machine uses: pick-testnet) answering on port
# 443 (and N.2 on 5432, a port of no HTTP), reached over a veth pair (N.1 on this side, removed at the end); this
# mount namespace's /etc/hosts names them testhost.mosaic.test and
# otherhost.mosaic.test, private.mosaic.test as 10.255.255.1, and
# mockhost.mosaic.test as N.1, this side of the veth, where a test may serve
# as the test user (a mock of a vendor's API). A third test host, N.4, stands
# in for the package registries and mirrors (registry.npmjs.org, pypi.org,
# files.pythonhosted.org, deb.debian.org; and GitHub, github.com and
# api.github.com, for gh: the names are mapped to it, and only here): it
# forwards its ports 443 and 80 to N.1:8443 and N.1:8080,
# where a test serves a registry as the test user.
# MOSAIC_TESTNET=N tells the tests. No test traffic goes anywhere else. Under
# CI (CI set) a rig without its test network is an error, not a skip.
#
# Needs root, bubblewrap, dbus-daemon and systemd's binaries (Debian 12:
# packages bubblewrap, dbus, systemd; iproute2 and socat for the test
# network). Two rigs can run at once with two users.
set -euo pipefail

rig_user=mosaic-rig
rig_root=""
while [ $# -gt 0 ]; do
	case "$1" in
	--user) rig_user=$2; shift 2 ;;
	--root) rig_root=$2; shift 2 ;;
	--inner) shift; break ;;
	*) break ;;
	esac
done

die() { echo "rig: $*" >&2; exit 1; }

# The marks of what the rig made: its users' passwd comment, and a file in
# the directory --src copies the tree into.
rig_mark="mosaic rig test user (contrib/rig.sh)"
src_mark=.mosaic-rig-src

# The test network's candidates: documentation and benchmarking ranges, never
# routed on the internet.
testnet_candidates() { seq -f '198.18.%g' 0 63; echo 198.51.100 203.0.113 192.0.2; }

# The live facts pick-testnet weighs; each can be given from a file instead
# (pick-testnet --routes FILE ...), which is how its test feeds it a machine.
live_routes() { ip -4 route show table all 2>/dev/null; }
live_addrs() { ip -4 -o addr show 2>/dev/null; }
# The addresses this machine must keep reaching while the rig runs: its
# nameservers, and what its registries (apt's sources, Go's module proxy,
# npm's registry) resolve to. On some machines they sit inside a
# documentation range (through /etc/hosts or DNS), and a test network there
# would cut the machine off from them.
live_resolved() {
	awk '$1 == "nameserver" { print $2 }' /etc/resolv.conf 2>/dev/null
	{
		grep -hv '^[[:space:]]*#' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null
		echo "${GOPROXY:-$(command -v go >/dev/null && go env GOPROXY)}" | tr ',|' '\n\n'
		# npm's registry, as npm itself says (a second or two), and any other an npmrc names.
		command -v npm >/dev/null && timeout 10 npm config get registry 2>/dev/null
		grep -hs '^[[:space:]]*registry[[:space:]]*=' /etc/npmrc /usr/etc/npmrc /usr/local/etc/npmrc "${HOME:-/root}/.npmrc"
	} | grep -oE '[a-z+]+://[^/[:space:]]+' | sed 's|.*://||; s|.*@||; s|:.*||' | sort -u | head -n 20 |
		while read -r h; do timeout 2 getent ahostsv4 "$h" 2>/dev/null | awk '{print $1}'; done
	return 0
}

# taken prints, one a line, every address and prefix the test network must not
# overlap: this machine's addresses, every route but the default (in any
# table; a route to a /15 or a /16 covers a /24 inside it), every address in
# /etc/hosts, and the addresses the machine needs (live_resolved). Its
# arguments, files to read instead of the live routes, addresses, hosts file
# and resolved mirrors, may be empty.
taken() {
	local routes=$1 addrs=$2 hosts=${3:-/etc/hosts} resolved=$4
	{ if [ -n "$addrs" ]; then cat "$addrs"; else live_addrs; fi; } |
		awk '{ for (i = 1; i <= NF; i++) if ($i == "inet") { sub(/\/.*/, "", $(i+1)); print $(i+1) } }'
	{ if [ -n "$routes" ]; then cat "$routes"; else live_routes; fi; } |
		awk '$1 ~ /^(unicast|local|broadcast|multicast|throw|unreachable|prohibit|blackhole|nat|anycast)$/ { print $2; next }
			$1 != "default" { print $1 }'
	awk '!/^[[:space:]]*#/ && $1 ~ /^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$/ { print $1 }' "$hosts"
	if [ -n "$resolved" ]; then cat "$resolved"; else live_resolved; fi
}

ip2int() { local IFS=.; set -- $1; echo $(( ($1 << 24) | (${2:-0} << 16) | (${3:-0} << 8) | ${4:-0} )); }

# overlaps N.0/24 CIDR: whether the /24 and CIDR (an address is a /32) share
# an address: they agree on the shorter of the two prefixes.
overlaps() {
	local net len=32 m
	net=$(ip2int "$1.0")
	case "$2" in */*) len=${2#*/} ;; esac
	[[ "${2%/*}" =~ ^[0-9]+(\.[0-9]+){0,3}$ ]] || return 1
	m=$((len < 24 ? len : 24))
	[ $(( net >> (32 - m) )) = $(( $(ip2int "${2%/*}") >> (32 - m) )) ]
}

# pick_testnet prints the first candidate that overlaps nothing taken, or fails.
pick_testnet() {
	local list n t
	list=$(taken "$@")
	for n in $(testnet_candidates); do
		for t in $list; do
			overlaps "$n" "$t" && continue 2
		done
		echo "$n"
		return 0
	done
	return 1
}

if [ "${1:-}" = "pick-testnet" ]; then
	shift
	routes="" addrs="" hosts="" resolved=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--routes) routes=$2; shift 2 ;;
		--addrs) addrs=$2; shift 2 ;;
		--hosts) hosts=$2; shift 2 ;;
		--resolved) resolved=$2; shift 2 ;;
		*) die "unknown option $1 (usage: rig.sh pick-testnet [--routes FILE] [--addrs FILE] [--hosts FILE] [--resolved FILE])" ;;
		esac
	done
	pick_testnet "$routes" "$addrs" "$hosts" "$resolved" || die "no free range for the test network: every candidate ($(testnet_candidates | tr '\n' ' ')) holds an address of this machine, of /etc/hosts, a nameserver or a registry, or a route covers it"
	exit 0
fi

usage="usage: rig.sh [--user NAME] [--root DIR] run [--src DIR] -- COMMAND..."
if [ "${1:-}" = "run" ]; then
	shift
	src=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--src) src=$2; shift 2 ;;
		--) shift; break ;;
		*) die "unknown option $1 ($usage)" ;;
		esac
	done
	[ $# -gt 0 ] || die "no command given ($usage)"
	[ "$(id -u)" = 0 ] || die "must run as root (it creates a test user and a mount namespace)"
	if [ -n "$rig_root" ]; then
		rig_root=$(cd "$rig_root" && pwd) || die "no root at $rig_root"
		# Held while the rig runs (fd 8, shared): rig-root.sh removes no
		# root a rig holds. The test user's processes do not inherit it.
		exec 8<"$rig_root"
		flock -s 8
		for b in bwrap dbus-daemon setpriv /lib/systemd/systemd /lib/systemd/systemd-journald; do
			[ -x "$rig_root/usr/bin/$b" ] || [ -x "$rig_root/$b" ] || die "$rig_root has no $b (make it with contrib/rig-root.sh)"
		done
		for b in unshare pivot_root; do
			command -v "$b" >/dev/null || die "$b is missing (apt-get install util-linux)"
		done
	else
		for b in bwrap dbus-daemon unshare setpriv /lib/systemd/systemd /lib/systemd/systemd-journald; do
			command -v "$b" >/dev/null || die "$b is missing (apt-get install bubblewrap dbus systemd util-linux)"
		done
	fi
	# The rig copies a tree into its user's home and runs tests as it: only
	# a user the rig made itself (marked in its passwd comment), never
	# someone's account.
	if ! id -u "$rig_user" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/bash --user-group --comment "$rig_mark" "$rig_user"
	else
		gecos=$(getent passwd "$rig_user" | cut -d: -f5)
		if [ "$gecos" != "$rig_mark" ]; then
			# Rig users made before the mark existed: named mosaic-rig..., no comment.
			[[ "$rig_user" == mosaic-rig* ]] && [ -z "$gecos" ] ||
				die "the user $rig_user exists and the rig did not make it (its passwd comment is not \"$rig_mark\"): the rig works only as a test user of its own; name one that does not exist (MOSAIC_RIG_USER=mosaic-rig-NAME)"
			usermod --comment "$rig_mark" "$rig_user"
			echo "rig: marked $rig_user, a rig user made before the mark, as the rig's" >&2
		fi
	fi
	# The tree goes to the user's home (the user cannot read a checkout under
	# /root); with --root that home is bound into the root as it is. The
	# directory is the rig's own, replaced at each run: one that holds no
	# mark of the rig's is left alone.
	home=$(getent passwd "$rig_user" | cut -d: -f6)
	export RIG_WORKDIR=$home
	if [ -n "$src" ]; then
		RIG_WORKDIR=$home/mosaic-rig-src
		if [ -e "$RIG_WORKDIR" ] || [ -L "$RIG_WORKDIR" ]; then
			[ -d "$RIG_WORKDIR" ] && [ ! -L "$RIG_WORKDIR" ] && [ -f "$RIG_WORKDIR/$src_mark" ] ||
				die "$RIG_WORKDIR exists and the rig did not make it (no $src_mark in it): move it away"
		fi
	fi
	getent group systemd-journal >/dev/null || groupadd --system systemd-journal
	usermod -a -G systemd-journal "$rig_user"
	# An sshd that is not root gives its own user a terminal only if the
	# user may chown the pty to group tty (mosaic --host's tests, ssh -t).
	usermod -a -G tty "$rig_user"
	if [ -n "$src" ]; then
		rm -rf "$RIG_WORKDIR"
		mkdir -m 0755 "$RIG_WORKDIR"
		tar -C "$src" --exclude=./.git -cf - . | tar -C "$RIG_WORKDIR" -xf -
		# Marked while root still owns it: root writes no path the user controls.
		echo "made by contrib/rig.sh --src, replaced at each run" >"$RIG_WORKDIR/$src_mark"
		chown -R "$(id -u "$rig_user"):$(id -g "$rig_user")" "$RIG_WORKDIR"
	fi
	exec unshare --mount --propagation private -- "$0" --user "$rig_user" ${rig_root:+--root "$rig_root"} --inner "$@"
fi

# rig_toolchains gives the rig a /opt of its own (under root M, "" for the
# host's) holding root's Rust toolchain, read-only, at /opt/rust, and rustup
# at /opt/rustup/rustup, where root has them: the tests of the user's
# toolchains (TestUserToolchains) build with a real toolchain installed
# outside the system directories, and with rustup under the test user's
# ~/.cargo. Nothing is copied or downloaded.
rig_toolchains() {
	local m=$1 tc
	mount -t tmpfs -o mode=0755 tmpfs "$m/opt"
	for tc in /root/.rustup/toolchains/stable-*; do
		[ -x "$tc/bin/cargo" ] || continue
		mkdir -p "$m/opt/rust"
		mount --bind "$tc" "$m/opt/rust"
		mount -o remount,bind,ro "$m/opt/rust"
		break
	done
	if [ -x /root/.cargo/bin/rustup ]; then
		mkdir -p "$m/opt/rustup"
		touch "$m/opt/rustup/rustup"
		mount --bind /root/.cargo/bin/rustup "$m/opt/rustup/rustup"
		mount -o remount,bind,ro "$m/opt/rustup/rustup"
	fi
}

# enter_root makes a throwaway overlay of the cached root (so that a run never
# writes to the cache), binds in what a run needs from the host, makes it the
# root with pivot_root and runs this script again from inside it.
enter_root() {
	local top=/run m home gid
	home=$(getent passwd "$rig_user" | cut -d: -f6)
	gid=$(id -g "$rig_user")
	# This namespace's own /run (the host's is untouched) holds the overlay.
	mount -t tmpfs -o mode=0755 tmpfs "$top"
	mkdir "$top/upper" "$top/work" "$top/root"
	m=$top/root
	mount -t overlay overlay -o "lowerdir=$rig_root,upperdir=$top/upper,workdir=$top/work" "$m"
	mount -t proc proc "$m/proc"
	mount --rbind /dev "$m/dev"
	mount --rbind /sys "$m/sys"
	mkdir -p "$m$home"
	if [ -d /usr/local/go ]; then # the toolchain the rig's PATH names
		mkdir -p "$m/usr/local/go"
		mount --bind /usr/local/go "$m/usr/local/go"
		mount -o remount,bind,ro "$m/usr/local/go"
	fi
	mount --bind "$home" "$m$home"
	# The real agents' cache (contrib/agents.sh test), read-only at the
	# same path: their tests, the TUI's among them, run on both rigs.
	if [ -n "${MOSAIC_AGENTS_CACHE:-}" ] && [ -d "$MOSAIC_AGENTS_CACHE" ]; then
		mkdir -p "$m$MOSAIC_AGENTS_CACHE"
		mount --bind "$MOSAIC_AGENTS_CACHE" "$m$MOSAIC_AGENTS_CACHE"
		mount -o remount,bind,ro "$m$MOSAIC_AGENTS_CACHE"
	fi
	rig_toolchains "$m"
	if [ -n "${RIG_GOMODCACHE:-}" ] && [ -d "$RIG_GOMODCACHE" ]; then
		mkdir -p "$m/var/cache/mosaic-rig/gomod"
		mount --bind "$RIG_GOMODCACHE" "$m/var/cache/mosaic-rig/gomod"
		export RIG_GOMODCACHE=/var/cache/mosaic-rig/gomod
	fi
	rm -f "$m/etc/resolv.conf" "$m/etc/hosts"
	cp -L /etc/resolv.conf "$m/etc/resolv.conf"
	cp -L /etc/hosts "$m/etc/hosts"
	# The test user as the host has it (its home is the host's), in the
	# root's systemd-journal and tty groups.
	getent passwd "$rig_user" >>"$m/etc/passwd"
	getent group "$gid" >>"$m/etc/group"
	sed -i -E "/^(systemd-journal|tty):/ { s/\$/,$rig_user/; s/:,/:/ }" "$m/etc/group"
	install -m 0755 "$0" "$m/usr/local/sbin/mosaic-rig.sh"
	mkdir "$m/.old-root"
	cd "$m"
	pivot_root . .old-root
	cd /
	umount -l /.old-root
	rmdir /.old-root
	RIG_IN_ROOT=1 exec /usr/local/sbin/mosaic-rig.sh --user "$rig_user" --root "$rig_root" --inner "$@"
}
if [ -n "$rig_root" ] && [ -z "${RIG_IN_ROOT:-}" ]; then
	enter_root "$@"
fi

# --- inside the private mount namespace (and the root, with --root), as root ---
version=$(/lib/systemd/systemd --version | awk 'NR == 1 { print $2 }')
uid=$(id -u "$rig_user")
gid=$(id -g "$rig_user")
home=$(getent passwd "$rig_user" | cut -d: -f6)
runtime=/run/user/$uid
pids=()
cg_v1=/sys/fs/cgroup/systemd/user.slice/user-$uid.slice/user@$uid.service
cg_v2=/sys/fs/cgroup/unified/user.slice/user-$uid.slice/user@$uid.service
[ -d /sys/fs/cgroup/unified ] || cg_v2=/sys/fs/cgroup/user.slice/user-$uid.slice/user@$uid.service
[ -d /sys/fs/cgroup/systemd ] || cg_v1=""

cleanup() {
	local rc=$?
	# The manager first (it stops the sessions it runs), then the rest.
	for ((i=${#pids[@]}-1; i>=0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; done
	for _ in $(seq 50); do
		local alive=0
		for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 0.1
	done
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	if [ -n "${testnet:-}" ]; then
		ip netns del "$testnet" 2>/dev/null || true
		ip link del "$veth" 2>/dev/null || true
	fi
	for cg in "$cg_v1" "$cg_v2"; do
		[ -n "$cg" ] && [ -d "$cg" ] || continue
		# Out of the delegated tree ourselves, then anything the manager left behind, then the tree bottom-up.
		echo $$ >"${cg%%/user.slice/*}/cgroup.procs" 2>/dev/null || true
		find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
		sleep 0.1
		find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
	exit $rc
}
trap cleanup EXIT INT TERM

mount -t tmpfs -o mode=0755 tmpfs /run
ln -s /dev/shm /run/shm
# A /tmp of the rig's own: the host's is shared with every other rig and
# user, whose files (of fixed names) this test user could not replace.
mount -t tmpfs -o mode=1777 tmpfs /tmp
[ -n "$rig_root" ] || rig_toolchains ""
# PID 1 would make these early on: the manager refuses to run without
# /run/systemd/system, and every mount namespace of a unit is built under
# /run/systemd/unit-root (252) or /run/systemd/mount-rootfs (257): without
# them units die with 226/NAMESPACE.
mkdir -p /run/systemd/system /run/log/journal "$runtime" /run/lock
# journald scales its rate limit's burst with the free space it sees; on a
# machine with much memory (the journal is on tmpfs here) the default can
# exceed any test's output, and then nothing is ever dropped. A fixed burst
# makes the dropped-output test (TestDroppedOutputIsSaid) meet the limit
# every time; other tests print a few lines each.
mkdir -p /run/systemd/journald.conf.d
printf '[Journal]\nRateLimitIntervalSec=30s\nRateLimitBurst=1000\n' >/run/systemd/journald.conf.d/50-mosaic-rig.conf
mkdir -m 0555 /run/systemd/unit-root /run/systemd/mount-rootfs
chmod 1777 /run/lock
chown "$uid:$gid" "$runtime"; chmod 0700 "$runtime"
mkdir -p /var/log/journal
mount -t tmpfs -o mode=2755 tmpfs /var/log/journal
mount -t tmpfs -o mode=2755 tmpfs /run/log/journal
chgrp systemd-journal /var/log/journal /run/log/journal
chmod 2755 /var/log/journal /run/log/journal
# The Go modules come from root's cache, read-only: the build reaches no
# network (a module proxy may sit in a range another rig has taken).
go_env=()
if [ -n "${RIG_GOMODCACHE:-}" ] && [ -d "$RIG_GOMODCACHE" ]; then
	mkdir -p /run/mosaic-rig/gomod
	mount --bind "$RIG_GOMODCACHE" /run/mosaic-rig/gomod
	mount -o remount,bind,ro /run/mosaic-rig/gomod
	go_env=(GOMODCACHE=/run/mosaic-rig/gomod GOPROXY=off)
fi

testnet="" veth="" net=""
# The TUN node as udev makes it on every distribution (0666: a TUN device is
# only ever made in a network namespace its maker has CAP_NET_ADMIN over):
# a container's /dev may hold it 0600 root, where a session gets no network
# device (sandbox.TUNUsable) and reaches only proxy-aware clients' hosts.
if [ -c /dev/net/tun ]; then
	chmod 0666 /dev/net/tun
elif [ -n "${CI:-}" ]; then
	die "no /dev/net/tun: the sessions' network device needs it (modprobe tun)"
fi

if command -v ip >/dev/null && command -v socat >/dev/null; then
	net=$(pick_testnet "" "" "" "") || true
fi
if [ -n "$net" ]; then
	testnet=mosaic-testnet-$$ veth=mtn$$
	ip netns add "$testnet"
	ip link add "$veth" type veth peer name "${veth}p"
	ip link set "${veth}p" netns "$testnet"
	ip addr add "$net.1/24" dev "$veth"
	ip link set "$veth" up
	ip -n "$testnet" addr add "$net.2/24" dev "${veth}p"
	ip -n "$testnet" addr add "$net.3/24" dev "${veth}p"
	ip -n "$testnet" link set "${veth}p" up
	ip -n "$testnet" link set lo up
	ip netns exec "$testnet" socat TCP-LISTEN:443,bind="$net.2",fork,reuseaddr SYSTEM:'echo hello from testhost' >/dev/null 2>&1 &
	pids+=($!)
	ip netns exec "$testnet" socat TCP-LISTEN:443,bind="$net.3",fork,reuseaddr SYSTEM:'echo hello from otherhost' >/dev/null 2>&1 &
	pids+=($!)
	ip netns exec "$testnet" socat TCP-LISTEN:5432,bind="$net.2",fork,reuseaddr SYSTEM:'echo hello from testhost 5432' >/dev/null 2>&1 &
	pids+=($!)
	ip -n "$testnet" addr add "$net.4/24" dev "${veth}p"
	for fw in 443:8443 80:8080; do
		ip netns exec "$testnet" socat TCP-LISTEN:"${fw%:*}",bind="$net.4",fork,reuseaddr TCP:"$net.1:${fw#*:}" >/dev/null 2>&1 &
		pids+=($!)
	done
	registries="registry.npmjs.org pypi.org files.pythonhosted.org deb.debian.org github.com api.github.com"
	grep -vwF -f <(tr ' ' '\n' <<<"$registries") /etc/hosts >/run/rig-hosts || true
	printf '%s testhost.mosaic.test\n%s otherhost.mosaic.test\n10.255.255.1 private.mosaic.test\n%s mockhost.mosaic.test\n%s %s\n' "$net.2" "$net.3" "$net.1" "$net.4" "$registries" >>/run/rig-hosts
	mount --bind /run/rig-hosts /etc/hosts
else
	why="no test network (needs ip and socat: apt-get install iproute2 socat, and a documentation range this machine does not use: contrib/rig.sh pick-testnet says why)"
	# A run that skipped the network tests must not look green under CI.
	[ -z "${CI:-}" ] || die "$why"
	echo "rig: $why" >&2
fi

/lib/systemd/systemd-journald >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do [ -S /run/systemd/journal/stdout ] && break; sleep 0.05; done
[ -S /run/systemd/journal/stdout ] || die "systemd-journald did not come up"
journalctl --flush >/dev/null 2>&1 || true

for cg in "$cg_v1" "$cg_v2"; do
	[ -n "$cg" ] || continue
	mkdir -p "$cg"
	chown -R "$uid:$gid" "$cg"
	echo $$ >"$cg/cgroup.procs"
done

as_user=(setpriv --reuid="$uid" --regid="$gid" --init-groups --reset-env --)
user_env=(env HOME="$home" USER="$rig_user" LOGNAME="$rig_user" SHELL=/bin/bash
	PATH="/usr/local/go/bin:/usr/local/bin:/usr/bin:/bin"
	XDG_RUNTIME_DIR="$runtime" DBUS_SESSION_BUS_ADDRESS="unix:path=$runtime/bus" LANG=C.UTF-8)

"${as_user[@]}" "${user_env[@]}" dbus-daemon --session --nofork --nopidfile \
	--address="unix:path=$runtime/bus" >/dev/null 2>&1 8<&- &
pids+=($!)
"${as_user[@]}" "${user_env[@]}" /lib/systemd/systemd --user >/dev/null 2>&1 8<&- &
pids+=($!)
for _ in $(seq 200); do [ -S "$runtime/systemd/private" ] && [ -S "$runtime/bus" ] && break; sleep 0.05; done
[ -S "$runtime/systemd/private" ] || die "systemd --user did not come up (is $cg_v1 writable?)"
"${as_user[@]}" "${user_env[@]}" systemctl --user is-system-running --wait >/dev/null 2>&1 || true
# On a real machine the user's journal exists long before mosaic runs; here
# journald makes it at the user's first line. Until then journalctl --user
# finds no file and fails (silently, with -q), so it is made now.
"${as_user[@]}" "${user_env[@]}" systemd-cat -t mosaic-rig echo "rig up: systemd $version" || true
for _ in $(seq 100); do
	compgen -G "/var/log/journal/*/user-$uid.journal" >/dev/null || compgen -G "/run/log/journal/*/user-$uid.journal" >/dev/null && break
	sleep 0.02
done

mkdir -p "$home/tmp"; chown -h "$uid:$gid" "$home/tmp"

# The command, as the test user, with only what a login would give it (plus
# Go's settings and CI's marker, so the tests know they must not skip).
set +e
(cd "${RIG_WORKDIR:-$home}" && "${as_user[@]}" "${user_env[@]}" TMPDIR="$home/tmp" MOSAIC_RIG=1 MOSAIC_RIG_SYSTEMD="$version" \
	${CI:+CI="$CI"} ${MOSAIC_AGENTS_CACHE:+MOSAIC_AGENTS_CACHE="$MOSAIC_AGENTS_CACHE"} ${MOSAIC_AGENTS_TEST:+MOSAIC_AGENTS_TEST="$MOSAIC_AGENTS_TEST"} ${GOPROXY:+GOPROXY="$GOPROXY"} ${GOFLAGS:+GOFLAGS="$GOFLAGS"} ${GOTOOLCHAIN:+GOTOOLCHAIN="$GOTOOLCHAIN"} \
	"${go_env[@]}" ${TERM:+TERM="$TERM"} ${net:+MOSAIC_TESTNET="$net"} "$@" 8<&-)
rc=$?
set -e
if [ $rc != 0 ]; then
	# The journal dies with the rig: keep the test user's (its manager and
	# units) where the failure can be read.
	# Written as the user: a path in its home is the user's to point elsewhere.
	journalctl --no-pager -o short-precise _UID="$uid" 2>/dev/null | "${as_user[@]}" tee "$home/rig-journal.txt" >/dev/null &&
		echo "rig: its journal is in $home/rig-journal.txt" >&2
	echo "rig: $1 exited $rc under systemd $version${rig_root:+ (root $rig_root)}" >&2
fi
exit $rc
