package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager"
	"mosaic/manager/session"
	"mosaic/sandbox/egress"
	"mosaic/sandbox/ptyhold"
	"mosaic/units"
)

// detachKeys end an attach and leave the session running, as docker's
// default does: Ctrl-P, Ctrl-Q.
var detachKeys = []byte{0x10, 0x11}

// givePTY gives a session started in the background a terminal of its own
// (start --pty): a new pseudo-terminal whose slave side is the session's
// stdin, stdout and stderr and whose master side goes to the unit that
// holds it for `mosaic attach`. Its size is this terminal's, if any. The
// returned function closes mosaic's own copies, once systemd has its own.
func givePTY(m *manager.Manager) (manager.Terminal, func(), error) {
	paths, err := m.Paths()
	if err != nil {
		return manager.Terminal{}, nil, err
	}
	if err := os.MkdirAll(units.AttachDir(paths.RuntimeDir), 0o700); err != nil {
		return manager.Terminal{}, nil, errcode.PTY.New("cannot make the directory of the attach sockets: %w", err)
	}
	master, slave, err := openPTY()
	if err != nil {
		return manager.Terminal{}, nil, errcode.PTY.New("cannot give the session a pseudo-terminal: %w", err)
	}
	ws := &unix.Winsize{Row: 24, Col: 80}
	if cur, err := unix.IoctlGetWinsize(int(os.Stdin.Fd()), unix.TIOCGWINSZ); err == nil && cur.Row > 0 && cur.Col > 0 {
		ws = cur
	}
	_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, ws)
	return manager.Terminal{Slave: int(slave.Fd()), Master: int(master.Fd())}, func() { master.Close(); slave.Close() }, nil
}

func attachCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "attach",
		Usage:     "connect this terminal to a session started with --pty; detach with Ctrl-P Ctrl-Q",
		ArgsUsage: "NAME",
		Description: "The session's terminal lives with the session (mosaic-NAME-pty.service holds it); attach shows\n" +
			"what it printed last, relays keys and window size, and returns when you detach (Ctrl-P Ctrl-Q:\n" +
			"the session runs on) or the session ends (with its exit code). One attach at a time.",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			paths, err := out.userPaths()
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				s, err := m.Status(ctx, name)
				if err != nil {
					return err
				}
				if s.Output != "pty" {
					return errcode.NoTerminal.New("session %s has no terminal to attach to: start it with `mosaic start --pty`", name)
				}
				if !s.Running() {
					return errcode.NoTerminal.New("session %s has ended (%s): nothing to attach to", name, s.How())
				}
				a, err := ptyhold.Dial(units.AttachSocket(paths.RuntimeDir, name))
				if err != nil {
					return errcode.NoTerminal.New("cannot attach to session %s: %w", name, err)
				}
				dir := paths.SessionDir(name)
				before := refusalCounts(session.EgressRecordOf(dir))
				alerts, stopWatch := watchRefusals(dir, before)
				detached := relayAttached(a, os.Stdin, os.Stdout, alerts)
				stopWatch()
				a.Close()
				if !detached {
					_ = m.WaitEnded(ctx, name)
				}
				s, _ = m.Status(ctx, name)
				if !out.json {
					printRefusals(out.stderr, manager.Session{Name: name, EgressRecord: refusedSince(before, session.EgressRecordOf(dir))}, out.safe)
				}
				if out.json {
					enc := json.NewEncoder(out.stderr) // stdout was the session's
					enc.SetIndent("", "  ")
					_ = enc.Encode(map[string]any{"detached": detached, "session": s})
				} else if detached {
					fmt.Fprintf(out.stderr, "mosaic: detached from session %s, which runs on: mosaic attach %s\n", name, name)
				} else {
					fmt.Fprintf(out.stderr, "mosaic: session %s ended (%s)\n", name, s.How())
				}
				if !detached {
					out.code = s.ExitCode()
				}
				return nil
			})
		},
	}
}

// relayAttached connects the user's terminal (in, out) to an attached
// session's: raw mode, what the session printed last, the window size at
// once and on every SIGWINCH, keys until the detach keys. It returns true
// when the user detached, false when the session's side of the terminal
// is gone (it ended) or mosaic got SIGTERM or SIGHUP.
func relayAttached(a *ptyhold.Attachment, in, out *os.File, alerts <-chan struct{}) (detached bool) {
	var saved *unix.Termios
	if foreground(in) {
		if tio, err := unix.IoctlGetTermios(int(in.Fd()), unix.TCGETS); err == nil {
			saved = tio
			raw := *tio
			makeRaw(&raw)
			_ = unix.IoctlSetTermios(int(in.Fd()), unix.TCSETS, &raw)
			defer restoreTerminals([]heldTerminal{{fd: int(in.Fd()), termios: saved, ldisc: currentLdisc(in)}})
		}
	}
	// What the session prints reaches the user's terminal through the one
	// filter: its screen passes, its clipboard, title and questions do
	// not (termsafe.Filter). The replay and the live output are one stream.
	screen := termsafe.NewFilter(out)
	_, _ = screen.Write(a.Replay)
	resize := func() bool {
		ws, err := unix.IoctlGetWinsize(int(in.Fd()), unix.TIOCGWINSZ)
		if err != nil {
			return false
		}
		cur, err := unix.IoctlGetWinsize(int(a.Master.Fd()), unix.TIOCGWINSZ)
		changed := err != nil || cur.Row != ws.Row || cur.Col != ws.Col
		_ = unix.IoctlSetWinsize(int(a.Master.Fd()), unix.TIOCSWINSZ, ws)
		return changed
	}
	if !resize() {
		redraw(a.Master)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, unix.SIGWINCH, unix.SIGTERM, unix.SIGHUP, unix.SIGINT)
	defer signal.Stop(sigs)
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(screen, a.Master) // EIO once the session's side is gone
		close(ended)
	}()
	keys := make(chan struct{})
	go func() {
		copyUntilDetach(a.Master, in)
		close(keys)
	}()
	for {
		select {
		case <-ended:
			return false
		case <-keys:
			leaveNarrower(a.Master)
			return true
		case <-alerts:
			screen.Bell()
		case sig := <-sigs:
			if sig == unix.SIGWINCH {
				resize()
				continue
			}
			// SIGTERM, SIGHUP, or a SIGINT that is no key (the terminal
			// is raw): detach.
			leaveNarrower(a.Master)
			return true
		}
	}
}

// leaveNarrower leaves a detached session's terminal one column narrower
// than it was, so that the next attach changes its size, whatever the
// attaching terminal's, and its program redraws: curses and Node's TUIs
// redraw on a SIGWINCH only when the size changed (ncurses makes no
// KEY_RESIZE otherwise), and the next attach is mostly from a terminal of
// the same size. Its program redraws now too, for nobody.
func leaveNarrower(master *os.File) {
	if ws, err := unix.IoctlGetWinsize(int(master.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 1 {
		ws.Col--
		_ = unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, ws)
	}
}

// currentLdisc is f's line discipline (0, N_TTY, when it cannot be read).
func currentLdisc(f *os.File) int {
	ld, _ := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGETD)
	return ld
}

// redraw asks the session's foreground program to draw its screen again,
// for the client that just attached, when the attach did not change the
// terminal's size (the kernel then sends no SIGWINCH): SIGWINCH to the
// terminal's foreground process group. Programs that redraw only on a new
// size ignore it; leaveNarrower makes the next attach a new size. The
// session is the user's own: the signal needs no privilege, and is all that
// passes from the client to it but its keys.
func redraw(master *os.File) {
	if pgrp, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPGRP); err == nil && pgrp > 1 {
		_ = unix.Kill(-pgrp, unix.SIGWINCH)
	}
}

// copyUntilDetach copies the user's keys to the session until the detach
// keys (which are not sent) or the end of in. A detach key typed alone is
// held until the next key says whether it was one.
func copyUntilDetach(dst io.Writer, in io.Reader) {
	buf := make([]byte, 4096)
	matched := 0 // how many of detachKeys the last bytes were
	for {
		n, err := in.Read(buf)
		if n > 0 {
			var send bytes.Buffer
			for _, b := range buf[:n] {
				if b == detachKeys[matched] {
					matched++
					if matched == len(detachKeys) {
						_, _ = dst.Write(send.Bytes())
						return
					}
					continue
				}
				send.Write(detachKeys[:matched])
				matched = 0
				if b == detachKeys[0] {
					matched = 1
					continue
				}
				send.WriteByte(b)
			}
			if _, werr := dst.Write(send.Bytes()); werr != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return
		}
	}
}

// A refusal the session's egress proxy makes while the user is attached
// is shown without breaking the session's screen: the terminal's bell
// rings (between the session's own characters and sequences), and the
// refusals, with the command that grants each, are printed once the user
// detaches or the session ends. The proxy's record (written every 2 s
// while it changes) is read each second.

// refusalCounts is how often each target was refused, by a record.
func refusalCounts(r *egress.Record) map[string]int {
	seen := map[string]int{}
	if r != nil {
		for _, ref := range r.Refused {
			seen[ref.Target] = ref.Count
		}
	}
	return seen
}

// refusedSince is r's refusals past the counts in before, as a record of
// them alone (nil when there are none).
func refusedSince(before map[string]int, r *egress.Record) *egress.Record {
	if r == nil {
		return nil
	}
	var since egress.Record
	for _, ref := range r.Refused {
		if n := ref.Count - before[ref.Target]; n > 0 {
			ref.Count = n
			since.Refused = append(since.Refused, ref)
		}
	}
	if len(since.Refused) == 0 {
		return nil
	}
	return &since
}

// watchRefusals reads the egress record of the session whose state
// directory is dir each second, and sends on the returned channel when a
// target was refused again since the last read; stop ends it.
func watchRefusals(dir string, before map[string]int) (alerts <-chan struct{}, stop func()) {
	ch, quit := make(chan struct{}, 1), make(chan struct{})
	last := maps.Clone(before)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			now := refusalCounts(session.EgressRecordOf(dir))
			for target, n := range now {
				if n > last[target] {
					select {
					case ch <- struct{}{}:
					default:
					}
					break
				}
			}
			last = now
		}
	}()
	return ch, func() { close(quit) }
}
