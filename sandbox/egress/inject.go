package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Injector holds what the proxy needs to put credentials into requests:
// the rules with their values, and the session's CA, whose key exists only
// in this process's memory.
type Injector struct {
	byHost map[string][]injection // "host:port" -> what goes there
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	CAPEM  []byte // the CA certificate, for the session to trust
	roots  *x509.CertPool

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

type injection struct {
	rule        Rule
	key         string
	placeholder string
}

// caValidity is how long a session's CA lives: long enough for a session
// that runs for weeks, short enough that a copy is worth little after.
// Leaf certificates live a day and are made again as needed.
const (
	caValidity   = 30 * 24 * time.Hour
	leafValidity = 24 * time.Hour
)

// NewInjector makes a session's CA and binds each rule to its value and
// placeholder, read by value(name). roots are the certificates the real
// hosts are checked against (nil: the system's).
func NewInjector(session string, rules []Rule, value func(string) (string, bool), roots *x509.CertPool) (*Injector, error) {
	in := &Injector{byHost: map[string][]injection{}, roots: roots, leaves: map[string]*tls.Certificate{}}
	var names []string
	seen := map[string]bool{}
	for _, r := range rules {
		key, ok1 := value(r.Var)
		ph, ok2 := value(PlaceholderPrefix + r.Var)
		if !ok1 || !ok2 || key == "" || len(ph) < 16 {
			return nil, fmt.Errorf("credential %s or its placeholder did not arrive (the environment file was gone before the proxy started)", r.Var)
		}
		for _, hp := range r.Hosts {
			in.byHost[hp] = append(in.byHost[hp], injection{rule: r, key: key, placeholder: ph})
			h, _, _ := net.SplitHostPort(hp)
			if !seen[h] {
				seen[h] = true
				names = append(names, h)
			}
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "mosaic session " + session + " egress CA", Organization: []string{"mosaic"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// The CA can vouch for the injection hosts only: a copy of its
		// certificate trusted somewhere else, or its key were it ever
		// taken, is worth nothing for any other name or for an address.
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         names,
		ExcludedIPRanges:            []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	in.caCert, _ = x509.ParseCertificate(der)
	in.caKey = key
	in.CAPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return in, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// covers reports whether the proxy terminates TLS for hp.
func (in *Injector) covers(hp string) bool { return in != nil && len(in.byHost[hp]) > 0 }

// leaf returns a certificate for host from the session's CA.
func (in *Injector) leaf(host string) (*tls.Certificate, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if c, ok := in.leaves[host]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	notAfter := now.Add(leafValidity)
	if notAfter.After(in.caCert.NotAfter) {
		notAfter = in.caCert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, in.caCert, &key.PublicKey, in.caKey)
	if err != nil {
		return nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	in.leaves[host] = c
	return c, nil
}

// systemBundles are where distributions keep their root certificates.
var systemBundles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"}

// Files are the session's CA certificate and a bundle of the system's
// roots plus it (for clients that read one file in place of the system's),
// as the session sees them.
const (
	CAFile     = "ca.pem"
	BundleFile = "bundle.pem"
)

// WriteCA writes the CA certificate and the bundle into dir, the egress
// unit's socket directory, which the session has bound read-only.
func (in *Injector) WriteCA(dir string) error {
	bundle := []byte{}
	for _, f := range systemBundles {
		if b, err := os.ReadFile(f); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	bundle = append(bundle, in.CAPEM...)
	for name, data := range map[string][]byte{CAFile: in.CAPEM, BundleFile: bundle} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// CAEnv are the variables that make a session's runtimes trust its CA,
// given the directory where the session sees the files: Node and Bun add
// NODE_EXTRA_CA_CERTS to their roots; OpenSSL, Go, Rust's native-tls and
// rustls-native-certs, Python's requests, curl and Codex read one file in
// place of the system's, hence the bundle.
func CAEnv(dirInside string) []string {
	ca, bundle := dirInside+"/"+CAFile, dirInside+"/"+BundleFile
	return []string{"NODE_EXTRA_CA_CERTS=" + ca, "SSL_CERT_FILE=" + bundle, "REQUESTS_CA_BUNDLE=" + bundle,
		"CURL_CA_BUNDLE=" + bundle, "CODEX_CA_CERTIFICATE=" + bundle}
}

// intercept serves one CONNECT to an injection host: the proxy answers
// the session's TLS with a leaf of the session's CA, reads its HTTP/1.1
// requests, and relays each to the real host over TLS checked against the
// real roots, with the credential put into the rule's headers.
func (e *Egress) intercept(c net.Conn, br *bufio.Reader, hp string) {
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
	e.logf("terminating TLS for %s to put credentials in", hp)
	var handlers sync.WaitGroup
	session := &idleConn{Conn: tc, idle: e.Limits.IdleTimeout}
	l := &oneConn{c: session, done: make(chan struct{})}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			e.relayInjected(w, r, hp)
		}),
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
	var used []string
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = hp
			pr.Out.Host = pr.In.Host
			for _, inj := range e.Inject.byHost[hp] {
				for _, h := range inj.rule.Headers {
					vals := pr.Out.Header.Values(h)
					for i, v := range vals {
						if strings.Contains(v, inj.placeholder) {
							vals[i] = strings.ReplaceAll(v, inj.placeholder, inj.key)
							used = append(used, inj.rule.Var)
						}
					}
				}
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
	}()
	rp.ServeHTTP(cw, r)
	aborted = false
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
				if err != nil || !e.Allow.Hosts[hp] || !e.Inject.covers(hp) {
					return nil, fmt.Errorf("%s is not an injection host", addr)
				}
				c, why := e.dial(ctx, hp)
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
