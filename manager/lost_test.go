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
