package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"mosaic/internal/errcode"
	"mosaic/manager/clone"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/units"
)

// gitRepo makes a repository with one commit at the test host's ws.
func gitRepo(t *testing.T, h Host) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	ws := filepath.Join(h.Paths.Home, "ws")
	os.MkdirAll(ws, 0o700)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644)
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"}} {
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	return ws
}

// A clone-mode start makes the copy once the name is claimed, mounts it at
// the workspace's path in systemd's layer (the user's objects read-only
// inside it), pins both by identity in the promise and records the base;
// a second start of the name, its change neither applied nor discarded, is
// refused with the copy kept.
func TestCloneStartMakesTheCopy(t *testing.T) {
	h := testHost(t)
	ws := gitRepo(t, h)
	plan := testPlan(t, h, request.Request{Name: "c", Workspace: ws, Mode: request.ModeClone})
	var props, spareProps []sd.Property
	f := &fakeSystemd{onStart: func(name string, p []sd.Property) (string, error) {
		if strings.HasPrefix(name, units.UnitPrefix+"spare.") {
			spareProps = p
		} else {
			props = p
		}
		return "done", nil
	}}
	m := fakeManager(t, f)
	l, err := m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	spec := l.spec
	// Once started, the spare copy for the next session is asked for.
	if argv := fmt.Sprint(spareProps); !strings.Contains(argv, fmt.Sprintf("%q, %q, %q", clone.SpareStage, h.Paths.StateRoot, ws)) {
		t.Errorf("no spare asked for after the start, or not of %s: %s", ws, argv)
	}
	dir := filepath.Join(h.Paths.SessionDir("c"), units.CloneDirName)
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatalf("no copy: %v", err)
	}
	c, ok := records.ReadClone(h.Paths.SessionDir("c"))
	if !ok || c.Base == "" || c.Base != c.Parent || !c.Pending() {
		t.Errorf("clone.json %+v", c)
	}
	var binds, ro string
	for _, p := range props {
		switch p.Name {
		case "BindPaths":
			binds = fmt.Sprint(p.Value.Value())
		case "BindReadOnlyPaths":
			ro = fmt.Sprint(p.Value.Value())
		}
	}
	if !strings.Contains(binds, "{"+dir+" "+ws+" ") {
		t.Errorf("BindPaths %s: want the copy at the workspace's path", binds)
	}
	if !strings.Contains(ro, "{"+filepath.Join(ws, ".git", "objects")+" "+units.ObjectsInside(ws)+" ") {
		t.Errorf("BindReadOnlyPaths %s: want the user's objects inside the copy", ro)
	}
	paths := map[string]bool{}
	for _, b := range spec.Promise.Binds {
		paths[b.Path] = true
	}
	if !paths[ws] || !paths[units.ObjectsInside(ws)] {
		t.Errorf("the promise pins %v", spec.Promise.Binds)
	}

	f.units[units.UnitName("c")] = "inactive"
	_, err = m.start(context.Background(), plan, units.Launch{}, false)
	if !errors.Is(err, errcode.UnappliedChanges.Target()) {
		t.Fatalf("a second start over an unapplied change: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Errorf("the refused start removed the copy: %v", err)
	}
}

// A clone-mode start systemd refuses leaves no copy and no clone.json,
// even where the session's state directory stays (a name used before).
func TestCloneStartRefusedRemovesTheCopy(t *testing.T) {
	h := testHost(t)
	ws := gitRepo(t, h)
	os.MkdirAll(filepath.Join(h.Paths.SessionDir("r"), "home"), 0o700) // an earlier session's
	plan := testPlan(t, h, request.Request{Name: "r", Workspace: ws, Mode: request.ModeClone})
	exists := dbus.Error{Name: errUnitExists, Body: []any{"unit exists"}}
	m := fakeManager(t, &fakeSystemd{onStart: func(string, []sd.Property) (string, error) { return "", exists }})
	if _, err := m.start(context.Background(), plan, units.Launch{}, false); err == nil {
		t.Fatal("the start was not refused")
	}
	for _, p := range []string{units.CloneDirName, records.CloneFile} {
		if _, err := os.Lstat(filepath.Join(h.Paths.SessionDir("r"), p)); !os.IsNotExist(err) {
			t.Errorf("%s is left after a refused start (%v)", p, err)
		}
	}
}
