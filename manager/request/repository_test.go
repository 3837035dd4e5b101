package request

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// An empty .git is no repository, as for git: a plain directory holding
// one (a direct session's placeholder while it runs) is a plain directory,
// and one inside a repository is that repository's subdirectory. Before,
// clone mode refused both: ".git/objects is not a git object directory".
func TestEmptyDotGitIsNoRepository(t *testing.T) {
	root := t.TempDir()
	plain := filepath.Join(root, "plain")
	os.MkdirAll(filepath.Join(plain, ".git"), 0o755)
	if r, err := findRepository(plain); err != nil || r.top != "" {
		t.Errorf("a plain directory with an empty .git: %+v, %v", r, err)
	}
	repo := filepath.Join(root, "repo")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	sub := filepath.Join(repo, "sub")
	os.MkdirAll(filepath.Join(sub, ".git"), 0o755)
	if r, err := findRepository(sub); err != nil || r.top != repo {
		t.Errorf("a subdirectory with an empty .git: %+v, %v, want the repository %s", r, err, repo)
	}
}
