package egress

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serveProxy runs e on a local socket and returns a dialer for it.
func serveProxy(t *testing.T, e *Egress) func() net.Conn {
	t.Helper()
	l, err := net.Listen("unix", t.TempDir()+"/proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go e.Serve(l)
	return func() net.Conn {
		c, err := net.Dial("unix", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// serveLoopback listens on a loopback port, which it returns, and hands
// each connection to handle, until the test ends.
func serveLoopback(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	_, port, _ := net.SplitHostPort(srv.Addr().String())
	return port
}

// loopbackHost is a test "internet" host on loopback, named host.test and
// allowed explicitly, whose connections go to handle.
func loopbackHost(t *testing.T, handle func(net.Conn)) (*Egress, string) {
	t.Helper()
	port := serveLoopback(t, handle)
	al, err := ParseAllow([]string{"host.test:" + port, "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return &Egress{Session: "s1", Allow: al, Lookup: func(_ context.Context, h string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}}, "host.test:" + port
}

// TestHugeHead (issue 14, item 8): a session sending a request head of up
// to 64 MiB without a newline is answered 431 after MaxHeadBytes, and the
// proxy's heap stays under 20 MiB meanwhile. The weakened proxy (a limit
// of 1 GiB, like none) shows the measurement catches the growth.
func TestHugeHead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limit    int
		want431  bool
		heapOver bool
	}{{"bounded", 0, true, false}, {"weakened", 1 << 30, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			e, target := loopbackHost(t, func(c net.Conn) { c.Close() })
			e.Limits = Limits{MaxHeadBytes: tc.limit, HeadTimeout: 20 * time.Second}
			dial := serveProxy(t, e)
			runtime.GC()
			var base runtime.MemStats
			runtime.ReadMemStats(&base)
			var peak atomic.Uint64
			stop := make(chan struct{})
			sampled := make(chan struct{})
			go func() {
				defer close(sampled)
				for {
					var m runtime.MemStats
					runtime.ReadMemStats(&m)
					if m.HeapAlloc > peak.Load() {
						peak.Store(m.HeapAlloc)
					}
					select {
					case <-stop:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
			}()
			c := dial()
			answer := make(chan string, 1)
			go func() {
				b, _ := io.ReadAll(c)
				answer <- string(b)
			}()
			io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\nX-Junk: ")
			chunk := []byte(strings.Repeat("a", 64<<10))
			sent := 0
			for sent < 64<<20 {
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				n, err := c.Write(chunk)
				sent += n
				if err != nil {
					break
				}
			}
			if !tc.want431 {
				c.(*net.UnixConn).CloseWrite()
			}
			var got string
			select {
			case got = <-answer:
			case <-time.After(30 * time.Second):
				t.Fatal("no answer")
			}
			close(stop)
			<-sampled
			grown := peak.Load() - min(peak.Load(), base.HeapAlloc)
			t.Logf("sent %d MiB; heap grew by %.1f MiB; answer %.60q", sent>>20, float64(grown)/(1<<20), got)
			if tc.want431 && !strings.HasPrefix(got, "HTTP/1.1 431 ") {
				t.Errorf("answer %.80q, want 431", got)
			}
			if over := grown > 20<<20; over != tc.heapOver {
				t.Errorf("heap grew by %d bytes; over 20 MiB: %v, want %v", grown, over, tc.heapOver)
			}
		})
	}
}

// TestSpecialRanges (issue 14, item 9): a name resolving into any IANA
// special-purpose range, or to an IPv6 address carrying an IPv4 address of
// one, is refused unless the allowlist names that address or range; public
// addresses pass.
func TestSpecialRanges(t *testing.T) {
	refused := []string{
		"0.0.0.0", "0.1.2.3", "10.1.2.3", "100.64.0.1", "100.127.255.254", "127.0.0.1", "127.255.255.254", "169.254.169.254",
		"172.16.0.1", "172.31.255.255", "192.0.0.1", "192.0.0.170", "192.0.2.1", "192.31.196.1", "192.52.193.1", "192.88.99.1", "192.168.1.1",
		"192.175.48.1", "198.18.0.1", "198.19.255.255", "198.51.100.7", "203.0.113.9", "224.0.0.1", "239.255.255.250", "240.0.0.1",
		"255.255.255.254", "255.255.255.255",
		"::", "::1", "::127.0.0.1", "::8.8.8.8", "::ffff:127.0.0.1", "::ffff:8.8.8.8", "::ffff:0:8.8.8.8", "64:ff9b::7f00:1", "64:ff9b::8.8.8.8",
		"64:ff9b:1::1", "100::1", "2001::1", "2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001:2::1", "2001:1ff::1", "2001:db8::1", "2002:7f00:1::1",
		"2002:808:808::1", "2620:4f:8000::1", "3fff::1", "5f00::1", "fc00::1", "fd00:ec2::254", "fe80::1", "fec0::1", "ff02::1",
	}
	public := []string{"8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "192.0.1.1", "198.17.255.255", "198.20.0.0", "223.255.255.255",
		"2606:4700:4700::1111", "2a00:1450:4001::1", "2001:200::1", "2003::1"}
	var none Allow
	for _, s := range refused {
		if why := none.refusal(netip.MustParseAddr(s)); why == "" {
			t.Errorf("%s passes", s)
		}
	}
	for _, s := range public {
		if why := none.refusal(netip.MustParseAddr(s)); why != "" {
			t.Errorf("%s refused: %s", s, why)
		}
	}
	// Named explicitly, an address or range passes; the IPv4 address an
	// IPv6 one carries is checked too.
	for _, tc := range []struct {
		allow []string
		ip    string
		pass  bool
	}{
		{[]string{"198.51.100.0/24"}, "198.51.100.7", true},
		{[]string{"127.0.0.1"}, "127.0.0.1", true},
		{[]string{"127.0.0.1"}, "127.0.0.2", false},
		{[]string{"64:ff9b::/96"}, "64:ff9b::8.8.8.8", true},
		{[]string{"64:ff9b::/96"}, "64:ff9b::127.0.0.1", false},
		{[]string{"64:ff9b::/96"}, "64:ff9b::169.254.169.254", false},
		{[]string{"64:ff9b::/96", "10.0.0.0/8"}, "64:ff9b::10.1.2.3", true},
		{[]string{"2002::/16"}, "2002:808:808::1", true},
		{[]string{"2002::/16"}, "2002:7f00:1::1", false},
		{[]string{"2001::/32"}, "2001:0:4136:e378:8000:63bf:f7f7:f7f7", true},  // client 8.8.8.8, inverted
		{[]string{"2001::/32"}, "2001:0:4136:e378:8000:63bf:80ff:fffe", false}, // client 127.0.0.1, inverted
		{[]string{"2001::/32"}, "2001:0:a9fe:a9fe::1", false},                  // server 169.254.169.254
		{[]string{"::/96"}, "::127.0.0.1", false},
		{[]string{"::ffff:0:0/96"}, "::ffff:10.0.0.1", false},
		{[]string{"fc00::/7"}, "fd00::1", true},
	} {
		a, err := ParseAllow(tc.allow)
		if err != nil {
			t.Fatal(err)
		}
		if why := a.refusal(netip.MustParseAddr(tc.ip)); (why == "") != tc.pass {
			t.Errorf("allow %v, %s: refusal %q, want pass %v", tc.allow, tc.ip, why, tc.pass)
		}
	}
	// Through the proxy: a name resolving to each is refused with 403. (A
	// mapped public address is dialed as the public IPv4 address it is:
	// left out, as no test may leave the machine.)
	names := map[string]string{}
	for i, s := range refused {
		if none.refusal(netip.MustParseAddr(s).Unmap()) == "" {
			continue
		}
		names["n"+string(rune('a'+i%26))+strings.Repeat("x", i/26)+".test"] = s
	}
	var allow []string
	for n := range names {
		allow = append(allow, n)
	}
	dial, _ := egressTest(t, allow, names)
	for n, ip := range names {
		st, rest := connect(t, dial(), n+":443")
		if !strings.Contains(st, " 403 ") || !strings.Contains(rest, "allow it explicitly") {
			t.Errorf("%s (%s): %q %q", n, ip, st, rest)
		}
	}
}

// TestIdleAndHalfOpen: a client that sends no whole head is answered 408
// after HeadTimeout; a tunnel quiet for IdleTimeout is closed, and so is
// one whose client finished sending and whose host then stays quiet for
// HalfOpenTimeout; a tunnel that keeps talking is not.
func TestIdleAndHalfOpen(t *testing.T) {
	e, target := loopbackHost(t, func(c net.Conn) {
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				time.Sleep(time.Hour) // never closes its side: half-open
				return
			}
			if strings.HasPrefix(line, "talk") {
				for i := 0; i < 10; i++ {
					io.WriteString(c, "tick\n")
					time.Sleep(50 * time.Millisecond)
				}
				io.WriteString(c, "done\n")
			}
		}
	})
	e.Limits = Limits{HeadTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond, HalfOpenTimeout: 200 * time.Millisecond}
	dial := serveProxy(t, e)
	closedWithin := func(c net.Conn, d time.Duration) (string, bool) {
		c.SetReadDeadline(time.Now().Add(d))
		b, err := io.ReadAll(c)
		return string(b), err == nil
	}
	open := func() net.Conn {
		c := dial()
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		line, _ := bufio.NewReader(io.LimitReader(c, int64(len("HTTP/1.1 200 Connection established\r\n\r\n")))).ReadString(0)
		if !strings.Contains(line, " 200 ") {
			t.Fatalf("CONNECT: %q", line)
		}
		return c
	}
	t.Run("head", func(t *testing.T) {
		c := dial()
		io.WriteString(c, "CONNECT "+target)
		if got, ok := closedWithin(c, 2*time.Second); !ok || !strings.Contains(got, " 408 ") {
			t.Errorf("slow head: %q closed %v", got, ok)
		}
	})
	t.Run("idle", func(t *testing.T) {
		start := time.Now()
		if _, ok := closedWithin(open(), 3*time.Second); !ok {
			t.Error("an idle tunnel stays open")
		}
		if d := time.Since(start); d < 250*time.Millisecond {
			t.Errorf("closed after %s, before the idle timeout", d)
		}
	})
	t.Run("half-open", func(t *testing.T) {
		c := open()
		c.(*net.UnixConn).CloseWrite()
		if _, ok := closedWithin(c, 3*time.Second); !ok {
			t.Error("a half-open tunnel stays open")
		}
	})
	t.Run("busy", func(t *testing.T) {
		c := open()
		io.WriteString(c, "talk\n")
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("a talking tunnel was closed: %v", err)
			}
			if line == "done\n" {
				break
			}
		}
	})
}

// TestMaxConns: past MaxConns open connections, one more is answered 503;
// once one closes there is room again.
func TestMaxConns(t *testing.T) {
	e, target := loopbackHost(t, func(c net.Conn) { time.Sleep(time.Hour) })
	e.Limits = Limits{MaxConns: 3, HalfOpenTimeout: 100 * time.Millisecond}
	dial := serveProxy(t, e)
	var held []net.Conn
	for i := 0; i < 3; i++ {
		c := dial()
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if line, _ := bufio.NewReader(c).ReadString('\n'); !strings.Contains(line, " 200 ") {
			t.Fatalf("tunnel %d: %q", i, line)
		}
		held = append(held, c)
	}
	c := dial()
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if b, _ := io.ReadAll(c); !strings.Contains(string(b), " 503 ") {
		t.Errorf("connection past the cap: %q", b)
	}
	held[0].Close()
	deadline := time.Now().Add(3 * time.Second)
	for {
		c := dial()
		io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		if strings.Contains(line, " 200 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room once a tunnel closed: %q", line)
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
}

// emfileOnce is a listener whose first Accept fails as a process out of
// descriptors sees it (EMFILE).
type emfileOnce struct {
	net.Listener
	failed atomic.Bool
}

func (l *emfileOnce) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestServeOutlivesEMFILE: an Accept that fails (EMFILE: the proxy out of
// descriptors for a moment) does not end the proxy's loop, as it did
// before acceptloop, with the proxy up and nothing listening: the
// connection made meanwhile is answered.
func TestServeOutlivesEMFILE(t *testing.T) {
	l, err := net.Listen("unix", t.TempDir()+"/proxy.sock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e, _ := loopbackHost(t, func(c net.Conn) { c.Close() })
	go e.Serve(&emfileOnce{Listener: l})
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "CONNECT elsewhere.test:443 HTTP/1.1\r\nHost: elsewhere.test:443\r\n\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 403") {
		t.Fatalf("after an EMFILE the proxy answered %q (%v), want its refusal of a host not allowed", line, err)
	}
}
