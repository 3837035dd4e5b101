package manager

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/manager/session"
	"mosaic/manager/statedir"

	"golang.org/x/sys/unix"

	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// RunScope runs the session in the foreground as a transient scope, like
// systemd-run --scope: mosaic starts bwrap itself (no exec shim), with stdio
// as its stdin, stdout and stderr (the user's terminal, inherited directly),
// has systemd adopt the init bwrap made into mosaic-NAME.scope
// (StartTransientUnit with PIDs), and only then lets the init run. systemd
// gives the scope its cgroup (limits, accounting, systemctl --user, stop)
// and no sandboxing property: bwrap's layer and the init are the whole
// sandbox, checked as always, the scope's cgroup first.
//
// bwrap builds the sandbox while systemd makes the scope. Its monitor
// process, which only waits for the init, stays with mosaic, as mosaic
// itself does: every process of the session descends from the init, in the
// scope, and a stop's SIGTERM goes to the init, which forwards it and gives
// the command its time. bwrap dies with mosaic (PR_SET_PDEATHSIG), and takes
// the sandbox with it. Each signal on
// signals is forwarded to the session's init, which forwards it to the
// command: Ctrl-C in the terminal reaches the command, not only mosaic. The
// secrets reach the init in the environment of the exec (never a command
// line, never a file).
func (c *Connecting) RunScope(ctx context.Context, plan Plan, stdio [3]*os.File, signals chan os.Signal) (s Session, err error) {
	spec := plan.Spec
	if !spec.Scope {
		return Session{}, errcode.Bug.New("RunScope was given a plan that is not a scope's (session %s)", spec.Name)
	}
	began := time.Now()
	free := func(context.Context, units.Spec) error { return nil } // a name mosaic made up is free
	if spec.NameGiven {                                            // the claim asks systemd whether the name is free
		m, err := untilConnected(ctx, c, signals, spec.Name)
		if err != nil {
			return Session{}, err
		}
		free = m.claimName
	}
	// The connection (see Open) and the slice's limits are waited for
	// while the name is claimed and the sandbox built.
	slice := make(chan error, 1)
	go func() {
		m, err := c.Manager(ctx)
		if err == nil {
			err = m.limitSlice(ctx, spec.SliceLimits)
		}
		slice <- err
	}()
	c2, err := claim(ctx, spec, units.Launch{}, free)
	if err != nil {
		return Session{}, err
	}
	spec, undo := c2.spec, c2.undo
	defer c2.release()
	// One undo for every failure before the session runs.
	defer func() {
		if err != nil && undo != nil {
			undo()
		}
	}()
	if !spec.NameGiven {
		if spec.Clone == nil { // a clone's change outlives the run (mosaic run removes it when there is none)
			defer statedir.Remove(spec.StateDir)
		}
		defer os.RemoveAll(spec.EgressDir)
		defer os.RemoveAll(egress.ControlDir(spec.EgressDir))
	}
	mark(ctx, "claim name, state directory")
	if spec.Clone != nil {
		if spec, err = makeClone(ctx, spec); err != nil {
			return Session{}, err
		}
		before, made := undo, spec
		undo = func() { removeClone(made); before() }
		mark(ctx, "clone: the session's copy")
	}

	// PR_SET_PDEATHSIG follows the thread that forked, so that thread must
	// live as long as the session: this goroutine keeps it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sb, err := startHeld(ctx, spec, plan.Secrets, stdio)
	if err != nil {
		return Session{}, err
	}
	defer sb.close()
	mark(ctx, "bwrap started (the init's PID)")
	if err = untilSignal(slice, signals, spec.Name); err != nil {
		sb.abort()
		return Session{}, err
	}
	mark(ctx, "connection, slice limits (overlap)")
	m, _ := c.Manager(ctx) // there: the slice's limits were set through it
	return m.runHeld(ctx, spec, sb, signals, began, &undo)
}

// untilConnected waits for the connection, or for a signal that
// interrupts (see untilSignal).
func untilConnected(ctx context.Context, c *Connecting, signals <-chan os.Signal, name string) (*Manager, error) {
	ready := make(chan error, 1)
	go func() {
		_, err := c.Manager(ctx)
		ready <- err
	}()
	if err := untilSignal(ready, signals, name); err != nil {
		return nil, err
	}
	return c.Manager(ctx)
}

// runHeld has systemd make the scope around the held sandbox sb, lets its
// init run, and relays signals to it until it ends. *undo, what a failed
// start undoes, is cleared once the session ran: what it made is its own.
func (m *Manager) runHeld(ctx context.Context, spec units.Spec, sb *held, signals chan os.Signal, began time.Time, undo *func()) (Session, error) {
	r := units.Render(spec, units.Launch{InitPID: uint32(sb.initPID)}, m.features)
	unit := r.Unit
	w := m.watch(unit)
	defer w.close()
	defer m.forgetLater(unit)
	result, err := "done", error(nil)
	if !testScopeOutside() {
		result, err = m.startUnit(ctx, unit, r.Properties, r.Aux, nil)
	}
	if err == nil && result != "done" {
		err = errcode.StartFailed.New("session %s did not start: systemd's start job for %s ended %s", spec.Name, unit, result)
	}
	if err != nil {
		sb.abort() // nothing ran
		return Session{}, err
	}
	mark(ctx, "scope started")
	if err := m.letRun(ctx, spec, sb, w, signals); err != nil {
		return Session{}, err
	}
	*undo = nil // the session ran: what it made is its own now
	_ = records.MarkLaunched(spec.StateDir)
	started(ctx)
	m.makeSpare(ctx, spec)
	// Ctrl-Z on the inherited terminal would stop only mosaic's process
	// group, and the shell would take the terminal back while the session,
	// in a group of its own, ran on reading and writing it. mosaic takes
	// SIGTSTP and forwards it as the others: the command's handler runs and
	// the init resumes it, as with --tty.
	if !testScopeSuspendable() {
		signal.Notify(signals, unix.SIGTSTP)
	}

	waitErr := relayUntilExit(sb, signals)
	mark(ctx, "session ended")
	var egressRecord *egress.Record
	if spec.Network == sandbox.NetworkAllow {
		// The proxy writes its last record as systemd stops it, once the
		// scope has ended: read before an unnamed run's state goes, for
		// the run's end lines (what was refused), as a service's run does.
		m.awaitScopeEnd(ctx, spec, w)
		if r, ok := egress.WaitRecord(egress.RecordDir(spec.StateDir), egressRecordWait); ok {
			egressRecord = &r
		}
		mark(ctx, "egress record read")
	}
	// Nothing of the session is left (its PID namespace ended with the
	// init): an unnamed run's state goes while systemd reports the end and
	// the workspace is looked at (scopeEnded).
	removed := removeUnnamed(spec)
	defer func() { <-removed }()
	m.awaitScopeEnd(ctx, spec, w)
	mark(ctx, "scope ended")
	s, err := scopeEnded(spec, w, sb.cmd, waitErr, began)
	s.EgressRecord = egressRecord
	return s, err
}

// letRun lets the held init in its scope run, unless the start is given
// up first: a signal that interrupts, or a stop of the scope, from the
// moment the init is held until it is let go. A start given up kills the
// held init and lets systemd end the scope it is in.
func (m *Manager) letRun(ctx context.Context, spec units.Spec, sb *held, w *unitWatch, signals chan os.Signal) error {
	giveUp := func(err error) error {
		sb.abort()
		m.awaitScopeEnd(ctx, spec, w)
		return err
	}
	// Nothing is forwarded to the init before it is held (and the look for
	// a stop below comes no sooner).
	if err := untilHeld(sb, signals, spec.Name); err != nil {
		return giveUp(err)
	}
	mark(ctx, "init held")
	testSignalWhileHeld(signals)
	// A signal that came while the init was held (Ctrl-C during the start):
	// nothing has run yet, stop here rather than start the command only to
	// forward it.
	if interrupted(signals) {
		return giveUp(interruptedBeforeRun(spec.Name))
	}
	// So does a stop that began while the init was held (mosaic stop,
	// systemctl --user stop). Its SIGTERM, sent before its news, which may
	// come only after this look, is kept by the init and forwarded to the
	// command as it starts.
	testPauseHeld()
	// (Only the stop's own announcement counts: an "inactive" may still be
	// the unit's first, announced before its start.)
	if !testBlindToStop() && w.wasStopped() {
		return giveUp(errcode.StartFailed.New("session %s was stopped from outside before its command ran", spec.Name))
	}
	testSignalAtRelease(sb.signal)
	if err := sb.release(); err != nil {
		return errcode.StartFailed.New("session %s did not start: its sandbox (bwrap) died before it could run", spec.Name)
	}
	return nil
}

// held is a scope's bwrap, started by mosaic: its init made (the sandbox
// built around it), started, and waiting for one byte until systemd has put
// it into the scope.
type held struct {
	cmd     *exec.Cmd
	initPID int
	initFD  int        // a pidfd of the init, which signals go through
	goW     *os.File   // one byte: go (a socket: the init says on it that it is held)
	held    chan error // nil once the init is held (it keeps every signal), else why not
	exited  chan error // cmd.Wait's result
}

// startHeld starts the scope's bwrap with stdio as its stdin, stdout and
// stderr, in a process group of its own (the terminal's signals go to
// mosaic, which forwards them to the init, not to bwrap's monitor), killed
// with mosaic (PR_SET_PDEATHSIG), and returns once bwrap has named the
// init. The secrets reach it in the environment of the exec, never a
// command line or a file.
//
// bwrap's monitor stays out of the scope (see RunScope): it does not handle
// SIGTERM, and a stop's SIGTERM, sent to every process of the scope, would
// kill it at once, and --die-with-parent the session with it before the
// command could shut down.
func startHeld(ctx context.Context, spec units.Spec, secrets []credvar.Var, stdio [3]*os.File) (*held, error) {
	bwrapArgv, initArgs := units.ScopeBwrap(spec)
	initArgs = append(append(testInitOptions(), sandbox.InitGoFD, strconv.Itoa(sandbox.ScopeInitGoFD)), initArgs...)
	h, err := sandbox.HoldBwrap(bwrapArgv, initArgs, scopeEnv(spec, secrets), spec.Promise.Encode())
	if err != nil {
		return nil, errcode.StartFailed.New("cannot start the session's sandbox: %w", err)
	}
	defer h.Args.Close()
	home, err := sandbox.OpenHomeStore(spec.StateDir)
	if err != nil {
		return nil, errcode.StartFailed.New("cannot start the session's sandbox: %w", err)
	}
	defer home.Close()
	h.Env = append(h.Env, sandbox.HomeFDEnv+"="+strconv.Itoa(sandbox.ScopeHomeFD))
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, errcode.StartFailed.New("cannot start the session's sandbox: a pipe: %w", err)
	}
	defer infoW.Close()
	defer infoR.Close()
	// A socket pair, not a pipe: the init says on it that it is held. Only
	// then are signals forwarded to it: before, as bwrap's child or a Go
	// runtime still starting, PID 1 of its namespace drops them.
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, errcode.StartFailed.New("cannot start the session's sandbox: a socket pair: %w", err)
	}
	goW := os.NewFile(uintptr(pair[0]), "go")
	if err := unix.SetNonblock(pair[1], false); err != nil {
		unix.Close(pair[1])
		goW.Close()
		return nil, errcode.StartFailed.New("cannot start the session's sandbox: a socket pair: %w", err)
	}
	goR := os.NewFile(uintptr(pair[1]), "init go")
	defer goR.Close()
	cmd := &exec.Cmd{
		Path: h.Argv[0], Args: h.Argv, Env: h.Env, Dir: spec.Workspace,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		ExtraFiles: []*os.File{infoW, h.Args, goR, home}, // sandbox.ScopeInfoFD, ScopeArgsFD, ScopeInitGoFD, ScopeHomeFD
		// A terminal on stdin that is mosaic's controlling terminal is not
		// bwrap's: the sandbox never shares one with a layer above it.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Noctty: controllingTerminal(stdio[0])},
	}
	// bwrap's monitor, in mosaic's own cgroup, is signalled with it: the
	// SIGTERM of a stop of the unit mosaic runs in (a terminal's scope, a
	// logout) would kill it at once, and --die-with-parent the session
	// before the command could shut down. It starts with SIGTERM blocked
	// (a mask the fork keeps from this thread, locked by RunScope, and the
	// exec keeps), which no signal to mosaic can be lost to; mosaic gets
	// the SIGTERM and forwards it. The init, a Go program, unblocks it.
	var term, mask unix.Sigset_t
	term.Val[(unix.SIGTERM-1)/64] |= 1 << ((unix.SIGTERM - 1) % 64)
	_ = unix.PthreadSigmask(unix.SIG_BLOCK, &term, &mask)
	err = cmd.Start()
	_ = unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil)
	if err != nil {
		goW.Close()
		return nil, errcode.StartFailed.New("cannot start the session's sandbox %s: %w", h.Argv[0], err)
	}
	infoW.Close()
	goR.Close()
	sb := &held{cmd: cmd, goW: goW, initFD: -1, exited: make(chan error, 1), held: make(chan error, 1)}
	go func() { sb.exited <- cmd.Wait() }()
	go func() {
		// EOF once bwrap and the init are gone; an error once goW is closed.
		if n, _ := goW.Read(make([]byte, 1)); n != 1 {
			sb.held <- errcode.StartFailed.New("session %s did not start: its sandbox (bwrap) died before it could run", spec.Name)
			return
		}
		sb.held <- nil
	}()
	pid := make(chan int, 1)
	go func() {
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		_ = json.NewDecoder(io.LimitReader(infoR, 4096)).Decode(&info)
		pid <- info.ChildPID
	}()
	select {
	case sb.initPID = <-pid:
	case <-ctx.Done():
	}
	if sb.initPID > 0 {
		sb.initFD, err = unix.PidfdOpen(sb.initPID, 0)
	}
	if sb.initPID <= 0 || err != nil {
		sb.abort()
		return nil, errcode.StartFailed.New("session %s did not start: bwrap could not make its sandbox (see its message above)", spec.Name)
	}
	return sb, nil
}

// controllingTerminal reports whether f is the calling process's
// controlling terminal.
func controllingTerminal(f *os.File) bool {
	_, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCGSID)
	return err == nil
}

// release lets the init run: one byte.
func (sb *held) release() error {
	_, err := sb.goW.Write(testReleaseBytes([]byte{1}))
	sb.goW.Close()
	if err != nil {
		<-sb.exited
	}
	return err
}

// abort kills the held sandbox and waits for bwrap. The init is killed
// first, through its pidfd (it would refuse on the go pipe's EOF anyway).
func (sb *held) abort() {
	if sb.initFD >= 0 {
		_ = unix.PidfdSendSignal(sb.initFD, unix.SIGKILL, nil, 0)
	}
	_ = sb.cmd.Process.Kill()
	sb.goW.Close()
	<-sb.exited
}

func (sb *held) close() {
	sb.goW.Close()
	if sb.initFD >= 0 {
		unix.Close(sb.initFD)
		sb.initFD = -1
	}
}

// untilSignal waits for done's error, or for a signal that interrupts.
// mosaic handles the signals from Open's return on, while it is still
// connecting to systemd (for up to dialTimeout and a call's timeout when the
// bus or the manager does not answer): Ctrl-C or SIGTERM must not wait for
// that, nor end in the connection's error.
func untilSignal(done <-chan error, signals <-chan os.Signal, name string) error {
	for {
		select {
		case err := <-done:
			return err
		case sig := <-signals:
			if interrupts(sig) {
				return interruptedBeforeRun(name)
			}
		}
	}
}

// untilHeld waits until the init says it is held, or for a signal that
// interrupts.
func untilHeld(sb *held, signals <-chan os.Signal, name string) error {
	if testNoAwaitHeld() {
		return nil
	}
	return untilSignal(sb.held, signals, name)
}

// interrupted reports whether a signal that interrupts is queued on signals.
func interrupted(signals <-chan os.Signal) bool {
	for {
		select {
		case sig := <-signals:
			if interrupts(sig) {
				return true
			}
		default:
			return false
		}
	}
}

// interrupts reports whether sig, come before the command ran, stops the
// run: any but SIGWINCH, which the command reads afresh when it starts.
func interrupts(sig os.Signal) bool { return sig != unix.SIGWINCH }

// interruptedBeforeRun is the error of a run a signal stopped before its
// command ran.
func interruptedBeforeRun(name string) error {
	return errcode.Interrupted.New("interrupted: session %s was stopped before its command ran", name)
}

// signal sends sig to the init, through its pidfd.
func (sb *held) signal(sig os.Signal) {
	_ = unix.PidfdSendSignal(sb.initFD, sig.(syscall.Signal), nil, 0)
}

// relayUntilExit forwards each signal to the session's init until bwrap
// exits.
func relayUntilExit(sb *held, signals <-chan os.Signal) error {
	for {
		select {
		case sig := <-signals:
			sb.signal(sig)
		case err := <-sb.exited:
			return err
		}
	}
}

// awaitScopeEnd waits, for a session named by the caller, until systemd has
// seen the scope's cgroup empty and ended it (some 5 ms after bwrap is
// gone), so that the name is free again when mosaic run returns; a name
// mosaic made up is never asked for again.
func (m *Manager) awaitScopeEnd(ctx context.Context, spec units.Spec, w *unitWatch) {
	deadline := time.After(callTimeout)
	stopped := false
	for spec.NameGiven && !w.ended() {
		select {
		case <-w.changed:
		case <-m.gone():
			return
		case <-deadline:
			if stopped {
				return // systemd says nothing: the next start of the name clears what is left
			}
			cctx, cancel := bounded(ctx)
			_, _ = m.conn.StopUnitContext(cctx, spec.Unit(), "replace", nil)
			cancel()
			stopped, deadline = true, time.After(callTimeout)
		}
	}
}

// scopeEnded is the ended scope session, from systemd's announcements and
// bwrap's exit (the init's status); a named one's end is recorded beside its
// state.
func scopeEnded(spec units.Spec, w *unitWatch, cmd *exec.Cmd, waitErr error, began time.Time) (Session, error) {
	p := w.snapshot()
	s := session.Of(spec.Name, units.KindScope, p, p)
	if !w.ended() { // every process of it is gone; systemd has yet to notice
		s.State, s.SubState = "inactive", "dead"
	}
	if cmd.ProcessState == nil {
		return s, errcode.Bug.New("session %s: its sandbox (bwrap) was waited for and no status came back: %w", spec.Name, waitErr)
	}
	kind, status := "exited", cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		kind, status = "killed", int(ws.Signal())
	}
	s.ExitStatus, s.Signal = session.Exit(kind, status)
	now := time.Now()
	s.Ended = &now
	s.StoppedBy = stoppedBy(w, false, s.Result)
	r := recordAt(spec, units.Launch{}, began)
	records.TidyWorkspace(r)
	s.Home = session.HomeOf(spec.StateDir)
	if spec.NameGiven {
		records.TidyHome(spec.StateDir, r)
		result := s.Result
		if result == "" {
			result = "success"
		}
		_ = records.WriteEnd(spec.StateDir, records.End{Result: result, ExitCode: kind, ExitStatus: strconv.Itoa(status), Ended: now})
	}
	return s, nil
}

// scopeEnv is the environment a scope's sandbox is made from: what a unit
// would have had (the spec's variables, the caller's PATH and identity) and
// the secrets. bwrap gets only what sandbox.InitEnv keeps of it
// (HoldBwrap), as a service's exec shim hands on, and the init passes on
// only its allowlist and the named credentials.
func scopeEnv(spec units.Spec, secrets []credvar.Var) []string {
	env := append([]string{}, spec.Env...)
	for _, name := range []string{"PATH", "USER", "LOGNAME"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	for _, v := range secrets {
		env = append(env, v.Name+"="+v.Value)
	}
	return env
}
