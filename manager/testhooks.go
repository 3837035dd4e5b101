package manager

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mosaic/credentials"
	"mosaic/internal/credvar"
	"mosaic/internal/testhook"
	"mosaic/manager/request"
	"mosaic/manager/statedir"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
)

// The manager's test hooks, each a named point of package testhook: they
// act only in the binary the race tests build with -tags mosaic_testhooks,
// never in mosaic itself, where each is a constant no-op.

// testPauseAfterCheck, when MOSAIC_TEST_PAUSE_AFTER_CHECK names a FIFO,
// waits after the request's paths were checked until the test has opened
// the FIFO (so it knows the check is done), changed the paths, and closed
// it: a check-then-mount race made deterministic.
func testPauseAfterCheck() { testhook.Wait("MOSAIC_TEST_PAUSE_AFTER_CHECK") }

// testSkipBindIdentity, under MOSAIC_TEST_SKIP_BIND_IDENTITY=1, sends the
// sandbox no bind identities to check: the weakened mosaic the race test
// first shows the attack against.
func testSkipBindIdentity() bool { return testhook.Flag("MOSAIC_TEST_SKIP_BIND_IDENTITY") }

// testExtraRO, from MOSAIC_TEST_EXTRA_RO, is a path bound read-only past
// the deny-list: the deliberately broken sandbox the escape table is first
// shown to catch.
func testExtraRO() []string {
	if p := testhook.Value("MOSAIC_TEST_EXTRA_RO"); p != "" {
		return []string{p}
	}
	return nil
}

// testScopeOutside, under MOSAIC_TEST_SCOPE_OUTSIDE=1, lets a scope's held
// init run without asking systemd for the scope: what an init that ran
// before the scope was made would do.
func testScopeOutside() bool { return testhook.Flag("MOSAIC_TEST_SCOPE_OUTSIDE") }

// testNoScopePromise, under MOSAIC_TEST_NO_SCOPE_PROMISE=1, names no scope
// in a scope's promise: the weakened mosaic whose init does not check its
// cgroup, which the test shows the attack against first.
func testNoScopePromise() bool { return testhook.Flag("MOSAIC_TEST_NO_SCOPE_PROMISE") }

// testSignalWhileHeld, under MOSAIC_TEST_SIGNAL_HELD=1, has mosaic send
// itself SIGINT (Ctrl-C in the terminal) once systemd has made the scope and
// before it lets the held init run, and waits until the signal is queued for
// the session: an interrupt during the start made deterministic. Under
// MOSAIC_TEST_SIGNAL_HELD=dropped it drops what was queued: the weakened
// mosaic that takes no notice of it and lets the init run. Under
// MOSAIC_TEST_SIGNAL_HELD=resized eight SIGWINCH (a terminal window being
// resized during the start) come before the SIGINT, each handed to mosaic's
// channels before the next is sent.
func testSignalWhileHeld(signals chan os.Signal) {
	mode := testhook.Value("MOSAIC_TEST_SIGNAL_HELD")
	if mode == "" {
		return
	}
	if mode == "resized" {
		// os/signal hands one signal to every channel before the next: once
		// probe has a signal, so have (or have not, if full) the others.
		probe := make(chan os.Signal, 1)
		signal.Notify(probe, syscall.SIGWINCH, syscall.SIGINT)
		defer signal.Stop(probe)
		send := func(sig syscall.Signal) {
			_ = syscall.Kill(os.Getpid(), sig)
			select {
			case <-probe:
			case <-time.After(time.Second):
			}
		}
		for i := 0; i < 8; i++ {
			send(syscall.SIGWINCH)
		}
		send(syscall.SIGINT)
		send(syscall.SIGWINCH) // a fence: the SIGINT has been handed out
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	for i := 0; i < 1000 && len(signals) == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	for mode == "dropped" && len(signals) > 0 {
		<-signals
	}
}

// testScopeSuspendable, under MOSAIC_TEST_SCOPE_SUSPENDABLE=1, leaves
// SIGTSTP to its default: the weakened mosaic that Ctrl-Z suspends while
// its scope session runs on.
func testScopeSuspendable() bool { return testhook.Flag("MOSAIC_TEST_SCOPE_SUSPENDABLE") }

// testInitOptions are a scope's init's test-only options (sandbox.Init
// takes them in this build only):
//   - MOSAIC_TEST_NO_INIT_GO=1: run on EOF of the go socket as on mosaic's
//     byte, the weakened init that a mosaic killed while it was held lets run;
//   - MOSAIC_TEST_IGNORE_HELD=1: ignore the signals it forwards while held,
//     the weakened init that loses a stop's SIGTERM come before the byte;
//   - MOSAIC_TEST_SLOW_INIT=1: take 300 ms more before it is held, a sandbox
//     or Go runtime still starting when systemd has made the scope.
func testInitOptions() []string {
	var opts []string
	for _, o := range []struct{ env, opt string }{
		{"MOSAIC_TEST_NO_INIT_GO", "--test-go-on-eof"},
		{"MOSAIC_TEST_IGNORE_HELD", "--test-ignore-held"},
		{"MOSAIC_TEST_SLOW_INIT", "--test-slow-start=300ms"},
	} {
		if testhook.Flag(o.env) {
			opts = append(opts, o.opt)
		}
	}
	return opts
}

// testSignalAtRelease, under MOSAIC_TEST_SIGNAL_AT_RELEASE=1, forwards
// SIGINT to the held init just before mosaic lets it run: Ctrl-C (or a
// harness's SIGTERM) that mosaic forwards as soon as it has sent the byte,
// come before the init has read it, made deterministic.
func testSignalAtRelease(forward func(os.Signal)) {
	if testhook.Flag("MOSAIC_TEST_SIGNAL_AT_RELEASE") {
		forward(syscall.SIGINT)
	}
}

// testNoAwaitHeld, under MOSAIC_TEST_NO_AWAIT_HELD=1, lets the init run and
// forwards signals to it without waiting until it says it is held: the
// weakened mosaic.
func testNoAwaitHeld() bool { return testhook.Flag("MOSAIC_TEST_NO_AWAIT_HELD") }

// testReleaseBytes, under MOSAIC_TEST_RELEASE_EOF=1, sends nothing where
// mosaic lets the held init run: the EOF bwrap and the init see when mosaic
// is killed once the scope exists and before the init runs.
func testReleaseBytes(b []byte) []byte {
	if testhook.Flag("MOSAIC_TEST_RELEASE_EOF") {
		return nil
	}
	return b
}

// testPauseHeld, when MOSAIC_TEST_PAUSE_HELD names a FIFO, waits while the
// init is held in its scope until the test has opened the FIFO, done what
// it does to the scope (stop it), and closed it; then it gives systemd's
// announcement of that a moment to arrive.
func testPauseHeld() {
	if testhook.Wait("MOSAIC_TEST_PAUSE_HELD") {
		time.Sleep(200 * time.Millisecond) // the stop's announcement reaches the watch
	}
}

// testBlindToStop, under MOSAIC_TEST_BLIND_TO_STOP=1, lets the held init run
// although its scope is being stopped: the weakened mosaic.
func testBlindToStop() bool { return testhook.Flag("MOSAIC_TEST_BLIND_TO_STOP") }

// testHoldByProc, under MOSAIC_TEST_HOLD_BY_PROC=1, names the held
// credentials' /proc/PID/fd path in the unit itself, as before: the
// weakened mosaic whose unit keeps a path that a reused PID fills.
func testHoldByProc() bool { return testhook.Flag("MOSAIC_TEST_HOLD_BY_PROC") }

// testCredentialsOnDisk, under MOSAIC_TEST_CREDENTIALS_ON_DISK=1, also
// writes the credentials held for name to a file in the runtime directory,
// as mosaic before issue 31 did: the weakened mosaic whose crash leaves the
// secret on disk, which the crash test is first shown to catch. The file is
// beside mosaic's credential directory, not in it: the sweep of crashed
// starts' files (sweepCredentials), run by any other test's command the
// moment the kill frees the name, would otherwise remove it before the test
// looks (CI, stop 47).
func testCredentialsOnDisk(name string, vars []credvar.Var) {
	if !testhook.Flag("MOSAIC_TEST_CREDENTIALS_ON_DISK") {
		return
	}
	rt, err := request.RuntimeDir()
	if err != nil {
		return
	}
	path := filepath.Join(rt, "mosaic", "weakened-credentials", name, "env")
	if os.MkdirAll(filepath.Dir(path), 0o700) == nil {
		_ = credentials.WriteFileAtomic(path, credentials.Encode(vars))
	}
}

// testLoseAtStart, under MOSAIC_TEST_LOSE_AT_START, makes the connection
// to systemd go away once systemd has taken a start (StartTransientUnit
// answered): "close" closes it, as a killed dbus-daemon does; "reexec"
// closes it and has systemd re-execute itself (`systemctl --user
// daemon-reexec`, as an upgrade does) while the start job is under way.
func testLoseAtStart(m *Manager) {
	switch testhook.Value("MOSAIC_TEST_LOSE_AT_START") {
	case "reexec":
		m.conn.Close()
		_ = exec.Command("systemctl", "--user", "daemon-reexec").Run()
	case "close":
		m.conn.Close()
	}
}

// testUndoOnLoss, under MOSAIC_TEST_UNDO_ON_LOSS=1, undoes a start whose
// connection was lost as any failed start: the weakened mosaic that takes
// a running session's state away.
func testUndoOnLoss() bool { return testhook.Flag("MOSAIC_TEST_UNDO_ON_LOSS") }

// testLossIgnoresEnd, under MOSAIC_TEST_LOSS_IGNORES_END=1, cleans up after
// a lost start whose unit does not run although its end is recorded: the
// weakened mosaic that takes the record of a session stopped while the
// start reconnected.
func testLossIgnoresEnd() bool { return testhook.Flag("MOSAIC_TEST_LOSS_IGNORES_END") }

// testNoTie, under MOSAIC_TEST_NO_TIE=1, does not tie a mosaic run's
// session to the run: the weakened mosaic whose killed run leaves its
// session running unwatched.
func testNoTie() bool { return testhook.Flag("MOSAIC_TEST_NO_TIE") }

// testNoTermAgain, under MOSAIC_TEST_NO_TERM_AGAIN=1, is the weakened stop
// that sends no SIGTERM after systemd's one to a session still starting.
func testNoTermAgain() bool { return testhook.Flag("MOSAIC_TEST_NO_TERM_AGAIN") }

// testOldTieOn says MOSAIC_TEST_OLD_TIE=1 is set: the weakened mosaic that
// starts a run's tie scope in the session's own call (an aux unit, as
// units.Render makes it then), with a zombie child in it in place of the
// run (testOldTie): the kernel skips the move of a dying process, systemd
// counts it moved, and the scope runs on empty for good, as when a run is
// killed between the call and the move.
func testOldTieOn() bool { return testhook.Flag("MOSAIC_TEST_OLD_TIE") }

// testOldTie, under MOSAIC_TEST_OLD_TIE=1, starts a child that exits at
// once and is never reaped, and returns its PID once it is a zombie.
func testOldTie() uint32 {
	if !testOldTieOn() {
		return 0
	}
	c := exec.Command("true")
	if c.Start() != nil {
		return 0
	}
	stat := filepath.Join("/proc", strconv.Itoa(c.Process.Pid), "stat")
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(stat); strings.Contains(string(b), ") Z ") {
			break
		}
	}
	return uint32(c.Process.Pid)
}

// testRemoveEnv, when a test pauses at statedir.RemoveStage, hands the
// pause on to the removal unit, which runs with the user manager's
// environment, not this command's.
func testRemoveEnv() []sd.Property {
	if testhook.Value("MOSAIC_TEST_PAUSE_AT") != statedir.RemoveStage {
		return nil
	}
	return []sd.Property{{Name: "Environment", Value: dbus.MakeVariant([]string{
		"MOSAIC_TEST_PAUSE_AT=" + statedir.RemoveStage, "MOSAIC_TEST_PAUSE_DIR=" + testhook.Value("MOSAIC_TEST_PAUSE_DIR")})}}
}
