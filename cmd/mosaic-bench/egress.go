package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mosaic/internal/credvar"
	"mosaic/sandbox/egress"
)

// egressTTFB measures the time to the first byte of a streamed answer
// (server-sent events, as a model's API sends) through the egress proxy:
// through a plain CONNECT tunnel, and through credential injection (the
// proxy terminates TLS with the session's CA, swaps the placeholder for
// the key, and relays over its own TLS). Both on a new connection (CONNECT
// and TLS handshakes included) and on one kept alive. The proxy runs in
// this process on a Unix socket, as in its unit; the vendor is a mock on
// loopback with its own CA.
func (b *bench) egressTTFB(r *Report) error {
	progress("egress: time to first byte, tunnel vs injection, %d runs each", b.n)
	vendor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		io.WriteString(w, "event: message_stop\ndata: {}\n\n")
	}))
	vendor.StartTLS()
	defer vendor.Close()
	_, port, _ := net.SplitHostPort(vendor.Listener.Addr().String())
	// The tunnel's host is the vendor's address (its certificate names
	// 127.0.0.1): the proxy closes a tunnel whose TLS names a host other
	// than the one it was opened to.
	injected, tunneled := "example.com:"+port, "127.0.0.1:"+port
	rule, err := egress.ParseRule("ANTHROPIC_API_KEY=x-api-key@" + injected)
	if err != nil {
		return err
	}
	key := "sk-ant-api03-" + strings.Repeat("k", 93) + "AA"
	session, proxyVars := egress.Split([]egress.Rule{rule}, []credvar.Var{{Name: "ANTHROPIC_API_KEY", Value: key}})
	env := map[string]string{}
	for _, v := range proxyVars {
		env[v.Name] = v.Value
	}
	vendorRoots := x509.NewCertPool()
	vendorRoots.AddCert(vendor.Certificate())
	in, err := egress.NewInjector("bench", []egress.Rule{rule}, nil, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, vendorRoots)
	if err != nil {
		return err
	}
	allow, err := egress.ParseAllow([]string{injected, tunneled, "127.0.0.1"})
	if err != nil {
		return err
	}
	e := &egress.Egress{Session: "bench", Allow: allow, Inject: in, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}
	dir, err := os.MkdirTemp("", "mosaic-bench-egress-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "proxy.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer l.Close()
	go e.Serve(l)
	sessionRoots := x509.NewCertPool()
	sessionRoots.AppendCertsFromPEM(in.CAPEM)

	for _, tc := range []struct {
		name, target string
		roots        *x509.CertPool
	}{{"plain tunnel", tunneled, vendorRoots}, {"credential injection", injected, sessionRoots}} {
		s, err := measure(tc.name+", new connection", "CONNECT, TLS, POST, first byte of an event stream", b.n, func() error {
			c, err := openThrough(sock, tc.target, tc.roots)
			if err != nil {
				return err
			}
			defer c.tc.Close()
			return c.ask(tc.target, session[0].Value)
		})
		if err != nil {
			return err
		}
		r.Egress = append(r.Egress, s)
		kept, err := openThrough(sock, tc.target, tc.roots)
		if err != nil {
			return err
		}
		s, err = measure(tc.name+", kept-alive connection", "POST, first byte of an event stream", b.n, func() error { return kept.ask(tc.target, session[0].Value) })
		kept.tc.Close()
		if err != nil {
			return err
		}
		r.Egress = append(r.Egress, s)
	}
	s, err := b.grantedTunnel(e, dir, sock, "granted.example.com:"+port, vendorRoots, session[0].Value)
	if err != nil {
		return err
	}
	r.Egress = append(r.Egress, s)
	time.Sleep(10 * time.Millisecond)
	return nil
}

// grantedTunnel measures a tunnel to granted, a host granted at run time
// among 20 other grants (through the control socket, as mosaic allow makes
// them): a grant costs a request nothing but a look at the grants.
func (b *bench) grantedTunnel(e *egress.Egress, dir, sock, granted string, roots *x509.CertPool, placeholder string) (Stat, error) {
	egressDir := filepath.Join(dir, "egress", "bench")
	e.ControlDir = egress.ControlDir(egressDir)
	if err := os.MkdirAll(e.ControlDir, 0o700); err != nil {
		return Stat{}, err
	}
	cl, err := net.Listen("unix", filepath.Join(e.ControlDir, egress.ControlSocketName))
	if err != nil {
		return Stat{}, err
	}
	defer cl.Close()
	go e.ServeControl(cl)
	entries := []string{granted}
	for i := range 20 {
		entries = append(entries, fmt.Sprintf("other-%d.example.com", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := egress.NewControlClient(egressDir).Allow(ctx, entries, time.Hour); err != nil {
		return Stat{}, fmt.Errorf("a grant through the control socket: %w", err)
	}
	return measure("plain tunnel to a granted host (21 grants), new connection", "CONNECT, TLS, POST, first byte of an event stream", b.n, func() error {
		c, err := openThrough(sock, granted, roots)
		if err != nil {
			return err
		}
		defer c.tc.Close()
		return c.ask(granted, placeholder)
	})
}

// benchConn is a client as an agent is: CONNECT through the proxy, TLS
// (the vendor's certificate names example.com, also for the tunnel), one
// POST per measurement, time to the first byte of the body.
type benchConn struct {
	tc *tls.Conn
	r  *bufio.Reader
}

// openThrough opens a connection to target through the proxy at sock.
func openThrough(sock, target string, roots *x509.CertPool) (*benchConn, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s: %v %v", target, resp, err)
	}
	host, _, _ := net.SplitHostPort(target)
	tc := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: host, NextProtos: []string{"http/1.1"}})
	if err := tc.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	return &benchConn{tc: tc, r: bufio.NewReader(tc)}, nil
}

// ask POSTs a streaming request with the key's placeholder and reads its
// answer, the first byte of the body first.
func (c *benchConn) ask(target, placeholder string) error {
	body := `{"stream":true}`
	fmt.Fprintf(c.tc, "POST /v1/messages HTTP/1.1\r\nHost: %s\r\nx-api-key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		target, placeholder, len(body), body)
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}
