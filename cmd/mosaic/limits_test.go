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

// TestTmpBounded (31.15): a session's /tmp is bounded by default (1 GiB),
// by a profile's TmpSize= and by --tmp-size over it; with --tmp-size
// infinity (the weakened case, which shows the check can fail) it is not.
// A session that fills its /tmp gets ENOSPC there, while another session's
// /tmp takes writes, and its end is recorded.
func TestTmpBounded(t *testing.T) {
	needRig(t)
	t.Parallel()
	cfg := t.TempDir()
	env := []string{"XDG_CONFIG_HOME=" + cfg}
	writeFile(t, filepath.Join(cfg, "mosaic", "profiles", "smalltmp.conf"), "[Profile]\nTmpSize=16M\n")
	size := func(args ...string) string {
		t.Helper()
		r := mosaicWith(t, env, "", append(append([]string{"run", "-w", workspace(t)}, args...), "--", "sh", "-c", "df -k /tmp | tail -1 | awk '{print $2}'")...)
		if r.code != 0 {
			t.Fatalf("run %v: exit %d %s", args, r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	if got := size("--tmp-size", "infinity"); got == "1048576" || got == "16384" {
		t.Fatalf("--tmp-size infinity gave a /tmp of %s KiB: the checks below could not fail", got)
	}
	for _, tc := range []struct {
		args []string
		kib  string
	}{{nil, "1048576"}, {[]string{"--profile", "smalltmp"}, "16384"}, {[]string{"--profile", "smalltmp", "--tmp-size", "8M"}, "8192"}} {
		if got := size(tc.args...); got != tc.kib {
			t.Errorf("%v: /tmp of %s KiB, want %s", tc.args, got, tc.kib)
		}
	}
	other := sessionName(t)
	mustMosaic(t, "start", "--name", other, "-w", workspace(t), "--", "sh", "-c", "sleep 300")
	defer mosaic(t, "rm", other)
	defer mosaic(t, "stop", other)
	name := sessionName(t)
	r := mosaic(t, "run", "--name", name, "-w", workspace(t), "--tmp-size", "8M", "--", "sh", "-c", "dd if=/dev/zero of=/tmp/fill bs=1M count=32 2>&1; echo dd=$?")
	if !strings.Contains(r.stdout, "No space left on device") || strings.Contains(r.stdout, "dd=0") {
		t.Errorf("filling an 8M /tmp with 32M: %s %s", r.stdout, r.stderr)
	}
	defer mosaic(t, "rm", name)
	if _, err := os.Stat(filepath.Join(stateRoot(), "sessions", name, "end.json")); err != nil {
		t.Errorf("the full session's end was not recorded: %v", err)
	}
	// The other session's /tmp is its own: writes there still work.
	w := mosaic(t, "run", "-w", workspace(t), "--", "sh", "-c", "dd if=/dev/zero of=/tmp/x bs=1M count=4 2>/dev/null && echo ok")
	if strings.TrimSpace(w.stdout) != "ok" {
		t.Errorf("another session's /tmp: %s %s", w.stdout, w.stderr)
	}
}
