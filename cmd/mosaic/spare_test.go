package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// spareOf is the copy of the spare mosaic keeps of the repository at ws,
// "" while there is none.
func spareOf(ws string) string {
	dirs, _ := filepath.Glob(filepath.Join(stateRoot(), "spares", "*", "spare.json"))
	for _, p := range dirs {
		var s struct{ Workspace string }
		if b, err := os.ReadFile(p); err == nil && json.Unmarshal(b, &s) == nil && s.Workspace == ws {
			return filepath.Join(filepath.Dir(p), "copy")
		}
	}
	return ""
}

func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestCloneTakesASpare (issue 38's speed): once a clone-mode session of a
// repository has started, mosaic makes a spare copy of it in the
// background, and the next session takes it, reset to its own base: the
// user's commits and uncommitted work since are in it, and nothing the
// first session wrote (a file, its copy's git config) is. That the spare
// was taken shows in a file the reset had no reason to write: its inode is
// the spare's.
func TestCloneTakesASpare(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	gitMust(t, ws, "add", "-A")
	gitMust(t, ws, "commit", "-qm", "two")
	os.WriteFile(filepath.Join(ws, "same.txt"), []byte("same\n"), 0o644)
	gitMust(t, ws, "add", "same.txt")
	gitMust(t, ws, "commit", "-qm", "three")
	one, two := cloneSession(t), cloneSession(t)
	r := mustMosaic(t, "run", "--name", one, "-w", ws, "--", "sh", "-c",
		"echo leak > leak.txt; echo agent >> a.txt; git config core.hooksPath /tmp/evil; git config user.name agent")
	if !strings.Contains(r.stderr, "2 files") {
		t.Fatalf("the first session's change:\n%s", r.stderr)
	}
	var spare string
	eventually(t, 60*time.Second, "a spare copy of "+ws, func() bool { spare = spareOf(ws); return spare != "" })
	sameIno := inodeOf(t, filepath.Join(spare, "same.txt"))
	mustMosaic(t, "discard", one)

	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("four\n"), 0o644)
	gitMust(t, ws, "commit", "-qam", "four")
	os.WriteFile(filepath.Join(ws, "u2.txt"), []byte("uncommitted\n"), 0o644)
	r = mustMosaic(t, "run", "--name", two, "-w", ws, "--", "sh", "-c",
		`cat a.txt u2.txt; ls; echo "hooks=$(git config core.hooksPath) name=$(git config user.name)"; git status --porcelain | sed 's/^/status: /'; echo "inode=$(stat -c %i same.txt)"`)
	out := r.stdout
	for _, want := range []string{"four\n", "uncommitted\n", "hooks= name=\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the second session does not see %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"leak.txt", "agent", "status: "} {
		if strings.Contains(out, bad) {
			t.Errorf("the second session sees %q, the first session's or a dirty copy:\n%s", bad, out)
		}
	}
	if want := fmt.Sprintf("inode=%d\n", sameIno); !strings.Contains(out, want) {
		t.Errorf("same.txt in the second session's copy is not the spare's (%s): the spare was not taken\n%s", want, out)
	}
	mustMosaic(t, "rm", two)
}
