package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestNormalizeHost(t *testing.T) {
	for in, want := range map[string]string{
		"api.anthropic.com": "api.anthropic.com:443", "Example.COM:8443": "example.com:8443", "example.com.": "example.com:443",
		"1.2.3.4": "", "[::1]:443": "", "bad_name": "", "a..b": "", "-a.com": "", "example.com:0": "", "example.com:99999": "",
		"example.123": "", "": "",
	} {
		got, err := NormalizeHost(in)
		if (err != nil) != (want == "") || got != want {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	a, err := ParseAllow([]string{"example.com", "10.0.0.5", "192.168.0.0/16", "[::1]"})
	if err != nil || !a.Hosts["example.com:443"] || len(a.Addrs) != 3 {
		t.Fatalf("ParseAllow: %+v %v", a, err)
	}
}

// egressTest runs an Egress on a local socket with a fake resolver, and a
// loopback "internet" server that says hello.
func egressTest(t *testing.T, allow []string, names map[string]string) (dial func() net.Conn, serverPort string) {
	t.Helper()
	port := serveLoopback(t, func(c net.Conn) {
		io.WriteString(c, "hello from the test host\n")
		c.Close()
	})
	for i, a := range allow {
		allow[i] = strings.ReplaceAll(a, "PORT", port)
	}
	al, err := ParseAllow(allow)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	e := &Egress{Session: "s1", Allow: al, Log: &log, Lookup: func(_ context.Context, h string) ([]netip.Addr, error) {
		if ip, ok := names[h]; ok {
			return []netip.Addr{netip.MustParseAddr(ip)}, nil
		}
		return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
	}}
	l, err := net.Listen("unix", t.TempDir()+"/proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go e.Serve(l)
	return func() net.Conn {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, port
}

func connect(t *testing.T, c net.Conn, target string) (status, rest string) {
	t.Helper()
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	b, _ := io.ReadAll(bufio.NewReader(c))
	s := string(b)
	line, rest, _ := strings.Cut(s, "\r\n")
	return line, rest
}

// TestEgress: an allowed name reaches its host; a name off the list, an IP
// literal, a name resolving to a loopback address that the list does not
// name, and plain HTTP are refused with 403.
func TestEgress(t *testing.T) {
	dial, port := egressTest(t, []string{"allowed.test:PORT", "private.test:PORT", "127.0.0.1"},
		map[string]string{"allowed.test": "127.0.0.1", "private.test": "10.1.2.3", "other.test": "127.0.0.1"})
	// allowed.test resolves to loopback, which the list names explicitly.
	st, rest := connect(t, dial(), "allowed.test:"+port)
	if !strings.Contains(st, " 200 ") || !strings.Contains(rest, "hello from the test host") {
		t.Errorf("allowed: %q %q", st, rest)
	}
	for target, why := range map[string]string{
		"other.test:" + port:   "not on the session's allowlist",
		"allowed.test:1":       "not on the session's allowlist",
		"127.0.0.1:" + port:    "is an IP address",
		"private.test:" + port: "a private address",
		"missing.test:443":     "not on the session's allowlist",
	} {
		st, rest := connect(t, dial(), target)
		if !strings.Contains(st, " 403 ") || !strings.Contains(rest, why) {
			t.Errorf("%s: %q %q, want 403 saying %q", target, st, rest, why)
		}
	}
	c := dial()
	io.WriteString(c, "GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.Contains(string(b), " 403 ") || !strings.Contains(string(b), "plain HTTP") {
		t.Errorf("plain HTTP: %q", b)
	}
	// Without the explicit address, a name resolving to loopback is refused.
	dial2, port2 := egressTest(t, []string{"allowed.test:PORT"}, map[string]string{"allowed.test": "127.0.0.1"})
	if st, rest := connect(t, dial2(), "allowed.test:"+port2); !strings.Contains(st, " 403 ") || !strings.Contains(rest, "loopback") {
		t.Errorf("rebinding to loopback: %q %q", st, rest)
	}
}

// TestArgvRoundTrip: what the unit's command line says is what the proxy
// reads, including values that look like options.
func TestArgvRoundTrip(t *testing.T) {
	c := Config{Session: "s1", Socket: "/run/user/1/mosaic/egress/s1/proxy.sock", Allow: []string{"api.anthropic.com:443", "--session", "10.0.0.0/8"},
		Inject: []Rule{{Var: "ANTHROPIC_API_KEY", Headers: []string{"X-Api-Key", "Authorization"}, Hosts: []string{"api.anthropic.com:443", "proxy.example.com:8443"}}},
		Git:    []GitLend{{Host: "git.example:8443", Repo: "me/repo", Ops: []string{"fetch", "push"}}, {Host: "github.com:443", Repo: "o/r", Ops: []string{"pr"}}},
		Drop:   "/run/user/1/mosaic/credentials/s1-egress/env"}
	argv := c.Argv("/usr/bin/mosaic")
	if argv[0] != "/usr/bin/mosaic" || argv[1] != Stage {
		t.Fatalf("argv %q", argv)
	}
	got, err := ParseArgs(argv[2:])
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, c)
	}
	for _, bad := range [][]string{nil, {"--socket"}, {"--socket", "/s", "--bogus", "x"}, {"--socket", "/s", "extra"}, {"--socket", "/s", "--inject", "A=x-api-key"}, {"--socket", "/s", "--inject", "A=x y@h.com"}, {"--socket", "/s", "--lend-git", "https://h/me/repo=delete"}} {
		if _, err := ParseArgs(bad); err == nil {
			t.Errorf("ParseArgs(%q) accepted", bad)
		}
	}
}

// TestRefusalNamesTheGrant: a refusal's reason phrase (all that Go's
// http.Transport prints of a CONNECT's answer, and what curl -v shows) and
// its body name the session and the exact `mosaic allow` line, the port
// only when it is not 443; plain HTTP's refusal names the HTTPS grant.
// Checked against the phrase left "Forbidden": this test failed.
func TestRefusalNamesTheGrant(t *testing.T) {
	dial, _ := egressTest(t, []string{"allowed.test"}, map[string]string{"other.test": "127.0.0.1"})
	tr := &http.Transport{
		Proxy:       http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.invalid"}),
		DialContext: func(context.Context, string, string) (net.Conn, error) { return dial(), nil },
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	for _, tc := range []struct{ url, target, line string }{
		{"https://other.test/", "other.test:443", "mosaic allow s1 other.test)"},
		{"https://other.test:8443/", "other.test:8443", "mosaic allow s1 other.test:8443)"},
	} {
		target, line := tc.url, tc.line
		_, err := client.Get(target)
		if err == nil || !strings.Contains(err.Error(), "session s1") || !strings.Contains(err.Error(), line) {
			t.Errorf("%s: Go's client says %v, want the session and %q", target, err, line)
		}
		st, rest := connect(t, dial(), tc.target)
		if !strings.HasPrefix(st, "HTTP/1.1 403 Forbidden: mosaic egress: session s1:") || !strings.Contains(st, line) || !strings.Contains(rest, line) {
			t.Errorf("%s: status %q, body %q; want both to say %q", target, st, rest, line)
		}
	}
	resp, err := client.Get("http://other.test/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(resp.Status, "mosaic allow s1 other.test)") || !strings.Contains(string(body), "mosaic allow s1 other.test)") {
		t.Errorf("plain HTTP: %q %q, want the HTTPS grant", resp.Status, body)
	}
}

// TestRecordIsBounded: the record keeps the latest MaxRecorded refusals
// and counts the others, keeps every grant made (one taken back too), and
// reads back as written.
func TestRecordIsBounded(t *testing.T) {
	e := &Egress{Session: "s1", RecordDir: t.TempDir()}
	e.start()
	base := time.Now()
	n := 0
	e.live.now = func() time.Time { n++; return base.Add(time.Duration(n) * time.Second) }
	for i := 0; i < MaxRecorded+5; i++ {
		e.refused(fmt.Sprintf("h%d.test:443", i), RefusedNotListed, "no")
	}
	e.refused("h0.test:443", RefusedNotListed, "no") // now the latest
	if _, err := e.grant([]string{"a.test"}, 0, "me"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.deny([]string{"a.test"}, "me"); err != nil {
		t.Fatal(err)
	}
	e.writeRecord(true)
	r, ok := ReadRecord(e.RecordDir)
	if !ok || !r.Final || len(r.Refused) != MaxRecorded || r.Refused[0].Target != "h0.test:443" || r.Refused[0].Count != 2 || r.RefusedOther != 5 {
		t.Fatalf("record: ok %v final %v, %d refusals (first %+v), %d other", ok, r.Final, len(r.Refused), r.Refused[0], r.RefusedOther)
	}
	if len(r.Granted) != 1 || r.Granted[0].Entry != "a.test:443" || len(r.Grants) != 0 {
		t.Errorf("grants: made %+v, running %+v", r.Granted, r.Grants)
	}
}
