package bus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"mosaic/credentials"
	"mosaic/internal/errcode"
	"mosaic/internal/journald"
	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

// launch starts a session for the caller; one from a session is held to
// the policy first. Only the check of capacity and the reservation hold the
// lock, not the start (which may take up to systemd's start timeout): a
// slow launch delays no other. The launch log gets the intent before the
// start and the launch after it, so a bus that dies meanwhile still learns,
// when it starts again, of every session it started.
func (b *bus) launch(ctx context.Context, who caller, req Request) (any, error) {
	r, err := requestOf(req)
	if err != nil {
		return nil, err
	}
	if err := launchLends(who, req); err != nil {
		return nil, err
	}
	r.BuildEnv = launchBuildEnv(who, req)
	var policy Policy
	if who.session != "" {
		if policy, err = b.checkSessionLaunch(who, &r); err != nil {
			return nil, err
		}
	}
	if r.Name == "" {
		// A fresh name, known before the start so the intent can name it.
		r.Name = units.GenerateName(r.Command)
	}
	if who.session != "" {
		// What ended unseen no longer counts against the capacity.
		b.mu.Lock()
		seq := b.seq
		b.mu.Unlock()
		list, err := b.m.ListInvocations(ctx)
		if err != nil {
			return nil, err
		}
		b.pruneChildren(list, seq)
	}
	release, err := b.reserve(who, r, policy)
	if err != nil {
		return nil, err
	}
	defer release()
	event := LogEvent{Session: r.Name, By: who.String(), ByInvocation: who.invocation,
		Description: records.Description{Profile: r.Profile, Workspace: r.Workspace, Command: r.Command}}
	intent := event
	intent.Event = "launching"
	if err := b.log.Append(intent); err != nil {
		return nil, errcode.LaunchLog.New("%w: nothing was started", err)
	}
	// Not cancelled when the bus is told to stop: the start finishes and is
	// recorded (Serve waits for it), rather than leaving a unit that may
	// still start with no record of it.
	plan, err := b.m.Plan(r)
	var s manager.Session
	if err == nil {
		s, err = b.m.Start(context.WithoutCancel(ctx), plan)
	}
	if err != nil {
		e := errcode.Of(err)
		failed := event
		failed.Event, failed.Code, failed.Message = "launch-failed", e.Code, e.Message
		_ = b.log.Append(failed)
		return nil, logged{err}
	}
	var started time.Time
	if rec, ok := records.Read(b.paths.SessionDir(s.Name)); ok {
		started = rec.Started
	}
	b.mu.Lock()
	if who.session != "" && s.InvocationID != "" {
		b.seq++
		b.children[s.InvocationID] = child{name: s.Name, profile: r.Profile, launcher: who.invocation, seq: b.seq}
	}
	b.created[s.Name] = creation{launcher: who.invocation, started: started}
	b.mu.Unlock()
	done := event
	done.Event, done.Session, done.Invocation, done.RecordStarted = "launch", s.Name, s.InvocationID, started
	done.Description = s.Description // as its record holds it, made from the plan
	if err := b.log.Append(done); err != nil {
		// The session runs; its intent is in the log.
		_, _ = os.Stderr.WriteString("mosaic bus: " + err.Error() + "\n")
	}
	parent := who.session
	if parent == "" {
		parent = "(the user)"
	}
	_ = journald.Event(journald.BusLaunch, s.Name, "bus-launch", fmt.Sprintf("session %s was launched through the bus by %s", s.Name, who.String()),
		journald.Field{Key: "MOSAIC_PARENT", Value: parent}, journald.Field{Key: "MOSAIC_BY", Value: who.String()},
		journald.Field{Key: "MOSAIC_PROFILE", Value: r.Profile})
	return s, nil
}

// checkSessionLaunch holds a launch from a session to the policy (read at
// each launch: the operator's edits apply without a restart) and fills in
// its profile and command. Capacity is checked later, with the reservation.
func (b *bus) checkSessionLaunch(who caller, r *request.Request) (Policy, error) {
	if !who.mayLaunch {
		return Policy{}, errcode.NotPermitted.New("session %s was not started with --may-launch", who.session)
	}
	if len(r.Command) == 0 && r.Profile == "" {
		return Policy{}, errcode.NoCommand.New("no profile given: name the profile to launch (--profile); it says what runs")
	}
	if who.copied {
		// A session that works on a copy launches sessions that do too,
		// whatever the profile's or mosaic.conf's workspace mode: a direct
		// one would write the checkout its launcher was kept from.
		r.Mode = request.ModeClone
	}
	dir := credentials.ProfileDir(b.paths.Home)
	profile, err := credentials.ProfileFor(dir, r.Command)
	if r.Profile != "" {
		profile, err = credentials.FindProfile(dir, r.Profile)
	}
	if err != nil {
		return Policy{}, err
	}
	policy, err := ReadPolicy(PolicyFile(b.paths.Home))
	if err != nil {
		return Policy{}, err
	}
	if err := policy.checkLaunch(*r, profile.Name, who.workspace, nil); err != nil {
		return Policy{}, err
	}
	if r.Command, err = policy.commandFor(profile, r.Command); err != nil {
		return Policy{}, err
	}
	defaults, err := request.DefaultLimits(profile, b.paths)
	if err != nil {
		return Policy{}, err
	}
	if err := onlyLower(r.Limits, defaults); err != nil {
		return Policy{}, err
	}
	// How long systemd waits after SIGTERM (a logout, a shutdown, a
	// systemctl stop) is bounded alike.
	if r.StopTimeout > units.DefaultStopTimeout {
		return Policy{}, errcode.NotPermitted.New("a session can only shorten the stop timeout of a session it launches: at most %s", units.DefaultStopTimeout)
	}
	r.Profile = profile.Name
	return policy, nil
}

// onlyLower refuses limits a session asks for the session it launches
// that are above what that session would get without them (the profile's,
// the user's config, mosaic's defaults): a launcher may bound what it
// launches further, never unbind it (infinity), as no session is unbounded
// unless the user says so.
func onlyLower(asked, defaults units.Limits) error {
	for _, l := range []struct {
		name          string
		asked, normal uint64
	}{
		{"memory-max", asked.MemoryMax, defaults.MemoryMax},
		{"tasks-max", asked.TasksMax, defaults.TasksMax},
		{"cpu-quota", asked.CPUQuota, defaults.CPUQuota},
		{"runtime-max", uint64(asked.RuntimeMax), uint64(defaults.RuntimeMax)},
	} {
		if l.asked != 0 && l.normal != 0 && l.normal != units.Infinity && (l.asked == units.Infinity || l.asked > l.normal) {
			return errcode.NotPermitted.New("a session can only lower the limits of a session it launches: %s is above that session's own limit (the profile's, your config's or mosaic's default)", l.name)
		}
	}
	return nil
}

// reserve claims the name (and, for a launch from a session, a place in
// its profile's capacity: a launch in flight counts as running) until the
// release it returns, which the launch calls once it is recorded.
func (b *bus) reserve(who caller, r request.Request, policy Policy) (func(), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil, errcode.BusError.New("the mosaic bus is stopping: try again once it is back (systemctl --user status mosaic-bus)")
	}
	if b.starting[r.Name] {
		return nil, errcode.SessionExists.New("a session named %s is being launched now: pick another name", r.Name)
	}
	if who.session != "" {
		if err := b.mayTakeName(who, r.Name); err != nil {
			return nil, err
		}
		n := b.reserved[r.Profile]
		for _, c := range b.children {
			if c.profile == r.Profile {
				n++
			}
		}
		if err := policy.full(r.Profile, n); err != nil {
			return nil, err
		}
		b.reserved[r.Profile]++
	}
	b.starting[r.Name] = true
	b.launches.Add(1)
	return func() {
		b.mu.Lock()
		delete(b.starting, r.Name)
		if who.session != "" {
			if b.reserved[r.Profile]--; b.reserved[r.Profile] <= 0 {
				delete(b.reserved, r.Profile)
			}
		}
		b.mu.Unlock()
		b.launches.Done()
	}, nil
}

// mayTakeName lets a session launch under a name with state (a kept home,
// a record) only when that state is of its own making: its own launch of
// that name through the bus, with the record that launch wrote. An ended
// session's home holds its sign-in tokens and is what the user's next run
// of the name starts with. Called with b.mu held.
func (b *bus) mayTakeName(who caller, name string) error {
	dir := b.paths.SessionDir(name)
	if _, err := os.Lstat(dir); os.IsNotExist(err) {
		return nil
	}
	c, ok := b.created[name]
	rec, recOK := records.Read(dir)
	if ok && c.launcher != "" && c.launcher == who.invocation && recOK && rec.Started.Equal(c.started) {
		return nil
	}
	return errcode.NotPermitted.New("the name %s has the state (home, record) of a session that session %s did not launch: leave the name out to get a fresh one", name, who.session)
}

// pruneChildren drops the children added up to seq that list (taken after
// seq was read) does not show running as the same invocation: an end the
// bus did not see must not hold capacity for good.
func (b *bus) pruneChildren(list []manager.Session, seq uint64) {
	up := map[string]bool{}
	for _, s := range list {
		if s.Running() && s.InvocationID != "" {
			up[s.InvocationID] = true
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, c := range b.children {
		if c.seq <= seq && !up[id] {
			delete(b.children, id)
		}
	}
}

// launchLends refuses a launch lent ssh keys, as no policy lets one
// through: a session may not hand what it launches the user's keys (a
// credential of its own choosing, bind-not-allowed), and the bus lends
// none of its own (its SSH_AUTH_SOCK, if any, is the user manager's, not
// the asking shell's agent: bad-ssh-lend). A git credential (--lend-git)
// the user may lend through the bus as through mosaic start; a session
// only what it was lent itself (gitLendsWithin).
func launchLends(who caller, req Request) error {
	if len(req.LendSSHKey) > 0 || len(req.LendSSHSign) > 0 {
		if who.session != "" {
			return errcode.BindNotAllowed.New("a session cannot lend the session it launches ssh keys (--lend-ssh-key, --lend-ssh-sign): the bus lends none")
		}
		return errcode.BadSSHLend.New("--lend-ssh-key and --lend-ssh-sign are not available through the bus: it has no agent of yours to lend; use mosaic start")
	}
	return gitLendsWithin(who, req.LendGit)
}

// gitLendsWithin checks the --lend-git a launch asks for: each must read
// (bad-git-lend), and from a session each must be lent to that session
// itself, the same repository of the same host, for operations it was
// lent (push is within force), else bind-not-allowed: a launcher hands on
// only what it holds, never a repository or an operation of its choosing.
// What the launcher holds is its record's (written by its start, which
// the session cannot write).
func gitLendsWithin(who caller, asked []string) error {
	var own []egress.GitLend
	for _, d := range who.gitLent {
		// The record's "URL for OP, OP" (statedir.Describe).
		u, ops, ok := strings.Cut(d, " for ")
		if g, err := egress.ParseGitLend(u + "=" + strings.ReplaceAll(ops, ", ", ",")); ok && err == nil {
			own = append(own, g)
		}
	}
	for _, v := range asked {
		g, err := egress.ParseGitLend(v)
		if err != nil {
			return errcode.BadGitLend.New("%w", err)
		}
		if who.session == "" {
			continue
		}
		i := slices.IndexFunc(own, func(o egress.GitLend) bool { return o.Host == g.Host && o.Repo == g.Repo })
		if i < 0 {
			return errcode.BindNotAllowed.New("--lend-git %s: session %s was not lent that repository, and a session can lend the session it launches only what it was lent itself", g.URL(), who.session)
		}
		for _, op := range g.Ops {
			if !slices.Contains(own[i].Ops, op) && (op != "push" || !slices.Contains(own[i].Ops, "force")) {
				return errcode.BindNotAllowed.New("--lend-git %s: session %s was lent it for %s only, not %s, and a session can lend the session it launches only what it was lent itself", g.URL(), who.session, strings.Join(own[i].Ops, ", "), op)
			}
		}
	}
	return nil
}

// launchBuildEnv are the build settings of a session the bus launches,
// never the bus's own environment (the service's, not the asker's): the
// asking shell's, as mosaic start passes them; for a launch from a session,
// those the user's launch gave that session, never what it asks for (its
// agent could set GOFLAGS=-toolexec=... for a command the policy fixed).
func launchBuildEnv(who caller, req Request) map[string]string {
	if who.session != "" {
		return who.buildEnv
	}
	if req.BuildEnv == nil {
		return map[string]string{}
	}
	return req.BuildEnv
}

// requestOf turns a launch request into a session request, checking its
// name and limits as mosaic start checks its flags.
func requestOf(req Request) (request.Request, error) {
	r := request.Request{Name: req.Name, Workspace: req.Workspace, Profile: req.Profile, Command: req.Command,
		ExtraRO: req.RO, ExtraRW: req.RW, MayLaunch: req.MayLaunch, Network: req.Network, AllowHosts: req.AllowHosts,
		LendGit: req.LendGit, NoAgent: "the bus has no ssh agent of yours to lend (use mosaic start)"}
	if r.Name != "" {
		if err := units.ValidateName(r.Name); err != nil {
			return r, err
		}
	}
	if r.Workspace != "" && !filepath.IsAbs(r.Workspace) {
		return r, errcode.BadWorkspace.New("workspace %q must be an absolute path: the bus does not know the caller's directory", clip(r.Workspace, 256))
	}
	var err error
	if r.Limits, err = req.Limits.Parse(); err != nil {
		return r, err
	}
	r.StopTimeout = units.DefaultStopTimeout
	if req.StopTimeout != "" {
		if r.StopTimeout, err = units.ParseDuration("stop-timeout", req.StopTimeout); err != nil {
			return r, err
		}
	}
	return r, nil
}
