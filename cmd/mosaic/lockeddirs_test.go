package main

// A directory a session locks (chmod 000) where mosaic must later remove
// it itself: nested past PATH_MAX in the session's state directory.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRemoveDeepLockedState: a session nests its workspace copy's
// directories past PATH_MAX and locks the deepest; rm's background removal
// must still remove its state, and later rm and gc not fail on it as an
// earlier removal's leftovers. Seen to fail with the path-based openUp
// (host systemd 252): the state stayed as .removing-NAME-* past the 60 s.
func TestRemoveDeepLockedState(t *testing.T) {
	needRig(t)
	// Not parallel: its gc would remove other tests' ended sessions.
	name := sessionName(t)
	d := strings.Repeat("d", 200)
	// Two trees of 15 levels each (a path within PATH_MAX), one moved into
	// the other: the locked directory ends up 30 levels (6 KB) deep.
	deep := `p=; i=0; while [ $i -lt 15 ]; do p=${p}` + d + `/; i=$((i+1)); done; ` +
		`mkdir -p a/$p b/${p}locked/x && chmod 000 b/${p}locked && mv b a/$p && echo planted`
	r := mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--", "sh", "-c", deep)
	if !strings.Contains(r.stdout, "planted") {
		t.Fatalf("the session did not plant its tree: %s %s", r.stdout, r.stderr)
	}
	// find walks below PATH_MAX by descriptor: the tree is there.
	out, _ := exec.Command("find", filepath.Join(stateRoot(), "sessions", name), "-name", "locked").Output()
	if len(out) < 6000 {
		t.Fatalf("no locked directory past PATH_MAX in the session's state: %q", out)
	}
	mustMosaic(t, "rm", name)
	eventually(t, 60*time.Second, "the removed session's state to go", func() bool {
		left, _ := filepath.Glob(filepath.Join(stateRoot(), "sessions", ".removing-"+name+"-*"))
		return len(left) == 0
	})
	if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name)); !os.IsNotExist(err) {
		t.Errorf("session %s's state is still there (%v)", name, err)
	}
	mustMosaic(t, "gc")
}
