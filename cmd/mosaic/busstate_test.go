package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBusStateHome: the bus writes only its state directory, which its
// unit names. With XDG_STATE_HOME set in the user manager's environment
// (environment.d, set-environment), a unit that named ~/.local/state/mosaic
// left the bus a state directory it could not write, and it never served.
// The installer writes the state directory of the shell it runs in, with the
// variable, so the bus serves and records where mosaic in that shell looks;
// and a manager's variable that the shell does not have cannot move it.
func TestBusStateHome(t *testing.T) {
	needBusRig(t)
	installScript(t, "--uninstall")
	alt := filepath.Join(homeDir(), "alt-state-"+randomHex())
	if err := os.MkdirAll(alt, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		installScript(t, "--uninstall")
		systemctl(t, "unset-environment", "XDG_STATE_HOME")
		systemctl(t, "reset-failed", "mosaic-bus.service")
		os.RemoveAll(alt)
	})
	systemctl(t, "set-environment", "XDG_STATE_HOME="+alt)
	for _, shell := range []string{alt, ""} {
		t.Setenv("XDG_STATE_HOME", shell)
		want := shell
		if want == "" {
			want = filepath.Join(homeDir(), ".local", "state")
		}
		r := installScript(t, "--mosaic", mosaicBin)
		if s := unitProperty(t, "mosaic-bus.service", "ActiveState") + "/" + unitProperty(t, "mosaic-bus.service", "SubState"); r.code != 0 || s != "active/running" {
			t.Fatalf("XDG_STATE_HOME=%q in the shell, %s in the manager: the bus is %s (install exit %d)\n%s%s", shell, alt, s, r.code, r.stdout, r.stderr)
		}
		if env := unitProperty(t, "mosaic-bus.service", "Environment"); !strings.Contains(env, "XDG_STATE_HOME="+want) {
			t.Errorf("the bus's environment %q does not name the shell's state directory %s", env, want)
		}
		r = mosaic(t, "bus", "launch", "--name", "no/such", "--", "true") // refused, and logged
		if _, err := os.Stat(filepath.Join(want, "mosaic", "launches.jsonl")); err != nil {
			t.Errorf("the bus recorded nothing in %s: %v (bus launch said %s%s)", want, err, r.stdout, r.stderr)
		}
		installScript(t, "--uninstall")
	}
}
