package session

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExit: bwrap and mosaic's init report a command killed by signal n as
// exit status 128+n, which is given back as the signal; a main process
// systemd saw killed is 128+n too.
func TestExit(t *testing.T) {
	for _, tc := range []struct {
		kind   string
		status int
		exit   int
		signal string
	}{
		{"exited", 0, 0, ""},
		{"exited", 3, 3, ""},
		{"exited", 137, 137, "SIGKILL"},
		{"killed", 15, 143, "SIGTERM"},
		{"dumped", 11, 139, "SIGSEGV"},
	} {
		exit, signal := Exit(tc.kind, tc.status)
		if exit == nil || *exit != tc.exit || signal != tc.signal {
			t.Errorf("Exit(%s, %d) = %v %q, want %d %q", tc.kind, tc.status, exit, signal, tc.exit, tc.signal)
		}
	}
	if exit, signal := Exit("", 0); exit != nil || signal != "" {
		t.Errorf("a main process that has not ended: %v %q", exit, signal)
	}
}

// TestOfCounters: a limit systemd reports as none (the maximum uint64) is
// none, not 16 EiB.
func TestOfCounters(t *testing.T) {
	s := Of("x", "service", map[string]any{"ActiveState": "active", "SubState": "running"},
		map[string]any{"MemoryMax": uint64(math.MaxUint64), "TasksMax": uint64(3), "CPUQuotaPerSecUSec": uint64(500000)})
	if s.MemoryMax != nil || s.TasksMax == nil || *s.TasksMax != 3 || s.CPUQuota == nil || *s.CPUQuota != 50 || !s.Running() || s.Unit != "mosaic-x.service" {
		t.Errorf("%+v", s)
	}
}

// TestFromRecordsDamaged: a state directory whose record cannot be read is
// still a session, with its problem said; no directory is no session.
func TestFromRecordsDamaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "x")
	if _, ok := FromRecords("x", dir); ok {
		t.Error("a session without a state directory")
	}
	os.Mkdir(dir, 0o700)
	os.WriteFile(filepath.Join(dir, "session.json"), []byte("{trunc"), 0o600)
	s, ok := FromRecords("x", dir)
	if !ok || !strings.Contains(s.Problem, "mosaic rm x") || s.Running() {
		t.Errorf("%v %+v", ok, s)
	}
}
