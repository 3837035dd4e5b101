package manager

import (
	"context"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"
)

// A unitWatch collects what systemd announces about one unit through
// PropertiesChanged (on the bus, through a match rule for the unit's path):
// systemd always sends a unit's last changes before it removes (collects)
// the unit. A watch therefore learns how a unit ended even
// when the unit is gone by the time anyone could ask, without pinning it
// (AddRef needs a bus name, which a direct connection does not have).
type unitWatch struct {
	m       *Manager
	path    dbus.ObjectPath
	props   map[string]any // Unit and Service properties merged; guarded by m.mu
	stopped bool           // systemd was seen stopping the unit (SubState stop-sig*); guarded by m.mu
	// stoppedFor is the unit's Result when it was first seen stopping:
	// "timeout" when systemd stopped it at its RuntimeMax (a stop that
	// times out later says "timeout" only at its end). systemd announces
	// the Service/Scope interface's changes (Result) before the Unit's
	// (SubState). Guarded by m.mu.
	stoppedFor string
	changed    chan struct{}
}

// watch starts collecting unit's announced properties. Call it before the
// operation whose effect it should see; stop it with close.
func (m *Manager) watch(unit string) *unitWatch {
	m.subscribe(context.Background())
	path := unitPath(unit)
	if m.viaBus {
		// Not waited for (as Subscribe): dbus-daemon adds the rule before
		// it routes this connection's next call, whose effects the watch
		// is for. Its error was never acted on.
		m.send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.AddMatch", propertiesChanged(path))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.startDispatch()
	w := &unitWatch{m: m, path: path, props: map[string]any{}, changed: make(chan struct{}, 1)}
	m.watchers[w.path] = append(m.watchers[w.path], w)
	return w
}

func (w *unitWatch) close() {
	m := w.m
	if m.viaBus && !m.oneCommand {
		m.send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.RemoveMatch", propertiesChanged(w.path))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	list := m.watchers[w.path]
	for i, x := range list {
		if x == w {
			m.watchers[w.path] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(m.watchers[w.path]) == 0 {
		delete(m.watchers, w.path)
	}
}

// jobsRule is the match rule for the end of every job of every unit:
// never added as it is (with a hundred mosaic processes starting sessions
// at once, each would get, and decode, the hundred others' job ends too);
// jobsOf asks for one unit's.
const jobsRule = "type='signal',interface='org.freedesktop.systemd1.Manager',member='JobRemoved'"

// jobsOf asks dbus-daemon for the job ends (JobRemoved, whose third
// argument is the unit) of one unit, for a call whose job go-systemd waits
// for, and returns the function that takes the rule back. Like a watch's,
// the rule is sent without waiting: it is in effect before the call sent
// after it.
func (m *Manager) jobsOf(unit string) func() {
	if !m.viaBus {
		return func() {} // the private socket sends every signal anyway
	}
	rule := jobsRule + ",arg2='" + unit + "'"
	m.send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.AddMatch", rule)
	if m.oneCommand {
		return func() {} // see oneCommand
	}
	return func() {
		m.send("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.RemoveMatch", rule)
	}
}

// propertiesChanged is the match rule for one unit's announcements (an
// object path needs no quoting: it holds only [A-Za-z0-9_/]).
func propertiesChanged(path dbus.ObjectPath) string {
	return "type='signal',path='" + string(path) + "',interface='org.freedesktop.DBus.Properties',member='PropertiesChanged'"
}

// snapshot returns a copy of the properties announced so far.
func (w *unitWatch) snapshot() map[string]any {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	c := make(map[string]any, len(w.props))
	for k, v := range w.props {
		c[k] = v
	}
	return c
}

// wasStopped reports whether systemd was seen stopping the unit (a stop job:
// mosaic stop, systemctl --user stop, RuntimeMaxSec), as opposed to its
// command ending by itself.
func (w *unitWatch) wasStopped() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.stopped
}

// stoppedAtRuntimeMax reports whether systemd began the stop because the
// unit reached its RuntimeMax (see stoppedFor).
func (w *unitWatch) stoppedAtRuntimeMax() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	return w.stopped && w.stoppedFor == "timeout"
}

// ended reports whether the unit was announced inactive or failed.
func (w *unitWatch) ended() bool {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	s := w.props["ActiveState"]
	return s == "inactive" || s == "failed"
}

// startDispatch starts, once, the goroutine that hands systemd's signals to
// the watches and the job waits, in the order they came; m.mu is held.
func (m *Manager) startDispatch() {
	if m.signals == nil {
		m.signals = make(chan *dbus.Signal, 1024)
		m.bus.Signal(m.signals)
		go m.dispatch()
	}
}

// sessionPathPrefix starts the D-Bus object path of every unit named
// mosaic-* ("-" is escaped as _2d).
const sessionPathPrefix = "/org/freedesktop/systemd1/unit/mosaic_2d"

// WatchSessions calls fn with every property change systemd announces for
// a unit named mosaic-* (iface is the interface whose properties changed),
// however the unit was started: the bus's view of every session. fn runs on
// the one goroutine that reads signals, in the order systemd sent them.
func (m *Manager) WatchSessions(fn func(unit, iface string, changed map[string]any)) {
	m.subscribe(context.Background())
	if m.viaBus {
		_ = m.bus.AddMatchSignal(dbus.WithMatchSender("org.freedesktop.systemd1"),
			dbus.WithMatchInterface("org.freedesktop.DBus.Properties"), dbus.WithMatchMember("PropertiesChanged"))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onSession = fn
	m.startDispatch()
}

// unitOfPath is the unit name of a unit's object path (systemd escapes every
// byte outside [A-Za-z0-9] as _XX).
func unitOfPath(path dbus.ObjectPath) string {
	s := strings.TrimPrefix(string(path), "/org/freedesktop/systemd1/unit/")
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '_' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (m *Manager) dispatch() {
	for sig := range m.signals {
		if sig.Name == jobRemovedSignal && m.onJob != nil {
			m.onJob(sig)
			continue
		}
		if sig.Name != "org.freedesktop.DBus.Properties.PropertiesChanged" || len(sig.Body) < 2 {
			continue
		}
		changed, ok := sig.Body[1].(map[string]dbus.Variant)
		if !ok {
			continue
		}
		m.mu.Lock()
		if fn := m.onSession; fn != nil && strings.HasPrefix(string(sig.Path), sessionPathPrefix) {
			iface, _ := sig.Body[0].(string)
			values := make(map[string]any, len(changed))
			for k, v := range changed {
				values[k] = v.Value()
			}
			m.mu.Unlock()
			fn(unitOfPath(sig.Path), iface, values)
			m.mu.Lock()
		}
		for _, w := range m.watchers[sig.Path] {
			for k, v := range changed {
				w.props[k] = v.Value()
				if sub, _ := v.Value().(string); k == "SubState" && strings.HasPrefix(sub, "stop-sig") && !w.stopped {
					w.stopped = true
					w.stoppedFor, _ = w.props["Result"].(string)
				}
			}
			select {
			case w.changed <- struct{}{}:
			default:
			}
		}
		m.mu.Unlock()
	}
}
