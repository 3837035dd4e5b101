package manager

import (
	"context"

	"mosaic/credentials"
	"mosaic/sandbox"
	"mosaic/units"
)

// sandboxOf decides the session's inner layer: --sandbox, else the
// profile's, else bwrap. landlock is only ever what was asked for, and
// needs a service (a scope has no systemd layer to hide the home and the
// runtime dir).
func sandboxOf(req Request, profile credentials.Profile) (string, error) {
	mode := req.Sandbox
	if mode == "" {
		mode = profile.Sandbox
	}
	if mode == "" {
		return sandbox.ModeBwrap, nil
	}
	if !sandbox.ValidMode(mode) {
		return "", units.BadInput("bad-sandbox", "--sandbox %s: use bwrap (the default: namespaces of its own) or landlock (for hosts where bwrap cannot run; see `mosaic doctor`)", mode)
	}
	if mode == sandbox.ModeLandlock && req.Scope {
		return "", units.BadInput("bad-sandbox", "--sandbox landlock needs a service, not --scope: systemd's layer is what hides your home and its runtime directory there")
	}
	if mode == sandbox.ModeLandlock && req.MayLaunch {
		return "", units.BadInput("bad-sandbox", "--sandbox landlock does not support --may-launch yet: use --sandbox bwrap")
	}
	return mode, nil
}

// landlockUnavailable is the refusal of a --sandbox landlock session on a
// kernel without the Landlock it needs, or nil.
func landlockUnavailable() error {
	if abi := sandbox.LandlockABI(); abi < sandbox.LandlockMinABI {
		return units.Refused("sandbox-unavailable", "--sandbox landlock needs Landlock ABI %d (Linux 6.12+, landlock in the lsm= boot list); this kernel offers %d, so nothing was started", sandbox.LandlockMinABI, abi)
	}
	return nil
}

// launchLandlock is Launch for a --sandbox landlock session: no bwrap to
// find or probe, a kernel with the Landlock the mode needs.
func launchLandlock(ctx context.Context, spec units.Spec, secrets []credentials.Var, paths Paths) (*Manager, units.Spec, []credentials.Var, error) {
	if err := landlockUnavailable(); err != nil {
		return nil, units.Spec{}, nil, err
	}
	m, err := Connect(ctx)
	mark(ctx, "connect, read version")
	if err != nil {
		return nil, units.Spec{}, nil, err
	}
	m.complete(&spec, paths)
	return m, spec, secrets, nil
}
