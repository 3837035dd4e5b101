package records

import (
	"os"
	"path/filepath"
	"testing"
)

// TestEndedStageTidiesOnlyThePlaceholder: when a direct session that had
// its own repository ends, the stage removes the empty .git placeholder it
// was mounted over, and nothing else of the workspace: what the session
// wrote there (a host-run file it created) is left as it is, since direct
// mode protects at the start only (issue 38), and a .git that is no longer
// empty is the user's.
func TestEndedStageTidiesOnlyThePlaceholder(t *testing.T) {
	for _, userGit := range []bool{false, true} {
		ws, dir := t.TempDir(), t.TempDir()
		if err := os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if userGit {
			os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
		}
		os.WriteFile(filepath.Join(ws, ".envrc"), []byte("echo made by the session\n"), 0o644)
		r := Record{Name: "x", Description: Description{Command: []string{"true"}, Workspace: ws, OwnGitDir: filepath.Join(dir, "git")}}
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
		if err := RecordEnd(dir, func(string) string { return "" }, false); err != nil {
			t.Fatal(err)
		}
		if _, ok := ReadEnd(dir); !ok {
			t.Error("no end recorded")
		}
		_, err := os.Lstat(filepath.Join(ws, ".git"))
		if gone := os.IsNotExist(err); gone == userGit {
			t.Errorf("user's .git %v: .git removed %v", userGit, gone)
		}
		if _, err := os.Stat(filepath.Join(ws, ".envrc")); err != nil {
			t.Errorf("the session's .envrc was touched: %v", err)
		}
	}
}
