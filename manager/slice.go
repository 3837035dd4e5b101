package manager

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"mosaic/manager/request"

	"mosaic/internal/errcode"
	"mosaic/units"
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
	if done || limitedOnDisk(m.paths) {
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
			return errcode.SystemdError.New("cannot set %s's limits: %w", units.Slice, err)
		}
	}
	m.mu.Lock()
	m.sliceLimited = true
	m.mu.Unlock()
	return nil
}

// limitedOnDisk reports whether a limit of mosaic.slice is set as a
// drop-in of `systemctl --user set-property` (what limitSlice's
// SetUnitProperties writes: $XDG_RUNTIME_DIR/systemd/user.control, or the
// persistent ~/.config/systemd/user.control), so that the three Gets, and
// their round trip at every mosaic start and run, are not needed (issue
// 32). A limit set any other way (a mosaic.slice unit file) is found by the
// Gets, as before; a drop-in that says infinity is no limit.
func limitedOnDisk(p request.Paths) bool {
	var dirs []string
	if p.RuntimeDir != "" {
		dirs = append(dirs, filepath.Join(p.RuntimeDir, "systemd", "user.control"))
	}
	if p.Config != "" {
		dirs = append(dirs, filepath.Join(p.Config, "systemd", "user.control"))
	}
	for _, d := range dirs {
		for _, key := range []string{"MemoryMax", "TasksMax", "CPUQuota"} {
			b, err := os.ReadFile(filepath.Join(d, units.Slice+".d", "50-"+key+".conf"))
			if err != nil {
				continue
			}
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(l), key+"="); ok && v != "" && v != "infinity" {
					return true
				}
			}
		}
	}
	return false
}
