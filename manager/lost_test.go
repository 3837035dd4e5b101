package manager

import (
	"context"
	"testing"
)

// TestUnitStateQueuedJob: a unit whose start job is queued but not yet
// running is "inactive" to systemd; after a lost start it is one being
// started, not one that is gone (TestStartLosesSystemd/closed read it so
// and deleted the state of a session that then ran).
func TestUnitStateQueuedJob(t *testing.T) {
	f := &fakeSystemd{units: map[string]string{"q.service": "inactive", "gone.service": "inactive", "up.service": "active"},
		jobs: map[string]uint32{"q.service": 7}}
	m := fakeManager(t, f)
	for unit, want := range map[string]string{"q.service": "activating", "gone.service": "inactive", "up.service": "active", "none.service": ""} {
		if got := m.unitState(context.Background(), unit); got != want {
			t.Errorf("unitState(%s) = %q, want %q", unit, got, want)
		}
	}
}

// TestOnlyTheCLITiesItself: a long-lived caller's runs are not tied to its
// process (the bench's second finish step met the first's tie scope, named
// by the same PID, and failed "a session named  already exists"); the CLI's
// run is.
func TestOnlyTheCLITiesItself(t *testing.T) {
	m := fakeManager(t, &fakeSystemd{})
	if pid := m.tiePID(); pid != 0 {
		t.Errorf("a Manager of a long-lived caller ties its runs to PID %d", pid)
	}
	m.opts.TieSelf = true
	if pid := m.tiePID(); pid == 0 && !testNoTie() {
		t.Error("the CLI's run is not tied to its process")
	}
}

// TestQueuedStartIsRunning: gc's guard (unitRunning) and a start's claim
// of the name take a unit with a queued start job for one being started,
// as the lost start's reconnect does: its state is not taken, its name not
// cleared.
func TestQueuedStartIsRunning(t *testing.T) {
	f := &fakeSystemd{units: map[string]string{"mosaic-q.service": "inactive"}, jobs: map[string]uint32{"mosaic-q.service": 7}}
	m := fakeManager(t, f)
	if !m.unitRunning(context.Background(), "mosaic-q.service") {
		t.Error("gc's guard takes a unit with a queued start job for an ended one")
	}
}
