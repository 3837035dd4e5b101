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
