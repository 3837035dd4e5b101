package manager

import (
	"context"

	"mosaic/units"
	"mosaic/units/errcode"
)

// limitSlice gives mosaic.slice its limits (every session together) when it
// has none: systemd makes the slice on the first session's start with no
// limit at all. They are set as runtime properties (SetUnitProperties,
// runtime: a drop-in under $XDG_RUNTIME_DIR/systemd/user.control, gone at
// logout), which a 252 user manager takes on a slice that is not yet
// active. A limit the user set (systemctl --user set-property mosaic.slice
// MemoryMax=8G) is never overwritten: any one set means the slice is left
// alone. One call per start once set; done once per connection.
func (m *Manager) limitSlice(ctx context.Context, l units.Limits) error {
	m.mu.Lock()
	done := m.sliceLimited
	m.mu.Unlock()
	if done {
		return nil
	}
	cctx, cancel := bounded(ctx)
	defer cancel()
	// The three limits, each a Get sent at once: a GetAll of the Slice
	// interface is some 80 properties to compute and decode, at every
	// mosaic start and run.
	names := []string{"MemoryMax", "TasksMax", "CPUQuotaPerSecUSec"}
	props := m.properties(cctx, unitPath(units.Slice), "org.freedesktop.systemd1.Slice", names)()
	set := false
	for _, name := range names {
		v, ok := props[name].(uint64)
		if !ok {
			return errcode.SystemdError.New("cannot read %s's limits: systemd did not answer for %s", units.Slice, name)
		}
		if v != units.Infinity {
			set = true
		}
	}
	if !set {
		if err := m.conn.SetUnitPropertiesContext(cctx, units.Slice, true, units.SliceProperties(l)...); err != nil {
			return errcode.SystemdError.New("cannot set %s's limits: %v", units.Slice, err)
		}
	}
	m.mu.Lock()
	m.sliceLimited = true
	m.mu.Unlock()
	return nil
}
