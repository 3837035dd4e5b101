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

// TestMiseConfigNames: every name mise's config discovery reads in a
// project directory (jdx/mise src/config/mod.rs), past the ones main had:
// the rtx names, the local ones, mise/config.toml and conf.d's *.toml.
// At the top the existing ones are read-only (conf.d whole) and the
// missing ones watched; below it, the ones the session made or changed
// are moved aside, with mise's reason, as is a profile's (mise.dev.toml,
// read once the user sets MISE_ENV) at any depth; an older one stays.
func TestMiseConfigNames(t *testing.T) {
	names := []string{"mise/config.toml", ".rtx.toml", ".rtx.local.toml", ".mise/config.local.toml", ".config/mise.local.toml", ".config/mise/config.local.toml"}
	ws := t.TempDir()
	for _, rel := range append([]string{".config/mise/conf.d/a.toml"}, names[:3]...) {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(ws, rel), nil, 0o644)
	}
	ro := readOnlyRels(t, ws)
	for _, want := range []string{".config/mise/conf.d", "mise/config.toml", ".rtx.toml", ".rtx.local.toml"} {
		if !slices.Contains(ro, want) {
			t.Errorf("%s is not read-only: %v", want, ro)
		}
	}
	missing := MissingHostExec(ws)
	for _, want := range names[3:] {
		if !slices.Contains(missing, want) {
			t.Errorf("the missing %s is not watched: %v", want, missing)
		}
	}

	ws = t.TempDir()
	os.MkdirAll(filepath.Join(ws, "old", ".config", "mise", "conf.d"), 0o755)
	os.WriteFile(filepath.Join(ws, "old", ".config", "mise", "conf.d", "user.toml"), nil, 0o644)
	os.WriteFile(filepath.Join(ws, "old", "mise.dev.toml"), nil, 0o644)
	start := sessionStart()
	made := []string{".config/mise/conf.d/evil.toml", "mise.dev.toml", ".config/mise/config.dev.local.toml"}
	for _, rel := range append(names, made...) {
		for _, dir := range []string{"crates/a", "old"} {
			os.MkdirAll(filepath.Join(ws, dir, filepath.Dir(rel)), 0o755)
			os.WriteFile(filepath.Join(ws, dir, rel), []byte("[hooks]\nenter = \"touch MARK\"\n"), 0o644)
		}
	}
	os.WriteFile(filepath.Join(ws, "mise.staging.toml"), nil, 0o644) // a profile at the top
	os.WriteFile(filepath.Join(ws, "bin-mise"), nil, 0o644)
	os.MkdirAll(filepath.Join(ws, "tools"), 0o755)
	os.WriteFile(filepath.Join(ws, "tools", "mise"), []byte("#!/bin/sh\n"), 0o755) // a file named mise: no config
	got := map[string]string{}
	for _, m := range MoveAsideRepos(ws, "s", start) {
		if m.To == "" || m.Error != "" {
			t.Errorf("not moved: %+v", m)
		}
		got[m.Path] = m.Why()
	}
	want := []string{"mise.staging.toml"}
	for _, rel := range append(names, made...) {
		want = append(want, "crates/a/"+rel, "old/"+rel)
	}
	for _, w := range want {
		if !strings.Contains(got[w], "mise") {
			t.Errorf("%s not moved aside with mise's reason: %q", w, got[w])
		}
	}
	if len(got) != len(want) {
		t.Errorf("moved %d, want %d: %v", len(got), len(want), got)
	}
}
