package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A ptyRun is mosaic running on a terminal the test made: the slave side is
// mosaic's stdin, stdout, stderr and controlling terminal; the test plays
// the user at the master side.
type ptyRun struct {
	t             *testing.T
	master, slave *os.File
	cmd           *exec.Cmd
	mu            sync.Mutex
	out           bytes.Buffer
	exited        chan struct{}
	code          int
	before        unix.Termios // the terminal's modes before mosaic ran
}

func startOnPTY(t *testing.T, rows, cols uint16, args ...string) *ptyRun {
	t.Helper()
	return startOnPTYAs(t, mosaicBin, rows, cols, args...)
}

// startOnPTYAs is startOnPTY with another mosaic binary.
func startOnPTYAs(t *testing.T, bin string, rows, cols uint16, args ...string) *ptyRun {
	t.Helper()
	return startOnPTYEnv(t, bin, nil, rows, cols, args...)
}

// startOnPTYEnv is startOnPTYAs with variables added to the environment.
func startOnPTYEnv(t *testing.T, bin string, env []string, rows, cols uint16, args ...string) *ptyRun {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Fatalf("opening a pty: %v", err)
	}
	if err := unix.IoctlSetWinsize(int(master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols}); err != nil {
		t.Fatal(err)
	}
	r := &ptyRun{t: t, master: master, slave: slave, exited: make(chan struct{}), before: termios(t, slave)}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Env = append(append(os.Environ(), "TERM=xterm-256color", "COLORTERM=truecolor"), env...)
	r.cmd.Stdin, r.cmd.Stdout, r.cmd.Stderr = slave, slave, slave
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			r.mu.Lock()
			r.out.Write(buf[:n])
			r.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	go func() {
		err := r.cmd.Wait()
		r.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			r.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				r.code = 128 + int(ws.Signal()) // as a shell says
			}
		}
		close(r.exited)
	}()
	t.Cleanup(func() {
		r.cmd.Process.Kill()
		<-r.exited
		master.Close()
		slave.Close()
	})
	return r
}

func (r *ptyRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// waitFor waits until the terminal showed s.
func (r *ptyRun) waitFor(s string) {
	r.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(r.output(), s) {
		if time.Now().After(deadline) {
			r.t.Fatalf("the terminal never showed %q; it shows:\n%s", s, r.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// type sends keys as the user would type them.
func (r *ptyRun) typeKeys(keys string) {
	r.t.Helper()
	if _, err := r.master.Write([]byte(keys)); err != nil {
		r.t.Fatal(err)
	}
}

// wait waits for mosaic to exit and returns its exit code.
func (r *ptyRun) wait() int {
	r.t.Helper()
	select {
	case <-r.exited:
		time.Sleep(50 * time.Millisecond) // the reader's last bytes
		return r.code
	case <-time.After(30 * time.Second):
		r.t.Fatalf("mosaic did not exit; the terminal shows:\n%s", r.output())
	}
	return -1
}

func termios(t *testing.T, f *os.File) unix.Termios {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return *tio
}

// TestPTYRun runs a session on a terminal: it gets a pseudo-terminal of its
// own (not the user's), of the user's size and following its resizes, with
// TERM and COLORTERM; the user's terminal modes come back afterwards and the
// exit code is the command's.
func TestPTYRun(t *testing.T) {
	needRig(t)
	r := startOnPTY(t, 30, 100, "run", "--workspace", workspace(t), "--", "sh", "-c",
		`tty; stat -L -c 'major=%t' "$(tty)"; test -t 0 && test -t 1 && test -t 2 && echo all-tty; echo "TERM=$TERM COLORTERM=$COLORTERM";
		 stty size; echo ready;
		 while [ "$(stty size)" = "30 100" ]; do sleep 0.02; done; echo "now $(stty size)"; exit 5`)
	r.waitFor("ready")
	// While the session runs, the user's terminal is raw: no echo, no line editing.
	if raw := termios(t, r.slave); raw.Lflag&(unix.ECHO|unix.ICANON|unix.ISIG) != 0 {
		t.Errorf("the user's terminal is not in raw mode while the session runs: lflag %#x", raw.Lflag)
	}
	if err := unix.IoctlSetWinsize(int(r.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	if code := r.wait(); code != 5 {
		t.Fatalf("exit %d, want 5; terminal:\n%s", code, r.output())
	}
	out := r.output()
	for _, want := range []string{"major=88", "all-tty", "TERM=xterm-256color COLORTERM=truecolor", "30 100", "now 40 120"} {
		if !strings.Contains(out, want) {
			t.Errorf("terminal lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "not a tty") {
		t.Errorf("the session had no terminal:\n%s", out)
	}
	if after := termios(t, r.slave); after != r.before {
		t.Errorf("the terminal's modes were not restored:\nbefore %+v\nafter  %+v", r.before, after)
	}
}

// TestPTYKeys sends Ctrl-C and Ctrl-\ as keys: they reach the command in the
// session (which dies of SIGINT, SIGQUIT), not mosaic. Ctrl-Z reaches it too,
// and the session's init resumes it (there is no shell inside to do so).
func TestPTYKeys(t *testing.T) {
	needRig(t)
	for _, tc := range []struct {
		key  string
		want int
	}{{"\x03", 130}, {"\x1c", 131}} {
		r := startOnPTY(t, 24, 80, "run", "--workspace", workspace(t), "--", "sh", "-c", "echo ready; exec sleep 300")
		r.waitFor("ready")
		r.typeKeys(tc.key)
		if code := r.wait(); code != tc.want {
			t.Errorf("key %q: exit %d, want %d; terminal:\n%s", tc.key, code, tc.want, r.output())
		}
	}
	r := startOnPTY(t, 24, 80, "run", "--workspace", workspace(t), "--", "sh", "-c",
		`trap 'echo got-tstp' TSTP; echo ready; sleep 0.5; echo still-running; exec sleep 300`)
	r.waitFor("ready")
	r.typeKeys("\x1a")
	r.waitFor("still-running")
	r.typeKeys("\x03")
	if code := r.wait(); code != 130 {
		t.Errorf("Ctrl-Z then Ctrl-C: exit %d, want 130; terminal:\n%s", code, r.output())
	}
	if !strings.Contains(r.output(), "got-tstp") {
		t.Errorf("Ctrl-Z did not reach the command's handler:\n%s", r.output())
	}
}

// TestPTYStoppedFromOutside: mosaic stop ends a run on a terminal, which
// returns with the command's status and says why in one line.
func TestPTYStoppedFromOutside(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	r := startOnPTY(t, 24, 80, "run", "--name", name, "--workspace", workspace(t), "--", "sh", "-c", "echo ready; exec sleep 300")
	r.waitFor("ready")
	mustMosaic(t, "stop", name)
	if code := r.wait(); code != 143 {
		t.Errorf("exit %d, want 143", code)
	}
	if out := r.output(); !strings.Contains(out, "session "+name+" was stopped from outside") {
		t.Errorf("no reason given:\n%s", out)
	}
}

// TestPTYMosaicKilled: a session whose mosaic run is killed has no terminal
// any more and ends, even when its command ignores SIGHUP.
func TestPTYMosaicKilled(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	r := startOnPTY(t, 24, 80, "run", "--name", name, "--workspace", workspace(t), "--", "sh", "-c", `trap "" HUP; echo ready; sleep 300`)
	r.waitFor("ready")
	if s := mustMosaic(t, "status", "--json", name).stdout; !strings.Contains(s, `"state": "active"`) {
		t.Fatalf("session not running: %s", s)
	}
	r.cmd.Process.Signal(unix.SIGKILL)
	r.wait()
	eventually(t, 15*time.Second, "the session to end", func() bool {
		return !strings.Contains(mosaic(t, "status", "--json", name).stdout, `"state": "active"`)
	})
}

// TestPTYOutputKeptAfterEnd (issue 40): a start --pty session whose program
// prints and exits before anyone attaches keeps what it printed: mosaic
// logs shows it after the session ended, as text (its colours and its
// OSC 52 clipboard write dropped). Before, logs refused and attach had
// nothing.
func TestPTYOutputKeptAfterEnd(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--pty", "--name", name, "-w", ws, "--", "sh", "-c",
		`printf '\033[1;31mred-report\033[0m done\n\033]52;c;ZWNobyBoaQ==\007'; echo last-line`)
	eventually(t, 20*time.Second, "the session to end", func() bool {
		return !strings.Contains(mustMosaic(t, "status", name).stdout, "running")
	})
	var out string
	eventually(t, 10*time.Second, "logs to show the ended session's output", func() bool {
		out = mosaic(t, "logs", name).stdout
		return strings.Contains(out, "last-line")
	})
	if !strings.Contains(out, "red-report done") || strings.Contains(out, "\x1b") || strings.Contains(out, "ZWNobyBoaQ") {
		t.Errorf("logs of an ended start --pty session:\n%q", out)
	}
	mosaic(t, "rm", "--force", name)
}
