package bus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"mosaic/internal/errcode"
	"mosaic/manager"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// Issue 14 item 1: where the manager has GetUnitByPIDFD (253+) the caller
// is looked up by a pidfd of the very process that connected; on 252 by
// PID, with the start-time check.
func TestIdentityByPIDFDWhereSystemdHasIt(t *testing.T) {
	r := newRig(t, policy)
	r.fake.version = 253
	if a := r.ask(Request{Verb: "list"}); !a.OK {
		t.Fatalf("list: %+v", a)
	}
	if len(r.fake.byPIDFD) != 1 || r.fake.byPIDFD[0] != os.Getpid() || r.fake.byPID != 0 {
		t.Fatalf("on 253: pidfd lookups of %v (want this process, %d), PID lookups %d (want 0)", r.fake.byPIDFD, os.Getpid(), r.fake.byPID)
	}
	// An error of the pidfd lookup is a refusal too.
	r.fake.unitErr = errcode.SystemdError.New("odd")
	wantCode(t, r.ask(Request{Verb: "list"}), "not-permitted")

	r = newRig(t, policy)
	r.fake.version = 252
	if a := r.ask(Request{Verb: "list"}); !a.OK {
		t.Fatalf("list: %+v", a)
	}
	if len(r.fake.byPIDFD) != 0 || r.fake.byPID != 1 {
		t.Fatalf("on 252: pidfd lookups %v (want none), PID lookups %d (want 1)", r.fake.byPIDFD, r.fake.byPID)
	}
}

// Issue 14 item 2: a launcher chooses no command: the launched session
// runs its profile's binary or the policy's Command=, with the profile's
// credentials the launcher must not read.
func TestLaunchRunsThePolicysCommand(t *testing.T) {
	leak := []string{"sh", "-c", `printf %s "$OPENAI_API_KEY" > leak`}
	r := newRig(t, "[Launch]\nProfile=codex 4\nProfile=generic 4\n")
	child := filepath.Join(r.ws, "child")
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "codex", Command: leak}), "command-not-allowed")
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "codex", Command: []string{"codex", "--yolo"}}), "command-not-allowed")
	// generic has no binary, and this policy names no command for it.
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic"}), "command-not-allowed")
	if len(r.fake.launched) != 0 {
		t.Fatalf("launched %+v", r.fake.launched)
	}
	if a := r.ask(Request{Verb: "launch", Workspace: child, Profile: "codex"}); !a.OK {
		t.Fatalf("launch of the profile's binary: %+v", a)
	}
	if a := r.ask(Request{Verb: "launch", Workspace: child, Command: []string{"codex"}}); !a.OK {
		t.Fatalf("launch naming the profile's binary itself: %+v", a)
	}
	for _, l := range r.fake.launched {
		if strings.Join(l.Command, " ") != "codex" || l.Profile != "codex" {
			t.Errorf("launched %q of profile %s, want codex's binary", l.Command, l.Profile)
		}
	}

	r = newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic sh -c 'make test'\n")
	child = filepath.Join(r.ws, "child")
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", Command: leak}), "command-not-allowed")
	if a := r.ask(Request{Verb: "launch", Workspace: filepath.Join(r.ws, "child"), Profile: "generic"}); !a.OK {
		t.Fatalf("launch: %+v", a)
	}
	if got := r.fake.launched[0].Command; len(got) != 3 || got[2] != "make test" {
		t.Errorf("launched %q, want the policy's sh -c 'make test'", got)
	}
	// The user outside any session is bound by no policy.
	r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit")
	if a := r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", Command: []string{"anything"}}); !a.OK {
		t.Fatalf("the user's launch: %+v", a)
	}
}

// Issue 14 item 3: a launcher may not take a name whose state (a kept
// home) it did not make; by default a launch gets a fresh name.
func TestLaunchMayNotTakeAnothersName(t *testing.T) {
	r := newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic true\n")
	child := filepath.Join(r.ws, "child")
	launch := func(name string) Answer {
		return r.ask(Request{Verb: "launch", Name: name, Workspace: child, Profile: "generic"})
	}
	// The user's ended session, its home kept for the user's next run.
	dir := r.paths.SessionDir("mine")
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = records.Write(dir, records.Record{Name: "mine", Started: time.Now()})
	wantCode(t, launch("mine"), "not-permitted")
	// State without a record is no one's to take either.
	_ = os.MkdirAll(r.paths.SessionDir("bare"), 0o700)
	wantCode(t, launch("bare"), "not-permitted")
	if len(r.fake.launched) != 0 {
		t.Fatalf("launched %+v", r.fake.launched)
	}

	// A fresh name by default.
	a := launch("")
	var s manager.Session
	if !a.OK || json.Unmarshal(a.Result, &s) != nil || s.Name == "" || !strings.HasPrefix(s.Name, "true-") {
		t.Fatalf("launch without a name: %+v", a)
	}
	// Its own child's name it may take again once the child ended...
	if a := launch("worker"); !a.OK {
		t.Fatalf("launch worker: %+v", a)
	}
	r.end("worker")
	if a := launch("worker"); !a.OK {
		t.Fatalf("relaunch of its own worker: %+v", a)
	}
	r.end("worker")
	// ...but not once the user has run a session of that name since.
	_ = records.Write(r.paths.SessionDir("worker"), records.Record{Name: "worker", Started: time.Now().Add(time.Second)})
	wantCode(t, launch("worker"), "not-permitted")
	// Nor may a later session of the launcher's name (another invocation).
	r2 := newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic true\n")
	child2 := filepath.Join(r2.ws, "child")
	if a := r2.ask(Request{Verb: "launch", Name: "w", Workspace: child2, Profile: "generic"}); !a.OK {
		t.Fatalf("launch w: %+v", a)
	}
	r2.end("w")
	r2.fake.invocation = "fedcba9876543210fedcba9876543210"
	wantCode(t, r2.ask(Request{Verb: "launch", Name: "w", Workspace: child2, Profile: "generic"}), "not-permitted")
	// A name that is no session name never reaches a path.
	wantCode(t, launch("../../.ssh"), "bad-name")
}

// Issue 14 item 4: ownership is of one start of a unit (its invocation id)
// and ends with it: a later session that reuses the name is not the
// launcher's to stop, inspect or list.
func TestOwnershipEndsWithTheSession(t *testing.T) {
	r := newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic true\n")
	child := filepath.Join(r.ws, "child")
	if a := r.ask(Request{Verb: "launch", Name: "c", Workspace: child, Profile: "generic"}); !a.OK {
		t.Fatalf("launch: %+v", a)
	}
	if a := r.ask(Request{Verb: "status", Name: "c"}); !a.OK {
		t.Fatalf("status of its own child: %+v", a)
	}
	r.end("c")
	wantCode(t, r.ask(Request{Verb: "status", Name: "c"}), "not-permitted")
	// The user starts a session that reuses the name.
	r.fake.mu.Lock()
	r.fake.sessions["c"] = manager.Session{Name: "c", State: "active", InvocationID: r.fake.newInvocation()}
	r.fake.mu.Unlock()
	wantCode(t, r.ask(Request{Verb: "stop", Name: "c"}), "not-permitted")
	wantCode(t, r.ask(Request{Verb: "status", Name: "c"}), "not-permitted")
	var list []manager.Session
	if a := r.ask(Request{Verb: "list"}); !a.OK || json.Unmarshal(a.Result, &list) != nil || len(list) != 0 {
		t.Errorf("list: %+v, want none", a)
	}
	if len(r.fake.stopped) != 0 {
		t.Fatalf("the launcher stopped %v", r.fake.stopped)
	}
	// Even without the end signal (the bus missed it), the unit of that
	// name now is another start, and not the launcher's.
	if a := r.ask(Request{Verb: "launch", Name: "d", Workspace: child, Profile: "generic"}); !a.OK {
		t.Fatalf("launch d: %+v", a)
	}
	r.fake.mu.Lock()
	r.fake.sessions["d"] = manager.Session{Name: "d", State: "active", InvocationID: r.fake.newInvocation()}
	r.fake.mu.Unlock()
	wantCode(t, r.ask(Request{Verb: "stop", Name: "d"}), "not-permitted")
	// A later session of the launcher's own name owns nothing of the first.
	if a := r.ask(Request{Verb: "launch", Name: "e", Workspace: child, Profile: "generic"}); !a.OK {
		t.Fatalf("launch e: %+v", *a.Error)
	}
	r.fake.invocation = "fedcba9876543210fedcba9876543210"
	wantCode(t, r.ask(Request{Verb: "stop", Name: "e"}), "not-permitted")
}

// A launcher's stop is of the start it launched, even when the name is
// taken by another session between the bus's check and its stop: the
// child ends and the user starts a session of that name right after the
// bus checked (a hook, not timing). Stopping by name then stopped the
// user's session.
func TestStopIsOfTheStartChecked(t *testing.T) {
	r := newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic true\n")
	if a := r.ask(Request{Verb: "launch", Name: "c", Workspace: filepath.Join(r.ws, "child"), Profile: "generic"}); !a.OK {
		t.Fatalf("launch: %+v", a)
	}
	var once sync.Once
	r.fake.afterStatus = func(name string) {
		once.Do(func() {
			r.fake.mu.Lock()
			r.fake.sessions[name] = manager.Session{Name: name, State: "active", InvocationID: r.fake.newInvocation()}
			r.fake.mu.Unlock()
		})
	}
	wantCode(t, r.ask(Request{Verb: "stop", Name: "c"}), "not-permitted")
	if len(r.fake.stopped) != 0 {
		t.Fatalf("the launcher's stop stopped the user's session that took the name: %v", r.fake.stopped)
	}
	// Without the replacement, the launcher's stop works.
	if a := r.ask(Request{Verb: "launch", Name: "d", Workspace: filepath.Join(r.ws, "child"), Profile: "generic"}); !a.OK {
		t.Fatalf("launch d: %+v", a)
	}
	if a := r.ask(Request{Verb: "stop", Name: "d"}); !a.OK || len(r.fake.stopped) != 1 {
		t.Fatalf("stop of its own child: %+v, stopped %v", a, r.fake.stopped)
	}
}

// A launcher could launch what the policy lets it with MemoryMax, TasksMax
// and CPUQuota of infinity (an unbounded session no user asked for), and a
// stop timeout of 1000 h (a logout waits that long for one that ignores
// SIGTERM). It may lower a launched session's limits, never raise them.
func TestLaunchedLimitsOnlyLower(t *testing.T) {
	r := newRig(t, "[Launch]\nProfile=generic 4\nCommand=generic true\n")
	child := filepath.Join(r.ws, "child")
	for _, l := range []units.LimitStrings{{MemoryMax: "infinity"}, {TasksMax: "infinity"}, {CPUQuota: "100000%"}, {MemoryMax: "64P"}} {
		wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", Limits: l}), "not-permitted")
	}
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", StopTimeout: "1000h"}), "not-permitted")
	if len(r.fake.launched) != 0 {
		t.Fatalf("launched %d sessions with raised limits", len(r.fake.launched))
	}
	if a := r.ask(Request{Verb: "launch", Workspace: child, Profile: "generic", Limits: units.LimitStrings{MemoryMax: "64M", TasksMax: "16", RuntimeMax: "1h"}, StopTimeout: "2s"}); !a.OK {
		t.Fatalf("a launch with lower limits: %+v", a.Error)
	}
}

// Issue 14 item 5: a request line is capped at 64 KiB: 8 MiB without a
// newline gets bad-request and a closed connection, and the bus allocates
// a fraction of what it was sent.
func TestLongLineRefusedWithFlatMemory(t *testing.T) {
	r := newRig(t, policy)
	c := r.conn()
	const sent = 8 << 20
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go func() {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for n := 0; n < sent; n += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return // the bus closed the connection
			}
		}
	}()
	wantCode(t, r.read(c), "bad-request")
	runtime.ReadMemStats(&after)
	grew := after.TotalAlloc - before.TotalAlloc
	if grew > 2<<20 {
		t.Errorf("the bus allocated %d KiB for a line of %d KiB", grew>>10, sent>>10)
	}
	t.Logf("the bus allocated %d KiB for a line of %d KiB (the bus before the cap: 24,684 KiB)", grew>>10, sent>>10)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	for {
		if _, err := c.Read(buf); err != nil {
			if err != io.EOF && !strings.Contains(err.Error(), "reset") {
				t.Errorf("after the refusal: %v, want the connection closed", err)
			}
			break
		}
	}
}

// Issue 14 item 5: an idle connection is closed; a session holds at most
// perCaller connections and a socket perListener.
func TestConnectionsBounded(t *testing.T) {
	r := newRig(t, policy)
	r.b.lim.idle = 100 * time.Millisecond
	c := r.conn()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("an idle connection: %v, want it closed", err)
	}

	r = newRig(t, policy)
	r.b.lim.perCaller = 2
	r.conn()
	r.conn()
	eventually(t, func() bool {
		r.b.mu.Lock()
		defer r.b.mu.Unlock()
		return r.b.conns["pm@"+pmInvocation] == 2
	})
	wantCode(t, r.read(r.conn()), "bus-busy")

	r = newRig(t, policy)
	r.b.lim.perListener = 1
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(r.paths.RuntimeDir, "t.sock"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go r.b.accept(context.Background(), l)
	first, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	wantCode(t, r.read(second.(*net.UnixConn)), "bus-busy")
}

func eventually(t *testing.T, ok func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}

// Issue 14 item 5: what a refusal logs is clipped, so no request can make
// a line the log cannot be read back with.
func TestLoggedFieldsClipped(t *testing.T) {
	r := newRig(t, policy)
	long := strings.Repeat("é", 30<<10) // 60 KiB, under the line cap
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: filepath.Join(r.ws, "child"), Profile: "generic", Command: []string{"sh", "-c", long}}), "command-not-allowed")
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: "/" + long, Profile: "generic"}), "workspace-not-allowed")
	b, _ := os.ReadFile(LaunchLogPath(r.paths))
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if len(line) > 8<<10 {
			t.Errorf("a logged line of %d bytes", len(line))
		}
	}
	if !strings.Contains(string(b), "bytes cut]") {
		t.Errorf("the log does not mark what it cut:\n%.300s", b)
	}
	_, events, err := OpenLaunchLog(LaunchLogPath(r.paths))
	if err != nil || len(events) != 2 {
		t.Fatalf("reading the log back: %d events, %v", len(events), err)
	}
}

// Issue 14 item 5: the log reader skips a torn line (a crash mid-append),
// an overlong one (a 17 MB refused command from an older bus) and an odd
// event, with a warning each, and still refuses a line no bus wrote.
func TestLaunchLogSurvivesDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "launches.jsonl")
	event := func(e LogEvent) string {
		e.Time = time.Now().UTC()
		b, _ := json.Marshal(e)
		return string(b) + "\n"
	}
	launch := event(LogEvent{Event: "launch", Session: "a", By: "user"})
	huge := event(LogEvent{Event: "refused", Verb: "launch", Description: records.Description{Command: []string{strings.Repeat("x", 17<<20)}}, Code: "bind-not-allowed"})
	odd := "{}\n[1,2]\n\"x\"\n{\"event\":\"launch\",\"session\":\"../../x\"}\n"
	torn := event(LogEvent{Event: "end", Session: "a", Result: "success"})
	torn = torn[:len(torn)/2]
	if err := os.WriteFile(path, []byte(launch+huge+odd+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	l, events, err := OpenLaunchLog(path)
	if err != nil {
		t.Fatalf("a log with a torn last line, an overlong line and odd events: %v", err)
	}
	if len(events) != 1 || events[0].Session != "a" || len(l.Warnings) != 6 {
		t.Fatalf("events %+v, warnings %q: want the one launch and 6 warnings", events, l.Warnings)
	}
	// The next event starts a line of its own; the torn one, now in the
	// middle, is still skipped.
	if err := l.Append(LogEvent{Event: "end", Session: "a", Result: "success"}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, events, err = OpenLaunchLog(path)
	if err != nil || len(events) != 2 || events[1].Event != "end" {
		t.Fatalf("after an append: %+v %v", events, err)
	}
	l.Close()
	if open, _ := replay(events); len(open) != 0 {
		t.Errorf("open launches %v, want none", open)
	}
	// A complete line that is not JSON is no bus's: stop and say so.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	f.WriteString("not json\n" + launch)
	f.Close()
	if _, _, err := OpenLaunchLog(path); errcode.Of(err).Code != "bad-launch-log" || !strings.Contains(err.Error(), "move it aside") {
		t.Errorf("a line that is not JSON: %v, want bad-launch-log", err)
	}
}

// Issue 14 item 6: a launch in flight holds no lock: another launch goes
// through meanwhile; it counts against its profile's capacity; and the
// bus, told to stop, waits for it and its record.
func TestSlowLaunchBlocksNoOther(t *testing.T) {
	r := newRig(t, "[Launch]\nProfile=generic 1\nCommand=generic true\n")
	child := filepath.Join(r.ws, "child")
	release, entered := make(chan struct{}), make(chan struct{}, 4)
	r.fake.beforeLaunch = func(req request.Request) {
		if req.Name == "slow" {
			entered <- struct{}{}
			<-release
		}
	}
	slow := make(chan Answer, 1)
	go func() { slow <- r.ask(Request{Verb: "launch", Name: "slow", Workspace: child, Profile: "generic"}) }()
	<-entered
	// The profile's one place is taken by the launch in flight.
	wantCode(t, r.ask(Request{Verb: "launch", Name: "second", Workspace: child, Profile: "generic"}), "capacity-full")
	// The user's launch goes through while the first still starts.
	userConn := func() Answer {
		r.fake.mu.Lock()
		r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit")
		r.fake.mu.Unlock()
		return r.ask(Request{Verb: "launch", Name: "users", Workspace: child, Command: []string{"true"}})
	}
	if a := userConn(); !a.OK {
		t.Fatalf("a launch while another starts: %+v", a)
	}
	stopped := make(chan struct{})
	go func() { r.b.shutdown(); close(stopped) }()
	eventually(t, func() bool { r.b.mu.Lock(); defer r.b.mu.Unlock(); return r.b.closing })
	select {
	case <-stopped:
		t.Fatal("the bus stopped with a launch in flight")
	case <-time.After(100 * time.Millisecond):
	}
	wantCode(t, r.ask(Request{Verb: "launch", Name: "late", Workspace: child, Command: []string{"true"}}), "bus-error")
	close(release)
	<-stopped
	if a := <-slow; !a.OK {
		t.Fatalf("the slow launch: %+v", a)
	}
	_, events, _ := OpenLaunchLog(LaunchLogPath(r.paths))
	var seen []string
	for _, e := range events {
		if e.Session == "slow" {
			seen = append(seen, e.Event)
		}
	}
	if strings.Join(seen, ",") != "launching,launch" {
		t.Errorf("slow's events %v, want its intent, then its launch", seen)
	}
}

// Issue 18 item 9: a restarted bus adopts from one List: it completes an
// intent whose session runs, restores who owns what (by invocation id), and
// records the end of what ended while it was down.
func TestAdoptFromOneList(t *testing.T) {
	r := newRig(t, policy)
	inv := func(n int) string { return fmt.Sprintf("%032x", 1000+n) }
	for _, e := range []LogEvent{
		{Event: "launching", Session: "half", By: "user"},
		{Event: "launching", Session: "kid", By: "session pm", ByInvocation: pmInvocation, Description: records.Description{Profile: "generic"}},
		{Event: "launch", Session: "kid", Invocation: inv(1), By: "session pm", ByInvocation: pmInvocation, Description: records.Description{Profile: "generic"}},
		{Event: "launch", Session: "gone", Invocation: inv(2), By: "user"},
		{Event: "launch", Session: "reused", Invocation: inv(3), By: "session pm", ByInvocation: pmInvocation, Description: records.Description{Profile: "generic"}},
	} {
		if err := r.b.log.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	r.fake.sessions["half"] = manager.Session{Name: "half", State: "active", InvocationID: inv(4)}
	r.fake.sessions["kid"] = manager.Session{Name: "kid", State: "active", InvocationID: inv(1)}
	r.fake.sessions["reused"] = manager.Session{Name: "reused", State: "active", InvocationID: inv(5)}
	_, events, err := OpenLaunchLog(LaunchLogPath(r.paths))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.b.adopt(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	if r.fake.lists != 1 || r.fake.statuses != 0 {
		t.Errorf("adopting took %d List and %d Status calls, want one List", r.fake.lists, r.fake.statuses)
	}
	_, events, _ = OpenLaunchLog(LaunchLogPath(r.paths))
	got := map[string]string{}
	for _, e := range events[5:] {
		got[e.Session] += e.Event
		if !e.Recovered {
			t.Errorf("%+v is not marked recovered", e)
		}
	}
	if got["half"] != "launch" || got["gone"] != "end" || got["reused"] != "end" || got["kid"] != "" {
		t.Errorf("recovered events %v: want half launched, gone and reused ended", got)
	}
	if a := r.ask(Request{Verb: "status", Name: "kid"}); !a.OK {
		t.Errorf("the launcher lost its child across the restart: %+v", a)
	}
	wantCode(t, r.ask(Request{Verb: "status", Name: "reused"}), "not-permitted")
}

// A log that cannot be written (a full disk, which a session can cause)
// does not keep the bus from starting; launches are then refused, since
// each records its intent first.
func TestUnwritableLogStopsNoStart(t *testing.T) {
	r := newRig(t, policy)
	_ = r.b.log.Append(LogEvent{Event: "launch", Session: "gone", By: "user"})
	_, events, _ := OpenLaunchLog(LaunchLogPath(r.paths))
	r.b.log.f.Close()
	if err := r.b.adopt(context.Background(), events); err != nil {
		t.Fatalf("adopt with a log it cannot write: %v", err)
	}
	wantCode(t, r.ask(Request{Verb: "launch", Workspace: filepath.Join(r.ws, "child"), Profile: "generic"}), "launch-log")
	if len(r.fake.launched) != 0 {
		t.Errorf("launched without a record: %+v", r.fake.launched)
	}
}

// Issue 14 item 1, on systemd 252: the connecting process exits and its
// PID is reused while systemd looks it up; the bus sees the start time
// change across the lookup and refuses, whatever unit systemd named.
func TestPIDReusedDuringLookupRefused(t *testing.T) {
	r := newRig(t, policy)
	r.fake.unit, r.fake.invocation, r.fake.unitErr = "", "", errcode.NoSuchSession.New("in no unit") // "the user"
	reads := 0
	r.b.procStart = func(pid int) (string, bool) {
		reads++
		return fmt.Sprint(reads), true // another process at each read
	}
	wantCode(t, r.ask(Request{Verb: "stop", Name: "pm"}), "not-permitted")
	r.b.procStart = func(int) (string, bool) { return "", false } // gone before the lookup
	wantCode(t, r.ask(Request{Verb: "stop", Name: "pm"}), "not-permitted")
	if len(r.fake.stopped) != 0 {
		t.Errorf("stopped %v for a caller the bus could not tell", r.fake.stopped)
	}
	// With the start time steady, the same caller is the user.
	r.b.procStart = func(int) (string, bool) { return "42", true }
	if a := r.ask(Request{Verb: "stop", Name: "pm"}); !a.OK {
		t.Errorf("stop by the user: %+v", a)
	}
}

// emfileOnce is a listener whose first Accept fails as a process out of
// descriptors sees it (EMFILE).
type emfileOnce struct {
	net.Listener
	failed atomic.Bool
}

func (l *emfileOnce) Accept() (net.Conn, error) {
	if !l.failed.Swap(true) {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// An Accept that fails (EMFILE: the bus out of descriptors for a moment)
// does not end the bus's loop on that socket, as it did before acceptloop
// with the bus up and the socket unserved: the connection made meanwhile
// is answered (here, bus-busy: the socket takes none).
func TestAcceptOutlivesEMFILE(t *testing.T) {
	r := newRig(t, policy)
	r.b.lim.perListener = 0
	l, err := net.Listen("unix", filepath.Join(r.paths.RuntimeDir, "t.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go r.b.accept(context.Background(), &emfileOnce{Listener: l})
	c, err := net.Dial("unix", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wantCode(t, r.read(c.(*net.UnixConn)), "bus-busy")
}
