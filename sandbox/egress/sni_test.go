package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
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
