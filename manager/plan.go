package manager

import (
	"context"
	"os"
	"path/filepath"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/manager/cgwarm"
	"mosaic/manager/request"
	"mosaic/manager/stagebin"
	"mosaic/sandbox"
	"mosaic/sandbox/directfloor"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Plan is one session ready to start: its spec, complete (every path
// checked and resolved, the host's facts its sandbox is checked against,
// the workspace's host-executed entries protected), and its secrets, kept
// apart from the spec, which never holds a value. NewPlan makes it;
// (*Manager).Start and Run, and (*Connecting).RunScope, start it.
type Plan struct {
	Spec    units.Spec
	Secrets []credvar.Var
}

// Host is what a plan is made against besides its request: facts of this
// host and process, none of which needs systemd.
type Host struct {
	Paths request.Paths
	// Bwrap is the bwrap binary; BwrapErr says why there is none.
	Bwrap    string
	BwrapErr error
	// MosaicBin is the mosaic binary sessions' broker units run.
	MosaicBin string
	// StageBin is the stage binary beside it (stagebin.Find), which runs
	// sessions' exec shim, init and session-ended stage;
	// StageErr says why there is none that may be used.
	StageBin string
	StageErr error
	// ownBuild: MosaicBin is this process's binary, whose build
	// information is Ours (not read from its file).
	ownBuild bool
	// StageKeep keeps the stage binary's check for later starts
	// (stagebin.Find); NewPlan calls it once the request is good.
	StageKeep func()
	// Outside, when set, is what sessions' sandbox checks compare against
	// instead of this process's own namespaces and /tmp (a confined bus).
	Outside *sandbox.Outside
}

// ThisHost reads the host's facts as this process sees them.
func ThisHost() (Host, error) {
	paths, err := request.UserPaths()
	if err != nil {
		return Host{}, err
	}
	return hostWith(paths), nil
}

// hostWith is ThisHost with the user's paths already read.
func hostWith(paths request.Paths) Host {
	bwrap, bwrapErr := sandbox.FindBwrap()
	h := Host{Paths: paths, Bwrap: bwrap, BwrapErr: bwrapErr, MosaicBin: executable(), ownBuild: true}
	h.StageBin, h.StageKeep, h.StageErr = stagebin.Find(h.MosaicBin, stagebin.Ours(), paths.StageCacheFile())
	return h
}

// Net is mosaic-net beside MosaicBin when it is of its build
// (stagebin.FindNet), else why not: read only for a session that wants
// the network device (0.2 ms), and by doctor.
func (h Host) Net() (string, error) {
	ours := stagebin.Ours()
	if !h.ownBuild {
		ours = stagebin.Of(h.MosaicBin)
	}
	return stagebin.FindNet(h.MosaicBin, ours)
}

// NewPlan is the one step from a request to a plan: the request checked
// (request.Prepare; bad input is reported before anything about the host),
// a sandbox the host can build for it, and the spec completed with the
// host's facts (complete). It starts nothing and talks to no one, and
// nothing changes the plan after: what a start makes for it is its launch
// (units.Launch), and the manager it is started on renders the two with
// what it alone knows (units.Render: the promise's PrivatePIDs).
func NewPlan(req request.Request, h Host) (Plan, error) {
	plan, err := newPlan(req, h, nil)
	if err == nil {
		testPauseAfterCheck()
	}
	return plan, err
}

// newPlan is NewPlan with edit, when not nil, applied to the checked spec
// before the host's facts complete it: how the finish step's plan
// (finishPlan) is the session's request under a name and a copy of its
// own, made the one way all the same.
func newPlan(req request.Request, h Host, edit func(*units.Spec) error) (Plan, error) {
	spec, secrets, err := request.Prepare(req, h.Paths, h.Bwrap)
	if err != nil {
		return Plan{}, err
	}
	if edit != nil {
		if err := edit(&spec); err != nil {
			return Plan{}, err
		}
	}
	if err := sandboxAvailable(spec, h); err != nil {
		return Plan{}, err
	}
	if err := complete(&spec, h); err != nil {
		return Plan{}, err
	}
	if h.StageKeep != nil {
		h.StageKeep() // the request is good: only now is anything written
	}
	return Plan{Spec: spec, Secrets: secrets}, nil
}

// Plan is NewPlan on this host, for sessions started through this
// manager (its MosaicBin and Outside): for a caller that starts several
// sessions on one connection (the bus, the probe, the bench).
func (m *Manager) Plan(req request.Request) (Plan, error) {
	cgwarm.Warm() // as in Open: the bus's launch checks its request meanwhile
	h, err := m.planHost()
	if err != nil {
		return Plan{}, err
	}
	return NewPlan(req, h)
}

// planHost is the host this manager's plans are made against.
func (m *Manager) planHost() (Host, error) {
	if m.host != nil {
		return *m.host, nil
	}
	return hostFor(m.opts)
}

// hostFor is ThisHost as a manager of opts sees it: a binary under test
// (the bench's MosaicBin) with a stage binary of its own build, and a
// confined bus's Outside.
func hostFor(opts Options) (Host, error) {
	paths, err := optionPaths(opts)
	if err != nil {
		return Host{}, err
	}
	h := hostWith(paths)
	if opts.MosaicBin != "" && opts.MosaicBin != h.MosaicBin { // a binary under test (the bench): its own pair
		h.StageBin, h.StageKeep, h.StageErr = stagebin.Find(opts.MosaicBin, stagebin.Of(opts.MosaicBin), h.Paths.StageCacheFile())
		h.MosaicBin, h.ownBuild = opts.MosaicBin, false
	}
	h.Outside = opts.Outside
	return h, nil
}

// sandboxAvailable is the refusal of a session whose inner layer this host
// cannot give it, or nil: no stage binary of this mosaic's build; no bwrap (a --sandbox landlock session needs
// none, but a kernel with the Landlock it needs). Whether bwrap can build
// a sandbox here is the probe's to say (Open).
func sandboxAvailable(spec units.Spec, h Host) error {
	if h.StageErr != nil {
		return h.StageErr
	}
	if spec.Landlock() {
		if abi := sandbox.LandlockABI(); abi < sandbox.LandlockMinABI {
			return errcode.SandboxUnavailable.New("--sandbox landlock needs Landlock ABI %d (Linux 6.12+, landlock in the lsm= boot list); this kernel offers %d, so nothing was started", sandbox.LandlockMinABI, abi)
		}
		return nil
	}
	if h.BwrapErr != nil {
		return noSandbox(h.BwrapErr, "")
	}
	return nil
}

// noSandbox is the refusal of a session no sandbox can be built for,
// keeping why (cause); hint, when not "", says where to look.
func noSandbox(cause error, hint string) error {
	if hint != "" {
		return errcode.SandboxUnavailable.New("no sandbox can be built, so nothing was started: %w (%s)", cause, hint)
	}
	return errcode.SandboxUnavailable.New("no sandbox can be built, so nothing was started: %w", cause)
}

// complete fills in what the host knows of a checked spec: the mosaic
// binary and the stage binary the units run, and the host's facts the sandbox is checked
// against (the promise); and, the request known to be good, protects the
// workspace's host-executed entries (which may make placeholders on disk).
func complete(spec *units.Spec, h Host) error {
	spec.MosaicBin, spec.StageBin = h.MosaicBin, h.StageBin
	if spec.TUN {
		spec.NetBin, _ = h.Net()
		spec.TUN = spec.NetBin != "" // without mosaic-net, the proxy-aware path alone
	}
	spec.ExtraRO = append(spec.ExtraRO, testExtraRO()...)
	if spec.CABundle != "" { // bound into the session: written before it starts
		ca, err := os.ReadFile(spec.CAFile)
		if err == nil {
			err = egress.WriteBundle(spec.CABundle, egress.Bundle(ca))
		}
		if err != nil {
			return errcode.BadBind.New("--ca-file %s: cannot write its bundle with the system's roots: %w", spec.CAFile, err)
		}
	}
	if !spec.Landlock() { // (in Landlock, root's files are root's)
		dir := filepath.Join(spec.RuntimeDir, "mosaic", "ssh-config")
		var err error
		if spec.SSHConfig, err = sandbox.SSHConfigCopy(sandbox.SSHConfigDirHost, dir, os.Getuid()); err != nil {
			return errcode.StateDir.New("cannot copy %s for the session's ssh: %w", sandbox.SSHConfigDirHost, err)
		}
	}
	if !spec.AllowWriteHostExec && spec.Clone == nil { // a copy's files are never run by the host
		protect, ids, err := directfloor.Protect(spec.Workspace, h.Paths.Home)
		if err != nil {
			return errcode.BadWorkspace.New("workspace %s: %w", spec.Workspace, err)
		}
		spec.OwnGitDir = ""
		if !spec.Landlock() { // (no bwrap to cover the placeholder with)
			own := filepath.Join(spec.StateDir, "git")
			var ok bool
			if protect, ids, ok = directfloor.OwnGitDir(spec.Workspace, own, protect, ids); ok {
				spec.OwnGitDir = own
			}
		}
		spec.Protect = protect
		spec.BindIDs = append(spec.BindIDs, ids...)
	}
	if err := checkPublish(*spec); err != nil {
		return err
	}
	// PIDs is the start's to say (see start): the plan needs no manager.
	p := sandbox.HostPromise(h.Paths.Home, h.Paths.RuntimeDir, false)
	if h.Outside != nil {
		p.Apply(*h.Outside)
	}
	if spec.Scope && !testNoScopePromise() {
		p.Scope = scopeCgroup(*spec)
	}
	p.Net = spec.OwnNetwork()
	p.Binds = spec.BindIDs
	if testSkipBindIdentity() {
		p.Binds = nil
	}
	spec.Promise = p
	return nil
}

// scopeCgroup is the end of the cgroup path a scope session's init must
// be in.
func scopeCgroup(spec units.Spec) string { return "/" + units.Slice + "/" + spec.Unit() }

// Open checks a request and plans its session (NewPlan) while the
// connection to systemd is made (Connecting) and, for bwrap, the host is
// probed: the connection's round trips are waits, the check is work. Bad
// input is still reported first, and changes nothing (the credential sweep
// waits for a good request). A service's connection is there when Open
// returns; a scope run's may still be being made (RunScope waits for it
// only where it must). The caller closes what Open returns.
func Open(ctx context.Context, req request.Request, opts Options) (*Connecting, Plan, error) {
	// The kernel's wait before systemd's first cgroup move of this start
	// (the tie scope's, the scope's) passes while the request is checked.
	cgwarm.Warm()
	h, err := hostFor(opts)
	if err != nil {
		return nil, Plan{}, err
	}
	c := connectInBackground(ctx, opts, h.Paths)
	plan, err := NewPlan(req, h)
	if err != nil {
		c.Close()
		return nil, Plan{}, err
	}
	mark(ctx, "check request")
	probe := make(chan error, 1)
	if plan.Spec.Landlock() {
		probe <- nil // no bwrap to probe
	} else {
		go func() { probe <- sandbox.ProbeCached(ctx, h.Bwrap, filepath.Join(h.Paths.RuntimeDir, "mosaic")) }()
	}
	if !plan.Spec.Scope {
		// A service needs the connection to start: a failure to connect
		// is said before the probe's.
		if _, err := c.Manager(ctx); err != nil {
			<-probe // it may be writing its cache
			c.Close()
			return nil, Plan{}, err
		}
		mark(ctx, "connect, read version (overlap)")
	}
	if perr := <-probe; perr != nil {
		c.Close()
		return nil, Plan{}, noSandbox(perr, "run `mosaic doctor` for the host's namespace settings")
	}
	if !plan.Spec.Landlock() {
		mark(ctx, "bwrap probe (overlap)")
	}
	return c, plan, nil
}
