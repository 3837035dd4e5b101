package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A shell is an interactive bash with job control on a terminal the test
// made: the test types into it as a user would, and reads what it shows.
// No readline (--noediting): what the terminal shows is bash's and the
// programs' own output, with no redrawing in between.
type shell struct {
	*ptyRun
	n int
}

func startJobShell(t *testing.T) *shell {
	t.Helper()
	r := startOnPTYAs(t, "/bin/bash", 24, 80, "--norc", "--noprofile", "--noediting", "-i")
	sh := &shell{ptyRun: r}
	sh.typeKeys("PS1='P> '; set -m\n")
	sh.status("true")
	return sh
}

// status types line, then has bash print its status with a marker of its
// own, waits for it and returns the status. The marker is typed split by
// quotes, so that the line echoed as typed never matches it: only bash's
// output does.
func (sh *shell) status(line string) int {
	sh.t.Helper()
	sh.n++
	sh.typeKeys(fmt.Sprintf("%s\necho \"rc%d\"\"=$? end\"\n", line, sh.n))
	return sh.lastStatus()
}

// lastStatus waits for the status marker sh.n and returns it.
func (sh *shell) lastStatus() int {
	sh.t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`rc%d=(\d+) end`, sh.n))
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m := re.FindStringSubmatch(sh.output()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		if time.Now().After(deadline) {
			sh.t.Fatalf("the shell never printed status %d; the terminal shows:\n%s", sh.n, sh.output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunAsBackgroundJob (issue 30): mosaic run behaves as systemd-run
// --wait --pipe when it is not in the foreground of its terminal. A job
// started with & whose output goes to a file finishes and exits (it was
// "Stopped (tty output)" once its command ended: restoring the terminal's
// modes from the background stops a process with SIGTTOU, and then it
// ignored SIGTERM and SIGCONT); so does one run by timeout(1), which puts
// it in a process group of its own; and SIGTERM stops a background run at
// any time. bash's `wait` returns as soon as its job stops (status 128+22
// for SIGTTOU), so a regression fails here rather than hangs.
func TestRunAsBackgroundJob(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	sh := startJobShell(t)
	out := filepath.Join(ws, "out.txt")

	// The next line is typed ahead, while the session starts: systemd
	// resets a terminal it gets as a unit's stdin, flushing what was typed
	// at the shell's prompt (bash never read it), so a background run's
	// session gets /dev/null instead.
	started, goOn := filepath.Join(ws, "started"), filepath.Join(ws, "go-on")
	sh.typeKeys(fmt.Sprintf("%s run --direct -w %s -- sh -c 'touch started; while [ ! -e go-on ]; do sleep 0.02; done; test -t 0 || echo stdin-not-the-terminal; echo from-the-session' > %s &\n", mosaicBin, ws, out))
	sh.n++
	sh.typeKeys(fmt.Sprintf("wait $!; echo \"rc%d\"\"=$? end\"\n", sh.n))
	eventually(t, 30*time.Second, "the background session to run", func() bool { _, err := os.Stat(started); return err == nil })
	if err := os.WriteFile(goOn, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := sh.lastStatus(); code != 0 {
		t.Errorf("a background run: wait says %d, want 0 (150 is SIGTTOU: stopped); terminal:\n%s", code, sh.output())
	}
	if b, _ := os.ReadFile(out); string(b) != "stdin-not-the-terminal\nfrom-the-session\n" {
		t.Errorf("the background run's output: %q", b)
	}
	if strings.Contains(sh.output(), "Stopped") {
		t.Errorf("a job stopped:\n%s", sh.output())
	}

	done := filepath.Join(ws, "done")
	sh.typeKeys(fmt.Sprintf("timeout 20 %s run --direct -w %s -- sh -c 'ls /; touch done' </dev/tty >%s\n", mosaicBin, ws, out))
	eventually(t, 30*time.Second, "the session under timeout to run", func() bool { _, err := os.Stat(done); return err == nil })
	sh.n++
	sh.typeKeys(fmt.Sprintf("echo \"rc%d\"\"=$? end\"\n", sh.n))
	if code := sh.lastStatus(); code != 0 {
		t.Errorf("timeout 20 mosaic run ls </dev/tty >file: %d, want 0 (124: it hung); terminal:\n%s", code, sh.output())
	}
	if b, _ := os.ReadFile(out); !strings.Contains(string(b), "usr") {
		t.Errorf("ls under timeout printed %q", b)
	}

	ready := filepath.Join(ws, "ready")
	sh.typeKeys(fmt.Sprintf("%s run --direct -w %s -- sh -c 'touch ready; exec sleep 300' > %s &\n", mosaicBin, ws, out))
	eventually(t, 30*time.Second, "the background session to run", func() bool { _, err := os.Stat(ready); return err == nil })
	if code := sh.status("kill -TERM %%; wait %%"); code != 143 {
		t.Errorf("SIGTERM to a background run: wait says %d, want 143 (the command's SIGTERM); terminal:\n%s", code, sh.output())
	}
	sh.status("jobs")
	if strings.Contains(sh.output(), "Running") || strings.Contains(sh.output(), "Stopped") {
		t.Errorf("a job is left:\n%s", sh.output())
	}
}

// TestRunCtrlC (issue 30): Ctrl-C gives 130 and a clean terminal in both
// modes. Piped (here: output to a file), the key is mosaic's SIGINT, which
// stops the session; on a terminal it reaches the command inside through
// the session's own pseudo-terminal. Either way mosaic then dies of SIGINT,
// as the command did or would have, so that bash reports 130 and puts its
// prompt on a new line (it does that only for a job killed by SIGINT; it
// said "^CP> " before).
func TestRunCtrlC(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	sh := startJobShell(t)
	for i, mode := range []string{"piped", "pty"} {
		ready := filepath.Join(ws, fmt.Sprintf("ready%d", i))
		redirect := "> " + filepath.Join(ws, "out.txt")
		if mode == "pty" {
			redirect = ""
		}
		sh.n++
		sh.typeKeys(fmt.Sprintf("%s run -q --direct -w %s -- sh -c 'touch %s; exec sleep 300' %s\n", mosaicBin, ws, filepath.Base(ready), redirect))
		eventually(t, 30*time.Second, "the session to run ("+mode+")", func() bool { _, err := os.Stat(ready); return err == nil })
		before := len(sh.output())
		sh.typeKeys("\x03")
		// The next line is typed once the shell is back: before, mosaic
		// would relay it to the session (pty) or leave it to the shell's
		// next read anyway.
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(sh.output()[before:], "P> ") {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the shell's prompt never came back after Ctrl-C; terminal:\n%s", mode, sh.output())
			}
			time.Sleep(20 * time.Millisecond)
		}
		sh.typeKeys(fmt.Sprintf("echo \"rc%d\"\"=$? end\"\n", sh.n))
		if code := sh.lastStatus(); code != 130 {
			t.Errorf("%s: Ctrl-C gave %d, want 130; terminal:\n%s", mode, code, sh.output())
		}
		shown := sh.output()[before:]
		if !regexp.MustCompile(`\^C.*\r\n(.*\r\n)*P> `).MatchString(shown) || strings.Contains(shown, "^CP> ") {
			t.Errorf("%s: after Ctrl-C the prompt is not on a line of its own: %q", mode, shown)
		}
	}
}
