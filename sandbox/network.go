package sandbox

import (
	"os"
)

// A session's network is one of three modes. In none and allow it has a
// network namespace of its own with only loopback: no route anywhere, none
// of the host's loopback services, none of its abstract Unix sockets (which
// no mount can hide). In allow, the session's init listens on
// 127.0.0.1:ProxyPort and relays each connection to the egress proxy's Unix
// socket, bound into the sandbox at EgressSocketInside; the proxy
// (package sandbox/egress), outside, opens tunnels only to the allowed names.
const (
	NetworkNone  = "none"
	NetworkAllow = "allow"
	NetworkHost  = "host"

	ProxyPort          = 3128
	EgressDirInside    = "/run/mosaic/egress"
	EgressSocketName   = "proxy.sock"
	EgressSocketInside = EgressDirInside + "/" + EgressSocketName
)

// TUNPath is the kernel's TUN node (package sandbox/netstack opens it too).
const TUNPath = "/dev/net/tun"

// TUNUsable reports whether this user may open the TUN node: Debian's
// (and every udev's) default mode is 0666; a container's /dev may hold it
// 0600 root, and a session there reaches only proxy-aware clients' hosts.
func TUNUsable() bool {
	f, err := os.OpenFile(TUNPath, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// HostsName is the session's /etc/hosts in its egress directory (with
// the device, see HostsFile).
const HostsName = "hosts"

// HostsFile is the /etc/hosts of a session with the network device: only
// its own names, so that every other name goes to the session's DNS, which
// answers by the allowlist (the host's hosts file would hand the command
// addresses the proxy, which connects to names, refuses). The proxy,
// outside, still resolves with the host's.
func HostsFile(session string) string {
	return "# mosaic: the session's own names; every other name resolves by its allowlist (mosaic allow)\n" +
		"127.0.0.1\tlocalhost\n127.0.1.1\t" + session + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"
}

// ValidNetwork reports whether mode is a network mode.
func ValidNetwork(mode string) bool {
	return mode == NetworkNone || mode == NetworkAllow || mode == NetworkHost
}

// NetPath is where mosaic-net, the binary that serves the device (package
// sandbox/netstack), is bound in a session that has the device.
const NetPath = "/run/mosaic/net"
