// Package publish makes ports a session listens on reachable from the host
// (--publish [ADDR:]HOSTPORT[:PORT], as docker run -p), without giving the
// session any way out of its network namespace.
//
// Two halves meet at one unix socket. The forwarder, a unit beside the
// session (mosaic-NAME-publish.service, in the host's network), listens on
// each ADDR:HOSTPORT and on a socket in a directory that is bound read-only
// into the session. The session's init connects to that socket and keeps a
// few connections there idle: offers. When a host client connects, the
// forwarder takes an idle offer and writes the session port it is for (two
// bytes); the init then connects to 127.0.0.1:PORT in the session's own
// network namespace and relays. The forwarder decides every port; all the
// session can do through the socket is offer connections and answer the
// ones it is given. Nothing the session sends makes the forwarder connect
// anywhere, and the session reaches nothing of the host through it.
//
// What the session sends is hostile input to the forwarder: it is only
// relayed to the host client it was asked for, never parsed. The forwarder
// keeps at most MaxIdle offers (more are closed at once) and MaxConns
// relayed connections (one more is closed), each with fixed buffers, and
// closes a relay quiet for IdleTimeout.
package publish

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/acceptloop"
)

// A Port is one --publish: the host's Addr:HostPort leads to the session's
// 127.0.0.1:Port.
type Port struct {
	Addr     string `json:"addr"`
	HostPort int    `json:"host_port"`
	Port     int    `json:"port"`
}

// DefaultAddr is where a published port listens when no ADDR is given: the
// host's loopback, as reachable as the session's own ports are from inside.
const DefaultAddr = "127.0.0.1"

// Parse reads [ADDR:]HOSTPORT[:PORT]: "8000" (8000 to 8000), "8080:8000",
// "127.0.0.1:8080:8000", "[::1]:8080:8000", "0.0.0.0:8000" (an ADDR is told
// from a HOSTPORT by being an IP address).
func Parse(v string) (Port, error) {
	rest, addr := v, DefaultAddr
	if strings.HasPrefix(rest, "[") {
		end := strings.Index(rest, "]:")
		if end < 0 {
			return Port{}, fmt.Errorf("%q: an IPv6 ADDR is written [ADDR]:HOSTPORT", v)
		}
		addr, rest = rest[1:end], rest[end+2:]
		if ip := net.ParseIP(addr); ip == nil || ip.To4() != nil {
			return Port{}, fmt.Errorf("%q: %s is not an IPv6 address", v, addr)
		}
	} else if a, r, ok := strings.Cut(rest, ":"); ok && net.ParseIP(a) != nil {
		addr, rest = a, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) > 2 {
		return Port{}, fmt.Errorf("%q: want [ADDR:]HOSTPORT[:PORT]", v)
	}
	p := Port{Addr: addr}
	var err error
	if p.HostPort, err = port(parts[0]); err != nil {
		return Port{}, fmt.Errorf("%q: %w", v, err)
	}
	p.Port = p.HostPort
	if len(parts) == 2 {
		if p.Port, err = port(parts[1]); err != nil {
			return Port{}, fmt.Errorf("%q: %w", v, err)
		}
	}
	return p, nil
}

func port(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return 0, fmt.Errorf("%q is not a port (1-65535)", s)
	}
	return n, nil
}

// HostAddr is where the forwarder listens.
func (p Port) HostAddr() string { return net.JoinHostPort(p.Addr, strconv.Itoa(p.HostPort)) }

// String is how status shows it: "127.0.0.1:8080 -> 8000".
func (p Port) String() string { return p.HostAddr() + " -> " + strconv.Itoa(p.Port) }

// Spec is the argument of the forwarder's and the init's command lines:
// ADDR,HOSTPORT,PORT (no colon, so that IPv6 needs no brackets).
func (p Port) Spec() string {
	return p.Addr + "," + strconv.Itoa(p.HostPort) + "," + strconv.Itoa(p.Port)
}

// ParseSpec reads Spec.
func ParseSpec(s string) (Port, error) {
	f := strings.Split(s, ",")
	if len(f) != 3 || net.ParseIP(f[0]) == nil {
		return Port{}, fmt.Errorf("bad published port %q", s)
	}
	h, err1 := port(f[1])
	p, err2 := port(f[2])
	if err1 != nil || err2 != nil {
		return Port{}, fmt.Errorf("bad published port %q", s)
	}
	return Port{Addr: f[0], HostPort: h, Port: p}, nil
}

// SocketName is the forwarder's socket in its directory, which the session
// sees read-only at DirInside.
const (
	SocketName   = "publish.sock"
	DirInside    = "/run/mosaic/publish"
	SocketInside = DirInside + "/" + SocketName
)

// The forwarder's bounds.
const (
	MaxIdle     = 16               // offers kept waiting; the init keeps Offers
	Offers      = 4                // idle offers the init keeps
	MaxConns    = 256              // connections relayed at once
	IdleTimeout = 10 * time.Minute // a relay quiet both ways this long is closed
	OfferWait   = 10 * time.Second // how long a host client waits for an offer
)

// Stage is the hidden mosaic stage the forwarder unit runs.
const Stage = "publish"

// Argv is the forwarder's command line.
func Argv(mosaicBin, session, socket string, ports []Port) []string {
	argv := []string{mosaicBin, Stage, session, socket}
	for _, p := range ports {
		argv = append(argv, p.Spec())
	}
	return argv
}

// Main is the forwarder: SESSION SOCKET PORTSPEC...; it listens on every
// port and the socket, says it is ready, and serves until SIGTERM.
func Main(args []string, ready func()) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "mosaic publish: want SESSION SOCKET ADDR,HOSTPORT,PORT...")
		return 2
	}
	session, socket := args[0], args[1]
	f := &forwarder{idle: make(chan net.Conn, MaxIdle), slots: make(chan struct{}, MaxConns)}
	var listeners []net.Listener
	for _, a := range args[2:] {
		p, err := ParseSpec(a)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mosaic publish: session %s: %v\n", session, err)
			return 2
		}
		l, err := net.Listen("tcp", p.HostAddr())
		if err != nil {
			fmt.Fprintf(os.Stderr, "mosaic publish: session %s: cannot listen on %s: %v\n", session, p.HostAddr(), err)
			return 1
		}
		listeners = append(listeners, l)
		go f.serveHost(l, p)
	}
	_ = os.Remove(socket) // a dead forwarder's, in a directory of mosaic's own
	offers, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic publish: session %s: %v\n", session, err)
		return 1
	}
	offers.SetUnlinkOnClose(true)
	defer offers.Close()
	go f.takeOffers(offers)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	for _, p := range args[2:] {
		fmt.Fprintf(os.Stderr, "mosaic publish: session %s: publishing %s\n", session, strings.ReplaceAll(p, ",", " "))
	}
	ready()
	<-term
	for _, l := range listeners {
		l.Close()
	}
	return 0
}

type forwarder struct {
	idle  chan net.Conn // the session's offers
	slots chan struct{} // one per relayed connection
}

// takeOffers keeps the session's offers, at most MaxIdle.
func (f *forwarder) takeOffers(l *net.UnixListener) {
	_ = acceptloop.Serve(l, func(c net.Conn) {
		select {
		case f.idle <- c:
		default:
			c.Close()
		}
	})
}

// serveHost relays each host client of p to an offer.
func (f *forwarder) serveHost(l net.Listener, p Port) {
	_ = acceptloop.Serve(l, func(c net.Conn) {
		select {
		case f.slots <- struct{}{}:
		default:
			c.Close()
			return
		}
		go func() {
			defer func() { <-f.slots }()
			defer c.Close()
			o := f.offer(p.Port)
			if o == nil {
				return
			}
			defer o.Close()
			relay(c, o)
		}()
	})
}

// offer takes an idle offer and asks it for port, or nil when none came in
// time.
func (f *forwarder) offer(port int) net.Conn {
	deadline := time.After(OfferWait)
	for {
		select {
		case o := <-f.idle:
			var b [2]byte
			binary.BigEndian.PutUint16(b[:], uint16(port))
			_ = o.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := o.Write(b[:]); err != nil {
				o.Close()
				continue // an offer the session gave up
			}
			_ = o.SetWriteDeadline(time.Time{})
			return o
		case <-deadline:
			return nil
		}
	}
}

// relay copies both ways until both are done, or nothing passed for
// IdleTimeout.
func relay(a, b net.Conn) {
	var last sync.Mutex
	seen := time.Now()
	touch := func() { last.Lock(); seen = time.Now(); last.Unlock() }
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				touch()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	tick := time.NewTicker(IdleTimeout / 10)
	defer tick.Stop()
	for n := 0; n < 2; {
		select {
		case <-done:
			n++
		case <-tick.C:
			last.Lock()
			quiet := time.Since(seen)
			last.Unlock()
			if quiet > IdleTimeout {
				a.Close()
				b.Close()
			}
		}
	}
}

// Offer is the session's half, run by its init: it keeps Offers connections
// to the forwarder's socket idle, and connects each one it is given a port
// on to 127.0.0.1:PORT (then [::1]:PORT) of the session's own network, for
// ports among allowed only. A forwarder that is not there yet is tried again
// each second.
func Offer(socket string, allowed []int) {
	ok := map[int]bool{}
	for _, p := range allowed {
		ok[p] = true
	}
	for i := 0; i < Offers; i++ {
		go offerLoop(socket, ok)
	}
}

func offerLoop(socket string, allowed map[int]bool) {
	for {
		c, err := net.Dial("unix", socket)
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		var b [2]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			c.Close()
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go answer(c, int(binary.BigEndian.Uint16(b[:])), allowed)
	}
}

func answer(c net.Conn, port int, allowed map[int]bool) {
	defer c.Close()
	if !allowed[port] {
		return
	}
	p := strconv.Itoa(port)
	s, err := net.Dial("tcp", "127.0.0.1:"+p)
	if err != nil {
		if s, err = net.Dial("tcp", "[::1]:"+p); err != nil {
			return // nothing listens: the host client sees the connection closed
		}
	}
	defer s.Close()
	relay(c, s)
}
