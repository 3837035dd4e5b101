package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
)

// Call is one command line bound for one host over ssh: mosaic --host's
// transport. Bound is ssh's connect timeout (and a third of how long a
// silent peer is borne); Whole makes it bound the entire call too (list of
// several hosts). Version is this mosaic's, named when the host's mosaic
// cannot serve it.
type Call struct {
	Target  Target
	Bound   time.Duration
	Whole   bool
	Version string
}

// Run runs the frame's command on the host and returns its exit code, or
// an error of reaching it. With tty, the frame goes to a hold first (ssh
// -T), then ssh -t runs the command on this terminal; otherwise the frame
// and, with stdin, this process's stdin go down one ssh -T.
func (c Call) Run(frame Frame, tty, stdin bool, stdout, stderr io.Writer) (int, error) {
	call := sshCall{t: c.Target, bound: c.Bound, ctx: context.Background(), version: c.Version}
	if len(frame.Args) > 0 {
		call.cmd = frame.Args[0]
	}
	if c.Whole {
		var cancel context.CancelFunc
		call.ctx, cancel = context.WithTimeout(call.ctx, c.Bound)
		defer cancel()
	}
	if !tty {
		return call.stage(false, ExecStage, []string{"stdin"}, frame, stdin, stdout, stderr)
	}
	// The hold keeps the frame until the command asks for it; its ssh
	// lives until then (its stdin is the hold's lifeline).
	hold, path, err := call.hold(frame)
	if err != nil {
		return 0, err
	}
	defer hold()
	return call.stage(true, ExecStage, []string{"hold", path}, Frame{}, false, stdout, stderr)
}

// sshCall is one command's ssh connections to one host.
type sshCall struct {
	ctx     context.Context
	t       Target
	bound   time.Duration
	cmd     string // the command it runs there (start, run, attach, ...), for what a lost connection left
	version string // this mosaic's (Call.Version)
}

func (s sshCall) args(tty bool, stage string, extra ...string) []string {
	return SSHArgs(s.t, tty, stage, int(s.bound/time.Second), extra...)
}

// sshProgram is the ssh to run: MOSAIC_SSH, else ssh from PATH.
func sshProgram() string {
	if p := os.Getenv("MOSAIC_SSH"); p != "" {
		return p
	}
	return "ssh"
}

// stage runs one remote stage over ssh. Without tty, the frame is written
// first on its stdin, then this process's stdin follows if stdin is set.
func (s sshCall) stage(tty bool, stage string, extra []string, frame Frame, stdin bool, stdout, stderr io.Writer) (int, error) {
	t := s.t
	c := exec.CommandContext(s.ctx, sshProgram(), s.args(tty, stage, extra...)...)
	c.Stdout = stdout
	diag := &stderrTail{w: stderr}
	c.Stderr = diag
	var in io.WriteCloser
	if tty {
		c.Stdin = os.Stdin
	} else {
		var err error
		if in, err = c.StdinPipe(); err != nil {
			return 0, err
		}
	}
	if err := c.Start(); err != nil {
		return 0, errcode.RemoteLost.New("cannot run ssh (%s) to reach %s: %w; install openssh-client, or set MOSAIC_SSH", sshProgram(), t, err)
	}
	if in != nil {
		go func() {
			if err := WriteFrame(in, frame); err == nil && stdin {
				_, _ = io.Copy(in, os.Stdin)
			}
			in.Close()
		}()
	}
	err := c.Wait()
	diag.flush()
	return s.exitOf(err, diag, tty)
}

// exitOf turns ssh's end into the remote command's exit code, or an error
// that says what happened to the connection or the remote's mosaic.
func (s sshCall) exitOf(err error, diag *stderrTail, tty bool) (int, error) {
	t := s.t
	if s.ctx.Err() != nil {
		return 0, errcode.RemoteLost.New("%s did not answer within %s", t, s.bound)
	}
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return 0, errcode.RemoteLost.New("ssh to %s: %w", t, err)
		}
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 0, errcode.RemoteLost.New("lost %s: ssh was killed by signal %d; %s", t, ws.Signal(), s.leftThere())
		}
		code = ee.ExitCode()
	}
	switch {
	case diag.missing:
		return 0, errcode.RemoteNoMosaic.New("%s has no mosaic (looked on PATH, in ~/.local/bin and /usr/local/bin): install it there (`make install` in a checkout of mosaic, as for this machine), then `mosaic --host %s doctor`", t, t)
	case diag.version != "":
		return 0, errcode.RemoteNoMosaic.New("%s's mosaic cannot serve this one (%s): install the same mosaic there (this is %s)", t, diag.version, s.version)
	case code == 255 && (tty || !diag.exited):
		why := diag.last
		if why == "" {
			why = "ssh exited 255"
		}
		return 0, errcode.RemoteLost.New("cannot reach %s, or lost it: %s; %s", t, why, s.leftThere())
	case !tty && !diag.exited:
		// remote-exec ends with its exit line whatever stopped it (but a
		// protocol it does not speak, caught above): what exits without
		// one is another program of mosaic's name, or a mosaic that was
		// killed there.
		return 0, errcode.RemoteNoMosaic.New("%s's mosaic did not answer as mosaic (it exited %d without mosaic's last line): the `mosaic` found there (on PATH, in ~/.local/bin or /usr/local/bin) is another program, or it was killed; check with `ssh %s mosaic version`, and install mosaic there (`make install` in a checkout of mosaic)", t, code, t)
	}
	return code, nil
}

// leftThere is what a connection lost while the command ran on the host is
// known to have left there. A start interrupted may have started the
// session or not (its hang-up may undo it): only the host can say. A run
// or a login gets the hang-up, which stops its session as a closed terminal
// does. An attach leaves the session it attached to running.
func (s sshCall) leftThere() string {
	switch s.cmd {
	case "start":
		return fmt.Sprintf("whether the session was started there is not known: `mosaic --host %s list` shows what runs there", s.t)
	case "run", "login":
		return fmt.Sprintf("the hang-up stops the session there, as closing its terminal does; `mosaic --host %s list` shows what runs there", s.t)
	case "attach":
		return fmt.Sprintf("the session attached to runs on there (mosaic --host %s list)", s.t)
	}
	return fmt.Sprintf("`mosaic --host %s list` shows what runs there", s.t)
}

// stderrTail passes ssh's stderr on line by line, keeping back the remote
// stage's own marker lines and the last line of ssh's, for exitOf. On a
// terminal each line is escaped: a remote's mosaic (or the shell before it)
// prints on a pipe what a session chose, as it is.
//
// A session's stderr is this same stream (run, logs), so a line that looks
// like a marker may be the session's: a marker counts only as the stream's
// last line, where the stage writes it just before it exits. One is held
// back until the next line shows it was not the last, and is then passed on
// as any other line.
type stderrTail struct {
	w       io.Writer
	mu      sync.Mutex
	partial []byte
	last    string
	held    string // a marker line, until a line after it
	missing bool   // the remote has no mosaic
	version string // the remote's mosaic speaks another protocol
	exited  bool   // the remote stage reported its exit: a 255 is the command's
}

func (s *stderrTail) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(string(s.partial[:i+1]))
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

func (s *stderrTail) line(l string) {
	if held := s.held; held != "" { // not the last line: not the stage's
		s.held, s.missing, s.version, s.exited = "", false, "", false
		s.pass(held)
	}
	text := strings.TrimRight(l, "\r\n")
	switch {
	case strings.HasPrefix(text, MissingMarker):
		s.missing = true
	case strings.HasPrefix(text, VersionMarker):
		s.version = strings.TrimPrefix(text, "mosaic-remote: ")
	case strings.HasPrefix(text, ExitMarker):
		s.exited = true
	case strings.Contains(text, `unknown command "remote-exec"`), strings.Contains(text, `unknown command "remote-hold"`):
		s.version = "its mosaic predates --host"
	default:
		s.pass(l)
		return
	}
	s.held = l
}

// pass writes a line that is not a marker on, and keeps it as the last.
func (s *stderrTail) pass(l string) {
	text := strings.TrimRight(l, "\r\n")
	if text != "" {
		s.last = termsafe.Escape(text, false)
	}
	if onTerminal(s.w) {
		l = termsafe.Escape(l, true)
	}
	_, _ = io.WriteString(s.w, l)
}

func (s *stderrTail) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = nil
	}
}

// ExitMarker is the remote stage's last line on a stderr that is not a
// terminal: the command ran and this was its exit code.
const ExitMarker = "mosaic-remote: exit "

// hold hands the frame to `mosaic remote-hold` on the host and returns the
// path of its socket, and a function that ends the hold's ssh.
func (s sshCall) hold(frame Frame) (func(), string, error) {
	t := s.t
	c := exec.CommandContext(s.ctx, sshProgram(), s.args(false, HoldStage)...)
	// Its stderr is kept until it is known to be mosaic's: another program
	// of that name prints its usage, which is not this command's output.
	var held bytes.Buffer
	diag := &stderrTail{w: &held}
	c.Stderr = diag
	in, err := c.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	outp, err := c.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := c.Start(); err != nil {
		return nil, "", errcode.RemoteLost.New("cannot run ssh (%s) to reach %s: %w; install openssh-client, or set MOSAIC_SSH", sshProgram(), t, err)
	}
	stop := func() { in.Close(); _ = c.Wait() }
	if err := WriteFrame(in, frame); err != nil {
		stop()
		return nil, "", err
	}
	line := make([]byte, 0, 256)
	one := make([]byte, 1)
	for len(line) < 4096 {
		n, err := outp.Read(one)
		if n == 0 || err != nil {
			break
		}
		if one[0] == '\n' {
			break
		}
		line = append(line, one[0])
	}
	if path, ok := strings.CutPrefix(string(line), HeldMarker); ok {
		diag.mu.Lock()
		_, _ = os.Stderr.Write(held.Bytes())
		diag.w = os.Stderr
		diag.mu.Unlock()
		return stop, path, nil
	}
	in.Close()
	_, err = s.exitOf(c.Wait(), diag, false)
	if errors.Is(err, errcode.RemoteNoMosaic.Target()) && !diag.missing && diag.version == "" {
		return nil, "", err // another program: what it printed is not for the user
	}
	_, _ = os.Stderr.Write(held.Bytes())
	if err == nil {
		err = errcode.RemoteLost.New("%s's mosaic did not take the credentials: %s", t, diag.last)
	}
	return nil, "", err
}

// onTerminal reports whether w is a terminal: ssh's stderr lines are
// escaped on one.
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
