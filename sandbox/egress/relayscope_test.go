package egress

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
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
