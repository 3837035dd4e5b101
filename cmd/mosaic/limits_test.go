package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultLimits (13.9): with no flag a session is bounded by mosaic's
// defaults; mosaic.conf can lift them ("infinity", the weakened case that
// shows the check can fail), a profile overrides mosaic.conf, a flag
// overrides both; mosaic.slice gets limits; status shows them.
func TestDefaultLimits(t *testing.T) {
	needRig(t)
	cfg := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	writeFile(t, filepath.Join(cfg, "mosaic", "profiles", "bounded.conf"), "[Profile]\nMemoryMax=1G\nTasksMax=99\n")
	start := func(args ...string) string {
		t.Helper()
		name := sessionName(t)
		r := mosaicWith(t, env, "", append(append([]string{"start", "--name", name, "-w", workspace(t)}, args...), "--", "sleep", "300")...)
		if r.code != 0 {
			t.Fatalf("start %v: exit %d %s", args, r.code, r.stderr)
		}
		return name
	}
	props := func(name string) string {
		unit := "mosaic-" + name + ".service"
		return unitProperty(t, unit, "MemoryMax") + " " + unitProperty(t, unit, "TasksMax") + " " + unitProperty(t, unit, "CPUQuotaPerSecUSec")
	}

	writeFile(t, filepath.Join(cfg, "mosaic", "mosaic.conf"), "memory-max = infinity\ntasks-max = infinity\ncpu-quota = infinity\n")
	if got := props(start()); got != "infinity infinity infinity" {
		t.Fatalf("mosaic.conf lifting every limit gave %q: the check below could not fail", got)
	}
	os.Remove(filepath.Join(cfg, "mosaic", "mosaic.conf"))
	name := start()
	if got := strings.Fields(props(name)); len(got) != 3 || got[0] == "infinity" || got[1] != "4096" || got[2] == "infinity" || got[2] == "" {
		t.Errorf("a session with no flag has MemoryMax TasksMax CPUQuota %v, want mosaic's defaults", got)
	}
	st := mosaicWith(t, env, "", "status", name).stdout
	if !strings.Contains(st, "limits:    memory ") || !strings.Contains(st, "tasks 4096") {
		t.Errorf("status does not show the limits:\n%s", st)
	}

	writeFile(t, filepath.Join(cfg, "mosaic", "mosaic.conf"), "memory-max = 2G\ntasks-max = 77\n")
	if got := props(start()); !strings.HasPrefix(got, "2147483648 77 ") {
		t.Errorf("mosaic.conf's limits: %q", got)
	}
	if got := props(start("--profile", "bounded")); !strings.HasPrefix(got, "1073741824 99 ") {
		t.Errorf("the profile's limits over mosaic.conf's: %q", got)
	}
	if got := props(start("--profile", "bounded", "--memory-max", "512M")); !strings.HasPrefix(got, "536870912 99 ") {
		t.Errorf("the flag over the profile: %q", got)
	}
	for _, p := range []string{"MemoryMax", "TasksMax"} {
		if v := unitProperty(t, "mosaic.slice", p); v == "infinity" || v == "" {
			t.Errorf("mosaic.slice has %s=%q after a start", p, v)
		}
	}
	writeFile(t, filepath.Join(cfg, "mosaic", "mosaic.conf"), "memory = 2G\n")
	if r := mosaicWith(t, env, "", "run", "--json", "-w", workspace(t), "--", "true"); r.code != 2 || !strings.Contains(r.stdout, "bad-config") {
		t.Errorf("a bad mosaic.conf: exit %d %s", r.code, r.stdout)
	}
}
