package manager

import (
	"fmt"
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"
)

// The match rules mosaic sends without waiting for an answer: a malformed
// one would fail unseen (no reply is asked for), and a start or a run would
// then wait for a signal that never comes. So their text is pinned here;
// the rig's start, run, stop and bus tests show dbus-daemon accepts them.
func TestMatchRules(t *testing.T) {
	if got, want := propertiesChanged(unitPath("mosaic-fix-42.service")),
		"type='signal',path='/org/freedesktop/systemd1/unit/mosaic_2dfix_2d42_2eservice',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"; got != want {
		t.Errorf("propertiesChanged = %s, want %s", got, want)
	}
	// One unit's job ends (JobRemoved's third argument is the unit).
	m := &Manager{viaBus: true, bus: &recordingBus{}}
	m.jobsOf("mosaic-fix-42.service")()
	want := "type='signal',interface='org.freedesktop.systemd1.Manager',member='JobRemoved',arg2='mosaic-fix-42.service'"
	if got := m.bus.(*recordingBus).sent; len(got) != 2 || got[0] != "AddMatch "+want || got[1] != "RemoveMatch "+want {
		t.Errorf("jobsOf sent %q, want AddMatch and RemoveMatch of %s", got, want)
	}
}

// recordingBus records the calls sent on it without waiting (member and
// first argument).
type recordingBus struct {
	fakeBus
	sent []string
}

func (b *recordingBus) Object(string, dbus.ObjectPath) dbus.BusObject { return recordingObject{b: b} }

type recordingObject struct {
	dbus.BusObject
	b *recordingBus
}

func (o recordingObject) Go(method string, _ dbus.Flags, ch chan *dbus.Call, args ...any) *dbus.Call {
	member := method[strings.LastIndexByte(method, '.')+1:]
	if len(args) > 0 {
		member += fmt.Sprint(" ", args[0])
	}
	o.b.sent = append(o.b.sent, member)
	return &dbus.Call{Method: method, Args: args, Done: ch}
}
