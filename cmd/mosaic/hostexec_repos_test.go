package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
		args := directRun(t, ws)
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
// --allow-write-host-exec the attack works; by default the project's
// .npmrc is read-only (one the session makes where there was none is not
// protected: direct mode protects what exists at the start).
func TestNpmrcPlanted(t *testing.T) {
	needRig(t)
	// The 257 rig's root is minimal (no npm): there mosaic's side is
	// checked (read-only) without the host's npm run.
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
	// The project's own .npmrc: a session appends to it.
	attack := "printf 'ignore-scripts=false\\n' >> .npmrc"
	for _, weak := range []bool{true, false} {
		ws := setup(t)
		os.WriteFile(filepath.Join(ws, ".npmrc"), []byte("fund=false\n"), 0o644)
		args := directRun(t, ws)
		if weak {
			args = append(args, "--allow-write-host-exec")
		}
		r := mosaic(t, append(args, "--", "sh", "-c", attack)...)
		if weak {
			if npmErr == nil && !hostInstall(ws) {
				t.Fatalf("with --allow-write-host-exec the host's npm install did not run the script the session's .npmrc let through, so this test proves nothing\n%s", r.stderr)
			}
			continue
		}
		if b, _ := os.ReadFile(filepath.Join(ws, ".npmrc")); r.code == 0 || string(b) != "fund=false\n" || hostInstall(ws) {
			t.Errorf("the session wrote an existing .npmrc (exit %d): %q", r.code, b)
		}
	}
}
