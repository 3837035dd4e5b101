package directfloor

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mosaic/sandbox"
)

// The start-time protections that follow what the workspace's own
// configuration names: git's includes and core.hooksPath, an .envrc's
// loads, mise's config names.

// gitRun runs git in dir, failing the test when it fails.
func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
}

// fsmonitor is a config that runs `touch mark` at git status.
func fsmonitor(mark string) string {
	return "[core]\n\tfsmonitor = \"touch " + mark + "; false\"\n"
}

// appendFile appends s to path.
func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

// hostStatusRuns reports whether git status in ws, run as the host runs
// it, touched mark.
func hostStatusRuns(t *testing.T, ws, mark string) bool {
	os.Remove(mark)
	cmd := exec.Command("git", "status")
	cmd.Dir = ws
	cmd.Run()
	_, err := os.Stat(mark)
	return err == nil
}

// TestIncludesProtected (issue 31, break 3): the files that the
// repository's config, or the user's global one, include (include.path,
// includeIf.*.path, nested includes), when inside the workspace, are bound
// read-only like .git/config; git reads them at every command.
func TestIncludesProtected(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := t.TempDir()
	mark := filepath.Join(t.TempDir(), "MARK")
	gitRun(t, ws, "init", "-q")
	appendFile(t, filepath.Join(ws, ".git", "config"), "[include]\n\tpath = ../.gitconfig-shared\n[includeIf \"onbranch:x\"]\n\tpath = local.inc\n")
	os.WriteFile(filepath.Join(ws, ".gitconfig-shared"), []byte("[include]\n\tpath = nested/deeper.inc\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, "nested"), 0o755)
	os.WriteFile(filepath.Join(ws, "nested", "deeper.inc"), nil, 0o644)
	os.WriteFile(filepath.Join(home, ".gitconfig"), []byte("[includeIf \"gitdir:"+ws+"/\"]\n\tpath = "+ws+"/tools/git.inc\n"), 0o644)
	// Shown on the host: what the session would append runs.
	appendFile(t, filepath.Join(ws, "nested", "deeper.inc"), fsmonitor(mark))
	if !hostStatusRuns(t, ws, mark) {
		t.Fatal("git status did not run the fsmonitor of a nested include, so this test proves nothing")
	}
	binds, _, err := Protect(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	var ro []string
	for _, b := range binds {
		if b.Kind == sandbox.KindRO {
			ro = append(ro, strings.TrimPrefix(b.Dst, ws+"/"))
			if strings.HasSuffix(b.Dst, ".inc") && !strings.Contains(b.Reason, "include") {
				t.Errorf("reason %q", b.Reason)
			}
		}
	}
	if got := strings.Join(ro, " "); !strings.Contains(got, ".gitconfig-shared") || !strings.Contains(got, "nested/deeper.inc") {
		t.Errorf("read-only: %s", got)
	}
}

// TestHooksPathInGitDir: core.hooksPath inside .git (which is pinned, not
// read-only) is protected as an entry of its own.
func TestHooksPathInGitDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := t.TempDir()
	gitRun(t, ws, "init", "-q")
	os.Mkdir(filepath.Join(ws, ".git", "myhooks"), 0o755)
	appendFile(t, filepath.Join(ws, ".git", "config"), "[core]\n\thooksPath = .git/myhooks\n")
	binds, _, err := Protect(ws, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range binds {
		found = found || b.Kind == sandbox.KindRO && b.Dst == filepath.Join(ws, ".git", "myhooks")
	}
	if !found {
		t.Errorf("core.hooksPath .git/myhooks is not read-only: %+v", binds)
	}
}

// TestIncludesOfEnclosingRepo: a workspace inside a bigger repository
// (its own .git the empty placeholder): the host's git there reads the
// enclosing repository's config, whose core.hooksPath (relative to that
// repository's top) and includes may lie inside the workspace.
func TestIncludesOfEnclosingRepo(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", "")
	outer := t.TempDir()
	gitRun(t, outer, "init", "-q")
	ws := filepath.Join(outer, "app")
	os.MkdirAll(filepath.Join(ws, "hooks"), 0o755)
	os.Mkdir(filepath.Join(ws, ".git"), 0o755)
	os.WriteFile(filepath.Join(ws, "shared.inc"), nil, 0o644)
	appendFile(t, filepath.Join(outer, ".git", "config"), "[core]\n\thooksPath = app/hooks\n[include]\n\tpath = ../app/shared.inc\n")
	ro := strings.Join(readOnlyRels(t, ws), " ")
	for _, want := range []string{"hooks", "shared.inc"} {
		if !strings.Contains(" "+ro+" ", " "+want+" ") {
			t.Errorf("%s, which the enclosing repository's config names, is not read-only: %s", want, ro)
		}
	}
}

// TestEnvrcLoadsProtected: direnv approves an .envrc by its content, but
// not the files it loads: .env through dotenv (a PATH or LD_PRELOAD there
// runs the session's programs at the user's next command), another
// .envrc through source_env. Inside the workspace they are read-only.
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
}

// TestMiseConfigNames: every name mise's config discovery reads in a
// project directory (jdx/mise src/config/mod.rs), past the ones main had:
// the rtx names, the local ones, mise/config.toml and conf.d's *.toml.
// At the top the existing ones are read-only (conf.d whole).
func TestMiseConfigNames(t *testing.T) {
	names := []string{"mise/config.toml", ".rtx.toml", ".rtx.local.toml"}
	ws := t.TempDir()
	for _, rel := range append([]string{".config/mise/conf.d/a.toml"}, names...) {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(rel)), 0o755)
		os.WriteFile(filepath.Join(ws, rel), nil, 0o644)
	}
	ro := readOnlyRels(t, ws)
	for _, want := range []string{".config/mise/conf.d", "mise/config.toml", ".rtx.toml", ".rtx.local.toml"} {
		if !slices.Contains(ro, want) {
			t.Errorf("%s is not read-only: %v", want, ro)
		}
	}
}

// TestReadEnvrc: what the top's .envrc has direnv load from the
// workspace: the files it sources or evaluates, relative to its directory;
// paths with a variable or outside the workspace are not named; a line's
// commands after its first (a one-line if, a &&, a ;) are read too; what
// it puts on PATH is not a load.
func TestReadEnvrc(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	ws := t.TempDir()
	if got := envrcLoads(ws); len(got) != 0 {
		t.Errorf("no .envrc, yet loads %v", got)
	}
	os.WriteFile(filepath.Join(ws, ".envrc"), []byte(`source .venv/bin/activate
. "./env.sh"
use nix
use flake
PATH_add bin "tools/bin" $HOME/x ../../outside
layout python3
source $HOME/y
source ../outside.sh
source "$PWD/pwd.sh"
if [ -f cond.sh ]; then source cond.sh; fi
test -d cbin && PATH_add cbin # dotenv commented
has nix || dotenv .env.local; PATH_add after
`), 0o644)
	var got []string
	for _, p := range envrcLoads(ws) {
		got = append(got, strings.TrimPrefix(p, ws+"/"))
	}
	slices.Sort(got)
	want := []string{".env.local", ".venv/bin/activate", "cond.sh", "default.nix", "env.sh", "flake.lock", "flake.nix", "pwd.sh", "shell.nix"}
	if !slices.Equal(got, want) {
		t.Errorf("loads %v, want %v", got, want)
	}
}
