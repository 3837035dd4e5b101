package manager

import "os"

// A `mosaic run` of the service path ties its session to its own lifetime:
// the run puts its own process into a scope of its own in the start's call
// (units.TieScope, as `systemd-run --scope` does with itself), and the
// session's unit is BindsTo= that scope. The run killed, even by SIGKILL,
// empties the scope, which ends, and systemd stops the session; nothing
// runs unwatched, and gc takes what is left. A run that returns leaves the
// scope holding only itself: it ends as the run exits, a moment later,
// and no session is bound to it any more (the session ended first). Its
// name carries the run's PID (units.TieScopeName), so that a run of the
// same name right after never meets it, and no list or status shows it
// (it is not a session's unit). (A scope run holds already: its bwrap
// dies with mosaic.)

// Only a process that runs one Run and exits may be its own tie
// (Manager.TieSelf): the CLI. A long-lived caller's Run (the bench's
// finish steps) is not tied; the finish step and the doctor's probe that
// such a caller runs end on their own (RuntimeMax=).

// tiePID is the PID a run puts into its tie scope: its own when m.TieSelf,
// else none, and none under the weakened build's hook (testNoTie).
func (m *Manager) tiePID() uint32 {
	if !m.TieSelf || testNoTie() {
		return 0
	}
	return uint32(os.Getpid())
}
