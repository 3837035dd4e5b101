package clone

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
)

// killed is what a hook panics with to stop Apply where a kill would.
type killed struct{}

// tree is every path of ws outside .git: a file's mode and bytes, a
// symlink's target.
func tree(t *testing.T, ws string) map[string]string {
	t.Helper()
	m := map[string]string{}
	filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(ws, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		fi, _ := os.Lstat(p)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "-> " + target
		case fi.Mode().IsRegular():
			b, _ := os.ReadFile(p)
			m[rel] = fi.Mode().String() + " " + string(b)
		}
		return nil
	})
	return m
}

// journalRepo is a checkout (ws, with the journal its apply keeps) with the user's uncommitted edit at the top of
// a.txt, and a change (the agent's) that edits a.txt's end, deletes b.txt,
// edits the executable c.sh, adds n/new.txt and makes the file d a
// directory holding d/f.
func journalRepo(t *testing.T) (ws, journal string, apply func() error) {
	t.Helper()
	ws = userRepo(t)
	lines := strings.Repeat("line\n", 20)
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte(lines), 0o644)
	os.WriteFile(filepath.Join(ws, "b.txt"), []byte("bee\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "c.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(ws, "d"), []byte("a file\n"), 0o644)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "base")
	patch, s := change(t, ws, func(dir string) {
		os.WriteFile(filepath.Join(dir, "a.txt"), []byte(lines+"agent\n"), 0o644)
		os.Remove(filepath.Join(dir, "b.txt"))
		os.WriteFile(filepath.Join(dir, "c.sh"), []byte("#!/bin/sh\necho agent\n"), 0o755)
		os.MkdirAll(filepath.Join(dir, "n"), 0o755)
		os.WriteFile(filepath.Join(dir, "n", "new.txt"), []byte("new\n"), 0o644)
		os.Remove(filepath.Join(dir, "d"))
		os.MkdirAll(filepath.Join(dir, "d"), 0o755)
		os.WriteFile(filepath.Join(dir, "d", "f"), []byte("now a directory\n"), 0o644)
	})
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("mine\n"+lines), 0o644) // the user's own, uncommitted
	scratch := t.TempDir()
	return ws, filepath.Join(scratch, JournalName), func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(killed); !ok {
					panic(r)
				}
				err = errKilled
			}
		}()
		return Apply(context.Background(), "s", ws, patch, s, scratch)
	}
}

// errKilled is what a run of Apply stopped by a hook returns.
var errKilled = errcode.StateDir.New("killed")

// deleteAsGit removes the files the change replaces, as git apply's first
// phase does before it writes any.
func deleteAsGit(ws string) {
	for _, f := range []string{"a.txt", "b.txt", "c.sh", "d"} {
		os.Remove(filepath.Join(ws, f))
	}
}

// An apply killed at each of its steps before the record says applied is
// rolled back by Recover to exactly the checkout before it, the user's
// uncommitted edit included; one killed before the journal's manifest
// leaves the checkout untouched and only its journal to remove. Applying
// again then works.
func TestApplyKilledAtEachStepRecovers(t *testing.T) {
	steps := map[string]func(ws string){
		"copied":    func(string) {}, // before the manifest: git never ran
		"journaled": deleteAsGit,     // git's first phase done, killed in it
		"applied":   func(string) {}, // git done, the record not written
	}
	for step, do := range steps {
		t.Run(step, func(t *testing.T) {
			ws, dir, apply := journalRepo(t)
			before := tree(t, ws)
			testhook.Set(t, "clone.apply", func(at string) {
				if at == step {
					do(ws)
					panic(killed{})
				}
			})
			if err := apply(); err != errKilled {
				t.Fatalf("apply was not killed at %s: %v", step, err)
			}
			testhook.Set(t, "clone.apply", func(string) {})
			if _, err := os.Stat(filepath.Join(dir, manifestName)); (err == nil) != (step != "copied") {
				t.Errorf("killed at %s, the journal's manifest: %v", step, err)
			}
			back, err := Recover(dir, ws, false)
			if err != nil {
				t.Fatal(err)
			}
			if want := step != "copied"; back != want {
				t.Errorf("Recover says rolled back %v, want %v", back, want)
			}
			if after := tree(t, ws); !reflect.DeepEqual(after, before) {
				t.Errorf("after Recover the checkout is\n%v\nwant\n%v", after, before)
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Error("Recover left the journal")
			}
			if err := apply(); err != nil {
				t.Fatalf("applying again: %v", err)
			}
			if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); !strings.HasPrefix(string(b), "mine\n") || !strings.HasSuffix(string(b), "agent\n") {
				t.Errorf("applied again, a.txt is %q", b)
			}
		})
	}
}

// A git apply that fails once it has begun (here: a file it changes is
// gone, as after a full disk in its first phase) is undone from the
// journal: the checkout is as before and the error says nothing changed.
func TestApplyFailingInGitRestores(t *testing.T) {
	ws, dir, apply := journalRepo(t)
	before := tree(t, ws)
	testhook.Set(t, "clone.apply", func(at string) {
		if at == "journaled" {
			deleteAsGit(ws)
		}
	})
	err := apply()
	if errcode.Of(err).Code != "change-conflict" || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("a failing git apply: %v", err)
	}
	if after := tree(t, ws); !reflect.DeepEqual(after, before) {
		t.Errorf("after a failed apply the checkout is\n%v\nwant\n%v", after, before)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Error("a failed apply left its journal")
	}
}

// Once the record says applied, Recover only removes the journal: the
// checkout keeps the change.
func TestRecoverAfterTheRecordKeepsTheChange(t *testing.T) {
	ws, dir, apply := journalRepo(t)
	if err := apply(); err != nil {
		t.Fatal(err)
	}
	after := tree(t, ws)
	if back, err := Recover(dir, ws, true); back || err != nil {
		t.Fatalf("Recover of an applied change: %v %v", back, err)
	}
	if got := tree(t, ws); !reflect.DeepEqual(got, after) {
		t.Errorf("Recover of an applied change changed the checkout:\n%v", got)
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Error("Recover left the journal")
	}
}
