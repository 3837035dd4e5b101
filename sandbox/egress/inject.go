package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mosaic/internal/journald"
)

// Injector holds what the proxy needs to put credentials into requests:
// the rules with their values, and the session's CA, whose key exists only
// in this process's memory.
type Injector struct {
	byHost map[string][]injection // "host:port" -> what goes there
	git    map[string][]gitLent   // "host:port" -> the git credentials lent there
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAPEM  []byte // the CA certificate, for the session to trust
	// ExtraPEM are the session's --ca-file certificates, which its
	// runtimes trust beside the CA (WriteCA puts them in the same files).
	ExtraPEM []byte
	roots    *x509.CertPool

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
	// nodeIDs are the GraphQL node ids of repositories lent for pr, by
	// lowercased "owner/repo", once asked of GitHub (repoNodeID).
	nodeIDs map[string]string
}

type injection struct {
	rule        Rule
	key         string
	placeholder string
	prefix      string // the path it is scoped to, "" for all
}

// intercept serves one CONNECT to an injection host: the proxy answers
// the session's TLS with a leaf of the session's CA, reads its HTTP/1.1
// requests, and relays each to the real host over TLS checked against the
// real roots, with the credential put into the rule's headers. once says
// the CONNECT was let through once (mosaic allow --once): hp is on no
// list, and its requests carry that to the proxy's dial (onceKey).
func (e *Egress) intercept(c net.Conn, br *bufio.Reader, hp string, once bool) {
	host, _, _ := net.SplitHostPort(hp)
	_ = c.SetWriteDeadline(time.Now().Add(e.Limits.HeadTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	_ = c.SetWriteDeadline(time.Time{})
	cert, err := e.Inject.leaf(host)
	if err != nil {
		e.logf("refused CONNECT %s: cannot make its certificate: %v", hp, err)
		return
	}
	tc := tls.Server(&bufferedConn{Conn: c, r: br}, &tls.Config{
		Certificates: []tls.Certificate{*cert},
		// Only HTTP/1.1 is served (and relayed): WebSocket upgrades and
		// server-sent events work over it, and it is what every agent
		// falls back to.
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
	})
	_ = tc.SetDeadline(time.Now().Add(e.Limits.HeadTimeout))
	if err := tc.Handshake(); err != nil {
		e.logf("TLS with the session for %s failed: %s", hp, printable(err.Error()))
		return
	}
	_ = tc.SetDeadline(time.Time{})
	what := "to put credentials in"
	if !e.Inject.covers(hp) {
		what = "to refuse the registry's writes (" + WriteGrant(hp) + " grants them)"
	}
	e.logf("terminating TLS for %s %s", hp, what)
	var handlers sync.WaitGroup
	session := &idleConn{Conn: tc, idle: e.Limits.IdleTimeout}
	l := &oneConn{c: session, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			e.relayInjected(w, r, hp)
		}),
		BaseContext: func(net.Listener) context.Context {
			if once {
				return context.WithValue(context.Background(), onceKey{}, hp)
			}
			return context.Background()
		},
		MaxHeaderBytes:    e.Limits.MaxHeadBytes,
		ReadHeaderTimeout: e.Limits.HeadTimeout,
		IdleTimeout:       e.Limits.IdleTimeout,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateHijacked {
				// An upgraded connection (WebSocket) is relayed by the
				// reverse proxy, without the server's timeouts: from now on
				// it is closed once quiet for IdleTimeout.
				session.on.Store(true)
			}
			if st == http.StateClosed || st == http.StateHijacked {
				l.close()
			}
		},
	}
	_ = srv.Serve(l)
	handlers.Wait() // an upgraded (WebSocket) connection lives on in its handler
}

// relayInjected relays one request to hp with the credential in it, and
// records it: method, path, status and sizes, never a header's value.
func (e *Egress) relayInjected(w http.ResponseWriter, r *http.Request, hp string) {
	lent, refused := e.injectRefused(w, r, hp)
	if refused {
		return
	}
	var used []string
	rp := e.injecting(hp, lent, &used)
	// Full duplex: without it the server, when the answer's head goes
	// back, reads the rest of the request body and closes it, while the
	// transport may still be reading that body to its end; the transport
	// then fails the request and closes the vendor's connection mid-stream
	// (an event stream cut after its first event). A vendor may also
	// answer before the body ends.
	if err := http.NewResponseController(w).EnableFullDuplex(); err != nil {
		e.logf("relay to %s: cannot relay full duplex: %v", hp, err)
	}
	in := &countingBody{ReadCloser: r.Body}
	r.Body = in
	cw := &countingWriter{ResponseWriter: w, status: http.StatusOK}
	// The record is written however the relay ends: the reverse proxy
	// aborts a response it cannot finish by panicking with
	// http.ErrAbortHandler, which the server recovers.
	aborted := true
	defer func() {
		what := "passed as sent (no placeholder in the rule's headers)"
		if len(used) > 0 {
			what = "injected " + strings.Join(dedupe(used), ", ")
		}
		end := ""
		if aborted {
			end = ", cut short"
		}
		e.logf("%s: %s %s%s: %d (%d bytes out, %d in%s)", what, printable(r.Method), hp, printable(r.URL.Path), cw.status, in.n.Load(), cw.n, end)
		e.connectionEvent(hp, in.n.Load(), int64(cw.n), journald.Field{Key: "MOSAIC_METHOD", Value: printable(r.Method)},
			journald.Field{Key: "MOSAIC_PATH", Value: printable(r.URL.Path)}, journald.Field{Key: "MOSAIC_CREDENTIAL", Value: strings.Join(dedupe(used), ",")})
	}()
	rp.ServeHTTP(cw, r)
	aborted = false
}

// injectRefused answers a request the rules refuse (its key's rule, a
// registry's, a lent git host's other requests) and says so; else it
// returns the git repositories lent for hp, if any.
func (e *Egress) injectRefused(w http.ResponseWriter, r *http.Request, hp string) (lent *gitLent, refused bool) {
	if status, why := e.Inject.refusal(r, hp); why != "" {
		e.logf("refused %s %s%s: %s", printable(r.Method), hp, printable(r.URL.EscapedPath()), why)
		http.Error(w, "mosaic egress: refused: "+why, status)
		return nil, true
	}
	if why := e.registryRefusal(r, hp); why != "" {
		e.logf("refused %s %s%s: %s", printable(r.Method), hp, printable(r.URL.EscapedPath()), why)
		e.refused(hp, RefusedRegistry, why)
		// JSON, as the registries answer: npm prints its "error", other
		// clients the body as it is.
		body, _ := json.Marshal(map[string]string{"error": e.sessionSays("refused: " + why)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusForbidden)
		w.Write(append(body, '\n'))
		return nil, true
	}
	if len(e.Inject.git[hp]) > 0 {
		// A git host is lent for its repositories' fetch and push only:
		// every other request to it is refused, the token never put in.
		g := e.Inject.gitCheck(r, hp)
		if g.why == "" && len(g.repoIDs) > 0 {
			g.why = e.checkRepoIDs(&g)
		}
		e.gitEvent(hp, g)
		if g.why != "" {
			e.refused(hp, RefusedGit, g.why)
			http.Error(w, e.sessionSays("refused: "+g.why), http.StatusForbidden)
			return nil, true
		}
		lent = g.lend
	}
	return lent, false
}

// injecting is the reverse proxy that relays a request to hp with the
// rule's credentials put in (and lent's git token), noting in used what
// it put.
func (e *Egress) injecting(hp string, lent *gitLent, used *[]string) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = hp
			// The Host header is the rule's host, never the session's:
			// a front end serving many sites (a CDN) delivers by Host, and
			// the key must reach only the host the rule names.
			pr.Out.Host = hp
			if h, port, err := net.SplitHostPort(hp); err == nil && port == "443" {
				pr.Out.Host = h
			}
			*used = e.Inject.put(pr.Out.Header, hp, pr.In.URL)
			if lent != nil && lent.putGit(pr.Out.Header) {
				*used = append(*used, "git token for "+lent.URL())
			}
		},
		Transport:     e.upstream(),
		FlushInterval: -1, // server-sent events go on as they arrive
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			e.logf("request to %s failed: %s", hp, printable(err.Error()))
			http.Error(w, "mosaic egress: "+printable(err.Error()), http.StatusBadGateway)
		},
		ErrorLog: log.New(logWriter{e, hp}, "", 0),
	}
}

// put swaps the placeholder for the key in the rules' headers of h, for a
// request to hp at u (a rule scoped to a path: under it), and returns the credentials it put in; a placeholder in
// any other header stays as sent.
func (in *Injector) put(h http.Header, hp string, u *url.URL) []string {
	var used []string
	for _, inj := range in.byHost[hp] {
		if !underScope(inj.prefix, u.EscapedPath()) {
			continue // a base URL's rule: only under its path
		}
		for _, name := range inj.rule.Headers {
			vals := h.Values(name)
			for i, v := range vals {
				if strings.Contains(v, inj.placeholder) {
					vals[i] = strings.ReplaceAll(v, inj.placeholder, inj.key)
					used = append(used, inj.rule.Var)
				}
			}
		}
	}
	return used
}

// logWriter puts the reverse proxy's own complaints (a failed body copy)
// into the journal.
type logWriter struct {
	e  *Egress
	hp string
}

func (l logWriter) Write(p []byte) (int, error) {
	l.e.logf("relay to %s: %s", l.hp, printable(strings.TrimSpace(string(p))))
	return len(p), nil
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// upstream is the transport to the real hosts: connections opened by the
// proxy's own checked dialer (allowlist, special addresses), TLS checked
// against the real roots, HTTP/1.1 only, kept alive between requests.
func (e *Egress) upstream() http.RoundTripper {
	e.upOnce.Do(func() {
		e.up = &http.Transport{
			DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
				hp, err := NormalizeHost(addr)
				port, local := e.localTarget(addr)
				once, _ := ctx.Value(onceKey{}).(string)
				if err != nil || !(e.Allow.Hosts[hp] || local || e.hostAllowed(hp) || once == hp) || !(e.Inject.covers(hp) || Guards(hp)) {
					return nil, fmt.Errorf("%s is not an injection host", addr)
				}
				var c net.Conn
				var why string
				if local {
					c, why = e.dialLocal(port) // an allowed port of the host's loopback
				} else {
					c, why = e.dial(ctx, hp)
				}
				if c == nil {
					return nil, errors.New(why)
				}
				ic := &idleConn{Conn: c, idle: e.Limits.IdleTimeout}
				ic.on.Store(true)
				return ic, nil
			},
			TLSClientConfig:     &tls.Config{RootCAs: e.Inject.roots, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
			TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{}, // no HTTP/2
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}
	})
	return e.up
}

// onceKey is the context key of a request the proxy reads on a connection
// let through once (intercept): its value is the "host:port" that the
// proxy may dial for it although no list has it.
type onceKey struct{}

// idleConn, once on, ends a read that finds the connection quiet (no byte
// read or written) for idle: the bound a tunnel has, for the connections
// the reverse proxy relays (upgrades) and keeps (to the vendor).
type idleConn struct {
	net.Conn
	idle time.Duration
	on   atomic.Bool
	last atomic.Int64 // unix nanoseconds of the last byte either way
}

func (c *idleConn) Read(p []byte) (int, error) {
	if !c.on.Load() {
		return c.Conn.Read(p)
	}
	if c.last.Load() == 0 {
		c.touch()
	}
	for {
		_ = c.Conn.SetReadDeadline(time.Unix(0, c.last.Load()).Add(c.idle))
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.touch()
			return n, err
		}
		if isTimeout(err) && time.Since(time.Unix(0, c.last.Load())) < c.idle {
			continue // written to meanwhile: not quiet
		}
		return n, err
	}
}

func (c *idleConn) Write(p []byte) (int, error) {
	if c.on.Load() {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle))
	}
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.touch()
	}
	return n, err
}

func (c *idleConn) touch() { c.last.Store(time.Now().UnixNano()) }

// bufferedConn is a connection whose first bytes were already read into r.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// oneConn is a listener that hands out one connection, then waits for it
// to end.
type oneConn struct {
	c    net.Conn
	once sync.Once
	done chan struct{}
	took atomic.Bool
}

func (l *oneConn) Accept() (net.Conn, error) {
	if l.took.CompareAndSwap(false, true) {
		return l.c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}
func (l *oneConn) close()         { l.once.Do(func() { close(l.done) }) }
func (l *oneConn) Close() error   { l.close(); return nil }
func (l *oneConn) Addr() net.Addr { return l.c.LocalAddr() }

type countingBody struct {
	io.ReadCloser
	n atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// countingWriter counts what goes back to the session; Unwrap lets the
// reverse proxy flush and hijack (WebSocket) through it.
type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(s int) { c.status = s; c.ResponseWriter.WriteHeader(s) }
func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// ParseRoots reads PEM certificates (the test-only upstream roots).
func ParseRoots(pemData string) (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(pemData)) {
		return nil, errors.New("no certificate in " + UpstreamRootsVar)
	}
	return p, nil
}
