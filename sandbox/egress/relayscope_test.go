package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawInjected sends one raw request line (method and path as written, no
// client's cleaning) with the placeholder in x-api-key through the proxy's
// intercepted TLS to hp, and returns the answer's status and body.
func rawInjected(t *testing.T, sock, hp, ph, method, path string) (int, string) {
	t.Helper()
	tc := injectedConn(t, sock, hp)
	defer tc.Close()
	io.WriteString(tc, method+" "+path+" HTTP/1.1\r\nHost: "+hp+"\r\nx-api-key: "+ph+"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// injectedConn opens a CONNECT to hp through the proxy at sock and the
// session's side of the proxy's TLS in it.
func injectedConn(t *testing.T, sock, hp string) *tls.Conn {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		c.Close()
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	// The session's trust of the proxy's CA is not what is tested here.
	return tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{InsecureSkipVerify: true, ServerName: "example.com"})
}

// lastKey is the x-api-key the mock vendor got last.
func (m *mockVendor) lastKey() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.got) == 0 {
		return ""
	}
	return m.got[len(m.got)-1].Get("X-Api-Key")
}

// TestInjectMethods (issue 31, break 7): a host that answers TRACE echoes
// the request, the key the proxy put in it with it: shown with TRACE among
// the relayed methods (the weakened relay). The relay sends only the
// methods an API uses; TRACE, TRACK, CONNECT inside the tunnel and WebDAV's
// are refused before anything is sent, and the journal says so.
func TestInjectMethods(t *testing.T) {
	m := newMockVendor(t)
	_, sock, log, ph, hp := injectingProxy(t, m)
	apiMethods["TRACE"] = true
	_, body := rawInjected(t, sock, hp, ph, "TRACE", "/v1/messages")
	delete(apiMethods, "TRACE")
	if !strings.Contains(body, testKey) {
		t.Fatalf("TRACE relayed did not echo the key (%q), so this test proves nothing", body)
	}
	for _, method := range []string{"TRACE", "TRACK", "CONNECT", "PROPFIND", "DEBUG", "OPTIONS"} {
		path := "/v1/messages"
		if method == "CONNECT" {
			path = "other.test:443"
		}
		before := len(m.got)
		code, body := rawInjected(t, sock, hp, ph, method, path)
		if strings.Contains(body, testKey) || code != http.StatusMethodNotAllowed || len(m.got) != before {
			t.Errorf("%s: %d %q, the vendor got %d requests more", method, code, body, len(m.got)-before)
		}
	}
	for _, method := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
		if code, _ := rawInjected(t, sock, hp, ph, method, "/v1/messages"); code != 200 || m.lastKey() != testKey {
			t.Errorf("%s: %d, the vendor got %q", method, code, m.lastKey())
		}
	}
	if !strings.Contains(log.String(), "refused TRACE") {
		t.Errorf("the journal does not say TRACE was refused:\n%s", log.String())
	}
}

// TestInjectPathScope (issue 31, break 8): with a base URL
// https://gw/tenant-a the key went to https://gw/tenant-b too (shown with a
// rule for the host alone). A rule scoped to /tenant-a puts it only into
// requests under that path; elsewhere on the host the placeholder goes as
// sent; a path that could mean another to the host (dot segments, encoded
// dots, slashes and backslashes, double encoding, a path parameter) is
// refused.
func TestInjectPathScope(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, hp := injectingProxy(t, m)
	if rawInjected(t, sock, hp, ph, "POST", "/tenant-b/v1/messages"); m.lastKey() != testKey {
		t.Fatal("a host-wide rule did not put the key into tenant-b's request, so this test proves nothing")
	}
	m = newMockVendor(t)
	_, sock, log, ph, hp := injectingProxyAt(t, m, "/tenant-a")
	for path, want := range map[string]string{
		"/tenant-a":             testKey,
		"/tenant-a/v1/messages": testKey,
		"/tenant-b/v1/messages": ph,
		"/tenant-ab/v1":         ph,
		"/":                     ph,
	} {
		if code, _ := rawInjected(t, sock, hp, ph, "POST", path); code != 200 || m.lastKey() != want {
			t.Errorf("%s: %d, the vendor got %.20q, want %.20q", path, code, m.lastKey(), want)
		}
	}
	for _, path := range []string{"/tenant-a/../tenant-b/v1", "/tenant-a/./x", "/tenant-a/%2e%2e/tenant-b", "/tenant-a/%2E%2e/tenant-b",
		"/tenant-a%2f..%2ftenant-b", "/tenant-a/..%5ctenant-b", "/tenant-a/%252e%252e/tenant-b", "/tenant-a/..;/tenant-b", "/tenant-a\\..\\tenant-b"} {
		before := len(m.got)
		code, body := rawInjected(t, sock, hp, ph, "POST", path)
		if code != http.StatusBadRequest || len(m.got) != before || strings.Contains(body, testKey) {
			t.Errorf("%s: %d %q, the vendor got %d requests more", path, code, body, len(m.got)-before)
		}
	}
	if strings.Contains(log.String(), testKey) {
		t.Error("the journal holds the key")
	}
}

// TestInjectOtherHostInside (issue 31, held): inside an injected
// connection, a request in absolute form naming another host, and a
// pipelined one whose Host is another, both go to the rule's host, with
// its name in Host: the key never reaches another host.
func TestInjectOtherHostInside(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, hp := injectingProxy(t, m)
	_, port, _ := net.SplitHostPort(hp)
	tc := injectedConn(t, sock, hp)
	defer tc.Close()
	other := "other.test:" + port
	io.WriteString(tc, "GET https://"+other+"/absolute HTTP/1.1\r\nHost: "+other+"\r\nx-api-key: "+ph+"\r\n\r\n"+
		"GET /pipelined HTTP/1.1\r\nHost: "+other+"\r\nx-api-key: "+ph+"\r\nConnection: close\r\n\r\n")
	tr := bufio.NewReader(tc)
	for i := 0; i < 2; i++ {
		resp, err := http.ReadResponse(tr, nil)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.hosts) != 2 {
		t.Fatalf("the vendor got %d requests, want 2", len(m.hosts))
	}
	for i, h := range m.hosts {
		if h != hp {
			t.Errorf("request %d reached Host %q with x-api-key %.12q, want only %s", i, h, m.got[i].Get("X-Api-Key"), hp)
		}
	}
}

// sentLines are the requests (method and target) the mock vendor got, and
// what came through an h2c tunnel.
func (m *mockVendor) sentLines() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.lines...)
}

// TestInjectPathEncodings (issue 31): under a base URL's path, every
// spelling that one host may decode into another path is refused before
// anything is sent (double encoding, encoded separators and dots in either
// case, overlong UTF-8, a NUL, a path parameter, an encoded unreserved
// character, a fragment in the request line, dot segments in the absolute
// form), and what is relayed is exactly what was checked: the vendor gets
// the request target byte for byte as sent (the absolute form's path).
// Shown first: with the old check, on the decoded path, an overlong UTF-8
// "..", in either length, went with the key to a gateway that decodes it
// leniently and so serves tenant-b.
func TestInjectPathEncodings(t *testing.T) {
	m := newMockVendor(t)
	_, sock, log, ph, hp := injectingProxyAt(t, m, "/tenant-a")
	refused := []string{
		"/tenant-a/%252e%252e/tenant-b", "/tenant-a/%252E%252E/tenant-b", "/tenant-a%2F..%2Ftenant-b", "/tenant-a%2f..%2ftenant-b",
		"/tenant-a/..%5Ctenant-b", "/tenant-a\\..\\tenant-b", "/tenant-a/%c0%ae%c0%ae/tenant-b", "/tenant-a/%C0%AE%C0%AE/tenant-b",
		"/tenant-a/%e0%80%ae%e0%80%ae/tenant-b", "/tenant-a/v1%00", "/tenant-a/v1%00/../../tenant-b", "/tenant-a/..;/tenant-b",
		"/tenant-a;x=1/v1", "/tenant-a/%2e%2e/tenant-b", "/tenant-a/%2E%2E/tenant-b", "/tenant-%61/v1", "/tenant-a/v1#/../../tenant-b",
		"/tenant-a//../tenant-b", "https://" + hp + "/tenant-a/../tenant-b", "https://" + hp + "/tenant-a/%2e%2e/tenant-b",
		"/tenant-a/%", "/tenant-a/%zz", "/tenant-a/\xc3\xa9",
	}
	// Shown first with the check before this round (on the decoded path):
	// a gateway that decodes leniently (overlong UTF-8 to ".", a NUL ending
	// the path) and then resolves dot segments serves tenant-b with the key.
	pathIsPlain = func(raw string) bool {
		p, err := url.PathUnescape(raw)
		if err != nil || !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "\\%") {
			return false
		}
		for _, enc := range []string{"%2e", "%2f", "%5c", "%25", "\\"} {
			if strings.Contains(strings.ToLower(raw), enc) {
				return false
			}
		}
		for _, seg := range strings.Split(p, "/") {
			if seg, _, _ = strings.Cut(seg, ";"); seg == "." || seg == ".." {
				return false
			}
		}
		return true
	}
	for _, target := range []string{"/tenant-a/%c0%ae%c0%ae/tenant-b/v1", "/tenant-a/%e0%80%ae%e0%80%ae/tenant-b/v1"} {
		rawInjected(t, sock, hp, ph, "POST", target)
		if got := lenient(m.sentLines()[len(m.sentLines())-1]); got != "/tenant-b/v1" || m.lastKey() != testKey {
			t.Fatalf("with the old check, %s reached a lenient gateway as %q with %.12q: this test shows nothing of it", target, got, m.lastKey())
		}
	}
	pathIsPlain = plainPath
	for _, target := range refused {
		before := len(m.sentLines())
		code, body := rawInjected(t, sock, hp, ph, "POST", target)
		if code != http.StatusBadRequest || len(m.sentLines()) != before || strings.Contains(body, testKey) {
			t.Errorf("%q: %d %q, the vendor got %v", target, code, body, m.sentLines()[before:])
		}
	}
	for target, want := range map[string]struct{ sent, key string }{
		"/tenant-a/v1/messages":                {"/tenant-a/v1/messages", testKey},
		"/tenant-a//v1/messages":               {"/tenant-a//v1/messages", testKey},
		"/tenant-a/v1/files/a%20b":             {"/tenant-a/v1/files/a%20b", testKey},
		"/tenant-a/v1/x%7b%7D":                 {"/tenant-a/v1/x%7b%7D", testKey},
		"/tenant-a/v1/messages?x=/../tenant-b": {"/tenant-a/v1/messages?x=/../tenant-b", testKey},
		"https://" + hp + "/tenant-a/v1":       {"/tenant-a/v1", testKey},
		"https://" + hp + "/tenant-b/v1":       {"/tenant-b/v1", ph},
		"//tenant-a/v1":                        {"//tenant-a/v1", ph},
		"/tenant-b/v1":                         {"/tenant-b/v1", ph},
	} {
		code, _ := rawInjected(t, sock, hp, ph, "POST", target)
		lines := m.sentLines()
		if code != 200 || len(lines) == 0 || lines[len(lines)-1] != "POST "+want.sent || m.lastKey() != want.key {
			t.Errorf("%q: %d, the vendor got %v with %.20q, want POST %s with %.20q", target, code, lines[max(len(lines)-1, 0):], m.lastKey(), want.sent, want.key)
		}
	}
	if strings.Contains(log.String(), testKey) {
		t.Error("the journal holds the key")
	}
}

// lenient is the path a gateway that decodes leniently serves for the
// request line l ("METHOD TARGET"): overlong UTF-8 encodings of "." taken
// for ".", dot segments then resolved.
func lenient(l string) string {
	_, target, _ := strings.Cut(l, " ")
	for _, dot := range []string{"%c0%ae", "%e0%80%ae"} {
		target = strings.ReplaceAll(strings.ToLower(target), dot, ".")
	}
	return path.Clean(target)
}

// TestInjectMethodSpellings (issue 31): methods are case-sensitive, and the
// relay sends only the API's, as spelled: lower- and mixed-case spellings,
// extension methods and HTTP/2's preface are refused, nothing sent.
func TestInjectMethodSpellings(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, hp := injectingProxy(t, m)
	for _, method := range []string{"get", "post", "Post", "gEt", "trace", "Trace", "FOO", "M-SEARCH", "PURGE", "PRI"} {
		before := len(m.sentLines())
		code, body := rawInjected(t, sock, hp, ph, method, "/v1/messages")
		if code/100 != 4 || len(m.sentLines()) != before || strings.Contains(body, testKey) {
			t.Errorf("%s: %d %q, the vendor got %v", method, code, body, m.sentLines()[before:])
		}
	}
	tc := injectedConn(t, sock, hp)
	defer tc.Close()
	io.WriteString(tc, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	io.ReadAll(tc)
	if l := m.sentLines(); len(l) != 0 {
		t.Errorf("HTTP/2's preface reached the vendor: %v", l)
	}
	// HTTP/2 (its :authority beside Host) is not spoken at all: a client
	// that offers only h2 gets no TLS.
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "CONNECT "+hp+" HTTP/1.1\r\nHost: "+hp+"\r\n\r\n")
	br := bufio.NewReader(c)
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	h2 := tls.Client(&bufferedConn{Conn: c, r: br}, &tls.Config{InsecureSkipVerify: true, ServerName: "example.com", NextProtos: []string{"h2"}})
	if err := h2.Handshake(); err == nil && h2.ConnectionState().NegotiatedProtocol == "h2" {
		t.Error("the relay negotiated h2")
	}
}

// TestInjectUpgrades (issue 31): after an upgrade the relay copies bytes it
// never reads. Shown with h2c among the relayed upgrades: a request in
// the tunnel (a TRACE) reaches the vendor unchecked. An upgrade to
// anything but WebSocket (h2c with HTTP2-Settings, two Upgrade headers, a
// WebSocket upgrade on a POST) is refused, nothing sent; a GET's WebSocket
// upgrade still goes through.
func TestInjectUpgrades(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, hp := injectingProxy(t, m)
	h2c := "GET /h2c HTTP/1.1\r\nHost: " + hp + "\r\nx-api-key: " + ph + "\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n"
	upgrade := func(req string) (int, []string) {
		before := len(m.sentLines())
		tc := injectedConn(t, sock, hp)
		defer tc.Close()
		io.WriteString(tc, req)
		br := bufio.NewReader(tc)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols && strings.HasPrefix(req, "GET /h2c") {
			io.WriteString(tc, "TRACE /v1/anything HTTP/1.1\r\n")
			for end := time.Now().Add(5 * time.Second); len(m.sentLines()) < before+2 && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
		}
		return resp.StatusCode, m.sentLines()[before:]
	}
	relayedUpgrades["h2c"] = true
	code, got := upgrade(h2c)
	delete(relayedUpgrades, "h2c")
	if code != http.StatusSwitchingProtocols || len(got) != 2 || got[1] != "tunnel: TRACE /v1/anything HTTP/1.1" {
		t.Fatalf("with h2c relayed: %d, the vendor got %v: this test cannot show the tunnel", code, got)
	}
	for _, req := range []string{h2c,
		"GET /h2c HTTP/1.1\r\nHost: " + hp + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nUpgrade: h2c\r\n\r\n",
		"GET /h2c HTTP/1.1\r\nHost: " + hp + "\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\n\r\n",
		"POST /ws HTTP/1.1\r\nHost: " + hp + "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 0\r\n\r\n",
	} {
		if code, got := upgrade(req); code != http.StatusBadRequest || len(got) != 0 {
			t.Errorf("%q: %d, the vendor got %v", req, code, got)
		}
	}
	if code, got := upgrade("GET /ws HTTP/1.1\r\nHost: " + hp + "\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"); code != http.StatusSwitchingProtocols || len(got) != 1 {
		t.Errorf("a WebSocket upgrade: %d, the vendor got %v", code, got)
	}
}

// TestInjectSmuggling (issue 31): a request whose framing is ambiguous
// (Content-Length with Transfer-Encoding, two Content-Lengths, an
// HTTP/1.0 keep-alive whose body holds another request, an unknown
// transfer coding) never gets a request past the relay's checks: the
// relay reads each request itself and writes it anew, so the vendor gets
// only requests the relay checked (never the TRACE hidden in a body), and
// the ambiguous ones are refused by the server or sent with one framing.
func TestInjectSmuggling(t *testing.T) {
	m := newMockVendor(t)
	_, sock, _, ph, hp := injectingProxy(t, m)
	trace := "TRACE /v1/hidden HTTP/1.1\r\nHost: " + hp + "\r\nx-api-key: " + ph + "\r\n\r\n"
	head := "POST /v1/messages HTTP/1.1\r\nHost: " + hp + "\r\nx-api-key: " + ph + "\r\n"
	for _, req := range []string{
		head + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + trace,
		head + "Transfer-Encoding: chunked\r\nContent-Length: " + strconv.Itoa(5+len(trace)) + "\r\n\r\n0\r\n\r\n" + trace,
		head + "Content-Length: 0\r\nContent-Length: " + strconv.Itoa(len(trace)) + "\r\n\r\n" + trace,
		head + "Content-Length: 0, " + strconv.Itoa(len(trace)) + "\r\n\r\n" + trace,
		head + "Transfer-Encoding: xchunked\r\n\r\n" + trace,
		head + "Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n" + trace,
		"POST /v1/messages HTTP/1.0\r\nHost: " + hp + "\r\nConnection: keep-alive\r\nx-api-key: " + ph + "\r\nContent-Length: " + strconv.Itoa(len(trace)) + "\r\n\r\n" + trace,
	} {
		before := len(m.sentLines())
		tc := injectedConn(t, sock, hp)
		// A last request closes the connection: every answer comes back.
		io.WriteString(tc, req+"GET /v1/end HTTP/1.1\r\nHost: "+hp+"\r\nConnection: close\r\n\r\n")
		answers, _ := io.ReadAll(tc)
		tc.Close()
		for _, l := range m.sentLines()[before:] {
			if l != "POST /v1/messages" && l != "GET /v1/end" {
				t.Errorf("%q: the vendor got %q (answers %.80q)", req, l, answers)
			}
		}
		if strings.Contains(string(answers), testKey) {
			t.Errorf("%q: the key came back", req)
		}
	}
}
