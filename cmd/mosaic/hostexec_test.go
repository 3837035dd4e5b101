package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// hostGit runs git as the user would on the host, in ws.
func hostGit(ws string, args ...string) {
	cmd := exec.Command("git", args...)
	cmd.Dir = ws
	cmd.Run()
}

// TestHooksPathReadOnly: git runs the hooks of the directory core.hooksPath
// names, which husky and many projects keep in the worktree; .git/hooks
// being read-only did not stop a session from rewriting them, and the
// host's next `git commit` ran its hook. With --allow-write-host-exec the
// attack works; by default the hook cannot be written.
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
	repo := func() string {
		ws := workspace(t)
		hostGit(ws, "init", "-q")
		hostGit(ws, "config", "core.hooksPath", ".githooks")
		os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755)
		os.WriteFile(filepath.Join(ws, ".githooks", "pre-commit"), []byte("#!/bin/sh\nexit 0\n"), 0o755)
		return ws
	}
	attack := func(ws string) string {
		return `mkdir -p .githooks; printf '#!/bin/sh\ntouch ` + filepath.Join(ws, "MARK") + `\n' > .githooks/pre-commit; chmod +x .githooks/pre-commit; true`
	}
	ws := repo()
	mustMosaic(t, "run", "--direct", "-w", ws, "--allow-write-host-exec", "--", "sh", "-c", attack(ws))
	if !commit(ws) {
		t.Fatal("with --allow-write-host-exec the host's git commit did not run the hook the session wrote, so this test proves nothing")
	}
	ws = repo()
	r := mosaic(t, "run", "--direct", "-w", ws, "--", "sh", "-c", attack(ws))
	if commit(ws) {
		t.Errorf("the host's git commit ran the hook a session wrote\n%s", r.stderr)
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
		args := []string{"run", "--direct", "--sandbox", "landlock", "-w", ws}
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
