package egress

import (
	"io"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// moveChunk is the most one read of a tunnel takes (a deadline and a
// write each, not many of each).
const moveChunk = 256 << 10

// spliceChunk is the same for a tunnel spliced: what a pipe of 1 MiB (the
// unprivileged most, /proc/sys/fs/pipe-max-size) holds.
const spliceChunk = 1 << 20

// A mover carries one direction of a tunnel: read takes up to a chunk
// from the source, write gives those k bytes to the destination whole.
// read's error is io.EOF at the source's end, as a Reader's.
type mover interface {
	read() (int, error)
	write(k int) error
	close()
}

// newMover is the mover from src to dst: a pipe the kernel splices
// through when src is srcConn and both it and dst are the kernel's
// sockets (no byte of a download is copied into the proxy: a plain
// tunnel's download is some 40% faster on loopback, make bench's network
// device figures), a buffer otherwise.
func newMover(dst net.Conn, src io.Reader, srcConn net.Conn) mover {
	if s, ok := src.(syscall.Conn); ok && src == io.Reader(srcConn) {
		if d, ok := dst.(syscall.Conn); ok {
			if m := newPipeMover(s, d); m != nil {
				return m
			}
		}
	}
	return &bufMover{src: src, dst: dst, buf: bufPool.Get().(*[]byte)}
}

// bufPool keeps the tunnels' buffers for the next: a new connection does
// not allocate (and the runtime zero) one of moveChunk bytes.
var bufPool = sync.Pool{New: func() any { b := make([]byte, moveChunk); return &b }}

type bufMover struct {
	src io.Reader
	dst io.Writer
	buf *[]byte
}

func (m *bufMover) read() (int, error) { return m.src.Read(*m.buf) }

func (m *bufMover) write(k int) error {
	_, err := m.dst.Write((*m.buf)[:k])
	return err
}

func (m *bufMover) close() { bufPool.Put(m.buf) }

// pipeMover splices from one socket into a pipe and from the pipe into
// the other, waiting for each through Go's poller, so that the sockets'
// deadlines hold as for a Read or Write.
type pipeMover struct {
	src, dst syscall.RawConn
	r, w     int  // the pipe's ends
	grown    bool // the pipe holds spliceChunk
	dstUnix  bool // dst is a unix socket (the session's end of the tunnel)
}

func newPipeMover(src, dst syscall.Conn) *pipeMover {
	s, err1 := src.SyscallConn()
	d, err2 := dst.SyscallConn()
	var p [2]int
	if err1 != nil || err2 != nil || unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK) != nil {
		return nil
	}
	_, dstUnix := dst.(*net.UnixConn)
	return &pipeMover{src: s, dst: d, r: p[0], w: p[1], dstUnix: dstUnix}
}

// splice runs call, one splice(2) with the socket's descriptor, until it
// moves something or fails, waiting for the socket's readiness through
// wait (a RawConn's Read or Write: the socket's deadline holds).
func splice(wait func(func(uintptr) bool) error, call func(fd int) (int64, error)) (int, error) {
	var k int64
	var serr error
	err := wait(func(fd uintptr) bool {
		for {
			k, serr = call(int(fd))
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err == nil {
		err = serr
	}
	return int(k), err
}

const spliceFlags = unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK

func (m *pipeMover) read() (int, error) {
	k, err := splice(m.src.Read, func(fd int) (int64, error) {
		return unix.Splice(fd, nil, m.w, nil, spliceChunk, spliceFlags)
	})
	if err == nil && k == 0 {
		return 0, io.EOF
	}
	if k >= 64<<10 && !m.grown {
		// A pipe is 64 KiB; one that filled it is a download: a larger
		// one takes fewer splices (growing it costs a new connection
		// that stays small some 0.1 ms, so only those that need it).
		m.grown = true
		_, _ = unix.FcntlInt(uintptr(m.w), unix.F_SETPIPE_SZ, spliceChunk)
		if m.dstUnix {
			growSendBuffer(m.dst)
		}
	}
	return k, err
}

func (m *pipeMover) write(k int) error {
	for k > 0 {
		w, err := splice(m.dst.Write, func(fd int) (int64, error) {
			return unix.Splice(m.r, nil, fd, nil, k, spliceFlags)
		})
		if err != nil {
			return err
		}
		k -= w
	}
	return nil
}

func (m *pipeMover) close() {
	_ = unix.Close(m.r)
	_ = unix.Close(m.w)
}

// growSendBuffer lets the unix socket c take a whole pipe's worth
// (spliceChunk) at once, where its default (net.core.wmem_default, 208
// KiB) took a fifth of each splice and woke the reader for each fifth
// (a download through the relay: a third fewer context switches, the
// speed.md figures). A TCP socket is left alone: the kernel sizes its
// buffer to the connection, and a size set by hand ends that.
func growSendBuffer(c syscall.RawConn) {
	_ = c.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, spliceChunk)
	})
}
