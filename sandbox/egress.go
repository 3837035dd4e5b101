package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A session's network is one of three modes. In none and allow it has a
// network namespace of its own with only loopback: no route anywhere, none
// of the host's loopback services, none of its abstract Unix sockets (which
// no mount can hide). In allow, the session's init listens on
// 127.0.0.1:ProxyPort and relays each connection to the egress proxy's Unix
// socket, bound into the sandbox at EgressSocketInside; the proxy, outside,
// opens tunnels only to the allowed names.
const (
	NetworkNone  = "none"
	NetworkAllow = "allow"
	NetworkHost  = "host"

	ProxyPort          = 3128
	EgressDirInside    = "/run/mosaic/egress"
	EgressSocketName   = "proxy.sock"
	EgressSocketInside = EgressDirInside + "/" + EgressSocketName
)

// ValidNetwork reports whether mode is a network mode.
func ValidNetwork(mode string) bool {
	return mode == NetworkNone || mode == NetworkAllow || mode == NetworkHost
}

// Allow is an egress allowlist: host names with ports, and the addresses
// (private, loopback, link-local) those names may resolve to because the
// list names them explicitly.
type Allow struct {
	Hosts map[string]bool // "name:port"
	Addrs []netip.Prefix  // explicitly allowed special addresses
	Local map[int]bool    // ports of the host's loopback (egress_local.go)
}

// ParseAllow reads --allow-host entries: HOST[:PORT] (port 443 unless
// given) for a name, or an IP address or prefix that allowed names may
// resolve to although it is private, loopback or link-local.
func ParseAllow(entries []string) (Allow, error) {
	a := Allow{Hosts: map[string]bool{}, Local: map[int]bool{}}
	for _, e := range entries {
		if port, ok, err := parseLocal(e); ok {
			if err != nil {
				return Allow{}, err
			}
			a.Local[port] = true
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			a.Addrs = append(a.Addrs, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(strings.Trim(e, "[]")); err == nil {
			a.Addrs = append(a.Addrs, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		hp, err := NormalizeHost(e)
		if err != nil {
			return Allow{}, err
		}
		a.Hosts[hp] = true
	}
	return a, nil
}

// NormalizeHost checks HOST[:PORT] and returns "host:port" in lower case,
// port 443 unless given. The host must be a DNS name, not an IP literal.
func NormalizeHost(e string) (string, error) {
	host, port := strings.ToLower(strings.TrimSuffix(e, ".")), "443"
	if h, p, err := net.SplitHostPort(host); err == nil {
		host, port = strings.TrimSuffix(h, "."), p
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", e)
	}
	if !validHostName(host) {
		return "", fmt.Errorf("%q is not a host name (letters, digits, '-' and '.', e.g. api.anthropic.com or example.com:8443)", e)
	}
	return host + ":" + strconv.Itoa(n), nil
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 || strings.Contains(h, "..") {
		return false
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return false
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	// A name of digits only in its last label would be read as an address.
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

// Strings lists the allowlist as --allow-host arguments, sorted.
func (a Allow) Strings() []string {
	var out []string
	for h := range a.Hosts {
		out = append(out, h)
	}
	for _, p := range a.Addrs {
		if p.IsSingleIP() {
			out = append(out, p.Addr().String())
		} else {
			out = append(out, p.String())
		}
	}
	out = append(out, a.localStrings()...)
	sort.Strings(out)
	return out
}

// special reports why an address is not one a name may lead to unless the
// allowlist names it, or "".
func special(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local (cloud metadata lives here)"
	case ip.IsPrivate():
		return "private"
	case ip.IsUnspecified(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "not a host"
	case cgnat.Contains(ip):
		return "shared (carrier-grade NAT)"
	case ip == metadataV6:
		return "cloud metadata"
	}
	return ""
}

var (
	cgnat      = netip.MustParsePrefix("100.64.0.0/10")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
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
	if req.Method != http.MethodConnect && e.relayPlain(c, req) {
		return
	}
	if req.Method != http.MethodConnect {
		e.logf("refused %s %s: plain HTTP is not relayed, only CONNECT (HTTPS)", req.Method, req.URL.Redacted())
		refuse(c, http.StatusForbidden, "mosaic egress: plain HTTP is refused (but to a host loopback port allowed with --allow-host localhost:PORT); use HTTPS (CONNECT)")
		return
	}
	target := req.Host
	var remote net.Conn
	var why string
	if port, ok := e.localTarget(target); ok {
		remote, why = e.dialLocal(port)
	} else {
		remote, why = e.open(target)
	}
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

// ProxyEnv are the variables that point a command at the relay. NO_PROXY
// names loopback (the session's own) unless env sets it already, as a
// session allowed a host loopback port does (those names go to the proxy).
func ProxyEnv(env []string) []string {
	u := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
	none := "localhost,127.0.0.1,::1"
	out := []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u}
	for _, kv := range env {
		if strings.HasPrefix(kv, "NO_PROXY=") {
			return out
		}
	}
	return append(out, "NO_PROXY="+none, "no_proxy="+none)
}

// ServeEgressMain is `mosaic egress --session NAME --socket PATH [--allow
// HOST[:PORT]]...`, the egress unit's main process: it listens on the socket,
// reports READY=1 through notify, and serves until SIGTERM (stop).
func ServeEgressMain(args []string, notify func()) error {
	e := &Egress{Log: os.Stderr}
	var socket string
	var allow []string
	for len(args) >= 2 {
		switch args[0] {
		case "--session":
			e.Session = args[1]
		case "--socket":
			socket = args[1]
		case "--allow":
			allow = append(allow, args[1])
		default:
			return fmt.Errorf("unknown option %s", args[0])
		}
		args = args[2:]
	}
	if socket == "" || len(args) > 0 {
		return errors.New("usage: egress --session NAME --socket PATH [--allow HOST[:PORT]]...")
	}
	var err error
	if e.Allow, err = ParseAllow(allow); err != nil {
		return err
	}
	os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	_ = os.Chmod(socket, 0o600)
	fmt.Fprintf(os.Stderr, "mosaic egress: session %s: allowing %s\n", e.Session, strings.Join(e.Allow.Strings(), ", "))
	notify()
	return e.Serve(l)
}
