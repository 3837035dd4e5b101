package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Host loopback services on purpose (issue 16): a local model server
// (ollama, vLLM, LM Studio) or gateway listens on the host's loopback,
// which a session's own network namespace cannot see. An allowlist entry
// localhost:PORT, 127.0.0.1:PORT or [::1]:PORT names that port of the
// host's loopback: the proxy, which runs in the host's network, opens
// tunnels to it, and relays plain HTTP to it, and to nothing else.

// parseLocal reads a loopback entry; ok is false for anything else.
func parseLocal(e string) (port int, ok bool, err error) {
	host, p, splitErr := net.SplitHostPort(strings.ToLower(e))
	if splitErr != nil {
		if l := strings.ToLower(strings.Trim(e, "[]")); l == "localhost" {
			return 0, true, fmt.Errorf("%q: name the port of the host's loopback service, e.g. localhost:11434", e)
		}
		return 0, false, nil
	}
	if host != "localhost" && host != "127.0.0.1" && host != "::1" {
		return 0, false, nil
	}
	n, convErr := strconv.Atoi(p)
	if convErr != nil || n < 1 || n > 65535 {
		return 0, true, fmt.Errorf("%q: the port must be a number from 1 to 65535", e)
	}
	return n, true, nil
}

// localStrings lists the loopback ports as entries.
func (a Allow) localStrings() []string {
	var out []string
	for p := range a.Local {
		out = append(out, "localhost:"+strconv.Itoa(p))
	}
	sort.Strings(out)
	return out
}

// HasLocal reports whether the list names a port of the host's loopback.
func HasLocal(entries []string) bool {
	for _, e := range entries {
		if _, ok, err := parseLocal(e); ok && err == nil {
			return true
		}
	}
	return false
}

// localTarget reports the loopback port target (HOST:PORT as a client
// sent it) stands for, if the list allows it.
func (e *Egress) localTarget(target string) (int, bool) {
	port, ok, err := parseLocal(target)
	if !ok || err != nil || !e.Allow.Local[port] {
		return 0, false
	}
	return port, true
}

// dialLocal connects to port on the host's loopback, IPv4 first.
func (e *Egress) dialLocal(port int) (net.Conn, string) {
	var reasons []string
	for _, ip := range []string{"127.0.0.1", "::1"} {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), 10*time.Second)
		if err == nil {
			return c, ""
		}
		reasons = append(reasons, err.Error())
	}
	return nil, "the host's loopback port " + strconv.Itoa(port) + ": " + strings.Join(reasons, "; ")
}

// relayPlain answers a plain HTTP request (a proxy request in absolute
// form) to an allowed loopback port: it sends that one request there with
// Connection: close and copies the answer back, streamed, then closes. One
// request per connection, so a client cannot reuse the connection for a
// request to another host. A port an injection rule names gets the key in
// the rule's headers, as over TLS (inject.go). It reports false, having written nothing, when
// the request is not for an allowed loopback port.
func (e *Egress) relayPlain(c net.Conn, req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	target := req.URL.Host
	if req.URL.Port() == "" {
		target = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	port, ok := e.localTarget(target)
	if !ok {
		return false
	}
	hp, hpErr := NormalizeHost(target)
	if hpErr == nil && e.Inject.covers(hp) {
		if status, why := e.Inject.refusal(req, hp); why != "" {
			e.logf("refused %s %s: %s", printable(req.Method), printable(req.URL.Redacted()), why)
			refuse(c, status, "mosaic egress: refused: "+why)
			return true
		}
	}
	remote, why := e.dialLocal(port)
	if remote == nil {
		e.logf("refused %s %s: %s", printable(req.Method), printable(req.URL.Redacted()), why)
		refuse(c, http.StatusBadGateway, "mosaic egress: "+why)
		return true
	}
	defer remote.Close()
	req.Close = true
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	// A gateway on the host's loopback named by a plain http:// base URL
	// gets the key as an https:// one does: the request never leaves the
	// host, and the session holds only the placeholder.
	what := ""
	if hpErr == nil && e.Inject.covers(hp) {
		what = ", passed as sent (no placeholder in the rule's headers)"
		if used := e.Inject.put(req.Header, hp, req.URL); len(used) > 0 {
			what = ", injected " + strings.Join(dedupe(used), ", ")
		}
	}
	e.logf("plain HTTP %s %s to the host's loopback port %d%s", printable(req.Method), printable(req.URL.Redacted()), port, what)
	w := bufio.NewWriter(remote)
	if err := req.Write(w); err != nil || w.Flush() != nil {
		return true
	}
	n, _ := io.Copy(c, remote)
	e.logf("plain HTTP to the host's loopback port %d done (%d bytes in)", port, n)
	return true
}
