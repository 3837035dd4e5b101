package manager

import (
	"reflect"
	"testing"
	"time"
)

// unitOfPath undoes systemd's escape of a unit's object path: every byte
// outside [A-Za-z0-9] is _XX; a lone "_" that starts no escape stays.
func TestUnitOfPath(t *testing.T) {
	for _, unit := range []string{"mosaic-x.service", "mosaic-a_b-egress.socket", "mosaic-remove.f3a3.service", "user@1000.service"} {
		if got := unitOfPath(unitPath(unit)); got != unit {
			t.Errorf("unitOfPath(%s) = %q, want %q", unitPath(unit), got, unit)
		}
	}
	if got := unitOfPath("/org/freedesktop/systemd1/unit/a_zz"); got != "a_zz" {
		t.Errorf("a broken escape: %q", got)
	}
}

// WatchSessions hands the watcher every change systemd announces of a
// mosaic unit, in order, with its unit's name and interface; another
// unit's changes are not the bus's business.
func TestWatchSessions(t *testing.T) {
	f := &fakeSystemd{}
	m := fakeManager(t, f)
	type change struct {
		unit, iface string
		state       any
	}
	got := make(chan change, 8)
	m.WatchSessions(func(unit, iface string, changed map[string]any) {
		got <- change{unit, iface, changed["ActiveState"]}
	})
	f.announce("other.service", unitIface, map[string]any{"ActiveState": "active"})
	f.announce("mosaic-x.service", unitIface, map[string]any{"ActiveState": "deactivating"})
	f.announce("mosaic-x-egress.service", unitIface, map[string]any{"ActiveState": "inactive"})
	var seen []change
	for len(seen) < 2 {
		select {
		case c := <-got:
			seen = append(seen, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %v announced", seen)
		}
	}
	want := []change{{"mosaic-x.service", unitIface, "deactivating"}, {"mosaic-x-egress.service", unitIface, "inactive"}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("watched %v, want %v", seen, want)
	}
}

// stoppedBy tells why a watched session ended: a stop of mosaic's own
// (signal), systemd's stop at its RuntimeMax (the Result it had when the
// stop began was already timeout), another's stop (outside; a stop that
// only later timed out too), or none: the command ended by itself.
func TestStoppedBy(t *testing.T) {
	f := &fakeSystemd{}
	m := fakeManager(t, f)
	stoppedWith := func(unit, resultAtStop string) *unitWatch {
		w := m.watch(unit)
		t.Cleanup(w.close)
		f.announce(unit, serviceIface, map[string]any{"Result": resultAtStop})
		f.announce(unit, unitIface, map[string]any{"ActiveState": "deactivating", "SubState": "stop-sigterm"})
		for end := time.Now().Add(10 * time.Second); !w.wasStopped(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s: the stop was never seen", unit)
			}
		}
		return w
	}
	atMax, outside := stoppedWith("mosaic-a.service", "timeout"), stoppedWith("mosaic-b.service", "success")
	ended := m.watch("mosaic-c.service")
	defer ended.close()
	for _, c := range []struct {
		w      *unitWatch
		byUs   bool
		result string
		want   string
	}{
		{atMax, true, "timeout", "signal"},
		{atMax, false, "timeout", "runtime-max"},
		{outside, false, "timeout", "outside"},
		{outside, false, "signal", "outside"},
		{ended, false, "success", ""},
	} {
		if got := stoppedBy(c.w, c.byUs, c.result); got != c.want {
			t.Errorf("stoppedBy(%s, byUs %v, %s) = %q, want %q", c.w.path, c.byUs, c.result, got, c.want)
		}
	}
}
