package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCloneBindsOverTheCopy (attack on issue 38's clone mode, service and
// --scope): a --rw or --ro path in the repository, or a --rw path holding
// it or its git directory, would be bound over the copy (or around it):
// the session would write your .git (its config names what git runs on
// the host, at the next session's start too: core.fsmonitor) and your
// checkout, or move your repository away and plant its own at its path.
// Each is refused as bad input (bad-bind, exit 2, naming --direct) before
// anything starts, nothing written; with --direct the same --rw .git is
// taken (the control). Shown to bite with bindsBesideCopy's call removed:
// every session ran, --rw .git and --rw sub wrote the host (scope and
// service), --ro of the top showed the checkout in place of the copy, and
// --rw of the parent moved the repository away and planted another.
func TestCloneBindsOverTheCopy(t *testing.T) {
	needRig(t)
	parent := workspace(t)
	ws := filepath.Join(parent, "team", "app")
	os.MkdirAll(ws, 0o755)
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "u@example.com"}, {"config", "user.name", "u"}} {
		gitMust(t, ws, args...)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", "s.txt"), []byte("s\n"), 0o644)
	gitMust(t, ws, "add", "-A")
	gitMust(t, ws, "commit", "-qm", "one")
	wt := filepath.Join(parent, "wt")
	gitMust(t, ws, "worktree", "add", "-q", "-b", "side", wt)
	write := `for d in "$@"; do echo pwn > "$d/pwn"; done; git config core.fsmonitor "touch ` + parent + `/ran"; mv ` + parent + `/team ` + parent + `/moved`
	cases := []struct{ w, flag, path string }{
		{ws, "--rw", filepath.Join(ws, ".git")},
		{ws, "--rw", filepath.Join(ws, "sub")},
		{ws, "--rw", parent},
		{ws, "--ro", ws},
		{filepath.Join(ws, "sub"), "--ro", filepath.Join(ws, "sub")}, // a workspace below the top: the copy is of the top
		{wt, "--rw", ws},                                             // holds a linked worktree's git directory
		{wt, "--rw", filepath.Join(ws, ".git")},                      // is it
	}
	for _, scope := range []string{"", "--scope"} {
		for _, c := range cases {
			args := []string{"run", "--json"}
			if scope != "" {
				args = append(args, scope)
			}
			args = append(args, c.flag, c.path, "-w", c.w, "--", "sh", "-c", write, "sh", c.path)
			r := mosaic(t, args...)
			var doc struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal([]byte(r.stdout), &doc)
			if r.code != 2 || doc.Error.Code != "bad-bind" || !strings.Contains(doc.Error.Message, "--direct") {
				t.Errorf("%s %s %s -w %s: exit %d %q; want bad-bind, exit 2, naming --direct\n%s", scope, c.flag, c.path, c.w, r.code, doc.Error.Message, r.stderr)
			}
			for _, p := range []string{filepath.Join(c.path, "pwn"), filepath.Join(parent, "moved"), filepath.Join(parent, "ran")} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("%s %s %s: the session wrote %s on the host", scope, c.flag, c.path, p)
				}
			}
			if b, _ := gitOut(ws, "config", "--get", "core.fsmonitor"); b != "" {
				t.Fatalf("%s %s %s: your .git/config has core.fsmonitor %q", scope, c.flag, c.path, b)
			}
		}
	}
	// The control: in direct mode, --rw .git is what the user asked.
	mustMosaic(t, "run", "--direct", "--rw", filepath.Join(ws, ".git"), "-w", wt, "--", "sh", "-c", "echo pwn > "+filepath.Join(ws, ".git", "pwn"))
	if _, err := os.Lstat(filepath.Join(ws, ".git", "pwn")); err != nil {
		t.Errorf("--direct --rw .git did not write it (the control): %v", err)
	}
}

// gitOut is git's output in dir, trimmed.
func gitOut(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}
