package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestScopeHeldStopNewsLate: a stop of the scope that begins while the
// init is held, announced to mosaic only after it looked (systemd sends the
// SIGTERM first and the news over D-Bus after it, so mosaic may look in
// between: MOSAIC_TEST_BLIND_TO_STOP stands for that), still ends the
// command at once: the held init keeps the SIGTERM and forwards it as the
// command starts. Shown first against an init that ignores signals while
// held: the SIGTERM is lost and the command runs on until the stop
// timeout's SIGKILL (exit 137, not 143).
func TestScopeHeldStopNewsLate(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	for _, weak := range []bool{true, false} {
		env := []string{"MOSAIC_TEST_BLIND_TO_STOP=1"}
		if weak {
			env = append(env, "MOSAIC_TEST_IGNORE_HELD=1")
		}
		cmd, out, released := stopWhileHeld(t, bin, ws, "3s", env, "sleep", "30")
		took, code := time.Since(released), cmd.ProcessState.ExitCode()
		if weak && code != 137 {
			t.Fatalf("the weakened init's command did not run on until the stop timeout's SIGKILL, so this test proves nothing: exit %d after %v\n%s", code, took, out.String())
		}
		if !weak && (code != 143 || took > 2*time.Second) {
			t.Errorf("the command of a scope stopped while held did not end on the stop's SIGTERM: exit %d after %v\n%s", code, took, out.String())
		}
	}
}

// TestScopeSignalAtRelease: a signal mosaic forwards as soon as it has let
// the held init run (Ctrl-C in the terminal, a harness's SIGTERM), come
// before the init has read mosaic's byte, reaches the command: the init
// keeps it. Shown first against an init that ignores signals while held,
// where it is lost and the command runs on to its end as if nobody had
// pressed Ctrl-C.
func TestScopeSignalAtRelease(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	for _, weak := range []bool{true, false} {
		cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "sleep", "4")
		cmd.Env = append(os.Environ(), "MOSAIC_TEST_SIGNAL_AT_RELEASE=1")
		if weak {
			cmd.Env = append(cmd.Env, "MOSAIC_TEST_IGNORE_HELD=1")
		}
		began := time.Now()
		out, _ := cmd.CombinedOutput()
		took, code := time.Since(began), shellStatus(cmd.ProcessState)
		if weak && (code != 0 || took < 4*time.Second) {
			t.Fatalf("the weakened init's command did not run on after Ctrl-C, so this test proves nothing: exit %d after %v\n%s", code, took, out)
		}
		if !weak && (code != 130 || took > 3*time.Second) {
			t.Errorf("Ctrl-C as the session started did not end the command: exit %d after %v\n%s", code, took, out)
		}
	}
}

// TestScopeSignalBeforeHeld: systemd often makes the scope before bwrap has
// built the sandbox and the init's runtime has started. mosaic forwards
// nothing to the init until it says it is held: a signal forwarded sooner
// finds PID 1 of its namespace without its handlers, which drops it (the
// command then runs on as if nobody had pressed Ctrl-C) or, once the Go
// runtime's own are there, dies of it (exit 2). With the init made slower
// to become held (MOSAIC_TEST_SLOW_INIT), a mosaic that does not wait
// forwards the Ctrl-C before the init can keep it, whichever of the two
// then happens (an init that lost it finds mosaic gone once it is held:
// 125); never is the command ended by it (130), which is shown first.
func TestScopeSignalBeforeHeld(t *testing.T) {
	needRig(t)
	bin := hookedMosaic(t)
	ws := workspace(t)
	for _, weak := range []bool{true, false} {
		cmd := exec.Command(bin, "run", "--scope", "--direct", "-w", ws, "--", "sleep", "4")
		cmd.Env = append(os.Environ(), "MOSAIC_TEST_SIGNAL_AT_RELEASE=1", "MOSAIC_TEST_SLOW_INIT=1")
		if weak {
			cmd.Env = append(cmd.Env, "MOSAIC_TEST_NO_AWAIT_HELD=1")
		}
		began := time.Now()
		out, _ := cmd.CombinedOutput()
		took, code := time.Since(began), shellStatus(cmd.ProcessState)
		if weak && code == 130 {
			t.Fatalf("the weakened mosaic's Ctrl-C reached the command although it was forwarded before the init was held, so this test proves nothing: exit %d after %v\n%s", code, took, out)
		}
		if !weak && (code != 130 || took > 3*time.Second) {
			t.Errorf("Ctrl-C as the session started did not end the command with 130: exit %d after %v\n%s", code, took, out)
		}
	}
}
