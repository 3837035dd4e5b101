package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestStopAndRmTakeSeveralNames (issue 30): stop and rm take several names,
// as systemctl and docker do; one that fails (no such session) is reported
// and the others are still acted on, with the failure's exit code; a bad
// name among them changes nothing; rm -f stops a running session first.
// start -q prints the session's name alone.
func TestStopAndRmTakeSeveralNames(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	a, b := sessionName(t), sessionName(t)
	for _, n := range []string{a, b} {
		r := mustMosaic(t, "start", "-q", "--name", n, "-w", ws, "--", "sleep", "300")
		if r.stdout != n+"\n" {
			t.Errorf("start -q printed %q, want the name alone", r.stdout)
		}
	}
	if r := mosaic(t, "attach", "--json", a); r.code != 3 || !strings.Contains(r.stdout, "no-terminal") {
		t.Errorf("attach to a session started without --pty: exit %d, %s%s", r.code, r.stdout, r.stderr)
	}
	if r := mosaic(t, "stop", a, "Bad_Name"); r.code != 2 || !strings.Contains(mustMosaic(t, "status", a).stdout, "active (running)") {
		t.Fatalf("stop with a bad name among good ones: exit %d (want 2), and it must stop nothing: %s", r.code, r.stderr)
	}
	missing := "t-nosuch-" + randomHex()
	r := mosaic(t, "stop", "--timeout", "2s", a, missing)
	if r.code == 0 {
		t.Errorf("stop A MISSING: exit 0, want the failure's code")
	}
	if !strings.Contains(r.stdout, "stopped session "+a) || !strings.Contains(r.stderr, missing) {
		t.Errorf("stop A MISSING: stdout %q stderr %q", r.stdout, r.stderr)
	}
	js := mosaic(t, "stop", "--json", a, missing)
	docs := decode[[]map[string]any](t, js.stdout)
	if len(docs) != 2 || docs[0]["name"] != a || docs[1]["error"] == nil || js.code == 0 {
		t.Errorf("stop --json A MISSING: exit %d, %s", js.code, js.stdout)
	}
	if r := mosaic(t, "rm", b); r.code == 0 {
		t.Errorf("rm of a running session succeeded without -f")
	}
	r = mustMosaic(t, "rm", "-f", a, b)
	for _, n := range []string{a, b} {
		if !strings.Contains(r.stdout, "removed session "+n) {
			t.Errorf("rm -f A B: %q", r.stdout)
		}
		if r := mosaic(t, "status", n); r.code == 0 {
			t.Errorf("session %s still there after rm -f: %s", n, r.stdout)
		}
	}
}

// TestRunQuietAndJSON (issue 30): run -q silences the notes (a base URL's
// host allowed), as it does the banner; run --json prints no banner either.
func TestRunQuietAndJSON(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	args := []string{"-w", ws, "--profile", "claude-code", "--sign-in", "--env", "ANTHROPIC_BASE_URL=https://testhost.mosaic.test", "--", "true"}
	loud := mosaic(t, append([]string{"run"}, args...)...)
	if loud.code != 0 || !strings.Contains(loud.stderr, "names testhost.mosaic.test") {
		t.Fatalf("the control run shows no note (exit %d): %s", loud.code, loud.stderr)
	}
	if quiet := mustMosaic(t, append([]string{"run", "-q"}, args...)...); strings.Contains(quiet.stderr, "may reach it") {
		t.Errorf("run -q still printed the note: %s", quiet.stderr)
	}
	// On a terminal, where the banner would be.
	r := startOnPTY(t, 24, 80, "run", "--json", "-w", ws, "--", "sh", "-c", "echo done-here")
	r.wait()
	if out := r.output(); strings.Contains(out, "exit the command to leave") || !strings.Contains(out, "done-here") {
		t.Errorf("run --json on a terminal: %q", out)
	}
}

// TestScopeInList (issue 30): a running --scope session shows its PID (its
// init's, the scope's leader) and AGE in list and status, and logs says it
// runs in the foreground (not that it ran).
func TestScopeInList(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	name := sessionName(t)
	cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "--name", name, "-w", ws, "--", "sh", "-c", "touch ready; exec sleep 300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(unix.SIGTERM); cmd.Wait() }()
	eventually(t, 30*time.Second, "the scope session to run", func() bool { _, err := os.Stat(filepath.Join(ws, "ready")); return err == nil })
	list := decode[[]map[string]any](t, mustMosaic(t, "list", "--json").stdout)
	found := false
	for _, s := range list {
		if s["name"] != name {
			continue
		}
		found = true
		pid, _ := s["main_pid"].(float64)
		if pid == 0 || s["since"] == nil {
			t.Errorf("list shows the scope without PID or start: %v", s)
		}
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", int(pid))); !strings.Contains(string(b), "init") {
			t.Errorf("the PID list shows is not the session's init: %q", b)
		}
	}
	if !found {
		t.Fatalf("list lacks %s", name)
	}
	if r := mustMosaic(t, "list"); !regexp.MustCompile(name + `\s+scope\s+active\s+\S+\s+\d+\s+[^-\s]`).MatchString(r.stdout) {
		t.Errorf("list's row lacks a PID or AGE:\n%s", r.stdout)
	}
	if r := mosaic(t, "logs", name); !strings.Contains(r.stderr, "runs in the foreground") {
		t.Errorf("logs of a running scope session: %q", r.stderr)
	}
}

// TestRunBannerOnlyForTyping (issue 40): run's banner ("exit the command to
// leave") shows on a terminal only when the user types into the session:
// a script piping into run --pty, its stderr still the terminal, gets the
// command's output alone. Checked against the build before the fix (the
// banner for a forced --pty whatever stdin was): the piped case failed.
func TestRunBannerOnlyForTyping(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	typed := startOnPTY(t, 24, 80, "run", "-w", ws, "--", "sh", "-c", "echo done-here")
	typed.wait()
	if out := typed.output(); !strings.Contains(out, "exit the command to leave") || !strings.Contains(out, "done-here") {
		t.Fatalf("the control run, typed into on a terminal, shows no banner: %q", out)
	}
	piped := startOnPTYAs(t, "/bin/sh", 24, 80, "-c", `echo piped-in | "$0" run --pty -w "$1" -- sh -c "head -n 1"`, mosaicBin, ws)
	piped.wait()
	if out := piped.output(); strings.Contains(out, "exit the command to leave") || !strings.Contains(out, "piped-in") {
		t.Errorf("a run piped into, on a terminal: %q", out)
	}
}
