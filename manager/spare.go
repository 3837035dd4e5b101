package manager

import (
	"context"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/manager/clone"
	"mosaic/units"
)

// makeSpare has the spare copy of a clone-mode session's repository made
// in the background (clone.MakeSpare, in a unit of its own: see
// units.SpareProperties) once the session has started, unless there is one:
// the next session of the repository then takes it (clone.TakeSpare).
// Nothing waits for it; a unit already making it is left to.
func (m *Manager) makeSpare(ctx context.Context, spec units.Spec) {
	if spec.Clone == nil || spec.Clone.Kind == units.ClonePlain || m.opts.MosaicBin == "" {
		return
	}
	root := stateRoot(spec)
	if clone.HasSpare(root, spec.Workspace) {
		return
	}
	unit := units.SpareUnitName(clone.SpareKey(spec.Workspace))
	argv := []string{m.opts.MosaicBin, clone.SpareStage, root, spec.Workspace, spec.Clone.Objects}
	cctx, cancel := bounded(ctx)
	defer cancel()
	_, _ = m.conn.StartTransientUnitAux(cctx, unit, "fail", units.SpareProperties(argv), []sd.PropertyCollection{}, nil)
}

// spareMaxAge is how long gc keeps a spare its repository's sessions have
// not taken: it holds a checkout's worth of the user's disk.
const spareMaxAge = 7 * 24 * time.Hour
