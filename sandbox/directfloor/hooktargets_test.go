package directfloor

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestHookTargetsReadOnly: the files of the workspace a hook leads to (a
// symlinked hook's target, a path a hook script runs, also from git
// rev-parse --show-toplevel, a pre-commit entry) are bound read-only; a
// path a pre-commit config names only as a filter (exclude:) is not.
func TestHookTargetsReadOnly(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ws := t.TempDir()
	for _, p := range []string{"tools/pre-commit", "tools/push.sh", "tools/msg.sh", "scripts/lint.sh", "docs/conf.py"} {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755)
		os.WriteFile(filepath.Join(ws, p), []byte("#!/bin/sh\n"), 0o755)
	}
	hooks := filepath.Join(ws, ".git", "hooks")
	os.MkdirAll(hooks, 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	os.Symlink("../../tools/pre-commit", filepath.Join(hooks, "pre-commit"))
	os.WriteFile(filepath.Join(hooks, "pre-push"), []byte("#!/bin/sh\nexec ./tools/push.sh \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(hooks, "commit-msg"), []byte("#!/bin/sh\n\"$(git rev-parse --show-toplevel)/tools/msg.sh\" \"$1\"\n"), 0o755)
	os.WriteFile(filepath.Join(ws, ".pre-commit-config.yaml"), []byte("repos:\n- repo: local\n  hooks:\n  - id: lint\n    entry: ./scripts/lint.sh\n    language: script\n    exclude: docs/conf.py\n"), 0o644)
	ro := readOnlyRels(t, ws)
	for _, want := range []string{"tools/pre-commit", "tools/push.sh", "tools/msg.sh", "scripts/lint.sh"} {
		if !slices.Contains(ro, want) {
			t.Errorf("%s is not read-only: %v", want, ro)
		}
	}
	if slices.Contains(ro, "docs/conf.py") {
		t.Errorf("docs/conf.py, only a filter of pre-commit's, is read-only: %v", ro)
	}
}
