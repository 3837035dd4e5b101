package netstack

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"mosaic/internal/acceptloop"
)

// dnsWait bounds one DNS exchange: a query read, the proxy asked, the
// answer written.
const dnsWait = 5 * time.Second

// ttl is the answers' TTL: short, so that a client asks again soon after
// a grant or a deny (the proxy checks each connection either way).
const ttl = 5

// answer is the reply to the DNS query q, or nil for what is not a query.
// A name the proxy allows gets its address (type A) or an empty answer
// (any other type: the session has no IPv6 route), the session's own names
// theirs (own); any other name is NXDOMAIN, and SERVFAIL when the proxy
// could not be asked. Nothing is asked of any nameserver.
func (n *netw) answer(q []byte) []byte {
	var p dnsmessage.Parser
	h, err := p.Start(q)
	if err != nil || h.Response {
		return nil
	}
	question, err := p.Question()
	if err != nil {
		return nil
	}
	reply := dnsmessage.Message{Header: dnsmessage.Header{ID: h.ID, Response: true, RecursionDesired: h.RecursionDesired,
		RecursionAvailable: true, Authoritative: true}, Questions: []dnsmessage.Question{question}}
	host := strings.ToLower(strings.TrimSuffix(question.Name.String(), "."))
	query := h.OpCode == 0 && question.Class == dnsmessage.ClassINET
	own, isOwn := n.own(host)
	// A reverse lookup names no host the proxy could allow: not asked, so
	// that a client's PTR queries are no refusals on record.
	reverse := strings.HasSuffix(host, ".arpa")
	allowed, err := false, error(nil)
	if query && !isOwn && !reverse && validName(host) {
		allowed, err = n.allowed(host)
	}
	switch {
	case !query:
		reply.RCode = dnsmessage.RCodeNotImplemented
	case isOwn:
		if question.Type == dnsmessage.TypeA {
			reply.Answers = aAnswer(question.Name, own)
		}
	case reverse:
		reply.RCode = dnsmessage.RCodeNameError
	case err != nil:
		reply.RCode = dnsmessage.RCodeServerFailure
	case !allowed:
		reply.RCode = dnsmessage.RCodeNameError
	case question.Type == dnsmessage.TypeA:
		reply.Answers = aAnswer(question.Name, n.names.addr(host))
	}
	b, err := reply.Pack()
	if err != nil {
		return nil
	}
	return b
}

// aAnswer is the answer that name is at a.
func aAnswer(name dnsmessage.Name, a netip.Addr) []dnsmessage.Resource {
	return []dnsmessage.Resource{{
		Header: dnsmessage.ResourceHeader{Name: name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: ttl},
		Body:   &dnsmessage.AResource{A: a.As4()},
	}}
}

// own is the address of a name of the session's own, answered here
// without the proxy, as the session's /etc/hosts answers it
// (sandbox.HostsFile): localhost and every name under it (RFC 6761) at
// 127.0.0.1, the session's host name at 127.0.1.1. Asked of the proxy,
// they were NXDOMAIN for a resolver that skips the hosts file, and each
// was recorded as a refusal whose grant line (mosaic allow S localhost)
// mosaic refuses.
func (n *netw) own(host string) (netip.Addr, bool) {
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
	case host != "" && host == n.self:
		return netip.AddrFrom4([4]byte{127, 0, 1, 1}), true
	}
	return netip.Addr{}, false
}

// validName reports whether host is a DNS name the proxy could allow:
// labels of letters, digits, '-' and '_', at most 253 bytes. (An address
// written as a name is not one: the proxy connects to names only.)
func validName(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false
	}
	for _, l := range strings.Split(host, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// serveDNSStream answers DNS over a stream (TCP): queries, each after its
// two-byte length, until the client is done or idle for dnsWait.
func (n *netw) serveDNSStream(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		_ = c.SetDeadline(time.Now().Add(dnsWait))
		var size [2]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(br, q); err != nil {
			return
		}
		reply := n.answer(q)
		if reply == nil {
			return
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(reply))), reply...)); err != nil {
			return
		}
	}
}

// serveLoopbackDNS answers DNS on the sockets the shim bound on
// loopback port 53 (inside.LoopbackDNS), UDP and TCP.
func (n *netw) serveLoopbackDNS(udp, tcp []int) error {
	for _, fd := range udp {
		f := os.NewFile(uintptr(fd), "dns-udp")
		pc, err := net.FilePacketConn(f)
		f.Close()
		if err != nil {
			return err
		}
		go n.servePackets(pc, false)
	}
	for _, fd := range tcp {
		f := os.NewFile(uintptr(fd), "dns-tcp")
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return err
		}
		go func() { _ = acceptloop.Serve(l, func(c net.Conn) { go n.serveDNSStream(c) }) }()
	}
	return nil
}

// servePackets answers DNS over UDP on pc: a loopback socket for the
// init's life, or (idle) one client's through the device, closed once it
// has been quiet for dnsWait.
func (n *netw) servePackets(pc net.PacketConn, idle bool) {
	defer pc.Close()
	for {
		if idle {
			_ = pc.SetReadDeadline(time.Now().Add(dnsWait))
		}
		buf := make([]byte, 1500)
		k, from, err := pc.ReadFrom(buf)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() && !idle {
				continue
			}
			return
		}
		go func() {
			if reply := n.answer(buf[:k]); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}()
	}
}
