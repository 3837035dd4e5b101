package directfloor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mosaic/sandbox"
)

// TestProtect: the binds of a repository's entries, each with a reason at
// its own path and an identity; placeholders where .git/hooks, .git and
// .claude are missing.
func TestProtect(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, ".git", "config"), nil, 0o644)
	os.MkdirAll(filepath.Join(ws, ".vscode"), 0o755)
	os.WriteFile(filepath.Join(ws, ".envrc"), nil, 0o644)
	binds, ids, err := Protect(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range binds {
		got = append(got, b.Kind+" "+strings.TrimPrefix(b.Dst, ws+"/"))
		if b.Reason == "" || b.Src != b.Dst {
			t.Errorf("%+v: want a reason, at its own path", b)
		}
	}
	want := "bind .git,ro-bind .git/config,ro-bind .git/hooks,ro-bind .vscode,ro-bind .envrc,ro-bind .claude"
	if strings.Join(got, ",") != want {
		t.Errorf("binds %s\nwant  %s", strings.Join(got, ","), want)
	}
	if len(ids) != len(binds) {
		t.Errorf("%d identities for %d binds", len(ids), len(binds))
	}
	if fi, err := os.Stat(filepath.Join(ws, ".git", "hooks")); err != nil || !fi.IsDir() {
		t.Error("no placeholder for the missing .git/hooks")
	}
	// No repository: an empty .git placeholder, read-only whole (and
	// .claude's).
	bare := t.TempDir()
	bare, _ = filepath.EvalSymlinks(bare)
	binds, _, _ = Protect(bare, "")
	if len(binds) != 2 || binds[0].Kind != sandbox.KindRO || binds[0].Dst != filepath.Join(bare, ".git") || binds[1].Dst != filepath.Join(bare, ".claude") {
		t.Errorf("without a repository: %+v", binds)
	}
	// A symlink in place of an entry is refused.
	os.Symlink("/tmp", filepath.Join(ws, ".idea"))
	if _, _, err := Protect(ws, ""); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked .idea: %v", err)
	}
}

// TestProtectSymlinkedDir: a symlink in place of a directory holding
// entries is refused.
func TestProtectSymlinkedDir(t *testing.T) {
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "settings.json"), nil, 0o644)
	os.Symlink(other, filepath.Join(ws, ".claude"))
	if _, _, err := Protect(ws, ""); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked .claude: %v", err)
	}
}
