package manager

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/godbus/dbus/v5"

	"mosaic/internal/errcode"
)

// UnitByPID is the unit process pid is in (GetUnitByPID) and that unit's
// current InvocationID (hex; systemd makes a new one at each start of a
// unit). A process in no unit is errcode.NoSuchSession; any other error is
// the call's own, never "no unit". The PID may have been reused by the time
// systemd looks it up: the caller checks that the process is still the one
// it means (its start time) after this returns.
func (m *Manager) UnitByPID(ctx context.Context, pid uint32) (unit, invocationID string, err error) {
	var path dbus.ObjectPath
	if err := m.call(ctx, "org.freedesktop.systemd1.Manager.GetUnitByPID", pid).Store(&path); err != nil {
		if dbusErrorName(err) == errNoUnitForPID {
			return "", "", errcode.NoSuchSession.New("process %d is in no unit", pid)
		}
		return "", "", systemdError("GetUnitByPID", err)
	}
	cctx, cancel := bounded(ctx)
	defer cancel()
	p := m.properties(cctx, path, "org.freedesktop.systemd1.Unit", []string{"Id", "InvocationID"})()
	unit, _ = p["Id"].(string)
	id, _ := p["InvocationID"].([]byte)
	if unit == "" {
		return "", "", systemdError("reading the Id of "+string(path), fmt.Errorf("systemd answered no Id"))
	}
	return unit, hex.EncodeToString(id), nil
}

// UnitByPIDFD is the unit the process behind pidfd is in, and its
// InvocationID, by systemd's GetUnitByPIDFD (253+: Features().UnitByPIDFD).
// systemd reads the PID from the pidfd and checks again, after the lookup,
// that the process is alive and still that PID, so a reused PID cannot
// answer for a process that is gone. Errors as UnitByPID's.
func (m *Manager) UnitByPIDFD(ctx context.Context, pidfd int) (unit, invocationID string, err error) {
	var path dbus.ObjectPath
	var id []byte
	if err := m.call(ctx, "org.freedesktop.systemd1.Manager.GetUnitByPIDFD", dbus.UnixFD(pidfd)).Store(&path, &unit, &id); err != nil {
		if dbusErrorName(err) == errNoUnitForPID {
			return "", "", errcode.NoSuchSession.New("the process of pidfd %d is in no unit", pidfd)
		}
		return "", "", systemdError("GetUnitByPIDFD", err)
	}
	return unit, hex.EncodeToString(id), nil
}
