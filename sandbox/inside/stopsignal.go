package inside

import (
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
)

// MonitorStatusEnv carries to a service's init the descriptor of the
// unit's main process's /proc status: the exec shim's, which becomes
// bwrap's monitor. The init reads it once (stopBeforeHeard) and closes it
// before the command runs.
const MonitorStatusEnv = "MOSAIC_MONITOR_STATUS_FD"

// keepStopSignal, in the exec shim just before it becomes bwrap, keeps a
// stop's SIGTERM from being lost before the init can take it. SIGTERM is
// blocked, not ignored, on the thread that execs (the caller has locked
// it): bwrap's monitor, which does not handle it, lives on (as it must
// while the init forwards the signal and waits for the command), and a
// SIGTERM sent to it stays pending in its /proc status. The init, PID 1 of
// its namespace, drops every signal it has no handler for, and it has none
// while bwrap builds the sandbox; systemd signals the main process (the
// monitor) before the rest of the unit, so the init, once it takes its
// signals, finds there any stop it missed (stopBeforeHeard). Before the
// exec, a SIGTERM still ends the shim: nothing of the session ran. It
// returns the variable that hands the init the status descriptor.
func keepStopSignal() []string {
	if testhook.Flag("MOSAIC_TEST_TERM_IGNORED") { // the weakened shim: as before issue 31
		signal.Ignore(unix.SIGTERM)
		return nil
	}
	var term unix.Sigset_t
	term.Val[(unix.SIGTERM-1)/64] |= 1 << ((uint(unix.SIGTERM) - 1) % 64)
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &term, nil); err != nil {
		signal.Ignore(unix.SIGTERM)
		return nil
	}
	fd, err := unix.Open("/proc/self/status", unix.O_RDONLY, 0) // inherited on purpose: no CLOEXEC
	if err != nil {
		return nil
	}
	return []string{MonitorStatusEnv + "=" + strconv.Itoa(fd)}
}

// stopBeforeHeard, in the init once it takes its signals, puts on sigs
// the SIGTERM of a stop that came before (see keepStopSignal): the command
// gets it as it starts and ends at once, rather than run until the stop
// timeout's SIGKILL (result timeout). A scope's init has no such
// descriptor: it takes its signals before systemd knows it.
func stopBeforeHeard(sigs chan os.Signal) {
	v := os.Getenv(MonitorStatusEnv)
	os.Unsetenv(MonitorStatusEnv)
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return
	}
	defer unix.Close(fd)
	b := make([]byte, 16<<10)
	n, err := unix.Pread(fd, b, 0)
	if err == nil && termPending(string(b[:n])) {
		sigs <- unix.SIGTERM
	}
}

// termPending reports whether a /proc status shows SIGTERM pending, for the
// process (ShdPnd) or its thread (SigPnd).
func termPending(status string) bool {
	for _, line := range strings.Split(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || k != "ShdPnd" && k != "SigPnd" {
			continue
		}
		if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<(uint(unix.SIGTERM)-1)) != 0 {
			return true
		}
	}
	return false
}

// testHoldBwrap (a test build's only), under InitHoldEnv=DURATION, has
// bwrap's child (PID 1 of the new namespace, with no handler) wait before it
// runs the init: bwrap reads its --block-fd, a pipe whose one writer is a
// sleep of that long (ended sooner by a stop's SIGTERM). Any other argv,
// or in mosaic itself, is returned as it is.
func testHoldBwrap(argv []string) []string {
	hold, err := time.ParseDuration(testhook.Value(sandbox.InitHoldEnv))
	if err != nil || hold <= 0 || len(argv) == 0 || filepath.Base(argv[0]) != "bwrap" {
		return argv
	}
	var p [2]int
	if unix.Pipe(p[:]) != nil { // no CLOEXEC: bwrap reads the one end
		return argv
	}
	w := os.NewFile(uintptr(p[1]), "hold")
	defer w.Close()
	sleep := exec.Command("/bin/sleep", strconv.FormatFloat(hold.Seconds(), 'f', 3, 64))
	sleep.Stdout = w
	if sleep.Start() != nil {
		return argv
	}
	return append([]string{argv[0], "--block-fd", strconv.Itoa(p[0])}, argv[1:]...)
}
