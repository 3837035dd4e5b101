package manager

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"

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
func (m *Manager) RunScope(ctx context.Context, spec units.Spec, secrets []credentials.Var, stdio [3]*os.File, signals <-chan os.Signal) (Session, error) {
	if !spec.Scope {
		return Session{}, bug("RunScope", os.ErrInvalid)
	}
	unit := spec.Unit()
	if err := m.claimName(ctx, spec); err != nil {
		return Session{}, err
	}
	undo, err := prepareState(spec)
	if err != nil {
		return Session{}, err
	}
	if !spec.NameGiven {
		defer os.RemoveAll(spec.StateDir)
		defer os.RemoveAll(spec.EgressDir)
	}
	mark(ctx, "claim name, state directory")

	infoR, infoW, err := os.Pipe()
	if err != nil {
		undo()
		return Session{}, bug("pipe", err)
	}
	defer infoR.Close()
	goR, goW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		undo()
		return Session{}, bug("pipe", err)
	}
	defer goW.Close()
	argv := units.ExecArgv(spec)
	cmd := &exec.Cmd{
		Path: argv[0], Args: argv, Env: scopeEnv(spec, secrets), Dir: spec.Workspace,
		Stdin: stdio[0], Stdout: stdio[1], Stderr: stdio[2],
		ExtraFiles: []*os.File{infoW, goR}, // sandbox.ScopeInfoFD, sandbox.ScopeGoFD
		// Its own process group: the terminal's signals go to mosaic, which
		// forwards them to the init, not to bwrap's monitor.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	}
	// PR_SET_PDEATHSIG follows the thread that forked, so that thread must
	// live as long as the session: this goroutine keeps it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err = cmd.Start()
	infoW.Close()
	goR.Close()
	if err != nil {
		undo()
		return Session{}, units.Failed("start-failed", "cannot start the session's exec shim %s: %v", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	w := m.watch(unit)
	defer w.close()
	defer m.forget(context.Background(), unit)
	result, err := m.startUnit(ctx, unit, units.ScopeProperties(spec, uint32(cmd.Process.Pid)), units.AuxUnits(spec))
	if err == nil && result != "done" {
		err = units.Failed("start-failed", "session %s did not start: systemd's start job for %s ended %s", spec.Name, unit, result)
	}
	if err != nil {
		goW.Close() // the shim gives up: nothing ran
		<-exited
		undo()
		return Session{}, err
	}
	mark(ctx, "scope started")
	if _, err := goW.Write([]byte{1}); err != nil {
		<-exited
		undo()
		return Session{}, units.Failed("start-failed", "session %s did not start: its exec shim died before it could run", spec.Name)
	}
	goW.Close()

	initPID := make(chan int, 1)
	go func() {
		var info struct {
			ChildPID int `json:"child-pid"`
		}
		_ = json.NewDecoder(infoR).Decode(&info)
		initPID <- info.ChildPID
	}()
	pid, stopping := 0, false
	var waitErr error
wait:
	for {
		select {
		case pid = <-initPID:
			mark(ctx, "sandbox up (bwrap reported the init)")
		case sig := <-signals:
			if pid > 0 {
				_ = unix.Kill(pid, sig.(syscall.Signal))
			} else if !stopping {
				stopping = true
				cctx, cancel := bounded(ctx)
				_, _ = m.conn.StopUnitContext(cctx, unit, "replace", nil)
				cancel()
			}
		case waitErr = <-exited:
			break wait
		}
	}
	mark(ctx, "session ended")
	// bwrap is gone, and with it the sandbox; systemd sees the cgroup empty
	// and ends the scope (some 5 ms later). For a session named by the
	// caller, wait for that, so that the name is free again when mosaic run
	// returns; a name mosaic made up is never asked for again.
	deadline := time.After(callTimeout)
	for spec.NameGiven && !w.ended() {
		select {
		case <-w.changed:
		case <-deadline:
			cctx, cancel := bounded(ctx)
			_, _ = m.conn.StopUnitContext(cctx, unit, "replace", nil)
			cancel()
			deadline = nil
		}
	}
	mark(ctx, "scope ended")
	p := w.snapshot()
	s := sessionOf(spec.Name, units.KindScope, p, p)
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
	s.ExitStatus, s.Signal = exitOf(kind, status)
	now := time.Now()
	s.Ended = &now
	s.StoppedBy = stoppedBy(w, stopping, s.Result)
	if spec.NameGiven {
		result := s.Result
		if result == "" {
			result = "success"
		}
		_ = writeJSONAtomic(filepath.Join(spec.StateDir, endFile), endRecord{Result: result, ExitCode: kind, ExitStatus: strconv.Itoa(status), Ended: now})
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
