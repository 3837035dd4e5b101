package sandbox

import "strconv"

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

// ProxyEnv are the variables that point a command at the relay.
func ProxyEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	none := "localhost,127.0.0.1,::1"
	return []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u,
		"NO_PROXY=" + none, "no_proxy=" + none}
}
