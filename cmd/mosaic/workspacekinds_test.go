package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// agentWrites is what each kind's session runs: it says where it starts,
// changes a file the user has and adds one.
const agentWrites = `set -e; pwd; echo agent >> mine.txt; echo new > new.txt`

// TestDefaultIsClone: with neither flag a run works in its own copy (the
// host sees nothing of its writes until apply), --direct writes the
// checkout and says so in one line on stderr and in status, and --clone
// --direct together is bad input. The first check can fail: the --direct
// session below is its control, whose write the host sees.
func TestDefaultIsClone(t *testing.T) {
	needRig(t)
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\n"), 0o644)
	name := cloneSession(t)
	r := mustMosaic(t, "run", "--name", name, "-w", ws, "--", "sh", "-c", agentWrites)
	if _, err := os.Lstat(filepath.Join(ws, "new.txt")); err == nil {
		t.Fatal("a default run wrote the checkout")
	}
	if strings.Contains(r.stderr, "direct mode") || !strings.Contains(r.stderr, "2 files") {
		t.Errorf("a default run's stderr:\n%s", r.stderr)
	}
	var st struct {
		WorkspaceMode string `json:"workspace_mode"`
		Warning       string
	}
	json.Unmarshal([]byte(mustMosaic(t, "status", name, "--json").stdout), &st)
	if st.WorkspaceMode != "clone" || st.Warning != "" {
		t.Errorf("status of a default session: %+v", st)
	}

	direct := cloneSession(t)
	r = mustMosaic(t, "start", "--direct", "--name", direct, "-w", ws, "--", "sh", "-c", "echo direct > direct.txt; exec sleep 60")
	if n := strings.Count(r.stderr, "direct mode: the session writes your checkout in place"); n != 1 {
		t.Errorf("--direct said its line %d times:\n%s", n, r.stderr)
	}
	eventually(t, 10e9, "the direct session's write in the checkout", func() bool {
		_, err := os.Lstat(filepath.Join(ws, "direct.txt"))
		return err == nil
	})
	json.Unmarshal([]byte(mustMosaic(t, "status", direct, "--json").stdout), &st)
	if st.WorkspaceMode != "direct" || !strings.Contains(st.Warning, "your host's tools will run what it writes") {
		t.Errorf("status of a direct session: %+v", st)
	}
	if out := mustMosaic(t, "status", direct).stdout; !strings.Contains(out, "direct mode: the session writes your checkout in place") {
		t.Errorf("status does not say direct mode:\n%s", out)
	}
	// The direct session runs on, its floor's empty .git placeholder in
	// this plain directory: the clone-mode sessions below take it for no
	// repository, as git does (they refused "not a git object directory").
	r = mosaic(t, "run", "--clone", "--direct", "-w", ws, "--json", "--", "true")
	if code, _ := jsonError(t, r); r.code != 2 || code != "bad-clone" {
		t.Errorf("--clone --direct: exit %d %s", r.code, code)
	}
	// run --scope is in clone mode too (it was refused, naming --direct).
	scope := cloneSession(t)
	mustMosaic(t, "run", "--scope", "--name", scope, "-w", ws, "--", "sh", "-c", "echo scope > scope.txt")
	if _, err := os.Lstat(filepath.Join(ws, "scope.txt")); err == nil {
		t.Error("a default run --scope wrote the checkout")
	}
}

// TestCloneWorkspaceKinds: each kind of workspace works in clone mode:
// the session starts where the user asked, the checkout is untouched
// until apply, diff shows the agent's change only (never the user's
// uncommitted work), and apply writes it.
func TestCloneWorkspaceKinds(t *testing.T) {
	needRig(t)
	committed := func(t *testing.T) string {
		ws := workspace(t)
		gitMust(t, ws, "init", "-q", "-b", "main")
		os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\n"), 0o644)
		os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
		os.WriteFile(filepath.Join(ws, "sub", "mine.txt"), []byte("mine\n"), 0o644)
		gitMust(t, ws, "add", ".")
		gitMust(t, ws, "-c", "user.name=u", "-c", "user.email=u@e", "commit", "-qm", "one")
		return ws
	}
	kinds := []struct {
		name string
		make func(t *testing.T) (ws, dir string) // the workspace, and where its change lands
		args []string
	}{
		{"top", func(t *testing.T) (string, string) { ws := committed(t); return ws, ws }, nil},
		{"subdirectory", func(t *testing.T) (string, string) {
			ws := committed(t)
			return filepath.Join(ws, "sub"), filepath.Join(ws, "sub")
		}, nil},
		{"linked worktree", func(t *testing.T) (string, string) {
			main := committed(t)
			wt := filepath.Join(main, "..", filepath.Base(main)+"-wt")
			gitMust(t, main, "worktree", "add", "-q", "-b", "other", wt)
			t.Cleanup(func() { os.RemoveAll(wt) })
			return wt, wt
		}, nil},
		{"detached HEAD", func(t *testing.T) (string, string) {
			ws := committed(t)
			gitMust(t, ws, "checkout", "-q", "--detach")
			return ws, ws
		}, nil},
		{"unborn branch", func(t *testing.T) (string, string) {
			ws := workspace(t)
			gitMust(t, ws, "init", "-q")
			os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\n"), 0o644)
			return ws, ws
		}, nil},
		{"plain directory", func(t *testing.T) (string, string) {
			ws := workspace(t)
			os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\n"), 0o644)
			return ws, ws
		}, nil},
		{"--sandbox landlock", func(t *testing.T) (string, string) { ws := committed(t); return ws, ws }, []string{"--sandbox", "landlock"}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ws, dir := k.make(t)
			os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("mine\nuser's own\n"), 0o644) // uncommitted
			name := cloneSession(t)
			r := mustMosaic(t, append(append([]string{"run", "--name", name, "-w", ws}, k.args...), "--", "sh", "-c", agentWrites)...)
			if got := strings.TrimSpace(r.stdout); got != ws {
				t.Errorf("the session started in %q, want %q", got, ws)
			}
			if _, err := os.Lstat(filepath.Join(dir, "new.txt")); err == nil {
				t.Fatal("the session wrote the checkout")
			}
			d := diffOf(t, name)
			if !strings.Contains(d.Patch, "+agent") || strings.Contains(d.Patch, "+user's own") || len(d.Summary.Files) != 2 {
				t.Errorf("diff: %s\n%s", paths(d), d.Patch)
			}
			mustMosaic(t, "apply", name)
			b, _ := os.ReadFile(filepath.Join(dir, "mine.txt"))
			n, _ := os.ReadFile(filepath.Join(dir, "new.txt"))
			if string(b) != "mine\nuser's own\nagent\n" || string(n) != "new\n" {
				t.Errorf("after apply: mine.txt %q, new.txt %q", b, n)
			}
		})
	}
}

// TestCloneRefusesWhatItCannotCopy: a plain directory holding a FIFO, a
// repository with nested submodules, a submodule's checkout and a repository
// that borrows objects are refused in one line naming --direct, with
// nothing left; --direct runs each.
func TestCloneRefusesWhatItCannotCopy(t *testing.T) {
	needRig(t)
	fifo := workspace(t)
	if err := syscall.Mkfifo(filepath.Join(fifo, "pipe"), 0o600); err != nil {
		t.Fatal(err)
	}
	subs := subRepo(t) // a nested submodule: lib/sub has submodules of its own
	os.WriteFile(filepath.Join(subs, "lib", "sub", ".gitmodules"), nil, 0o644)
	alt := workspace(t)
	gitMust(t, alt, "init", "-q")
	os.MkdirAll(filepath.Join(alt, ".git", "objects", "info"), 0o755)
	os.WriteFile(filepath.Join(alt, ".git", "objects", "info", "alternates"), []byte("/nonexistent/objects\n"), 0o644)
	sm := workspace(t)
	os.WriteFile(filepath.Join(sm, ".git"), []byte("gitdir: "+filepath.Join(subs, ".git", "modules", "x")+"\n"), 0o644)
	for what, ws := range map[string]string{"special file": fifo, "nested submodules": subs, "alternates": alt, "submodule checkout": sm} {
		name := cloneSession(t)
		r := mosaic(t, "run", "--name", name, "-w", ws, "--json", "--", "true")
		if code, msg := jsonError(t, r); r.code != 2 || code != "bad-workspace" || !strings.Contains(msg, "--direct") || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d %s %q", what, r.code, code, msg)
		}
		if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name)); err == nil {
			t.Errorf("%s: a refused clone left a state directory", what)
		}
		if what != "submodule checkout" {
			mustMosaic(t, "run", "--direct", "-w", ws, "--", "true")
		}
	}
}

// subRepo makes, in a new directory, a repository (top) with a
// submodule at lib/sub whose f.txt has ten lines, both committed, and
// returns top.
func subRepo(t *testing.T) string {
	t.Helper()
	root := workspace(t)
	sub, top := filepath.Join(root, "sub"), filepath.Join(root, "top")
	who := []string{"-c", "user.name=u", "-c", "user.email=u@e", "-c", "protocol.file.allow=always"}
	for _, d := range []string{sub, top} {
		os.Mkdir(d, 0o755)
		gitMust(t, d, "init", "-q", "-b", "main")
	}
	os.WriteFile(filepath.Join(sub, "f.txt"), []byte(strings.Repeat("line\n", 10)), 0o644)
	gitMust(t, sub, "add", ".")
	gitMust(t, sub, append(who, "commit", "-qm", "sub")...)
	os.WriteFile(filepath.Join(top, "mine.txt"), []byte("mine\n"), 0o644)
	gitMust(t, top, "add", ".")
	gitMust(t, top, append(who, "commit", "-qm", "top")...)
	gitMust(t, top, append(who, "submodule", "add", "-q", "../sub", "lib/sub")...)
	gitMust(t, top, append(who, "commit", "-qm", "the submodule")...)
	return top
}

// TestCloneSubmodules: a repository with a submodule works in clone
// mode. The session's copy has the submodule checked out as the user has
// it, a repository of its own (git runs and commits there); the user's
// checkout is untouched until apply; diff shows the agent's edits of the
// superproject's file and the submodule's, never the user's own
// uncommitted edits there, and says the submodule's HEAD moved; apply
// --branch is refused; an apply killed midway puts the submodule's file
// back too; apply writes both files, under the user's edits, and no
// gitlink.
func TestCloneSubmodules(t *testing.T) {
	needRig(t)
	ws := subRepo(t)
	f := filepath.Join(ws, "lib", "sub", "f.txt")
	mine := "mine\n" + strings.Repeat("line\n", 10)
	os.WriteFile(f, []byte(mine), 0o644) // the user's own, uncommitted, in the submodule
	os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("mine\nuser's own\n"), 0o644)
	subHead := gitMust(t, filepath.Join(ws, "lib", "sub"), "rev-parse", "HEAD")
	name := cloneSession(t)
	agent := `set -e
cd lib/sub && test "$(git rev-parse --show-toplevel)" = "$PWD" && test -z "$(git status --porcelain)"
head -1 f.txt | grep -qx mine
echo agent >> f.txt && git -c user.name=a -c user.email=a@b commit -qam agent && cd ../..
echo agent >> mine.txt`
	mustMosaic(t, "run", "--name", name, "-w", ws, "--", "sh", "-c", agent)
	if b, _ := os.ReadFile(f); string(b) != mine {
		t.Fatalf("the session wrote the user's submodule: %q", b)
	}
	d := diffOf(t, name)
	var moved struct {
		MovedSubmodules []string `json:"moved_submodules"`
	}
	json.Unmarshal([]byte(mustMosaic(t, "diff", name, "--json").stdout), &moved)
	if paths(d) != "lib/sub/f.txt,mine.txt" || strings.Count(d.Patch, "+agent") != 2 || strings.Contains(d.Patch, "+mine") || strings.Contains(d.Patch, "+user's own") {
		t.Errorf("diff: %s\n%s", paths(d), d.Patch)
	}
	if len(moved.MovedSubmodules) != 1 || moved.MovedSubmodules[0] != "lib/sub" {
		t.Errorf("diff's moved submodules: %v", moved.MovedSubmodules)
	}
	if out := mustMosaic(t, "diff", name).stdout; !strings.Contains(out, "moved submodule lib/sub's HEAD") {
		t.Errorf("diff does not say the submodule's HEAD moved:\n%s", out)
	}
	r := mosaic(t, "apply", "--branch", "b", name, "--json")
	if code, msg := jsonError(t, r); r.code != 2 || code != "bad-clone" || !strings.Contains(msg, "submodule lib/sub") {
		t.Errorf("apply --branch of a change in a submodule: exit %d %s %q", r.code, code, msg)
	}
	cmd, _, _ := paused(t, "apply-journaled", nil, "apply", name)
	os.Remove(f) // as git apply's first phase does
	cmd.Process.Kill()
	cmd.Wait()
	mustMosaic(t, "status", name) // rolls the killed apply back
	if b, _ := os.ReadFile(f); string(b) != mine {
		t.Fatalf("the submodule's file after a killed apply was rolled back: %q", b)
	}
	mustMosaic(t, "apply", name)
	if b, _ := os.ReadFile(f); string(b) != mine+"agent\n" {
		t.Errorf("the submodule's file after apply: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "mine.txt")); string(b) != "mine\nuser's own\nagent\n" {
		t.Errorf("mine.txt after apply: %q", b)
	}
	if h := gitMust(t, filepath.Join(ws, "lib", "sub"), "rev-parse", "HEAD"); h != subHead {
		t.Errorf("apply moved the user's submodule's HEAD: %s, was %s", h, subHead)
	}
}
