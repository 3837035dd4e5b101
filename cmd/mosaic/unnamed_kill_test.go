package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUnnamedRunKilledWhileItsStateGoes: an unnamed run's state is removed
// while mosaic hears the end from systemd and looks at the workspace.
// mosaic killed (SIGKILL) once the removal has renamed the state aside
// leaves nothing that looks like a session, no unit, and nothing gc does
// not finish (the lock file included); the workspace is looked at as ever.
func TestUnnamedRunKilledWhileItsStateGoes(t *testing.T) {
	needRig(t)
	for _, mode := range [][]string{{"run", "--direct"}, {"run", "--scope", "--direct"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			ws := workspace(t)
			before, _ := filepath.Glob(filepath.Join(stateRoot(), "sessions", ".removing-*"))
			args := append(append([]string{}, mode...), "-w", ws, "--", "sh", "-c", "echo ran > ran")
			cmd, _, out := paused(t, "renamed-aside", nil, args...)
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if _, err := os.Stat(filepath.Join(ws, "ran")); err != nil {
				t.Fatalf("the command did not run: %v\n%s", err, out)
			}
			after, _ := filepath.Glob(filepath.Join(stateRoot(), "sessions", ".removing-*"))
			var ours []string
			for _, a := range after {
				if !contains(before, a) {
					ours = append(ours, a)
				}
			}
			if len(ours) != 1 {
				t.Fatalf("leftovers %v, want the one renamed aside", ours)
			}
			// .removing-NAME-RANDOM
			base := strings.TrimPrefix(filepath.Base(ours[0]), ".removing-")
			name := base[:strings.LastIndex(base, "-")]
			// The scope (or the service's tie) may still be listed active for
			// a moment after the kill: its processes are gone, systemd has yet
			// to notice its empty cgroup, and list shows what systemd has. Its
			// going is waited for first; then list --all must not show the
			// name from the state renamed aside.
			eventually(t, 10*time.Second, "no unit of "+name, func() bool {
				return systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-"+name+".*") == ""
			})
			if strings.Contains(mustMosaic(t, "list", "--all").stdout, name) {
				t.Errorf("list --all shows %s, whose removal was cut short", name)
			}
			mosaic(t, "gc")
			if _, err := os.Lstat(ours[0]); !os.IsNotExist(err) {
				t.Errorf("gc did not finish the removal (%v)", err)
			}
			if _, err := os.Lstat(filepath.Join(stateRoot(), "locks", name)); !os.IsNotExist(err) {
				t.Errorf("the lock file of %s is left after gc (%v)", name, err)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestRunKilledStopsItsSession (31.13): `mosaic run` (the service path)
// killed -9 while its command runs does not leave the session running
// unwatched: systemd stops it (the run's tie ended, BindsTo=), and gc then
// takes its state. The weakened mosaic without the tie is shown first: its
// session runs on after the run is gone and gc has run.
func TestRunKilledStopsItsSession(t *testing.T) {
	needRig(t)
	// Not parallel: its gc removes every ended session, other tests' too.
	for _, tc := range []struct {
		label, bin string
		env        []string
		stops      bool
	}{
		{"weakened", hookedMosaic(t), []string{"MOSAIC_TEST_NO_TIE=1"}, false},
		{"mosaic", mosaicBin, nil, true},
	} {
		t.Run(tc.label, func(t *testing.T) {
			marker := "marker-" + randomHex()
			cmd := exec.Command(tc.bin, "run", "--pty=false", "-w", workspace(t), "--", "sh", "-c", "echo up; exec sleep 300", marker)
			cmd.Env = append(os.Environ(), tc.env...)
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			buf := make([]byte, 3)
			if _, err := io.ReadFull(stdout, buf); err != nil {
				t.Fatalf("the run did not start: %v", err)
			}
			var name string
			var all []struct{ Name string }
			json.Unmarshal([]byte(mustMosaic(t, "list", "--json").stdout), &all)
			for _, s := range all {
				var st struct{ Command []string }
				json.Unmarshal([]byte(mosaic(t, "status", "--json", s.Name).stdout), &st)
				if strings.Contains(strings.Join(st.Command, " "), marker) {
					name = s.Name
				}
			}
			if name == "" {
				t.Fatalf("the run's session is not listed: %v", all)
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			unit := "mosaic-" + name + ".service"
			if !tc.stops {
				mosaic(t, "gc")
				if st := unitProperty(t, unit, "ActiveState"); st != "active" || strings.Contains(systemctl(t, "list-jobs", "--no-legend", "--plain"), unit) {
					t.Fatalf("the weakened run's session is %s: this test cannot see one left running", st)
				}
				mustMosaic(t, "stop", name)
				mosaic(t, "rm", name)
				return
			}
			eventually(t, 15*time.Second, "the killed run's session to end", func() bool {
				st := unitProperty(t, unit, "ActiveState")
				return st == "inactive" || st == "failed" || st == ""
			})
			mosaic(t, "gc")
			if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name)); !os.IsNotExist(err) {
				t.Errorf("gc left the killed run's state (%v)", err)
			}
			if u := systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-"+name+"*"); u != "" {
				t.Errorf("units left: %s", u)
			}
		})
	}
}
