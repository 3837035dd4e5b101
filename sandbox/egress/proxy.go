package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"mosaic/internal/acceptloop"
	"mosaic/internal/journald"
)

// Limits bound what one session can make its proxy hold. The zero value of
// a field means its default.
type Limits struct {
	// MaxHeadBytes caps a request's head (request line and headers), as
	// net/http's MaxHeaderBytes does; a longer one is answered 431.
	MaxHeadBytes int
	// HeadTimeout is how long a client has to send its whole head.
	HeadTimeout time.Duration
	// MaxConns caps the session's connections open at once (tunnels and
	// clients still sending their head); one more is answered 503.
	MaxConns int
	// IdleTimeout closes a tunnel through which no byte went either way
	// for that long.
	IdleTimeout time.Duration
	// HalfOpenTimeout closes a tunnel one side of which has finished
	// sending, once the other has been quiet that long.
	HalfOpenTimeout time.Duration
}

// The defaults: an agent's head is a few KiB, it opens a handful of
// connections, and its API streams keep bytes flowing (server-sent events
// send pings; a model thinking for minutes without a byte is the longest
// quiet expected).
const (
	DefaultMaxHeadBytes    = 64 << 10
	DefaultHeadTimeout     = 10 * time.Second
	DefaultMaxConns        = 256
	DefaultIdleTimeout     = 10 * time.Minute
	DefaultHalfOpenTimeout = 30 * time.Second
)

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxHeadBytes, DefaultMaxHeadBytes)
	def(&l.MaxConns, DefaultMaxConns)
	defd(&l.HeadTimeout, DefaultHeadTimeout)
	defd(&l.IdleTimeout, DefaultIdleTimeout)
	defd(&l.HalfOpenTimeout, DefaultHalfOpenTimeout)
	return l
}

// Egress is the proxy one session's traffic leaves through.
type Egress struct {
	Session string
	Allow   Allow
	// Lookup resolves a name; nil means the system's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	Log    io.Writer // one line per tunnel and per refusal (the journal)
	// DialTimeout bounds each connection to an allowed host.
	DialTimeout time.Duration
	Limits      Limits
	// Inject, when set, is where the proxy puts credentials: for its hosts
	// it terminates the session's TLS; every other host is a tunnel it
	// does not read.
	Inject *Injector
	// ControlDir, when set, is where the proxy keeps its grants
	// (control.go); its socket is served by ServeControl.
	ControlDir string
	// RecordDir, when set, is where the proxy leaves its record of
	// refusals and grants for after the session (record.go).
	RecordDir string
	// Audit, when set, writes an audit event (a journal entry of its own,
	// internal/journald): the grants, revocations and expiries.
	Audit func([]journald.Field)
	// Ask, when set, is how long a connection to a host not on the list
	// is held for the user's answer before it is refused (ask.go).
	Ask time.Duration

	liveOnce sync.Once
	live     *live // grants, revocations, open tunnels, refusals (live.go)

	logMu  sync.Mutex
	slots  chan struct{}
	upOnce sync.Once
	up     *http.Transport
}

func (e *Egress) logf(format string, args ...any) {
	if e.Log == nil {
		return
	}
	e.logMu.Lock()
	defer e.logMu.Unlock()
	fmt.Fprintf(e.Log, "mosaic egress: session %s: "+format+"\n", append([]any{e.Session}, args...)...)
}

// audit writes one audit event of kind (id, its MESSAGE_ID; event, its
// MOSAIC_EVENT) with message and fields, if the proxy has an Audit.
func (e *Egress) audit(id, event, message string, fields ...journald.Field) {
	if e.Audit == nil {
		return
	}
	e.Audit(journald.EventFields(id, e.Session, event, message, fields...))
}

// start makes what Serve and ServeControl share.
func (e *Egress) start() {
	e.liveOnce.Do(func() { e.live = newLive() })
}

// ServeControl answers the control socket l (control.go) until it is closed.
func (e *Egress) ServeControl(l net.Listener) error {
	e.start()
	return e.serveControl(l)
}

// Serve answers connections on l until it is closed; an Accept that fails
// for a moment (EMFILE) is retried (acceptloop).
func (e *Egress) Serve(l net.Listener) error {
	e.start()
	e.Limits = e.Limits.withDefaults()
	e.slots = make(chan struct{}, e.Limits.MaxConns)
	return acceptloop.Serve(l, func(c net.Conn) {
		select {
		case e.slots <- struct{}{}:
			go func() {
				defer func() { <-e.slots }()
				e.handle(c)
			}()
		default:
			// Answered here, not in a goroutine: a fresh socket's buffer
			// takes the answer without blocking, and refusing must not cost
			// what accepting would.
			e.logf("refused a connection: %d are open, the most a session may have", e.Limits.MaxConns)
			e.refused("-", RefusedLimit, fmt.Sprintf("%d connections open, the most a session may have", e.Limits.MaxConns))
			refuse(c, http.StatusServiceUnavailable, fmt.Sprintf("mosaic egress: the session has %d connections open, the most it may have", e.Limits.MaxConns))
			c.Close()
		}
	})
}

// handle answers one client: a CONNECT to an allowed name (opened to an
// address the proxy resolved and checked itself), or a refusal. Plain HTTP
// requests are refused: everything an agent needs speaks HTTPS.
func (e *Egress) handle(c net.Conn) {
	defer c.Close()
	// The head is read through a limit, as net/http does, so that a client
	// sending headers without end costs MaxHeadBytes, not memory without
	// bound; and against a deadline, so that one sending them slowly (or
	// nothing) does not hold its slot.
	headDeadline := time.Now().Add(e.Limits.HeadTimeout)
	_ = c.SetReadDeadline(headDeadline)
	lr := &io.LimitedReader{R: c, N: int64(e.Limits.MaxHeadBytes)}
	br := bufio.NewReader(lr)
	req, err := http.ReadRequest(br)
	if err != nil {
		switch {
		case lr.N <= 0:
			e.logf("refused a request whose head is over %d bytes", e.Limits.MaxHeadBytes)
			e.refused("-", RefusedLimit, fmt.Sprintf("a request head over %d bytes", e.Limits.MaxHeadBytes))
			refuse(c, http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("mosaic egress: the request's head is over %d bytes", e.Limits.MaxHeadBytes))
		case isTimeout(err) || !time.Now().Before(headDeadline): // textproto may hide the timeout behind a short line
			e.logf("closed a connection that sent no whole request in %s", e.Limits.HeadTimeout)
			refuse(c, http.StatusRequestTimeout, "mosaic egress: no whole request in "+e.Limits.HeadTimeout.String())
		default:
			refuse(c, http.StatusBadRequest, "mosaic egress: not an HTTP request")
		}
		return
	}
	lr.N = math.MaxInt64
	_ = c.SetReadDeadline(time.Time{})
	if req.Method == resolveMethod {
		e.resolve(c, req.Host)
		return
	}
	if req.Method != http.MethodConnect && e.relayPlain(c, req) {
		return // plain HTTP to an allowed port of the host's loopback (local.go)
	}
	if req.Method != http.MethodConnect && e.relayMirror(c, req) {
		return // plain HTTP GET or HEAD to a mirror group's host (mirror.go)
	}
	if req.Method != http.MethodConnect {
		e.logf("refused %s %s: plain HTTP is not relayed, only CONNECT (HTTPS)", printable(req.Method), printable(req.URL.Redacted()))
		e.refused(plainTarget(req), RefusedPlain, "plain HTTP "+printable(req.Method))
		e.forbid(c, "plain HTTP is refused (but GET and HEAD to the mirror groups' hosts, @debian and @ubuntu, and to a host loopback port allowed with --allow-host localhost:PORT); use HTTPS (CONNECT)"+e.httpsHint(plainTarget(req)))
		return
	}
	target := printable(req.Host)
	var in io.Reader = br // what the session sends into the tunnel
	var remote net.Conn
	var why, kind string
	if port, ok := e.localTarget(req.Host); ok {
		// A host loopback port a key is injected into (a gateway on
		// localhost named by a base URL) gets the same TLS termination.
		if hp, err := NormalizeHost(req.Host); err == nil && e.Inject.covers(hp) {
			e.intercept(c, br, hp, false)
			return
		}
		remote, why = e.dialLocal(port)
		kind = RefusedUnreachable
	} else {
		var forget func()
		var handled bool
		var hp string
		remote, hp, why, kind, forget, handled = e.dialListed(c, br, req.Host)
		if handled {
			return
		}
		if forget != nil {
			defer forget()
		}
		if remote != nil {
			in = &helloGate{e: e, hp: hp, r: br, remote: remote}
		}
	}
	if remote == nil {
		e.logf("refused CONNECT %s: %s", target, why)
		e.refused(target, kind, why)
		e.forbid(c, why)
		return
	}
	defer remote.Close()
	e.openTunnel(c, in, remote, target)
}

// openTunnel answers the session's CONNECT to target and relays between
// it (in, what it sends) and remote until either ends, then records it.
func (e *Egress) openTunnel(c net.Conn, in io.Reader, remote net.Conn, target string) {
	e.logf("tunnel to %s (%s) opened", target, remote.RemoteAddr())
	_ = c.SetWriteDeadline(time.Now().Add(e.Limits.HeadTimeout))
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	up, down, why := e.tunnel(c, in, remote)
	e.logf("tunnel to %s closed%s (%d bytes out, %d in)", target, why, up, down)
	e.connectionEvent(target, up, down)
}

// dialListed opens a CONNECT's target that is no loopback port of the
// host: checked (held for an answer with --ask), read by the proxy itself
// when it injects a key there or reads a registry (handled: the client is
// done with), else dialed and recorded as an open tunnel, which forget
// forgets (nil for none). hp is the target as the proxy checked it; a
// refusal is why and its kind.
func (e *Egress) dialListed(c net.Conn, br *bufio.Reader, host string) (remote net.Conn, hp, why, kind string, forget func(), handled bool) {
	hp, why, kind, once := e.checkOrHold(host)
	if why == "" {
		why, kind = e.unreadable(hp)
	}
	if why == "" && (e.Inject.covers(hp) || e.readsRegistry(hp)) {
		// Read by the proxy: the list is checked again as the tunnel is
		// recorded, but for a connection let through once, which is on no
		// list (its requests are read as any other's: a registry's writes
		// are refused all the same).
		forget, why := e.trackListed(hp, once, false, c)
		if why != "" {
			return nil, hp, why, RefusedNotListed, nil, false
		}
		defer forget()
		e.intercept(c, br, hp, once != nil)
		return nil, hp, "", "", nil, true
	}
	if why != "" {
		return nil, hp, why, kind, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	remote, why, kind = e.dialWhy(ctx, hp)
	cancel()
	if remote == nil {
		return nil, hp, why, kind, nil, false
	}
	// Both ends: deny closes the host's side too, so that a tunnel
	// whose upload waits on a host that reads nothing ends at once.
	forget, why = e.trackListed(hp, once, true, c, remote)
	if why != "" {
		remote.Close()
		return nil, hp, why, RefusedNotListed, nil, false
	}
	return remote, hp, "", "", forget, false
}

// trackListed records the session's connection c to hp: with trackOnce
// when it was let through once (mosaic allow --once answering once), which
// has no grant to check, else checking hp is still on the list (as a
// tunnel the proxy does not read: trackTunnel). It returns what forgets
// it, or why it is refused: hp was denied, or taken off the list, while
// the proxy connected.
func (e *Egress) trackListed(hp string, once *pending, tunnel bool, conns ...net.Conn) (func(), string) {
	if once != nil {
		if forget, ok := e.trackOnce(hp, once, conns...); ok {
			return forget, ""
		}
		return nil, hp + " was refused by mosaic deny while the proxy connected"
	}
	var forget func()
	var ok bool
	if tunnel {
		forget, ok = e.trackTunnel(hp, conns...)
	} else {
		forget, ok = e.track(hp, false, conns...)
	}
	if !ok {
		return nil, takenBack(hp)
	}
	return forget, ""
}

// connectionEvent is the audit event of a connection the proxy let
// through, once it ended, with its bytes each way (extra: the method, path
// and credentials' names of a request it put a credential in).
func (e *Egress) connectionEvent(target string, up, down int64, extra ...journald.Field) {
	host, port, _ := net.SplitHostPort(target)
	e.audit(journald.EgressConnection, "egress-connection", fmt.Sprintf("session %s's connection to %s ended (%d bytes out, %d in)", e.Session, target, up, down),
		append([]journald.Field{{Key: "MOSAIC_HOST", Value: host}, {Key: "MOSAIC_PORT", Value: port},
			{Key: "MOSAIC_BYTES_OUT", Value: strconv.FormatInt(up, 10)}, {Key: "MOSAIC_BYTES_IN", Value: strconv.FormatInt(down, 10)}}, extra...)...)
}

// printable bounds and cleans a value the session chose before it is
// logged or echoed: no control characters, at most 256 bytes.
func printable(s string) string {
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, s)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sessionSays is a refusal's body: it names the session, for an agent to
// tell its user which session it is in.
func (e *Egress) sessionSays(why string) string {
	return "mosaic egress: session " + e.Session + ": " + why
}

// AllowLine is the command that grants the session "host:port" hp: the
// port only when it is not 443, as `mosaic allow` reads it.
func (e *Egress) AllowLine(hp string) string {
	return AllowLine(e.Session, hp)
}

// AllowLine is the command that grants session name "host:port" hp, the
// port only when it is not the default.
func AllowLine(name, hp string) string {
	return "mosaic allow " + name + " " + strings.TrimSuffix(hp, ":443")
}

// httpsHint points a plain HTTP request's refusal at the grant HTTPS to its
// host would need, when that host is not allowed already.
func (e *Egress) httpsHint(target string) string {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	hp, err := NormalizeHost(host)
	if err != nil || e.hostAllowed(hp) {
		return ""
	}
	return " (and for HTTPS to it, run on the host: " + e.AllowLine(hp) + ")"
}

// forbid answers a refusal the user can lift: 403 with the message, naming
// the session and the command that grants it, as the body and as the
// reason phrase too, since clients print one or the other and many only
// the phrase (Go's http.Transport makes a CONNECT's phrase its error,
// npm and curl -v print it).
func (e *Egress) forbid(c net.Conn, why string) {
	msg := e.sessionSays(why)
	phrase := "Forbidden: " + msg
	if len(phrase) > maxPhrase {
		phrase = phrase[:maxPhrase] + "..."
	}
	refusePhrase(c, http.StatusForbidden, phrase, msg)
}

// maxPhrase bounds a reason phrase: clients keep a status line in a buffer
// of their own (curl's is 100 KiB, Go's the head's whole size), and one
// refusal names a few addresses at most.
const maxPhrase = 1024

// check checks target against the allowlist and returns it as
// "host:port", or why not and the kind of refusal (with the "host:port"
// of a name that is not listed, which --ask may hold).
func (e *Egress) check(target string) (hp, why, kind string) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return "", fmt.Sprintf("%q is not HOST:PORT", printable(target)), RefusedNotListed
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "", fmt.Sprintf("%s is an IP address: connections go to names on the allowlist only", printable(host)), RefusedNotListed
	}
	hp, err = NormalizeHost(target)
	if err != nil {
		return "", fmt.Sprintf("%q is not a host name", printable(target)), RefusedNotListed
	}
	if !e.hostAllowed(hp) {
		return hp, fmt.Sprintf("%s is not on the session's allowlist (to allow it, run on the host: %s)", hp, e.AllowLine(hp)), RefusedNotListed
	}
	return hp, "", ""
}

// takenBack is the refusal of a host whose grant ended, or was denied,
// while the proxy was connecting to it.
func takenBack(hp string) string {
	return hp + " was taken off the session's allowlist while the proxy connected to it"
}

// dial resolves the allowed "host:port" hp and connects to the first of
// its addresses that is not special (or that the list names), or says why
// not.
func (e *Egress) dial(ctx context.Context, hp string) (net.Conn, string) {
	c, why, _ := e.dialWhy(ctx, hp)
	return c, why
}

// dialWhy is dial, also telling the kind of refusal.
func (e *Egress) dialWhy(ctx context.Context, hp string) (net.Conn, string, string) {
	host, port, _ := net.SplitHostPort(hp)
	lookup := e.Lookup
	if lookup == nil {
		lookup = func(ctx context.Context, h string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
		}
	}
	addrs, err := lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return nil, fmt.Sprintf("cannot resolve %s: %v", host, err), RefusedUnreachable
	}
	kind := RefusedUnreachable
	var reasons []string
	timeout := e.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	d := net.Dialer{Timeout: timeout}
	for _, ip := range addrs {
		// Go's resolver returns an A record as an IPv4-mapped address, and
		// the kernel connects to a mapped address over IPv4: it is checked
		// as the IPv4 address it is.
		ip = ip.Unmap()
		if why := e.refusal(ip); why != "" {
			reasons = append(reasons, fmt.Sprintf("%s resolves to %s, %s (allow it explicitly with --allow-host %s, or on the host: mosaic allow %s %s)", host, ip, why, ip, e.Session, ip))
			kind = RefusedSpecial
			continue
		}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(ip.String(), port))
		if err != nil {
			reasons = append(reasons, fmt.Sprintf("%s (%s): %v", host, ip, err))
			continue
		}
		return conn, "", ""
	}
	return nil, strings.Join(reasons, "; "), kind
}

func refuse(c net.Conn, status int, msg string) {
	refusePhrase(c, status, http.StatusText(status), msg)
}

// refusePhrase is refuse with a reason phrase of its own, made one line.
func refusePhrase(c net.Conn, status int, phrase, msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return '?'
			}
			return r
		}, phrase), len(msg)+1, msg)
}

// tunnel copies both ways until both directions are done, or the tunnel
// has been quiet for IdleTimeout (HalfOpenTimeout once one direction is
// done); in is what the client sent after its request, already buffered.
// why says how it ended when that was a timeout.
func (e *Egress) tunnel(client net.Conn, in io.Reader, remote net.Conn) (up, down int64, why string) {
	t := &quiet{conns: [2]net.Conn{client, remote}, idle: e.Limits.IdleTimeout, halfOpen: e.Limits.HalfOpenTimeout}
	t.touch()
	var wg sync.WaitGroup
	var upErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		up, upErr = t.copy(remote, in, client)
	}()
	down, downErr := t.copy(client, remote, remote)
	wg.Wait()
	if isTimeout(upErr) || isTimeout(downErr) {
		why = " for being quiet too long"
	}
	return up, down, why
}

// quiet tracks a tunnel's last byte, to close it when it has been quiet
// too long. Each read waits at most until the tunnel would be too quiet; a
// read that times out while the other direction kept the tunnel busy
// waits again.
type quiet struct {
	conns          [2]net.Conn
	idle, halfOpen time.Duration
	last           atomic.Int64 // unix nanoseconds of the last byte either way
	done           atomic.Int32 // directions finished
	aborted        atomic.Bool  // abort ended the tunnel: a timeout now is its, not quiet's
}

func (q *quiet) touch() { q.last.Store(time.Now().UnixNano()) }

func (q *quiet) limit() time.Duration {
	if q.done.Load() > 0 {
		return q.halfOpen
	}
	return q.idle
}

// copy copies from src (read through srcConn's deadline) to dst: by
// splice(2) when src is srcConn itself and both are the kernel's sockets
// (the tunnel's download, the way most of its bytes go), through a buffer
// otherwise (what the session sends, read through the SNI gate).
func (q *quiet) copy(dst net.Conn, src io.Reader, srcConn net.Conn) (int64, error) {
	m := newMover(dst, src, srcConn)
	defer m.close()
	var n int64
	for {
		_ = srcConn.SetReadDeadline(time.Unix(0, q.last.Load()).Add(q.limit()))
		if q.aborted.Load() { // after the deadline: an abort since set its own, now
			return n, nil
		}
		k, err := m.read()
		if k > 0 {
			q.touch()
			_ = dst.SetWriteDeadline(time.Now().Add(q.limit()))
			if werr := m.write(k); werr != nil {
				q.abort()
				return n, werr
			}
			n += int64(k)
			q.touch()
		}
		if err == nil {
			continue
		}
		if isTimeout(err) && !q.aborted.Load() && time.Since(time.Unix(0, q.last.Load())) < q.limit() {
			continue
		}
		if err == io.EOF {
			// This direction is over; the other now has HalfOpenTimeout.
			acceptloop.CloseWrite(dst)
			q.done.Add(1)
			for _, c := range q.conns {
				_ = c.SetReadDeadline(time.Unix(0, q.last.Load()).Add(q.halfOpen))
			}
			return n, nil
		}
		q.abort()
		return n, err
	}
}

// abort ends both directions: the other copy's read returns at once, and
// does not wait again as after a timeout of its own (a deny closed the
// session's side; the proxy's connection to the host stayed open until
// the tunnel had been quiet for IdleTimeout).
func (q *quiet) abort() {
	q.aborted.Store(true)
	for _, c := range q.conns {
		_ = c.SetDeadline(time.Now())
	}
}
