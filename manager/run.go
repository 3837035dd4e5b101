package manager

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/records"
	"mosaic/manager/session"
	"mosaic/manager/statedir"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Run runs the session in the foreground, like systemd-run --wait --pipe: the
// caller's stdin, stdout and stderr (stdio) become the unit's, Run waits for
// the end and returns the ended session; its ExitCode is the command's.
// A signal on interrupt stops the session, and Run still waits for its end.
// The unit is collected when it ends, even when it failed (its result is read
// from systemd's last announcement): a finished run leaves no session unit
// behind, and its tie scope (runtie.go) ends as the run exits.
// A session named by the caller keeps its home for a later run of the same
// name; one mosaic named leaves nothing.
func (m *Manager) Run(ctx context.Context, plan Plan, stdio [3]int, interrupt <-chan os.Signal) (Session, error) {
	l, err := m.start(ctx, plan, units.Launch{Stdio: &stdio, TiePID: m.tiePID()}, true)
	if err != nil {
		return Session{}, err
	}
	spec := l.spec
	// The name is held until the run is over: gc never takes the state of a
	// run it sees between its start and its unit. A name mosaic made up
	// leaves nothing.
	defer l.release()
	if !spec.NameGiven && spec.Clone == nil { // a clone's change outlives the run
		defer statedir.Remove(spec.StateDir)
		defer os.RemoveAll(spec.EgressDir)
		defer os.RemoveAll(units.PublishDir(spec.RuntimeDir, spec.Name))
		defer os.RemoveAll(units.SSHAgentDir(spec.RuntimeDir, spec.Name))
		defer os.RemoveAll(egress.ControlDir(spec.EgressDir))
	}
	w, unit, result := l.watch, l.unit, l.result
	defer w.close()
	defer m.forgetLater(unit)
	stopping := false
	for !w.ended() {
		select {
		case <-w.changed:
		case <-interrupt:
			if !stopping {
				stopping = true
				cctx, cancel := bounded(ctx)
				_, _ = m.conn.StopUnitContext(cctx, unit, "replace", nil)
				cancel()
			}
		case <-ctx.Done():
			return Session{}, errcode.Interrupted.New("stopped waiting for session %s, which may still run: see `mosaic status %s`", spec.Name, spec.Name)
		case <-m.gone():
			return Session{}, errGone("waiting for session " + spec.Name + " to end")
		}
	}
	mark(ctx, "end announced")
	home := session.HomeOf(spec.StateDir)
	var egressRecord *egress.Record
	if spec.Network == sandbox.NetworkAllow {
		// The proxy writes its last record as systemd stops it, right
		// after the session: read before an unnamed run's state goes.
		if r, ok := egress.WaitRecord(egress.RecordDir(spec.StateDir), egressRecordWait); ok {
			egressRecord = &r
		}
		mark(ctx, "egress record read")
	}
	removed := removeUnnamed(spec)
	defer func() { <-removed }()
	p := w.snapshot()
	s := session.Of(spec.Name, units.KindService, p, p)
	s.StoppedBy = stoppedBy(w, stopping, s.Result)
	records.TidyWorkspace(recordAt(spec, l.launch, l.began))
	s.Home = home
	s.EgressRecord = egressRecord
	if result != "done" && s.ExitStatus == nil {
		return s, errcode.StartFailed.New("session %s did not start: %s", spec.Name, startFailure(result, s))
	}
	return s, nil
}

// egressRecordWait bounds the wait at a run's end for its egress proxy's
// last record (it stops within milliseconds of the session; killed, it
// writes none, and the one of its last few seconds is taken).
const egressRecordWait = 2 * time.Second

// removeUnnamed removes an ended unnamed run's state (its state directory
// and egress directory) in the background and returns what is closed once
// it is gone: the end of a run looks at the workspace and hears from
// systemd meanwhile, instead of after. (The removal deferred at its start,
// for every way out, then finds nothing.) A named session keeps its state.
func removeUnnamed(spec units.Spec) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		if !spec.NameGiven && spec.Clone == nil {
			statedir.Remove(spec.StateDir)
			os.RemoveAll(spec.EgressDir)
			os.RemoveAll(units.PublishDir(spec.RuntimeDir, spec.Name))
			os.RemoveAll(units.SSHAgentDir(spec.RuntimeDir, spec.Name))
			os.RemoveAll(egress.ControlDir(spec.EgressDir))
		}
		close(done)
	}()
	return done
}

// recordAt is the record of spec's session, as launched l, as mosaic
// wrote it at its start, with began as its start (a moment before the
// file's own, so that nothing the session changed is missed). It is made
// again rather than read back: the session cannot reach its state
// directory, and reading and decoding the file cost the end of every run a
// few hundred microseconds.
func recordAt(spec units.Spec, l units.Launch, began time.Time) records.Record {
	r := statedir.RecordOf(spec, l)
	r.Started = began
	return r
}

// forgetLater asks systemd to clear what it still holds of an ended unit
// without waiting for the answer: a run's unit is collected when it ends
// (CollectMode=inactive-or-failed), so this is only a fallback, and the
// command's status need not wait a round trip for it. A later start of the
// same name clears a leftover itself (claimName).
func (m *Manager) forgetLater(unit string) {
	m.send("org.freedesktop.systemd1", "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager.ResetFailedUnit", unit)
}

// stoppedBy tells why a watched session was stopped, or "" when its command
// ended by itself.
func stoppedBy(w *unitWatch, byUs bool, result string) string {
	switch {
	case byUs:
		return "signal"
	case !w.wasStopped():
		return ""
	case result == "timeout" && w.stoppedAtRuntimeMax():
		// (A stop whose SIGTERM was ignored also ends in "timeout", at
		// the stop timeout's SIGKILL: that stop came from outside.)
		return "runtime-max"
	}
	return "outside"
}

// awaitSave waits, past a stop's timeout, while the session's init saves
// its home (home.json says so: only the init writes it, never the
// command): a SIGKILL now would lose the home's changes. systemd's stop
// timeout, which the save extends as it goes (EXTEND_TIMEOUT_USEC), still
// bounds it. True when the stop's job ended meanwhile; false when the init
// is not (or no longer) saving.
func awaitSave(dir string, done <-chan string, progress func(string)) bool {
	told := false
	for {
		if h := session.HomeOf(dir); h == nil || h.State != sandbox.HomeInSave {
			return false
		}
		if !told && progress != nil {
			progress("saving its home: waiting for the save, which systemd's stop timeout still bounds")
			told = true
		}
		select {
		case <-done:
			return true
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Stop stops a session: SIGTERM to every process of it (systemd's StopUnit),
// then SIGKILL to all of them once timeout has passed (unless its init is
// saving its home then: awaitSave), and waits until the
// unit is down, so that its cgroup is empty when Stop returns. The ended
// unit is then cleared from systemd. progress, when not nil, is told what is
// being waited for.
func (m *Manager) Stop(ctx context.Context, name string, timeout time.Duration, progress func(string)) (Session, error) {
	s, err := m.Status(ctx, name)
	if err != nil {
		return Session{}, err
	}
	unit := s.Unit
	defer m.forget(context.Background(), unit)
	if !s.Running() {
		return s, nil
	}
	testhook.Pause("stop-checked")
	w := m.watch(unit)
	defer w.close()
	defer m.jobsOf(unit)()
	done := make(chan string, 1)
	cctx, cancel := bounded(ctx)
	_, err = m.conn.StopUnitContext(cctx, unit, "replace", done) // w subscribed
	cancel()
	if err != nil {
		if dbusErrorName(err) == errNoSuchUnit {
			// It ended by itself between the status and the stop: report
			// how, as for a session that had ended before.
			return m.Status(ctx, name)
		}
		return Session{}, systemdError("StopUnit "+unit, err)
	}
	defer m.termAgainWhileStarting(ctx, unit, s.State == "activating")()
	if progress != nil {
		progress("SIGTERM sent; SIGKILL in " + timeout.String())
	}
	dir := m.paths.SessionDir(name)
	select {
	case <-done:
	case <-m.gone():
		return Session{}, errGone("stopping session " + name)
	case <-time.After(timeout):
		m.killCommandForSave(ctx, s, unit, dir)
		if awaitSave(dir, done, progress) {
			break
		}
		if progress != nil {
			progress("still running after " + timeout.String() + ": SIGKILL sent")
		}
		kctx, cancel := bounded(ctx)
		_ = m.conn.KillUnitWithTarget(kctx, unit, sd.All, int32(unix.SIGKILL))
		cancel()
		select {
		case <-done:
		case <-m.gone():
			return Session{}, errGone("stopping session " + name)
		case <-time.After(callTimeout):
			return Session{}, errcode.StopTimeout.New("session %s did not stop even after SIGKILL: check `systemctl --user status %s`", name, unit)
		}
	}
	// The job's end and the unit's last announcement travel separately.
	deadline := time.After(callTimeout)
	for !w.ended() {
		select {
		case <-w.changed:
		case <-m.gone():
			return Session{}, errGone("stopping session " + name)
		case <-deadline:
			return Session{}, errcode.StopTimeout.New("session %s stopped but systemd did not announce its end: check `systemctl --user status %s`", name, unit)
		}
	}
	// The units that serve it (egress proxy and its sockets, terminal
	// holder, publish forwarder, lent ssh agent) are stopped by systemd once the session no
	// longer needs them (StopWhenUnneeded), a moment after it, and a proxy
	// stopping writes its last record: the stop returns after them, so
	// that nothing of the session runs when it does and its status has the
	// proxy's last word. (A loaded 2-core machine showed a proxy in
	// stop-sigterm after the stop had returned.)
	m.awaitDown(ctx, brokerUnits(name))
	p := w.snapshot()
	end := session.Of(name, s.Kind, p, p)
	if rec, ok := records.Read(dir); ok {
		session.Describe(rec, &end)
	}
	end.Home = session.HomeOf(dir)
	return end, nil
}

// brokerUnits are the names of the units that may serve session name.
func brokerUnits(name string) []string {
	return []string{units.EgressSocketUnitName(name), units.EgressUnitName(name), units.PTYUnitName(name), units.PublishUnitName(name), units.SSHAgentUnitName(name)}
}

// awaitDown waits, callTimeout at most, until each of the units named
// that is up is down. Their ends are watched, not asked for with a stop of
// mosaic's: a unit stopped as unneeded is stopped by a job of systemd's
// own, and systemd tells a job's end only to the client that asked for it.
func (m *Manager) awaitDown(ctx context.Context, names []string) {
	watches := map[string]*unitWatch{}
	for _, n := range names {
		w := m.watch(n)
		defer w.close()
		watches[n] = w
	}
	cctx, cancel := bounded(ctx)
	listed, err := m.conn.ListUnitsByNamesContext(cctx, names) // after the watches: no end is missed
	cancel()
	if err != nil {
		return
	}
	deadline := time.After(callTimeout)
	for _, u := range listed {
		if u.LoadState != "loaded" || u.ActiveState == "inactive" || u.ActiveState == "failed" {
			continue // down, or never there
		}
		for w := watches[u.Name]; w != nil && !w.ended(); {
			select {
			case <-w.changed:
			case <-m.gone():
				return
			case <-deadline:
				return
			}
		}
	}
}

// unitPath is the D-Bus object of unit.
func unitPath(unit string) dbus.ObjectPath {
	return dbus.ObjectPath("/org/freedesktop/systemd1/unit/" + sd.PathBusEscape(unit))
}

// WaitEnded returns once the session is no longer running (at once when it
// is not), or when ctx is done.
func (m *Manager) WaitEnded(ctx context.Context, name string) error {
	s, err := m.Status(ctx, name)
	if err != nil || !s.Running() {
		return err
	}
	w := m.watch(s.Unit)
	defer w.close()
	// Again, now that no announcement can be missed.
	if s, err = m.Status(ctx, name); err != nil || !s.Running() {
		return err
	}
	for !w.ended() {
		select {
		case <-w.changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-m.gone():
			return errGone("waiting for session " + name + " to end")
		}
	}
	return nil
}

// termAgainWhileStarting, for a stop that began while the session was
// still starting, sends SIGTERM again to every process of it each second
// until the returned function is called. systemd's one SIGTERM may reach
// nobody who hears it: on 257 (PrivatePIDs=yes) the process systemd forks
// is PID 1 of a PID namespace until it runs the exec shim, and drops a
// signal it has no handler for (bwrap's time, after the shim, is covered
// by the init: sandbox.keepStopSignal). The session, let run meanwhile,
// hears the next one; its command may get two.
func (m *Manager) termAgainWhileStarting(ctx context.Context, unit string, starting bool) (stop func()) {
	if !starting || testNoTermAgain() {
		return func() {}
	}
	quit := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				kctx, cancel := bounded(ctx)
				_ = m.conn.KillUnitWithTarget(kctx, unit, sd.All, int32(unix.SIGTERM))
				cancel()
			}
		}
	}()
	return func() { close(quit) }
}

// StopInvocation is Stop of session name only while name is the start of it
// whose invocation id is invocation (the bus lets a session stop only the
// very start of a session it launched). The name is locked, as a start
// locks it, from the check until the stop is asked: no mosaic start can
// put another session under the name in between, which stopping by name
// alone (systemd has no stop by invocation) could not tell apart.
// errcode.NoSuchSession when name is another start now, or none.
func (m *Manager) StopInvocation(ctx context.Context, name, invocation string, timeout time.Duration) (Session, error) {
	if err := units.ValidateName(name); err != nil {
		return Session{}, err
	}
	p, err := m.Paths()
	if err != nil {
		return Session{}, err
	}
	lock, err := statedir.LockName(p.SessionDir(name))
	if err == statedir.ErrBusy {
		return Session{}, busyName(name)
	}
	if err != nil {
		return Session{}, errcode.StateDir.New("cannot lock the name %s: %w", name, statedir.Hint(err, filepath.Dir(statedir.LockPath(p.SessionDir(name)))))
	}
	defer lock.Release()
	s, err := m.Status(ctx, name)
	if err != nil {
		return Session{}, err
	}
	if invocation == "" || s.InvocationID != invocation {
		return Session{}, errcode.NoSuchSession.New("session %s is no longer the one asked about (another start of the name runs now, or none)", name)
	}
	testhook.Pause("stop-invocation-checked")
	return m.Stop(ctx, name, timeout, nil)
}
