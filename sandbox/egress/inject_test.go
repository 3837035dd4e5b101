package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"mosaic/internal/credvar"
)

const testKey = "sk-ant-api03-REALKEY-0123456789abcdefghijklmnopqrstuvwxyz-AA"

// mockVendor is a vendor's API on loopback (HTTPS with its own test CA,
// named example.com by httptest's certificate): it records the headers it
// got, streams server-sent events gated by the test, and echoes an upgraded
// connection.
type mockVendor struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []http.Header
	hosts []string // the Host header of each request
	lines []string // each request's method and target as it came, and what came through an h2c tunnel
	conns atomic.Int32
	gate  chan struct{}
}

func newMockVendor(t testing.TB) *mockVendor {
	m := &mockVendor{gate: make(chan struct{})}
	m.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.got = append(m.got, r.Header.Clone())
		m.hosts = append(m.hosts, r.Host)
		m.lines = append(m.lines, r.Method+" "+r.RequestURI)
		m.mu.Unlock()
		if r.Method == "TRACE" {
			// As a gateway that answers TRACE does: the request echoed.
			w.Header().Set("Content-Type", "message/http")
			r.Header.Write(w)
			return
		}
		switch r.URL.Path {
		case "/v1/stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: one\ndata: first\n\n")
			w.(http.Flusher).Flush()
			<-m.gate // the second event waits until the test saw the first
			io.WriteString(w, "event: two\ndata: second\n\n")
		case "/v1/early":
			// Answers before the request body has arrived, then echoes it:
			// the body and the answer are in flight at once.
			http.NewResponseController(w).EnableFullDuplex()
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: one\ndata: first\n\n")
			w.(http.Flusher).Flush()
			body, _ := io.ReadAll(r.Body)
			io.WriteString(w, "event: two\ndata: "+string(body)+"\n\n")
		case "/h2c":
			// As a server that speaks h2c does: it switches, and reads on.
			c, rw := switchTo(w, "h2c")
			if c == nil {
				return
			}
			defer c.Close()
			line, _ := rw.ReadString('\n')
			m.mu.Lock()
			m.lines = append(m.lines, "tunnel: "+strings.TrimSpace(line))
			m.mu.Unlock()
		case "/ws":
			c, rw := switchTo(w, "websocket")
			if c == nil {
				return
			}
			defer c.Close()
			if r.URL.Query().Get("hold") != "" {
				io.Copy(io.Discard, rw) // quiet until the proxy ends it
				return
			}
			line, _ := rw.ReadString('\n')
			rw.WriteString("echo " + line)
			rw.Flush()
		default:
			io.WriteString(w, "hello "+r.URL.Path)
		}
	}))
	m.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			m.conns.Add(1)
		}
	}
	m.srv.StartTLS()
	t.Cleanup(m.srv.Close)
	return m
}

// switchTo answers 101 Switching Protocols to proto and takes the
// connection over (nil if it cannot).
func switchTo(w http.ResponseWriter, proto string) (net.Conn, *bufio.ReadWriter) {
	w.Header().Set("Upgrade", proto)
	w.Header().Set("Connection", "Upgrade")
	w.WriteHeader(http.StatusSwitchingProtocols)
	c, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, nil
	}
	rw.Flush()
	return c, rw
}

// injectingProxy runs a proxy that puts testKey into x-api-key and
// Authorization for example.com:PORT (the mock), and tunnels other.test.
func injectingProxy(t *testing.T, m *mockVendor, limits ...Limits) (client *http.Client, sock string, log *lockedLog, placeholder string, hp string) {
	t.Helper()
	return injectingProxyAt(t, m, "", limits...)
}

// injectingProxyAt is injectingProxy with the rule scoped to path (a base
// URL's; "" for every path).
func injectingProxyAt(t *testing.T, m *mockVendor, path string, limits ...Limits) (client *http.Client, sock string, log *lockedLog, placeholder string, hp string) {
	t.Helper()
	_, port, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	hp = "example.com:" + port
	rule, err := ParseRule("ANTHROPIC_API_KEY=x-api-key,authorization@" + hp + path)
	if err != nil {
		t.Fatal(err)
	}
	session, proxy := Split([]Rule{rule}, []credvar.Var{{Name: "ANTHROPIC_API_KEY", Value: testKey}, {Name: "OTHER", Value: "v"}})
	placeholder = session[0].Value
	env := map[string]string{}
	for _, v := range proxy {
		env[v.Name] = v.Value
	}
	roots := x509.NewCertPool()
	roots.AddCert(m.srv.Certificate())
	in, err := NewInjector("s1", []Rule{rule}, nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, roots)
	if err != nil {
		t.Fatal(err)
	}
	al, _ := ParseAllow([]string{hp, "other.test:" + port, "127.0.0.1"})
	log = &lockedLog{}
	e := &Egress{Session: "s1", Allow: al, Log: log, Inject: in, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	if len(limits) > 0 {
		e.Limits = limits[0]
	}
	sock = t.TempDir() + "/proxy.sock"
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go e.Serve(l)
	sessionRoots := x509.NewCertPool()
	if !sessionRoots.AppendCertsFromPEM(in.CAPEM) {
		t.Fatal("CA PEM")
	}
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: &tls.Config{RootCAs: sessionRoots},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}, sock, log, placeholder, hp
}

// lockedLog is a proxy's log in a test: the proxy's goroutines write it
// while the test reads it, each under its lock (go test -race found
// TestInject reading it without).
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestInject (issue 15): the session holds a placeholder of the key's
// shape; the vendor gets the real key byte for byte in the rule's headers
// only; two requests share one connection to the vendor (keep-alive); an
// event stream arrives event by event; an upgrade passes; the journal
// records each request without a header's value.
func TestInject(t *testing.T) {
	m := newMockVendor(t)
	client, _, log, ph, hp := injectingProxy(t, m)
	if ph == testKey || !strings.HasPrefix(ph, "sk-ant-api03-") || len(ph) != len(testKey) || strings.Contains(ph, "REALKEY") {
		t.Fatalf("placeholder %q does not have the key's shape or holds some of it", ph)
	}
	base := "https://" + hp
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest("POST", base+"/v1/messages", strings.NewReader(`{"model":"x"}`))
		req.Header.Set("x-api-key", ph)
		req.Header.Set("Authorization", "Bearer "+ph)
		req.Header.Set("X-Not-In-Rule", ph)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "hello /v1/messages" {
			t.Fatalf("answer %d %q", resp.StatusCode, b)
		}
		// Go's transport puts a connection back in its pool just after the
		// body ended, in its own goroutine.
		time.Sleep(20 * time.Millisecond)
	}
	m.mu.Lock()
	got := m.got[0]
	m.mu.Unlock()
	if got.Get("X-Api-Key") != testKey || got.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("the vendor got x-api-key %q, authorization %q", got.Get("X-Api-Key"), got.Get("Authorization"))
	}
	if got.Get("X-Not-In-Rule") != ph {
		t.Errorf("a header the rule does not name was changed: %q", got.Get("X-Not-In-Rule"))
	}
	if n := m.conns.Load(); n != 1 {
		t.Errorf("%d connections to the vendor for two requests, want 1 (keep-alive)", n)
	}

	// Streaming: the first event arrives while the vendor holds the second.
	resp, err := client.Get(base + "/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() {
		var s string
		for {
			line, err := r.ReadString('\n')
			s += line
			if err != nil || strings.HasPrefix(line, "data: first") {
				first <- s
				return
			}
		}
	}()
	select {
	case s := <-first:
		if !strings.Contains(s, "data: first") {
			t.Fatalf("stream: %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not come through before the second was sent: the proxy buffers")
	}
	close(m.gate)
	rest, _ := io.ReadAll(r)
	resp.Body.Close()
	if !strings.Contains(string(rest), "data: second") {
		t.Errorf("rest of stream: %q", rest)
	}

	// An upgrade (WebSocket's handshake) passes, and bytes go both ways.
	req, _ := http.NewRequest("GET", base+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err = (&http.Client{Transport: client.Transport}).Do(req) // no Timeout: it wraps the body
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	rwc := resp.Body.(io.ReadWriteCloser)
	io.WriteString(rwc, "ping\n")
	echo, _ := bufio.NewReader(rwc).ReadString('\n')
	rwc.Close()
	if echo != "echo ping\n" {
		t.Errorf("upgraded connection: %q", echo)
	}

	time.Sleep(50 * time.Millisecond)
	journal := log.String()
	if strings.Contains(journal, testKey) || strings.Contains(journal, ph) {
		t.Errorf("the journal holds a header's value:\n%s", journal)
	}
	for _, want := range []string{"injected ANTHROPIC_API_KEY: POST " + hp + "/v1/messages: 200", "GET " + hp + "/v1/stream: 200"} {
		if !strings.Contains(journal, want) {
			t.Errorf("journal lacks %q:\n%s", want, journal)
		}
	}
}

// TestInjectFullDuplex: the proxy relays a request body and its answer
// at once. An answer's head going back must not make the proxy's server
// read the rest of the body and close it under the transport that is
// still sending it: that cut an event stream after its first event (in
// about 1 of 100 streamed requests) when the close raced the transport's
// last read of a whole body; here the body arrives only after the first
// event, so the old relay fails every time.
func TestInjectFullDuplex(t *testing.T) {
	m := newMockVendor(t)
	client, _, log, ph, hp := injectingProxy(t, m)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "https://"+hp+"/v1/early", pr)
	req.ContentLength = int64(len("the body"))
	req.Header.Set("x-api-key", ph)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := (&http.Client{Transport: client.Transport}).Do(req)
		got <- answer{resp, err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(5 * time.Second):
		pw.Close()
		t.Fatal("no answer's head before the request body was sent: the proxy holds the answer until the body ends")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	r := bufio.NewReader(a.resp.Body)
	first := make(chan string, 1)
	go func() {
		var s string
		for !strings.Contains(s, "data: first") {
			line, err := r.ReadString('\n')
			s += line
			if err != nil {
				break
			}
		}
		first <- s
	}()
	select {
	case s := <-first:
		if !strings.Contains(s, "data: first") {
			t.Fatalf("stream: %q", s)
		}
	case <-time.After(5 * time.Second):
		pw.Close()
		t.Fatal("the first event did not come back before the request body was sent")
	}
	io.WriteString(pw, "the body")
	pw.Close()
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "data: the body") {
		t.Errorf("the rest of the stream: %q, %v\n%s", rest, err, log.String())
	}
}

// TestInjectOtherHost: the placeholder sent to another allowed host goes
// through a plain tunnel, untouched: that host gets the placeholder, never
// the key, and the proxy does not read the tunnel (the session's TLS is
// with the host itself, not the session's CA).
// TestInjectHostHeader: a request with the key put in goes to the rule's
// host with that host in its Host header, whatever the session wrote there:
// a front end serving many sites (a CDN) delivers by Host, and a session
// that named another site there had the key delivered to it (domain
// fronting).
func TestInjectHostHeader(t *testing.T) {
	m := newMockVendor(t)
	client, _, _, ph, hp := injectingProxy(t, m)
	req, _ := http.NewRequest("GET", "https://"+hp+"/v1/models", nil)
	req.Host = "attacker.example.net"
	req.Header.Set("x-api-key", ph)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.hosts) != 1 || m.hosts[0] != hp || m.got[0].Get("x-api-key") != testKey {
		t.Errorf("the vendor got Host %v (want %s) with x-api-key %q", m.hosts, hp, m.got[0].Get("x-api-key"))
	}
}

func TestInjectOtherHost(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, _ := injectingProxy(t, m)
	_, port, _ := net.SplitHostPort(m.srv.Listener.Addr().String())
	vendorRoots := x509.NewCertPool()
	vendorRoots.AddCert(m.srv.Certificate())
	// The mock's certificate names example.com; other.test reaches it
	// through a tunnel, so the session checks it against the mock's CA
	// for example.com, as a real other host's own. The TLS names
	// other.test: the tunnel's host (a tunnel carries no other, helloGate).
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid:3128"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: &tls.Config{ServerName: "other.test", InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: vendorRoots, DNSName: "example.com"})
			return err
		}},
	}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequest("POST", "https://other.test:"+port+"/exfil", nil)
	req.Header.Set("x-api-key", ph)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m.mu.Lock()
	got := m.got[len(m.got)-1]
	m.mu.Unlock()
	if got.Get("X-Api-Key") != ph {
		t.Errorf("the other host got %q, want the placeholder", got.Get("X-Api-Key"))
	}
}

// TestPlaceholder: a placeholder keeps the vendor's prefix and the key's
// length (at least 32 characters after the prefix), and shares nothing else
// with the key; two sessions get two different ones.
func TestPlaceholder(t *testing.T) {
	for key, prefix := range map[string]string{
		testKey: "sk-ant-api03-", "sk-ant-oat01-" + strings.Repeat("t", 90): "sk-ant-oat01-", "sk-proj-" + strings.Repeat("p", 150): "sk-proj-",
		"sk-" + strings.Repeat("o", 48): "sk-", "AIza" + strings.Repeat("g", 35): "AIza", "plain-token": "",
	} {
		ph := Placeholder(key)
		if !strings.HasPrefix(ph, prefix) || len(ph) != len(prefix)+max(len(key)-len(prefix), 32) || ph == key || strings.Contains(ph, key[len(prefix):]) {
			t.Errorf("Placeholder(%.16s...) = %q", key, ph)
		}
		if Placeholder(key) == ph {
			t.Errorf("two placeholders of %.16s... are equal", key)
		}
	}
}

// TestInjectUpgradeIdle: an upgraded connection (WebSocket) through an
// injection host, quiet either way for IdleTimeout, is closed, as a quiet
// tunnel is.
func TestInjectUpgradeIdle(t *testing.T) {
	m := newMockVendor(t)
	client, _, _, _, hp := injectingProxy(t, m, Limits{IdleTimeout: 300 * time.Millisecond})
	req, _ := http.NewRequest("GET", "https://"+hp+"/ws?hold=1", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := (&http.Client{Transport: client.Transport}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %d", resp.StatusCode)
	}
	done := make(chan error, 1)
	go func() {
		_, err := io.ReadAll(resp.Body)
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a quiet upgraded connection stays open")
	}
}
