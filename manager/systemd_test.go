package manager

import (
	"errors"
	"testing"

	"github.com/godbus/dbus/v5"
)

// jobEnd is the JobRemoved systemd sends when job on unit ends.
func jobEnd(job dbus.ObjectPath, unit, result string) *dbus.Signal {
	return &dbus.Signal{Name: "org.freedesktop.systemd1.Manager.JobRemoved", Body: []any{uint32(1), job, unit, result}}
}

// A job's end reaches its waiter however it is ordered against the call's
// reply: the reply and the signal are read on different goroutines, and
// no lock is held across the call (go-systemd's was, which made one
// process's starts go one at a time).
func TestJobWaitEitherOrder(t *testing.T) {
	const unit = "mosaic-x.service"
	c := &unitClient{waits: map[string][]*jobWait{}}

	// The end before the reply; another job of the unit's ends too.
	ch := make(chan string, 1)
	w := c.expect(unit, ch)
	c.jobRemoved(jobEnd("/org/freedesktop/systemd1/job/6", unit, "canceled"))
	c.jobRemoved(jobEnd("/org/freedesktop/systemd1/job/7", unit, "done"))
	c.replied(unit, w, "/org/freedesktop/systemd1/job/7", nil)
	if r := <-ch; r != "done" {
		t.Errorf("end before reply: result %q, want done", r)
	}

	// The reply before the end; another unit's job end is not it.
	ch = make(chan string, 1)
	w = c.expect(unit, ch)
	c.replied(unit, w, "/org/freedesktop/systemd1/job/8", nil)
	c.jobRemoved(jobEnd("/org/freedesktop/systemd1/job/8", "mosaic-y.service", "done"))
	select {
	case r := <-ch:
		t.Fatalf("got %q from another unit's job", r)
	default:
	}
	c.jobRemoved(jobEnd("/org/freedesktop/systemd1/job/8", unit, "failed"))
	if r := <-ch; r != "failed" {
		t.Errorf("reply before end: result %q, want failed", r)
	}

	// A failed call sends nothing and leaves no wait behind.
	ch = make(chan string, 1)
	w = c.expect(unit, ch)
	c.replied(unit, w, "", errors.New("refused"))
	if len(c.waits) != 0 || len(ch) != 0 {
		t.Errorf("after the calls: waits %v, %d results pending", c.waits, len(ch))
	}
}

// A start's status is what its watch saw when its job ended (startedStatus):
// the one reader of signals hands the unit's changes to the watch before
// the job's end to its wait, in the order systemd sent them (its pending
// changes before JobRemoved), however the goroutines are scheduled.
func TestWatchSeesChangesBeforeTheJobEnds(t *testing.T) {
	const unit = "mosaic-x.service"
	c := &unitClient{waits: map[string][]*jobWait{}}
	m := &Manager{watchers: map[dbus.ObjectPath][]*unitWatch{}, onJob: c.jobRemoved}
	m.mu.Lock()
	m.signals = make(chan *dbus.Signal, 16) // what startDispatch makes, without a bus
	go m.dispatch()
	m.mu.Unlock()
	defer close(m.signals)
	for i := 0; i < 100; i++ {
		w := m.watch(unit)
		ch := make(chan string, 1)
		job := dbus.ObjectPath("/org/freedesktop/systemd1/job/" + string(rune('a'+i%26)))
		c.replied(unit, c.expect(unit, ch), job, nil)
		m.signals <- &dbus.Signal{Path: unitPath(unit), Name: "org.freedesktop.DBus.Properties.PropertiesChanged",
			Body: []any{"org.freedesktop.systemd1.Unit", map[string]dbus.Variant{"ActiveState": dbus.MakeVariant("active")}, []string{}}}
		m.signals <- jobEnd(job, unit, "done")
		if r := <-ch; r != "done" {
			t.Fatalf("job result %q", r)
		}
		if s := w.snapshot()["ActiveState"]; s != "active" {
			t.Fatalf("round %d: at the job's end the watch has ActiveState %v, want active", i, s)
		}
		w.close()
	}
}
