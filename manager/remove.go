package manager

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/manager/statedir"
	"mosaic/units"
)

// removeState removes a forgotten session's state directory: set aside
// at once (statedir.SetAside: the name is free, and nothing of the session
// is left under it), then removed by a unit of its own in the background
// (units.RemoveProperties), so that rm, gc and the end of an unnamed
// clone-mode run do not wait for the files of its copy to go: ten thousand
// took 1-3 s on a busy disk. Where that unit cannot be started (no mosaic
// binary to run, systemd refused it) the removal is made here. A removal
// cut short either way is finished by the next RemoveLeftovers.
func (m *Manager) removeState(ctx context.Context, dir string) error {
	aside, err := statedir.SetAside(dir)
	if aside == "" {
		return err
	}
	if m.opts.MosaicBin != "" {
		var id [6]byte
		_, _ = rand.Read(id[:])
		argv := []string{m.opts.MosaicBin, statedir.RemoveStage, aside}
		cctx, cancel := bounded(ctx)
		props := append(units.RemoveProperties(argv), testRemoveEnv()...)
		_, err := m.conn.StartTransientUnitAux(cctx, units.RemoveUnitName(hex.EncodeToString(id[:])), "fail", props, []sd.PropertyCollection{}, nil)
		cancel()
		if err == nil {
			return nil
		}
	}
	return statedir.RemoveAside(aside)
}
