package manager

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/cgwarm"
	"mosaic/manager/records"
	"mosaic/manager/request"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sys/unix"

	"mosaic/credentials"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Start starts the session as a transient service and returns once systemd's
// start job is done, which for a session means the init inside the sandbox
// has checked it and started the command (Type=notify). When it is not, the
// unit is cleared and the error says why, with the unit's first log lines.
func (m *Manager) Start(ctx context.Context, plan Plan) (Session, error) {
	return m.startService(ctx, plan, units.Launch{})
}

// Terminal is the pseudo-terminal mosaic made for a session started in
// the background (start --pty): its slave side becomes the session's
// stdin, stdout and stderr, its master goes to the unit that holds it for
// `mosaic attach`. The plan's TTY says the init makes it the command's
// controlling terminal.
type Terminal struct{ Slave, Master int }

// StartPTY is Start of a session with a terminal of its own (start --pty).
func (m *Manager) StartPTY(ctx context.Context, plan Plan, term Terminal) (Session, error) {
	return m.startService(ctx, plan, units.Launch{Stdio: &[3]int{term.Slave, term.Slave, term.Slave}, Attach: &term.Master})
}

// startService is Start with what the caller made for the session
// (launch: a terminal).
func (m *Manager) startService(ctx context.Context, plan Plan, launch units.Launch) (Session, error) {
	l, err := m.start(ctx, plan, launch, true)
	if err != nil {
		return Session{}, err
	}
	defer l.release()
	spec := l.spec
	if l.result != "done" {
		s, _ := m.Status(ctx, spec.Name)
		reason := startFailure(l.result, s)
		if lines := journalLines(l.unit, l.began); lines != "" {
			reason += "; its log says: " + lines
		}
		if spec.Network == sandbox.NetworkAllow {
			if lines := journalLines(spec.EgressUnit(), l.began); lines != "" {
				reason += "; its egress proxy's log says: " + lines
			}
		}
		if len(spec.Publish) > 0 {
			if lines := journalLines(spec.PublishUnit(), l.began); lines != "" {
				reason += "; its publish forwarder's log says: " + lines
			}
		}
		if spec.SSHAgent != nil {
			if lines := journalLines(spec.SSHAgentUnit(), l.began); lines != "" {
				reason += "; its ssh agent filter's log says: " + lines
			}
		}
		if launch.Attach != nil {
			if lines := journalLines(spec.PTYUnit(), l.began); lines != "" {
				reason += "; its terminal holder's log says: " + lines
			}
		}
		m.forget(ctx, l.unit)
		l.undo()
		return Session{}, errcode.StartFailed.New("session %s did not start: %s", spec.Name, reason)
	}
	s, err := m.startedStatus(ctx, spec, l.watch, l.sent, l.record)
	mark(ctx, "status")
	if err != nil && m.lost(err) {
		return Session{}, errcode.SystemdGone.New("session %s started, but the connection to systemd closed before its status could be read: see `mosaic status %s`", spec.Name, spec.Name)
	}
	return s, err
}

// startedUnit is a unit whose start job has finished, one way or the other.
type startedUnit struct {
	// spec is the plan as started: its name as claimed (see claim), its
	// copy made (makeClone).
	spec   units.Spec
	launch units.Launch // what the start made for it
	unit   string
	result string          // the start job's result: "done" when the session runs
	began  time.Time       // when the start was asked for
	watch  *unitWatch      // when asked for: what systemd announced since before the start
	sent   []sd.Property   // the unit's properties, as StartTransientUnit got them
	record *records.Record // the session's record, as the claim wrote it
	undo   func()          // removes what the start made on disk, for a failure
	// release lets the name go: the caller holds it until it has
	// undone what a failed start made.
	release func()
}

// start is the one way a plan's service starts (Start and Run): it claims
// the name, prepares the state directory, holds the credentials, renders
// the plan and what it made for it (units.Render), starts the unit and
// waits for the start job. The credentials are let go as soon as the job
// is over: systemd read them before the command ran. The plan is not
// changed: l.spec is the one started (renamed by claim, its copy made). On
// success the caller holds the name until it calls l.release.
func (m *Manager) start(ctx context.Context, plan Plan, launch units.Launch, watch bool) (l startedUnit, err error) {
	spec := plan.Spec
	l = startedUnit{unit: spec.Unit(), began: time.Now()}
	// The slice's limits are read (and set) while the name is claimed and
	// the state made: its round trip to systemd costs nothing then.
	slice := make(chan error, 1)
	go func() { slice <- m.limitSlice(ctx, plan.Spec.SliceLimits) }()
	c, err := claim(ctx, spec, launch, m.claimName)
	if err != nil {
		return l, err
	}
	spec, launch = c.spec, c.launch
	l.record = &c.rec
	l.unit, l.undo, l.release = spec.Unit(), c.undo, c.release
	kept := false // a start whose connection was lost, and whose unit runs
	defer func() {
		if err != nil {
			if !kept {
				l.undo()
			}
			c.release()
		}
	}()
	mark(ctx, "claim name, state directory")
	if spec.Clone != nil && spec.Clone.Base == "" { // a finish step's copy is made already
		if spec, err = makeClone(ctx, spec); err != nil {
			return l, err
		}
		made := spec
		l.undo = func() { removeClone(made); c.undo() }
		mark(ctx, "clone: the session's copy")
	}
	l.spec = spec
	// The credentials are held in memory for the start (credentials.Hold):
	// a crash of mosaic at any point leaves none of them anywhere.
	secrets := plan.Secrets
	if spec.Intercepts() {
		var h *credentials.Held
		if secrets, h, err = holdEgress(spec, secrets); err != nil {
			return l, err
		}
		defer h.Close()
		launch.EgressCredentialFile = h.Path
	}
	if len(secrets) > 0 {
		h, err := credentials.Hold(spec.RuntimeDir, spec.Name, secrets, testHoldByProc())
		if err != nil {
			return l, errcode.CredentialFile.New("cannot hold the session's credentials: %w", err)
		}
		defer h.Close()
		launch.CredentialFile = h.Path
		testCredentialsOnDisk(spec.Name, secrets)
		testhook.Pause("credentials-written")
	}
	l.launch = launch
	mark(ctx, "credentials")
	if err := <-slice; err != nil {
		return l, err
	}
	mark(ctx, "slice limits (overlap)")
	r := units.Render(spec, launch, m.features)
	if err := m.startTie(ctx, spec.Name, r.Tie); err != nil {
		return l, err
	}
	if watch {
		l.watch = m.watch(l.unit)
	}
	stateDir := spec.StateDir
	l.sent = r.Properties
	l.result, err = m.startUnit(ctx, l.unit, l.sent, r.Aux, func() { _ = records.MarkLaunched(stateDir) })
	if err != nil {
		if l.watch != nil {
			l.watch.close()
		}
		if m.lost(err) && !testUndoOnLoss() {
			kept, err = afterLostStart(ctx, spec, err)
		}
		return l, err
	}
	mark(ctx, "start job done (READY)")
	if l.result == "done" {
		started(ctx)
		m.makeSpare(ctx, spec)
	}
	return l, nil
}

// holdEgress holds the egress proxy's own credentials (credentials.Hold):
// the injected keys and lent git tokens go to its file only (the held
// file's path is the launch's EgressCredentialFile), the session's keeps
// the rest and the keys' placeholders (the git tokens' are in its
// ~/.gitconfig), which it returns.
func holdEgress(spec units.Spec, secrets []credvar.Var) ([]credvar.Var, *credentials.Held, error) {
	var proxyVars, gitVars []credvar.Var
	secrets, proxyVars = egress.Split(spec.Inject, secrets)
	secrets, gitVars = egress.SplitGit(secrets)
	proxyVars = append(proxyVars, gitVars...)
	roots, err := egress.TestRoots(os.Getenv)
	if err == nil && spec.CAFile != "" {
		var extra []credvar.Var
		extra, err = egress.CARoots(spec.CAFile)
		roots = append(roots, extra...)
	}
	var h *credentials.Held
	if err == nil {
		h, err = credentials.Hold(spec.RuntimeDir, spec.Name+"-egress", append(proxyVars, roots...), testHoldByProc())
	}
	if err != nil {
		return nil, nil, errcode.CredentialFile.New("cannot hold the egress proxy's credentials: %w", err)
	}
	testCredentialsOnDisk(spec.Name+"-egress", append(proxyVars, roots...))
	return secrets, h, nil
}

// claimName makes sure the session's name is free, as a service and as a
// scope: a running session of that name is a refusal; an ended one that
// systemd still remembers as failed is cleared. A name mosaic made up is
// free (StartTransientUnit would still refuse a clash).
func (m *Manager) claimName(ctx context.Context, spec units.Spec) error {
	if !spec.NameGiven {
		return nil
	}
	cctx, cancel := bounded(ctx)
	defer cancel()
	st, err := m.conn.ListUnitsByNamesContext(cctx, append([]string{units.UnitName(spec.Name), units.ScopeName(spec.Name)}, brokerUnits(spec.Name)...))
	if err != nil {
		return systemdError("ListUnitsByNames", err)
	}
	var stopping []string
	for _, u := range st {
		switch {
		case u.LoadState == "not-found":
		case activeState(u) == "inactive" || u.ActiveState == "failed":
			m.forget(ctx, u.Name)
		case u.Name != units.UnitName(spec.Name) && u.Name != units.ScopeName(spec.Name):
			stopping = append(stopping, u.Name)
		default:
			return errcode.SessionExists.New("a session named %s is already %s: pick another --name, or stop it first with `mosaic stop %s`", spec.Name, activeState(u), spec.Name)
		}
	}
	// A broker still up after its session (systemd stops it as unneeded a
	// moment after) is waited for: its name would be taken when this start
	// makes its own, and a run again right after a Ctrl-C was refused as
	// "already exists".
	if len(stopping) > 0 {
		m.awaitDown(ctx, stopping)
	}
	return nil
}

// startUnit calls StartTransientUnit and waits for the job's result;
// accepted, when not nil, runs as soon as systemd has taken the unit.
func (m *Manager) startUnit(ctx context.Context, unit string, props []sd.Property, aux []sd.PropertyCollection, accepted func()) (string, error) {
	m.subscribe(ctx)
	// systemd moves a process into a cgroup for this start (a scope's
	// PIDs, a tie scope's, on 252 a service's forked child): a warm-up now
	// keeps the kernel's cheap window open for it (it lasts a grace period
	// past the last move; one made at the request's check may have passed).
	cgwarm.Warm()
	defer m.jobsOf(unit)()
	ch := make(chan string, 1)
	cctx, cancel := bounded(ctx)
	if aux == nil {
		aux = []sd.PropertyCollection{}
	}
	_, err := m.conn.StartTransientUnitAux(cctx, unit, "fail", props, aux, ch)
	cancel()
	if err != nil {
		if dbusErrorName(err) == errUnitExists {
			name, _ := units.SessionName(unit)
			if name == "" { // not a session's own unit (a tie scope): name the unit
				return "", errcode.SessionExists.New("systemd already has a unit %s: stop it first with `systemctl --user stop %s`", unit, unit)
			}
			return "", errcode.SessionExists.New("a session named %s already exists: pick another --name", name)
		}
		// systemd writes the transient unit into the runtime directory; when
		// that is full it answers as if the unit did not exist.
		if full := runtimeDirFull(); full != "" {
			return "", errcode.StateDir.New("systemd could not start %s: %s", unit, full)
		}
		return "", systemdError("StartTransientUnit", err)
	}
	if accepted != nil {
		accepted()
	}
	if name, _ := units.SessionName(unit); name != "" { // not a run's tie scope
		testhook.Pause("start-accepted")
		testLoseAtStart(m)
	}
	// systemd ends the job by TimeoutStartUSec; this bound is for the
	// announcement of its end, which a lost connection never brings.
	select {
	case r := <-ch:
		return r, nil
	case <-m.gone():
		return "", errGone("waiting for " + unit + " to start")
	case <-time.After(units.StartTimeout + callTimeout):
		name, _ := units.SessionName(unit)
		return "", errcode.SystemdTimeout.New("systemd did not say whether %s started: check `mosaic status %s`", unit, name)
	case <-ctx.Done():
		name, _ := units.SessionName(unit)
		return "", errcode.Interrupted.New("interrupted while %s was starting; it may still start: check `mosaic status %s`", unit, name)
	}
}

// runtimeDirFull says how the user's runtime directory (a small tmpfs,
// where systemd keeps transient units) is full, or "".
func runtimeDirFull() string {
	rt, err := request.RuntimeDir()
	if err != nil {
		return ""
	}
	var st unix.Statfs_t
	if unix.Statfs(rt, &st) != nil {
		return ""
	}
	switch {
	case st.Bavail == 0:
		return fmt.Sprintf("%s is full (no space left), and systemd keeps the session's unit file there: free some space in it", rt)
	case st.Files > 0 && st.Ffree == 0:
		return fmt.Sprintf("%s has no free inodes, and systemd keeps the session's unit file there: remove some files from it", rt)
	}
	return ""
}

// forget clears what systemd still holds of an ended unit.
func (m *Manager) forget(ctx context.Context, unit string) {
	cctx, cancel := bounded(ctx)
	defer cancel()
	_ = m.conn.ResetFailedUnitContext(cctx, unit)
}

func startFailure(jobResult string, s Session) string {
	var b strings.Builder
	b.WriteString("start job " + jobResult)
	if s.Result != "" && s.Result != "success" {
		b.WriteString(", unit result " + s.Result)
	}
	if s.ExitStatus != nil {
		b.WriteString(", " + s.How())
		if *s.ExitStatus == sandbox.ExitSandboxRefused {
			b.WriteString(" (the sandbox check refused to run the command)")
		}
	}
	return b.String()
}

// journalLines returns the first lines a unit logged since t, joined with
// " | ". It asks journalctl, the one reader of the journal that needs no cgo
// (go-systemd's sdjournal links libsystemd through cgo, and mosaic is a
// static binary bound into every sandbox), by the unit's SyslogIdentifier:
// journald may store the last lines of a process that died at once without
// their unit. journald may also still be writing them, so it retries briefly.
func journalLines(unit string, since time.Time) string {
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		out, _ := exec.CommandContext(ctx, "journalctl", "--user", "-t", strings.TrimSuffix(unit, units.UnitSuffix), "-o", "cat", "--no-pager",
			"--since", fmt.Sprintf("@%d", since.Unix()-1), "-n", "5").Output()
		cancel()
		if s := strings.TrimSpace(string(out)); s != "" && !strings.HasPrefix(s, "-- No entries") {
			return strings.ReplaceAll(s, "\n", " | ")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return ""
}
