package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"mosaic/internal/credvar"
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

// TestInjectPlainLocal: a gateway on the host's loopback named by a plain
// http:// base URL (ANTHROPIC_BASE_URL=http://localhost:4000) gets the key
// in the rule's headers, as an https:// one does; it got the placeholder,
// so the docs' own local-gateway example (docs/agents.md) could not authenticate. A
// placeholder in another header, or to an allowed loopback port no rule
// names, goes as sent.
func TestInjectPlainLocal(t *testing.T) {
	got := make(chan http.Header, 4)
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go http.Serve(srv, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("X-Seen-Host", r.Host)
		got <- h
		io.WriteString(w, "ok\n")
	}))
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	other, _ := net.Listen("tcp", "127.0.0.1:0")
	t.Cleanup(func() { other.Close() })
	go http.Serve(other, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	_, otherPort, _ := net.SplitHostPort(other.Addr().String())

	rule, err := ParseRule("ANTHROPIC_API_KEY=x-api-key,authorization@localhost:" + port)
	if err != nil {
		t.Fatal(err)
	}
	session, proxy := Split([]Rule{rule}, []credvar.Var{{Name: "ANTHROPIC_API_KEY", Value: testKey}})
	ph := session[0].Value
	env := map[string]string{}
	for _, v := range proxy {
		env[v.Name] = v.Value
	}
	in, err := NewInjector("s1", []Rule{rule}, nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	al, _ := ParseAllow([]string{"localhost:" + port, "localhost:" + otherPort})
	log := &lockedLog{}
	e := &Egress{Session: "s1", Allow: al, Log: log, Inject: in}
	l, err := net.Listen("unix", t.TempDir()+"/proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go e.Serve(l)
	var sendAs func(p, host string) http.Header
	send := func(p string) http.Header { return sendAs(p, "localhost:"+p) }
	sendAs = func(p, host string) http.Header {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST http://localhost:"+p+"/v1/messages HTTP/1.1\r\nHost: "+host+"\r\nx-api-key: "+ph+"\r\nx-other: "+ph+"\r\nContent-Length: 0\r\n\r\n")
		io.ReadAll(bufio.NewReader(c))
		return <-got
	}
	h := send(port)
	if h.Get("x-api-key") != testKey {
		t.Errorf("the local gateway got x-api-key %q, want the key", h.Get("x-api-key"))
	}
	if h.Get("x-other") != ph {
		t.Errorf("a header the rule does not name was changed: %q", h.Get("x-other"))
	}
	// A Host header naming another site (a gateway that routes by Host
	// would send the key there): the gateway sees the rule's host.
	if h := sendAs(port, "attacker.example"); h.Get("x-api-key") == testKey && h.Get("X-Seen-Host") != "localhost:"+port {
		t.Errorf("the key went with Host %q", h.Get("X-Seen-Host"))
	}
	// TRACE to the gateway (issue 31, break 7): it would echo the key back.
	if c, err := net.Dial("unix", l.Addr().String()); err == nil {
		io.WriteString(c, "TRACE http://localhost:"+port+"/v1/messages HTTP/1.1\r\nHost: localhost:"+port+"\r\nx-api-key: "+ph+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("TRACE to the local gateway: %v %v", resp, err)
		}
		c.Close()
		select {
		case h := <-got:
			t.Errorf("the local gateway got a TRACE, x-api-key %q", h.Get("x-api-key"))
		default:
		}
	}
	if h := send(otherPort); h.Get("x-api-key") != ph {
		t.Errorf("a loopback port no rule names got x-api-key %q, want the placeholder", h.Get("x-api-key"))
	}
	journal := log.String()
	if strings.Contains(journal, testKey) || !strings.Contains(journal, "injected ANTHROPIC_API_KEY") {
		t.Errorf("the journal: %s", journal)
	}
}
