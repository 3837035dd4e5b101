package manager

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/acceptloop"
	"mosaic/internal/errcode"
	"mosaic/manager/records"
	"mosaic/sandbox/egress"
	"mosaic/units"
)

const (
	unitIface    = "org.freedesktop.systemd1.Unit"
	serviceIface = "org.freedesktop.systemd1.Service"
	scopeIface   = "org.freedesktop.systemd1.Scope"
)

// sessionUnit gives f a session's unit as systemd would answer for it:
// its Unit properties (a mosaic description), and those of its kind's
// interface.
func sessionUnit(f *fakeSystemd, unit, state, sub string, kindProps map[string]any) {
	iface := serviceIface
	if strings.HasSuffix(unit, units.ScopeSuffix) {
		iface = scopeIface
	}
	f.setProps(unit, unitIface, map[string]any{"LoadState": "loaded", "Description": units.DescriptionPrefix + "x",
		"ActiveState": state, "SubState": sub, "ActiveEnterTimestamp": uint64(1_700_000_000_000_000), "InvocationID": []byte{0xab, 0xcd}})
	f.setProps(unit, iface, kindProps)
}

// Status reads a session from its unit's properties: a running service
// with its main process, processes, limits (systemd's "infinity" is no
// limit) and invocation; a scope when no service of the name is loaded;
// its records for a unit systemd has collected; and no-such-session for a
// name no mosaic unit or record has, or a unit of another description.
func TestStatusFromProperties(t *testing.T) {
	h := testHost(t)
	f := &fakeSystemd{pids: map[string][]uint32{"mosaic-run.service": {41, 42}}}
	sessionUnit(f, "mosaic-run.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(41),
		"ExecMainStartTimestamp": uint64(1_700_000_000_000_000), "MemoryMax": uint64(1 << 30), "TasksMax": ^uint64(0), "CPUQuotaPerSecUSec": uint64(500_000)})
	sessionUnit(f, "mosaic-sc.scope", "active", "running", map[string]any{"Result": "success"})
	sessionUnit(f, "mosaic-ended.service", "failed", "failed", map[string]any{"Result": "exit-code", "MainPID": uint32(0),
		"ExecMainStartTimestamp": uint64(1_700_000_000_000_000), "ExecMainExitTimestamp": uint64(1_700_000_001_000_000), "ExecMainCode": int32(1), "ExecMainStatus": int32(3)})
	f.setProps("mosaic-other.service", unitIface, map[string]any{"LoadState": "loaded", "Description": "someone else's", "ActiveState": "active"})
	m := fakeManager(t, f)
	m.paths = h.Paths
	ctx := context.Background()

	s, err := m.Status(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	if s.Unit != "mosaic-run.service" || s.Kind != units.KindService || !s.Running() || s.MainPID != 41 || !reflect.DeepEqual(s.PIDs, []uint32{41, 42}) || s.InvocationID != "abcd" {
		t.Errorf("running service: %+v", s)
	}
	if s.MemoryMax == nil || *s.MemoryMax != 1<<30 || s.TasksMax != nil || s.CPUQuota == nil || *s.CPUQuota != 50 || s.Since == nil {
		t.Errorf("running service's limits and start: memory %v tasks %v cpu %v since %v", s.MemoryMax, s.TasksMax, s.CPUQuota, s.Since)
	}

	s, err = m.Status(ctx, "sc")
	if err != nil || s.Kind != units.KindScope || s.Unit != "mosaic-sc.scope" || !s.Running() || s.Since == nil {
		t.Errorf("scope: %+v, %v", s, err)
	}

	s, err = m.Status(ctx, "ended")
	if err != nil || s.Running() || s.State != "failed" || s.ExitStatus == nil || *s.ExitStatus != 3 || s.Ended == nil || s.Result != "exit-code" {
		t.Errorf("ended service: %+v, %v", s, err)
	}

	// Collected by systemd: the records say what it was and how it ended.
	dir := h.Paths.SessionDir("gone")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	started := time.Now().Add(-time.Minute).Truncate(time.Second)
	if err := records.Write(dir, records.Record{Name: "gone", Started: started, Description: records.Description{Command: []string{"make"}, Workspace: "/w"}}); err != nil {
		t.Fatal(err)
	}
	if err := records.WriteEnd(dir, records.End{Result: "exit-code", ExitCode: "exited", ExitStatus: "2", Ended: started.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	s, err = m.Status(ctx, "gone")
	if err != nil || s.State != "failed" || s.ExitStatus == nil || *s.ExitStatus != 2 || s.Workspace != "/w" || len(s.Command) != 1 {
		t.Errorf("collected session, from its records: %+v, %v", s, err)
	}

	// Collected between the Gets: LoadState from before, Description from
	// the unit loaded anew, not found, which is its own name. Without the
	// records' look this said there is no such session (seen on 257).
	f.setProps("mosaic-gone.service", unitIface, map[string]any{"LoadState": "loaded", "Description": "mosaic-gone.service", "ActiveState": "inactive"})
	if s, err = m.Status(ctx, "gone"); err != nil || s.ExitStatus == nil || *s.ExitStatus != 2 {
		t.Errorf("session collected between the Gets: %+v, %v", s, err)
	}

	for _, name := range []string{"none", "other"} {
		if _, err := m.Status(ctx, name); !errors.Is(err, errcode.NoSuchSession.Target()) {
			t.Errorf("status %s: %v, want no-such-session", name, err)
		}
	}
	if _, err := m.Status(ctx, "../x"); errcode.Of(err).Exit != errcode.ExitBadInput {
		t.Errorf("status of a bad name: %v, want bad input", err)
	}
}

// List picks the mosaic sessions among the units systemd lists (not
// another's unit, not a unit that is not loaded), reads each one's
// properties (a running service's exit is not asked), leaves out one
// gone between the list and the reads, and sorts them by name; each
// session's clone record is read with it.
func TestListMergesUnitsAndRecords(t *testing.T) {
	h := testHost(t)
	f := &fakeSystemd{}
	mosaic := units.DescriptionPrefix + "x"
	f.listed = []sd.UnitStatus{
		{Name: "mosaic-zed.service", Description: mosaic, LoadState: "loaded", ActiveState: "active", SubState: "running", Path: unitPath("mosaic-zed.service")},
		{Name: "mosaic-abe.service", Description: mosaic, LoadState: "loaded", ActiveState: "inactive", SubState: "dead", Path: unitPath("mosaic-abe.service")},
		{Name: "mosaic-sc.scope", Description: mosaic, LoadState: "loaded", ActiveState: "inactive", SubState: "dead", Path: unitPath("mosaic-sc.scope")},
		{Name: "mosaic-foreign.service", Description: "not mosaic's", LoadState: "loaded", ActiveState: "active", Path: unitPath("mosaic-foreign.service")},
		{Name: "mosaic-nf.service", Description: mosaic, LoadState: "not-found", ActiveState: "inactive", Path: unitPath("mosaic-nf.service")},
		{Name: "mosaic-vanished.service", Description: mosaic, LoadState: "loaded", ActiveState: "inactive", Path: unitPath("mosaic-vanished.service")},
	}
	// The running one answers only what a running service is asked (no
	// exit yet).
	f.setProps("mosaic-zed.service", serviceIface, map[string]any{"Result": "success", "MainPID": uint32(7), "ExecMainStartTimestamp": uint64(1)})
	f.setProps("mosaic-abe.service", serviceIface, map[string]any{"Result": "success", "MainPID": uint32(0), "ExecMainStartTimestamp": uint64(1),
		"ExecMainExitTimestamp": uint64(2), "ExecMainCode": int32(1), "ExecMainStatus": int32(0), "MemoryMax": ^uint64(0), "TasksMax": ^uint64(0), "CPUQuotaPerSecUSec": ^uint64(0)})
	f.setProps("mosaic-sc.scope", scopeIface, map[string]any{"Result": "success", "MemoryMax": uint64(4096), "TasksMax": ^uint64(0), "CPUQuotaPerSecUSec": ^uint64(0)})
	// Another's unit and one not loaded answer too: only the list's
	// choice leaves them out.
	for _, u := range []string{"mosaic-foreign.service", "mosaic-nf.service"} {
		f.setProps(u, serviceIface, map[string]any{"Result": "success", "MainPID": uint32(9), "ExecMainStartTimestamp": uint64(1)})
	}
	f.setProps("mosaic-sc.scope", unitIface, map[string]any{"ActiveEnterTimestamp": uint64(3)})
	if err := records.WriteClone(mkdir(t, h.Paths.SessionDir("abe")), records.Clone{Base: "b", Parent: "b"}); err != nil {
		t.Fatal(err)
	}
	m := fakeManager(t, f)
	m.paths = h.Paths
	list, err := m.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"abe", "sc", "zed"}) {
		t.Fatalf("listed %v, want abe, sc, zed", names)
	}
	abe, sc, zed := list[0], list[1], list[2]
	if abe.Running() || abe.ExitStatus == nil || *abe.ExitStatus != 0 || abe.MemoryMax != nil || abe.Clone == nil || abe.Clone.Base != "b" {
		t.Errorf("abe: %+v", abe)
	}
	if sc.Kind != units.KindScope || sc.MemoryMax == nil || *sc.MemoryMax != 4096 || sc.Since == nil || sc.Clone != nil {
		t.Errorf("sc: %+v", sc)
	}
	if !zed.Running() || zed.MainPID != 7 || zed.ExitStatus != nil {
		t.Errorf("zed: %+v", zed)
	}
}

// mkdir makes dir and returns it.
func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ListInvocations reads each session's InvocationID too (the bus keys
// ownership by it); List does without.
func TestListInvocations(t *testing.T) {
	h := testHost(t)
	f := &fakeSystemd{listed: []sd.UnitStatus{{Name: "mosaic-x.service", Description: units.DescriptionPrefix + "x", LoadState: "loaded", ActiveState: "active", SubState: "running", Path: unitPath("mosaic-x.service")}}}
	sessionUnit(f, "mosaic-x.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(7), "ExecMainStartTimestamp": uint64(1)})
	m := fakeManager(t, f)
	m.paths = h.Paths
	with, err := m.ListInvocations(context.Background())
	if err != nil || len(with) != 1 || with[0].InvocationID != "abcd" {
		t.Errorf("ListInvocations: %+v, %v; want x with invocation abcd", with, err)
	}
	without, err := m.List(context.Background())
	if err != nil || len(without) != 1 || without[0].InvocationID != "" {
		t.Errorf("List: %+v, %v; want x without its invocation", without, err)
	}
}

// A scope's leader is the one of its processes whose parent is outside
// it (its init, started by mosaic's bwrap); parentOf reads /proc.
func TestScopeLeader(t *testing.T) {
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	self, kid := uint32(os.Getpid()), uint32(child.Process.Pid)
	if got := parentOf(int(kid)); got != os.Getpid() {
		t.Errorf("parentOf(child) = %d, want %d", got, os.Getpid())
	}
	if got := scopeLeader([]uint32{kid, self}); got != self {
		t.Errorf("leader of [child, self] = %d, want %d (self: its parent is outside)", got, self)
	}
	if got := scopeLeader([]uint32{kid}); got != kid {
		t.Errorf("leader of [child] = %d, want the child", got)
	}
	if parentOf(1<<30) != 0 || scopeLeader(nil) != 0 {
		t.Error("a process that does not exist has a parent")
	}
}

// A proxy that held its mark of life and let go of it died; one that
// holds it lives; one that never started (no mark) is judged by its
// units: the socket unit up means it waits for a first connection.
func TestEgressDied(t *testing.T) {
	h := testHost(t)
	f := &fakeSystemd{}
	m := fakeManager(t, f)
	m.paths = h.Paths
	dir := mkdir(t, h.Paths.EgressDir("x"))
	if !m.egressDied(context.Background(), "x") {
		t.Error("no mark and no unit: want died")
	}
	f.units[units.EgressSocketUnitName("x")] = "active"
	if m.egressDied(context.Background(), "x") {
		t.Error("its socket unit waits: want alive")
	}
	delete(f.units, units.EgressSocketUnitName("x"))
	mark := filepath.Join(dir, egress.AliveFile)
	if err := os.WriteFile(mark, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if !m.egressDied(context.Background(), "x") {
		t.Error("a mark nobody holds: want died")
	}
	if err := acceptloop.HoldAlive(mark); err != nil {
		t.Fatal(err)
	}
	if m.egressDied(context.Background(), "x") {
		t.Error("a held mark: want alive")
	}
}
