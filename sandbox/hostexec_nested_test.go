package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestMoveAsideNestedExec: the files rustup, cargo, npm and yarn look for
// from the directory they run in upwards, which a session created or
// changed below the workspace's top, are moved aside at its end, with
// their reason; older ones it left alone stay.
func TestMoveAsideNestedExec(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "crates", "old", ".cargo"), 0o755)
	os.WriteFile(filepath.Join(ws, "crates", "old", ".cargo", "config.toml"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "crates", "old", ".npmrc"), nil, 0o644)
	start := sessionStart()
	deep := filepath.Join(ws, "crates", "a", "b")
	os.MkdirAll(filepath.Join(deep, ".cargo"), 0o755)
	os.WriteFile(filepath.Join(deep, "rust-toolchain.toml"), []byte("[toolchain]\npath = \"/ws/evil\"\n"), 0o644)
	os.WriteFile(filepath.Join(deep, ".cargo", "config.toml"), []byte("[build]\nrustc-wrapper = \"/ws/evil\"\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "web", ".npmrc"), nil, 0o644)
	os.MkdirAll(filepath.Join(ws, "web"), 0o755)
	os.WriteFile(filepath.Join(ws, "web", ".npmrc"), []byte("ignore-scripts=false\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "web", ".yarnrc.yml"), []byte("yarnPath: ./evil.js\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "web", ".vscode"), 0o755)
	os.WriteFile(filepath.Join(ws, "web", ".vscode", "settings.json"), []byte(`{"python.defaultInterpreterPath": "./evil"}`), 0o644)
	moved := MoveAsideRepos(ws, "s", start)
	got := map[string]string{}
	for _, m := range moved {
		if m.To == "" || m.Error != "" {
			t.Errorf("not moved: %+v", m)
		}
		got[m.Path] = m.Why()
	}
	for _, want := range []string{"crates/a/b/rust-toolchain.toml", "crates/a/b/.cargo/config.toml", "web/.npmrc", "web/.yarnrc.yml", "web/.vscode/settings.json"} {
		if _, ok := got[want]; !ok {
			t.Errorf("%s not moved aside: %v", want, got)
		}
	}
	if !strings.Contains(got["crates/a/b/rust-toolchain.toml"], "rustup") {
		t.Errorf("reason %q", got["crates/a/b/rust-toolchain.toml"])
	}
	if !strings.Contains(got["web/.vscode/settings.json"], "VS Code") {
		t.Errorf("reason %q", got["web/.vscode/settings.json"])
	}
	if len(got) != 5 {
		t.Errorf("moved %v, want the five the session wrote", got)
	}
}

// TestEnvrcLoadsProtected: direnv approves an .envrc by its content, but
// not the files it loads: .env through dotenv (a PATH or LD_PRELOAD there
// runs the session's programs at the user's next command), another
// .envrc through source_env. Inside the workspace they are read-only, or
// watched when missing.
func TestEnvrcLoadsProtected(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte("dotenv\nsource_env sub\ndotenv_if_exists \"config/local.env\"\nsource_env $HOME/x\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".env"), []byte("A=1\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	os.WriteFile(filepath.Join(ws, "sub", ".envrc"), nil, 0o644)
	ro := readOnlyRels(t, ws)
	if got := strings.Join(ro, " "); !slices.Contains(ro, ".env") || !slices.Contains(ro, "sub/.envrc") {
		t.Errorf("read-only: %s", got)
	}
	if m := strings.Join(MissingHostExec(ws), " "); !strings.Contains(m, "config/local.env") {
		t.Errorf("the missing config/local.env is not watched: %s", m)
	}
}
