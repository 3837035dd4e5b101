package sandbox

import (
	"strconv"
	"strings"
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

// ValidNetwork reports whether mode is a network mode.
func ValidNetwork(mode string) bool {
	return mode == NetworkNone || mode == NetworkAllow || mode == NetworkHost
}

// ProxyEnv are the variables that point a command at the relay. NO_PROXY
// names loopback (the session's own) unless env sets it already, as a
// session allowed a host loopback port does (those names go to the proxy).
func ProxyEnv(env []string) []string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	none := "localhost,127.0.0.1,::1"
	out := []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u}
	for _, kv := range env {
		if strings.HasPrefix(kv, "NO_PROXY=") {
			return out
		}
	}
	return append(out, "NO_PROXY="+none, "no_proxy="+none)
}
