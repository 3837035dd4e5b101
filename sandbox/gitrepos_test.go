package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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

// sessionStart waits out the second of margin MoveAsideRepos gives file
// times, so that what was made before is older than the session.
func sessionStart() time.Time {
	time.Sleep(1100 * time.Millisecond)
	return time.Now()
}

// TestMoveAsideNestedRepos (issue 31, break 1): a repository the session
// made anywhere in the workspace (git init src, with core.fsmonitor in
// src/.git/config), or an older one whose config it changed, ran on the
// host's next `git status` there (shown first); its .git is moved aside,
// named, and git there runs nothing. An older one the session only used is
// left alone.
func TestMoveAsideNestedRepos(t *testing.T) {
	ws := t.TempDir()
	mark := filepath.Join(t.TempDir(), "MARK")
	gitRun(t, ws, "init", "-q")
	old := filepath.Join(ws, "vendor", "lib")
	used := filepath.Join(ws, "vendor", "used")
	for _, d := range []string{old, used} {
		os.MkdirAll(d, 0o755)
		gitRun(t, d, "init", "-q")
	}
	start := sessionStart()
	// The session's part.
	deep := filepath.Join(ws, "a", "b", "c", "d", "e", "src")
	os.MkdirAll(deep, 0o755)
	gitRun(t, deep, "init", "-q")
	appendFile(t, filepath.Join(deep, ".git", "config"), fsmonitor(mark))
	appendFile(t, filepath.Join(old, ".git", "config"), fsmonitor(mark))
	gitRun(t, used, "status")
	gitRun(t, used, "commit", "-q", "--allow-empty", "-m", "x")
	for _, d := range []string{deep, old} {
		if !hostStatusRuns(t, d, mark) {
			t.Fatalf("git status in %s did not run its fsmonitor, so this test proves nothing", d)
		}
	}

	moved := MoveAsideRepos(ws, "s", start)
	var paths []string
	for _, m := range moved {
		paths = append(paths, m.Path)
		if m.Error != "" || m.To == "" || !strings.Contains(m.Why(), "fsmonitor") {
			t.Errorf("moved %+v", m)
		}
	}
	if got := strings.Join(paths, " "); got != "vendor/lib/.git a/b/c/d/e/src/.git" {
		t.Errorf("moved %s, want the two changed repositories' .git", got)
	}
	for _, d := range []string{deep, old} {
		if hostStatusRuns(t, d, mark) {
			t.Errorf("git status in %s still runs what the session wrote", d)
		}
	}
	if _, err := os.Stat(filepath.Join(used, ".git", "config")); err != nil {
		t.Errorf("a repository the session only used was touched: %v", err)
	}
}

// TestMoveAsideBareRepo: git takes a directory holding HEAD, objects and
// refs for a repository, with core.bare=false and core.worktree a
// worktree's, whose fsmonitor it runs; in a workspace whose .git is the
// empty placeholder, the session made one of the workspace itself.
func TestMoveAsideBareRepo(t *testing.T) {
	ws := t.TempDir()
	mark := filepath.Join(t.TempDir(), "MARK")
	os.Mkdir(filepath.Join(ws, ".git"), 0o755) // the placeholder
	start := sessionStart()
	gitRun(t, ws, "init", "-q", "--bare", ".")
	appendFile(t, filepath.Join(ws, "config"), "[core]\n\tbare = false\n\tworktree = "+ws+"\n"+fsmonitor(mark)[len("[core]\n"):])
	if !hostStatusRuns(t, ws, mark) {
		t.Fatal("git status did not run the bare repository's fsmonitor, so this test proves nothing")
	}
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) == 0 || moved[0].Path != "config" || moved[0].Reason != bareRepoReason {
		t.Fatalf("moved %+v", moved)
	}
	if hostStatusRuns(t, ws, mark) {
		t.Error("git status still runs the bare repository's config")
	}
}

// TestMoveAsideWorktreeAdmin (issue 31, break 2): the workspace is a
// main repository whose linked worktree lives outside it; the session
// copies .git, puts an fsmonitor in the copy's config and points
// .git/worktrees/NAME/commondir at the copy: the host's git status in the
// other worktree ran it (shown first). The commondir is moved aside.
func TestMoveAsideWorktreeAdmin(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	other := filepath.Join(filepath.Dir(ws), "other")
	mark := filepath.Join(t.TempDir(), "MARK")
	os.Mkdir(ws, 0o755)
	gitRun(t, ws, "init", "-q")
	gitRun(t, ws, "commit", "-q", "--allow-empty", "-m", "x")
	gitRun(t, ws, "worktree", "add", "-q", other)
	start := sessionStart()
	if out, err := exec.Command("cp", "-r", filepath.Join(ws, ".git"), filepath.Join(ws, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	appendFile(t, filepath.Join(ws, "copy", "config"), fsmonitor(mark))
	os.WriteFile(filepath.Join(ws, ".git", "worktrees", "other", "commondir"), []byte("../../../copy\n"), 0o644)
	if !hostStatusRuns(t, other, mark) {
		t.Fatal("git status in the linked worktree did not run the copy's fsmonitor, so this test proves nothing")
	}
	moved := MoveAsideRepos(ws, "s", start)
	found := false
	for _, m := range moved {
		if m.Path == ".git/worktrees/other/commondir" && m.To != "" && m.Reason == worktreeReason {
			found = true
		}
	}
	if !found {
		t.Errorf("the worktree's commondir was not moved aside: %+v", moved)
	}
	if hostStatusRuns(t, other, mark) {
		t.Error("git status in the linked worktree still runs the copy's config")
	}
}

// TestMoveAsideNestedInclude: an older nested repository whose config
// includes a file of the workspace: the session changed that file, and
// the repository's .git is moved aside.
func TestMoveAsideNestedInclude(t *testing.T) {
	ws := t.TempDir()
	mark := filepath.Join(t.TempDir(), "MARK")
	lib := filepath.Join(ws, "lib")
	os.Mkdir(lib, 0o755)
	gitRun(t, lib, "init", "-q")
	appendFile(t, filepath.Join(lib, ".git", "config"), "[include]\n\tpath = ../../shared.gitconfig\n")
	os.WriteFile(filepath.Join(ws, "shared.gitconfig"), nil, 0o644)
	start := sessionStart()
	appendFile(t, filepath.Join(ws, "shared.gitconfig"), fsmonitor(mark))
	if !hostStatusRuns(t, lib, mark) {
		t.Fatal("git status did not run the included fsmonitor, so this test proves nothing")
	}
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) != 1 || moved[0].Path != "lib/.git" {
		t.Fatalf("moved %+v", moved)
	}
	if hostStatusRuns(t, lib, mark) {
		t.Error("git status still runs the included config")
	}
}

// TestIncludesProtected (issue 31, break 3): the files that the
// repository's config, or the user's global one, include (include.path,
// includeIf.*.path, nested includes), when inside the workspace, are bound
// read-only like .git/config, or watched when missing; git reads them at
// every command.
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
	binds, _, err := ProtectHostExec(ws)
	if err != nil {
		t.Fatal(err)
	}
	var ro []string
	for _, b := range binds {
		if b.Kind == KindRO {
			ro = append(ro, strings.TrimPrefix(b.Dst, ws+"/"))
			if strings.HasSuffix(b.Dst, ".inc") && !strings.Contains(b.Reason, "include") {
				t.Errorf("reason %q", b.Reason)
			}
		}
	}
	if got := strings.Join(ro, " "); !strings.Contains(got, ".gitconfig-shared") || !strings.Contains(got, "nested/deeper.inc") {
		t.Errorf("read-only: %s", got)
	}
	missing := strings.Join(MissingHostExec(ws), " ")
	for _, want := range []string{".git/local.inc", "tools/git.inc"} {
		if !strings.Contains(missing, want) {
			t.Errorf("the missing include %s is not watched: %s", want, missing)
		}
	}
}

// TestHooksPathInGitDir: core.hooksPath inside .git (which is pinned, not
// read-only) is protected as an entry of its own; and one inside a hook
// manager's directory that is missing is watched.
func TestHooksPathInGitDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	ws := t.TempDir()
	gitRun(t, ws, "init", "-q")
	os.Mkdir(filepath.Join(ws, ".git", "myhooks"), 0o755)
	appendFile(t, filepath.Join(ws, ".git", "config"), "[core]\n\thooksPath = .git/myhooks\n")
	binds, _, err := ProtectHostExec(ws)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, b := range binds {
		found = found || b.Kind == KindRO && b.Dst == filepath.Join(ws, ".git", "myhooks")
	}
	if !found {
		t.Errorf("core.hooksPath .git/myhooks is not read-only: %+v", binds)
	}
	gitRun(t, ws, "config", "core.hooksPath", ".husky/_")
	if m := MissingHostExec(ws); !strings.Contains(strings.Join(m, " "), ".husky/_") {
		t.Errorf("a missing .husky/_ that core.hooksPath names is not watched: %v", m)
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

// TestMoveAsideReposBounded: a session that fills its workspace with
// directories makes the walk stop at its bound, and the user is told that
// what lies past it was not checked; what came before is still moved.
func TestMoveAsideReposBounded(t *testing.T) {
	defer func(n int) { repoWalkDirs = n }(repoWalkDirs)
	repoWalkDirs = 50
	ws := t.TempDir()
	start := sessionStart()
	os.MkdirAll(filepath.Join(ws, "a", ".cargo"), 0o755)
	os.WriteFile(filepath.Join(ws, "a", ".cargo", "config.toml"), nil, 0o644)
	for i := 0; i < 100; i++ {
		os.MkdirAll(filepath.Join(ws, "z", strings.Repeat("d", i+1)), 0o755)
	}
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) != 2 || moved[0].Path != "a/.cargo/config.toml" || moved[1].Error == "" || !strings.Contains(moved[1].Error, "not checked") {
		t.Errorf("moved %+v", moved)
	}
}

// TestMoveAsideReposUnlistable: a directory the session left enterable but
// not listable (mode 0100) hides what lies below from the walk, while the
// user's shell and git still reach it: the user is told it was not checked.
func TestMoveAsideReposUnlistable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads every directory whatever its mode: the walk cannot be kept out (run as a user, as the rig does)")
	}
	ws := t.TempDir()
	start := sessionStart()
	src := filepath.Join(ws, "hide", "src")
	os.MkdirAll(src, 0o755)
	gitRun(t, src, "init", "-q")
	os.Chmod(filepath.Join(ws, "hide"), 0o100)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "hide"), 0o755) })
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) != 1 || moved[0].Path != "hide" || !strings.Contains(moved[0].Error, "not checked") {
		t.Errorf("moved %+v", moved)
	}
}
