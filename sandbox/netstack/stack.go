package netstack

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/header"
	"gvisor.dev/gvisor/pkg/tcpip/link/fdbased"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv4"
	"gvisor.dev/gvisor/pkg/tcpip/stack"
	tcpfwd "gvisor.dev/gvisor/pkg/tcpip/transport/tcp"
	udpfwd "gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"

	"mosaic/internal/acceptloop"
)

// Dialer opens a connection to the egress proxy's socket.
type Dialer = func(ctx context.Context) (net.Conn, error)

// maxInFlight bounds the connections being opened at once (each waits for
// the proxy's answer); a SYN past it is dropped, and its client retries.
const maxInFlight = 512

// mtu is the device's (inside.TUNMTU).
const mtu = 65520

// Start serves the session's network device tun (made by the exec shim,
// sandbox.passNetwork) for the rest of the init's life: every TCP
// connection through the proxy that dial reaches, DNS by the proxy's
// allowlist, there and on the DNS sockets udp and tcp (loopback port 53).
func Start(tun int, udp, tcp []int, dial Dialer) error {
	s := stack.New(stack.Options{
		NetworkProtocols:   []stack.NetworkProtocolFactory{ipv4.NewProtocol},
		TransportProtocols: []stack.TransportProtocolFactory{tcpfwd.NewProtocol, udpfwd.NewProtocol},
		HandleLocal:        false,
	})
	ep, err := fdbased.New(&fdbased.Options{FDs: []int{tun}, MTU: mtu, RXChecksumOffload: true})
	if err != nil {
		return fmt.Errorf("the session's network stack: %w", err)
	}
	if terr := s.CreateNIC(1, ep); terr != nil {
		return fmt.Errorf("the session's network stack: %v", terr)
	}
	// Every address is the stack's own: it accepts a connection to any of
	// them, as the other end of every route of the session.
	s.SetPromiscuousMode(1, true)
	s.SetSpoofing(1, true)
	s.SetRouteTable([]tcpip.Route{{Destination: header.IPv4EmptySubnet, NIC: 1}})
	// Buffers as large as a loopback download needs to keep the device
	// busy (the defaults, 1 MB at most, halve its throughput).
	sack, moderate := tcpip.TCPSACKEnabled(true), tcpip.TCPModerateReceiveBufferOption(true)
	for _, opt := range []tcpip.SettableTransportProtocolOption{&sack, &moderate,
		&tcpip.TCPSendBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20},
		&tcpip.TCPReceiveBufferSizeRangeOption{Min: 4 << 10, Default: 1 << 20, Max: 8 << 20},
	} {
		s.SetTransportProtocolOption(tcpfwd.ProtocolNumber, opt)
	}
	// No TIME-WAIT: in it gVisor hands a new SYN on the same four-tuple only
	// to a listening endpoint, which the forwarder is not, and drops it;
	// the stack is the active closer whenever the server ends first, and
	// the command's kernel, the passive one, keeps no TIME-WAIT of its own,
	// so that it soon reuses the source port (2 of 2,000 connections to one
	// host:port hung for its 60 s). Nothing TIME-WAIT guards against
	// happens on a device no wire limits: no segment of an old connection
	// arrives late, and a lost last ACK is answered by a reset.
	tw := tcpip.TCPTimeWaitTimeoutOption(0)
	s.SetTransportProtocolOption(tcpfwd.ProtocolNumber, &tw)

	self, _ := os.Hostname()
	n := &netw{dial: dial, names: newNames(), self: strings.ToLower(self)}
	fwd := tcpfwd.NewForwarder(s, 0, maxInFlight, n.tcp)
	s.SetTransportProtocolHandler(tcpfwd.ProtocolNumber, fwd.HandlePacket)
	ufwd := udpfwd.NewForwarder(s, n.udp)
	s.SetTransportProtocolHandler(udpfwd.ProtocolNumber, func(id stack.TransportEndpointID, pkt *stack.PacketBuffer) bool {
		if id.LocalPort != 53 {
			return false // the stack answers ICMP port unreachable
		}
		return ufwd.HandlePacket(id, pkt)
	})
	return n.serveLoopbackDNS(udp, tcp)
}

// netw is the session's network: the way to the proxy, and the names its
// DNS gave out.
type netw struct {
	dial  Dialer
	names *names
	// asking joins the questions about one name asked at once.
	asking inFlight
	self   string // the session's host name (its name), lower case
}

// tcp relays one connection the command opened through the device: it
// asks the proxy for the destination first and completes the handshake
// only once the proxy has it, so that a refusal is a reset (the client's
// "connection refused"), not a connection that closes.
func (n *netw) tcp(r *tcpfwd.ForwarderRequest) {
	id := r.ID()
	dst, _ := netip.AddrFromSlice(id.LocalAddress.AsSlice())
	if id.LocalPort == 53 {
		c, ok := accept(r)
		if ok {
			n.serveDNSStream(c)
		}
		return
	}
	target := n.names.target(dst, id.LocalPort)
	ctx, cancel := context.WithTimeout(context.Background(), connectWait)
	p, err := n.connect(ctx, target)
	cancel()
	if err != nil {
		r.Complete(true)
		return
	}
	defer p.Close()
	c, ok := accept(r)
	if !ok {
		return
	}
	defer c.Close()
	acceptloop.Join(c, p, copyBuffer)
}

// accept completes the handshake of r and returns its connection.
func accept(r *tcpfwd.ForwarderRequest) (*gonet.TCPConn, bool) {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		r.Complete(true)
		return nil, false
	}
	r.Complete(false)
	ep.SocketOptions().SetKeepAlive(true)
	return gonet.NewTCPConn(&wq, ep), true
}

// udp answers the DNS queries sent to port 53 of any address from one
// client socket (a resolver sends its A and AAAA queries together, from
// one port), until it is idle for dnsWait.
func (n *netw) udp(r *udpfwd.ForwarderRequest) {
	var wq waiter.Queue
	ep, terr := r.CreateEndpoint(&wq)
	if terr != nil {
		return
	}
	go n.servePackets(gonet.NewUDPConn(&wq, ep), true)
}

// copyBuffer is each direction's buffer: a write to the stack of this
// much is segmented at once, where io.Copy's 32 KB would take a round
// through the stack's locks for each. 1 MiB is what the proxy's splice
// puts in the socket at once (egress's spliceChunk): 256 KiB took four
// reads and writes for each (mosaic-net's CPU per 200 MB download
// 340 -> 313 ms, docs/dev/speed.md).
const copyBuffer = 1 << 20
