package manager

import (
	"context"

	"mosaic/manager/request"
	"mosaic/units/errcode"

	"mosaic/credentials"
	"mosaic/sandbox"
	"mosaic/units"
)

// landlockUnavailable is the refusal of a --sandbox landlock session on a
// kernel without the Landlock it needs, or nil.
func landlockUnavailable() error {
	if abi := sandbox.LandlockABI(); abi < sandbox.LandlockMinABI {
		return errcode.SandboxUnavailable.New("--sandbox landlock needs Landlock ABI %d (Linux 6.12+, landlock in the lsm= boot list); this kernel offers %d, so nothing was started", sandbox.LandlockMinABI, abi)
	}
	return nil
}

// launchLandlock is Launch for a --sandbox landlock session: no bwrap to
// find or probe, a kernel with the Landlock the mode needs.
func launchLandlock(ctx context.Context, m *Manager, err error, spec units.Spec, secrets []credentials.Var, paths request.Paths) (*Manager, units.Spec, []credentials.Var, error) {
	if lerr := landlockUnavailable(); lerr != nil {
		if m != nil {
			m.Close()
		}
		return nil, units.Spec{}, nil, lerr
	}
	mark(ctx, "connect, read version (overlap)")
	if err != nil {
		return nil, units.Spec{}, nil, err
	}
	m.sweepCredentials(ctx)
	if err := m.complete(&spec, paths); err != nil {
		m.Close()
		return nil, units.Spec{}, nil, err
	}
	testPauseAfterCheck()
	return m, spec, secrets, nil
}
