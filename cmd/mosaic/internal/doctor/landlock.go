package doctor

import (
	"fmt"
	"strconv"

	"mosaic/sandbox"
	"mosaic/units"
)

// landlockGaps are the probe's checks that --sandbox landlock cannot deny
// under a manager with features f, with the reason (sandbox.LandlockRows
// has them all): where systemd has PrivatePIDs (257+) the session has a PID
// namespace of its own, and the host's processes are out of sight.
func landlockGaps(f units.Features) map[string]string {
	gaps := map[string]string{"host-sysv": "no IPC namespace: the host's SysV segments are listed"}
	if !f.PrivatePIDs {
		gaps["host-process"] = "no PID namespace (systemd " + strconv.Itoa(f.Version) + " has no PrivatePIDs): the host's /proc shows every process (signals to them fail)"
	}
	return gaps
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
