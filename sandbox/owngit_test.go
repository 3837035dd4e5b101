package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// A workspace without a repository gets the session's own .git, from its
// state, over the placeholders; one with a repository keeps its binds; the
// placeholders go when the session ends (issue 30).
func TestOwnGitDir(t *testing.T) {
	ws, own := t.TempDir(), t.TempDir()
	binds, ids, err := ProtectHostExec(ws)
	if err != nil {
		t.Fatal(err)
	}
	got, gotIDs, ok := OwnGitDir(ws, own, binds, ids)
	if !ok {
		t.Fatal("no own .git for a workspace without a repository")
	}
	var gitBinds []Bind
	for _, b := range got {
		if Within(b.Dst, filepath.Join(ws, ".git")) {
			gitBinds = append(gitBinds, b)
		}
	}
	if len(gitBinds) != 1 || gitBinds[0] != (Bind{Kind: KindRW, Src: own, Dst: filepath.Join(ws, ".git"), Reason: OwnGitReason}) {
		t.Errorf(".git binds %+v", gitBinds)
	}
	for _, id := range gotIDs {
		if Within(id.Path, filepath.Join(ws, ".git")) {
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
	binds, ids, err = ProtectHostExec(repo)
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

// What is moved aside in a repository goes into .git, out of git status's
// sight; without a .git directory, or through a symlink the session
// planted, it stays beside its place (issue 30).
func TestOutOfStatus(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(ws string)
		into  bool
	}{
		{"repository", func(ws string) { os.MkdirAll(filepath.Join(ws, ".git"), 0o755) }, true},
		{"no repository", func(ws string) {}, false},
		{"planted symlink", func(ws string) {
			os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
			os.Symlink(t.TempDir(), filepath.Join(ws, MovedAsideDir))
		}, false},
	} {
		ws := t.TempDir()
		tc.setup(ws)
		os.MkdirAll(filepath.Join(ws, ".claude"), 0o755)
		os.WriteFile(filepath.Join(ws, ".envrc.mosaic-moved-s-1"), []byte("x"), 0o644)
		os.WriteFile(filepath.Join(ws, ".claude/settings.local.json.mosaic-moved-s-2"), []byte("x"), 0o644)
		moved := OutOfStatus(ws, []MovedAside{
			{Path: ".envrc", To: ".envrc.mosaic-moved-s-1"},
			{Path: ".claude/settings.local.json", To: ".claude/settings.local.json.mosaic-moved-s-2"},
			{Path: ".git/commondir", To: ".git/commondir.mosaic-moved-s-3"},
		})
		for _, m := range moved {
			inside := filepath.Dir(m.To) == MovedAsideDir
			if m.Path != ".git/commondir" && inside != tc.into {
				t.Errorf("%s: %s moved to %s", tc.name, m.Path, m.To)
			}
			if m.Path == ".git/commondir" && inside {
				t.Errorf("%s: an entry under .git was moved again", tc.name)
			}
			if _, err := os.Lstat(filepath.Join(ws, m.To)); err != nil && m.Path != ".git/commondir" {
				t.Errorf("%s: %s is not at %s: %v", tc.name, m.Path, m.To, err)
			}
		}
	}
}
