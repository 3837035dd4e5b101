package bus

import (
	"encoding/json"
	"os"
	"path/filepath"

	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/sandbox"
)

// outsideFile is where `mosaic bus prepare` records the manager's
// namespaces and /tmp for a confined bus; sessions never see the runtime dir.
func outsideFile(p request.Paths) string {
	return filepath.Join(p.RuntimeDir, "mosaic", "bus-outside.json")
}

// Prepare is the unconfined step of mosaic-bus.service (ExecStartPre=+),
// run before systemd builds the bus's namespaces: it makes the directories
// the unit's ReadWritePaths= name (they must exist), and records the
// outside that sessions the bus launches are checked against (see
// sandbox.Outside).
func Prepare(p request.Paths) error {
	for _, d := range []string{p.StateRoot, filepath.Join(p.RuntimeDir, "mosaic")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return errcode.StateDir.New("cannot make %s: %w", d, err)
		}
	}
	if err := records.WriteJSONAtomic(outsideFile(p), sandbox.HereOutside()); err != nil {
		return errcode.StateDir.New("cannot record the outside in %s: %w", outsideFile(p), err)
	}
	return nil
}

// outside is what sessions the bus launches are checked against: its own
// namespaces when it runs in the manager's, else what Prepare recorded. A
// confined bus without that record refuses to start rather than launch
// sessions whose check of systemd's sandbox would compare against the
// bus's own namespaces (and so pass when that sandbox failed open).
func outside(p request.Paths) (*sandbox.Outside, error) {
	if !sandbox.InOwnUserNamespace() {
		return nil, nil
	}
	b, err := os.ReadFile(outsideFile(p))
	var o sandbox.Outside
	if err == nil {
		err = json.Unmarshal(b, &o)
	}
	if err == nil && (o.NS["user"] == "" || o.NS["mnt"] == "" || o.TmpID == "") {
		err = errcode.StateDir.New("it names no user or mount namespace or /tmp")
	}
	if err != nil {
		return nil, errcode.StateDir.New("the bus runs in namespaces of its own, and %s, which `mosaic bus prepare` writes before it starts (ExecStartPre=+), cannot be read (%w): reinstall the unit with contrib/install-bus-unit.sh", outsideFile(p), err)
	}
	return &o, nil
}
