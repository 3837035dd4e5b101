package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestScopeInterruptWhileConnecting: Ctrl-C (or SIGTERM) to mosaic run
// --scope while it is still connecting to systemd (Launch no longer waits
// for the connection, so mosaic already handles the signal) stops the run
// at once: exit 130, its command never run, its state undone. The bus
// answers nothing (a stopped dbus-daemon) and there is no private socket,
// so the connection would fail only after dialTimeout with
// no-user-manager; a mosaic that waits for it first says that instead.
func TestScopeInterruptWhileConnecting(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "ran")
	rt, err := os.MkdirTemp(homeDir(), ".mosaic-test-rt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(rt) })
	// A socket nobody answers: the connection is made, the AUTH never answered.
	silent, err := net.Listen("unix", filepath.Join(rt, "silent-bus"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	for _, sig := range []os.Signal{os.Interrupt, unix.SIGTERM} {
		cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "--json", "-w", ws, "--", "touch", mark)
		cmd.Env = append(os.Environ(), "DBUS_SESSION_BUS_ADDRESS=unix:path="+filepath.Join(rt, "silent-bus"), "XDG_RUNTIME_DIR="+rt)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		// bwrap is started after mosaic subscribed to the signals, and
		// while the connection is still being made.
		eventually(t, 10*time.Second, "mosaic to start bwrap", func() bool { return heldBwrap(cmd.Process.Pid) })
		if time.Since(began) > 2*time.Second {
			t.Fatalf("bwrap started only after %s: the run waited for the connection", time.Since(began))
		}
		cmd.Process.Signal(sig)
		err := cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if err != nil && code < 0 {
			t.Fatalf("%v: mosaic died of the signal instead of handling it: %v", sig, err)
		}
		if ecode, msg := jsonError(t, result{stdout.String(), stderr.String(), code}); code != 130 || ecode != "interrupted" {
			t.Errorf("%v while connecting: exit %d %s %q, want 130 interrupted", sig, code, ecode, msg)
		}
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("%v while connecting: the command ran", sig)
		}
		if heldBwrap(cmd.Process.Pid) {
			t.Errorf("%v while connecting: bwrap is left", sig)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(stateRoot(), "sessions"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "touch-") {
			t.Errorf("the interrupted run left its state: %s", e.Name())
		}
	}
}

// heldBwrap reports whether process pid has a child that is a scope's
// bwrap (not the sandbox probe's): one with an --info-fd.
func heldBwrap(pid int) bool { return scopeBwrap(pid) > 0 }

// scopeBwrap is the PID of process pid's child that is a scope's bwrap,
// or 0.
func scopeBwrap(pid int) int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		j := bytes.IndexByte(b, '(')
		if i < 0 || j < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && string(b[j+1:i]) == "bwrap" {
			argv, _ := os.ReadFile(filepath.Join(filepath.Dir(s), "cmdline"))
			if bytes.Contains(argv, []byte("\x00--info-fd\x00")) {
				n, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
				return n
			}
		}
	}
	return 0
}

// TestScopeStopTimeoutIsNotRuntimeMax: a command that ignores SIGTERM,
// stopped with mosaic stop, is SIGKILLed at the stop timeout and systemd's
// result is "timeout", as for --runtime-max; mosaic run must still say it
// was stopped from outside, not that it reached a --runtime-max it never
// had. A --runtime-max session that ignores SIGTERM still says runtime-max.
// (A service run, the same.)
func TestScopeStopTimeoutIsNotRuntimeMax(t *testing.T) {
	needRig(t)
	for _, tc := range []struct{ run, how, want string }{
		{"--scope", "stop", "outside"}, {"--scope", "runtime-max", "runtime-max"},
		{"--pty=false", "stop", "outside"}, {"--pty=false", "runtime-max", "runtime-max"}, // a service, the same
	} {
		name := sessionName(t)
		args := []string{"run", tc.run, "--direct", "--json", "--name", name, "-w", workspace(t), "--stop-timeout", "1s"}
		if tc.how == "runtime-max" {
			args = append(args, "--runtime-max", "1s")
		}
		args = append(args, "--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done")
		var stdout, stderr lockedBuffer
		cmd := exec.Command(mosaicBin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		eventually(t, 15*time.Second, "the session to run", func() bool { return strings.Contains(stdout.String(), "ready") })
		if tc.how == "stop" {
			mustMosaic(t, "stop", name)
		}
		cmd.Wait()
		if !strings.Contains(stderr.String(), `"stopped_by": "`+tc.want+`"`) {
			t.Errorf("run %s, %s of a command ignoring SIGTERM: want stopped_by %s:\n%s", tc.run, tc.how, tc.want, stderr.String())
		}
	}
}

// TestScopeGracefulWhenMosaicsUnitStops: bwrap's monitor is in mosaic's own
// cgroup, so a stop of the unit mosaic runs in (a terminal's scope, a
// logout) sends SIGTERM to it as to mosaic. The command still gets its
// SIGTERM (forwarded by mosaic) and its time to shut down: a monitor that
// died of the SIGTERM would have --die-with-parent SIGKILL the session
// (exit 143, the trap never finished). The command runs with no signal
// blocked.
func TestScopeGracefulWhenMosaicsUnitStops(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	mark := filepath.Join(ws, "graceful")
	var stdout, stderr lockedBuffer
	cmd := exec.Command(mosaicBin, "run", "--scope", "--direct", "-w", ws, "--", "sh", "-c",
		"trap 'sleep 0.5; touch "+mark+"; exit 7' TERM; grep SigBlk /proc/self/status; echo ready; while :; do sleep 0.1; done")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	eventually(t, 15*time.Second, "the session to run", func() bool { return strings.Contains(stdout.String(), "ready") })
	if !strings.Contains(stdout.String(), "SigBlk:\t0000000000000000") {
		t.Errorf("the command runs with signals blocked:\n%s", stdout.String())
	}
	monitor := scopeBwrap(cmd.Process.Pid)
	if monitor == 0 {
		t.Fatal("no bwrap monitor under mosaic")
	}
	// What systemd does to every process of a unit it stops.
	unix.Kill(monitor, unix.SIGTERM)
	unix.Kill(cmd.Process.Pid, unix.SIGTERM)
	cmd.Wait()
	if _, err := os.Stat(mark); err != nil || cmd.ProcessState.ExitCode() != 7 {
		t.Errorf("SIGTERM to mosaic and its bwrap: exit %d, the command's trap finished: %v; want 7 and yes\n%s", cmd.ProcessState.ExitCode(), err == nil, stderr.String())
	}
}
