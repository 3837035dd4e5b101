package directfloor

import (
	"os"
	"path/filepath"
	"testing"

	"mosaic/sandbox"
)

// A workspace without a repository gets the session's own .git, from its
// state, over the placeholders; one with a repository keeps its binds; the
// placeholders go when the session ends (issue 30).
func TestOwnGitDir(t *testing.T) {
	ws, own := t.TempDir(), t.TempDir()
	binds, ids, err := Protect(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	got, gotIDs, ok := OwnGitDir(ws, own, binds, ids)
	if !ok {
		t.Fatal("no own .git for a workspace without a repository")
	}
	var gitBinds []sandbox.Bind
	for _, b := range got {
		if sandbox.Within(b.Dst, filepath.Join(ws, ".git")) {
			gitBinds = append(gitBinds, b)
		}
	}
	if len(gitBinds) != 1 || gitBinds[0] != (sandbox.Bind{Kind: sandbox.KindRW, Src: own, Dst: filepath.Join(ws, ".git"), Reason: OwnGitReason}) {
		t.Errorf(".git binds %+v", gitBinds)
	}
	for _, id := range gotIDs {
		if sandbox.Within(id.Path, filepath.Join(ws, ".git")) {
			t.Errorf("a placeholder's identity is still checked: %+v", id)
		}
	}
	RemoveGitPlaceholder(ws)
	if _, err := os.Lstat(filepath.Join(ws, ".git")); !os.IsNotExist(err) {
		t.Errorf("the placeholder is left: %v", err)
	}

	repo := t.TempDir()
	os.MkdirAll(filepath.Join(repo, ".git", "objects"), 0o755)
	os.WriteFile(filepath.Join(repo, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	binds, ids, err = Protect(repo, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := OwnGitDir(repo, own, binds, ids); ok {
		t.Error("a repository's .git was replaced")
	}
	file := t.TempDir()
	os.WriteFile(filepath.Join(file, ".git"), []byte("gitdir: /elsewhere\n"), 0o644)
	if _, _, ok := OwnGitDir(file, own, nil, nil); ok {
		t.Error("a .git file was replaced")
	}
}
