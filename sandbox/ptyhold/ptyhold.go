// Package ptyhold is the holder of a background session's terminal (mosaic
// start --pty) and the client side of `mosaic attach`. The session gets the
// slave side of a pseudo-terminal mosaic made; the holder, a unit of its own
// beside the session (mosaic-NAME-pty.service), gets the master side as its
// stdin and keeps it while the session runs: it reads what the session
// prints into a bounded ring while nobody is attached, and hands the master
// to one attaching client at a time over a unix socket in the user's runtime
// directory, which no session can see. The client then relays the master to
// the user's terminal itself, as `mosaic run --pty` does: the session never
// touches the user's terminal, and the holder never reads the user's keys.
//
// What the session prints is hostile input to the holder: it only ever goes
// into a fixed ring (never parsed, never grown), and to the attached client.
// A connection is served only when its peer is the holder's own user
// (SO_PEERCRED), and one at a time; any other is closed at once.
package ptyhold

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/acceptloop"
)

// Stage is the hidden mosaic stage the holder unit runs:
// `mosaic pty-holder SESSION SOCKET`, with the master on stdin.
const Stage = "pty-holder"

// RingSize is how much of what the session printed last the holder keeps
// for the next client to see first: a screenful or two of a shell, and the
// tail of a TUI's last redraw.
const RingSize = 64 << 10

// Argv is the holder's command line.
func Argv(mosaicBin, session, socket string) []string {
	return []string{mosaicBin, Stage, session, socket}
}

// Main is the holder: it listens on socket, says it is ready, and serves
// until the session's side of the terminal is gone (read gives EIO) or it
// gets SIGTERM. It returns the exit code.
func Main(args []string, ready func()) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "mosaic pty-holder: want SESSION SOCKET")
		return 2
	}
	session, socket := args[0], args[1]
	master, err := masterOnStdin()
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic pty-holder: session %s: %v\n", session, err)
		return 1
	}
	h := &holder{master: master, ring: newRing(RingSize), attached: make(chan struct{}, 1), text: &plain{out: os.Stdout}}
	_ = os.Remove(socket) // a dead holder's, in a directory of mosaic's own
	old := unix.Umask(0o177)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	unix.Umask(old)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mosaic pty-holder: session %s: %v\n", session, err)
		return 1
	}
	l.SetUnlinkOnClose(true)
	defer l.Close()
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGINT, unix.SIGHUP)
	ended := make(chan struct{})
	go func() { h.drain(); close(ended) }()
	go h.serve(l)
	ready()
	select {
	case <-ended:
		return 0
	case <-term:
		return 0
	}
}

// masterOnStdin is fd 0 checked to be a pseudo-terminal's master side
// (only a master answers TIOCGPTN), non-blocking so that its reads can be
// cut short when a client takes it over.
func masterOnStdin() (*os.File, error) {
	if _, err := unix.IoctlGetInt(0, unix.TIOCGPTN); err != nil {
		return nil, fmt.Errorf("stdin is not a pseudo-terminal's master side: %w", err)
	}
	if err := releaseSlave(); err != nil {
		return nil, err
	}
	fd, err := unix.FcntlInt(0, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "pty-master"), nil
}

// releaseSlave gives up the terminal's slave side as this process's
// controlling terminal. systemd starts a service as a session leader that
// acquires the terminal on its stdin, and for a master the kernel makes
// that its slave (TIOCSCTTY, like TIOCGSID, acts on a master's peer): the
// session's init could then not make it its command's controlling terminal
// (EPERM, and the session ends with 127). TIOCNOTTY must be asked of the
// slave itself; the holder is not ready (and the session not started)
// before it is done.
func releaseSlave() error {
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, 0, unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return fmt.Errorf("cannot open the terminal's slave side: %w", errno)
	}
	slave := int(s)
	defer unix.Close(slave)
	if _, err := unix.IoctlGetInt(slave, unix.TIOCGSID); err != nil {
		return nil // not our controlling terminal
	}
	// A session leader letting go sends SIGHUP to its foreground group:
	// this process.
	signal.Ignore(unix.SIGHUP)
	defer signal.Reset(unix.SIGHUP)
	if err := unix.IoctlSetInt(slave, unix.TIOCNOTTY, 0); err != nil {
		return fmt.Errorf("cannot give up the session's terminal as the holder's own: %w", err)
	}
	if _, err := unix.IoctlGetInt(slave, unix.TIOCGSID); err == nil {
		return errors.New("the session's terminal is still the holder's controlling terminal")
	}
	return nil
}

type holder struct {
	master   *os.File
	mu       sync.Mutex
	ring     *ring
	text     *plain        // the journal's copy, as text lines (mosaic logs)
	attached chan struct{} // holds a token while a client has the master
	resume   chan struct{} // closed when that client is gone
}

// drain reads what the session prints while nobody is attached, into the
// ring and, as text lines, to the journal (stdout); while a client is, it
// waits. It returns when the session's side is gone.
func (h *holder) drain() {
	buf := make([]byte, 16<<10)
	defer h.text.Flush()
	for {
		h.mu.Lock()
		resume := h.resume
		h.mu.Unlock()
		if resume != nil {
			<-resume
			continue
		}
		n, err := h.master.Read(buf)
		if n > 0 {
			h.mu.Lock()
			h.ring.write(buf[:n])
			h.mu.Unlock()
			_, _ = h.text.Write(buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			continue // a client takes over: see serve
		}
		if err != nil {
			return // EIO: no process holds the session's side any more
		}
	}
}

// serve accepts clients, one attached at a time.
func (h *holder) serve(l *net.UnixListener) {
	_ = acceptloop.Serve(l, func(nc net.Conn) {
		c := nc.(*net.UnixConn)
		if !sameUser(c) {
			c.Close()
			return
		}
		select {
		case h.attached <- struct{}{}:
		default:
			_, _ = c.Write(refusal("the session's terminal is attached elsewhere: detach there first (Ctrl-P Ctrl-Q)"))
			c.Close()
			return
		}
		go h.attach(c)
	})
}

// sameUser reports whether the peer of c runs as this process's user.
func sameUser(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil || cerr != nil {
		return false
	}
	return cred.Uid == uint32(os.Getuid())
}

// attach hands the master to client c, with what the ring holds, and
// takes it back once c is gone.
func (h *holder) attach(c *net.UnixConn) {
	defer func() { <-h.attached }()
	defer c.Close()
	resume := make(chan struct{})
	h.mu.Lock()
	h.resume = resume
	h.mu.Unlock()
	_ = h.master.SetReadDeadline(time.Now()) // the drain lets go of it
	defer func() {
		_ = h.master.SetReadDeadline(time.Time{})
		h.mu.Lock()
		h.resume = nil
		h.mu.Unlock()
		close(resume)
	}()
	h.mu.Lock()
	replay := h.ring.bytes()
	h.mu.Unlock()
	if err := sendMaster(c, h.master, replay); err != nil {
		return
	}
	// The client sends nothing; its end (detach, exit, kill) is EOF.
	_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// The holder's answer to a client: a header of 1 + 4 bytes (kind, length),
// then length bytes: the replay, with the master as the header's
// SCM_RIGHTS, or a refusal's message.
const (
	kindMaster  = 'M'
	kindRefused = 'R'
	headerSize  = 5
)

func header(kind byte, n int) []byte {
	b := make([]byte, headerSize)
	b[0] = kind
	binary.BigEndian.PutUint32(b[1:], uint32(n))
	return b
}

func refusal(msg string) []byte { return append(header(kindRefused, len(msg)), msg...) }

func sendMaster(c *net.UnixConn, master *os.File, replay []byte) error {
	oob := unix.UnixRights(int(master.Fd()))
	if _, _, err := c.WriteMsgUnix(header(kindMaster, len(replay)), oob, nil); err != nil {
		return err
	}
	_, err := c.Write(replay)
	return err
}

// An Attachment is a client's hold of a session's terminal: its master
// side, and what the session printed last before it. Close gives the
// terminal back to the holder.
type Attachment struct {
	Master *os.File
	Replay []byte
	conn   *net.UnixConn // open while the client holds the master
}

// Close gives the terminal back.
func (a *Attachment) Close() error {
	a.Master.Close()
	return a.conn.Close()
}

// Dial connects to a holder's socket and takes the session's terminal. A
// refusal (another client holds it) is an error with the holder's message.
func Dial(socket string) (a *Attachment, err error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, headerSize)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := c.ReadMsgUnix(hdr, oob)
	if err != nil {
		return nil, err
	}
	if n < headerSize {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			return nil, err
		}
	}
	size := binary.BigEndian.Uint32(hdr[1:])
	if size > RingSize {
		return nil, fmt.Errorf("the holder sent %d bytes, more than it may", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		return nil, err
	}
	switch hdr[0] {
	case kindRefused:
		return nil, errors.New(string(body))
	case kindMaster:
	default:
		return nil, fmt.Errorf("the holder answered %q", hdr[0])
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, errors.New("the holder sent no terminal")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return nil, errors.New("the holder sent no terminal")
	}
	unix.CloseOnExec(fds[0])
	_ = c.SetReadDeadline(time.Time{})
	return &Attachment{Master: os.NewFile(uintptr(fds[0]), "pty-master"), Replay: body, conn: c}, nil
}

// A ring keeps the last bytes written to it, at most its size.
type ring struct {
	buf  []byte
	next int  // where the next byte goes
	full bool // buf has wrapped
}

func newRing(size int) *ring { return &ring{buf: make([]byte, size)} }

func (r *ring) write(p []byte) {
	if len(p) >= len(r.buf) {
		copy(r.buf, p[len(p)-len(r.buf):])
		r.next, r.full = 0, true
		return
	}
	n := copy(r.buf[r.next:], p)
	if n < len(p) {
		copy(r.buf, p[n:])
		r.full = true
	}
	r.next = (r.next + len(p)) % len(r.buf)
	if r.next == 0 && len(p) > 0 {
		r.full = true
	}
}

// bytes is what the ring holds, oldest first. Once it has wrapped, it
// starts after the first line end it holds, so that a client is not shown
// the tail of an escape sequence cut in half.
func (r *ring) bytes() []byte {
	if !r.full {
		return append([]byte(nil), r.buf[:r.next]...)
	}
	out := append(append([]byte(nil), r.buf[r.next:]...), r.buf[:r.next]...)
	for i, c := range out {
		if c == '\n' {
			return out[i+1:]
		}
	}
	return out
}
