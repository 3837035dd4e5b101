package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestScopeInterruptAfterResizes: a Ctrl-C during a scope's start that
// comes after a few SIGWINCH (a terminal window being resized) still stops
// the run before its command. os/signal drops a signal whose channel is
// full, and nothing reads mosaic's while systemd makes the scope: four
// SIGWINCH there used to fill it, and the Ctrl-C that followed was lost
// (the command ran as if nobody had pressed it).
func TestScopeInterruptAfterResizes(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "touch", mark)
	cmd.Env = append(os.Environ(), "MOSAIC_TEST_SIGNAL_HELD=resized")
	r := runResult(t, cmd)
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the command ran after a Ctrl-C during the start that came after resizes: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r.code != 130 || !strings.Contains(r.stderr, "interrupted") {
		t.Errorf("exit %d, want 130 and why\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestScopeForwardsWinch: a running scope session's command still gets
// the SIGWINCH mosaic gets (its terminal was resized), now forwarded
// through a channel of its own.
func TestScopeForwardsWinch(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	ready := filepath.Join(ws, "ready")
	cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "-w", ws, "--", "sh", "-c", `trap 'exit 7' WINCH; touch `+ready+`; while :; do sleep 0.05; done`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the command's trap", func() bool { _, err := os.Stat(ready); return err == nil })
	_ = cmd.Process.Signal(syscall.SIGWINCH)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-done
	}
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("the command did not get SIGWINCH: exit %d", code)
	}
}
