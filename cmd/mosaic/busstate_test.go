package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBusStateHome: the bus keeps its records where mosaic in the user's
// shell reads them. The unit named ~/.local/state/mosaic for write access,
// but the bus took XDG_STATE_HOME from the user manager's environment
// (environment.d, set-environment): with one set there and not in the
// shell, the bus recorded its launches and sessions where mosaic does not
// look (and, outside the home, where it could not write). The installer
// writes the shell's state directory into the unit, with the variable: the
// manager's then cannot move the bus.
func TestBusStateHome(t *testing.T) {
	needBusRig(t)
	installScript(t, "--uninstall")
	alt := filepath.Join(homeDir(), "alt-state-"+randomHex())
	t.Cleanup(func() {
		installScript(t, "--uninstall")
		systemctl(t, "unset-environment", "XDG_STATE_HOME")
		systemctl(t, "reset-failed", "mosaic-bus.service")
		os.RemoveAll(alt)
	})
	systemctl(t, "set-environment", "XDG_STATE_HOME="+alt)
	for _, shell := range []string{"", alt} {
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
		_, err := os.Stat(filepath.Join(alt, "mosaic"))
		if shell == "" && err == nil {
			t.Errorf("with no XDG_STATE_HOME in the shell, the bus made its state in the manager's %s, where mosaic does not look", alt)
		}
		if shell != "" && err != nil {
			t.Errorf("the bus made no state in the shell's %s: %v", alt, err)
		}
		installScript(t, "--uninstall")
	}
}
