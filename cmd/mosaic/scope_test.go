package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockedBuffer is a bytes.Buffer a test can read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestScopeSession runs a named session as a scope: it is a scope in
// mosaic.slice that systemctl lists, mosaic status and list say so, mosaic
// stop ends it, run returns 143 with a reason, and nothing is left of it in
// systemd while its record keeps how it ended.
func TestScopeSession(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	unit := "mosaic-" + name + ".scope"
	var stdout, stderr lockedBuffer
	cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "--name", name, "--workspace", workspace(t), "--memory-max", "512M",
		"--", "sh", "-c", "cat /proc/self/cgroup; echo ready; exec sleep 300")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() {
		cmd.Wait()
		exited <- cmd.ProcessState.ExitCode()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	eventually(t, 15*time.Second, "the scope session to run", func() bool { return strings.Contains(stdout.String(), "ready") })

	if l := systemctl(t, "list-units", "--type=scope", "--plain", "--no-legend"); !strings.Contains(l, unit) {
		t.Errorf("systemctl --user list-units --type=scope lacks %s:\n%s", unit, l)
	}
	if s := unitProperty(t, unit, "Slice"); s != "mosaic.slice" {
		t.Errorf("%s is in slice %q, want mosaic.slice", unit, s)
	}
	if m := unitProperty(t, unit, "MemoryMax"); m != "536870912" {
		t.Errorf("%s MemoryMax=%s, want 536870912", unit, m)
	}
	st := mustMosaic(t, "status", "--json", name).stdout
	for _, want := range []string{`"kind": "scope"`, `"state": "active"`, `"unit": "` + unit + `"`} {
		if !strings.Contains(st, want) {
			t.Errorf("status lacks %s:\n%s", want, st)
		}
	}
	if l := mustMosaic(t, "list").stdout; !strings.Contains(l, name) || !strings.Contains(l, "scope") {
		t.Errorf("list does not show the scope session:\n%s", l)
	}

	mustMosaic(t, "stop", name)
	select {
	case code := <-exited:
		if code != 143 {
			t.Errorf("run exited %d, want 143\nstderr: %s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("mosaic run --scope did not return after mosaic stop")
	}
	if !strings.Contains(stderr.String(), "was stopped from outside") {
		t.Errorf("run gave no reason: %q", stderr.String())
	}
	if l := systemctl(t, "list-units", "--all", "--plain", "--no-legend", unit); strings.Contains(l, unit) {
		t.Errorf("the scope is still there after run returned:\n%s", l)
	}
	if st := mustMosaic(t, "status", "--json", name).stdout; !strings.Contains(st, `"exit_status": 143`) || !strings.Contains(st, `"kind": "scope"`) {
		t.Errorf("status after the end does not say how the scope ended:\n%s", st)
	}
}

// TestScopeRun: an unnamed scope run passes a credential through the
// exec's environment (never a command line: every process on the host is
// checked while it runs), returns the command's exit code, and leaves no
// unit and no state behind.
func TestScopeRun(t *testing.T) {
	needRig(t)
	secret := "scope-secret-" + randomHex()
	var stdout, stderr lockedBuffer
	cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "--workspace", workspace(t), "--credential", "TEST_TOKEN", "--",
		"sh", "-c", `echo "token=$TEST_TOKEN"; echo ready; sleep 1; exit 9`)
	cmd.Env = append(os.Environ(), "TEST_TOKEN="+secret)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	eventually(t, 15*time.Second, "the scope session to run", func() bool { return strings.Contains(stdout.String(), "ready") })
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the secret: %q", p, b)
		}
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 9 {
		t.Fatalf("exit %d, want 9\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "token="+secret) {
		t.Errorf("the credential did not arrive: %s", stdout.String())
	}
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("the secret leaked on stderr: %s", stderr.String())
	}
	eventually(t, 5*time.Second, "systemd to collect the ended scope", func() bool {
		return systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-*.scope") == ""
	})
	entries, _ := os.ReadDir(filepath.Join(stateRoot(), "sessions"))
	for _, e := range entries {
		// (An unnamed clone-mode run of another test that left a change
		// keeps it, and its finish step's output: its clone.json says so.)
		session := strings.TrimSuffix(e.Name(), "-finish")
		if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", session, "clone.json")); strings.HasPrefix(e.Name(), "sh-") && err != nil {
			t.Errorf("an unnamed scope run left its state: %s", e.Name())
		}
	}
}

// TestScopeTerminal: a scope session inherits the user's terminal directly;
// Ctrl-C there reaches the command (through mosaic and the init).
func TestScopeTerminal(t *testing.T) {
	needRig(t)
	r := startOnPTY(t, 24, 80, "run", "--scope", "--direct", "--workspace", workspace(t), "--", "sh", "-c", `test -t 0 && echo on-terminal; echo ready; exec sleep 300`)
	r.waitFor("ready")
	if !strings.Contains(r.output(), "on-terminal") {
		t.Errorf("the scope session is not on the terminal:\n%s", r.output())
	}
	r.typeKeys("\x03")
	if code := r.wait(); code != 130 {
		t.Errorf("Ctrl-C: exit %d, want 130\n%s", code, r.output())
	}
	if after := termios(t, r.slave); after != r.before {
		t.Errorf("the terminal's modes changed")
	}
}

// TestScopeInitOutsideRefused: a scope's init starts before systemd has put
// it into the scope and waits for mosaic's byte; released outside the scope
// (by a mosaic that never asked for it), where its limits, `systemctl --user
// stop` and inspection do not reach, it refuses to run the command there.
// Shown first against a mosaic whose promise names no scope: the command
// then runs, outside it.
func TestScopeInitOutsideRefused(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	run := func(env ...string) result {
		cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "sh", "-c", "cat /proc/self/cgroup; touch "+mark)
		cmd.Env = append(append(os.Environ(), "MOSAIC_TEST_SCOPE_OUTSIDE=1"), env...)
		return runResult(t, cmd)
	}
	weak := run("MOSAIC_TEST_NO_SCOPE_PROMISE=1")
	if _, err := os.Stat(mark); err != nil || weak.code != 0 || strings.Contains(weak.stdout, "/mosaic.slice/") {
		t.Fatalf("the weakened mosaic did not run the command outside its scope, so this test proves nothing: exit %d\n%s%s", weak.code, weak.stdout, weak.stderr)
	}
	os.Remove(mark)
	r := run()
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the command ran outside its scope:\n%s", r.stdout)
	}
	if r.code != 125 || !strings.Contains(r.stderr, "not in its scope") {
		t.Errorf("exit %d, want 125 and the reason\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestScopeInterruptWhileHeld: Ctrl-C while a scope session starts (the
// init held until systemd has made the scope) stops it: the command never
// runs, mosaic exits 130 and the name is free again. Shown first against a
// mosaic that takes no notice of it and lets the init run.
func TestScopeInterruptWhileHeld(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	name := sessionName(t)
	mark := filepath.Join(ws, "ran")
	run := func(mode string) result {
		cmd := exec.Command(bin, "run", "--scope", "--direct", "--name", name, "-w", ws, "--", "touch", mark)
		cmd.Env = append(os.Environ(), "MOSAIC_TEST_SIGNAL_HELD="+mode)
		return runResult(t, cmd)
	}
	weak := run("dropped")
	if _, err := os.Stat(mark); err != nil || weak.code != 0 {
		t.Fatalf("the weakened mosaic did not run the command after Ctrl-C, so this test proves nothing: exit %d\n%s%s", weak.code, weak.stdout, weak.stderr)
	}
	os.Remove(mark)
	r := run("1")
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the command ran after Ctrl-C during the start")
	}
	if r.code != 130 || !strings.Contains(r.stderr, "interrupted") {
		t.Errorf("exit %d, want 130 and why\n%s%s", r.code, r.stdout, r.stderr)
	}
	if l := systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-"+name+".scope"); l != "" {
		t.Errorf("the interrupted scope is still there:\n%s", l)
	}
	if again := mosaicAs(t, bin, "run", "--scope", "--direct", "--name", name, "-w", ws, "--", "true"); again.code != 0 {
		t.Errorf("the name is not free after the interrupted start: exit %d\n%s", again.code, again.stderr)
	}
}

// TestScopeCtrlZ: Ctrl-Z on the terminal a scope session inherits does not
// suspend mosaic while the session runs on. The session is in a process
// group of its own: were mosaic stopped, the shell would take the terminal
// back while the command went on reading and writing it (a prompt of its
// own, the user's next keystrokes). Shown first against a mosaic that leaves
// SIGTSTP to its default, run as a shell runs a foreground job.
func TestScopeCtrlZ(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		tick := filepath.Join(ws, "tick")
		script := `set -m; "$@"; rc=$?; if [ $rc = 148 ]; then echo suspended; sleep 2; fg >/dev/null; rc=$?; fi; echo "rc:$rc"`
		if weak {
			script = "export MOSAIC_TEST_SCOPE_SUSPENDABLE=1; " + script
		}
		r := startOnPTYAs(t, "/bin/bash", 24, 80, "-c", script, "bash", bin, "run", "--scope", "--direct", "-w", ws, "--",
			"sh", "-c", `echo ready; while :; do echo x >>`+tick+`; sleep 0.05; done`)
		r.waitFor("ready")
		r.typeKeys("\x1a")
		time.Sleep(time.Second)
		before, _ := os.ReadFile(tick)
		time.Sleep(500 * time.Millisecond)
		after, _ := os.ReadFile(tick)
		ranOn := strings.Contains(r.output(), "suspended") && len(after) > len(before)
		if weak && !ranOn {
			t.Fatalf("the weakened mosaic was not suspended with its session running on, so this test proves nothing:\n%s", r.output())
		}
		if !weak && ranOn {
			t.Errorf("Ctrl-Z suspended mosaic and the session ran on:\n%s", r.output())
		}
		if weak {
			r.waitFor("suspended")
			time.Sleep(2500 * time.Millisecond) // bash brings mosaic back to the foreground
		} else if len(after) <= len(before) {
			t.Errorf("the command did not go on after Ctrl-Z (the init resumes it)")
		}
		r.typeKeys("\x03")
		// mosaic dies of SIGINT as the command did, and so the script's
		// bash stops its list there, dying of it too (as it would, the
		// command run without mosaic): 130 either way.
		if code := r.wait(); code != 130 && !strings.Contains(r.output(), "rc:130") {
			t.Errorf("Ctrl-C after Ctrl-Z: exit %d, want 130:\n%s", code, r.output())
		}
	}
}

// TestScopeHeldInitMosaicGone: mosaic killed once systemd has made the
// scope but before it lets the held init run leaves the init's go pipe at
// EOF; in the scope, its cgroup check passes, and the command would run with
// nobody to relay its signals or record its end (and a bwrap whose parent
// died first never kills it). The init refuses on EOF. The EOF is made by a
// mosaic that sends nothing (MOSAIC_TEST_RELEASE_EOF), shown first against
// an init that runs on EOF as on the byte (MOSAIC_TEST_NO_INIT_GO).
func TestScopeHeldInitMosaicGone(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	run := func(env ...string) result {
		cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "touch", mark)
		cmd.Env = append(append(os.Environ(), "MOSAIC_TEST_RELEASE_EOF=1"), env...)
		return runResult(t, cmd)
	}
	weak := run("MOSAIC_TEST_NO_INIT_GO=1")
	if _, err := os.Stat(mark); err != nil || weak.code != 0 {
		t.Fatalf("the weakened mosaic's init did not run the command on EOF, so this test proves nothing: exit %d\n%s%s", weak.code, weak.stdout, weak.stderr)
	}
	os.Remove(mark)
	r := run()
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the command ran although mosaic never let it")
	}
	if r.code != 125 || !strings.Contains(r.stderr, "is gone") {
		t.Errorf("exit %d, want 125 and the reason\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestScopeStoppedWhileHeld: a stop of the scope (mosaic stop, systemctl
// --user stop) that begins while the init is held sends its SIGTERM to the
// held init; mosaic sees the stop and does not let the command run. Shown
// first against a mosaic that does not look (and an init that ignores
// signals while held, so that the command surely runs).
func TestScopeStoppedWhileHeld(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	for _, weak := range []bool{true, false} {
		var env []string
		if weak {
			env = []string{"MOSAIC_TEST_BLIND_TO_STOP=1", "MOSAIC_TEST_IGNORE_HELD=1"}
		}
		cmd, out, _ := stopWhileHeld(t, bin, ws, "2s", env, "touch", mark)
		_, ran := os.Stat(mark)
		if weak && ran != nil {
			t.Fatalf("the weakened mosaic did not run the command of a stopped scope, so this test proves nothing: exit %d\n%s", cmd.ProcessState.ExitCode(), out.String())
		}
		if !weak && ran == nil {
			t.Errorf("the command of a scope stopped while held ran:\n%s", out.String())
		}
		if !weak && !strings.Contains(out.String(), "stopped from outside before its command ran") {
			t.Errorf("mosaic did not say why: exit %d\n%s", cmd.ProcessState.ExitCode(), out.String())
		}
		os.Remove(mark)
	}
}

// stopWhileHeld runs mosaic run --scope (bin, in ws, with env and the stop
// timeout given) of command, stops its scope with systemctl once mosaic
// holds the init (MOSAIC_TEST_PAUSE_HELD) and the stop has begun, lets
// mosaic go on, and returns the ended run, its output and when it was let
// go on.
func stopWhileHeld(t *testing.T, bin, ws, stopTimeout string, env []string, command ...string) (*exec.Cmd, *lockedBuffer, time.Time) {
	t.Helper()
	name := sessionName(t)
	unit := "mosaic-" + name + ".scope"
	fifo := filepath.Join(t.TempDir(), "pause")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"run", "--scope", "--direct", "--name", name, "--stop-timeout", stopTimeout, "-w", ws, "--"}, command...)...)
	cmd.Env = append(append(os.Environ(), "MOSAIC_TEST_PAUSE_HELD="+fifo), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Opening the FIFO for writing succeeds once mosaic holds the init.
	var fd int
	eventually(t, 15*time.Second, "mosaic to hold the init", func() bool {
		var err error
		fd, err = unix.Open(fifo, unix.O_WRONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		return err == nil
	})
	systemctl(t, "stop", "--no-block", unit)
	eventually(t, 5*time.Second, "the stop to begin", func() bool { return unitProperty(t, unit, "SubState") == "stop-sigterm" })
	released := time.Now()
	unix.Close(fd)
	cmd.Wait()
	return cmd, out, released
}

// TestScopeNoUserManager: a scope run claims its name and builds its sandbox
// while mosaic is still connecting to systemd (Launch does not wait for the
// connection); when no user manager answers, it says so (exit 3,
// no-user-manager), its command never runs, and it leaves no state.
func TestScopeNoUserManager(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	probe := filepath.Join(ws, "zz-no-manager-probe")
	writeFile(t, probe, "#!/bin/sh\ntouch "+mark+"\n")
	os.Chmod(probe, 0o755)
	rt, err := os.MkdirTemp(homeDir(), ".mosaic-test-rt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	env := []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + filepath.Join(rt, "no-bus"), "XDG_RUNTIME_DIR=" + rt}
	r := mosaicWith(t, env, "", "run", "--scope", "--direct", "--json", "-w", ws, "--", probe)
	if code, msg := jsonError(t, r); r.code != 3 || code != "no-user-manager" {
		t.Errorf("exit %d %s %q; want 3 no-user-manager", r.code, code, msg)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the command ran without a user manager")
	}
	entries, _ := os.ReadDir(filepath.Join(stateRoot(), "sessions"))
	for _, e := range entries {
		if strings.Contains(e.Name(), "zz-no-manager-probe") {
			t.Errorf("the failed run left its state: %s", e.Name())
		}
	}
}
