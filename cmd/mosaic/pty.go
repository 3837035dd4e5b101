package main

import (
	"io"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/termsafe"
)

// A terminal is the pseudo-terminal `mosaic run --pty` gives a session: the
// session gets the slave side as its stdin, stdout and stderr and never
// touches the user's real terminal; mosaic relays the master side to it, in
// raw mode, so that every key (Ctrl-C, Ctrl-Z, Ctrl-\ included) reaches the
// session's line discipline and through it the foreground process.
type terminal struct {
	master, slave *os.File
	in, out       *os.File
	saved         *unix.Termios // the user's terminal modes, restored at the end; nil when in is not a terminal
	winch         chan os.Signal
	drained       chan struct{} // the master side's output is all copied
	relayOnce     sync.Once
}

// openTerminal allocates a pseudo-terminal for a session run from in and
// out, gives it the modes and window size of in when that is a terminal,
// puts in into raw mode and relays the session's output; started relays
// the keys.
func openTerminal(in, out *os.File) (*terminal, error) {
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	t := &terminal{master: master, slave: slave, in: in, out: out, drained: make(chan struct{})}
	if saved, err := unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS); err == nil {
		t.saved = saved
		_ = unix.IoctlSetTermios(int(slave.Fd()), unix.TCSETS, saved)
		t.resize()
		raw := *saved
		makeRaw(&raw)
		if err := unix.IoctlSetTermios(int(in.Fd()), unix.TCSETS, &raw); err != nil {
			master.Close()
			slave.Close()
			return nil, err
		}
		t.winch = make(chan os.Signal, 1)
		signal.Notify(t.winch, unix.SIGWINCH)
		go func() {
			for range t.winch {
				t.resize()
			}
		}()
	}
	go func() {
		// Through the one filter (termsafe.Filter): the session's screen
		// passes, its clipboard, title and questions do not.
		_, _ = io.Copy(termsafe.NewFilter(out), master) // ends with EIO once no one holds the slave side
		close(t.drained)
	}()
	return t, nil
}

// started starts relaying the user's keys to the session, once its command
// runs in the foreground of the pseudo-terminal. Keys typed before (a
// Ctrl-C while the session starts) wait in the user's terminal until then
// and reach the command: before, the pseudo-terminal had no foreground
// process, and its line discipline would have swallowed the signal.
func (t *terminal) started() {
	t.relayOnce.Do(func() { go func() { _, _ = io.Copy(t.master, t.in) }() })
}

// openPTY returns a new pseudo-terminal's master and slave sides, neither of
// them the controlling terminal of mosaic.
func openPTY() (master, slave *os.File, err error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, nil, err
	}
	s, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(m), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 { // before Linux 4.13: by its path
		n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
		if err != nil {
			unix.Close(m)
			return nil, nil, err
		}
		fd, err := unix.Open("/dev/pts/"+strconv.Itoa(n), unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(m)
			return nil, nil, err
		}
		s = uintptr(fd)
	}
	return os.NewFile(uintptr(m), "/dev/ptmx"), os.NewFile(s, "pty"), nil
}

// resize gives the session's terminal the size of the user's; the kernel
// sends SIGWINCH to the session's foreground process.
func (t *terminal) resize() {
	if ws, err := unix.IoctlGetWinsize(int(t.in.Fd()), unix.TIOCGWINSZ); err == nil {
		_ = unix.IoctlSetWinsize(int(t.master.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// finish is called once the session ended: it drops mosaic's own slave
// side, copies what the session wrote last, and restores the user's
// terminal.
func (t *terminal) finish() {
	t.slave.Close()
	select {
	case <-t.drained:
	case <-time.After(time.Second): // a process outside the session still holds it
	}
	t.restore()
}

// restore puts the user's terminal back as it was.
func (t *terminal) restore() {
	if t.winch != nil {
		signal.Stop(t.winch)
	}
	if t.saved != nil {
		_ = unix.IoctlSetTermios(int(t.in.Fd()), unix.TCSETS, t.saved)
	}
}

// makeRaw is cfmakeraw(3): no line editing, no echo, no signals from keys,
// no output processing, 8-bit characters, reads return each byte.
func makeRaw(t *unix.Termios) {
	t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	t.Oflag &^= unix.OPOST
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Cflag &^= unix.CSIZE | unix.PARENB
	t.Cflag |= unix.CS8
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
}

// A heldTerminal is a terminal of the user's that a session gets as its own
// stdin, stdout or stderr (run --scope, run --pty=false): the session may
// change its modes (stty -echo) or its line discipline (N_NULL, after which
// even `reset` cannot revive it). mosaic puts both back when the session
// ends, however it ended.
type heldTerminal struct {
	fd      int
	termios *unix.Termios
	ldisc   int
}

// holdTerminals records the modes and line discipline of each distinct
// terminal among files of which mosaic is in the foreground. One of a
// background mosaic is left alone, as systemd-run --pipe leaves it: setting
// a terminal's modes from the background stops the process (SIGTTOU, "Stopped
// (tty output)"), and the modes there now are the shell's, not the user's.
func holdTerminals(files ...*os.File) []heldTerminal {
	var held []heldTerminal
	seen := map[uint64]bool{}
	for _, f := range files {
		fd := int(f.Fd())
		if !foreground(f) {
			continue
		}
		tio, err := unix.IoctlGetTermios(fd, unix.TCGETS)
		if err != nil {
			continue
		}
		ldisc, err := unix.IoctlGetInt(fd, unix.TIOCGETD)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil {
			if seen[st.Rdev] {
				continue
			}
			seen[st.Rdev] = true
		}
		held = append(held, heldTerminal{fd: fd, termios: tio, ldisc: ldisc})
	}
	return held
}

// restoreTerminals puts each terminal's line discipline back, then its
// modes (a new line discipline starts from the terminal's current modes),
// of those of which mosaic is still in the foreground (the user may have
// put it in the background meanwhile: Ctrl-Z, bg). SIGTTOU is ignored
// meanwhile, so that a move to the background between the check and the
// change cannot stop mosaic.
func restoreTerminals(held []heldTerminal) {
	if len(held) == 0 {
		return
	}
	signal.Ignore(unix.SIGTTOU)
	defer signal.Reset(unix.SIGTTOU)
	for _, h := range held {
		if pgrp, err := unix.IoctlGetInt(h.fd, unix.TIOCGPGRP); err != nil || pgrp != unix.Getpgrp() {
			continue
		}
		if cur, err := unix.IoctlGetInt(h.fd, unix.TIOCGETD); err == nil && cur != h.ldisc {
			_ = unix.IoctlSetPointerInt(h.fd, unix.TIOCSETD, h.ldisc)
		}
		_ = unix.IoctlSetTermios(h.fd, unix.TCSETS, h.termios)
	}
}

// foreground reports whether f is a terminal of which mosaic's process group
// is the foreground one: a job the shell runs in the foreground, not one
// started with & or by timeout(1) (which runs its command in a process
// group of its own), nor one whose terminal is not its controlling one.
func foreground(f *os.File) bool {
	pgrp, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// filterTerminalOutput puts a pipe in place of each of the session's
// stdout and stderr (stdio[1], stdio[2]) that is a terminal, and relays
// what comes through it to that terminal through the one filter
// (termsafe.Filter): a session given the user's own terminal (run --scope
// without --pty, run --pty=false, a run in the background of its shell)
// keeps it as its stdin, but what it prints reaches it as a pty session's
// does. It returns the function that closes mosaic's ends once the session
// is over and waits for what is left in the pipes, bounded: a process the
// session left holding one does not hold mosaic.
func filterTerminalOutput(stdio *[3]*os.File) (drain func(), err error) {
	var ours []*os.File
	done := make(chan struct{}, 2)
	for i := 1; i <= 2; i++ {
		term := stdio[i]
		if !isTerminal(term) {
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			for _, f := range ours {
				f.Close()
			}
			return nil, err
		}
		stdio[i] = w
		ours = append(ours, w)
		go func() {
			_, _ = io.Copy(termsafe.NewFilter(term), r)
			r.Close()
			done <- struct{}{}
		}()
	}
	return func() {
		for _, w := range ours {
			w.Close()
		}
		bound := time.After(2 * time.Second)
		for range ours {
			select {
			case <-done:
			case <-bound:
				return
			}
		}
	}, nil
}
