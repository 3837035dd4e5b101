package manager

import "testing"

// The match rules mosaic sends without waiting for an answer: a malformed
// one would fail unseen (no reply is asked for), and a start or a run would
// then wait for a signal that never comes. So their text is pinned here;
// the rig's start, run, stop and bus tests show dbus-daemon accepts them.
func TestMatchRules(t *testing.T) {
	if got, want := propertiesChanged(unitPath("mosaic-fix-42.service")),
		"type='signal',path='/org/freedesktop/systemd1/unit/mosaic_2dfix_2d42_2eservice',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"; got != want {
		t.Errorf("propertiesChanged = %s, want %s", got, want)
	}
	// go-systemd's own rule, as its NewConnection adds it (dbus-daemon
	// compares rules by their fields, not their spacing): Connect removes it.
	if goSystemdJobs != "type='signal',interface='org.freedesktop.systemd1.Manager',member='JobRemoved'" {
		t.Errorf("goSystemdJobs = %s", goSystemdJobs)
	}
}
