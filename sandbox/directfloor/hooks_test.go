package directfloor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/internal/testhook"
	"mosaic/sandbox"
)

func TestGitConfigValue(t *testing.T) {
	dir := t.TempDir()
	for cfg, want := range map[string]string{
		"[core]\n\thooksPath = .husky/_\n":                           ".husky/_",
		"[Core]\n\tHooksPath=\".git hooks\" # a comment\n":           ".git hooks",
		"[core] hookspath = a\n[core]\n\thooksPath = b ; last\n":     "b",
		"[user]\n\thooksPath = no\n[core \"x\"]\n\thooksPath = no\n": "",
		"[core]\n\tfsmonitor = x\n":                                  "",
	} {
		p := filepath.Join(dir, "config")
		os.WriteFile(p, []byte(cfg), 0o644)
		if got := gitConfigValue(p, "core", "hookspath"); got != want {
			t.Errorf("%q: got %q, want %q", cfg, got, want)
		}
	}
}

// readOnlyRels are the entries of ws Protect binds read-only.
func readOnlyRels(t *testing.T, ws string) []string {
	t.Helper()
	binds, _, err := Protect(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range binds {
		if b.Kind == sandbox.KindRO {
			out = append(out, strings.TrimPrefix(b.Dst, ws+"/"))
		}
	}
	return out
}

// The directory core.hooksPath names inside the workspace, and the hook
// managers' files, are bound read-only; a hooksPath directory that does
// not exist yet is not (nothing to bind); one outside the workspace is not
// the sandbox's business.
func TestHookEntries(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git", "hooks"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".githooks"), 0o755)
	os.MkdirAll(filepath.Join(ws, ".husky", "_"), 0o755)
	os.WriteFile(filepath.Join(ws, ".pre-commit-config.yaml"), []byte("repos: []\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n\thooksPath = .githooks\n"), 0o644)
	ro := func() string { return strings.Join(readOnlyRels(t, ws), " ") }
	if got := ro(); got != ".git/config .git/hooks .claude .husky .pre-commit-config.yaml .githooks" {
		t.Errorf("read-only: %s", got)
	}
	// From the user's global config, a relative path (every repository's).
	os.WriteFile(filepath.Join(ws, ".git", "config"), []byte("[core]\n\tbare = false\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\thooksPath = hooks\n"), 0o644)
	if got := ro(); strings.Contains(got, ".githooks") || strings.Contains(got, " hooks") {
		t.Errorf("read-only with a missing hooks dir: %s", got)
	}
	// Outside the workspace: nothing.
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[core]\n\thooksPath = ~/.githooks\n"), 0o644)
	if got := ro(); got != ".git/config .git/hooks .claude .husky .pre-commit-config.yaml" {
		t.Errorf("read-only with hooks outside: %s", got)
	}
}

// A session sharing the workspace swaps the directory mosaic checked for a
// symlink before mosaic makes a placeholder in it (a hook, not timing):
// nothing is made where the symlink leads, and the start is refused.
func TestPlaceholderSwap(t *testing.T) {
	ws, elsewhere := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755) // no hooks: a placeholder is due
	testhook.Set(t, hookBeforePlaceholder, func(dir string) {
		if dir == filepath.Join(ws, ".git") {
			os.Rename(dir, filepath.Join(ws, "git-old"))
			os.Symlink(elsewhere, dir)
		}
	})
	if _, _, err := Protect(ws, ""); err == nil {
		t.Error("the start went on after the swap")
	}
	if _, err := os.Lstat(filepath.Join(elsewhere, "hooks")); err == nil {
		t.Error("mosaic made the placeholder where the planted symlink leads")
	}
}
