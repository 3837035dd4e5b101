#!/usr/bin/env bash
# rig.sh boots a private, real systemd user manager on a machine whose PID 1 is
# not systemd (CI, the developers' VMs), and runs one command inside it as an
# unprivileged test user: the real case mosaic is built for.
#
#   contrib/rig.sh [--user NAME] run [--src DIR] -- COMMAND [ARG...]
#
# What it starts, all inside a private mount namespace so the host is untouched:
# a tmpfs /run with /run/systemd/system (systemd --user refuses without it),
# systemd-journald as root with per-user journals on tmpfs, a session
# dbus-daemon and `systemd --user` as the test user, in a delegated cgroup at
# user.slice/user-UID.slice/user@UID.service in both hierarchies (so journald
# attributes entries to _SYSTEMD_USER_UNIT as on a real machine). With --src the
# tree is copied into the test user's home and COMMAND runs there (the user
# cannot read a checkout under /root). Everything is stopped by PID at the end,
# and COMMAND's exit status is the script's.
#
# The test network: where ip and socat are installed, a network namespace of
# the rig's own holds two test hosts (N.2 and N.3 of a documentation range
# N.0/24 the host does not use, never routed anywhere) answering on port
# 443, reached over a veth pair (N.1 on this side, removed at the end); this
# mount namespace's /etc/hosts names them testhost.mosaic.test and
# otherhost.mosaic.test, and private.mosaic.test as 10.255.255.1.
# MOSAIC_TESTNET=N tells the tests. No test traffic goes anywhere else.
#
# Needs root, bubblewrap, dbus-daemon and systemd's binaries (Debian 12:
# packages bubblewrap, dbus, systemd; iproute2 and socat for the test
# network). Two rigs can run at once with two users.
set -euo pipefail

rig_user=mosaic-rig
while [ $# -gt 0 ]; do
	case "$1" in
	--user) rig_user=$2; shift 2 ;;
	--inner) shift; break ;;
	*) break ;;
	esac
done

die() { echo "rig: $*" >&2; exit 1; }

# needed_addrs prints the IPv4 addresses this machine must keep reaching
# while the rig runs: its nameservers, what /etc/hosts names, and the
# package registries its own tools are configured with (apt's sources, Go's
# module proxy, npm's registry), resolved now. A test network on a range
# holding one of them would cut the machine off from its registries.
needed_addrs() {
	awk '/^nameserver/ {print $2}' /etc/resolv.conf 2>/dev/null
	awk '!/^[[:space:]]*#/ && $1 ~ /^[0-9.]+$/ {print $1}' /etc/hosts 2>/dev/null
	local urls hosts h
	urls=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^[[:space:]]*#' || true)
	command -v go >/dev/null && urls+=$'\n'$(go env GOPROXY 2>/dev/null | tr ',|' '\n\n')
	command -v npm >/dev/null && urls+=$'\n'$(timeout 10 npm config get registry 2>/dev/null)
	hosts=$(printf '%s\n' "$urls" | grep -oE '[a-z+]+://[^/ :]+' | sed -E 's#^[a-z+]+://##' | sort -u)
	for h in $hosts; do
		getent ahostsv4 "$h" 2>/dev/null | awk '{print $1}'
	done
}

# pick_testnet prints the first candidate /24 (documentation and
# benchmarking ranges, never routed on the internet) that holds no address
# of this machine, no address it needs (needed_addrs), and that no route but
# the default one covers (another rig's test network included).
pick_testnet() {
	python3 - "$(needed_addrs | sort -u | tr '\n' ' ')" "$(ip -4 -o addr show | awk '{print $4}' | tr '\n' ' ')" \
		"$(ip -4 route show | awk '$1 != "default" {print $1}' | tr '\n' ' ')" <<'PY'
import ipaddress, sys
needed = [ipaddress.ip_address(a) for a in sys.argv[1].split()]
own = [ipaddress.ip_interface(a) for a in sys.argv[2].split()]
routes = [ipaddress.ip_network(r, strict=False) for r in sys.argv[3].split()]
cands = ["198.18.%d.0/24" % i for i in range(0, 64)] + ["198.51.100.0/24", "203.0.113.0/24", "192.0.2.0/24"]
for c in map(ipaddress.ip_network, cands):
    if any(a in c for a in needed) or any(i.ip in c or i.network.overlaps(c) for i in own) or any(r.overlaps(c) for r in routes):
        continue
    print(str(c.network_address).rsplit(".", 1)[0])
    sys.exit(0)
sys.exit(1)
PY
}

if [ "${1:-}" = "run" ]; then
	shift
	src=""
	while [ $# -gt 0 ]; do
		case "$1" in
		--src) src=$2; shift 2 ;;
		--) shift; break ;;
		*) die "unknown option $1 (usage: rig.sh [--user NAME] run [--src DIR] -- COMMAND...)" ;;
		esac
	done
	[ $# -gt 0 ] || die "no command given (usage: rig.sh [--user NAME] run [--src DIR] -- COMMAND...)"
	[ "$(id -u)" = 0 ] || die "must run as root (it creates a test user and a mount namespace)"
	for b in bwrap dbus-daemon unshare setpriv /lib/systemd/systemd /lib/systemd/systemd-journald; do
		command -v "$b" >/dev/null || die "$b is missing (apt-get install bubblewrap dbus systemd util-linux)"
	done
	if ! id -u "$rig_user" >/dev/null 2>&1; then
		useradd --create-home --shell /bin/bash --user-group "$rig_user"
	fi
	getent group systemd-journal >/dev/null || groupadd --system systemd-journal
	usermod -a -G systemd-journal "$rig_user"
	export RIG_SRC=$src
	exec unshare --mount --propagation private -- "$0" --user "$rig_user" --inner "$@"
fi

# --- inside the private mount namespace, as root ---
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
# PID 1 would make these early on: the manager refuses to run without
# /run/systemd/system, and every mount namespace of a unit is built under
# /run/systemd/unit-root (without it units die with 226/NAMESPACE).
mkdir -p /run/systemd/system /run/log/journal "$runtime" /run/lock
mkdir -m 0555 /run/systemd/unit-root
chmod 1777 /run/lock
chown "$uid:$gid" "$runtime"; chmod 0700 "$runtime"
mkdir -p /var/log/journal
mount -t tmpfs -o mode=2755 tmpfs /var/log/journal
mount -t tmpfs -o mode=2755 tmpfs /run/log/journal
chgrp systemd-journal /var/log/journal /run/log/journal
chmod 2755 /var/log/journal /run/log/journal

testnet="" veth="" net=""
if command -v ip >/dev/null && command -v socat >/dev/null; then
	net=$(pick_testnet) || true
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
	cp /etc/hosts /run/rig-hosts
	printf '%s testhost.mosaic.test\n%s otherhost.mosaic.test\n10.255.255.1 private.mosaic.test\n' "$net.2" "$net.3" >>/run/rig-hosts
	mount --bind /run/rig-hosts /etc/hosts
else
	echo "rig: no test network (needs ip, socat and python3: apt-get install iproute2 socat python3, and a free range from pick_testnet)" >&2
	# Under CI the network tests must not quietly skip.
	[ -z "${CI:-}" ] || die "no test network could be made, and CI needs one"
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
	--address="unix:path=$runtime/bus" >/dev/null 2>&1 &
pids+=($!)
"${as_user[@]}" "${user_env[@]}" /lib/systemd/systemd --user >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 200); do [ -S "$runtime/systemd/private" ] && [ -S "$runtime/bus" ] && break; sleep 0.05; done
[ -S "$runtime/systemd/private" ] || die "systemd --user did not come up (is $cg_v1 writable?)"
"${as_user[@]}" "${user_env[@]}" systemctl --user is-system-running --wait >/dev/null 2>&1 || true

workdir=$home
if [ -n "${RIG_SRC:-}" ]; then
	workdir=$home/src
	rm -rf "$workdir"; mkdir -p "$workdir"
	tar -C "$RIG_SRC" --exclude=./.git -cf - . | tar -C "$workdir" -xf -
	chown -R "$uid:$gid" "$workdir"
fi
mkdir -p "$home/tmp"; chown "$uid:$gid" "$home/tmp"

# The command, as the test user, with only what a login would give it (plus
# Go's settings and CI's marker, so the tests know they must not skip).
set +e
(cd "$workdir" && "${as_user[@]}" "${user_env[@]}" TMPDIR="$home/tmp" MOSAIC_RIG=1 \
	${CI:+CI="$CI"} ${MOSAIC_AGENTS_CACHE:+MOSAIC_AGENTS_CACHE="$MOSAIC_AGENTS_CACHE"} ${GOPROXY:+GOPROXY="$GOPROXY"} ${GOFLAGS:+GOFLAGS="$GOFLAGS"} ${GOTOOLCHAIN:+GOTOOLCHAIN="$GOTOOLCHAIN"} \
	${TERM:+TERM="$TERM"} ${net:+MOSAIC_TESTNET="$net"} "$@")
rc=$?
set -e
exit $rc
