package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/manager/request"
	"mosaic/units"
)

// fakeSystemd is a systemdClient that answers as a user manager would,
// from what the test says the units are, and records what it was asked:
// the start, claim and scope control flow tested without systemd (the
// rig's tests run the same against a real one).
type fakeSystemd struct {
	mu      sync.Mutex
	units   map[string]string // unit -> ActiveState; absent: not-found
	jobs    map[string]uint32 // unit -> its queued job's id; absent: none
	started []string          // StartTransientUnit's units, in order
	reset   []string          // ResetFailedUnit's
	// onStart, when set, answers StartTransientUnit: the job's result (""
	// for none, as when systemd never says) or the call's error.
	onStart func(unit string, props []sd.Property) (result string, err error)
	// onStop, when set, runs at StopUnit (after it is recorded in stops;
	// before StopUnit answers stopErr, else meanwhile).
	onStop func(unit string)
	stops  []string
	// signals is where the bus's announcements go (fakeBus.Signal).
	signals chan<- *dbus.Signal
	// props answers Properties.Get: object path -> interface -> name ->
	// value. A unit object not in it answers LoadState "not-found" (as
	// systemd does for a unit it does not have) and no other property.
	props map[dbus.ObjectPath]map[string]map[string]any
	// pids answers GetUnitProcesses: unit -> its processes.
	pids map[string][]uint32
	// listed answers ListUnitsByPatterns.
	listed []sd.UnitStatus
	// stopErr, when set, is StopUnit's error.
	stopErr error
	// holdStop keeps StopUnit's job running (a command that ignores
	// SIGTERM): its end is sent on heldStop, by the test.
	holdStop bool
	heldStop chan<- string
	// kills are KillUnitWithTarget's signals, as "unit signal"; onKill,
	// when set, runs at each (after it is recorded).
	kills  []string
	onKill func(unit string, signal int32)
}

// setProps sets what Properties.Get answers of unit's interface iface.
func (f *fakeSystemd) setProps(unit, iface string, v map[string]any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.props == nil {
		f.props = map[dbus.ObjectPath]map[string]map[string]any{}
	}
	path := unitPath(unit)
	if f.props[path] == nil {
		f.props[path] = map[string]map[string]any{}
	}
	f.props[path][iface] = v
}

// announce sends what systemd announces of unit's properties of iface
// (PropertiesChanged), as the bus hands it to mosaic.
func (f *fakeSystemd) announce(unit, iface string, changed map[string]any) {
	v := map[string]dbus.Variant{}
	for k, x := range changed {
		v[k] = dbus.MakeVariant(x)
	}
	f.mu.Lock()
	ch := f.signals
	f.mu.Unlock()
	ch <- &dbus.Signal{Path: unitPath(unit), Name: "org.freedesktop.DBus.Properties.PropertiesChanged", Body: []any{iface, v, []string{}}}
}

// ended announces unit's end as systemd does: its service's result and
// exit, then the unit inactive.
func (f *fakeSystemd) ended(unit string, status int32) {
	f.announce(unit, "org.freedesktop.systemd1.Service", map[string]any{"Result": "success", "ExecMainCode": int32(1), "ExecMainStatus": status})
	f.announce(unit, "org.freedesktop.systemd1.Unit", map[string]any{"ActiveState": "inactive", "SubState": "dead"})
}

// fakeBus is the bus side of a fakeManager: calls sent without waiting
// (Go) are dropped, as the real ones' answers are; signals come from the
// fakeSystemd.
type fakeBus struct{ f *fakeSystemd }

func (b fakeBus) Object(_ string, path dbus.ObjectPath) dbus.BusObject {
	return fakeObject{f: b.f, path: path}
}
func (b fakeBus) Signal(ch chan<- *dbus.Signal) {
	b.f.mu.Lock()
	b.f.signals = ch
	b.f.mu.Unlock()
}
func (b fakeBus) AddMatchSignal(...dbus.MatchOption) error { return nil }

// fakeObject answers only what a call sent without waiting needs, and
// the reads of properties and processes (from f.props and f.pids); any
// other method is a test that reached further than its fake (nil panics).
type fakeObject struct {
	dbus.BusObject
	f    *fakeSystemd
	path dbus.ObjectPath
}

func (fakeObject) Go(method string, _ dbus.Flags, ch chan *dbus.Call, args ...any) *dbus.Call {
	return &dbus.Call{Method: method, Args: args, Done: ch}
}

// GoWithContext answers Properties.Get and GetUnitProcesses at once, as
// systemd would after a round trip.
func (o fakeObject) GoWithContext(_ context.Context, method string, _ dbus.Flags, ch chan *dbus.Call, args ...any) *dbus.Call {
	c := &dbus.Call{Method: method, Args: args, Done: ch}
	o.f.mu.Lock()
	switch method {
	case "org.freedesktop.DBus.Properties.Get":
		iface, name := args[0].(string), args[1].(string)
		ifaces, known := o.f.props[o.path]
		v, ok := ifaces[iface][name]
		if !known && iface == "org.freedesktop.systemd1.Unit" && name == "LoadState" {
			v, ok = "not-found", true
		}
		if ok {
			c.Body = []any{dbus.MakeVariant(v)}
		} else {
			c.Err = dbus.Error{Name: "org.freedesktop.DBus.Error.UnknownProperty", Body: []any{name}}
		}
	case "org.freedesktop.systemd1.Manager.GetUnitProcesses":
		var procs []struct {
			Cgroup  string
			PID     uint32
			Cmdline string
		}
		for _, p := range o.f.pids[args[0].(string)] {
			procs = append(procs, struct {
				Cgroup  string
				PID     uint32
				Cmdline string
			}{"/mosaic.slice", p, "x"})
		}
		c.Body = []any{procs}
	default:
		o.f.mu.Unlock()
		panic("fakeObject: no answer to " + method)
	}
	o.f.mu.Unlock()
	ch <- c
	return c
}

func (f *fakeSystemd) ListUnitsByNamesContext(_ context.Context, names []string) ([]sd.UnitStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sd.UnitStatus
	for _, n := range names {
		st, ok := f.units[n]
		if !ok {
			out = append(out, sd.UnitStatus{Name: n, LoadState: "not-found", ActiveState: "inactive"})
			continue
		}
		out = append(out, sd.UnitStatus{Name: n, LoadState: "loaded", ActiveState: st, JobId: f.jobs[n]})
	}
	return out, nil
}

func (f *fakeSystemd) ListUnitsByPatternsContext(context.Context, []string, []string) ([]sd.UnitStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.listed, nil
}

func (f *fakeSystemd) ResetFailedUnitContext(_ context.Context, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reset = append(f.reset, name)
	if f.units[name] == "failed" || f.units[name] == "inactive" {
		delete(f.units, name)
	}
	return nil
}

func (f *fakeSystemd) SetUnitPropertiesContext(context.Context, string, bool, ...sd.Property) error {
	return nil
}

func (f *fakeSystemd) StartTransientUnitAux(_ context.Context, name, _ string, props []sd.Property, _ []sd.PropertyCollection, ch chan<- string) (int, error) {
	f.mu.Lock()
	f.started = append(f.started, name)
	on := f.onStart
	f.mu.Unlock()
	result := "done"
	if on != nil {
		var err error
		if result, err = on(name, props); err != nil {
			return 0, err
		}
	}
	if result != "" && ch != nil { // nil: a start nothing waits for (a spare's)
		ch <- result
	}
	f.mu.Lock()
	if result == "done" {
		f.units[name] = "active"
	}
	f.mu.Unlock()
	return 1, nil
}

func (f *fakeSystemd) StopUnitContext(_ context.Context, name, _ string, ch chan<- string) (int, error) {
	f.mu.Lock()
	f.stops = append(f.stops, name)
	on, stopErr := f.onStop, f.stopErr
	f.mu.Unlock()
	if stopErr != nil {
		if on != nil {
			on(name) // what happened before systemd answered so
		}
		return 0, stopErr
	}
	if on != nil {
		go on(name)
	}
	f.mu.Lock()
	hold := f.holdStop
	if hold {
		f.heldStop = ch
	}
	f.mu.Unlock()
	if ch != nil && !hold {
		ch <- "done"
	}
	return 1, nil
}

func (f *fakeSystemd) KillUnitWithTarget(_ context.Context, name string, _ sd.Who, signal int32) error {
	f.mu.Lock()
	f.kills = append(f.kills, fmt.Sprintf("%s %d", name, signal))
	on := f.onKill
	f.mu.Unlock()
	if on != nil {
		on(name, signal)
	}
	return nil
}

func (f *fakeSystemd) Close() {}

// fakeManager is a Manager on f, whole as Connect makes one: a 257 manager
// reached on its private socket (no match rules to send), mosaic.slice
// already limited (limitSlice reads properties, which go over the bus).
func fakeManager(t *testing.T, f *fakeSystemd) *Manager {
	t.Helper()
	if f.units == nil {
		f.units = map[string]string{}
	}
	closed := make(chan struct{})
	t.Cleanup(func() { close(closed) })
	return &Manager{conn: f, bus: fakeBus{f}, closed: closed, features: units.FeaturesFor(257), opts: Options{MosaicBin: "/usr/bin/mosaic"},
		watchers: map[dbus.ObjectPath][]*unitWatch{}, sliceLimited: true}
}

// testHost is a user's home, runtime and state directories of the test's
// own, and the host's facts a plan is made against there.
func testHost(t *testing.T) Host {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"home", "run", "state"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", filepath.Join(root, "home"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(root, "run"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(root, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(root, "home", ".config"))
	p, err := request.UserPaths()
	if err != nil {
		t.Fatal(err)
	}
	return Host{Paths: p, Bwrap: "/usr/bin/bwrap", MosaicBin: "/usr/bin/mosaic", StageBin: "/bin/cat"}
}

// testPlan plans req (a workspace of its own, the command true) on h.
func testPlan(t *testing.T, h Host, req request.Request) Plan {
	t.Helper()
	if req.Workspace == "" {
		req.Workspace = filepath.Join(h.Paths.Home, "ws")
		if err := os.MkdirAll(req.Workspace, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if req.Command == nil {
		req.Command = []string{"true"}
	}
	plan, err := NewPlan(req, h)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}
