package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// plantSubmodule does what a session can with the index and the worktree:
// a gitlink at sub whose .git file names a git directory of its own (in
// the worktree), with core.fsmonitor in its config.
func plantSubmodule(t *testing.T, ws, mark string) {
	t.Helper()
	run := func(dir string, args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	run(ws, "init", "-q", "--separate-git-dir="+filepath.Join(ws, "evilgit"), "sub")
	run(filepath.Join(ws, "sub"), "commit", "-q", "--allow-empty", "-m", "y")
	sha := run(filepath.Join(ws, "sub"), "rev-parse", "HEAD")
	run(ws, "update-index", "--add", "--cacheinfo", "160000,"+sha+",sub")
	f, _ := os.OpenFile(filepath.Join(ws, "evilgit", "config"), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("\tfsmonitor = \"touch " + mark + "; false\"\n")
	f.Close()
	os.WriteFile(filepath.Join(ws, "sub", "file"), []byte("x"), 0o644)
}

func hostStatusRuns(t *testing.T, ws, mark string) bool {
	os.Remove(mark)
	cmd := exec.Command("git", "status")
	cmd.Dir = ws
	cmd.Run()
	_, err := os.Stat(mark)
	return err == nil
}

// TestGitlinks: the index's submodule entries are found in each index
// version git writes.
func TestGitlinks(t *testing.T) {
	for _, v := range []string{"2", "3", "4"} {
		ws := t.TempDir()
		exec.Command("git", "-C", ws, "init", "-q").Run()
		for _, f := range []string{"a", "dir/b", "dir/c-long-name"} {
			os.MkdirAll(filepath.Dir(filepath.Join(ws, f)), 0o755)
			os.WriteFile(filepath.Join(ws, f), []byte(f), 0o644)
		}
		exec.Command("git", "-C", ws, "add", ".").Run()
		plantSubmodule(t, ws, filepath.Join(ws, "MARK"))
		if out, err := exec.Command("git", "-C", ws, "update-index", "--index-version", v).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		if v == "3" { // an entry with the extended flags makes git write version 3
			exec.Command("git", "-C", ws, "update-index", "--intent-to-add", "--add", "a").Run()
		}
		links, err := gitlinks(ws)
		if err != nil || strings.Join(links, " ") != "sub" {
			t.Errorf("index version %s: %v %v", v, links, err)
		}
	}
}

// TestMoveAsideRepos: a submodule the session planted (shown to run
// on the host's git status first) has its link moved aside, and the host's
// git status runs nothing; one older than the session is left alone.
func TestMoveAsideRepos(t *testing.T) {
	ws := t.TempDir()
	exec.Command("git", "-C", ws, "init", "-q").Run()
	mark := filepath.Join(t.TempDir(), "MARK")
	time.Sleep(1100 * time.Millisecond) // the repository is older than the session (a second's margin)
	start := time.Now()
	plantSubmodule(t, ws, mark)
	if !hostStatusRuns(t, ws, mark) {
		t.Fatal("the planted submodule's fsmonitor did not run on git status, so this test proves nothing")
	}
	if moved := MoveAsideRepos(ws, "s", time.Now().Add(2*time.Second)); len(moved) != 0 {
		t.Errorf("a submodule older than the session was moved: %+v", moved)
	}
	moved := MoveAsideRepos(ws, "s", start)
	if len(moved) == 0 || moved[0].Path != "sub/.git" || moved[0].Error != "" {
		t.Fatalf("moved %+v", moved)
	}
	for _, m := range moved[1:] {
		// The planted git directory is one itself: its config and hooks.
		if !strings.HasPrefix(m.Path, "evilgit/") || m.Error != "" {
			t.Errorf("moved %+v", m)
		}
	}
	if hostStatusRuns(t, ws, mark) {
		t.Error("git status still runs the planted submodule's config")
	}
}

// BenchmarkGitlinks: the cost of the submodule check at a session's end in
// a repository of 50,000 files (an index of some 4 MiB).
func BenchmarkGitlinks(b *testing.B) {
	ws := b.TempDir()
	exec.Command("git", "-C", ws, "init", "-q").Run()
	for i := 0; i < 500; i++ {
		d := filepath.Join(ws, "d", strings.Repeat("x", i%7), fmt.Sprint(i))
		os.MkdirAll(d, 0o755)
		for j := 0; j < 100; j++ {
			os.WriteFile(filepath.Join(d, fmt.Sprintf("file-%d.go", j)), nil, 0o644)
		}
	}
	if out, err := exec.Command("git", "-C", ws, "add", ".").CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if moved := MoveAsideRepos(ws, "s", time.Now()); len(moved) != 0 {
			b.Fatal(moved)
		}
	}
}
