package manager

import (
	"context"
	"fmt"

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

// landlockGaps are the probe's checks that --sandbox landlock cannot deny,
// with the reason (sandbox.LandlockRows has them all).
var landlockGaps = map[string]string{
	"host-process": "no PID namespace: the host's /proc shows every process (signals to them fail)",
}

// ForSandbox adjusts doctor's checks to the sandbox mode they are for and
// adds the Landlock check: in --sandbox landlock a bwrap that cannot run is
// expected (that is what the mode is for), and Landlock must be there.
func ForSandbox(checks []Check, mode string) []Check {
	out := make([]Check, 0, len(checks)+1)
	for _, c := range checks {
		if mode == sandbox.ModeLandlock && c.Name == "bwrap" && c.Status == "fail" {
			c = warn(c.Name, c.Detail+" (not needed by --sandbox landlock)", "")
		}
		if mode == sandbox.ModeLandlock && c.Name == "user-namespaces" {
			// Without them the user manager cannot hide the home and the
			// runtime dir, which Landlock alone cannot (the user bus is a
			// path socket): the session is refused.
			c.Detail += " (--sandbox landlock needs them too: systemd's layer, which hides your home and the user bus, is built in one)"
		}
		out = append(out, c)
	}
	return append(out, landlockCheck(mode))
}

// landlockCheck says what the kernel's Landlock gives every session, and
// whether --sandbox landlock can run.
func landlockCheck(mode string) Check {
	const name = "landlock"
	abi := sandbox.LandlockABI()
	if abi >= sandbox.LandlockMinABI {
		return ok(name, fmt.Sprintf("ABI %d: every session's command is scoped (no abstract socket of the host, even with --network host; no signal outside the session); --sandbox landlock can run", abi))
	}
	detail := fmt.Sprintf("ABI %d (%d needed): sessions lack the scoping: a --network host session reaches the host's abstract sockets (X11, a desktop's D-Bus, ssh-agent's, ...); --sandbox landlock cannot run", abi, sandbox.LandlockMinABI)
	fix := "boot Linux 6.12 or newer with landlock in the lsm= list (cat /sys/kernel/security/lsm)"
	if mode == sandbox.ModeLandlock {
		return fail(name, detail, fix)
	}
	return warn(name, detail, fix)
}
