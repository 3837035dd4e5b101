package manager

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	sd "github.com/coreos/go-systemd/v22/dbus"

	"mosaic/internal/errcode"
	"mosaic/manager/clone"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/records"
	"mosaic/manager/request"
	"mosaic/manager/statedir"
	"mosaic/units"
)

// changeFixture is clone-mode session c, started on a fake systemd over
// a repository at ws and ended (systemd no longer has its unit: its
// records say what it was); the fake runs a finish step's script for
// real, on the host, in the session's copy (what the finish unit would
// run in its sandbox), and announces its end. started counts the finish
// steps run.
type changeFixture struct {
	h        Host
	m        *Manager
	ws, copy string
	mu       sync.Mutex
	finishes int
}

func newChangeFixture(t *testing.T) *changeFixture {
	t.Helper()
	return newChangeFixtureWith(t, nil)
}

// newChangeFixtureWith is newChangeFixture with the repository changed by
// prepare (given its path) before the session starts.
func newChangeFixtureWith(t *testing.T, prepare func(ws string)) *changeFixture {
	t.Helper()
	h := testHost(t)
	ws := gitRepo(t, h)
	if prepare != nil {
		prepare(ws)
	}
	plan := testPlan(t, h, request.Request{Name: "c", Workspace: ws, Mode: request.ModeClone})
	fx := &changeFixture{h: h, ws: ws, copy: filepath.Join(h.Paths.SessionDir("c"), units.CloneDirName)}
	f := &fakeSystemd{}
	f.onStart = func(unit string, _ []sd.Property) (string, error) {
		if unit == units.UnitName(units.FinishName("c")) {
			fx.runFinish(t)
			go f.ended(unit, 0)
		}
		return "done", nil
	}
	fx.m = fakeManager(t, f)
	fx.m.paths, fx.m.host = h.Paths, &h
	l, err := fx.m.start(context.Background(), plan, units.Launch{}, false)
	if err != nil {
		t.Fatal(err)
	}
	l.release()
	delete(f.units, units.UnitName("c")) // ended and collected
	return fx
}

// runFinish runs the finish step's script as its unit would: in the
// copy, its home the finish step's own (the index it makes under the
// test's directory, not the host's /tmp), the user's objects where git
// finds them.
func (fx *changeFixture) runFinish(t *testing.T) {
	fx.mu.Lock()
	fx.finishes++
	fx.mu.Unlock()
	cl, ok := records.ReadClone(fx.h.Paths.SessionDir("c"))
	if !ok {
		t.Error("no clone.json at the finish step")
		return
	}
	home := filepath.Join(fx.h.Paths.SessionDir(units.FinishName("c")), "home")
	tmp := t.TempDir()
	script := strings.ReplaceAll(finishScript, "/tmp/", tmp+"/")
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "mosaic-finish", cl.Base, cl.Parent, strconv.Itoa(patchcheck.MaxPatchBytes)}, subArgs(cl.Subs)...)...)
	// The copy borrows the user's objects at the path the sandbox mounts
	// them at (units.ObjectsInside); here git is told where they are.
	alt := filepath.Join(fx.ws, ".git", "objects")
	for _, s := range cl.Subs {
		alt += ":" + s.Objects
	}
	cmd.Dir, cmd.Env = fx.copy, []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + alt}
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Error(err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the finish step's script: %v: %s", err, out)
	}
}

// agent changes the session's copy as an agent would: a.txt changed, a
// new file, and what it names more.
func (fx *changeFixture) agent(t *testing.T, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(fx.copy, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The finish step of an ended session is run once (a unit of its own,
// which runs the script in the copy) and its output read as data: the
// change's summary, its snapshot in clone.json; asked again, the change
// is read back without another finish step; apply writes it into the
// checkout and records it, once.
func TestFinishThenApply(t *testing.T) {
	fx := newChangeFixture(t)
	fx.agent(t, map[string]string{"a.txt": "a, changed\n", "b.txt": "new\n"})
	ctx := context.Background()
	ch, err := fx.m.Current(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if fx.finishes != 1 || ch.Refused != nil || ch.Summary.Line() == "" || !patchcheck.IsObjectID(ch.Clone.Head) || ch.Workspace != fx.ws {
		t.Fatalf("after %d finish steps: change %+v, refused %v", fx.finishes, ch.Summary, ch.Refused)
	}
	got := map[string]string{}
	for _, f := range ch.Summary.Files {
		got[f.Path] = f.Status
	}
	if len(got) != 2 || got["a.txt"] == "" || got["b.txt"] == "" {
		t.Errorf("summary %+v: want a.txt and b.txt", ch.Summary.Files)
	}
	cl, _ := records.ReadClone(fx.h.Paths.SessionDir("c"))
	if cl == nil || cl.Snapshot == nil || cl.Head != ch.Clone.Head || cl.Summary == nil {
		t.Errorf("clone.json after the finish step: %+v", cl)
	}

	again, err := fx.m.Current(ctx, "c")
	if err != nil || fx.finishes != 1 || again.Clone.Head != ch.Clone.Head || string(again.Patch) != string(ch.Patch) {
		t.Errorf("asked again: %v, %d finish steps, head %s (want %s, and no second step)", err, fx.finishes, again.Clone.Head, ch.Clone.Head)
	}

	if _, err := fx.m.Apply(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "a, changed\n", "b.txt": "new\n"} {
		if b, err := os.ReadFile(filepath.Join(fx.ws, name)); err != nil || string(b) != want {
			t.Errorf("%s in the checkout: %q, %v; want %q", name, b, err, want)
		}
	}
	if cl, _ := records.ReadClone(fx.h.Paths.SessionDir("c")); cl == nil || cl.Applied != "worktree" || cl.DoneAt == nil {
		t.Errorf("clone.json after apply: %+v", cl)
	}
	if _, err := fx.m.Apply(ctx, "c", ""); !errors.Is(err, errcode.NoChange.Target()) || !strings.Contains(err.Error(), "applied already") {
		t.Errorf("a second apply: %v, want no-change (applied already)", err)
	}
}

// A change patchcheck refuses (a symlink out of the checkout) is read
// and said refused, and apply writes nothing of it (change-refused).
func TestApplyRefusesAndWritesNothing(t *testing.T) {
	fx := newChangeFixture(t)
	fx.agent(t, map[string]string{"a.txt": "a, changed\n"})
	if err := os.Symlink("/etc/passwd", filepath.Join(fx.copy, "out")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err := fx.m.Apply(ctx, "c", "")
	if !errors.Is(err, errcode.ChangeRefused.Target()) {
		t.Fatalf("apply of a symlink out: %v, want change-refused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.ws, "a.txt")); string(b) != "a\n" {
		t.Errorf("the refused apply changed a.txt: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(fx.ws, "out")); !os.IsNotExist(err) {
		t.Errorf("the refused apply wrote the symlink (%v)", err)
	}
	if cl, _ := records.ReadClone(fx.h.Paths.SessionDir("c")); cl == nil || cl.Applied != "" || cl.Refused == "" {
		t.Errorf("clone.json after a refused apply: %+v", cl)
	}
}

// Discard throws the change away: the copy goes, clone.json says
// discarded, and the change can then be neither shown nor finished.
func TestDiscardEndsTheChange(t *testing.T) {
	fx := newChangeFixture(t)
	fx.agent(t, map[string]string{"b.txt": "new\n"})
	ctx := context.Background()
	if err := fx.m.Discard(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if cl, _ := records.ReadClone(fx.h.Paths.SessionDir("c")); cl == nil || !cl.Discarded {
		t.Errorf("clone.json after discard: %+v", cl)
	}
	if _, err := os.Lstat(fx.copy); !os.IsNotExist(err) {
		t.Errorf("the copy is left after discard (%v)", err)
	}
	for what, err := range map[string]error{"current": second(fx.m.Current(ctx, "c")), "finish": second(fx.m.Finish(ctx, "c"))} {
		if !errors.Is(err, errcode.NoChange.Target()) || !strings.Contains(err.Error(), "discarded") {
			t.Errorf("%s after discard: %v, want no-change (discarded)", what, err)
		}
	}
	if fx.finishes != 0 {
		t.Errorf("%d finish steps ran for a discarded change", fx.finishes)
	}
	if _, err := os.Stat(filepath.Join(fx.ws, "b.txt")); !os.IsNotExist(err) {
		t.Errorf("the discarded change reached the checkout (%v)", err)
	}
}

// second is a call's error.
func second[T any](_ T, err error) error { return err }

// The finish step's session is the session's sandbox around its copy
// with nothing more: named NAME-finish with a state of its own, no
// network, no credentials, bounded in time, running the finish script
// with the base, the parent and apply's bound as its arguments.
func TestFinishPlan(t *testing.T) {
	fx := newChangeFixture(t)
	dir := fx.h.Paths.SessionDir("c")
	rec, err := records.ReadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := records.ReadClone(dir)
	plan, err := fx.m.finishPlan("c", rec, *cl, fx.h.Paths)
	if err != nil {
		t.Fatal(err)
	}
	spec := plan.Spec
	want := []string{"/bin/sh", "-c", finishScript, "mosaic-finish", cl.Base, cl.Parent, strconv.Itoa(patchcheck.MaxPatchBytes)}
	if strings.Join(spec.Command, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("command %q, want the finish script with base, parent and bound", spec.Command)
	}
	if spec.Name != "c-finish" || spec.StateDir != fx.h.Paths.SessionDir("c-finish") || spec.Workspace != fx.ws {
		t.Errorf("name %s, state %s, workspace %s", spec.Name, spec.StateDir, spec.Workspace)
	}
	if spec.Network != "none" || len(spec.Credentials) != 0 || spec.Limits.RuntimeMax != finishTimeout {
		t.Errorf("network %s, credentials %v, runtime max %v: want none, none, %v", spec.Network, spec.Credentials, spec.Limits.RuntimeMax, finishTimeout)
	}
	if spec.Clone == nil || spec.Clone.Dir != fx.copy || spec.Clone.Base != cl.Base || spec.Clone.Parent != cl.Parent {
		t.Errorf("clone %+v: want the session's copy at its base", spec.Clone)
	}
	// Its copy gone (removed by hand): nothing to finish, and no step run.
	if err := os.RemoveAll(fx.copy); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.finishPlan("c", rec, *cl, fx.h.Paths); !errors.Is(err, errcode.NoChange.Target()) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("finish spec without the copy: %v, want no-change caused by the missing copy", err)
	}
}

// What a finish step wrote is untrusted: a head that is not an object id
// (or none) is clone-failed, never a change read on.
func TestReadChangeRefusesDamagedOutput(t *testing.T) {
	h := testHost(t)
	out := mkdir(t, FinishDir(h.Paths, "c"))
	cl := records.Clone{Base: strings.Repeat("a", 40), Parent: strings.Repeat("a", 40)}
	if _, err := readChange(h.Paths, "c", cl); errcode.Of(err).Code != errcode.CloneFailed.Name || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no head: %v, want clone-failed caused by the missing file", err)
	}
	for _, head := range []string{"main\n", "$(reboot)\n", strings.Repeat("g", 40)} {
		if err := os.WriteFile(filepath.Join(out, "head"), []byte(head), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := readChange(h.Paths, "c", cl); errcode.Of(err).Code != errcode.CloneFailed.Name || !strings.Contains(err.Error(), "not an object id") {
			t.Errorf("head %q: %v, want clone-failed", head, err)
		}
	}
}

// submoduleFixture is a change fixture whose repository has a submodule
// at lib/sub (the user's uncommitted edit in its f.txt), and a git that
// runs in a directory and fails the test on an error.
func submoduleFixture(t *testing.T) (*changeFixture, func(dir string, args ...string) string) {
	git := func(dir string, args ...string) string {
		out, err := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "protocol.file.allow=always"}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	fx := newChangeFixtureWith(t, func(ws string) {
		sub := ws + "-sub"
		os.MkdirAll(sub, 0o700)
		os.WriteFile(filepath.Join(sub, "f.txt"), []byte("f\n"), 0o644)
		git(sub, "init", "-q")
		git(sub, "add", "-A")
		git(sub, "commit", "-qm", "sub")
		git(ws, "submodule", "add", "-q", sub, "lib/sub")
		git(ws, "commit", "-qm", "the submodule")
		os.WriteFile(filepath.Join(ws, "lib", "sub", "f.txt"), []byte("mine\nf\n"), 0o644)
	})
	return fx, git
}

// The finish step takes a submodule's change as one with the
// superproject's: the submodule's files under its path (the user's own
// uncommitted edit there is the base, not the change), its gitlink never
// (the snapshot keeps the base's), its moved HEAD said; apply writes
// both files, and apply --branch refuses.
func TestFinishTakesSubmodules(t *testing.T) {
	fx, git := submoduleFixture(t)
	fx.agent(t, map[string]string{"a.txt": "a, changed\n", "lib/sub/f.txt": "mine\nf\nagent\n"})
	git(filepath.Join(fx.copy, "lib", "sub"), "commit", "-qam", "agent")
	ctx := context.Background()
	ch, err := fx.m.Current(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range ch.Summary.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, ",") != "a.txt,lib/sub/f.txt" || strings.Contains(string(ch.Patch), "+mine") || ch.Refused != nil {
		t.Fatalf("the change: %v (refused %v)\n%s", paths, ch.Refused, ch.Patch)
	}
	if len(ch.Moved) != 1 || ch.Moved[0] != "lib/sub" || InSubmodule(ch) != "lib/sub" {
		t.Errorf("moved %v, in submodule %q", ch.Moved, InSubmodule(ch))
	}
	t.Setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", filepath.Join(fx.ws, ".git", "objects"))
	git(fx.copy, "fetch", "-q", filepath.Join(ch.Dir, "bundle"), "refs/mosaic/snapshot") // the snapshot is made beside the copy's repository
	if got, want := git(fx.copy, "rev-parse", ch.Clone.Head+":lib/sub"), git(fx.ws, "rev-parse", "HEAD:lib/sub"); got != want {
		t.Errorf("the snapshot's gitlink %s, the base's %s", got, want)
	}
	if _, err := fx.m.Apply(ctx, "c", "b"); errcode.Of(err).Code != errcode.BadClone.Name || !strings.Contains(err.Error(), "submodule lib/sub") {
		t.Errorf("apply --branch: %v", err)
	}
	if _, err := fx.m.Apply(ctx, "c", ""); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a.txt": "a, changed\n", "lib/sub/f.txt": "mine\nf\nagent\n"} {
		if b, _ := os.ReadFile(filepath.Join(fx.ws, name)); string(b) != want {
			t.Errorf("%s after apply: %q", name, b)
		}
	}
}

// TestFinishNotBlockedByBrokenRepository (issue 40): the finish step reads
// nothing of the copy's repository but its objects, its index's stat cache
// and its HEAD, each where it can: a config git refuses to read (a bad
// boolean, an unknown repository extension, a line that does not parse), a
// garbage index, a HEAD removed or the whole .git removed by the session
// cannot make it fail. The change is then still the files the agent left,
// against the base. Before, each made the step fail (git exits 128), so
// diff and apply could not show or take the change.
func TestFinishNotBlockedByBrokenRepository(t *testing.T) {
	for _, c := range []struct {
		name   string
		breaks func(dotgit string) error
	}{
		{"bad boolean", func(g string) error { return appendFile(g+"/config", "[core]\n\tautocrlf = bogus\n") }},
		{"unknown extension", func(g string) error {
			return appendFile(g+"/config", "[core]\n\trepositoryformatversion = 1\n[extensions]\n\tbogus = true\n")
		}},
		{"config that does not parse", func(g string) error { return appendFile(g+"/config", "[core\n") }},
		{"garbage index", func(g string) error { return os.WriteFile(g+"/index", []byte("garbage"), 0o644) }},
		{"HEAD removed", func(g string) error { return os.Remove(g + "/HEAD") }},
		{".git removed", os.RemoveAll},
	} {
		t.Run(c.name, func(t *testing.T) {
			fx := newChangeFixture(t)
			fx.agent(t, map[string]string{"a.txt": "a, changed\n", "b.txt": "new\n"})
			if err := c.breaks(filepath.Join(fx.copy, ".git")); err != nil {
				t.Fatal(err)
			}
			ch, err := fx.m.Current(context.Background(), "c")
			if err != nil {
				t.Fatalf("the change of a copy whose repository is broken: %v", err)
			}
			var got []string
			for _, f := range ch.Summary.Files {
				got = append(got, f.Path)
			}
			if strings.Join(got, ",") != "a.txt,b.txt" || !strings.Contains(string(ch.Patch), "+a, changed") {
				t.Errorf("files %v, want a.txt,b.txt\n%s", got, ch.Patch)
			}
		})
	}
}

// appendFile appends s to the file at path.
func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(s)
	return err
}

// TestFinishNotBlockedBySubmodule (issue 40): a submodule's repository in
// the copy is read as the superproject's is, in a repository of the finish
// step's own: a config value git refuses or a garbage index there does not
// make the step fail, and the submodule's files are still in the change.
// Before, git exited 128 in the submodule and the step failed.
func TestFinishNotBlockedBySubmodule(t *testing.T) {
	fx, _ := submoduleFixture(t)
	fx.agent(t, map[string]string{"a.txt": "a, changed\n", "lib/sub/f.txt": "mine\nf\nagent\n"})
	d := filepath.Join(fx.copy, ".git", "modules", "lib", "sub")
	if err := appendFile(filepath.Join(d, "config"), "[core]\n\tautocrlf = bogus\n"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "index"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, err := fx.m.Current(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range ch.Summary.Files {
		got = append(got, f.Path)
	}
	if strings.Join(got, ",") != "a.txt,lib/sub/f.txt" || strings.Contains(string(ch.Patch), "+mine") || !strings.Contains(string(ch.Patch), "+agent") {
		t.Errorf("files %v, want a.txt,lib/sub/f.txt\n%s", got, ch.Patch)
	}
}

// Shown binds apply to what diff showed: a change other than the one
// shown is refused, and nothing is written; once diff has shown this
// change (Shown), apply writes it. A change whose head is not the one
// recorded (a newer snapshot) is not marked shown.
func TestShownBindsApply(t *testing.T) {
	fx := newChangeFixture(t)
	fx.agent(t, map[string]string{"a.txt": "a, changed\n"})
	ctx := context.Background()
	ch, err := fx.m.Current(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	dir := fx.h.Paths.SessionDir("c")
	cl, _ := records.ReadClone(dir)
	cl.Shown = "an older change"
	if err := records.WriteClone(dir, *cl); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.m.Apply(ctx, "c", ""); !errors.Is(err, errcode.ChangeRefused.Target()) || !strings.Contains(err.Error(), "`mosaic diff c` shows it now") {
		t.Fatalf("apply of a change diff did not show: %v, want change-refused", err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.ws, "a.txt")); string(b) != "a\n" {
		t.Fatalf("the refused apply changed a.txt: %q", b)
	}
	other := ch
	other.Clone.Head = strings.Repeat("0", 40)
	if err := fx.m.Shown("c", other); err != nil {
		t.Fatal(err)
	}
	if cl, _ := records.ReadClone(dir); cl.Shown != "an older change" {
		t.Errorf("a change of another head marked shown: %q", cl.Shown)
	}
	if err := fx.m.Shown("c", ch); err != nil {
		t.Fatal(err)
	}
	if cl, _ := records.ReadClone(dir); cl.Shown != shownKey(ch) {
		t.Errorf("shown %q, want %q", cl.Shown, shownKey(ch))
	}
	if _, err := fx.m.Apply(ctx, "c", ""); err != nil {
		t.Fatalf("apply of the change diff showed: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(fx.ws, "a.txt")); string(b) != "a, changed\n" {
		t.Errorf("a.txt after apply: %q", b)
	}
}

// KnowChange reads the change of a session that ended since its last
// snapshot into its Session (list and status show it without a diff),
// once: known, it runs no second finish step.
func TestKnowChange(t *testing.T) {
	fx := newChangeFixture(t)
	fx.agent(t, map[string]string{"b.txt": "new\n"})
	ctx := context.Background()
	s, err := fx.m.Status(ctx, "c")
	if err != nil || !s.ChangeUnknown() {
		t.Fatalf("status %+v, %v: want an ended session whose change is unknown", s, err)
	}
	if err := fx.m.KnowChange(ctx, &s); err != nil {
		t.Fatal(err)
	}
	if fx.finishes != 1 || s.Clone.Summary == nil || len(s.Clone.Summary.Files) != 1 || s.ChangeUnknown() {
		t.Fatalf("after KnowChange: %d finish steps, clone %+v", fx.finishes, s.Clone)
	}
	s, _ = fx.m.Status(ctx, "c")
	if err := fx.m.KnowChange(ctx, &s); err != nil || fx.finishes != 1 || s.Clone.Summary == nil {
		t.Errorf("known again: %v, %d finish steps, clone %+v", err, fx.finishes, s.Clone)
	}
}

// Settle finishes an interrupted apply before a command that only reads
// the session shows it: a journal left (here one from before git ran,
// which is only removed) is taken care of under the session's lock; while
// another mosaic holds the lock the journal is left to it; a lock that
// cannot be had at all is the state's error.
func TestSettle(t *testing.T) {
	fx := newChangeFixture(t)
	ctx := context.Background()
	dir := fx.h.Paths.SessionDir("c")
	journal := mkdir(t, filepath.Join(dir, clone.JournalName))
	lock, err := statedir.LockName(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := fx.m.Settle(ctx, "c"); err != nil || !exists(journal) {
		t.Fatalf("settle under another's lock: %v, journal left: %v (want nil, left)", err, exists(journal))
	}
	lock.Release()
	if err := fx.m.Settle(ctx, "c"); err != nil || exists(journal) {
		t.Fatalf("settle: %v, journal left: %v (want it removed)", err, exists(journal))
	}
	if err := fx.m.Settle(ctx, "nobody"); err != nil {
		t.Errorf("settle of no session: %v", err)
	}
	mkdir(t, journal)
	locks := filepath.Join(fx.h.Paths.StateRoot, "locks")
	if err := os.RemoveAll(locks); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locks, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := fx.m.Settle(ctx, "c"); !errors.Is(err, errcode.StateDir.Target()) {
		t.Errorf("settle without a lock to take: %v, want state-dir", err)
	}
}
