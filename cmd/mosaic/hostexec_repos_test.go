package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitRan runs the host's `git status` in dir, as a shell prompt would,
// and reports whether it ran the session's command (it touches mark).
func gitRan(dir, mark string) bool {
	os.Remove(mark) // the session may write it itself: only the host's run counts
	hostGit(dir, "status")
	_, err := os.Stat(mark)
	return err == nil
}

// gitSetup runs git on the host as the user, failing the test on error.
func gitSetup(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// fsmonitorLine is a config that has git status touch mark.
func fsmonitorLine(mark string) string {
	return `printf '[core]\n\tfsmonitor = "touch ` + mark + `; false"\n'`
}

// TestNestedRepoPlanted (issue 31, break 1): the session runs `git init`
// in a directory of the workspace (at any depth) and sets core.fsmonitor in
// its config; the host's `git status` there (any shell prompt entering it)
// ran it. With --allow-write-host-exec the attack works; by default its .git
// is moved aside when the session ends, run says so, and git there runs
// nothing.
func TestNestedRepoPlanted(t *testing.T) {
	needRig(t)
	attack := func(ws string) string {
		return `set -e; mkdir -p a/b/c/src; git init -q a/b/c/src; ` + fsmonitorLine(filepath.Join(ws, "MARK")) + ` >> a/b/c/src/.git/config`
	}
	ws := workspace(t)
	hostGit(ws, "init", "-q")
	src := filepath.Join(ws, "a", "b", "c", "src")
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", attack(ws))
	if !gitRan(src, filepath.Join(ws, "MARK")) {
		t.Fatal("with --allow-write-host-exec the host's git status did not run the nested repository's fsmonitor, so this test proves nothing")
	}
	for _, mode := range [][]string{{"run"}, {"run", "--scope"}} {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		time.Sleep(1100 * time.Millisecond) // the user's repository is older than the session
		src := filepath.Join(ws, "a", "b", "c", "src")
		r := mustMosaic(t, append(append(mode, "-w", ws, "--"), "sh", "-c", attack(ws))...)
		if gitRan(src, filepath.Join(ws, "MARK")) {
			t.Errorf("%v: the host's git status ran the repository the session made", mode)
		}
		if !strings.Contains(r.stderr, filepath.Join(src, ".git")) || !strings.Contains(r.stderr, "moved aside") {
			t.Errorf("%v: run did not say it moved a/b/c/src/.git aside:\n%s", mode, r.stderr)
		}
	}
}

// TestLinkedWorktreePlanted (issue 31, break 2): the workspace is a main
// repository whose linked worktree lives outside it; the session copies
// .git, puts an fsmonitor in the copy's config and points
// .git/worktrees/NAME/commondir at the copy: the host's git status in the
// other worktree ran it. By default the commondir is moved aside and said.
func TestLinkedWorktreePlanted(t *testing.T) {
	needRig(t)
	setup := func(t *testing.T) (ws, other string) {
		ws = workspace(t)
		other = ws + "-other"
		t.Cleanup(func() { os.RemoveAll(other) })
		gitSetup(t, ws, "init", "-q")
		gitSetup(t, ws, "commit", "-q", "--allow-empty", "-m", "x")
		gitSetup(t, ws, "worktree", "add", "-q", other)
		time.Sleep(1100 * time.Millisecond)
		return ws, other
	}
	attack := func(ws, other string) string {
		name := filepath.Base(other)
		return `set -e; cp -r .git copy; ` + fsmonitorLine(filepath.Join(ws, "MARK")) + ` >> copy/config; echo ../../../copy > .git/worktrees/` + name + `/commondir`
	}
	ws, other := setup(t)
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", attack(ws, other))
	if !gitRan(other, filepath.Join(ws, "MARK")) {
		t.Fatal("with --allow-write-host-exec the host's git status in the linked worktree did not run the copy's fsmonitor, so this test proves nothing")
	}
	ws, other = setup(t)
	r := mustMosaic(t, "run", "-w", ws, "--", "sh", "-c", attack(ws, other))
	if gitRan(other, filepath.Join(ws, "MARK")) {
		t.Error("the host's git status in the linked worktree ran the config the session's commondir named")
	}
	if !strings.Contains(r.stderr, filepath.Join(ws, ".git", "worktrees", filepath.Base(other), "commondir")) || !strings.Contains(r.stderr, "linked worktree") {
		t.Errorf("run did not say it moved the worktree's commondir aside:\n%s", r.stderr)
	}
}

// TestIncludeReadOnly (issue 31, break 3): the repository's (read-only)
// config includes ../.gitconfig-shared, a file of the workspace; the
// session appended core.fsmonitor to it and the host's git status ran it.
// With --allow-write-host-exec the attack works; by default the file is
// bound read-only (the reason shown by status) and git runs nothing.
func TestIncludeReadOnly(t *testing.T) {
	needRig(t)
	for _, weak := range []bool{true, false} {
		ws := workspace(t)
		gitSetup(t, ws, "init", "-q")
		gitSetup(t, ws, "config", "include.path", "../.gitconfig-shared")
		os.WriteFile(filepath.Join(ws, ".gitconfig-shared"), []byte("[user]\n\tname = t\n"), 0o644)
		args := []string{"run", "-w", ws}
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaic(t, append(args, "--", "sh", "-c", fsmonitorLine(filepath.Join(ws, "MARK"))+" >> .gitconfig-shared")...)
		ran := gitRan(ws, filepath.Join(ws, "MARK"))
		if weak && !ran {
			t.Fatalf("with --allow-write-host-exec the host's git status did not run the included fsmonitor, so this test proves nothing\n%s", r.stderr)
		}
		if !weak && (ran || r.code == 0) {
			t.Errorf("the session wrote the included config (exit %d) or the host ran it (%v)\n%s", r.code, ran, r.stderr)
		}
	}
}

// TestNpmrcPlanted (issue 31, beyond the eight): a project's .npmrc wins
// over the user's own: a user who set ignore-scripts=true in ~/.npmrc had
// the session's ignore-scripts=false take over, and `npm install` on the
// host ran the package's scripts (a preinstall here). With
// --allow-write-host-exec the attack works; by default the .npmrc the
// session made is moved aside when it ends, and one that was there is
// read-only.
func TestNpmrcPlanted(t *testing.T) {
	needRig(t)
	// The 257 rig's root is minimal (no npm): there mosaic's side is
	// checked (moved aside, read-only) without the host's npm run.
	npm, npmErr := exec.LookPath("npm")
	if npmErr != nil {
		t.Log("npm is not installed here: checking only what mosaic does with .npmrc, not what npm then runs")
	}
	userrc := filepath.Join(t.TempDir(), "npmrc")
	os.WriteFile(userrc, []byte("ignore-scripts=true\n"), 0o600)
	hostInstall := func(ws string) bool {
		if npmErr != nil {
			return false
		}
		mark := filepath.Join(ws, "MARK")
		os.Remove(mark)
		cmd := exec.Command(npm, "install", "--offline", "--no-audit", "--no-fund")
		cmd.Dir = ws
		cmd.Env = append(os.Environ(), "npm_config_userconfig="+userrc, "npm_config_cache="+filepath.Join(t.TempDir(), "cache"))
		cmd.Run()
		_, err := os.Stat(mark)
		return err == nil
	}
	setup := func(t *testing.T) string {
		ws := workspace(t)
		os.WriteFile(filepath.Join(ws, "package.json"), []byte(`{"name":"x","version":"1.0.0","scripts":{"preinstall":"touch MARK"}}`), 0o644)
		if hostInstall(ws) {
			t.Fatal("npm ran the preinstall script despite the user's ignore-scripts=true: the test's setup is wrong")
		}
		return ws
	}
	attack := "printf 'ignore-scripts=false\\n' > .npmrc"
	ws := setup(t)
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", attack)
	if npmErr == nil && !hostInstall(ws) {
		t.Fatal("with --allow-write-host-exec the host's npm install did not run the script the session's .npmrc let through, so this test proves nothing")
	}
	ws = setup(t)
	r := mustMosaic(t, "run", "-w", ws, "--", "sh", "-c", attack)
	if hostInstall(ws) {
		t.Error("the host's npm install ran the script the session's .npmrc let through")
	}
	if _, err := os.Stat(filepath.Join(ws, ".npmrc")); err == nil || !strings.Contains(r.stderr, filepath.Join(ws, ".npmrc")) {
		t.Errorf("the session's .npmrc is still there (%v), or run did not say it moved it aside:\n%s", err, r.stderr)
	}
	ws = setup(t)
	os.WriteFile(filepath.Join(ws, ".npmrc"), []byte("fund=false\n"), 0o644)
	r = mosaic(t, "run", "-w", ws, "--", "sh", "-c", "printf 'ignore-scripts=false\\n' >> .npmrc")
	if b, _ := os.ReadFile(filepath.Join(ws, ".npmrc")); r.code == 0 || string(b) != "fund=false\n" || hostInstall(ws) {
		t.Errorf("the session wrote an existing .npmrc (exit %d): %q", r.code, b)
	}
}
