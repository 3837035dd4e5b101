package manager

import (
	"context"
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
	started []string          // StartTransientUnit's units, in order
	reset   []string          // ResetFailedUnit's
	// onStart, when set, answers StartTransientUnit: the job's result (""
	// for none, as when systemd never says) or the call's error.
	onStart func(unit string, props []sd.Property) (result string, err error)
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
		out = append(out, sd.UnitStatus{Name: n, LoadState: "loaded", ActiveState: st})
	}
	return out, nil
}

func (f *fakeSystemd) ListUnitsByPatternsContext(context.Context, []string, []string) ([]sd.UnitStatus, error) {
	return nil, nil
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
	if result != "" {
		ch <- result
	}
	f.mu.Lock()
	if result == "done" {
		f.units[name] = "active"
	}
	f.mu.Unlock()
	return 1, nil
}

func (f *fakeSystemd) StopUnitContext(context.Context, string, string, chan<- string) (int, error) {
	return 1, nil
}

func (f *fakeSystemd) KillUnitWithTarget(context.Context, string, sd.Who, int32) error { return nil }

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
	return &Manager{conn: f, closed: closed, features: units.FeaturesFor(257), MosaicBin: "/usr/bin/mosaic",
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
	return Host{Paths: p, Bwrap: "/usr/bin/bwrap", MosaicBin: "/usr/bin/mosaic"}
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
