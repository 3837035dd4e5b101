package manager

import (
	"context"
	"errors"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/records"
	"mosaic/units"
)

// A start whose connection to systemd is lost once it asked for the unit
// (dbus-daemon killed, systemd re-executed by an upgrade, which drops its
// bus connection with the call unanswered) cannot tell from that
// connection whether systemd took the start: it may run. Undoing the start
// then would take the state of a session that runs from under it (its
// sandbox then fails 226/NAMESPACE, or it runs with no record of its end).
// So mosaic connects again and asks.

// lost reports whether err, from a start, means the connection to systemd
// went away with the answer: the connection closed, or the bus said that
// systemd left it without replying.
func (m *Manager) lost(err error) bool {
	select {
	case <-m.gone():
		return true
	default:
	}
	switch dbusErrorName(err) {
	case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected", "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
		return true
	}
	var e *errcode.Error
	return errors.As(err, &e) && e.Code == errcode.SystemdGone.Name
}

// reconnectFor bounds how long mosaic tries to reach systemd again after a
// lost start: a re-executing manager is back within a second or two.
const reconnectFor = 15 * time.Second

// afterLostStart connects again and finds out whether spec's unit runs:
// keep says the caller keeps the state (it does); the error says which it
// was, for the user.
func afterLostStart(ctx context.Context, spec units.Spec, cause error) (keep bool, err error) {
	unit := spec.Unit()
	// Another mosaic may act on the name meanwhile: a start, rm or gc finds
	// it held (this start has its lock until it returns); a stop stops the
	// unit, whose end is then recorded (records.ReadEnd, below).
	testhook.Pause("lost-start-reconnecting")
	var m *Manager
	for end := time.Now().Add(reconnectFor); ; time.Sleep(200 * time.Millisecond) {
		if m, err = connect(ctx, Options{}); err == nil || time.Now().After(end) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		// Nothing can be asked: keep what may belong to a running session.
		return true, errcode.SystemdGone.New("the connection to systemd was lost while session %s started (%w), and systemd cannot be reached again: its state is kept; once systemd is back, `mosaic status %s` says whether it runs (if not, `mosaic rm %s`)", spec.Name, cause, spec.Name, spec.Name)
	}
	defer m.Close()
	// A start job still under way (systemd re-executed meanwhile) is
	// waited for, as the lost connection would have: only its end says
	// whether the session runs.
	st := m.unitState(ctx, unit)
	for end := time.Now().Add(units.StartTimeout + callTimeout); (st == "activating" || st == "deactivating" || st == "reloading") && time.Now().Before(end) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
		st = m.unitState(ctx, unit)
	}
	switch st {
	case "active", "activating", "deactivating", "reloading", "?":
		return true, errcode.SystemdGone.New("the connection to systemd was lost while session %s started (%w); connected again, systemd runs it: its state is kept, see `mosaic status %s`", spec.Name, cause, spec.Name)
	}
	m.forget(ctx, unit)
	if st == "" {
		st = "no such unit"
	}
	// Its end recorded (MarkStarting removed an earlier run's): systemd ran
	// it, and it ended or was stopped meanwhile (`mosaic stop` during the
	// reconnect, a command that exits at once); what is left of it is
	// kept, as of any session that ran.
	if end, ok := records.ReadEnd(spec.StateDir); ok && !testLossIgnoresEnd() {
		return true, errcode.SystemdGone.New("the connection to systemd was lost while session %s started (%w); connected again, systemd ran it and it has ended (result %s): its state is kept, see `mosaic status %s`", spec.Name, cause, end.Result, spec.Name)
	}
	return false, errcode.SystemdGone.New("the connection to systemd was lost while session %s started (%w); connected again, systemd does not run it (%s): nothing of it is left, start it again", spec.Name, cause, st)
}

// unitState is the unit's ActiveState ("" when systemd does not have it,
// "?" when systemd cannot be asked).
func (m *Manager) unitState(ctx context.Context, unit string) string {
	cctx, cancel := bounded(ctx)
	defer cancel()
	st, err := m.conn.ListUnitsByNamesContext(cctx, []string{unit})
	if err != nil {
		return "?"
	}
	for _, u := range st {
		if u.LoadState != "not-found" {
			return activeState(u)
		}
	}
	return ""
}

// activeState is u's ActiveState, but "activating" for an inactive unit
// with a job queued: a start whose call reached systemd (a lost start's, one
// just made) is "inactive" until its job runs, and is not an ended unit to
// forget or whose state to take.
func activeState(u sd.UnitStatus) string {
	if u.JobId != 0 && u.ActiveState == "inactive" {
		return "activating"
	}
	return u.ActiveState
}
