package manager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/errcode"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// endedFixture is a Manager on a fake systemd that has collected every
// unit: the sessions named have only their records (an ended session of
// each name, as list --all and gc find them).
func endedFixture(t *testing.T, names ...string) (*fakeSystemd, *Manager) {
	t.Helper()
	h := testHost(t)
	f := &fakeSystemd{}
	for _, name := range names {
		if err := records.Write(mkdir(t, h.Paths.SessionDir(name)), records.Record{Name: name, Started: time.Now(), Description: records.Description{Command: []string{"true"}, Workspace: "/w"}}); err != nil {
			t.Fatal(err)
		}
	}
	m := fakeManager(t, f)
	m.paths = h.Paths
	m.opts.MosaicBin = "" // the state is removed here, not by a unit of its own
	return f, m
}

// pendingChange writes a clone.json whose change (one file) was read
// after the session's end and neither applied nor discarded.
func pendingChange(t *testing.T, dir string) {
	t.Helper()
	now := time.Now()
	c := records.Clone{Base: "b", Parent: "b", Snapshot: &now, Summary: &patchcheck.Summary{Files: []patchcheck.File{{Path: "a.txt"}}, Added: 1}}
	if err := records.WriteClone(dir, c); err != nil {
		t.Fatal(err)
	}
}

// deadSocket leaves a unix socket at path that nothing listens on, as a
// terminal holder killed by kill -9 does.
func deadSocket(t *testing.T, path string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
}

func exists(path string) bool { _, err := os.Lstat(path); return err == nil }

// Remove forgets an ended session: its unit is cleared, and its state,
// its proxy's and publish forwarder's directories and its dead attach
// socket go; a running session, and without --force a change neither
// applied nor discarded, are refusals that remove nothing.
func TestRemoveForgetsAnEndedSession(t *testing.T) {
	f, m := endedFixture(t, "x")
	p := m.paths
	for _, d := range []string{p.EgressDir("x"), units.PublishDir(p.RuntimeDir, "x")} {
		mkdir(t, d)
	}
	deadSocket(t, units.AttachSocket(p.RuntimeDir, "x"))
	if err := m.Remove(context.Background(), "x", false); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{p.SessionDir("x"), p.EgressDir("x"), units.PublishDir(p.RuntimeDir, "x"), units.AttachSocket(p.RuntimeDir, "x")} {
		if exists(gone) {
			t.Errorf("%s is left after rm", gone)
		}
	}
	if !reflect.DeepEqual(f.reset, []string{"mosaic-x.service"}) {
		t.Errorf("resets %v, want the unit cleared", f.reset)
	}
	if err := m.Remove(context.Background(), "x", false); !errors.Is(err, errcode.NoSuchSession.Target()) {
		t.Errorf("rm of a removed session: %v, want no-such-session", err)
	}

	f, m = endedFixture(t, "r", "c")
	sessionUnit(f, "mosaic-r.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(7), "ExecMainStartTimestamp": uint64(1)})
	f.units["mosaic-r.service"] = "active"
	if err := m.Remove(context.Background(), "r", true); !errors.Is(err, errcode.SessionRunning.Target()) || !exists(m.paths.SessionDir("r")) {
		t.Errorf("rm --force of a running session: %v, want session-running and its state kept", err)
	}
	pendingChange(t, m.paths.SessionDir("c"))
	if err := m.Remove(context.Background(), "c", false); !errors.Is(err, errcode.UnappliedChanges.Target()) || !exists(m.paths.SessionDir("c")) {
		t.Errorf("rm of an unapplied change: %v, want unapplied-changes and its state kept", err)
	}
	if err := m.Remove(context.Background(), "c", true); err != nil || exists(m.paths.SessionDir("c")) {
		t.Errorf("rm --force of an unapplied change: %v, state left: %v", err, exists(m.paths.SessionDir("c")))
	}
}

// With a mosaic binary to run, the state is set aside at once and its
// removal left to a unit of its own (the name is free when rm returns).
func TestRemoveLeavesTheFilesToAUnit(t *testing.T) {
	f, m := endedFixture(t, "x")
	m.opts.MosaicBin = "/usr/bin/mosaic"
	if err := m.Remove(context.Background(), "x", false); err != nil {
		t.Fatal(err)
	}
	if exists(m.paths.SessionDir("x")) {
		t.Error("the state is still under its name")
	}
	if len(f.started) != 1 || !strings.HasPrefix(f.started[0], "mosaic-remove.") {
		t.Errorf("started %v, want one removal unit", f.started)
	}
}

// An error from below keeps its cause for a caller (errors.Is), and the
// user's line stays as it was: the name's lock cannot be made where the
// state's lock folder is a file.
func TestRemoveKeepsItsCause(t *testing.T) {
	_, m := endedFixture(t, "x")
	locks := filepath.Join(m.paths.StateRoot, "locks")
	if err := os.WriteFile(locks, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := m.Remove(context.Background(), "x", false)
	if !errors.Is(err, syscall.ENOTDIR) || !errors.Is(err, errcode.StateDir.Target()) {
		t.Errorf("%v: want state-dir with its cause ENOTDIR", err)
	}
	if want := "cannot remove session x: mkdir " + locks + ": not a directory"; err == nil || err.Error() != want {
		t.Errorf("message %v, want %q", err, want)
	}
}

// ListAll is List plus the sessions only records still know, sorted by
// name; a folder whose name no session may have is not one.
func TestListAllAddsCollectedSessions(t *testing.T) {
	f, m := endedFixture(t, "b", "a")
	mkdir(t, m.paths.SessionDir("Not A Name"))
	f.listed = listedUnit("mosaic-z.service")
	sessionUnit(f, "mosaic-z.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(7), "ExecMainStartTimestamp": uint64(1)})
	all, err := m.ListAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	if !reflect.DeepEqual(names, []string{"a", "b", "z"}) {
		t.Fatalf("listed %v, want a, b, z", names)
	}
	if all[0].Running() || all[0].Workspace != "/w" || !all[2].Running() {
		t.Errorf("sessions %+v", all)
	}
}

// GC removes every ended session but those it must keep: a running one,
// one whose change waits (unapplied), and with keepHomes one whose home
// holds something (kept); a home with only mosaic's own .gitconfig and
// empty folders holds nothing. A dead attach socket goes too.
func TestGCKeepsWhatMatters(t *testing.T) {
	f, m := endedFixture(t, "plain", "signed", "pending", "run")
	p := m.paths
	home := func(name string) string { return mkdir(t, filepath.Join(p.SessionDir(name), "home")) }
	mkdir(t, filepath.Join(home("plain"), ".cache", "empty"))
	if err := os.WriteFile(filepath.Join(home("plain"), ".gitconfig"), []byte(request.GitConfigHeader+"[user]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home("signed"), ".gitconfig"), []byte("[user]\n\tname = me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pendingChange(t, p.SessionDir("pending"))
	f.listed = listedUnit("mosaic-run.service")
	sessionUnit(f, "mosaic-run.service", "active", "running", map[string]any{"Result": "success", "MainPID": uint32(7), "ExecMainStartTimestamp": uint64(1)})
	deadSocket(t, units.AttachSocket(p.RuntimeDir, "gone"))
	removed, kept, unapplied, err := m.GC(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(removed, []string{"plain"}) || !reflect.DeepEqual(kept, []string{"signed"}) || !reflect.DeepEqual(unapplied, []string{"pending"}) {
		t.Errorf("removed %v, kept %v, unapplied %v; want plain, signed, pending", removed, kept, unapplied)
	}
	if exists(p.SessionDir("plain")) || !exists(p.SessionDir("signed")) || !exists(p.SessionDir("run")) {
		t.Error("gc removed the wrong states")
	}
	if exists(units.AttachSocket(p.RuntimeDir, "gone")) {
		t.Error("a dead attach socket is left")
	}
	removed, _, _, err = m.GC(context.Background(), false)
	if err != nil || !reflect.DeepEqual(removed, []string{"signed"}) {
		t.Errorf("gc without keepHomes removed %v (%v), want signed", removed, err)
	}
}

// listedUnit is what ListUnitsByPatterns answers for one loaded mosaic unit.
func listedUnit(unit string) []sd.UnitStatus {
	return []sd.UnitStatus{{Name: unit, Description: units.DescriptionPrefix + "x", LoadState: "loaded", ActiveState: "active", SubState: "running", Path: unitPath(unit)}}
}

// removeStaleSocket removes only a socket nobody listens on: a live one
// and a file that is not a socket are left.
func TestRemoveStaleSocket(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live")
	l, err := net.Listen("unix", live)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dead, file := filepath.Join(dir, "dead"), filepath.Join(dir, "file")
	deadSocket(t, dead)
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{live, dead, file} {
		removeStaleSocket(p)
	}
	if !exists(live) || exists(dead) || !exists(file) {
		t.Errorf("live %v, dead %v, file %v: want only the dead one gone", exists(live), exists(dead), exists(file))
	}
}
