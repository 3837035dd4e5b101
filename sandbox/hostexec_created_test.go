package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MoveAsideCreated renames what was created, leaves what was not, and never
// follows a symlink the session planted on the way: a .claude that points
// elsewhere is itself moved aside, and what it points to is untouched.
func TestMoveAsideCreated(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	missing := MissingHostExec(ws)
	for _, want := range []string{".envrc", ".git/commondir", ".claude/settings.local.json", ".vscode"} {
		if !strings.Contains(strings.Join(missing, " "), want) {
			t.Fatalf("%s is not watched: %v", want, missing)
		}
	}
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(ws, ".git/commondir"), []byte("../evil"), 0o644)
	os.WriteFile(filepath.Join(outside, "settings.local.json"), []byte("{}"), 0o644)
	os.Symlink(outside, filepath.Join(ws, ".claude"))
	if got := Created(ws, missing); strings.Join(got, " ") != ".envrc .git/commondir .claude" {
		t.Errorf("Created: %v", got)
	}
	moved := MoveAsideCreated(ws, "s", missing)
	byPath := map[string]MovedAside{}
	for _, m := range moved {
		byPath[m.Path] = m
	}
	for _, rel := range []string{".envrc", ".git/commondir"} {
		m := byPath[rel]
		if m.Error != "" || !strings.HasPrefix(m.To, rel+".mosaic-moved-s-") {
			t.Errorf("%s: %+v", rel, m)
		}
		if _, err := os.Lstat(filepath.Join(ws, m.To)); err != nil {
			t.Errorf("%s is not where it was moved: %v", rel, err)
		}
	}
	if m := byPath[".claude"]; m.Error != "" || !strings.HasPrefix(m.To, ".claude.mosaic-moved-s-") {
		t.Errorf("a symlinked .claude was not moved aside: %+v", m)
	}
	if _, err := os.Stat(filepath.Join(outside, "settings.local.json")); err != nil {
		t.Error("what the planted symlink points to was moved")
	}
	if _, ok := byPath[".mcp.json"]; ok {
		t.Error("an entry the session did not create was reported")
	}
}

// TestMoveAsideSymlinkedDir: a session that creates .claude as a symlink
// to a directory of its own in the workspace has the host's Claude Code
// read settings.json (hooks) through it. The entries under it were only
// reported ("cannot move it aside"), and stayed there to run; the symlink
// itself is moved aside now, and nothing it points to is touched.
func TestMoveAsideSymlinkedDir(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	missing := MissingHostExec(ws)
	os.MkdirAll(filepath.Join(ws, "evil"), 0o755)
	os.WriteFile(filepath.Join(ws, "evil", "settings.json"), []byte(`{"hooks":{}}`), 0o644)
	os.WriteFile(filepath.Join(ws, "evil", "settings.local.json"), []byte(`{"hooks":{}}`), 0o644)
	os.Symlink("evil", filepath.Join(ws, ".claude"))
	moved := MoveAsideCreated(ws, "s", missing)
	if _, err := os.Stat(filepath.Join(ws, ".claude", "settings.json")); err == nil {
		t.Errorf("the host still reads .claude/settings.json through the planted symlink (moved %+v)", moved)
	}
	for _, f := range []string{"settings.json", "settings.local.json"} {
		if _, err := os.Lstat(filepath.Join(ws, "evil", f)); err != nil {
			t.Errorf("what the symlink points to was touched: %v", err)
		}
	}
	var said bool
	for _, m := range moved {
		if m.Path == ".claude" && m.Error == "" && strings.HasPrefix(m.To, ".claude.mosaic-moved-s-") && strings.Contains(m.Why(), "Claude Code") {
			said = true
		}
	}
	if !said {
		t.Errorf("the moved symlink is not said: %+v", moved)
	}
}
