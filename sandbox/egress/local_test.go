package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEgressLocal (issue 16): --allow-host localhost:PORT reaches that port
// of the host's loopback by any of its names, over CONNECT and as plain
// HTTP, one request per connection; plain HTTP anywhere else and another
// loopback port stay refused.
func TestEgressLocal(t *testing.T) {
	var seen atomic.Int32
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go http.Serve(srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		io.WriteString(w, "local model says hi to "+r.URL.Path+"\n")
	}))
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	other, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { other.Close() })
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())

	// Before: a loopback entry with a port is not a host name.
	if _, err := ParseAllow([]string{"127.0.0.1:" + port}); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseAllow([]string{"localhost"}); err == nil || !strings.Contains(err.Error(), "port") {
		t.Errorf("localhost without a port: %v", err)
	}
	dial, _ := egressTest(t, []string{"[::1]:" + port}, nil)
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		c := dial()
		io.WriteString(c, "GET http://"+host+"/v1/models HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		b, _ := io.ReadAll(c)
		if !strings.Contains(string(b), " 200 ") || !strings.Contains(string(b), "local model says hi to /v1/models") {
			t.Errorf("plain HTTP to %s: %q", host, b)
		}
		if st := connectStatus(t, dial(), host); !strings.Contains(st, " 200 ") {
			t.Errorf("CONNECT %s: %q", host, st)
		}
	}
	for _, target := range []string{"http://localhost:" + otherPort + "/", "http://example.test/"} {
		c := dial()
		io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: x\r\n\r\n")
		b, _ := io.ReadAll(c)
		if !strings.Contains(string(b), " 403 ") {
			t.Errorf("plain HTTP to %s: %q, want 403", target, b)
		}
	}
	if st := connectStatus(t, dial(), "localhost:"+otherPort); !strings.Contains(st, " 403 ") {
		t.Errorf("CONNECT to a loopback port not on the list: %q", st)
	}
	// A second request on the same connection is not relayed: the proxy
	// answers one and closes, so a client cannot smuggle a request to
	// another port behind an allowed one.
	before := seen.Load()
	c := dial()
	io.WriteString(c, "GET http://localhost:"+port+"/one HTTP/1.1\r\nHost: localhost\r\n\r\nGET http://localhost:"+otherPort+"/two HTTP/1.1\r\nHost: localhost\r\n\r\n")
	b, _ := io.ReadAll(c)
	if strings.Count(string(b), "HTTP/1.1 ") != 1 || seen.Load() != before+1 {
		t.Errorf("two requests on one connection: %q (%d served)", b, seen.Load()-before)
	}
}

// connectStatus sends CONNECT target and returns the proxy's status line
// (the tunnel stays open: the server behind waits for a request).
func connectStatus(t *testing.T, c net.Conn, target string) string {
	t.Helper()
	defer c.Close()
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return line
}
