package manager

import (
	"context"
	"os"
	"strconv"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/units"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"
)

// A `mosaic run` of the service path ties its session to its own lifetime:
// the run puts its own process into a scope of its own (units.Rendered's Tie, as
// `systemd-run --scope` does with itself), and the session's unit is
// BindsTo= that scope. The run killed, even by SIGKILL, empties the scope,
// which ends, and systemd stops the session; nothing runs unwatched, and gc
// takes what is left. A run that returns leaves the scope holding only
// itself: it ends as the run exits, a moment later, and no session is bound
// to it any more (the session ended first). Its name carries the run's PID
// (units.TieScopeName), so that a run of the same name right after never
// meets it, and no list or status shows it (it is not a session's unit).
// (A scope run holds already: its bwrap dies with mosaic.)
//
// The scope is started first, in a call of its own, and the session only
// once the run has seen itself in it (/proc/self/cgroup): a run killed
// after systemd was asked to move it but before the move can leave the
// scope running with an empty cgroup for good (the kernel skips a dying
// process, systemd counts it moved), and a session started with the scope
// in one call would run on unwatched. In this order a run killed before or
// during the scope's start never asked for the session; one killed after
// was moved, so its scope empties and the session stops (or its start
// fails: the scope it is bound to is gone).

// Only a process that runs one Run and exits may be its own tie
// (Options.TieSelf): the CLI. A long-lived caller's Run (the bench's
// finish steps) is not tied; the finish step and the doctor's probe that
// such a caller runs end on their own (RuntimeMax=).

// tiePID is the PID a run puts into its tie scope: its own when Options.TieSelf,
// else none, and none under the weakened build's hook (testNoTie); the
// weakened build's old tie (testOldTie) puts a zombie's.
func (m *Manager) tiePID() uint32 {
	if !m.opts.TieSelf || testNoTie() {
		return 0
	}
	if pid := testOldTie(); pid != 0 {
		return pid
	}
	return uint32(os.Getpid())
}

// startTie starts the tie scope of session name's run (units.Rendered's
// Tie; nil for none) with this process in it, and returns once the run is
// in it. A scope whose start failed is forgotten; one the run is not in is
// stopped (it does not hold the run). A scope that holds the run is never
// stopped here: that would stop the run; it ends as the run exits.
func (m *Manager) startTie(ctx context.Context, name string, tie *sd.PropertyCollection) error {
	if tie == nil { // none, or started with the session (units.Render's weakened old tie)
		return nil
	}
	testhook.Pause("tie-starting")
	result, err := m.startUnit(ctx, tie.Name, tie.Properties, nil, nil)
	if err != nil {
		return err
	}
	if result != "done" {
		m.forget(ctx, tie.Name)
		return errcode.StartFailed.New("session %s was not started: systemd did not start its run's tie scope %s (start job %s): try again", name, tie.Name, result)
	}
	if cg, _ := os.ReadFile("/proc/self/cgroup"); !strings.HasSuffix(strings.TrimSpace(string(cg)), "/"+tie.Name) {
		cctx, cancel := bounded(ctx)
		_, _ = m.conn.StopUnitContext(cctx, tie.Name, "replace", nil)
		cancel()
		return errcode.StartFailed.New("session %s was not started: systemd started its run's tie scope %s but did not move the run into it (its cgroup is %q): try again", name, tie.Name, strings.TrimSpace(string(cg)))
	}
	mark(ctx, "tie scope started")
	testhook.Pause("tie-started")
	return nil
}

// stopDeadTies stops the tie scopes of runs that are gone: a run killed
// while systemd moved it into its scope leaves the scope running with an
// empty cgroup for good, but no session (startTie). A scope whose run's PID
// (in its name) still names a process is left alone.
func (m *Manager) stopDeadTies(ctx context.Context) {
	cctx, cancel := bounded(ctx)
	defer cancel()
	list, err := m.conn.ListUnitsByPatternsContext(cctx, []string{"active"}, []string{units.UnitPrefix + "*.run-*" + units.ScopeSuffix})
	if err != nil {
		return
	}
	for _, u := range list {
		rest := strings.TrimSuffix(u.Name, units.ScopeSuffix)
		pid, err := strconv.Atoi(rest[strings.LastIndex(rest, ".run-")+len(".run-"):])
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		_, _ = m.conn.StopUnitContext(cctx, u.Name, "replace", nil)
	}
}
