package manager

import (
	"context"
	"os"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"

	"mosaic/manager/request"
)

// A run waits for its unit's end as systemd announces it, and its session
// says how the command ended; a run mosaic named leaves no state.
func TestRunWaitsForTheEnd(t *testing.T) {
	h := testHost(t)
	// Direct: a clone-mode run keeps its state for its change (cmd forgets it when it left none).
	plan := testPlan(t, h, request.Request{Mode: request.ModeDirect})
	f := &fakeSystemd{}
	f.onStart = func(unit string, _ []sd.Property) (string, error) {
		go f.ended(unit, 3)
		return "done", nil
	}
	m := fakeManager(t, f)
	s, err := m.Run(context.Background(), plan, [3]int{0, 1, 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.ExitStatus == nil || *s.ExitStatus != 3 || s.StoppedBy != "" || s.State != "inactive" {
		t.Errorf("session %+v: want exit status 3, ended by itself", s)
	}
	if _, err := os.Lstat(plan.Spec.StateDir); !os.IsNotExist(err) {
		t.Errorf("an unnamed run left its state (%v)", err)
	}
}

// A signal on interrupt stops the run's unit (once), and the run still
// waits for its end: the session says it was stopped by the signal.
func TestRunInterruptStops(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{Name: "r"})
	f := &fakeSystemd{}
	f.onStop = func(unit string) {
		f.announce(unit, "org.freedesktop.systemd1.Unit", map[string]any{"ActiveState": "deactivating", "SubState": "stop-sigterm"})
		f.ended(unit, 143)
	}
	m := fakeManager(t, f)
	interrupt := make(chan os.Signal, 2)
	interrupt <- unix.SIGINT
	interrupt <- unix.SIGINT
	s, err := m.Run(context.Background(), plan, [3]int{0, 1, 2}, interrupt)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing else is stopped: the run's tie scope, which holds only the
	// run, ends as the run exits (31.13).
	if s.StoppedBy != "signal" || len(f.stops) != 1 || f.stops[0] != "mosaic-r.service" {
		t.Errorf("stopped by %q, stops %v: want one stop of the unit, by the signal", s.StoppedBy, f.stops)
	}
	if _, err := os.Lstat(plan.Spec.StateDir); err != nil {
		t.Errorf("a named run's state is gone: %v", err)
	}
}
