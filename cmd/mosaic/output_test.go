package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bytes a session chose are hostile wherever mosaic prints them: on a
// terminal `mosaic logs` and `mosaic status` show its escape sequences
// escaped (OSC 52 would write the user's clipboard, a title set would
// retitle the terminal); a pipe and --json get the exact bytes.
func TestHostileOutputEscapedOnATerminal(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	osc52 := "\x1b]52;c;bWFsaWNpb3Vz\x07"
	title := "\x1b]0;pwned\x07"
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sh", "-c",
		`printf 'clip %s title %s end\n' "$(printf '\033]52;c;bWFsaWNpb3Vz\007')" "$(printf '\033]0;pwned\007')"; sleep 300`, "arg-"+title)
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })

	// Through a pipe the exact bytes: the attack would work on a terminal.
	eventually(t, 10*time.Second, "the session's line in the journal", func() bool {
		return strings.Contains(mosaic(t, "logs", name).stdout, osc52)
	})
	if r := mustMosaic(t, "status", name, "--json"); !strings.Contains(r.stdout, `\u001b]0;pwned\u0007`) {
		t.Errorf("status --json lost the exact command: %s", r.stdout)
	}

	for _, args := range [][]string{{"logs", name}, {"status", name}} {
		r := startOnPTY(t, 24, 200, args...)
		if code := r.wait(); code != 0 {
			t.Fatalf("mosaic %v on a terminal: exit %d\n%s", args, code, r.output())
		}
		out := r.output()
		if strings.Contains(out, "\x1b]") || strings.Contains(out, "\x07") {
			t.Errorf("mosaic %v wrote a raw escape sequence to the terminal: %q", args, out)
		}
		if !strings.Contains(out, `\e]`) {
			t.Errorf("mosaic %v on a terminal: %q, want the sequence shown escaped", args, out)
		}
	}
}

// bash completes a session's name from systemd (the real script, through
// the real binary).
func TestBashCompletesSessionNames(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t)
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
	script := `source <(mosaic completion bash); COMP_WORDS=(mosaic stop "${1:0:3}"); COMP_CWORD=2; _mosaic; printf '%s\n' "${COMPREPLY[@]}"`
	cmd := exec.Command("bash", "-c", script, "bash", name)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(mosaicBin)+":"+os.Getenv("PATH"))
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), name) {
		t.Errorf("bash completion of %q: %q, %v; want %s among them", name[:3], out, err, name)
	}
}

// On an 80-column terminal nothing mosaic prints is wider: help, list with
// a long default name, status (its sandbox table), profiles.
func TestEightyColumns(t *testing.T) {
	needRig(t)
	t.Parallel()
	name := sessionName(t) + "-with-a-rather-long-name-for-a-list"
	mustMosaic(t, "start", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
	for _, args := range [][]string{{"list"}, {"status", name}, {"profiles"}, {"start", "--help"}, {"run", "--help"}, {"--help"}, {"doctor"}} {
		r := startOnPTY(t, 24, 80, args...)
		r.wait()
		for _, line := range strings.Split(r.output(), "\n") {
			if n := len([]rune(strings.TrimRight(line, "\r"))); n > 80 {
				t.Errorf("mosaic %v: a line of %d columns: %q", args, n, line)
			}
		}
	}
}

// Ctrl-C while a session starts stops what was started and says so (exit
// 130): the start is made slow by a bwrap that waits before it builds the
// session's sandbox (not the probe's), so the signal surely lands while the
// start job runs.
func TestInterruptedStart(t *testing.T) {
	needRig(t)
	t.Parallel()
	ws := workspace(t)
	slow := filepath.Join(ws, "bwrap")
	os.WriteFile(slow, []byte("#!/bin/sh\ncase \"$*\" in *\"/run/mosaic/init\"*) sleep 5 ;; esac\nexec /usr/bin/bwrap \"$@\"\n"), 0o700)
	name := sessionName(t)
	cmd := exec.Command(mosaicBin, "start", "--name", name, "--workspace", ws, "--", "sleep", "300")
	cmd.Env = append(os.Environ(), "MOSAIC_BWRAP="+slow)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mosaic(t, "stop", "--timeout", "0", name); mosaic(t, "rm", name) })
	eventually(t, 10*time.Second, "the session to be starting", func() bool {
		return unitProperty(t, "mosaic-"+name+".service", "ActiveState") == "activating"
	})
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	line := strings.TrimSpace(stderr.String())
	if code != 130 || !strings.Contains(line, "interrupted: session "+name+" was stopped") || strings.Contains(line, "\n") {
		t.Errorf("exit %d, stderr %q; want 130 and one line saying the session was stopped", code, line)
	}
	if st := unitProperty(t, "mosaic-"+name+".service", "ActiveState"); st == "active" || st == "activating" {
		t.Errorf("the session is %s after an interrupted start", st)
	}
}
