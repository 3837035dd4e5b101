// Package manager is the one place mosaic talks to systemd: it holds one D-Bus
// connection to the user's service manager and starts, stops, lists, inspects
// and waits for sessions through it (StartTransientUnit, StopUnit, KillUnit,
// ListUnitsByPatterns, and the units' PropertiesChanged signals).
//
// It connects to the manager's private socket, $XDG_RUNTIME_DIR/systemd/private,
// as systemctl --user does: no dbus-daemon in the path, signals delivered
// without match rules, and Unix descriptors passed for mosaic run.
package manager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/units"
)

// callTimeout bounds every single D-Bus call; systemd answers in
// milliseconds, so a call that takes this long means a wedged manager.
const callTimeout = 10 * time.Second

// Manager is a connection to the user's systemd manager.
type Manager struct {
	conn     *sd.Conn
	bus      *dbus.Conn
	features units.Features
	// MosaicBin is the mosaic binary that sessions run as their exec shim
	// and init; it defaults to this process's own executable.
	MosaicBin string

	mu       sync.Mutex
	watchers map[dbus.ObjectPath][]*unitWatch
	signals  chan *dbus.Signal
}

// RuntimeDir returns $XDG_RUNTIME_DIR, or a refusal saying how to get one.
func RuntimeDir() (string, error) {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" || !filepath.IsAbs(rt) {
		return "", units.Refused("no-user-manager", "XDG_RUNTIME_DIR is not set, so there is no systemd user manager to reach: log in through a systemd user session (or, on a machine without systemd as PID 1, use contrib/rig.sh)")
	}
	return rt, nil
}

// Connect opens the connection and reads the manager's version once.
func Connect(ctx context.Context) (*Manager, error) {
	rt, err := RuntimeDir()
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(rt, "systemd", "private")
	var bus *dbus.Conn
	// go-systemd dials twice (calls and signals); one socket serves both, so
	// hand it the same connection and keep it to one per process.
	conn, err := sd.NewConnection(func() (*dbus.Conn, error) {
		if bus != nil {
			return bus, nil
		}
		c, err := dbus.Dial("unix:path="+sock, dbus.WithContext(ctx))
		if err != nil {
			return nil, err
		}
		if err := c.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
			c.Close()
			return nil, err
		}
		bus = c
		return c, nil
	})
	if err != nil {
		return nil, units.Refused("no-user-manager", "cannot reach the systemd user manager at %s: %v (check `systemctl --user status`; on a machine without systemd as PID 1, use contrib/rig.sh)", sock, err)
	}
	m := &Manager{conn: conn, bus: bus, watchers: map[dbus.ObjectPath][]*unitWatch{}}
	var v dbus.Variant
	if err := m.call(ctx, "org.freedesktop.DBus.Properties.Get", "org.freedesktop.systemd1.Manager", "Version").Store(&v); err != nil {
		conn.Close()
		return nil, units.Failed("no-user-manager", "cannot read the user manager's version: %v", err)
	}
	s, _ := v.Value().(string)
	m.features = units.FeaturesFor(units.ParseVersion(s))
	if m.features.Version < 252 {
		conn.Close()
		return nil, units.Refused("systemd-too-old", "systemd %q is older than 252, the oldest mosaic supports: upgrade systemd", s)
	}
	if exe, err := os.Executable(); err == nil {
		m.MosaicBin, _ = filepath.EvalSymlinks(exe)
	}
	return m, nil
}

// Close closes the connection.
func (m *Manager) Close() { m.conn.Close() }

// Features are what the connected manager supports.
func (m *Manager) Features() units.Features { return m.features }

// call calls a method on the manager object, bounded by callTimeout.
func (m *Manager) call(ctx context.Context, method string, args ...any) *dbus.Call {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	obj := m.bus.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	return obj.CallWithContext(ctx, method, 0, args...)
}

// ctx bounds one go-systemd call by callTimeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, callTimeout)
}

// dbusErrorName returns the D-Bus error name of err, or "".
func dbusErrorName(err error) string {
	var e dbus.Error
	if errors.As(err, &e) {
		return e.Name
	}
	var pe *dbus.Error
	if errors.As(err, &pe) && pe != nil {
		return pe.Name
	}
	return ""
}

const (
	errUnitExists = "org.freedesktop.systemd1.UnitExists"
	errNoSuchUnit = "org.freedesktop.systemd1.NoSuchUnit"
)

// bug wraps an error that should not happen with a systemd this version.
func bug(what string, err error) error {
	return units.Failed("systemd-error", "%s: %v (this is a bug in mosaic or an unexpected systemd; please report it with `mosaic doctor` output)", what, err)
}
