package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"mosaic/sandbox"
)

// createAttack is what a session runs to leave the host something to run
// in entries that did not exist when it started: a .git/commondir that
// sends the host's git to a config of the session's (core.fsmonitor), and
// the files direnv, Claude Code and VS Code run.
func createAttack(ws string) string {
	mark := filepath.Join(ws, "MARK")
	return `set -e
mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/
printf '[core]\n\trepositoryformatversion = 0\n\tfsmonitor = "touch ` + mark + `; false"\n' > evil/config
echo ../evil > .git/commondir
echo 'touch ` + mark + `' > .envrc
echo '{"mcpServers":{"x":{"command":"touch","args":["` + mark + `"]}}}' > .mcp.json
mkdir -p .claude && echo '{"hooks":{}}' > .claude/settings.local.json
mkdir -p .vscode && echo '{}' > .vscode/tasks.json`
}

// hostGit runs git as the user would on the host, in ws.
func hostGit(ws string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = ws
	cmd.Run()
}

// TestHostExecCreated (13.3, entries missing at the start): a session
// creates host-executed entries that did not exist when it started
// (.git/commondir, .envrc, .mcp.json, .claude/settings.local.json,
// .vscode), where no read-only bind can go. With --allow-write-host-exec
// the host's next `git status` runs the session's fsmonitor (the attack
// works); by default, when the session ends (run, run --scope, start then
// stop), every such entry has been moved aside, unread, the host's git runs
// nothing, and mosaic says what it moved, with the reason, where the user
// looks: run's stderr, stop's output, status (also while it runs).
func TestHostExecCreated(t *testing.T) {
	needRig(t)
	created := []string{".git/commondir", ".envrc", ".mcp.json", ".claude/settings.local.json", ".vscode"}
	hostRan := func(ws string) bool {
		os.Remove(filepath.Join(ws, "MARK")) // the session may write it itself: only the host's run counts
		hostGit(ws, "status")
		_, err := os.Stat(filepath.Join(ws, "MARK"))
		return err == nil
	}
	checkMoved := func(t *testing.T, ws, said string) {
		t.Helper()
		for _, rel := range created {
			if _, err := os.Lstat(filepath.Join(ws, rel)); err == nil {
				t.Errorf("%s, created by the session, is still in place", rel)
			}
			// Beside it under .git, in .git's sandbox.MovedAsideDir
			// otherwise, where git status does not list it (issue 30).
			aside, _ := filepath.Glob(filepath.Join(ws, rel+".mosaic-moved-*"))
			if !strings.HasPrefix(rel, ".git/") {
				aside, _ = filepath.Glob(filepath.Join(ws, sandbox.MovedAsideDir, strings.ReplaceAll(rel, "/", "%")+".mosaic-moved-*"))
			}
			if len(aside) != 1 {
				t.Errorf("%s was not moved aside once: %v", rel, aside)
			}
			if !strings.Contains(said, filepath.Join(ws, rel)) {
				t.Errorf("mosaic did not say it moved %s:\n%s", rel, said)
			}
		}
		if hostRan(ws) {
			t.Error("the host's git status ran what a session created")
		}
		if out, _ := exec.Command("git", "-C", ws, "status", "--porcelain", "--untracked-files=all").Output(); strings.Contains(string(out), "mosaic-moved") {
			t.Errorf("git status lists what was moved aside:\n%s", out)
		}
	}

	// The attack works where the entries are left writable.
	ws := workspace(t)
	hostGit(ws, "init", "-q")
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", createAttack(ws))
	if !hostRan(ws) {
		t.Fatal("with --allow-write-host-exec the host's git status did not run the config the session's .git/commondir named, so this test proves nothing")
	}

	for _, mode := range [][]string{{"run"}, {"run", "--scope"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			ws := workspace(t)
			hostGit(ws, "init", "-q")
			r := mustMosaic(t, append(append(mode, "-w", ws, "--"), "sh", "-c", createAttack(ws))...)
			checkMoved(t, ws, r.stderr)
			if !strings.Contains(r.stderr, "direnv runs it") {
				t.Errorf("run's note lacks the reason:\n%s", r.stderr)
			}
		})
	}

	t.Run("start", func(t *testing.T) {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		name := sessionName(t)
		mustMosaic(t, "start", "--name", name, "-w", ws, "--", "sh", "-c", createAttack(ws)+"; touch DONE; exec sleep 300")
		waitFile(t, filepath.Join(ws, "DONE"))
		st := mustMosaic(t, "status", name).stdout
		for _, rel := range created {
			if !strings.Contains(st, "created:   "+filepath.Join(ws, rel)) {
				t.Errorf("status of the running session does not name %s as created:\n%s", rel, st)
			}
		}
		said := mustMosaic(t, "stop", name).stdout
		checkMoved(t, ws, said)
		st = mustMosaic(t, "status", name).stdout
		// And evil/, a git directory of the session's own (HEAD, objects,
		// refs), has its config moved aside (gitrepos.go).
		if strings.Count(st, "moved:") != len(created)+1 {
			t.Errorf("status of the ended session does not say what was moved:\n%s", st)
		}
		var doc struct {
			MovedAside []struct{ Path, To string } `json:"moved_aside"`
		}
		if err := json.Unmarshal([]byte(mustMosaic(t, "status", "--json", name).stdout), &doc); err != nil || len(doc.MovedAside) != len(created)+1 {
			t.Errorf("status --json: moved_aside %v (%v)", doc.MovedAside, err)
		}
	})

	// What existed at the start is the user's: nothing is moved.
	ws = workspace(t)
	hostGit(ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("export A=1\n"), 0o644)
	r := mustMosaic(t, "run", "-w", ws, "--", "true")
	if _, err := os.Stat(filepath.Join(ws, ".envrc")); err != nil || strings.Contains(r.stderr, "moved aside") {
		t.Errorf("an .envrc that was there before the session was moved: %v\n%s", err, r.stderr)
	}
}

// waitFile waits (at most 20 s) until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for i := 0; i < 400; i++ {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not appear", path)
}

// TestHooksPathReadOnly: git runs the hooks of the directory core.hooksPath
// names, which husky and many projects keep in the worktree; .git/hooks
// being read-only did not stop a session from rewriting them, and the
// host's next `git commit` ran its hook. With --allow-write-host-exec the
// attack works; by default the hook cannot be written, and a hooks
// directory the config names but that does not exist yet is moved aside
// once the session made it.
func TestHooksPathReadOnly(t *testing.T) {
	needRig(t)
	commit := func(ws string) bool {
		os.Remove(filepath.Join(ws, "MARK"))
		cmd := exec.Command("git", "-c", "user.name=t", "-c", "user.email=t@example.test", "commit", "-q", "--allow-empty", "-m", "x")
		cmd.Dir = ws
		cmd.Run()
		_, err := os.Stat(filepath.Join(ws, "MARK"))
		return err == nil
	}
	repo := func(withDir bool) string {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		hostGit(ws, "config", "core.hooksPath", ".githooks")
		if withDir {
			os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755)
			os.WriteFile(filepath.Join(ws, ".githooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
		}
		return ws
	}
	attack := func(ws string) string {
		return `mkdir -p .githooks; printf '#!/bin/sh\ntouch ` + filepath.Join(ws, "MARK") + `\n' > .githooks/pre-commit; chmod +x .githooks/pre-commit; true`
	}
	ws := repo(true)
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", attack(ws))
	if !commit(ws) {
		t.Fatal("with --allow-write-host-exec the host's git commit did not run the hook the session wrote, so this test proves nothing")
	}
	for _, withDir := range []bool{true, false} {
		ws := repo(withDir)
		r := mustMosaic(t, "run", "-w", ws, "--", "sh", "-c", attack(ws))
		if commit(ws) {
			t.Errorf("hooks dir there at the start %v: the host's git commit ran the hook a session wrote\n%s", withDir, r.stderr)
		}
	}
}

// TestSubmodulePlanted: a session adds a gitlink to .git/index (writable:
// git in the session needs it) and a sub/.git that names a git directory of
// its own with core.fsmonitor in its config; the host's next `git status`
// recurses into the submodule and runs it. With --allow-write-host-exec the
// attack works; by default, when the session ends the submodule's link is
// moved aside, said on run's stderr, and the host's git runs nothing.
func TestSubmodulePlanted(t *testing.T) {
	needRig(t)
	plant := func(ws string) string {
		return `set -e
mkdir -p sub
git init -q --separate-git-dir="$PWD/evilgit" sub
git -C sub -c user.name=t -c user.email=t@example.test commit -q --allow-empty -m y
git update-index --add --cacheinfo "160000,$(git -C sub rev-parse HEAD),sub"
printf '\tfsmonitor = "touch ` + filepath.Join(ws, "MARK") + `; false"\n' >> evilgit/config
echo x > sub/file`
	}
	hostRan := func(ws string) bool {
		os.Remove(filepath.Join(ws, "MARK"))
		hostGit(ws, "status")
		_, err := os.Stat(filepath.Join(ws, "MARK"))
		return err == nil
	}
	ws := workspace(t)
	hostGit(ws, "init", "-q")
	mustMosaic(t, "run", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", plant(ws))
	if !hostRan(ws) {
		t.Fatal("with --allow-write-host-exec the host's git status did not run the planted submodule's fsmonitor, so this test proves nothing")
	}
	for _, mode := range [][]string{{"run"}, {"run", "--scope"}} {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		r := mustMosaic(t, append(append(mode, "-w", ws, "--"), "sh", "-c", plant(ws))...)
		if hostRan(ws) {
			t.Errorf("%v: the host's git status ran a submodule the session planted\n%s", mode, r.stderr)
		}
		if !strings.Contains(r.stderr, filepath.Join(ws, "sub", ".git")) {
			t.Errorf("%v: run did not say it moved sub/.git aside:\n%s", mode, r.stderr)
		}
	}
}

// TestHostExecReadOnlyLandlock: in --sandbox landlock there is no bwrap to
// bind the host-executed entries read-only, and a Landlock rule that lets
// the workspace be written cannot exclude a path below it: a session wrote
// core.fsmonitor into .git/config and the host's git status ran it. systemd's
// layer now binds them read-only (with --allow-write-host-exec the attack
// still works, showing it is real).
func TestHostExecReadOnlyLandlock(t *testing.T) {
	needRig(t)
	for _, optOut := range []bool{true, false} {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		mark := filepath.Join(ws, "MARK")
		args := []string{"run", "--sandbox", "landlock", "-w", ws}
		if optOut {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaicWith(t, noBwrap, "", append(args, "--", "sh", "-c", `git config core.fsmonitor "touch `+mark+`; false"; printf '#!/bin/sh\ntouch `+mark+`\n' > .git/hooks/pre-commit; true`)...)
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		os.Remove(mark)
		hostGit(ws, "status")
		_, err := os.Stat(mark)
		if optOut && err != nil {
			t.Fatal("with --allow-write-host-exec the host's git status did not run the session's fsmonitor, so this test proves nothing")
		}
		if !optOut && err == nil {
			t.Error("--sandbox landlock: the host's git status ran what a session wrote into .git/config")
		}
	}
}
