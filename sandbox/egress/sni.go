package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
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
type helloGate struct {
	e    *Egress
	hp   string // the tunnel's "host:port"
	r    *bufio.Reader
	rest io.Reader // once checked: what was read, then the rest
	// remote is the tunnel's other end, closed on a refusal: the tunnel's
	// other direction would wait for it until the tunnel was quiet too long.
	remote net.Conn
}

func (g *helloGate) Read(p []byte) (int, error) {
	if g.rest == nil {
		first, err := g.r.Peek(1)
		if err != nil {
			return 0, err // a timeout is retried by the tunnel's copy
		}
		g.rest = g.r
		switch first[0] {
		case 0x16: // a TLS handshake record
			if g.rest, err = g.check(); err != nil {
				return 0, err
			}
		case 0x14, 0x15, 0x17, 0x18:
			// Another TLS record (change_cipher_spec, alert, data,
			// heartbeat), which no client opens with: a server discards a
			// warning alert before the ClientHello, so a hello after one
			// would pass unread. Its version's first byte is 3 (BoringSSL,
			// OpenSSL and s2n take no other); a protocol whose first bytes
			// are a little-endian length (MongoDB's, MySQL's) may start
			// with 0x14-0x18, rarely followed by 3.
			if head, err := g.r.Peek(2); err == nil && head[1] == 0x03 {
				return 0, g.refuse("the TLS in the tunnel to " + g.hp + " opens with a record that is not its ClientHello")
			}
		}
	}
	return g.rest.Read(p)
}

// check reads the ClientHello and returns it to be sent on, followed by
// the rest, or refuses.
func (g *helloGate) check() (io.Reader, error) {
	rec := &recording{r: g.r}
	name, err := helloName(rec)
	host, _, _ := net.SplitHostPort(g.hp)
	sni := strings.ToLower(strings.TrimSuffix(name, "."))
	if err == nil && (sni == "" || sni == host) {
		return io.MultiReader(bytes.NewReader(rec.buf), g.r), nil
	}
	why := "the TLS in the tunnel to " + g.hp + " names another host (SNI " + printable(sni) + "): a tunnel reaches the host it was opened to only"
	if err != nil {
		why = "the TLS in the tunnel to " + g.hp + " opens with no ClientHello the proxy can read"
	}
	return nil, g.refuse(why)
}

// refuse closes the tunnel for why, and records it.
func (g *helloGate) refuse(why string) error {
	g.e.logf("closed the tunnel to %s: %s", g.hp, why)
	g.e.refused(g.hp, RefusedSNI, why)
	g.remote.Close()
	return errors.New(why)
}

// errHelloRead ends helloName's handshake once the ClientHello is read.
var errHelloRead = errors.New("ClientHello read")

// helloName reads a TLS ClientHello from r (crypto/tls's own parser,
// which takes one split across records) and returns its server name.
func helloName(r io.Reader) (string, error) {
	var name string
	got := false
	err := tls.Server(helloConn{r}, &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, got = h.ServerName, true
		return nil, errHelloRead
	}}).Handshake()
	if got {
		return name, nil
	}
	return "", err
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
