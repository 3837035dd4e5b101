package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"
)

// helloGate is the session's side of a tunnel the proxy does not read:
// when its first bytes open TLS, they are a ClientHello whose server name
// (SNI) must be the host the tunnel was opened to (or none). A CDN serves
// every site it fronts on each of its addresses, by that name: a tunnel
// to an allowed host on one (an API vendor's) would otherwise reach any
// other site there, a registry whose writes the proxy reads
// (registry.npmjs.org) among them. A ClientHello that cannot be read
// closes the tunnel too, and so does another TLS record first (a warning
// alert, which a server discards before the hello). Other protocols (a server that speaks first
// included) pass as they are.
//
// A hello that offers TLS 1.3 may be followed by a second one, after the
// server's HelloRetryRequest (a key share for another group): it is read
// too, by the same rule (second).
type helloGate struct {
	e  *Egress
	hp string // the tunnel's "host:port"
	r  *bufio.Reader
	// out are bytes read and checked, to be sent on before the rest.
	out []byte
	// pass is how many bytes of g.r go on unread before the gate looks
	// again (a record it lets through while it waits for a second hello).
	pass  int
	state int // gateFirst, gateSecond or gateDone
	// useless counts the records with no handshake message the gate let
	// through while it waited for a second hello; early is how many bytes
	// of early data (0-RTT) it still lets through meanwhile.
	useless, early int
	failed         error // the refusal, for every read after it
	// remote is the tunnel's other end, closed on a refusal: the tunnel's
	// other direction would wait for it until the tunnel was quiet too long.
	remote net.Conn
}

// The gate's states: before the first bytes, after a first hello that
// offered TLS 1.3 (a second may come), done (the rest passes unread).
const (
	gateFirst = iota
	gateSecond
	gateDone
)

func (g *helloGate) Read(p []byte) (int, error) {
	if g.failed != nil {
		return 0, g.failed
	}
	for len(g.out) == 0 && g.pass == 0 && g.state != gateDone {
		var err error
		if g.state == gateFirst {
			err = g.first()
		} else {
			err = g.second()
		}
		if err != nil {
			return 0, err // a timeout is retried by the tunnel's copy
		}
	}
	if len(g.out) > 0 {
		n := copy(p, g.out)
		g.out = g.out[n:]
		return n, nil
	}
	if g.pass > 0 {
		n, err := g.r.Read(p[:min(len(p), g.pass)])
		g.pass -= n
		return n, err
	}
	return g.r.Read(p)
}

// first looks at the tunnel's first bytes: a ClientHello is checked, and
// a TLS record that no client opens with is refused.
func (g *helloGate) first() error {
	first, err := g.r.Peek(1)
	if err != nil {
		return err
	}
	g.state = gateDone
	switch first[0] {
	case 0x16: // a TLS handshake record
		h, err := g.check()
		if h.tls13 {
			g.state = gateSecond
		}
		if h.early {
			g.early = maxEarly
		}
		return err
	case 0x14, 0x15, 0x17, 0x18:
		// Another TLS record (change_cipher_spec, alert, data,
		// heartbeat), which no client opens with: a server discards a
		// warning alert before the ClientHello, so a hello after one
		// would pass unread. Its version's first byte is 3 (BoringSSL,
		// OpenSSL and s2n take no other); a protocol whose first bytes
		// are a little-endian length (MongoDB's, MySQL's) may start
		// with 0x14-0x18, rarely followed by 3.
		if head, err := g.r.Peek(2); err == nil && head[1] == 0x03 {
			return g.refuse("the TLS in the tunnel to " + g.hp + " opens with a record that is not its ClientHello")
		}
	}
	return nil
}

// maxUseless bounds the records with no handshake message the gate lets
// through before a second hello, as crypto/tls bounds those it skips.
const maxUseless = 16

// maxEarly bounds the early data (0-RTT) the gate lets through before a
// second hello: a server that asks for a retry skips a first hello's early
// data, up to the most it takes (16 KiB by default in OpenSSL and nginx,
// 14 KiB in BoringSSL), and refuses more. (A server set to take more than
// maxEarly would take a second hello sent past it unread.)
const maxEarly = 64 << 10

// second looks at the records that follow a first hello offering TLS 1.3,
// for the second hello a HelloRetryRequest asks for. Before it, a client
// sends nothing but a change_cipher_spec (TLS 1.3's middlebox
// compatibility) and a server skips a warning alert or an empty handshake
// record, and early data (encrypted records, type 23) when the first hello
// offered it: those pass, and the gate looks on. A handshake record that opens
// with a ClientHello (type 1) is read and checked as the first was; any
// other record ends the gate: TLS 1.3's encrypted records (type 23; past
// maxEarly of them when the first hello offered early data), and
// TLS 1.2's handshake (a server that chose it: the client's key exchange
// or certificate, whose type is not 1). Only the record's header and its
// message's type are read here; the hello itself is crypto/tls's to read.
// (A TLS 1.2 session resumed with a cipher whose encrypted Finished may
// open with the byte 1 (CBC, ChaCha20; not AES-GCM, whose explicit nonce
// opens with the sequence number's 0) is read as a hello then and closed:
// one in 256 of those, from a client that offered TLS 1.3.)
func (g *helloGate) second() error {
	head, err := g.r.Peek(recordHeaderLen)
	if err != nil {
		return g.shortEnd(err)
	}
	typ, n := head[0], int(head[3])<<8|int(head[4])
	switch {
	case typ == 0x14 && n == 1, typ == 0x15 && n == 2, typ == 0x16 && n == 0:
		if g.useless++; g.useless > maxUseless {
			return g.refuse(fmt.Sprintf("the TLS in the tunnel to %s sends over %d records with no message before its handshake goes on", g.hp, maxUseless))
		}
		g.pass = recordHeaderLen + n
		return nil
	case typ == 0x17 && n <= g.early:
		g.early -= n
		g.pass = recordHeaderLen + n
		return nil
	case typ == 0x16:
		head, err := g.r.Peek(recordHeaderLen + 1)
		if err != nil {
			return g.shortEnd(err)
		}
		g.state = gateDone
		if head[recordHeaderLen] == 1 { // client_hello
			_, err := g.check()
			return err
		}
	}
	g.state = gateDone
	return nil
}

// shortEnd is second's answer to err from a peek at the next record: a
// timeout is the tunnel's copy's to retry; an end before a whole record
// passes on what came as it is.
func (g *helloGate) shortEnd(err error) error {
	if isTimeout(err) {
		return err
	}
	g.state = gateDone
	return nil
}

// recordHeaderLen is a TLS record's header: its type, version and length.
const recordHeaderLen = 5

// check reads a ClientHello into out, to be sent on, or refuses.
func (g *helloGate) check() (hello, error) {
	rec := &recording{r: &records{r: g.r}}
	h, err := helloName(rec)
	host, _, _ := net.SplitHostPort(g.hp)
	sni := strings.ToLower(strings.TrimSuffix(h.name, "."))
	if err == nil && (sni == "" || sni == host) {
		g.out = rec.buf
		return h, nil
	}
	why := "the TLS in the tunnel to " + g.hp + " names another host (SNI " + printable(sni) + "): a tunnel reaches the host it was opened to only"
	if err != nil {
		why = "the TLS in the tunnel to " + g.hp + " opens with no ClientHello the proxy can read"
	}
	return hello{}, g.refuse(why)
}

// refuse closes the tunnel for why, and records it.
func (g *helloGate) refuse(why string) error {
	g.e.logf("closed the tunnel to %s: %s", g.hp, why)
	g.e.refused(g.hp, RefusedSNI, why)
	g.remote.Close()
	g.failed = errors.New(why)
	return g.failed
}

// errHelloRead ends helloName's handshake once the ClientHello is read.
var errHelloRead = errors.New("ClientHello read")

// hello is what the gate reads of a ClientHello: its server name, and
// whether it offers TLS 1.3 and early data (0-RTT).
type hello struct {
	name         string
	tls13, early bool
}

// extEarlyData is the early_data extension's number (RFC 8446).
const extEarlyData = 42

// helloName reads a TLS ClientHello from r (crypto/tls's own parser,
// which takes one split across records).
func helloName(r io.Reader) (hello, error) {
	var got *hello
	err := tls.Server(helloConn{r}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		got = &hello{name: h.ServerName, tls13: slices.Contains(h.SupportedVersions, tls.VersionTLS13), early: slices.Contains(h.Extensions, extEarlyData)}
		return nil, errHelloRead
	}}).Handshake()
	if got != nil {
		return *got, nil
	}
	return hello{}, err
}

// records reads r a TLS handshake record at a time, and no further than
// the record crypto/tls asked into: it reads ahead of what it needs, and
// would take what follows a hello (a second hello) into the bytes checked
// as the first. A record of another type ends it (io.EOF): a hello is
// sent in handshake records only.
type records struct {
	r    *bufio.Reader
	left int // of the record being read
}

func (h *records) Read(p []byte) (int, error) {
	if h.left == 0 {
		head, err := h.r.Peek(recordHeaderLen)
		if err != nil {
			return 0, err
		}
		if head[0] != 0x16 {
			return 0, io.EOF
		}
		h.left = recordHeaderLen + (int(head[3])<<8 | int(head[4]))
	}
	n, err := h.r.Read(p[:min(len(p), h.left)])
	h.left -= n
	return n, err
}

// recording is a reader that keeps what it read.
type recording struct {
	r   io.Reader
	buf []byte
}

func (c *recording) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	return n, err
}

// helloConn is a connection that reads r and writes nowhere (helloName's
// alert goes nowhere).
type helloConn struct{ r io.Reader }

func (c helloConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c helloConn) Close() error                     { return nil }
func (c helloConn) LocalAddr() net.Addr              { return &net.UnixAddr{Net: "unix"} }
func (c helloConn) RemoteAddr() net.Addr             { return &net.UnixAddr{Net: "unix"} }
func (c helloConn) SetDeadline(time.Time) error      { return nil }
func (c helloConn) SetReadDeadline(time.Time) error  { return nil }
func (c helloConn) SetWriteDeadline(time.Time) error { return nil }
