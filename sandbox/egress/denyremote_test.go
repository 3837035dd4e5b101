package egress

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestDenyClosesTheHostSide: a deny closes the session's side of a tunnel;
// the proxy's connection to the host goes too, at once, not once the
// tunnel has been quiet for IdleTimeout (10 minutes: the download's read
// took the abort's deadline for a timeout of its own and waited again,
// the tunnel having been busy a moment before).
func TestDenyClosesTheHostSide(t *testing.T) {
	closed := make(chan time.Time, 1)
	lt := newLiveTest(t)
	port := serveLoopback(t, func(c net.Conn) {
		io.WriteString(c, "hello\n")
		io.Copy(io.Discard, c) // until the proxy closes its side
		closed <- time.Now()
		c.Close()
	})
	target, tunnel := grantedTunnel(t, lt, port)
	defer tunnel.Close()
	io.WriteString(tunnel, "up\n")
	if n, err := lt.e.deny([]string{target}, "tester"); n != 1 || err != nil {
		t.Fatalf("deny: %d %v", n, err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Error("the proxy's connection to the host is still open 5 s after deny")
	}
}

// TestDenyClosesABlockedUpload: a tunnel whose upload waits on a host
// that reads nothing and sends nothing is ended by deny at once: deny
// closed only the session's side, which neither of the tunnel's copies
// was reading or writing then, so both waited (the download's read, the
// upload's write) with the host's connection open.
func TestDenyClosesABlockedUpload(t *testing.T) {
	lt := newLiveTest(t)
	held := make(chan struct{})
	port := serveLoopback(t, func(c net.Conn) { io.WriteString(c, "hello\n"); <-held; c.Close() })
	defer close(held)
	target, tunnel := grantedTunnel(t, lt, port)
	defer tunnel.Close()
	tunnel.SetDeadline(time.Time{})
	var sent atomic.Int64
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := tunnel.Write(buf)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	// Until every buffer on the way is full: the upload's write waits.
	for last := int64(-1); sent.Load() != last; time.Sleep(300 * time.Millisecond) {
		last = sent.Load()
	}
	if n, err := lt.e.deny([]string{target}, "tester"); n != 1 || err != nil {
		t.Fatalf("deny: %d %v", n, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(lt.log.String(), "tunnel to "+target+" closed") {
		if time.Now().After(deadline) {
			t.Fatalf("the tunnel is still open 5 s after deny (%d bytes sent); log:\n%s", sent.Load(), lt.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// grantedTunnel grants the test host at port to lt's proxy and opens a
// tunnel to it through the proxy, its first line read.
func grantedTunnel(t *testing.T, lt *liveTest, port string) (string, net.Conn) {
	t.Helper()
	target := "granted.test:" + port
	if _, err := lt.e.grant([]string{target}, 0, "tester"); err != nil {
		t.Fatal(err)
	}
	st, tunnel := lt.open(t, target)
	if tunnel == nil {
		t.Fatalf("CONNECT: %q", st)
	}
	return target, tunnel
}
