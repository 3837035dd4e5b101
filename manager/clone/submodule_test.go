package clone

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/clone/patchcheck"
	"mosaic/units"
)

// superRepo is a user's repository with two submodules: lib/sub
// initialised, with the user's uncommitted edit in its f.txt, and
// lib/other not (an empty directory, as git leaves it); and the user's
// uncommitted edit of top.txt.
func superRepo(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, name := range []string{"sub", "other"} {
		d := filepath.Join(root, name)
		os.Mkdir(d, 0o755)
		run(t, d, "init", "-q")
		os.WriteFile(filepath.Join(d, "f.txt"), []byte(strings.Repeat("line\n", 10)), 0o644)
		run(t, d, "add", "-A")
		run(t, d, "commit", "-qm", name)
	}
	ws := filepath.Join(root, "top")
	os.Mkdir(ws, 0o755)
	run(t, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, "top.txt"), []byte("top\n"), 0o644)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "top")
	run(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../sub", "lib/sub")
	run(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", "../other", "lib/other")
	run(t, ws, "commit", "-qm", "subs")
	run(t, ws, "submodule", "deinit", "-q", "lib/other")
	os.WriteFile(filepath.Join(ws, "lib", "sub", "f.txt"), []byte("mine\n"+strings.Repeat("line\n", 10)), 0o644)
	os.WriteFile(filepath.Join(ws, "top.txt"), []byte("top\nmine\n"), 0o644)
	return ws
}

// mounted points the copy's alternates at the user's objects themselves,
// as the session's read-only mounts show them.
func mounted(t *testing.T, ws string, c units.Clone) {
	t.Helper()
	os.WriteFile(filepath.Join(c.Dir, ".git", "objects", "info", "alternates"), []byte(c.Objects+"\n"), 0o600)
	for _, s := range c.Subs {
		os.WriteFile(filepath.Join(c.Dir, ".git", "modules", s.Module, "objects", "info", "alternates"), []byte(s.Objects+"\n"), 0o600)
	}
}

func TestMakeCopiesSubmodules(t *testing.T) {
	ws := superRepo(t)
	index, _ := os.ReadFile(filepath.Join(ws, ".git", "modules", "lib", "sub", "index"))
	dir := filepath.Join(t.TempDir(), "clone")
	c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Subs) != 1 || c.Subs[0].Path != "lib/sub" || c.Subs[0].Module != "lib/sub" || c.Subs[0].Objects != filepath.Join(ws, ".git", "modules", "lib", "sub", "objects") {
		t.Fatalf("the copy's submodules: %+v", c.Subs)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, ".git", "modules", "lib", "sub", "objects", "info", "alternates")); string(got) != units.SubObjectsInside(ws, "lib/sub")+"\n" {
		t.Errorf("the submodule's alternates: %q", got)
	}
	mounted(t, ws, c)
	sub := filepath.Join(dir, "lib", "sub")
	if b, _ := os.ReadFile(filepath.Join(sub, "f.txt")); !strings.HasPrefix(string(b), "mine\n") {
		t.Errorf("the copy's submodule lacks the user's uncommitted edit: %q", b)
	}
	if g, _ := os.ReadFile(filepath.Join(sub, ".git")); string(g) != "gitdir: ../../.git/modules/lib/sub\n" {
		t.Errorf("the submodule's .git names %q, not its git directory by a relative path", g)
	}
	if top := run(t, sub, "rev-parse", "--show-toplevel"); top != sub {
		t.Errorf("git in the copy's submodule finds the repository %s", top)
	}
	if st := run(t, sub, "status", "--porcelain"); st != "" {
		t.Errorf("the copy's submodule is not clean at its base: %q", st)
	}
	if c.Subs[0].Base != run(t, sub, "rev-parse", "HEAD") || run(t, sub, "log", "-1", "--format=%s") != "Your uncommitted changes at the start of a mosaic session (yours, not the agent's)" {
		t.Errorf("the submodule's copy is not at its snapshot %s", c.Subs[0].Base)
	}
	if es, err := os.ReadDir(filepath.Join(dir, "lib", "other")); err != nil || len(es) != 0 {
		t.Errorf("the submodule not initialised is not an empty directory in the copy: %v %v", es, err)
	}
	if after, _ := os.ReadFile(filepath.Join(ws, ".git", "modules", "lib", "sub", "index")); string(after) != string(index) {
		t.Error("the user's submodule's index changed")
	}
}

func TestMakeRefusesSubmodulesItCannotCopy(t *testing.T) {
	cases := map[string]func(ws string){
		"nested": func(ws string) { os.WriteFile(filepath.Join(ws, "lib", "sub", ".gitmodules"), nil, 0o644) },
		"its git directory inside it": func(ws string) {
			sub := filepath.Join(ws, "lib", "sub")
			os.Remove(filepath.Join(sub, ".git"))
			os.Rename(filepath.Join(ws, ".git", "modules", "lib", "sub"), filepath.Join(sub, ".git"))
			cfg := filepath.Join(sub, ".git", "config")
			b, _ := os.ReadFile(cfg)
			os.WriteFile(cfg, []byte(strings.Replace(string(b), "worktree = ../../../../lib/sub", "", 1)), 0o644)
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			ws := superRepo(t)
			plant(ws)
			dir := filepath.Join(t.TempDir(), "clone")
			_, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
			if errcode.Of(err).Code != errcode.BadWorkspace.Name || !strings.Contains(err.Error(), "--direct") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("want a one-line refusal naming --direct: %v", err)
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Error("a refused copy was left")
			}
		})
	}
}

// subChange is the change an agent made in the copy of superRepo's
// lib/sub and top.txt, as the finish step writes it: one patch, the
// submodule's files under its path.
func subChange(t *testing.T, ws string) ([]byte, patchcheck.Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
	if err != nil {
		t.Fatal(err)
	}
	mounted(t, ws, c)
	sub := filepath.Join(dir, "lib", "sub")
	b, _ := os.ReadFile(filepath.Join(sub, "f.txt"))
	os.WriteFile(filepath.Join(sub, "f.txt"), append(b, "agent\n"...), 0o644)
	os.WriteFile(filepath.Join(dir, "top.txt"), []byte("top\nmine\nagent\n"), 0o644)
	patch := run(t, dir, "diff", "--binary", "--full-index", c.Base, "--", "top.txt") + "\n" +
		run(t, sub, "diff", "--binary", "--full-index", "--src-prefix=a/lib/sub/", "--dst-prefix=b/lib/sub/", c.Subs[0].Base) + "\n"
	s, err := patchcheck.Parse([]byte(patch))
	if err != nil {
		t.Fatal(err)
	}
	return []byte(patch), s
}

// Apply writes a change into a submodule's files beside the
// superproject's, under the user's own uncommitted edit. Killed at each of
// its steps before the record (as TestApplyKilledAtEachStepRecovers for a
// superproject alone), Recover puts the submodule's file back too; a git
// apply failing once begun (a full disk in its first phase) is undone
// there as well. Applying again then works.
func TestApplyIntoSubmodule(t *testing.T) {
	asGit := func(ws string) { // git apply's first phase, in both repositories
		os.Remove(filepath.Join(ws, "lib", "sub", "f.txt"))
		os.Remove(filepath.Join(ws, "top.txt"))
	}
	for _, tc := range []struct {
		step string
		do   func(ws string)
		kill bool
	}{
		{"copied", func(string) {}, true},
		{"journaled", asGit, true},
		{"applied", func(string) {}, true},
		{"journaled", asGit, false}, // git fails: the files it changes are gone
	} {
		t.Run(fmt.Sprintf("%s-killed-%v", tc.step, tc.kill), func(t *testing.T) {
			ws := superRepo(t)
			patch, s := subChange(t, ws)
			if len(s.Files) != 2 || s.Files[1].Path != "lib/sub/f.txt" {
				t.Fatalf("the change's files: %+v", s.Files)
			}
			scratch := t.TempDir()
			before := tree(t, ws)
			testhook.Set(t, "clone.apply", func(at string) {
				if at == tc.step {
					tc.do(ws)
					if tc.kill {
						panic(killed{})
					}
				}
			})
			err := func() (err error) {
				defer func() {
					if recover() != nil {
						err = errKilled
					}
				}()
				return Apply(context.Background(), "s", ws, patch, s, scratch)
			}()
			testhook.Set(t, "clone.apply", func(string) {})
			if tc.kill {
				if err != errKilled {
					t.Fatalf("apply was not killed at %s: %v", tc.step, err)
				}
				back, err := Recover(filepath.Join(scratch, JournalName), ws, false)
				if want := tc.step != "copied"; err != nil || back != want {
					t.Fatalf("Recover: rolled back %v (want %v), %v", back, want, err)
				}
			} else if errcode.Of(err).Code != "change-conflict" || !strings.Contains(err.Error(), "nothing was changed") {
				t.Fatalf("a failing git apply: %v", err)
			}
			if after := tree(t, ws); !reflect.DeepEqual(after, before) {
				t.Fatalf("the checkout is\n%v\nwant\n%v", after, before)
			}
			if err := Apply(context.Background(), "s", ws, patch, s, t.TempDir()); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "lib", "sub", "f.txt")); !strings.HasPrefix(string(b), "mine\n") || !strings.HasSuffix(string(b), "line\nagent\n") {
				t.Errorf("after apply the submodule's f.txt is %q", b)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "top.txt")); string(b) != "top\nmine\nagent\n" {
				t.Errorf("after apply top.txt is %q", b)
			}
		})
	}
}

// A spare (made ahead, superproject only) taken for a repository with a
// submodule gets the submodule's copy as a cold copy does.
func TestSpareTakenCopiesSubmodules(t *testing.T) {
	ws := superRepo(t)
	objects := filepath.Join(ws, ".git", "objects")
	root, ctx := t.TempDir(), context.Background()
	if err := MakeSpare(ctx, root, ws, objects); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	if !TakeSpare(root, ws, dirID(t, ws), objects, dir) {
		t.Fatal("the spare was not taken")
	}
	c, err := Make(ctx, ws, units.Clone{Dir: dir, Objects: objects}, true)
	if err != nil {
		t.Fatal(err)
	}
	mounted(t, ws, c)
	sub := filepath.Join(dir, "lib", "sub")
	if len(c.Subs) != 1 || run(t, sub, "rev-parse", "HEAD") != c.Subs[0].Base || run(t, sub, "status", "--porcelain") != "" {
		t.Fatalf("the spare's submodule: %+v", c.Subs)
	}
	if b, _ := os.ReadFile(filepath.Join(sub, "f.txt")); !strings.HasPrefix(string(b), "mine\n") {
		t.Errorf("the spare's submodule lacks the user's edit: %q", b)
	}
}
