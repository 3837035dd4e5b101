// Package netstack is the session's side of every connection it makes in
// network allow, proxy-aware or not: a TUN device in the session's network
// namespace, the default route, served inside the sandbox by gVisor's
// userspace TCP/IP stack (gvisor.dev/gvisor/pkg/tcpip, the stack tun2socks
// and wireguard-go's netstack use; no TCP of mosaic's own).
//
// Each TCP connection the command opens, to any address and port, is
// accepted by the stack and relayed to the egress proxy's socket as a
// CONNECT HOST:PORT, so that the proxy's policy decides it as it decides a
// proxy-aware client's: a refusal resets the connection at once (and the
// proxy records it, with the mosaic allow line that grants it). DNS (UDP
// and TCP port 53 at any address, and the loopback nameservers of
// /etc/resolv.conf) is answered here: a name the proxy allows gets an
// address of a range no host has (240.0.0.0/4, which the stack maps back
// to the name when the command connects to it), any other name NXDOMAIN,
// and no query leaves the machine. Other UDP is answered with ICMP port
// unreachable.
//
// It runs in the init, inside the sandbox, so that the packets the command
// crafts are parsed there, in the session's own process, and the proxy
// outside sees only the CONNECT requests it already checks.
package netstack
