package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStopBeforeInitTakesSignals (issue 31): a stop that lands before a
// service session's init takes its signals (bwrap's child held before it
// runs the init by a test hook, as a sandbox still being built under load)
// ends the session at once, result success (the command's SIGTERM, 143):
// the SIGTERM the exec shim kept pending in bwrap's monitor is found by the
// init and given to the command as it starts. A SIGTERM lost before the
// shim (systemd 257's own PID 1 of the unit drops it) is made up for by the
// stop's second one. Shown first: the weakened shim that ignores SIGTERM
// loses it (bwrap's child, PID 1 of its namespace, drops a signal it has
// no handler for), and the weakened stop that sends no second one takes
// the whole stop timeout, then SIGKILL.
func TestStopBeforeInitTakesSignals(t *testing.T) {
	needRig(t)
	t.Parallel()
	for _, tc := range []struct {
		label string
		env   []string
		most  time.Duration // how long the stop may take; 0: the weakened one
	}{
		{"weakened", []string{"MOSAIC_TEST_TERM_IGNORED=1", "MOSAIC_TEST_NO_TERM_AGAIN=1"}, 0},
		// The shim's SIGTERM blocked: the init finds it, before any second.
		{"mosaic", nil, 900 * time.Millisecond},
		// The first SIGTERM lost (as by systemd's own PID 1 on 257, before
		// the shim runs): the stop's second one, a second later, is heard.
		{"lost", []string{"MOSAIC_TEST_TERM_IGNORED=1"}, 4 * time.Second},
	} {
		t.Run(tc.label, func(t *testing.T) {
			t.Parallel()
			if tc.most == 0 {
				// The control: the weakened stop must be seen lost. On
				// loaded 257 runs its session sometimes ended "exit-code"
				// within 0.3 s of the stop instead (not understood yet,
				// also with --network none: see the stop notes of
				// 2026-12-06 and -07), which shows nothing either way, so
				// it gets three tries to show the loss.
				for try := 1; ; try++ {
					took, result, _ := stopServiceWhileHeld(t, tc.env)
					if took >= 8*time.Second && result != "success" {
						return
					}
					if try == 3 {
						t.Fatalf("the weakened shim's session stopped in %v, result %q (three tries): this test cannot see the stop lost", took, result)
					}
					t.Logf("try %d: the weakened shim's session stopped in %v, result %q; again", try, took, result)
				}
			}
			took, result, state := stopServiceWhileHeld(t, tc.env)
			if took > tc.most || result != "success" || state == "active" {
				t.Errorf("a stop while bwrap's child was held took %v and ended %s %q (want at most %v, result success)", took, state, result, tc.most)
			}
		})
	}
}

// stopServiceWhileHeld starts a service session whose init is held (bwrap's child, before
// it runs the init), stops it while held, and returns how long the stop
// took and how the session ended (env: the hooks of mosaic, start and stop).
func stopServiceWhileHeld(t *testing.T, env []string) (took time.Duration, result, state string) {
	t.Helper()
	name := sessionName(t)
	// Paused once systemd took the start: the start's own end (its
	// job canceled by the stop) does not race the stop. No egress
	// proxy: the weakened case twice ended within 0.3 s of the stop
	// in loaded full runs on 257 once every session had one beside
	// it (not understood yet; see the stop's note of 2026-12-06).
	_, goOn, out := paused(t, "start-accepted", append([]string{"MOSAIC_TEST_INIT_HOLD=3s"}, env...),
		"start", "--network", "none", "--name", name, "--workspace", workspace(t), "--", "sleep", "300")
	defer goOn()
	defer mosaic(t, "rm", name)
	unit := "mosaic-" + name + ".service"
	// bwrap's monitor and its child (which becomes the init), held:
	// READY=1 is seconds away. Two bwraps, not two processes: the
	// shim starts the hold's sleep before it execs bwrap, and a stop
	// that lands before that exec is not this test's case (a loaded
	// run on 257 got there, the session ending "signal" in 0.2 s).
	eventually(t, 20*time.Second, "the session's init to be held", func() bool {
		bwraps := 0
		for _, pid := range unitPIDs(t, unit) {
			if comm, _ := os.ReadFile("/proc/" + pid + "/comm"); strings.TrimSpace(string(comm)) == "bwrap" {
				bwraps++
			}
		}
		return unitProperty(t, unit, "ActiveState") == "activating" && bwraps >= 2
	})
	began := time.Now()
	stopCmd := exec.Command(hookedMosaic(t), "stop", "--json", name)
	stopCmd.Env = append(os.Environ(), env...)
	stop := runResult(t, stopCmd)
	took = time.Since(began)
	var st struct{ Result, State string }
	json.Unmarshal([]byte(stop.stdout), &st)
	t.Logf("stop took %v: exit %d, %s %q; start said: %s", took.Round(time.Millisecond), stop.code, st.State, st.Result, out)
	return took, st.Result, st.State
}

// unitPIDs are the processes in a unit's cgroup.
func unitPIDs(t *testing.T, unit string) []string {
	t.Helper()
	cg := unitProperty(t, unit, "ControlGroup")
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		if b, err := os.ReadFile(filepath.Join(root, cg, "cgroup.procs")); err == nil {
			return strings.Fields(string(b))
		}
	}
	return nil
}
