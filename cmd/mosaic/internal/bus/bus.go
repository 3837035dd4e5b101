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
// JSON lines (Request, Answer). The caller is identified by the kernel and
// systemd (identify.go): a pidfd and GetUnitByPIDFD where systemd has it,
// else the PID and GetUnitByPID with a check of the process's start time.
//
// What a session sends is hostile: the bus fails closed on identity, runs
// only the commands the policy names, lets a session control only the very
// sessions it launched (by invocation id), and bounds every request, every
// connection and every line it logs.
package bus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"mosaic/internal/acceptloop"
	"mosaic/internal/errcode"
	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/request"

	"golang.org/x/sys/unix"

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
	// LendSSHKey and LendSSHSign are mosaic start's --lend-ssh-key and
	// --lend-ssh-sign, which the bus always refuses (launchLends): known
	// here so that an ask for them is never a launch without them.
	LendSSHKey  []string `json:"lend_ssh_key,omitempty"`
	LendSSHSign []string `json:"lend_ssh_sign,omitempty"`
	// LendGit is mosaic start's --lend-git: from the user, as mosaic start
	// lends it (the bus asks the user's git credential helper); from a
	// session, only what that session was lent itself (launchLends).
	LendGit []string `json:"lend_git,omitempty"`
	// BuildEnv are the build settings (credentials.BuildSettings) of the
	// asking user's shell, for the launched session as mosaic start
	// passes them. From a session it is not read: the launched session
	// gets those its launcher was given at its start (launchBuildEnv).
	BuildEnv map[string]string `json:"build_env,omitempty"`
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
	lim   limits
	// procStart reads a process's start time (a hook: tests make a PID
	// change hands between the two reads).
	procStart func(pid int) (string, bool)

	mu       sync.Mutex
	running  map[string]bool           // session units seen up
	props    map[string]map[string]any // their announced properties, merged
	children map[string]child          // invocation id of a session a session launched -> its launcher
	created  map[string]creation       // session name -> who made its state (the latest launch of it)
	reserved map[string]int            // profile -> launches from sessions in flight
	starting map[string]bool           // names being launched now
	conns    map[string]int            // caller -> its open connections
	seq      uint64                    // counts children added (see pruneChildren)
	closing  bool                      // Serve is returning: no new launch
	launches sync.WaitGroup            // launches in flight
}

// child is a session launched by a session, while it runs: ownership is
// keyed by the child's invocation id, so a later session that reuses the
// name is not its launcher's.
type child struct {
	name, profile string
	launcher      string // the launcher's invocation id
	seq           uint64
}

// creation is who launched a session through the bus last, and the start
// time its record had then: what lets a session launch that name again.
type creation struct {
	launcher string // the launching session's invocation id; "" for the user
	started  time.Time
}

// limits bound what callers may hold of the bus.
type limits struct {
	maxLine     int           // one request line, newline included
	idle        time.Duration // waiting for the next request line
	write       time.Duration // writing one answer
	perCaller   int           // connections one session holds at once
	perListener int           // connections one socket holds at once, identified or not
}

// defaultLimits: a request is a few hundred bytes; the CLI opens one
// connection per command and closes it.
var defaultLimits = limits{maxLine: 64 << 10, idle: 30 * time.Second, write: 10 * time.Second, perCaller: 8, perListener: 64}

// Client is what the bus needs of systemd: *manager.Manager, or a fake in
// tests. The bus acts only through it.
type Client interface {
	// Plan checks a request and plans its session (manager.NewPlan);
	// Start starts the plan.
	Plan(req request.Request) (manager.Plan, error)
	Start(ctx context.Context, plan manager.Plan) (manager.Session, error)
	Stop(ctx context.Context, name string, timeout time.Duration, progress func(string)) (manager.Session, error)
	// StopInvocation stops name only while it is the start whose
	// invocation id is given, with no start of the name in between.
	StopInvocation(ctx context.Context, name, invocation string, timeout time.Duration) (manager.Session, error)
	Status(ctx context.Context, name string) (manager.Session, error)
	// ListInvocations lists every session with its InvocationID.
	ListInvocations(ctx context.Context) ([]manager.Session, error)
	// WatchSessions calls fn with every property change of a mosaic unit.
	WatchSessions(fn func(unit, iface string, changed map[string]any))
	// Features says which lookups the manager has (UnitByPIDFD from 253).
	Features() units.Features
	// UnitByPID and UnitByPIDFD are the unit a process is in and that
	// unit's invocation id; errcode.NoSuchSession's target (errors.Is)
	// when it is in none.
	UnitByPID(ctx context.Context, pid uint32) (unit, invocationID string, err error)
	UnitByPIDFD(ctx context.Context, pidfd int) (unit, invocationID string, err error)
}

func newBus(m Client, log *LaunchLog, paths request.Paths) *bus {
	return &bus{m: m, log: log, paths: paths, lim: defaultLimits, procStart: procStart,
		running: map[string]bool{}, props: map[string]map[string]any{}, children: map[string]child{},
		created: map[string]creation{}, reserved: map[string]int{}, starting: map[string]bool{}, conns: map[string]int{}}
}

// Serve runs the bus until ctx is done, for the user whose paths are
// paths (its caller's, read once). ready is called once it listens.
// Its errors carry their exit codes: bad input (a policy or launch log it
// cannot read) is 2, another bus already serving is 3.
func Serve(ctx context.Context, paths request.Paths, ready func()) error {
	policy, err := ReadPolicy(PolicyFile(paths.Home))
	if err != nil {
		return err
	}
	log, events, err := OpenLaunchLog(LaunchLogPath(paths))
	if err != nil {
		return err
	}
	defer log.Close()
	for _, w := range log.Warnings {
		fmt.Fprintf(os.Stderr, "mosaic bus: warning: %s\n", w)
	}
	out, err := outside(paths)
	if err != nil {
		return err
	}
	m, err := manager.Connect(ctx, manager.Options{Outside: out, Paths: &paths, Say: func(line string) { fmt.Fprintln(os.Stderr, line) }})
	if err != nil {
		return err
	}
	defer m.Close()
	b := newBus(m, log, paths)
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
	how := "by PID, with its start time checked (systemd before 253)"
	if m.Features().UnitByPIDFD {
		how = "by pidfd (GetUnitByPIDFD), or by PID where the kernel gives no pidfd"
	}
	fmt.Fprintf(os.Stderr, "mosaic bus: listening on %s; policy %s (profiles: %s); launch log %s; callers identified %s\n",
		paths.BusSocket(), policy.sourceName(), strings.Join(policy.Profiles(), ", "), log.path, how)
	ready()
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Add(1)
		go func(l *net.UnixListener) {
			defer wg.Done()
			b.accept(ctx, l)
		}(l)
	}
	var lost error
	select {
	case <-ctx.Done():
	case <-m.Done(): // deaf without systemd: exit, and be restarted
		lost = errcode.SystemdGone.New("the connection to systemd closed: exiting so that systemd restarts the bus")
	}
	b.shutdown()
	for _, l := range listeners {
		l.Close() // also unlinks the socket file
	}
	wg.Wait()
	return lost
}

// shutdown refuses new launches and waits for those in flight, so that
// none runs without its launch record.
func (b *bus) shutdown() {
	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.launches.Wait()
}

// accept serves a listener's connections, at most perListener at once:
// each socket has its own slots, so sessions (who reach only theirs)
// cannot take the user's.
// An Accept that fails for a moment (EMFILE) is retried (acceptloop).
func (b *bus) accept(ctx context.Context, l net.Listener) {
	slots := make(chan struct{}, b.lim.perListener)
	_ = acceptloop.Serve(l, func(nc net.Conn) {
		c := nc.(*net.UnixConn)
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				b.serveConn(ctx, c)
			}()
		default:
			b.busy(c, "the mosaic bus holds as many connections on this socket as it takes")
		}
	})
}

// busy answers a connection the bus will not serve, and closes it.
func (b *bus) busy(c *net.UnixConn, why string) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	e := errcode.BusBusy.New("%s: close some, or wait and try again", why)
	_ = json.NewEncoder(c).Encode(Answer{Error: &AnswerError{Code: e.Code, Message: e.Message, Exit: e.Exit}})
	c.Close()
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
			return fail(errcode.BusSocket.New("cannot make %s: %w", filepath.Dir(path), err))
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
			return fail(errcode.BusSocket.New("cannot listen on %s: %w", path, err))
		}
		_ = os.Chmod(path, 0o600)
		out = append(out, l)
	}
	return out, nil
}

// serveConn answers one connection's requests, one line each. A line
// longer than maxLine is refused and the connection closed: the reader's
// buffer is all the memory a connection can make the bus hold.
func (b *bus) serveConn(ctx context.Context, conn *net.UnixConn) {
	defer conn.Close()
	who := b.identify(ctx, conn)
	if who.err == nil && who.session != "" {
		key := who.key()
		b.mu.Lock()
		full := b.conns[key] >= b.lim.perCaller
		if !full {
			b.conns[key]++
		}
		b.mu.Unlock()
		if full {
			b.busy(conn, fmt.Sprintf("session %s holds %d connections to the bus already", who.session, b.lim.perCaller))
			return
		}
		defer func() {
			b.mu.Lock()
			if b.conns[key]--; b.conns[key] <= 0 {
				delete(b.conns, key)
			}
			b.mu.Unlock()
		}()
	}
	r := bufio.NewReaderSize(conn, b.lim.maxLine)
	enc := json.NewEncoder(conn)
	reply := func(a Answer) {
		_ = conn.SetWriteDeadline(time.Now().Add(b.lim.write))
		_ = enc.Encode(a)
	}
	for {
		_ = conn.SetReadDeadline(time.Now().Add(b.lim.idle))
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			reply(b.refuse(who, Request{}, errcode.BadRequest.New("a request line is longer than %d KiB: the bus closed the connection", b.lim.maxLine>>10)))
			return
		}
		if len(bytes.TrimSpace(line)) > 0 {
			reply(b.answer(ctx, who, line))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) {
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
		// A field the bus does not know is refused, not dropped: a launch
		// asked with a restriction (or a lend) this bus cannot give is
		// never started without it.
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if jerr := dec.Decode(&req); jerr != nil || dec.More() {
			if jerr == nil {
				jerr = errors.New("more than one value")
			}
			err = errcode.BadRequest.New("the request is not a JSON object of known fields on one line: %w", jerr)
		} else {
			result, err = b.handle(ctx, who, req)
		}
	}
	if err != nil {
		var l logged
		if errors.As(err, &l) {
			err = l.error
		} else {
			return b.refuse(who, req, err)
		}
		e := errcode.Of(err)
		return Answer{Error: &AnswerError{Code: e.Code, Message: e.Message, Exit: e.Exit}}
	}
	raw, _ := json.Marshal(result)
	return Answer{OK: true, Result: raw}
}

// logged is an error already in the launch log.
type logged struct{ error }

// refuse records a refusal in the launch log and answers it.
func (b *bus) refuse(who caller, req Request, err error) Answer {
	e := errcode.Of(err)
	_ = b.log.Append(LogEvent{Event: "refused", Verb: req.Verb, By: who.String(), ByInvocation: who.invocation, Session: req.Name,
		Description: records.Description{Profile: req.Profile, Workspace: req.Workspace, Command: req.Command}, Code: e.Code, Message: e.Message})
	return Answer{Error: &AnswerError{Code: e.Code, Message: e.Message, Exit: e.Exit}}
}

func (b *bus) handle(ctx context.Context, who caller, req Request) (any, error) {
	switch req.Verb {
	case "launch":
		return b.launch(ctx, who, req)
	case "stop", "status":
		if err := units.ValidateName(req.Name); err != nil {
			return nil, err
		}
		timeout := units.DefaultStopTimeout
		if req.Verb == "stop" && req.Timeout != "" {
			var err error
			if timeout, err = units.ParseTimeout("timeout", req.Timeout); err != nil {
				return nil, err
			}
		}
		if who.session != "" {
			s, err := b.mayControl(ctx, who, req.Name)
			if err != nil {
				return nil, err
			}
			if req.Verb == "status" {
				return s, nil
			}
			// The very start it launched, not whatever holds the name
			// once the check is done.
			s, err = b.m.StopInvocation(ctx, req.Name, s.InvocationID, timeout)
			if errors.Is(err, errcode.NoSuchSession.Target()) {
				return nil, errcode.NotPermitted.New("session %s may stop only the sessions it launched while they run, and %s is no longer one", who.session, req.Name)
			}
			return s, err
		}
		if req.Verb == "status" {
			return b.m.Status(ctx, req.Name)
		}
		return b.m.Stop(ctx, req.Name, timeout, nil)
	case "list":
		list, err := b.m.ListInvocations(ctx)
		if err != nil || who.session == "" {
			return list, err
		}
		mine := []manager.Session{}
		b.mu.Lock()
		for _, s := range list {
			if c, ok := b.children[s.InvocationID]; ok && s.InvocationID != "" && c.launcher == who.invocation {
				mine = append(mine, s)
			}
		}
		b.mu.Unlock()
		return mine, nil
	}
	return nil, errcode.BadRequest.New("unknown verb %q: use launch, stop, list or status", clip(req.Verb, 64))
}

// mayControl lets a session stop or inspect only the sessions it launched:
// the unit of that name now must be the very start of it the session
// launched (its invocation id), not a later session that took the name.
// (systemd stops a unit by name: a stop is then asked through
// StopInvocation, which checks the invocation again under the name's lock.)
func (b *bus) mayControl(ctx context.Context, who caller, name string) (manager.Session, error) {
	refused := errcode.NotPermitted.New("session %s may stop or inspect only the sessions it launched while they run, and %s is not one", who.session, name)
	s, err := b.m.Status(ctx, name)
	if err != nil {
		if errors.Is(err, errcode.NoSuchSession.Target()) {
			return s, refused
		}
		return s, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.children[s.InvocationID]; !ok || s.InvocationID == "" || c.launcher != who.invocation || c.name != name {
		return s, refused
	}
	return s, nil
}
