package bus

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// fakeClient stands in for systemd: the bus's logic is tested without a rig,
// as tailscale tests its local API with a fake backend.
type fakeClient struct {
	mu         sync.Mutex
	paths      request.Paths
	version    int    // the manager's, for Features
	unit       string // what UnitByPID(FD) answers
	invocation string
	unitErr    error
	byPID      int   // UnitByPID calls
	byPIDFD    []int // the PIDs behind the pidfds UnitByPIDFD was asked about
	lists      int   // List calls
	statuses   int   // Status calls
	sessions   map[string]manager.Session
	launched   []request.Request
	planned    map[string]request.Request // by name: what Start starts
	stopped    []string
	// beforeLaunch, when set, runs at the start of each Start (outside
	// the fake's lock): a hook to hold a launch in flight.
	beforeLaunch func(request.Request)
	// afterStatus, when set, runs after each Status (outside the fake's
	// lock): a hook to change what a name holds right after a check.
	afterStatus func(name string)
	ids         int
}

// newInvocation makes an invocation id as systemd's look (hex of 16 bytes).
func (f *fakeClient) newInvocation() string {
	f.ids++
	return fmt.Sprintf("%032x", f.ids)
}

// Plan keeps the request for Start; the plan names it.
func (f *fakeClient) Plan(r request.Request) (manager.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.planned == nil {
		f.planned = map[string]request.Request{}
	}
	f.planned[r.Name] = r
	return manager.Plan{Spec: units.Spec{Name: r.Name, NameGiven: true, Profile: r.Profile, Workspace: r.Workspace, Command: r.Command}}, nil
}

func (f *fakeClient) Start(_ context.Context, plan manager.Plan) (manager.Session, error) {
	f.mu.Lock()
	r := f.planned[plan.Spec.Name]
	f.mu.Unlock()
	if f.beforeLaunch != nil {
		f.beforeLaunch(r)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launched = append(f.launched, r)
	if old, ok := f.sessions[r.Name]; ok && old.Running() {
		return manager.Session{}, errcode.SessionExists.New("%s runs", r.Name)
	}
	// As manager.Start does: the session's record, written at its start.
	_ = os.MkdirAll(f.paths.SessionDir(r.Name), 0o700)
	_ = records.Write(f.paths.SessionDir(r.Name), records.Record{Name: r.Name, Description: records.Description{Profile: r.Profile, Workspace: r.Workspace}, Started: time.Now()})
	s := manager.Session{Name: r.Name, Unit: "mosaic-" + r.Name + ".service", State: "active", InvocationID: f.newInvocation(),
		Description: records.Description{Profile: r.Profile, Workspace: r.Workspace, Command: r.Command}}
	f.sessions[r.Name] = s
	return s, nil
}

func (f *fakeClient) Stop(_ context.Context, name string, _ time.Duration, _ func(string)) (manager.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, name)
	s := f.sessions[name]
	s.State = "inactive"
	f.sessions[name] = s
	return s, nil
}

func (f *fakeClient) Status(ctx context.Context, name string) (manager.Session, error) {
	s, err := f.status(name)
	if f.afterStatus != nil {
		f.afterStatus(name)
	}
	return s, err
}

// StopInvocation is manager's: Stop only while name is that start.
func (f *fakeClient) StopInvocation(ctx context.Context, name, invocation string, timeout time.Duration) (manager.Session, error) {
	s, err := f.status(name)
	if err != nil {
		return s, err
	}
	if s.InvocationID != invocation {
		return manager.Session{}, errcode.NoSuchSession.New("%s is another start", name)
	}
	return f.Stop(ctx, name, timeout, nil)
}

func (f *fakeClient) status(name string) (manager.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses++
	s, ok := f.sessions[name]
	if !ok {
		return s, errcode.NoSuchSession.New("no %s", name)
	}
	return s, nil
}

func (f *fakeClient) ListInvocations(context.Context) ([]manager.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	var out []manager.Session
	for _, s := range f.sessions {
		out = append(out, s)
	}
	return out, nil
}

func (f *fakeClient) WatchSessions(func(unit, iface string, changed map[string]any)) {}

func (f *fakeClient) Features() units.Features { return units.FeaturesFor(f.version) }

func (f *fakeClient) UnitByPID(context.Context, uint32) (string, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byPID++
	return f.unit, f.invocation, f.unitErr
}

// UnitByPIDFD notes which process the pidfd it got stands for (its fdinfo's
// Pid line), as systemd would read it.
func (f *fakeClient) UnitByPIDFD(_ context.Context, pidfd int) (string, string, error) {
	info, _ := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", pidfd))
	pid := -1
	for _, l := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(l, "Pid:"); ok {
			pid, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.byPIDFD = append(f.byPIDFD, pid)
	return f.unit, f.invocation, f.unitErr
}

// end makes a session end as systemd announces it: up, then inactive.
func (r *rig) end(name string) {
	r.fake.mu.Lock()
	s := r.fake.sessions[name]
	s.State = "inactive"
	r.fake.sessions[name] = s
	r.fake.mu.Unlock()
	id, _ := hex.DecodeString(s.InvocationID)
	unit := "mosaic-" + name + ".service"
	r.b.observe(unit, "org.freedesktop.systemd1.Unit", map[string]any{"ActiveState": "active", "InvocationID": id})
	r.b.observe(unit, "org.freedesktop.systemd1.Unit", map[string]any{"ActiveState": "inactive"})
}

// rig is a bus over a fake client, with the user's directories in a
// temporary tree and a launching session "pm" whose workspace is ws.
type rig struct {
	t     *testing.T
	b     *bus
	fake  *fakeClient
	paths request.Paths
	ws    string
}

func newRig(t *testing.T, policy string) *rig {
	t.Helper()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	p := request.Paths{Home: filepath.Join(root, "home"), RuntimeDir: filepath.Join(root, "run"), StateRoot: filepath.Join(root, "state")}
	ws := filepath.Join(p.Home, "src")
	for _, d := range []string{filepath.Join(ws, "child"), p.RuntimeDir, filepath.Join(p.Home, ".config", "mosaic")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(p.Home, ".config"))
	if policy != "" {
		if err := os.WriteFile(PolicyFile(p.Home), []byte(policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(p.SessionDir("pm"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := records.Write(p.SessionDir("pm"), records.Record{Name: "pm", Description: records.Description{Workspace: ws, MayLaunch: true, Profile: "generic"}}); err != nil {
		t.Fatal(err)
	}
	log, _, err := OpenLaunchLog(LaunchLogPath(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	fake := &fakeClient{paths: p, version: 252, unit: "mosaic-pm.service", invocation: pmInvocation,
		sessions: map[string]manager.Session{"pm": {Name: "pm", State: "active", InvocationID: pmInvocation}}}
	return &rig{t: t, b: newBus(fake, log, p), fake: fake, paths: p, ws: ws}
}

// conn is a connected socket pair; the bus serves one end, the test
// speaks on the other (so SO_PEERCRED names this very process).
func (r *rig) conn() *net.UnixConn {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	mk := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "bus-test")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			r.t.Fatal(err)
		}
		return c.(*net.UnixConn)
	}
	server, client := mk(fds[0]), mk(fds[1])
	go r.b.serveConn(context.Background(), server)
	r.t.Cleanup(func() { client.Close() })
	return client
}

// ask sends one request line and returns the answer.
func (r *rig) ask(req any) Answer {
	r.t.Helper()

	c := r.conn()
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	return r.read(c)
}

func (r *rig) read(c *net.UnixConn) Answer {
	r.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var a Answer
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil {
		r.t.Fatalf("no answer: %v", err)
	}
	if err := json.Unmarshal(line, &a); err != nil {
		r.t.Fatalf("answer %q: %v", line, err)
	}
	return a
}

func wantCode(t *testing.T, a Answer, code string) {
	t.Helper()
	if a.OK || a.Error == nil || a.Error.Code != code {
		if a.Error != nil {
			t.Fatalf("answer %+v, want %s", *a.Error, code)
		}
		t.Fatalf("answer %+v, want %s", a, code)
	}
	if c, _ := errcode.Lookup(code); c.Exit != a.Error.Exit {
		t.Errorf("exit %d, want %d", a.Error.Exit, c.Exit)
	}
}

const policy = "[Launch]\nProfile=generic 1\nCommand=generic true\n"

// pmInvocation is the launching session's invocation id.
const pmInvocation = "0123456789abcdef0123456789abcdef"

func TestUserMayUseEveryVerb(t *testing.T) {
	r := newRig(t, "")
	r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit")
	if a := r.ask(Request{Verb: "list"}); !a.OK {
		t.Fatalf("list: %+v", a)
	}
	if a := r.ask(Request{Verb: "launch", Workspace: filepath.Join(r.ws, "child"), Command: []string{"anything"}, RW: []string{"/x"}}); !a.OK {
		t.Fatalf("the user's launch is bound by no policy: %+v", a)
	}
	if a := r.ask(Request{Verb: "stop", Name: "pm"}); !a.OK {
		t.Fatalf("stop: %+v", a)
	}
}

// A caller whose unit cannot be looked up is refused, whatever the error:
// only systemd's "in no unit" makes a caller the user.
func TestIdentityFailsClosed(t *testing.T) {
	for _, err := range []error{errcode.SystemdTimeout.New("timeout"), errcode.SystemdGone.New("closed"), errcode.SystemdError.New("odd")} {
		r := newRig(t, policy)
		r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", err
		wantCode(t, r.ask(Request{Verb: "list"}), "not-permitted")
		wantCode(t, r.ask(Request{Verb: "stop", Name: "pm"}), "not-permitted")
		if len(r.fake.stopped) != 0 {
			t.Errorf("%v: stopped %v", err, r.fake.stopped)
		}
	}
}

func TestSessionLaunchUnderPolicy(t *testing.T) {
	r := newRig(t, policy)
	child := filepath.Join(r.ws, "child")
	a := r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", Command: []string{"true"}})
	if !a.OK {
		t.Fatalf("launch: %+v", a)
	}
	if len(r.fake.launched) != 1 || r.fake.launched[0].Profile != "generic" {
		t.Fatalf("launched %+v", r.fake.launched)
	}
	var s manager.Session
	_ = json.Unmarshal(a.Result, &s)
	// Its own child it may list, inspect and stop; the others it may not.
	var list []manager.Session
	if a := r.ask(Request{Verb: "list"}); !a.OK || json.Unmarshal(a.Result, &list) != nil || len(list) != 1 || list[0].Name != s.Name {
		t.Errorf("list %+v: want only %s", a, s.Name)
	}
	if a := r.ask(Request{Verb: "status", Name: s.Name}); !a.OK {
		t.Errorf("status of its child: %+v", a)
	}
	wantCode(t, r.ask(Request{Verb: "status", Name: "pm"}), "not-permitted")
	wantCode(t, r.ask(Request{Verb: "stop", Name: "other"}), "not-permitted")
}

func TestSessionLaunchRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string
		req    Request
		code   string
	}{
		{"no policy", "", Request{Verb: "launch", Profile: "generic", Command: []string{"true"}}, "profile-not-allowed"},
		{"profile not in the policy", policy, Request{Verb: "launch", Profile: "codex", Command: []string{"codex"}}, "profile-not-allowed"},
		{"extra bind", policy, Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, RO: []string{"/etc"}}, "bind-not-allowed"},
		{"network", policy, Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, Network: "host"}, "bind-not-allowed"},
		{"may-launch", policy, Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, MayLaunch: true}, "not-permitted"},
		{"workspace outside", policy, Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, Workspace: "/tmp"}, "workspace-not-allowed"},
		{"relative workspace", policy, Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, Workspace: "src"}, "bad-workspace"},
		{"unknown verb", policy, Request{Verb: "exec"}, "bad-request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.policy)
			if tc.req.Workspace == "" {
				tc.req.Workspace = filepath.Join(r.ws, "child")
			}
			wantCode(t, r.ask(tc.req), tc.code)
			if len(r.fake.launched) != 0 {
				t.Errorf("launched %+v", r.fake.launched)
			}
		})
	}
}

// TestLaunchLendsNoKey: a launch lent ssh keys is refused, from a session
// (bind-not-allowed, under a policy that lets its launch through
// otherwise) and from the user (bad-ssh-lend), asked in the bus's JSON as
// any client would, and nothing is launched. Without launchLends the
// fields were ignored and both launched (checked by taking its call out).
func TestLaunchLendsNoKey(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		user       bool
		ask        map[string]any
	}{
		{"session, key", "bind-not-allowed", false, map[string]any{"lend_ssh_key": []string{"SHA256:x=github.com"}}},
		{"session, sign", "bind-not-allowed", false, map[string]any{"lend_ssh_sign": []string{"SHA256:x"}}},
		{"user, sign", "bad-ssh-lend", true, map[string]any{"lend_ssh_sign": []string{"SHA256:x"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := func() (*rig, map[string]any) {
				r := newRig(t, policy)
				if tc.user {
					r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit")
				}
				return r, map[string]any{"verb": "launch", "profile": "generic", "command": []string{"true"}, "workspace": filepath.Join(r.ws, "child")}
			}
			if r, req := rig(); !r.ask(req).OK {
				t.Fatal("the same launch without a key is refused")
			}
			r, req := rig()
			for k, v := range tc.ask {
				req[k] = v
			}
			wantCode(t, r.ask(req), tc.code)
			if len(r.fake.launched) != 0 {
				t.Errorf("launched %+v", r.fake.launched)
			}
		})
	}
}

// TestLaunchLendGit: the user may lend a git credential through the bus
// as mosaic start does; a session only a repository it was lent itself,
// for operations it was lent (push within force); anything else is
// bind-not-allowed (exit 3) and nothing is launched, and a lend that does
// not read is bad-git-lend. Asked in the bus's JSON as any client would.
// Shown to bite: with gitLendsWithin's check of the launcher's own lends
// taken out (every caller treated as the user), the six beyond-its-own
// cases launched and failed.
func TestLaunchLendGit(t *testing.T) {
	const repo = "https://git.example/me/repo"
	for _, tc := range []struct {
		name string
		user bool
		lent []string // the launcher's record's git_lent
		ask  []string
		code string // "" for a launch
	}{
		{"user", true, nil, []string{repo + "=fetch,push"}, ""},
		{"user, bad URL", true, nil, []string{"git@git.example:me/repo.git"}, "bad-git-lend"},
		{"user, bad op", true, nil, []string{repo + "=delete"}, "bad-git-lend"},
		{"session lent nothing", false, nil, []string{repo + "=fetch"}, "bind-not-allowed"},
		{"session, same lend", false, []string{repo + " for fetch, push"}, []string{repo}, ""},
		{"session, fewer ops", false, []string{repo + " for fetch, push"}, []string{repo + ".git=fetch"}, ""},
		{"session, push within force", false, []string{repo + " for fetch, force"}, []string{repo + "=push"}, ""},
		{"session, more ops", false, []string{repo + " for fetch"}, []string{repo}, "bind-not-allowed"},
		{"session, force beyond push", false, []string{repo + " for fetch, push"}, []string{repo + "=force"}, "bind-not-allowed"},
		{"session, another repo", false, []string{repo + " for fetch, push"}, []string{"https://git.example/me/other"}, "bind-not-allowed"},
		{"session, another host", false, []string{repo + " for fetch, push"}, []string{"https://git.example:8443/me/repo"}, "bind-not-allowed"},
		{"session, one of two beyond", false, []string{repo + " for fetch, push"}, []string{repo, "https://git.example/me/other=fetch"}, "bind-not-allowed"},
		// Spellings of the same repository are the same lend; spellings of
		// another, or of none, are not (each held before these cases were
		// added: no change was needed; with the check taken out as above,
		// the three new bind-not-allowed cases launched).
		{"session, same host spelled otherwise", false, []string{repo + " for fetch, push"}, []string{"https://GIT.example.:443/me/repo.git/=fetch"}, ""},
		{"session, owner's case", false, []string{repo + " for fetch, push"}, []string{"https://git.example/ME/repo"}, "bind-not-allowed"},
		{"session, user info", false, []string{repo + " for fetch, push"}, []string{"https://me@git.example/me/repo"}, "bad-git-lend"},
		{"session, escaped slash", false, []string{repo + " for fetch, push"}, []string{"https://git.example/me%2frepo"}, "bad-git-lend"},
		{"session, dot dot", false, []string{repo + " for fetch, push"}, []string{"https://git.example/me/repo/../other"}, "bad-git-lend"},
		{"session, other port", false, []string{repo + " for fetch, push"}, []string{"https://git.example:444/me/repo"}, "bind-not-allowed"},
		{"session, ops added to the same", false, []string{repo + " for fetch, push"}, []string{repo + "=fetch,push,force"}, "bind-not-allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, policy)
			if tc.user {
				r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit")
			}
			rec := records.Record{Name: "pm", Description: records.Description{Workspace: r.ws, MayLaunch: true, Profile: "generic", GitLent: tc.lent}}
			if err := records.Write(r.paths.SessionDir("pm"), rec); err != nil {
				t.Fatal(err)
			}
			a := r.ask(map[string]any{"verb": "launch", "profile": "generic", "command": []string{"true"}, "workspace": filepath.Join(r.ws, "child"), "lend_git": tc.ask})
			if tc.code != "" {
				wantCode(t, a, tc.code)
				if len(r.fake.launched) != 0 {
					t.Errorf("launched %+v", r.fake.launched)
				}
				return
			}
			if !a.OK {
				t.Fatalf("refused: %+v", a.Error)
			}
			if len(r.fake.launched) != 1 || !slices.Equal(r.fake.launched[0].LendGit, tc.ask) {
				t.Errorf("launched %+v, want it lent %v", r.fake.launched, tc.ask)
			}
			if len(r.fake.launched) == 1 && r.fake.launched[0].NoAgent == "" {
				t.Error("a bus launch may lend a profile's ssh keys (no NoAgent)")
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	r := newRig(t, policy)
	req := Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, Workspace: filepath.Join(r.ws, "child")}
	a := r.ask(req)
	if !a.OK {
		t.Fatalf("first launch: %+v", a)
	}
	var s manager.Session
	_ = json.Unmarshal(a.Result, &s)
	if err := os.MkdirAll(r.paths.SessionDir(s.Name), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = records.Write(r.paths.SessionDir(s.Name), records.Record{Name: s.Name, Description: records.Description{Profile: "generic"}})
	wantCode(t, r.ask(req), "capacity-full")
}

func TestSessionWithoutMayLaunch(t *testing.T) {
	r := newRig(t, policy)
	_ = records.Write(r.paths.SessionDir("pm"), records.Record{Name: "pm", Description: records.Description{Workspace: r.ws}})
	wantCode(t, r.ask(Request{Verb: "launch", Profile: "generic", Command: []string{"true"}, Workspace: filepath.Join(r.ws, "child")}), "not-permitted")
}

// TestUnknownFieldRefused: a request with a field the bus does not know
// (here a restriction a newer client might ask for) is bad-request, not a
// launch without it; so is a second value on the line. Seen to fail with
// json.Unmarshal, which drops the field: the request went on to the
// policy as a launch without it.
func TestUnknownFieldRefused(t *testing.T) {
	r := newRig(t, policy)
	for _, line := range []string{
		`{"verb":"launch","profile":"generic","command":["true"],"sandbox":"landlock"}`,
		`{"verb":"launch","profile":"generic","command":["true"]} {"verb":"list"}`,
	} {
		c := r.conn()
		if _, err := c.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		wantCode(t, r.read(c), "bad-request")
	}
}

func TestMalformedRequest(t *testing.T) {
	r := newRig(t, policy)
	c := r.conn()
	if _, err := c.Write([]byte("{not json\n")); err != nil {
		t.Fatal(err)
	}
	wantCode(t, r.read(c), "bad-request")
}
