package manager

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"mosaic/manager/records"
	"mosaic/manager/session"
	"mosaic/manager/statedir"
	"mosaic/units/errcode"

	"golang.org/x/sys/unix"

	"mosaic/credentials"
	"mosaic/units"
)

// RunScope runs the session in the foreground as a transient scope, like
// systemd-run --scope: mosaic starts the exec shim itself, with stdio as its
// stdin, stdout and stderr (the user's terminal, inherited directly), has
// systemd adopt it into mosaic-NAME.scope (StartTransientUnit with PIDs),
// and only then lets it become bwrap. systemd gives the scope its cgroup
// (limits, accounting, systemctl --user, stop) and no sandboxing property:
// bwrap's layer and the init are the whole sandbox, checked as always.
//
// The shim is held until it is in the scope, so nothing of the session runs
// outside it; it dies with mosaic (PR_SET_PDEATHSIG), and bwrap takes the
// sandbox with it. Each signal on signals is forwarded to the session's init,
// which forwards it to the command: Ctrl-C in the terminal reaches the
// command, not only mosaic. The secrets reach the shim in the environment of
// the exec (never a command line, never a file).
func (m *Manager) RunScope(ctx context.Context, spec units.Spec, secrets []credentials.Var, stdio [3]*os.File, signals <-chan os.Signal) (s Session, err error) {
	if !spec.Scope {
		return Session{}, bug("RunScope", os.ErrInvalid)
	}
	began := time.Now()
	slice := make(chan error, 1)
	go func() { slice <- m.limitSlice(ctx, spec.SliceLimits) }() // overlaps the claim
	release, undo, err := m.claim(ctx, &spec)
	if err != nil {
		return Session{}, err
	}
	unit := spec.Unit()
	defer release()
	// One undo for every failure before the session runs.
	defer func() {
		if err != nil && undo != nil {
			undo()
		}
	}()
	if !spec.NameGiven {
		defer statedir.Remove(spec.StateDir)
		defer os.RemoveAll(spec.EgressDir)
	}
	mark(ctx, "claim name, state directory")
	if err = <-slice; err != nil {
		return Session{}, err
	}
	mark(ctx, "slice limits (overlap)")

	// PR_SET_PDEATHSIG follows the thread that forked, so that thread must
	// live as long as the session: this goroutine keeps it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	sh, err := startShim(spec, secrets, stdio)
	if err != nil {
		return Session{}, err
	}
	defer sh.close()
	mark(ctx, "exec shim started (until its exec)")

	w := m.watch(unit)
	defer w.close()
	defer m.forgetLater(unit)
	result, err := m.startUnit(ctx, unit, units.ScopeProperties(spec, uint32(sh.cmd.Process.Pid)), units.AuxUnits(spec))
	if err == nil && result != "done" {
		err = errcode.StartFailed.New("session %s did not start: systemd's start job for %s ended %s", spec.Name, unit, result)
	}
	if err != nil {
		sh.abort() // the shim gives up: nothing ran
		return Session{}, err
	}
	mark(ctx, "scope started")
	if err := sh.release(); err != nil {
		return Session{}, errcode.StartFailed.New("session %s did not start: its exec shim died before it could run", spec.Name)
	}
	undo = nil // the session ran: what it made is its own now
	started(ctx)

	stopping, waitErr := m.relayUntilExit(ctx, unit, sh, signals)
	mark(ctx, "session ended")
	m.awaitScopeEnd(ctx, spec, w)
	mark(ctx, "scope ended")
	return scopeEnded(spec, w, sh.cmd, stopping, waitErr, began)
}

// shim is a scope's exec shim, started by mosaic and held on a pipe until
// systemd has put it into its scope.
type shim struct {
	cmd    *exec.Cmd
	info   *os.File   // bwrap's --info-fd: the init's PID
	goW    *os.File   // one byte: go
	exited chan error // cmd.Wait's result
}

// startShim starts the exec shim with stdio as its stdin, stdout and
// stderr, in a process group of its own (the terminal's signals go to
// mosaic, which forwards them to the init, not to bwrap's monitor), killed
// with mosaic (PR_SET_PDEATHSIG). The secrets reach it in the environment of
// the exec, never a command line or a file.
func startShim(spec units.Spec, secrets []credentials.Var, stdio [3]*os.File) (*shim, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, bug("pipe", err)
	}
	defer infoW.Close()
	goR, goW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		return nil, bug("pipe", err)
	}
	defer goR.Close()
	argv := units.ExecArgv(spec)
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Env: scopeEnv(spec, secrets), Dir: spec.Workspace,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		ExtraFiles:  []*os.File{infoW, goR}, // sandbox.ScopeInfoFD, sandbox.ScopeGoFD
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	if err := cmd.Start(); err != nil {
		infoR.Close()
		goW.Close()
		return nil, errcode.StartFailed.New("cannot start the session's exec shim %s: %v", argv[0], err)
	}
	sh := &shim{cmd: cmd, info: infoR, goW: goW, exited: make(chan error, 1)}
	go func() { sh.exited <- cmd.Wait() }()
	return sh, nil
}

// release lets the shim go on into the sandbox.
func (sh *shim) release() error {
	_, err := sh.goW.Write([]byte{1})
	sh.goW.Close()
	if err != nil {
		<-sh.exited
	}
	return err
}

// abort makes the shim give up (EOF on its pipe) and waits for it.
func (sh *shim) abort() {
	sh.goW.Close()
	<-sh.exited
}

func (sh *shim) close() {
	sh.info.Close()
	sh.goW.Close()
}

// relayUntilExit forwards each signal to the session's init (once bwrap has
// reported its PID; before that, a signal stops the scope) until the shim,
// now bwrap, exits. It reports whether it asked systemd to stop the scope.
func (m *Manager) relayUntilExit(ctx context.Context, unit string, sh *shim, signals <-chan os.Signal) (stopping bool, waitErr error) {
	initPID := make(chan int, 1)
	go func() {
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		_ = json.NewDecoder(sh.info).Decode(&info)
		initPID <- info.ChildPID
	}()
	// The init is signalled through a pidfd, opened as soon as bwrap names
	// it: a PID alone could be another process's by the time a signal comes.
	pidfd := -1
	defer func() {
		if pidfd >= 0 {
			unix.Close(pidfd)
		}
	}()
	for {
		select {
		case pid := <-initPID:
			if pid > 0 {
				if fd, err := unix.PidfdOpen(pid, 0); err == nil {
					pidfd = fd
				}
			}
			mark(ctx, "sandbox up (bwrap reported the init)")
		case sig := <-signals:
			if pidfd >= 0 {
				_ = unix.PidfdSendSignal(pidfd, sig.(syscall.Signal), nil, 0)
			} else if !stopping {
				stopping = true
				cctx, cancel := bounded(ctx)
				_, _ = m.conn.StopUnitContext(cctx, unit, "replace", nil)
				cancel()
			}
		case waitErr = <-sh.exited:
			return stopping, waitErr
		}
	}
}

// awaitScopeEnd waits, for a session named by the caller, until systemd has
// seen the scope's cgroup empty and ended it (some 5 ms after bwrap is
// gone), so that the name is free again when mosaic run returns; a name
// mosaic made up is never asked for again.
func (m *Manager) awaitScopeEnd(ctx context.Context, spec units.Spec, w *unitWatch) {
	deadline := time.After(callTimeout)
	for spec.NameGiven && !w.ended() {
		select {
		case <-w.changed:
		case <-m.gone():
			return
		case <-deadline:
			cctx, cancel := bounded(ctx)
			_, _ = m.conn.StopUnitContext(cctx, spec.Unit(), "replace", nil)
			cancel()
			deadline = nil
		}
	}
}

// scopeEnded is the ended scope session, from systemd's announcements and
// the shim's own exit; a named one's end is recorded beside its state.
func scopeEnded(spec units.Spec, w *unitWatch, cmd *exec.Cmd, stopping bool, waitErr error, began time.Time) (Session, error) {
	p := w.snapshot()
	s := session.Of(spec.Name, units.KindScope, p, p)
	if !w.ended() { // every process of it is gone; systemd has yet to notice
		s.State, s.SubState = "inactive", "dead"
	}
	if cmd.ProcessState == nil {
		return s, bug("waiting for the session", waitErr)
	}
	kind, status := "exited", cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		kind, status = "killed", int(ws.Signal())
	}
	s.ExitStatus, s.Signal = session.Exit(kind, status)
	now := time.Now()
	s.Ended = &now
	s.StoppedBy = stoppedBy(w, stopping, s.Result)
	s.MovedAside = records.MoveAside(recordAt(spec, began))
	if spec.NameGiven {
		records.TidyHome(spec.StateDir, recordAt(spec, began))
		result := s.Result
		if result == "" {
			result = "success"
		}
		_ = records.WriteEnd(spec.StateDir, records.End{Result: result, ExitCode: kind, ExitStatus: strconv.Itoa(status), Ended: now, MovedAside: s.MovedAside})
	}
	return s, nil
}

// scopeEnv is the exec shim's environment for a scope: what a unit would
// have had (the spec's variables, the caller's PATH and identity) and the
// secrets. The shim, as a service's, hands bwrap only what
// sandbox.InitEnv keeps, and the init passes on only its allowlist and the
// named credentials.
func scopeEnv(spec units.Spec, secrets []credentials.Var) []string {
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
