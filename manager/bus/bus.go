// Package bus is mosaic's bus: its one long-lived process (mosaic-bus.service): it lets a
// session started with --may-launch launch others under the policy, answers
// the user's own stop/list/status, records every launch, refusal and end in
// the launch log, and after a restart adopts the sessions that kept running
// (they are units, not its children) and records the ends it missed.
//
// It listens on $XDG_RUNTIME_DIR/mosaic/bus.sock and, for sessions, on
// $XDG_RUNTIME_DIR/mosaic/bus/bus.sock: that directory is what a
// --may-launch session has bound, so a restarted bus (a new socket) is still
// reachable from sessions that started before it. Requests and answers are
// JSON lines (Request, Answer). The caller is identified by the
// kernel: SO_PEERCRED's PID, then systemd's GetUnitByPID.
package bus

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units/errcode"

	"golang.org/x/sys/unix"

	"mosaic/credentials"
	"mosaic/sandbox"
	"mosaic/units"
)

// Request is one request line.
type Request struct {
	Verb      string   `json:"verb"` // launch, stop, list, status
	Name      string   `json:"name,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	Profile   string   `json:"profile,omitempty"`
	Command   []string `json:"command,omitempty"`
	RO        []string `json:"ro,omitempty"`
	RW        []string `json:"rw,omitempty"`
	// Limits, StopTimeout and Timeout (for stop) as mosaic start's flags
	// take them: "4G", "64", "200%", "2h", "10s".
	Limits      units.LimitStrings `json:"limits"`
	StopTimeout string             `json:"stop_timeout,omitempty"`
	Timeout     string             `json:"timeout,omitempty"`
	MayLaunch   bool               `json:"may_launch,omitempty"`
	// Network and AllowHosts as in mosaic start (not from a session: a
	// launched session has its profile's network).
	Network    string   `json:"network,omitempty"`
	AllowHosts []string `json:"allow_hosts,omitempty"`
}

// Answer is one answer line.
type Answer struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *AnswerError    `json:"error,omitempty"`
}

// AnswerError is a refused or failed request; Exit is the exit code mosaic's
// own command would have for it (2 bad input, 3 refusal, 1 failure).
type AnswerError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Exit    int    `json:"exit,omitempty"`
}

// bus is the running bus's state.
type bus struct {
	m     Client
	log   *LaunchLog
	paths request.Paths

	launchMu sync.Mutex // one launch at a time: capacity is checked, then used

	mu         sync.Mutex
	running    map[string]bool           // session units seen up
	props      map[string]map[string]any // their announced properties, merged
	launchedBy map[string]string         // session -> the session that launched it
}

// Client is what the bus needs of systemd: *manager.Manager, or a fake in
// tests. The bus acts only through it.
type Client interface {
	// Launch checks a request and starts its session (Spec, then Start).
	Launch(ctx context.Context, req request.Request) (manager.Session, error)
	Stop(ctx context.Context, name string, timeout time.Duration, progress func(string)) (manager.Session, error)
	Status(ctx context.Context, name string) (manager.Session, error)
	List(ctx context.Context) ([]manager.Session, error)
	// WatchSessions calls fn with every property change of a mosaic unit.
	WatchSessions(fn func(unit, iface string, changed map[string]any))
	// UnitByPID is the unit a process is in; errcode.NoSuchSession's
	// target (errors.Is) when it is in none.
	UnitByPID(ctx context.Context, pid uint32) (string, error)
}

func newBus(m Client, log *LaunchLog, paths request.Paths) *bus {
	return &bus{m: m, log: log, paths: paths,
		running: map[string]bool{}, props: map[string]map[string]any{}, launchedBy: map[string]string{}}
}

// Serve runs the bus until ctx is done. ready is called once it listens.
// Its errors carry their exit codes: bad input (a policy or launch log it
// cannot read) is 2, another bus already serving is 3.
func Serve(ctx context.Context, ready func()) error {
	paths, err := request.UserPaths()
	if err != nil {
		return err
	}
	policy, err := ReadPolicy(PolicyFile(paths.Home))
	if err != nil {
		return err
	}
	log, events, err := OpenLaunchLog(LaunchLogPath(paths))
	if err != nil {
		return err
	}
	defer log.Close()
	m, err := manager.Connect(ctx)
	if err != nil {
		return err
	}
	defer m.Close()
	b := newBus(m, log, paths)
	for _, e := range events {
		if e.Event == "launch" && strings.HasPrefix(e.By, "session ") {
			b.launchedBy[e.Session] = strings.TrimPrefix(e.By, "session ")
		}
	}
	// Watch before listing, so that no end falls between the two.
	m.WatchSessions(b.observe)
	if err := b.adopt(ctx, events); err != nil {
		return err
	}
	listeners, err := listen(paths)
	if err != nil {
		return err
	}
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	fmt.Fprintf(os.Stderr, "mosaic bus: listening on %s; policy %s (profiles: %s); launch log %s\n",
		paths.BusSocket(), policy.sourceName(), strings.Join(policy.Profiles(), ", "), log.path)
	ready()
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Add(1)
		go func(l *net.UnixListener) {
			defer wg.Done()
			for {
				c, err := l.AcceptUnix()
				if err != nil {
					return
				}
				go b.serveConn(ctx, c)
			}
		}(l)
	}
	<-ctx.Done()
	for _, l := range listeners {
		l.Close() // also unlinks the socket file
	}
	wg.Wait()
	return nil
}

// listen makes both sockets, 0600. A socket another bus answers on is a
// refusal; a stale one (a bus that died) is replaced.
func listen(p request.Paths) ([]*net.UnixListener, error) {
	var out []*net.UnixListener
	fail := func(err error) ([]*net.UnixListener, error) {
		for _, l := range out {
			l.Close()
		}
		return nil, err
	}
	for _, path := range []string{p.BusSocket(), filepath.Join(p.BusDir(), sandbox.BusSocketName)} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return fail(errcode.BusSocket.New("cannot make %s: %v", filepath.Dir(path), err))
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return fail(errcode.BusRunning.New("another mosaic bus already answers on %s: see `systemctl --user status mosaic-bus`", path))
		}
		os.Remove(path)
		old := unix.Umask(0o177)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		unix.Umask(old)
		if err != nil {
			return fail(errcode.BusSocket.New("cannot listen on %s: %v", path, err))
		}
		_ = os.Chmod(path, 0o600)
		out = append(out, l)
	}
	return out, nil
}

// adopt takes over the sessions that run now, and records an end for every
// session the log shows as launched that ended while no bus was watching.
func (b *bus) adopt(ctx context.Context, events []LogEvent) error {
	list, err := b.m.List(ctx)
	if err != nil {
		return err
	}
	b.mu.Lock()
	for _, s := range list {
		if s.Running() {
			b.running[s.Unit] = true
		}
	}
	b.mu.Unlock()
	adopted := 0
	for name, launch := range openLaunches(events) {
		s, err := b.m.Status(ctx, name)
		if err == nil && s.Running() {
			adopted++
			continue
		}
		end := LogEvent{Event: "end", Session: name, Profile: launch.Profile, Result: "unknown", Recovered: true}
		if err == nil {
			if s.Result != "" {
				end.Result = s.Result
			}
			end.ExitStatus, end.Signal = s.ExitStatus, s.Signal
		}
		if err := b.log.Append(end); err != nil {
			return errcode.LaunchLog.New("%v", err)
		}
		fmt.Fprintf(os.Stderr, "mosaic bus: session %s ended while no bus was watching (%s)\n", name, end.Result)
	}
	fmt.Fprintf(os.Stderr, "mosaic bus: adopted %d running sessions (%d launched through the bus)\n", len(list), adopted)
	return nil
}

// observe follows every session unit's announcements and logs each end.
func (b *bus) observe(unit, iface string, changed map[string]any) {
	name, kind := units.SessionName(unit)
	if name == "" {
		return
	}
	b.mu.Lock()
	p := b.props[unit]
	if p == nil {
		p = map[string]any{}
		b.props[unit] = p
	}
	for k, v := range changed {
		p[k] = v
	}
	state, _ := p["ActiveState"].(string)
	up := state == "active" || state == "activating" || state == "reloading" || state == "deactivating"
	ended := b.running[unit] && (state == "inactive" || state == "failed")
	if up {
		b.running[unit] = true
	}
	var s manager.Session
	if ended {
		s = manager.SessionOf(name, kind, p, p)
		delete(b.running, unit)
		delete(b.props, unit)
	}
	if !up && !ended && iface == "org.freedesktop.systemd1.Unit" && (state == "inactive" || state == "failed") {
		delete(b.props, unit) // a unit that came and went unseen: nothing to keep
	}
	b.mu.Unlock()
	if !ended {
		return
	}
	end := LogEvent{Event: "end", Session: name, Result: s.Result, ExitStatus: s.ExitStatus, Signal: s.Signal}
	if rec, ok := records.Read(b.paths.SessionDir(name)); ok {
		end.Profile = rec.Profile
	}
	if end.ExitStatus == nil { // a scope, or a unit collected too soon: its own record
		if e, ok := records.ReadEnd(b.paths.SessionDir(name)); ok {
			if s, ok := manager.FromRecords(name, b.paths.SessionDir(name)); ok && e.Ended.After(time.Now().Add(-time.Minute)) {
				end.Result, end.ExitStatus, end.Signal = s.Result, s.ExitStatus, s.Signal
			}
		}
	}
	if end.Result == "" {
		end.Result = "success"
	}
	if err := b.log.Append(end); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic bus: %v\n", err)
	}
}

// caller is who is on the other end of a connection.
type caller struct {
	session   string // "" for the user outside any session
	mayLaunch bool
	workspace string
	err       error // the caller cannot be served at all
}

func (c caller) String() string {
	if c.session == "" {
		return "user"
	}
	return "session " + c.session
}

// identify asks the kernel who connected (SO_PEERCRED) and systemd which
// unit that process is in (GetUnitByPID).
func (b *bus) identify(ctx context.Context, conn *net.UnixConn) caller {
	raw, err := conn.SyscallConn()
	if err != nil {
		return caller{err: err}
	}
	var cred *unix.Ucred
	var credErr error
	_ = raw.Control(func(fd uintptr) { cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if credErr != nil {
		return caller{err: credErr}
	}
	if int(cred.Uid) != os.Getuid() {
		return caller{err: errcode.NotPermitted.New("the mosaic bus serves only its own user")}
	}
	// The PID is the connecting process's; it may have handed the socket on
	// and exited, and its PID be reused. So the process must still be the
	// same one (its start time) after systemd has said which unit it is in.
	gone := caller{err: errcode.NotPermitted.New("the process that connected to the bus is gone: connect from the process that asks")}
	started, ok := procStart(int(cred.Pid))
	if !ok {
		return gone
	}
	unit, err := b.m.UnitByPID(ctx, uint32(cred.Pid))
	if again, ok := procStart(int(cred.Pid)); !ok || again != started {
		return gone
	}
	// Only systemd's word that the process is in no unit makes it the
	// user's own; any other error (a timeout, a closed connection) says
	// nothing of who asks, and is a refusal.
	if errors.Is(err, errcode.NoSuchSession.Target()) {
		return caller{}
	}
	if err != nil {
		return caller{err: errcode.NotPermitted.New("cannot tell which unit the caller is in, so the bus refuses: %v", errcode.Of(err).Message)}
	}
	name, _ := units.SessionName(unit)
	if name == "" {
		return caller{}
	}
	c := caller{session: name}
	if rec, ok := records.Read(b.paths.SessionDir(name)); ok {
		c.mayLaunch, c.workspace = rec.MayLaunch, rec.Workspace
	}
	return c
}

// procStart is a process's start time (field 22 of /proc/PID/stat).
func procStart(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}

// serveConn answers one connection's requests, one line each.
func (b *bus) serveConn(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	who := b.identify(ctx, conn)
	r := bufio.NewReaderSize(conn, 64*1024)
	enc := json.NewEncoder(conn)
	for {
		line, err := r.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			_ = enc.Encode(b.answer(ctx, who, line))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "mosaic bus: reading from %s: %v\n", who, err)
			}
			return
		}
	}
}

// answer handles one request and records a refusal.
func (b *bus) answer(ctx context.Context, who caller, line []byte) Answer {
	var req Request
	result, err := any(nil), who.err
	if err == nil {
		if jerr := json.Unmarshal(line, &req); jerr != nil {
			err = errcode.BadRequest.New("the request is not a JSON object on one line: %v", jerr)
		} else {
			result, err = b.handle(ctx, who, req)
		}
	}
	if err != nil {
		e := errcode.Of(err)
		code, msg, exit := e.Code, e.Message, e.Exit
		_ = b.log.Append(LogEvent{Event: "refused", Verb: req.Verb, By: who.String(), Session: req.Name, Profile: req.Profile,
			Workspace: req.Workspace, Command: req.Command, Code: code, Message: msg})
		return Answer{Error: &AnswerError{Code: code, Message: msg, Exit: exit}}
	}
	raw, _ := json.Marshal(result)
	return Answer{OK: true, Result: raw}
}

func (b *bus) handle(ctx context.Context, who caller, req Request) (any, error) {
	switch req.Verb {
	case "launch", "stop", "status", "list":
	default:
		return nil, errcode.BadRequest.New("unknown verb %q: use launch, stop, list or status", req.Verb)
	}
	if who.session != "" && req.Verb != "launch" && req.Verb != "list" {
		if err := b.mayControl(who, req.Name); err != nil {
			return nil, err
		}
	}
	switch req.Verb {
	case "launch":
		return b.launch(ctx, who, req)
	case "stop":
		timeout := units.DefaultStopTimeout
		if req.Timeout != "" {
			var err error
			if timeout, err = units.ParseTimeout("timeout", req.Timeout); err != nil {
				return nil, err
			}
		}
		return b.m.Stop(ctx, req.Name, timeout, nil)
	case "status":
		return b.m.Status(ctx, req.Name)
	case "list":
		list, err := b.m.List(ctx)
		if err != nil || who.session == "" {
			return list, err
		}
		mine := []manager.Session{}
		b.mu.Lock()
		for _, s := range list {
			if b.launchedBy[s.Name] == who.session {
				mine = append(mine, s)
			}
		}
		b.mu.Unlock()
		return mine, nil
	}
	return nil, errcode.BadRequest.New("unknown verb %q: use launch, stop, list or status", req.Verb)
}

// mayControl lets a session stop or inspect only the sessions it launched.
func (b *bus) mayControl(who caller, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.launchedBy[name] != who.session {
		return errcode.NotPermitted.New("session %s may stop or inspect only the sessions it launched, and %s is not one", who.session, name)
	}
	return nil
}

// launch starts a session for the caller; one from a session is held to
// the policy first.
func (b *bus) launch(ctx context.Context, who caller, req Request) (any, error) {
	r, err := requestOf(req)
	if err != nil {
		return nil, err
	}
	b.launchMu.Lock()
	defer b.launchMu.Unlock()
	if who.session != "" {
		if !who.mayLaunch {
			return nil, errcode.NotPermitted.New("session %s was not started with --may-launch", who.session)
		}
		if len(r.Command) == 0 && r.Profile == "" {
			return nil, errcode.NoCommand.New("no command given: name one, or a profile whose binary to run")
		}
		profile, err := credentials.ProfileFor(credentials.ProfileDir(b.paths.Home), r.Command)
		if r.Profile != "" {
			profile, err = credentials.FindProfile(credentials.ProfileDir(b.paths.Home), r.Profile)
		}
		if err != nil {
			return nil, err
		}
		// Read at each launch: the operator's edits apply without a restart.
		policy, err := ReadPolicy(PolicyFile(b.paths.Home))
		if err != nil {
			return nil, err
		}
		running, err := b.runningByProfile(ctx)
		if err != nil {
			return nil, err
		}
		if err := policy.checkLaunch(r, profile.Name, who.workspace, running); err != nil {
			return nil, err
		}
		r.Profile = profile.Name
	}
	s, err := b.m.Launch(ctx, r)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	if who.session != "" {
		b.launchedBy[s.Name] = who.session
	}
	b.mu.Unlock()
	if err := b.log.Append(LogEvent{Event: "launch", Session: s.Name, By: who.String(), Profile: s.Profile,
		Workspace: s.Workspace, Command: s.Command}); err != nil {
		fmt.Fprintf(os.Stderr, "mosaic bus: %v\n", err)
	}
	return s, nil
}

// runningByProfile counts, for each profile, the running sessions that
// sessions launched through the bus: what the policy's capacity limits.
func (b *bus) runningByProfile(ctx context.Context) (map[string]int, error) {
	list, err := b.m.List(ctx)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, s := range list {
		b.mu.Lock()
		launched := b.launchedBy[s.Name] != ""
		b.mu.Unlock()
		if !s.Running() || !launched {
			continue
		}
		if rec, ok := records.Read(b.paths.SessionDir(s.Name)); ok {
			n[rec.Profile]++
		}
	}
	return n, nil
}

// requestOf turns a launch request into a session request, checking its
// limits as mosaic start checks its flags.
func requestOf(req Request) (request.Request, error) {
	r := request.Request{Name: req.Name, Workspace: req.Workspace, Profile: req.Profile, Command: req.Command,
		ExtraRO: req.RO, ExtraRW: req.RW, MayLaunch: req.MayLaunch, Network: req.Network, AllowHosts: req.AllowHosts}
	if r.Workspace != "" && !filepath.IsAbs(r.Workspace) {
		return r, errcode.BadWorkspace.New("workspace %q must be an absolute path: the bus does not know the caller's directory", r.Workspace)
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
