package main

import (
	"os"
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
	for _, mode := range [][]string{{"run"}, {"run", "--scope"}} {
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
			if strings.Contains(mustMosaic(t, "list", "--all").stdout, name) {
				t.Errorf("list --all shows %s, whose removal was cut short", name)
			}
			eventually(t, 10*time.Second, "no unit of "+name, func() bool {
				return systemctl(t, "list-units", "--all", "--plain", "--no-legend", "mosaic-"+name+".*") == ""
			})
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
