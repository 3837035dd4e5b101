package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// plantArmedRepo is the session's part: a nested repository src whose
// config names its worktree (so git in its git directory, wherever that
// goes, has a worktree and runs core.fsmonitor at git status), and a
// module's git directory inside it that does the same.
func plantArmedRepo(t *testing.T, ws, mark string) {
	src := filepath.Join(ws, "src")
	os.MkdirAll(src, 0o755)
	gitRun(t, src, "init", "-q")
	appendFile(t, filepath.Join(src, ".git", "config"), fsmonitor(mark)+"\tbare = false\n\tworktree = "+src+"\n")
	mod := filepath.Join(src, ".git", "modules", "m")
	gitRun(t, src, "init", "-q", "--bare", mod)
	appendFile(t, filepath.Join(mod, "config"), fsmonitor(mark)+"\tbare = false\n\tworktree = "+src+"\n")
}

// movedGitDir is where src/.git went.
func movedGitDir(t *testing.T, ws string, moved []MovedAside) MovedAside {
	t.Helper()
	for _, m := range moved {
		if m.Path == "src/.git" && m.To != "" {
			return m
		}
	}
	t.Fatalf("src/.git was not moved aside: %+v", moved)
	return MovedAside{}
}

// TestMovedAsideIsNoRepository (issue 31): a nested repository's .git moved
// aside whole was still a git directory: the user who went to look at it
// (`cd` there, as the end's message names it; a shell prompt runs git)
// had git take it for a repository with the worktree its config names, and
// run its core.fsmonitor (shown, with the weakened move-aside). Disarmed,
// git finds no repository in it nor in a module's git directory below it,
// and the entries renamed are named. A later session that puts it back (the
// renames undone, the .git in its place) has changed its config's change
// time: its end moves it aside again.
func TestMovedAsideIsNoRepository(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "MARK")
	statusIn := func(dir string) (ran bool, gitDir string) {
		os.Remove(mark)
		cmd := exec.Command("git", "status")
		cmd.Dir = dir
		cmd.Run()
		_, err := os.Stat(mark)
		out, _ := exec.Command("git", "-C", dir, "rev-parse", "--absolute-git-dir").Output()
		return err == nil, strings.TrimSpace(string(out))
	}
	weak := t.TempDir()
	gitRun(t, weak, "init", "-q")
	start := sessionStart()
	plantArmedRepo(t, weak, mark)
	testKeepMovedArmed = true
	m := movedGitDir(t, weak, OutOfStatus(weak, MoveAsideRepos(weak, "s", start)))
	testKeepMovedArmed = false
	if ran, _ := statusIn(filepath.Join(weak, m.To)); !ran {
		t.Fatalf("git status in the armed %s ran nothing, so this test proves nothing", m.To)
	}

	ws := t.TempDir()
	gitRun(t, ws, "init", "-q")
	start = sessionStart()
	plantArmedRepo(t, ws, mark)
	m = movedGitDir(t, ws, OutOfStatus(ws, MoveAsideRepos(ws, "s", start)))
	for _, dir := range []string{m.To, filepath.Join(m.To, "modules", "m")} {
		ran, gitDir := statusIn(filepath.Join(ws, dir))
		if ran || gitDir != filepath.Join(ws, ".git") {
			t.Errorf("in %s: git status ran its fsmonitor: %v; git took %q for the repository", dir, ran, gitDir)
		}
	}
	got := strings.Join(m.Disarmed, " ")
	for _, want := range []string{"HEAD.mosaic-moved", "config.mosaic-moved", "hooks.mosaic-moved", "modules/m/HEAD.mosaic-moved", "modules/m/config.mosaic-moved"} {
		if !strings.Contains(" "+got, " "+want) {
			t.Errorf("disarmed %q, want %s among them", got, want)
		}
	}

	// A later session puts it back as it was.
	start = sessionStart()
	for _, d := range m.Disarmed {
		p := filepath.Join(ws, m.To, d)
		os.Rename(p, strings.TrimSuffix(p, disarmSuffix))
	}
	if err := os.Rename(filepath.Join(ws, m.To), filepath.Join(ws, "src", ".git")); err != nil {
		t.Fatal(err)
	}
	if !hostStatusRuns(t, filepath.Join(ws, "src"), mark) {
		t.Fatal("the repository put back runs nothing, so this part proves nothing")
	}
	again := movedGitDir(t, ws, OutOfStatus(ws, MoveAsideRepos(ws, "s2", start)))
	if ran, _ := statusIn(filepath.Join(ws, "src")); ran || len(again.Disarmed) == 0 {
		t.Errorf("the repository put back is armed after the second end: ran %v, disarmed %v", ran, again.Disarmed)
	}
}

// TestMovedAsideLockedIsNoRepository (issue 31, atk6): the disarm renamed
// entries in, and listed, each directory it could; one the session left
// read-only (0555: no rename there) or unlistable (0311: git still opens
// its HEAD and config by name) stayed a repository, silently, and the
// user's git status in the moved .git ran its core.fsmonitor. Each mode
// is first shown to leave git working there (armed); disarmed, git finds
// no repository in it, at the top or below.
func TestMovedAsideLockedIsNoRepository(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root is refused no rename nor listing: run it as a user (the rig)")
	}
	mark := filepath.Join(t.TempDir(), "MARK")
	ran := func(dir string) bool {
		os.Remove(mark)
		cmd := exec.Command("git", "status")
		cmd.Dir = dir
		cmd.Run()
		_, err := os.Stat(mark)
		return err == nil
	}
	for _, mode := range []os.FileMode{0o555, 0o311} {
		for _, where := range []string{".git", ".git/modules/m"} {
			for _, armed := range []bool{true, false} {
				ws := t.TempDir()
				t.Cleanup(func() { exec.Command("chmod", "-R", "u+rwx", ws).Run() })
				gitRun(t, ws, "init", "-q")
				start := sessionStart()
				plantArmedRepo(t, ws, mark)
				os.Chmod(filepath.Join(ws, "src", where), mode)
				testKeepMovedArmed = armed
				m := movedGitDir(t, ws, OutOfStatus(ws, MoveAsideRepos(ws, "s", start)))
				testKeepMovedArmed = false
				dir := filepath.Join(ws, m.To, strings.TrimPrefix(where, ".git"))
				if got := ran(dir); got != armed {
					t.Errorf("%s %o, armed %v: git status in %s ran its fsmonitor: %v (disarmed %v)", where, mode, armed, dir, got, m.Disarmed)
				}
			}
		}
	}
}

// TestMovedAsideOverBudgetIsUnreadable (issue 31, atk6): a directory of
// what is moved aside was listed up to a budget and the rest of it not
// looked through, silently, so a git directory named past it stayed armed;
// now a directory over the budget makes the whole of it unreadable.
func TestMovedAsideOverBudgetIsUnreadable(t *testing.T) {
	ws := t.TempDir()
	t.Cleanup(func() { exec.Command("chmod", "-R", "u+rwx", ws).Run() })
	gitRun(t, ws, "init", "-q")
	start := sessionStart()
	plantArmedRepo(t, ws, filepath.Join(t.TempDir(), "MARK"))
	for i := 0; i < 30; i++ {
		os.WriteFile(filepath.Join(ws, "src", ".git", "modules", fmt.Sprint("f", i)), nil, 0o644)
	}
	defer func(b int) { disarmEntriesBudget = b }(disarmEntriesBudget)
	disarmEntriesBudget = 20
	m := movedGitDir(t, ws, OutOfStatus(ws, MoveAsideRepos(ws, "s", start)))
	st, err := os.Lstat(filepath.Join(ws, m.To))
	if err != nil || st.Mode().Perm() != 0 || !strings.Contains(strings.Join(m.Disarmed, " "), "over 20 entries in modules: made unreadable") {
		t.Errorf("%s over the budget: %v, %v; disarmed %q", m.To, st.Mode(), err, m.Disarmed)
	}
}
