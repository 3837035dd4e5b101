package egress

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestTunnelSNI: a tunnel to an allowed host the proxy does not read
// reaches that host only: TLS in it naming another host (SNI) is closed
// before a byte reaches the remote, as a CDN would serve that other site
// on the same address (here the mock, which answers any name, stands for
// a CDN fronting both an allowed API host and the npm registry). A
// ClientHello naming the tunnel's host, or none, and bytes that are not
// TLS pass. Shown to bite: with the tunnel reading br (no helloGate), the
// PUT through front.example's tunnel with SNI example.com (the registry)
// reached the mock and was answered 200.
func TestTunnelSNI(t *testing.T) {
	m := newMockVendor(t)
	e, _, hp := registryProxy(t, m)
	registry, port, _ := net.SplitHostPort(hp)
	front := "front.example:" + port // an allowed host the proxy tunnels, on the registry's address
	e.Allow.Hosts[front] = true
	open := func(sni string) (*tls.Conn, error) {
		c, err := net.Dial("unix", registrySock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "CONNECT "+front+" HTTP/1.1\r\nHost: "+front+"\r\n\r\n")
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s: %v %v", front, resp, err)
		}
		tc := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		return tc, tc.Handshake()
	}
	put := "PUT /left-pad HTTP/1.1\r\nHost: " + registry + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	t0 := time.Now()
	if tc, err := open(registry); err == nil {
		io.WriteString(tc, put)
		b, _ := io.ReadAll(tc)
		t.Fatalf("TLS naming %s through the tunnel to %s: handshake done, the PUT got %q", registry, front, b)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("the refused tunnel stayed open %v (its remote waited on)", d)
	}
	for _, sni := range []string{"front.example", "FRONT.example.", ""} {
		tc, err := open(sni)
		if err != nil {
			t.Fatalf("TLS naming %q through the tunnel to %s: %v", sni, front, err)
		}
		io.WriteString(tc, "GET /ok HTTP/1.1\r\nHost: front.example\r\nConnection: close\r\n\r\n")
		if b, _ := io.ReadAll(tc); !strings.Contains(string(b), "hello /ok") {
			t.Errorf("SNI %q: %q", sni, b)
		}
	}
	m.mu.Lock()
	lines := strings.Join(m.lines, "\n")
	m.mu.Unlock()
	if strings.Contains(lines, "PUT") || strings.Count(lines, "GET /ok") != 3 {
		t.Errorf("the mock got:\n%s", lines)
	}
	st := e.State()
	if len(st.Refused) != 1 || st.Refused[0].Target != front || st.Refused[0].Why != RefusedSNI || !strings.Contains(st.Refused[0].Detail, "SNI "+registry) {
		t.Errorf("refusals: %+v", st.Refused)
	}
	// Not TLS: passes as it is (the mock answers plain HTTP on its TLS port
	// with a 400 of its own).
	c, err := net.Dial("unix", registrySock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "CONNECT "+front+" HTTP/1.1\r\nHost: "+front+"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if b, _ := io.ReadAll(c); !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		t.Errorf("plain bytes through the tunnel: %q", b)
	}
}

// TestTunnelSNIAfterAlert: a tunnel whose first bytes are a TLS record
// that is not the handshake (a warning alert, a change_cipher_spec) is
// closed: a server discards a warning alert before the ClientHello
// (crypto/tls, BoringSSL, OpenSSL alike), so a hello naming another host
// after one would reach it past a gate that reads the first record only.
// Shown to bite: with the gate reading only a tunnel that opens with 0x16,
// the PUT after a warning alert, in TLS naming the registry through
// front.example's tunnel, reached the mock and was answered. (crypto/tls
// also takes an alert of another version, 0x15 0x00 0x00: that one passes,
// as bytes a binary protocol may start with; the CDNs' TLS refuses it.)
func TestTunnelSNIAfterAlert(t *testing.T) {
	m := newMockVendor(t)
	e, _, hp := registryProxy(t, m)
	registry, port, _ := net.SplitHostPort(hp)
	front := "front.example:" + port
	e.Allow.Hosts[front] = true
	for _, first := range [][]byte{
		{0x15, 0x03, 0x01, 0x00, 0x02, 0x01, 0x5a}, // alert: warning, user_canceled
		{0x14, 0x03, 0x03, 0x00, 0x01, 0x01},       // change_cipher_spec
	} {
		c, err := net.Dial("unix", registrySock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "CONNECT "+front+" HTTP/1.1\r\nHost: "+front+"\r\n\r\n")
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT %s: %v %v", front, resp, err)
		}
		c.Write(first)
		tc := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{ServerName: registry, InsecureSkipVerify: true})
		if tc.Handshake() == nil {
			io.WriteString(tc, "PUT /left-pad HTTP/1.1\r\nHost: "+registry+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			b, _ := io.ReadAll(tc)
			t.Errorf("after % x, TLS naming %s through the tunnel to %s: the PUT got %q", first, registry, front, b)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if lines := strings.Join(m.lines, "\n"); strings.Contains(lines, "PUT") {
		t.Errorf("the mock got:\n%s", lines)
	}
	if st := e.State(); len(st.Refused) != 1 || st.Refused[0].Why != RefusedSNI || st.Refused[0].Count != 2 {
		t.Errorf("refusals: %+v", st.Refused)
	}
}

// TestTunnelGateBinaryLength: a protocol whose first bytes are a
// little-endian length in 0x14-0x18 (a MongoDB or MySQL message of 277
// bytes) is no TLS record and passes the gate as it is.
func TestTunnelGateBinaryLength(t *testing.T) {
	remote, other := net.Pipe()
	defer other.Close()
	msg := []byte{0x15, 0x01, 0x00, 0x00, 'h', 'i'}
	g := &helloGate{e: &Egress{Session: "s", live: newLive()}, hp: "db.example:27017", r: bufio.NewReader(bytes.NewReader(msg)), remote: remote}
	b, err := io.ReadAll(g)
	if err != nil || !bytes.Equal(b, msg) {
		t.Errorf("the gate passed %q, %v; want %q", b, err, msg)
	}
}

// clientHello is the ClientHello crypto/tls's client sends naming sni
// (offering TLS 1.3, as every client now does).
func clientHello(t *testing.T, sni string) []byte {
	t.Helper()
	c, s := net.Pipe()
	defer s.Close()
	go tls.Client(c, &tls.Config{ServerName: sni, InsecureSkipVerify: true}).Handshake()
	s.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := s.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestTunnelSNISecondHello: after a first ClientHello naming the tunnel's
// host, a second one (what a client sends after a TLS 1.3
// HelloRetryRequest) naming another host is refused before it reaches the
// remote, with or without the change_cipher_spec and warning alert a
// server skips before it; and a client sending records without end
// instead of its hello is refused past crypto/tls's bound. The remote here
// is a server that cooperates (it takes whatever comes): a CDN that served
// the second hello's name would be reached. Before the fix the second
// hello naming elsewhere.test reached the remote in each case, and the
// records without end passed (checked against that build), and so did the
// second hello after early data with the gate ending at the first
// encrypted record (checked too); so they did
// with the second hello read but the first read without the record
// bound (crypto/tls read ahead, and the second hello was sent on as part
// of the first).
func TestTunnelSNISecondHello(t *testing.T) {
	m := newMockVendor(t)
	e, _, _ := registryProxy(t, m)
	type got struct{ b []byte }
	remote := make(chan got, 1)
	port := serveLoopback(t, func(c net.Conn) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		remote <- got{b}
	})
	front := "front.example:" + port
	e.Allow.Hosts[front] = true
	ccs := []byte{0x14, 0x03, 0x03, 0x00, 0x01, 0x01}
	alert := []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x01, 0x5a} // warning, user_canceled
	hello1, hello2 := clientHello(t, "front.example"), clientHello(t, "elsewhere.test")
	early := append([]byte{0x17, 0x03, 0x03, 0x00, 100}, make([]byte, 100)...) // early data (0-RTT), which a server that retries skips
	for _, c := range []struct {
		name        string
		first, then []byte
	}{
		{"after a change_cipher_spec", hello1, append(append([]byte{}, ccs...), hello2...)},
		{"at once", hello1, hello2},
		{"after an alert and an empty record", hello1, append(append(append([]byte{}, alert...), 0x16, 0x03, 0x03, 0x00, 0x00), hello2...)},
		{"never, records without end", hello1, bytes.Repeat(ccs, maxUseless+1)},
		{"after early data", withEarlyData(t, hello1), append(append(append([]byte{}, early...), ccs...), hello2...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := 0
			if st := e.State(); len(st.Refused) == 1 {
				before = st.Refused[0].Count
			}
			conn, err := net.Dial("unix", registrySock)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			io.WriteString(conn, "CONNECT "+front+" HTTP/1.1\r\nHost: "+front+"\r\n\r\n")
			br := bufio.NewReader(conn)
			if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
				t.Fatalf("CONNECT %s: %v %v", front, resp, err)
			}
			conn.Write(c.first)
			conn.Write(c.then)
			conn.(*net.UnixConn).CloseWrite()
			r := <-remote
			if !bytes.HasPrefix(r.b, c.first) {
				t.Errorf("the first hello did not reach the remote (it got %d bytes)", len(r.b))
			}
			if bytes.Contains(r.b, []byte("elsewhere.test")) || len(r.b) == len(c.first)+len(c.then) {
				t.Errorf("the remote got what followed the first hello (%d bytes of %d)", len(r.b)-len(c.first), len(c.then))
			}
			st := e.State()
			if len(st.Refused) != 1 || st.Refused[0].Target != front || st.Refused[0].Why != RefusedSNI || st.Refused[0].Count != before+1 {
				t.Errorf("refusals: %+v", st.Refused)
			}
		})
	}
}

// withEarlyData is hello, one record of crypto/tls's client, with an
// early_data extension (0-RTT, which that client does not offer) added
// after its others, its lengths made to fit.
func withEarlyData(t *testing.T, hello []byte) []byte {
	t.Helper()
	b := append([]byte{}, hello...)
	i := 5 + 4 + 2 + 32                          // the record's and the message's headers, the version, the random
	i += 1 + int(b[i])                           // the session id
	i += 2 + int(binary.BigEndian.Uint16(b[i:])) // the cipher suites
	i += 1 + int(b[i])                           // the compression methods
	if i+2+int(binary.BigEndian.Uint16(b[i:])) != len(b) {
		t.Fatal("not one hello that ends with its extensions")
	}
	b = append(b, 0, extEarlyData, 0, 0)
	binary.BigEndian.PutUint16(b[i:], uint16(len(b)-i-2))
	binary.BigEndian.PutUint16(b[3:], uint16(len(b)-5))
	n := len(b) - 9
	b[6], b[7], b[8] = byte(n>>16), byte(n>>8), byte(n)
	if h, err := helloName(bytes.NewReader(b)); err != nil || !h.early || h.name != "front.example" {
		t.Fatalf("the hello with early data reads as %+v, %v", h, err)
	}
	return b
}

// TestTunnelSNIHelloRetry: ordinary TLS through a tunnel passes the gate:
// a TLS 1.3 handshake with a HelloRetryRequest (the server takes P-256
// only, the client's first key shares are X25519's), whose second hello
// names the tunnel's host as the first did; TLS 1.2 (a server that takes no
// more, the client offering 1.3), and its resumption by a session ticket.
func TestTunnelSNIHelloRetry(t *testing.T) {
	m := newMockVendor(t)
	e, _, _ := registryProxy(t, m)
	for _, c := range []struct {
		name   string
		server *tls.Config
	}{
		{"TLS 1.3 with a HelloRetryRequest", &tls.Config{CurvePreferences: []tls.CurveID{tls.CurveP256}}},
		{"TLS 1.2", &tls.Config{MaxVersion: tls.VersionTLS12}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello "+r.URL.Path) }))
			srv.TLS = c.server
			srv.StartTLS()
			defer srv.Close()
			_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
			front := "front.example:" + port
			e.Allow.Hosts[front] = true
			cache := tls.NewLRUClientSessionCache(4)
			for i := range 2 {
				conn, err := net.Dial("unix", registrySock)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				io.WriteString(conn, "CONNECT "+front+" HTTP/1.1\r\nHost: "+front+"\r\n\r\n")
				br := bufio.NewReader(conn)
				if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
					t.Fatalf("CONNECT %s: %v %v", front, resp, err)
				}
				tc := tls.Client(&bufferedConn{Conn: conn, r: br}, &tls.Config{ServerName: "front.example", InsecureSkipVerify: true, ClientSessionCache: cache})
				if err := tc.Handshake(); err != nil {
					t.Fatalf("handshake %d: %v (refusals: %+v)", i, err, e.State().Refused)
				}
				st := tc.ConnectionState()
				if c.server.CurvePreferences != nil && i == 0 && !st.HelloRetryRequest {
					t.Fatal("no HelloRetryRequest: this test proves nothing")
				}
				if c.server.MaxVersion == tls.VersionTLS12 && (st.Version != tls.VersionTLS12 || i == 1 && !st.DidResume) {
					t.Fatalf("connection %d: version %x, resumed %v", i, st.Version, st.DidResume)
				}
				io.WriteString(tc, "GET /ok HTTP/1.1\r\nHost: front.example\r\nConnection: close\r\n\r\n")
				if b, _ := io.ReadAll(tc); !strings.Contains(string(b), "hello /ok") {
					t.Errorf("connection %d: %q", i, b)
				}
			}
			if st := e.State(); len(st.Refused) != 0 {
				t.Errorf("refusals: %+v", st.Refused)
			}
		})
	}
}

// TestTunnelGatePassesRecords: what a client sends after a hello that
// names the tunnel's host passes byte for byte: a change_cipher_spec and
// encrypted records (TLS 1.3), also records of 16 KiB (more than the
// gate's buffer) and early data past maxEarly after a hello offering it.
func TestTunnelGatePassesRecords(t *testing.T) {
	hello := clientHello(t, "front.example")
	record := func(typ byte, n int) []byte {
		return append([]byte{typ, 0x03, 0x03, byte(n >> 8), byte(n)}, bytes.Repeat([]byte{0x01}, n)...)
	}
	var data []byte
	for range 8 {
		data = append(data, record(0x17, 16<<10)...)
	}
	for _, first := range [][]byte{hello, withEarlyData(t, hello)} {
		in := append(append(append([]byte{}, first...), 0x14, 0x03, 0x03, 0x00, 0x01, 0x01), data...)
		remote, other := net.Pipe()
		defer other.Close()
		g := &helloGate{e: &Egress{Session: "s", live: newLive()}, hp: "front.example:443", r: bufio.NewReader(bytes.NewReader(in)), remote: remote}
		b, err := io.ReadAll(g)
		if err != nil || !bytes.Equal(b, in) {
			t.Errorf("the gate passed %d bytes, %v; want the %d sent", len(b), err, len(in))
		}
	}
}
