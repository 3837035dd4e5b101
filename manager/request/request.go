// Package request turns a session as the caller asks for it (mosaic start's
// flags, a bus launch) into a checked units.Spec: the path policy (what a
// workspace or a bind may not expose), the network and its allowlist, the
// command's lookup, the credentials' resolution; and the machine's policy
// (policy.go) and the workspace's project file (project.go) judge the
// result. It is pure apart from reading the filesystem and the caller's
// environment, and changes nothing on disk (but `mosaic trust`'s record,
// Trust): every refusal is bad input (exit 2) or, for credentials and the
// policy, a refusal (exit 3), before anything starts.
package request

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/internal/xdg"

	"mosaic/credentials"
	"mosaic/sandbox"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// Request is a session as the caller asks for it, before any check.
type Request struct {
	Name        string   // empty: mosaic makes one
	Workspace   string   // empty: the current directory
	ExtraRO     []string // --ro
	ExtraRW     []string // --rw
	Command     []string
	Env         []string // non-secret KEY=VALUE for the unit
	Limits      units.Limits
	StopTimeout time.Duration
	Profile     string   // empty: picked from the command
	Credentials []string // --credential VAR, from the launching environment
	EnvFiles    []string // --env-file PATH
	Scope       bool     // a scope mosaic starts itself, not a service
	TTY         bool     // stdio is a pseudo-terminal mosaic made for the session
	MayLaunch   bool     // the session may ask the bus to launch others
	Network     string   // none, allow or host; empty: the profile's
	Ask         bool     // --ask: hold a connection to a host not on the list for the user's answer
	AllowHosts  []string // --allow-host, added to the profile's list
	SetEnv      []string // --env NAME=VALUE: non-secret variables
	PassEnv     []string // --pass-env NAME: non-secret, from the caller's environment
	CAFile      string   // --ca-file: a CA the agents trust besides the system's
	SignIn      bool     // --sign-in: no credential needed, the agent signs in inside
	Sandbox     string   // bwrap or landlock; empty: the profile's, else bwrap
	Publish     []string // --publish [ADDR:]HOSTPORT[:PORT]
	LendSSHKey  []string // --lend-ssh-key KEY=DEST[,DEST...]
	LendSSHSign []string // --lend-ssh-sign KEY
	LendGit     []string // --lend-git https://HOST/OWNER/REPO[=OPS]
	// NoAgent says why no ssh agent of the caller's is here to lend (a
	// launch through the bus, a command through --host), "" where it is:
	// a profile's LendSSHKey= or LendSSHSign= is refused then.
	NoAgent string
	// BuildEnv, when not nil, gives the build settings
	// (credentials.BuildSettings) instead of this process's environment:
	// a launch through the bus (credentials.Request.BuildEnv).
	BuildEnv map[string]string
	// NoGitIdentity keeps the user's git identity (gitSettings) out.
	NoGitIdentity bool
	// AllowWriteHostExec leaves the workspace's host-executed entries
	// (.git/config, .git/hooks, ...: directfloor.Entries) writable.
	AllowWriteHostExec bool
	// Mode is the workspace's mode: ModeClone (units.Clone: the session
	// works in its own copy of the workspace's repository, never in the
	// checkout), ModeDirect, or "" for the profile's, else mosaic.conf's,
	// else clone. Base, when set, is the commit (--base REF) a clone
	// starts from instead of HEAD and the working tree; it implies clone.
	Mode string
	Base string
	// Own marks a session mosaic runs for itself (the doctor's probe, a
	// clone's finish step), not one a user or the bus asks for: the
	// policy (ReadPolicy) does not judge it. Neither the flags nor a bus
	// launch can set it.
	Own bool
	// project is the workspace's ProjectFile, read by checkWords.
	project *Project
	// profileSSH names the profile whose ssh lends the request holds
	// (sshLendsAsked), for sshAgentOf's refusals.
	profileSSH string
}

// RuntimeDir returns $XDG_RUNTIME_DIR, or a refusal saying how to get one.
func RuntimeDir() (string, error) {
	rt := os.Getenv("XDG_RUNTIME_DIR")
	if rt == "" || !filepath.IsAbs(rt) {
		return "", errcode.NoUserManager.New("XDG_RUNTIME_DIR is not set, so there is no systemd user manager to reach: log in through a systemd user session (or, on a machine without systemd as PID 1, use contrib/rig.sh)")
	}
	return rt, nil
}

// Paths are the user's directories a session is placed among.
type Paths struct {
	Home       string // the user's home, resolved
	RuntimeDir string // $XDG_RUNTIME_DIR, resolved
	StateRoot  string // $XDG_STATE_HOME/mosaic, where sessions keep their state
	Config     string // $XDG_CONFIG_HOME (~/.config); "" for ~/.config
}

// UserPaths reads the user's paths from the environment.
func UserPaths() (Paths, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Paths{}, errcode.NoHome.New("cannot tell your home directory: %w (set HOME)", err)
	}
	rt, err := RuntimeDir()
	if err != nil {
		return Paths{}, err
	}
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" || !filepath.IsAbs(state) {
		state = filepath.Join(home, ".local", "state")
	}
	cfg := xdg.ConfigHome(home, os.Getenv)
	p := Paths{Home: Resolve(home), RuntimeDir: Resolve(rt), StateRoot: filepath.Join(Resolve(state), "mosaic"), Config: Resolve(cfg)}
	return p, nil
}

// Resolve returns path with its symlinks resolved where it exists.
func Resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// EgressDir is where the egress proxy of session name puts its socket.
func (p Paths) EgressDir(name string) string {
	return filepath.Join(p.RuntimeDir, "mosaic", "egress", name)
}

// BusSocket is the bus's socket for the user.
func (p Paths) BusSocket() string { return filepath.Join(p.RuntimeDir, "mosaic", "bus.sock") }

// BusDir is the directory bound into --may-launch sessions; it holds the
// bus's second socket, sandbox.BusSocketName.
func (p Paths) BusDir() string { return filepath.Join(p.RuntimeDir, "mosaic", "bus") }

// StageCacheFile is where the last check of the stage binary that passed
// is kept between starts (manager/stagebin).
func (p Paths) StageCacheFile() string {
	return filepath.Join(p.RuntimeDir, "mosaic", "stage-checked")
}

// SessionDir is the state directory of session name.
func (p Paths) SessionDir(name string) string {
	return filepath.Join(p.StateRoot, "sessions", name)
}

// Prepare checks a request and resolves it into a spec and the session's
// secrets, which are kept out of the spec. Its errors are bad input (exit 2)
// or, for credentials and the policy, refusals (exit 3); it changes
// nothing on disk.
// The mosaic binary and the host's facts are filled in by the plan
// (manager.NewPlan).
func Prepare(req Request, p Paths, bwrapBin string) (units.Spec, []credvar.Var, error) {
	spec, grant, err := prepare(req, p, bwrapBin)
	if err != nil {
		return units.Spec{}, nil, err
	}
	return spec, grant.Secrets, nil
}

// prepare is Prepare with the session's grant whole: the request checked
// (checkRequest), its spec made (spec) and finished (finishSpec).
func prepare(req Request, p Paths, bwrapBin string) (units.Spec, credentials.Grant, error) {
	c, err := checkRequest(req, p)
	if err != nil {
		return units.Spec{}, credentials.Grant{}, err
	}
	spec := c.spec(p, bwrapBin)
	if err := finishSpec(&spec, c.req, &c.grant, p, c.gitConfig, c.pol, c.asked); err != nil {
		return units.Spec{}, credentials.Grant{}, err
	}
	return spec, c.grant, nil
}

// checkedRequest is a request as its checks left it: every path resolved
// and pinned, the credentials granted, the limits, the network, the inner
// layer and the command settled. A session's spec is made of it.
type checkedRequest struct {
	req       Request // with the profile's command when it named none
	ws        checked
	ro, rw    []checked // ro with the command's files, the --ca-file and the toolchains
	toolPath  userPath  // the session's PATH (pathOf)
	grant     credentials.Grant
	pol       Policy
	asked     Asked
	gitConfig func() []byte // the user's git settings, read meanwhile (startUserGitConfig)
	limits    units.Limits
	slice     units.Limits
	caFile    string // the --ca-file's real path, "" for none
	caBundle  string // its bundle's path (caFile)
	network   string
	allow     []string
	mode      string // the inner layer (sandboxOf)
	name      string
	command   []string
	binary    string
}

// checkRequest checks a request, in the order its refusals are reported:
// what the caller said (checkWords), the credentials and the command they
// may name, the --ro paths, the limits, the profile's syscalls, the
// --ca-file, the network, the inner layer, /tmp's privacy, the command's
// binary; and works out the session's PATH. It writes nothing; the user's
// git settings are read in the background meanwhile.
func checkRequest(req Request, p Paths) (checkedRequest, error) {
	deny, wsc, rw, pol, err := checkWords(&req, p)
	if err != nil {
		return checkedRequest{}, err
	}
	c := checkedRequest{ws: wsc, rw: rw, pol: pol}
	c.gitConfig = startUserGitConfig(req.NoGitIdentity, p.GitCacheFile()) // git runs while the rest is checked
	// Then the credentials, whose profile may also name the command.
	c.grant, err = credentials.Resolve(credentials.Request{
		Profile: req.Profile, Credentials: req.Credentials, EnvFiles: req.EnvFiles,
		ProfileDir: credentials.ProfileDir(p.Home), Command: req.Command,
		Env: req.SetEnv, PassEnv: req.PassEnv, SignIn: req.SignIn, BuildEnv: req.BuildEnv,
	})
	if err != nil {
		return checkedRequest{}, err
	}
	if len(req.Command) == 0 && c.grant.Profile.Binary != "" {
		req.Command = []string{c.grant.Profile.Binary}
	}
	if len(req.Command) == 0 || req.Command[0] == "" {
		return checkedRequest{}, errcode.NoCommand.New("no command given: put it after --, e.g. mosaic start --workspace . -- claude")
	}
	if c.ro, err = checkExtra("ro", append(append([]string{}, req.ExtraRO...), c.grant.Profile.ReadOnly...), deny); err != nil {
		return checkedRequest{}, err
	}
	c.asked = Asked{RO: realPaths(c.ro), RW: realPaths(rw), NetworkFrom: networkFrom(req, c.grant.Profile)}
	if c.limits, c.slice, err = limitsOf(req, c.grant.Profile, p, pol); err != nil {
		return checkedRequest{}, err
	}
	if err := sandbox.CheckSeccompAllow(c.grant.Profile.SeccompAllow); err != nil {
		return checkedRequest{}, errcode.BadProfile.New("profile %s: %w", c.grant.Profile.Source, err)
	}
	ca, caBundle, err := caFile(req.CAFile, deny, filepath.Join(p.RuntimeDir, "mosaic", "ca"))
	if err != nil {
		return checkedRequest{}, err
	}
	if c.network, c.allow, err = networkFor(req, &c.grant, pol); err != nil {
		return checkedRequest{}, err
	}
	if c.mode, err = sandboxOf(req, c.grant.Profile); err != nil {
		return checkedRequest{}, err
	}
	if ca != nil {
		c.caFile, c.caBundle = ca.real, caBundle
	}
	c.ro = trustCA(c.ro, ca, caBundle, c.mode, &c.grant)
	c.name = nameOf(req)
	if err := notPrivateTmp(wsc.real, realPaths(rw), realPaths(c.ro)); err != nil {
		return checkedRequest{}, err
	}
	var interpDirs []string
	if c.command, c.binary, c.ro, interpDirs, err = commandOf(req, &c.grant, wsc.real, deny, c.ro); err != nil {
		return checkedRequest{}, err
	}
	c.toolPath = pathOf(&c.grant, interpDirs, p, c.name, wsc.real, c.ro, rw, deny)
	c.ro = append(c.ro, c.toolPath.Binds...)
	c.req = req
	return c, nil
}

// spec is the session's spec as its checked request makes it, before
// finishSpec adds what follows from its mode, profile and secrets.
func (c checkedRequest) spec(p Paths, bwrapBin string) units.Spec {
	return units.Spec{
		Name:        c.name,
		NameGiven:   c.req.Name != "",
		Command:     c.command,
		Binary:      c.binary,
		Workspace:   c.ws.real,
		GivenAs:     c.ws.givenAs,
		Home:        p.Home,
		RuntimeDir:  p.RuntimeDir,
		StateDir:    p.SessionDir(c.name),
		BwrapBin:    bwrapBin,
		ExtraRO:     realPaths(c.ro),
		ExtraRW:     realPaths(c.rw),
		BindIDs:     bindIDs(append(append([]checked{c.ws}, c.rw...), c.ro...)),
		Env:         append(append([]string{}, c.req.Env...), c.grant.PassEnv...),
		Pass:        varNames(c.grant.PassEnv),
		Credentials: c.grant.Names(),
		Profile:     c.grant.Profile.Name,
		Limits:      c.limits,
		SliceLimits: c.slice,
		StopTimeout: c.req.StopTimeout,
		Scope:       c.req.Scope,
		TTY:         c.req.TTY,
		MayLaunch:   c.req.MayLaunch,
		BusDir:      p.BusDir(),
		Network:     c.network,
		Allow:       c.allow,
		EgressDir:   p.EgressDir(c.name),
		Notes:       c.grant.Notes,
		Sandbox:     c.mode,
		Toolchains:  realPaths(c.toolPath.Binds),
		PathDropped: c.toolPath.Dropped,
		EnvDropped:  c.grant.Dropped,
		CAFile:      c.caFile,
		CABundle:    c.caBundle,
	}
}

// AskHold is how long --ask holds a connection for the user's answer:
// long enough to read a line and type one, short of most clients' own
// timeouts (git's, npm's and curl's connect wait longer).
const AskHold = 30 * time.Second

// nameOf is the session's name: the request's, else one made from its
// command.
func nameOf(req Request) string {
	if req.Name != "" {
		return req.Name
	}
	return units.GenerateName(req.Command)
}

// varNames are the names of NAME=VALUE entries.
func varNames(env []string) []string {
	var names []string
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		names = append(names, n)
	}
	return names
}

// checkWords checks what the caller said, first: it is wrong whatever
// the host holds (a name, the workspace and the --rw paths against the
// deny-list, the environment's entries); and reads the policy the session
// will be judged by once it is known (Policy.Check), unless it is mosaic's
// own.
func checkWords(req *Request, p Paths) ([]Deny, checked, []checked, Policy, error) {
	var pol Policy
	if req.Name != "" {
		if err := units.ValidateName(req.Name); err != nil {
			return nil, checked{}, nil, pol, err
		}
	}
	if !req.Own {
		var err error
		if pol, err = ReadPolicy(); err != nil {
			return nil, checked{}, nil, pol, err
		}
	}
	ws := req.Workspace
	if ws == "" {
		ws = "."
	}
	deny, err := DenyList(p)
	if err != nil {
		return nil, checked{}, nil, pol, err
	}
	wsc, err := checkWorkspace(ws, deny)
	if err != nil {
		return nil, checked{}, nil, pol, err
	}
	if !req.Own { // the project's rules are judged with the policy's
		if req.project, err = ReadProject(wsc.real, p); err != nil {
			return nil, checked{}, nil, pol, err
		} else if req.project != nil {
			pol.Rules = append(pol.Rules, req.project.Rules...)
		}
	}
	rw, err := checkExtra("rw", req.ExtraRW, deny)
	if err != nil {
		return nil, checked{}, nil, pol, err
	}
	for _, kv := range req.Env {
		if strings.ContainsAny(kv, "\n\x00") || !strings.Contains(kv, "=") {
			return nil, checked{}, nil, pol, errcode.BadEnv.New("environment entry %q cannot be passed to a unit", kv)
		}
	}
	return deny, wsc, rw, pol, nil
}

// networkFor is the session's network and allowlist (networkOf); a host
// loopback port among them is reached through the proxy, so the agents
// must not take localhost for their own (NO_PROXY, into grant). A default
// that reaches nothing yet, under a machine policy that allows no egress
// proxy, is none rather than a refusal: nothing was asked for.
func networkFor(req Request, grant *credentials.Grant, pol Policy) (string, []string, error) {
	network, allow, err := networkOf(req, grant.Profile, grant.Allow)
	if err != nil {
		return "", nil, err
	}
	if network == sandbox.NetworkAllow && len(allow) == 0 && req.Network == "" && !pol.AllowsNetwork(network) {
		return sandbox.NetworkNone, nil, nil
	}
	if egress.HasLocal(allow) && !hasVar(grant.PassEnv, "NO_PROXY") {
		grant.PassEnv = append(grant.PassEnv, "NO_PROXY=", "no_proxy=")
	}
	return network, allow, nil
}

// commandOf resolves the request's command in the workspace real: a
// directory is refused; the profile's arguments go first; a binary of a
// per-user install brings the files it needs (read-only, checked and
// pinned like every bind, added to ro) and the directories of the
// interpreters it runs, for the session's PATH (pathOf).
func commandOf(req Request, grant *credentials.Grant, real string, deny []Deny, ro []checked) (command []string, binary string, _ []checked, interpDirs []string, _ error) {
	if dir := commandDir(req.Command[0], real); dir != "" {
		return nil, "", nil, nil, errcode.BadCommand.New("the command %s is a directory (%s), not a program: name the program to run after --", req.Command[0], dir)
	}
	command, binary = resolveCommand(req.Command, real)
	if len(grant.Args) > 0 {
		command = append(append([]string{command[0]}, grant.Args...), command[1:]...)
	}
	if binary != "" {
		more, prefix, dirs := perUserInstall(binary)
		// Checked and pinned by identity like every other bind.
		moreRO, err := checkExtra("ro", more, deny)
		if err != nil {
			return nil, "", nil, nil, err
		}
		ro = append(ro, moreRO...)
		if prefix != "" {
			c, err := checkPath(prefix, "ro", errcode.BadBind, deny)
			if err != nil {
				return nil, "", nil, nil, err
			}
			binds, _ := hidePrefixSecrets(c, nil, deny)
			ro = append(ro, binds...)
		}
		interpDirs = dirs
	}
	return command, binary, ro, interpDirs, nil
}

// finishSpec adds to a spec what follows from its mode, profile and
// secrets: no bwrap for landlock, the copy of a clone-mode session, the bus's variable for --may-launch, the
// egress proxy's injection, the credential file, one entry per variable;
// and the user's git settings, which gitConfig waits for. Then the
// policy judges the spec whole (what the flags, the profile, mosaic.conf
// and the defaults made of it, with the binds asked for).
func finishSpec(spec *units.Spec, req Request, grant *credentials.Grant, p Paths, gitConfig func() []byte, pol Policy, asked Asked) error {
	published, err := publishOf(req, spec.Network, spec.Sandbox)
	if err != nil {
		return err
	}
	spec.Publish = published
	if spec.Sandbox == sandbox.ModeLandlock {
		spec.BwrapBin = ""
	}
	// The network device is made by a service's exec shim (a scope has
	// none: mosaic runs its bwrap itself) with its unit's capabilities.
	spec.TUN = spec.Network == sandbox.NetworkAllow && spec.Sandbox != sandbox.ModeLandlock && !spec.Scope && sandbox.TUNUsable()
	if req.Ask || grant.Profile.Ask && spec.Network == sandbox.NetworkAllow {
		if spec.Network != sandbox.NetworkAllow {
			return errcode.BadNetwork.New("--ask needs network allow (an egress proxy to hold the connection), not %s", spec.Network)
		}
		spec.Ask = AskHold
	}
	if clone, err := cloneMode(req, grant.Profile, p); err != nil {
		return err
	} else if clone {
		if spec.Clone, err = cloneOf(req, spec, p); err != nil {
			return err
		}
		if err := bindsBesideCopy(*spec, asked); err != nil {
			return err
		}
	}
	spec.SeccompAllow = grant.Profile.SeccompAllow
	spec.AllowWriteHostExec = req.AllowWriteHostExec
	if !req.NoGitIdentity {
		spec.GitConfig = gitConfigFor(gitConfig())
	}
	if err := sshAgentOf(spec, sshLendsAsked(req, lendingProfile(req, grant.Profile)), p, os.Getenv("SSH_AUTH_SOCK")); err != nil {
		return err
	}
	if err := gitLendOf(spec, req, grant); err != nil {
		return err
	}
	if req.MayLaunch {
		spec.Env = append(spec.Env, sandbox.BusEnv+"="+sandbox.BusSocketInside)
		spec.Pass = append(spec.Pass, sandbox.BusEnv)
	}
	if err := planInjection(spec, *grant, p); err != nil {
		return err
	}
	// systemd refuses an environment that names a variable twice ("Invalid
	// environment block"): the later entry wins, as in a shell (a --env
	// over the caller's own, the proxy's CA variables over a --ca-file's).
	spec.Env = lastWins(spec.Env)
	if n := req.project.note(); n != "" {
		spec.Notes = append(spec.Notes, n)
	}
	if spec.Sandbox != sandbox.ModeLandlock && !req.Own {
		spec.ToolCache = p.ToolCacheDir(spec.Workspace, powers(*spec))
	}
	asked.Spec = *spec
	return pol.Check(asked)
}

// lastWins keeps, of the entries naming one variable, the last, in the
// place of the first.
func lastWins(env []string) []string {
	last := map[string]string{}
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		last[n] = kv
	}
	out := make([]string, 0, len(last))
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		if v, ok := last[n]; ok {
			out = append(out, v)
			delete(last, n)
		}
	}
	return out
}

// DefaultLimits are the limits a session of profile gets when its request
// names none: the profile's, the user's config, mosaic's defaults.
func DefaultLimits(profile credentials.Profile, p Paths) (units.Limits, error) {
	pol, err := ReadPolicy()
	if err != nil {
		return units.Limits{}, err
	}
	l, _, err := limitsOf(Request{}, profile, p, pol)
	return l, err
}

// limitsOf decides the session's limits, each from the first that sets it:
// the request (flags), a trusted project file's asks, the profile, the user's mosaic.conf, the built-in
// defaults lowered to the policy's ceilings (which judges the others:
// Policy.Check); and mosaic.slice's, from mosaic.conf and the defaults.
func limitsOf(req Request, profile credentials.Profile, p Paths, pol Policy) (session, slice units.Limits, err error) {
	fromProfile, err := units.LimitStrings{MemoryMax: profile.MemoryMax, TasksMax: profile.TasksMax, CPUQuota: profile.CPUQuota, TmpSize: profile.TmpSize, HomeSize: profile.HomeSize}.Parse()
	if err != nil {
		return session, slice, errcode.BadProfile.New("profile %s: %w", profile.Name, err)
	}
	cfg, err := ReadConfig(p)
	if err != nil {
		return session, slice, err
	}
	host := units.ThisHost()
	asked := req.Limits.Or(req.project.askedLimits()) // a trusted project's asks, where no flag says
	return asked.Or(fromProfile).Or(cfg.Session).Or(pol.LowerDefaults(units.SessionDefaults(host))), cfg.Slice.Or(units.SliceDefaults(host)), nil
}

// networkOf decides the session's network: --network, else the profile's
// (--allow-host alone turns none into allow, as a trusted project file's
// ask-allow-host does); the allowlist is the profile's plus --allow-host
// plus the project's, checked and normalized (a --network none or host
// given takes none of the project's).
func networkOf(req Request, profile credentials.Profile, endpoints []string) (string, []string, error) {
	network := req.Network
	if network != "" && !sandbox.ValidNetwork(network) {
		return "", nil, errcode.BadNetwork.New("--network %s: use none (loopback only), allow (through the egress proxy to --allow-host names) or host (not confined)", network)
	}
	projectHosts := req.project.askedWords("ask-allow-host")
	if network == "" {
		network = profile.Network
		if network == "" {
			network = sandbox.NetworkAllow // nothing allowed yet, but grantable
		}
		if network == sandbox.NetworkNone && len(req.AllowHosts)+len(projectHosts) > 0 {
			network = sandbox.NetworkAllow
		}
	}
	if network != sandbox.NetworkAllow {
		if len(req.AllowHosts) > 0 {
			return "", nil, errcode.BadAllowHost.New("--allow-host needs --network allow, not %s", network)
		}
		return network, nil, nil
	}
	var entries []string
	for _, h := range profile.AllowHosts {
		if _, err := egress.ParseAllow([]string{h}); err != nil {
			return "", nil, errcode.BadProfile.New("profile %s: AllowHost %w", profile.Name, err)
		}
		entries = append(entries, h)
	}
	for _, h := range append(append([]string{}, req.AllowHosts...), projectHosts...) {
		h, err := hostOfURL(h)
		if err != nil {
			return "", nil, errcode.BadAllowHost.New("--allow-host %w", err)
		}
		if _, err := egress.ParseAllow([]string{h}); err != nil {
			return "", nil, errcode.BadAllowHost.New("--allow-host %w", err)
		}
		entries = append(entries, h)
	}
	for _, h := range endpoints { // a custom base URL's host
		if _, err := egress.ParseAllow([]string{h}); err != nil {
			return "", nil, errcode.BadEnv.New("the endpoint %w", err)
		}
		entries = append(entries, h)
	}
	a, _ := egress.ParseAllow(entries)
	return network, a.Strings(), nil
}

// networkFrom says where a session's network comes from, for a policy's
// refusal: the flags, else the profile.
func networkFrom(req Request, profile credentials.Profile) string {
	switch {
	case req.Network != "":
		return "--network " + req.Network
	case profile.Network != "":
		return "the profile " + profile.Name + "'s Network=" + profile.Network
	case len(req.AllowHosts) > 0:
		return "--allow-host"
	case len(req.project.askedWords("ask-allow-host")) > 0:
		return "the project file's ask-allow-host"
	}
	return "the default"
}

// hostOfURL takes an --allow-host entry given as a URL, as users copy them
// from an agent's settings ("https://api.example.com/v1"), as the host and
// port it names; any other entry is returned as it is.
func hostOfURL(e string) (string, error) {
	if !strings.Contains(e, "://") {
		return e, nil
	}
	u, err := url.Parse(e)
	if err != nil || u.Hostname() == "" || u.User != nil {
		return "", fmt.Errorf("%q is not a host or a URL of one", e)
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https", "wss":
			port = "443"
		case "http", "ws":
			port = "80"
		default:
			return "", fmt.Errorf("%q: scheme %s has no known port: give HOST:PORT", e, u.Scheme)
		}
	}
	return net.JoinHostPort(u.Hostname(), port), nil
}

// systemDirs are where a command is found inside every sandbox.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64"}

// notPrivateTmp refuses /tmp and /var/tmp themselves as the workspace or a
// bind: a session's are its own (systemd's PrivateTmp=, bwrap's /tmp), and
// binding the host's over them fails late, as "PrivateTmp failed open".
func notPrivateTmp(workspace string, rw, ro []string) error {
	private := func(p string) bool { return p == "/tmp" || p == "/var/tmp" }
	if private(workspace) {
		return errcode.BadWorkspace.New("the workspace %s is where the session's own temporary directory goes: use a directory under it, e.g. %s/work", workspace, workspace)
	}
	for _, p := range append(append([]string{}, rw...), ro...) {
		if private(p) {
			return errcode.BadBind.New("%s is where the session's own temporary directory goes, so it cannot be bound: bind a directory under it", p)
		}
	}
	return nil
}

// commandDir is the directory a command path names, or "": a directory as
// the command otherwise fails late, with a reason that misleads (systemd's
// own bind of it as the binary collides with /tmp or / itself).
func commandDir(name, workspace string) string {
	if !strings.Contains(name, "/") {
		return "" // found on PATH, where only files are taken
	}
	path := name
	if !filepath.IsAbs(path) {
		path = filepath.Join(workspace, path)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return path
	}
	return ""
}

// resolveCommand finds the command's binary on the caller's PATH. One that
// lives outside the system directories (a per-user install such as
// ~/.local/bin/claude) would not be found inside, so its real file is bound
// read-only and run by that path; binary is that file, or "".
func resolveCommand(command []string, workspace string) (resolved []string, binary string) {
	name := command[0]
	path := name
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			return command, "" // the init says it is not found, from inside
		}
		path = p
	} else if !filepath.IsAbs(name) {
		return command, "" // relative to the workspace, which is bound
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return command, ""
	}
	if sandbox.Within(real, workspace) {
		return command, ""
	}
	for _, d := range systemDirs {
		if sandbox.Within(real, d) {
			return command, ""
		}
	}
	out := append([]string{real}, command[1:]...)
	return out, real
}

// checkWorkspace resolves the workspace and refuses the ones that would
// expose what a session must not see.
func checkWorkspace(ws string, deny []Deny) (checked, error) {
	c, err := checkPath(ws, "workspace", errcode.BadWorkspace, deny)
	if err != nil {
		return c, err
	}
	if !c.dir {
		return c, errcode.BadWorkspace.New("workspace %s is not a directory: pass a directory with --workspace", c.real)
	}
	return c, nil
}

// checkExtra resolves --ro/--rw paths and refuses the ones that would undo the
// sandbox.
func checkExtra(flag string, paths []string, deny []Deny) ([]checked, error) {
	var out []checked
	for _, path := range paths {
		c, err := checkPath(path, "--"+flag, errcode.BadBind, deny)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// sandboxOf decides the session's inner layer: --sandbox, else the
// profile's, else bwrap. landlock is only ever what was asked for, and
// needs a service (a scope has no systemd layer to hide the home and the
// runtime dir).
func sandboxOf(req Request, profile credentials.Profile) (string, error) {
	mode := req.Sandbox
	if mode == "" {
		mode = profile.Sandbox
	}
	if mode == "" {
		return sandbox.ModeBwrap, nil
	}
	if !sandbox.ValidMode(mode) {
		return "", errcode.BadSandbox.New("--sandbox %s: use bwrap (the default: namespaces of its own) or landlock (for hosts where bwrap cannot run; see `mosaic doctor`)", mode)
	}
	if mode == sandbox.ModeLandlock && req.Scope {
		return "", errcode.BadSandbox.New("--sandbox landlock needs a service, not --scope: systemd's layer is what hides your home and its runtime directory there")
	}
	if mode == sandbox.ModeLandlock && req.MayLaunch {
		return "", errcode.BadSandbox.New("--sandbox landlock does not support --may-launch yet: use --sandbox bwrap")
	}
	return mode, nil
}

func realPaths(cs []checked) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.real)
	}
	return out
}

func bindIDs(cs []checked) []sandbox.BindID {
	out := make([]sandbox.BindID, 0, len(cs))
	for _, c := range cs {
		out = append(out, sandbox.BindID{Path: c.real, ID: c.id})
	}
	return out
}
