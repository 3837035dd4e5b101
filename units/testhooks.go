package units

import (
	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
)

// The renderer's test hooks that change a whole session's units, each a
// named point of package testhook: they act only in the binary the race
// tests build with -tags mosaic_testhooks, never in mosaic itself. They
// are here, where the units are made, rather than in the manager's start.

// testProperties changes a session's unit properties for a test:
//   - MOSAIC_TEST_EGRESS_REQUIRES=1 ties the session to its egress proxy
//     with Requires= in place of BindsTo=: the weakened mosaic whose
//     session runs on when its proxy dies;
//   - MOSAIC_TEST_INIT_HOLD=DURATION holds bwrap's child that long before
//     it runs the init (a stop ends the hold), and MOSAIC_TEST_TERM_IGNORED=1 has the exec shim
//     ignore SIGTERM (the weakened shim whose stop in that time is lost):
//     both are for the unit's shim, so they go into its environment;
//   - MOSAIC_TEST_OUTPUT_NULL=1 sends its output to /dev/null, as systemd
//     does when it cannot reach journald (down while the session started),
//     which a test cannot stop.
func testProperties(props []sd.Property) []sd.Property {
	if testhook.Flag("MOSAIC_TEST_EGRESS_REQUIRES") {
		for i := range props {
			if props[i].Name == "BindsTo" {
				props[i].Name = "Requires"
			}
		}
	}
	var env []string
	for _, name := range []string{sandbox.InitHoldEnv, "MOSAIC_TEST_TERM_IGNORED"} {
		if v := testhook.Value(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	if len(env) > 0 {
		props = append(props, prop("Environment", env))
	}
	if testhook.Flag("MOSAIC_TEST_OUTPUT_NULL") {
		props = append(props, prop("StandardOutput", "null"), prop("StandardError", "null"))
	}
	return props
}

// testOldTie, under MOSAIC_TEST_OLD_TIE=1, renders a run's tie scope
// among the session's aux units, started in the session's own call, and
// none before it: the weakened mosaic whose tie holds a zombie
// (manager's testOldTie) and runs on empty for good, as when a run is
// killed between the call and the move.
func testOldTie(r Rendered) Rendered {
	if r.Tie == nil || !testhook.Flag("MOSAIC_TEST_OLD_TIE") {
		return r
	}
	r.Aux, r.Tie = append(r.Aux, *r.Tie), nil
	return r
}
