package manager

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/units"
)

// stopFixture is a fake systemd with session x's service running (its
// record written), and a Manager on it.
func stopFixture(t *testing.T) (*fakeSystemd, *Manager) {
	t.Helper()
	h := testHost(t)
	f := &fakeSystemd{}
	sessionUnit(f, "mosaic-x.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(0), "ExecMainStartTimestamp": uint64(1)})
	if err := records.Write(mkdir(t, h.Paths.SessionDir("x")), records.Record{Name: "x", Started: time.Now(), Description: records.Description{Command: []string{"sleep", "1d"}, Workspace: "/w"}}); err != nil {
		t.Fatal(err)
	}
	m := fakeManager(t, f)
	m.paths = h.Paths
	return f, m
}

// progressLog collects what Stop tells of its waits.
type progressLog struct {
	mu    sync.Mutex
	lines []string
}

func (p *progressLog) add(s string) { p.mu.Lock(); p.lines = append(p.lines, s); p.mu.Unlock() }

// A stop of a session that runs asks systemd to stop its unit (once),
// waits for the end systemd announces, and reports it with what the
// records say; the ended unit is then cleared (ResetFailedUnit).
func TestStopWaitsForTheEnd(t *testing.T) {
	f, m := stopFixture(t)
	f.onStop = func(unit string) {
		f.announce(unit, unitIface, map[string]any{"ActiveState": "deactivating", "SubState": "stop-sigterm"})
		f.ended(unit, 143)
	}
	var p progressLog
	s, err := m.Stop(context.Background(), "x", 10*time.Second, p.add)
	if err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.State != "inactive" || s.ExitStatus == nil || *s.ExitStatus != 143 || s.Workspace != "/w" {
		t.Errorf("stopped session %+v: want it ended, exit 143, described by its record", s)
	}
	if !reflect.DeepEqual(f.stops, []string{"mosaic-x.service"}) || len(f.kills) != 0 || !reflect.DeepEqual(f.reset, []string{"mosaic-x.service"}) {
		t.Errorf("stops %v, kills %v, resets %v: want one stop, no kill, one reset", f.stops, f.kills, f.reset)
	}
	if !reflect.DeepEqual(p.lines, []string{"SIGTERM sent; SIGKILL in 10s"}) {
		t.Errorf("progress %q", p.lines)
	}
}

// A session that does not end at SIGTERM is sent SIGKILL once the
// stop's timeout has passed, and the stop still waits for its end.
func TestStopKillsAfterTheTimeout(t *testing.T) {
	f, m := stopFixture(t)
	f.holdStop = true
	f.onKill = func(unit string, signal int32) {
		if signal != int32(unix.SIGKILL) {
			return
		}
		f.mu.Lock()
		done := f.heldStop
		f.mu.Unlock()
		go func() {
			f.announce(unit, serviceIface, map[string]any{"Result": "signal", "ExecMainCode": int32(2), "ExecMainStatus": int32(unix.SIGKILL)})
			f.announce(unit, unitIface, map[string]any{"ActiveState": "failed", "SubState": "failed"})
			done <- "done"
		}()
	}
	var p progressLog
	s, err := m.Stop(context.Background(), "x", 50*time.Millisecond, p.add)
	if err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.Signal == "" {
		t.Errorf("killed session %+v: want it ended by a signal", s)
	}
	if want := []string{fmt.Sprintf("mosaic-x.service %d", unix.SIGKILL)}; !reflect.DeepEqual(f.kills, want) {
		t.Errorf("kills %v, want %v", f.kills, want)
	}
	if want := []string{"SIGTERM sent; SIGKILL in 50ms", "still running after 50ms: SIGKILL sent"}; !reflect.DeepEqual(p.lines, want) {
		t.Errorf("progress %q, want %q", p.lines, want)
	}
}

// What a stop decides before it waits: a session that is not running is
// reported as it is (no StopUnit); one that ended between its status and
// the stop (systemd: no such unit) is reported as ended; any other answer
// is systemd's error, classified (a missed deadline, one mosaic did not
// expect); a name no session has is no-such-session. Every path clears
// the unit of a session it found.
func TestStopDecides(t *testing.T) {
	for _, c := range []struct {
		name     string
		running  bool
		stopErr  error
		wantCode string // "" for no error
		wantStop bool
	}{
		{"not running", false, nil, "", false},
		{"ended meanwhile", true, dbus.Error{Name: errNoSuchUnit, Body: []any{"gone"}}, "", true},
		{"systemd too slow", true, fmt.Errorf("call: %w", context.DeadlineExceeded), errcode.SystemdTimeout.Name, true},
		{"refused", true, dbus.Error{Name: "org.freedesktop.DBus.Error.AccessDenied", Body: []any{"no"}}, errcode.SystemdError.Name, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, m := stopFixture(t)
			ended := func() {
				sessionUnit(f, "mosaic-x.service", "inactive", "dead", map[string]any{"Result": "success", "MainPID": uint32(0), "ExecMainStartTimestamp": uint64(1),
					"ExecMainExitTimestamp": uint64(2), "ExecMainCode": int32(1), "ExecMainStatus": int32(0)})
			}
			if !c.running {
				ended()
			}
			f.stopErr = c.stopErr
			f.onStop = func(string) {
				if c.stopErr != nil && c.wantCode == "" {
					ended() // it ended by itself before systemd took the stop
				}
			}
			s, err := m.Stop(context.Background(), "x", time.Second, nil)
			switch {
			case c.wantCode == "" && err != nil:
				t.Fatal(err)
			case c.wantCode == "" && (s.Running() || s.ExitStatus == nil || *s.ExitStatus != 0):
				t.Errorf("session %+v: want it reported ended, exit 0", s)
			case c.wantCode != "" && errcode.Of(err).Code != c.wantCode:
				t.Errorf("error %v (%s), want %s", err, errcode.Of(err).Code, c.wantCode)
			}
			if (len(f.stops) == 1) != c.wantStop || len(f.stops) > 1 {
				t.Errorf("stops %v, want a stop: %v", f.stops, c.wantStop)
			}
			if !reflect.DeepEqual(f.reset, []string{"mosaic-x.service"}) {
				t.Errorf("resets %v, want the unit cleared once", f.reset)
			}
		})
	}
	_, m := stopFixture(t)
	if _, err := m.Stop(context.Background(), "nobody", time.Second, nil); !errors.Is(err, errcode.NoSuchSession.Target()) {
		t.Errorf("stop of no session: %v", err)
	}
}

// StopInvocation stops only the start it names: another invocation of
// the name, or none given, is no-such-session and nothing is stopped.
func TestStopInvocationOnlyThatStart(t *testing.T) {
	f, m := stopFixture(t)
	for _, inv := range []string{"", "abce", "ABCD"} {
		if _, err := m.StopInvocation(context.Background(), "x", inv, time.Second); !errors.Is(err, errcode.NoSuchSession.Target()) || !strings.Contains(err.Error(), "no longer the one") {
			t.Errorf("invocation %q: %v, want no-such-session", inv, err)
		}
	}
	if len(f.stops) != 0 {
		t.Fatalf("stopped %v for another invocation", f.stops)
	}
	f.onStop = func(unit string) { f.ended(unit, 0) }
	if _, err := m.StopInvocation(context.Background(), "x", "abcd", time.Second); err != nil || len(f.stops) != 1 {
		t.Errorf("the named invocation: %v, stops %v", err, f.stops)
	}
}

// A stop returns once the session's brokers still up are down too: it
// waits for the end of the egress proxy systemd is stopping
// (StopWhenUnneeded), and asks nothing of one already down. Without the
// wait, a loaded machine showed the proxy in stop-sigterm after the stop
// returned.
func TestStopWaitsForItsBrokers(t *testing.T) {
	f, m := stopFixture(t)
	f.mu.Lock()
	f.units["mosaic-x-egress.service"] = "deactivating"
	f.units["mosaic-x-pty.service"] = "inactive"
	f.mu.Unlock()
	var proxyDown atomic.Bool
	f.onStop = func(unit string) {
		f.ended(unit, 143)
		time.Sleep(50 * time.Millisecond)
		proxyDown.Store(true)
		f.announce("mosaic-x-egress.service", unitIface, map[string]any{"ActiveState": "inactive", "SubState": "dead"})
	}
	if _, err := m.Stop(context.Background(), "x", time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if !proxyDown.Load() {
		t.Error("the stop returned before the session's egress proxy was down")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if want := []string{"mosaic-x.service"}; !reflect.DeepEqual(f.stops, want) {
		t.Errorf("stops %v, want %v", f.stops, want)
	}
}

// A start of a name whose last session's egress proxy is still stopping
// waits for it to be down (its unit's name would be taken when this start
// makes its own); a running session of the name is still refused.
func TestClaimWaitsForStoppingBrokers(t *testing.T) {
	f, m := stopFixture(t)
	f.mu.Lock()
	delete(f.units, "mosaic-x.service")
	f.units["mosaic-x-egress.service"] = "deactivating"
	f.mu.Unlock()
	var proxyDown atomic.Bool
	go func() {
		time.Sleep(50 * time.Millisecond)
		proxyDown.Store(true)
		f.announce("mosaic-x-egress.service", unitIface, map[string]any{"ActiveState": "inactive", "SubState": "dead"})
	}()
	spec := units.Spec{Name: "x", NameGiven: true}
	if err := m.claimName(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	if !proxyDown.Load() {
		t.Error("the name was claimed while its last proxy was still stopping")
	}
	f.mu.Lock()
	f.units["mosaic-x.service"] = "active"
	f.mu.Unlock()
	if err := m.claimName(context.Background(), spec); !errors.Is(err, errcode.SessionExists.Target()) {
		t.Errorf("claim of a running session's name: %v", err)
	}
}
