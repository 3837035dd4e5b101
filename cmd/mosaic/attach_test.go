package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAttach (issue 30): a session started in the background with a
// terminal of its own (start --pty) runs an interactive program (bash with
// readline) with nobody attached; mosaic attach connects to it, shows what
// it printed meanwhile, relays keys and the window size (at attach and on
// resize), and Ctrl-P Ctrl-Q detaches, leaving it running. A second attach
// while one is attached is refused; attaches in turn work; when the
// program exits the attach returns with its status and the holder unit is
// gone. The session's terminal is not the attaching one.
func TestAttach(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	name := sessionName(t)
	r := mustMosaic(t, "start", "--pty", "--name", name, "-w", ws, "--", "sh", "-c",
		`echo printed-while-nobody-was-attached; exec bash --norc --noprofile -i`)
	if !strings.Contains(r.stdout, "mosaic attach "+name) {
		t.Errorf("start --pty does not say how to attach: %s", r.stdout)
	}
	if st := mustMosaic(t, "status", name).stdout; !strings.Contains(st, "mosaic attach "+name) {
		t.Errorf("status does not say the session has a terminal to attach to:\n%s", st)
	}
	if got := unitProperty(t, "mosaic-"+name+"-pty.service", "ActiveState"); got != "active" {
		t.Errorf("the holder unit is %q, want active", got)
	}
	// logs has what it printed while nobody was attached, as text
	// (issue 40: it used to refuse and point to attach).
	eventually(t, 10*time.Second, "logs to show what the session printed", func() bool {
		return strings.Contains(mosaic(t, "logs", name).stdout, "printed-while-nobody-was-attached")
	})

	// First attach, right after the start: the holder's socket is there.
	a := startOnPTY(t, 30, 100, "attach", name)
	a.waitFor("printed-while-nobody-was-attached") // written once the terminal is raw
	a.typeKeys("echo $((6*7))-answer\r")
	a.waitFor("42-answer")
	a.typeKeys("stty size; stat -L -c 'dev=%t:%T' /proc/self/fd/0; echo stat-$((1+1))-done\r")
	a.waitFor("stat-2-done")
	if !strings.Contains(a.output(), "30 100") {
		t.Errorf("the session's terminal does not have the attaching one's size:\n%s", a.output())
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(a.slave.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if mine := fmt.Sprintf("dev=%x:%x", unix.Major(st.Rdev), unix.Minor(st.Rdev)); strings.Contains(a.output(), mine) {
		t.Errorf("the session's stdin is the attaching terminal (%s)", mine)
	}
	a.typeKeys(`while [ "$(stty size)" = "30 100" ]; do sleep 0.02; done; echo "now $(stty size)"` + "\r")
	a.waitFor("while [")
	if err := unix.IoctlSetWinsize(int(a.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 120}); err != nil {
		t.Fatal(err)
	}
	a.waitFor("now 40 120")

	// A second attach meanwhile is refused, and changes nothing.
	if r := mosaic(t, "attach", name); r.code != 3 || !strings.Contains(r.stderr, "attached elsewhere") {
		t.Errorf("a second attach: exit %d, %q", r.code, r.stderr)
	}
	a.typeKeys("\x10\x11") // Ctrl-P Ctrl-Q
	if code := a.wait(); code != 0 || !strings.Contains(a.output(), "detached from session "+name) {
		t.Errorf("detach: exit %d; terminal:\n%s", code, a.output())
	}
	if after := termios(t, a.slave); after != a.before {
		t.Errorf("the terminal's modes were not restored after detaching")
	}
	if st := mustMosaic(t, "status", "--json", name).stdout; !strings.Contains(st, `"state": "active"`) {
		t.Fatalf("the session did not run on after the detach: %s", st)
	}

	// Attach again: what was printed while nobody was attached is shown
	// again, bash redraws its prompt (the attach's SIGWINCH), and the end
	// of its command ends the attach with its status.
	b := startOnPTY(t, 24, 80, "attach", name)
	b.waitFor("printed-while-nobody-was-attached")
	b.typeKeys("echo second-$((1+1))\r")
	b.waitFor("second-2")
	b.typeKeys("exit 7\r")
	if code := b.wait(); code != 7 || !strings.Contains(b.output(), "session "+name+" ended") {
		t.Errorf("attach when the session ended: exit %d, want 7; terminal:\n%s", code, b.output())
	}
	eventually(t, 15*time.Second, "the holder unit to go", func() bool {
		s := unitProperty(t, "mosaic-"+name+"-pty.service", "ActiveState")
		return s == "inactive" || s == "failed" || s == ""
	})
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "attach", name)); !os.IsNotExist(err) {
		t.Errorf("the attach socket is left: %v", err)
	}
	if r := mosaic(t, "attach", name); r.code != 3 {
		t.Errorf("attach to an ended session: exit %d, %s", r.code, r.stderr)
	}
}

// TestAttachPointUnreachable (issue 30): the attach socket is the user's
// on the host only. The host reaches it (an attach works, and the socket is
// there while the session runs), but no session does: not another session
// of the same user, not one with the host's network (it is a path socket in
// the runtime directory, which no session sees, not an abstract one).
func TestAttachPointUnreachable(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--pty", "--name", name, "-w", ws, "--", "sh", "-c", "echo ready-for-attach; exec sleep 300")
	sock := filepath.Join(os.Getenv("XDG_RUNTIME_DIR"), "mosaic", "attach", name)
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("on the host the attach socket is not there as the user's own: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the attach directory: %v %v", fi, err)
	}
	probe := fmt.Sprintf(`if [ -e %q ]; then echo REACHABLE; else echo unreachable; fi; ls %q 2>&1 || true`, sock, filepath.Dir(sock))
	for _, network := range []string{"none", "host"} {
		r := mustMosaic(t, "run", "--network", network, "-w", ws, "--", "sh", "-c", probe)
		if !strings.Contains(r.stdout, "unreachable") || strings.Contains(r.stdout, "REACHABLE") {
			t.Errorf("network %s: a session finds the attach socket:\n%s", network, r.stdout)
		}
	}
	r := startOnPTY(t, 24, 80, "attach", name)
	r.waitFor("ready-for-attach") // written once the terminal is raw
	r.typeKeys("\x10\x11")
	if code := r.wait(); code != 0 {
		t.Errorf("the host's attach: exit %d:\n%s", code, r.output())
	}
}

// cursesApp is a full-screen program (python's curses): it draws a
// counter, and says each resize (SIGWINCH, KEY_RESIZE) with the size it
// then has, as a TUI redraws on one.
const cursesApp = `import curses
def main(s):
    s.timeout(100)
    open("up", "w").close()  # curses is set up: a SIGWINCH from now on is a KEY_RESIZE
    n = 0
    while True:
        k = s.getch()
        if k == curses.KEY_RESIZE:
            y, x = s.getmaxyx()
            n += 1
            s.addstr(1, 0, "redraw-%d-at-%dx%d " % (n, y, x))
        elif k == ord("q"):
            return
        s.addstr(0, 0, "curses-up")
        s.refresh()
curses.wrapper(main)
`

// TestAttachCurses (issue 30): a curses program started in the background
// with start --pty is redrawn for each attach, at the attaching terminal's
// size, also when that is the size it had at the last attach (curses makes
// no KEY_RESIZE for an unchanged size: a detach leaves the terminal one
// column narrower), and takes keys.
func TestAttachCurses(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	if err := os.WriteFile(filepath.Join(ws, "app.py"), []byte(cursesApp), 0o644); err != nil {
		t.Fatal(err)
	}
	name := sessionName(t)
	mustMosaic(t, "start", "--pty", "--direct", "--name", name, "-w", ws, "--", "python3", "app.py")
	eventually(t, 30*time.Second, "the curses program to be up", func() bool { _, err := os.Stat(filepath.Join(ws, "up")); return err == nil })
	a := startOnPTY(t, 30, 100, "attach", name)
	a.waitFor("redraw-1-at-30x100")
	a.typeKeys("\x10\x11")
	a.wait()
	// The detach left it one column narrower, so an attach at the same size
	// redraws it again (a second KEY_RESIZE at 30x100: the one for the
	// narrower size may come before, or curses may see only the last).
	b := startOnPTY(t, 30, 100, "attach", name)
	again := regexp.MustCompile(`redraw-[2-9]-at-30x100`)
	eventually(t, 15*time.Second, "a redraw at the second attach", func() bool { return again.MatchString(b.output()) })
	b.typeKeys("q")
	if code := b.wait(); code != 0 || !strings.Contains(b.output(), "session "+name+" ended") {
		t.Errorf("q in the attached curses program: exit %d\n%s", code, b.output())
	}
}

// TestAttachShowsRefusals (issue 39): a refusal the session's egress proxy
// makes while the user is attached rings the terminal's bell (a BEL of
// mosaic's own: the session's screen is not drawn over), and the detach
// names it with the command that grants it. Before: nothing until a
// status (the attached terminal showed neither).
func TestAttachShowsRefusals(t *testing.T) {
	needTestNet(t)
	name := sessionName(t)
	mustMosaic(t, "start", "--pty", "--name", name, "-w", workspace(t), "--", "bash", "-c",
		`echo ready-for-attach; read go; `+connectScript+` echo connect-tried; exec sleep 300`, "bash", "otherhost.mosaic.test:443")
	defer mosaic(t, "stop", name)
	a := startOnPTY(t, 24, 80, "attach", name)
	a.waitFor("ready-for-attach")
	a.typeKeys("go\r")
	a.waitFor("connect-tried")
	eventually(t, 10*time.Second, "the bell for the refusal", func() bool { return strings.Contains(a.output(), "\a") })
	a.typeKeys("\x10\x11")
	if code := a.wait(); code != 0 {
		t.Fatalf("detach: exit %d:\n%s", code, a.output())
	}
	want := "refused otherhost.mosaic.test:443 once: not on the list; to allow it: --allow-host otherhost.mosaic.test (while it runs: mosaic allow " + name + " otherhost.mosaic.test)"
	if !strings.Contains(a.output(), want) {
		t.Errorf("the detach does not name the refusal made while attached (%q):\n%s", want, a.output())
	}
}
