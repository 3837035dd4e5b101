package egress

import (
	"io"
	"net"
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
	target := "granted.test:" + port
	if _, err := lt.e.grant([]string{target}, 0, "tester"); err != nil {
		t.Fatal(err)
	}
	st, tunnel := lt.open(t, target)
	if tunnel == nil {
		t.Fatalf("CONNECT: %q", st)
	}
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
