package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Egress is the proxy one session's traffic leaves through.
type Egress struct {
	Session string
	Allow   Allow
	// Lookup resolves a name; nil means the system's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	Log    io.Writer // one line per tunnel and per refusal (the journal)
	// DialTimeout bounds each connection to an allowed host.
	DialTimeout time.Duration
}

func (e *Egress) logf(format string, args ...any) {
	if e.Log != nil {
		fmt.Fprintf(e.Log, "mosaic egress: session %s: "+format+"\n", append([]any{e.Session}, args...)...)
	}
}

// Serve answers connections on l until it is closed.
func (e *Egress) Serve(l net.Listener) error {
	for {
		c, err := l.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go e.handle(c)
	}
}

// handle answers one client: a CONNECT to an allowed name (opened to an
// address the proxy resolved and checked itself), or a refusal. Plain HTTP
// requests are refused: everything an agent needs speaks HTTPS.
func (e *Egress) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if req.Method != http.MethodConnect {
		e.logf("refused %s %s: plain HTTP is not relayed, only CONNECT (HTTPS)", req.Method, req.URL.Redacted())
		refuse(c, http.StatusForbidden, "mosaic egress: plain HTTP is refused; use HTTPS (CONNECT)")
		return
	}
	target := req.Host
	remote, why := e.open(target)
	if remote == nil {
		e.logf("refused CONNECT %s: %s", target, why)
		refuse(c, http.StatusForbidden, "mosaic egress: "+why)
		return
	}
	defer remote.Close()
	e.logf("tunnel to %s (%s) opened", target, remote.RemoteAddr())
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	up, down := splice(c, br, remote)
	e.logf("tunnel to %s closed (%d bytes out, %d in)", target, up, down)
}

// open checks target against the allowlist, resolves it and connects to
// the first address that is not special (or that the list names). It
// returns the connection, or nil and why not.
func (e *Egress) open(target string) (net.Conn, string) {
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Sprintf("%q is not HOST:PORT", target)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil, fmt.Sprintf("%s is an IP address: connections go to names on the allowlist only", host)
	}
	hp, err := NormalizeHost(target)
	if err != nil || !e.Allow.Hosts[hp] {
		return nil, fmt.Sprintf("%s is not on the session's allowlist (add it with --allow-host %s)", target, target)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lookup := e.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, h string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		}
	}
	addrs, err := lookup(ctx, strings.TrimSuffix(strings.ToLower(host), "."))
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Sprintf("cannot resolve %s: %v", host, err)
	}
	var reasons []string
	timeout := e.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	for _, ip := range addrs {
		ip = ip.Unmap()
		if why := special(ip); why != "" && !e.allowedAddr(ip) {
			reasons = append(reasons, fmt.Sprintf("%s resolves to %s, a %s address (allow it explicitly with --allow-host %s)", host, ip, why, ip))
			continue
		}
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port), timeout)
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s (%s): %v", host, ip, err))
			continue
		}
		return conn, ""
	}
	return nil, strings.Join(reasons, "; ")
}

func (e *Egress) allowedAddr(ip netip.Addr) bool {
	for _, p := range e.Allow.Addrs {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func refuse(c net.Conn, status int, msg string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, http.StatusText(status), len(msg)+1, msg)
}

// splice copies both ways until both directions are done; in is what the
// client sent after its request, already buffered.
func splice(client net.Conn, in io.Reader, remote net.Conn) (up, down int64) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, _ = io.Copy(remote, in)
		closeWrite(remote)
	}()
	down, _ = io.Copy(client, remote)
	closeWrite(client)
	wg.Wait()
	return up, down
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	} else {
		_ = c.Close()
	}
}

// Relay is the session side of allow: the init listens on
// 127.0.0.1:ProxyPort inside the session's network namespace and joins each
// connection to the egress proxy's socket.
func Relay(l net.Listener, socket string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			p, err := net.Dial("unix", socket)
			if err != nil {
				refuse(c, http.StatusBadGateway, "mosaic: the session's egress proxy is not reachable: "+err.Error())
				return
			}
			defer p.Close()
			splice(c, c, p)
		}()
	}
}
