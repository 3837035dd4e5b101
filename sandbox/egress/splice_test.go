package egress

import (
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// sendBuffer is c's SO_SNDBUF as the kernel reports it (twice what was set).
func sendBuffer(t *testing.T, c net.Conn) int {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size int
	var serr error
	if err := raw.Control(func(fd uintptr) { size, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	return size
}

// pair is both ends of a connection on l.
func pair(t *testing.T, l net.Listener) (near, far net.Conn) {
	far, err := net.Dial(l.Addr().Network(), l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	near, err = l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { near.Close(); far.Close() })
	return near, far
}

// A download spliced into the session's unix socket grows that socket's
// send buffer to a pipe's worth, so that a splice goes over whole; a
// download into a TCP socket leaves its buffer to the kernel. (With
// growSendBuffer left out, the unix socket stays at wmem_default; called
// for any socket, the TCP one's autotuning ends at 2 MiB.)
func TestSpliceGrowsTheSessionSocketsBuffer(t *testing.T) {
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.Close()
	ul, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	uDst, uFar := pair(t, ul)
	tDst, tFar := pair(t, tl)
	for _, c := range []struct {
		name     string
		dst, far net.Conn
		grow     bool
	}{{"unix", uDst, uFar, true}, {"tcp", tDst, tFar, false}} {
		src, host := pair(t, tl)
		before := sendBuffer(t, c.dst)
		m := newMover(c.dst, src, src)
		if _, ok := m.(*pipeMover); !ok {
			t.Fatalf("%s: a %T, want a pipeMover", c.name, m)
		}
		go func() { _, _ = host.Write(make([]byte, 256<<10)); host.Close() }()
		go func() { _, _ = io.Copy(io.Discard, c.far) }()
		for {
			k, err := m.read()
			if k > 0 {
				if werr := m.write(k); werr != nil {
					t.Fatal(werr)
				}
			}
			if err != nil {
				break
			}
		}
		m.close()
		after := sendBuffer(t, c.dst)
		// The kernel keeps twice what was set: exactly that is the size set
		// here; a TCP socket's own size is what its autotuning made it.
		if set := after == 2*spliceChunk; set != c.grow {
			t.Errorf("%s: send buffer %d -> %d after a download; set to %d here: %v, want %v", c.name, before, after, spliceChunk, set, c.grow)
		}
	}
}
