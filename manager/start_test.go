package manager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/internal/credvar"
	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/session"
	"mosaic/units"
)

// A plan's start claims its name, writes its state and its record, hands
// systemd its credentials in a file that exists only in mosaic's memory
// while the start job runs (credentials.Hold, 31.9: nothing of it on disk)
// and lets it go once the job is over; the promise gets the PID namespace
// this manager gives (257: PrivatePIDs).
func TestStartWritesStateAndDropsCredentials(t *testing.T) {
	h := testHost(t)
	t.Setenv("MY_TOKEN", "s3cret")
	plan := testPlan(t, h, request.Request{Name: "one", Credentials: []string{"MY_TOKEN"}})
	f := &fakeSystemd{}
	var during, target, path string
	f.onStart = func(unit string, props []sd.Property) (string, error) {
		for _, p := range props {
			if p.Name == "EnvironmentFiles" { // [{PATH true}]
				path = strings.Fields(strings.Trim(fmt.Sprint(p.Value.Value()), "[{}]"))[0]
			}
		}
		b, _ := os.ReadFile(path)
		during = string(b)
		target, _ = os.Readlink(path)
		return "done", nil
	}
	m := fakeManager(t, f)
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	spec := l.spec
	if path == "" || path != l.launch.CredentialFile {
		t.Fatalf("the unit's credential file %q, the launch's %q", path, l.launch.CredentialFile)
	}
	if l.result != "done" || len(f.started) != 1 || f.started[0] != "mosaic-one.service" {
		t.Fatalf("result %q, started %v", l.result, f.started)
	}
	// The unit names a link (credentials.Hold), gone after the start, to
	// the /proc path of the file in memory.
	if !strings.HasPrefix(target, "/proc/") || during != "MY_TOKEN=\"s3cret\"\n" {
		t.Errorf("the credential file %s -> %s during the start job held %q, want the token, in memory", path, target, during)
	}
	if l, err := os.Readlink(target); err == nil && strings.HasPrefix(l, "/memfd:mosaic-credentials-") {
		t.Errorf("the credentials are still held after the start job")
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("the unit's credential path %s names something after the start job: %v", path, err)
	}
	if found, _ := filepath.Glob(filepath.Join(h.Paths.RuntimeDir, "mosaic", "credentials", "*")); len(found) > 0 {
		t.Errorf("credentials on disk: %v", found)
	}
	rec, ok := records.Read(spec.StateDir)
	if !ok || rec.Name != "one" || rec.Credentials[0] != "MY_TOKEN" || rec.Workspace != spec.Workspace {
		t.Errorf("record %+v (%v): want the session's description", rec, ok)
	}
	var argv string
	for _, p := range l.sent {
		if p.Name == "ExecStartEx" {
			argv = fmt.Sprint(p.Value.Value())
		}
	}
	if !strings.Contains(argv, `"pids":true`) {
		t.Errorf("a 257 manager's service: the promise does not ask for the PID namespace PrivatePIDs gives: %s", argv)
	}
	if plan.Spec.Promise.PIDs || plan.Spec.Name != spec.Name {
		t.Error("the start changed the plan")
	}
}

// A name systemd has running is refused before anything is made: no state,
// no lock file left, no start asked for. One it holds as failed is cleared
// (ResetFailedUnit) and started.
func TestStartClaimsTheName(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{Name: "busy"})
	f := &fakeSystemd{units: map[string]string{"mosaic-busy.service": "active"}}
	m := fakeManager(t, f)
	spec := plan.Spec
	_, err := m.start(context.Background(), plan, units.Launch{}, false)
	if !errors.Is(err, errcode.SessionExists.Target()) {
		t.Fatalf("start of a running name: %v, want session-exists", err)
	}
	if len(f.started) != 0 {
		t.Errorf("started %v anyway", f.started)
	}
	for _, p := range []string{spec.StateDir, filepath.Join(h.Paths.StateRoot, "locks", "busy")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left after the refusal (%v)", p, err)
		}
	}

	f.units["mosaic-busy.service"] = "failed"
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatalf("start of a failed name: %v", err)
	}
	l.release()
	if len(f.reset) == 0 || f.reset[0] != "mosaic-busy.service" {
		t.Errorf("reset %v: want the failed unit cleared first", f.reset)
	}
}

// A made-up name whose state directory another session has is made up
// again (claim's rename), with every path that holds it.
func TestStartRenamesAMadeUpNameThatIsTaken(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{})
	if plan.Spec.NameGiven {
		t.Fatal("a request without a name: the plan says it was given")
	}
	taken := plan.Spec.Name
	if err := os.MkdirAll(plan.Spec.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	m := fakeManager(t, &fakeSystemd{})
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	spec := l.spec
	if spec.Name == taken || filepath.Base(spec.StateDir) != spec.Name || filepath.Base(filepath.Dir(l.launch.InitArgsFile)) != spec.Name || l.unit != units.UnitName(spec.Name) {
		t.Errorf("renamed %s to %s: state %s, init args %s, unit %s", taken, spec.Name, spec.StateDir, l.launch.InitArgsFile, l.unit)
	}
	if plan.Spec.Name != taken {
		t.Errorf("the rename changed the plan: %s", plan.Spec.Name)
	}
}

// A start systemd refuses (UnitExists) is undone: the state it made goes,
// and the refusal is session-exists, keeping systemd's answer as its cause.
func TestStartRefusedIsUndone(t *testing.T) {
	h := testHost(t)
	plan := testPlan(t, h, request.Request{Name: "late"})
	exists := dbus.Error{Name: errUnitExists, Body: []any{"unit exists"}}
	f := &fakeSystemd{onStart: func(string, []sd.Property) (string, error) { return "", exists }}
	m := fakeManager(t, f)
	spec := plan.Spec
	_, err := m.start(context.Background(), plan, units.Launch{}, false)
	if !errors.Is(err, errcode.SessionExists.Target()) {
		t.Fatalf("start: %v, want session-exists", err)
	}
	if _, err := os.Lstat(spec.StateDir); !os.IsNotExist(err) {
		t.Errorf("the state directory is left after a refused start (%v)", err)
	}
}

// A start job whose end never comes: a cancelled context ends the wait as
// interrupted, a lost connection as systemd-gone.
func TestStartUnitWaitEnds(t *testing.T) {
	f := &fakeSystemd{onStart: func(string, []sd.Property) (string, error) { return "", nil }}
	m := fakeManager(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := m.startUnit(ctx, "mosaic-x.service", nil, nil, nil); !errors.Is(err, errcode.Interrupted.Target()) {
		t.Errorf("cancelled: %v, want interrupted", err)
	}
	closed := make(chan struct{})
	m.closed = closed
	time.AfterFunc(20*time.Millisecond, func() { close(closed) })
	if _, err := m.startUnit(context.Background(), "mosaic-x.service", nil, nil, nil); !errors.Is(err, errcode.SystemdGone.Target()) {
		t.Errorf("connection gone: %v, want systemd-gone", err)
	}
}

// A plan names its secrets apart from its spec, which holds only their
// names: nothing of a value reaches what is sent to systemd.
func TestPlanKeepsSecretsApart(t *testing.T) {
	h := testHost(t)
	t.Setenv("MY_TOKEN", "s3cret-value")
	plan := testPlan(t, h, request.Request{Name: "s", Credentials: []string{"MY_TOKEN"}})
	if len(plan.Secrets) != 1 || plan.Secrets[0] != (credvar.Var{Name: "MY_TOKEN", Value: "s3cret-value"}) {
		t.Fatalf("secrets %v", plan.Secrets)
	}
	for _, p := range units.Render(plan.Spec, units.Launch{CredentialFile: "/proc/1/fd/3"}, units.FeaturesFor(257)).Properties {
		if strings.Contains(p.Value.String(), "s3cret-value") {
			t.Errorf("property %s holds the secret", p.Name)
		}
	}
}

// A start's status describes the session from the record its claim
// wrote, held in memory, instead of reading it back (issue 32: the
// read-back was 3% of a start's CPU): what it shows is what a status that
// reads the file shows.
func TestStartRecordIsTheOneOnDisk(t *testing.T) {
	h := testHost(t)
	t.Setenv("MY_TOKEN", "s3cret")
	plan := testPlan(t, h, request.Request{Name: "held", Credentials: []string{"MY_TOKEN"}})
	m := fakeManager(t, &fakeSystemd{})
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	spec := l.spec
	onDisk, err := records.ReadChecked(spec.StateDir)
	if err != nil || l.record == nil {
		t.Fatalf("record on disk: %v; held: %v", err, l.record)
	}
	var held, read Session
	session.Describe(*l.record, &held)
	session.Describe(onDisk, &read)
	hb, _ := json.Marshal(held)
	rb, _ := json.Marshal(read)
	if string(hb) != string(rb) {
		t.Errorf("the start's record describes\n%s\nthe one on disk\n%s", hb, rb)
	}
	if !l.record.Started.Equal(onDisk.Started) {
		t.Errorf("started %v held, %v on disk", l.record.Started, onDisk.Started)
	}
}
