package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// reorderedPatch writes d/.gitattributes, leaves d for e/x, and comes back
// to write d/file: git apply, which writes files in the patch's order,
// enters d again and reads the .gitattributes it just wrote.
const reorderedPatch = "diff --git a/d/.gitattributes b/d/.gitattributes\nnew file mode 100644\n--- /dev/null\n+++ b/d/.gitattributes\n@@ -0,0 +1 @@\n+* ident eol=crlf\n" +
	"diff --git a/e/x b/e/x\nnew file mode 100644\n--- /dev/null\n+++ b/e/x\n@@ -0,0 +1 @@\n+x\n" +
	"diff --git a/d/file b/d/file\nnew file mode 100644\n--- /dev/null\n+++ b/d/file\n@@ -0,0 +1 @@\n+$Id$\n"

// TestCloneApplyWritesWhatDiffShowed: a finish step's patch (the session's:
// the finish step runs its git config, diff.orderFile too) that comes back
// to a directory after writing its .gitattributes has git apply write
// d/file converted by it (CRLF, $Id: <blob>$; a filter the user defined
// would run), not as diff showed it: a weakened mosaic applies it so;
// mosaic refuses it with nothing changed. And an agent's own
// diff.orderFile no longer orders the finish step's patch: its change
// applies, d/file as diff showed it.
func TestCloneApplyWritesWhatDiffShowed(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	for _, build := range []string{weak, mosaicBin} {
		ws := cloneRepo(t)
		name := cloneSession(t)
		mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "true")
		out := filepath.Join(stateRoot(), "sessions", name+"-finish", "home", "out")
		if err := os.WriteFile(filepath.Join(out, "patch"), []byte(reorderedPatch), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runResult(t, exec.Command(build, "apply", name, "--json"))
		got, err := os.ReadFile(filepath.Join(ws, "d", "file"))
		if build == weak {
			if r.code != 0 || err != nil || string(got) == "$Id$\n" {
				t.Fatalf("the weakened build did not write d/file converted (exit %d %s %s, %q %v): this test proves nothing", r.code, r.stdout, r.stderr, got, err)
			}
			continue
		}
		if code, _ := jsonError(t, r); r.code != 3 || code != "change-refused" || err == nil {
			t.Errorf("mosaic applied a reordered patch: exit %d %s, d/file %q", r.code, r.stdout, got)
		}
	}
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c",
		`mkdir d e && printf '* ident eol=crlf\n' >d/.gitattributes && echo x >e/x && echo '$Id$' >d/file &&
printf 'd/.gitattributes\ne/x\nd/file\n' >"$PWD/.git/order" && git config diff.orderFile "$PWD/.git/order"`)
	mustMosaic(t, "apply", name)
	if got, _ := os.ReadFile(filepath.Join(ws, "d", "file")); string(got) != "$Id$\n" {
		t.Errorf("d/file is %q, not what diff showed", got)
	}
}

// TestCloneApplyIsWhatDiffLastShowed: an agent that notices a diff (the
// finish step reads its copy; here the test tells it, by a file in the
// copy's .git, outside the change) changes its work once the user has
// read it: a weakened mosaic's apply, after the session ended, writes
// the change no one was shown; mosaic refuses it with nothing changed,
// and applies it once diff has shown it.
func TestCloneApplyIsWhatDiffLastShowed(t *testing.T) {
	needRig(t)
	weak := weakenedMosaic(t)
	for _, build := range []string{weak, mosaicBin} {
		ws := cloneRepo(t)
		name := cloneSession(t)
		mustMosaic(t, "start", "--clone", "--name", name, "-w", ws, "--", "sh", "-c",
			`echo benign >f; while [ ! -e .git/diff-seen ]; do sleep 0.05; done; echo EVIL >f; sleep 60`)
		eventually(t, 20*time.Second, "the snapshot to hold f", func() bool {
			return strings.Contains(mustMosaic(t, "diff", name).stdout, "+benign")
		})
		writeFile(t, filepath.Join(stateRoot(), "sessions", name, "clone", ".git", "diff-seen"), "")
		eventually(t, 20*time.Second, "the agent to change f after the diff", func() bool {
			b, _ := os.ReadFile(filepath.Join(stateRoot(), "sessions", name, "clone", "f"))
			return string(b) == "EVIL\n"
		})
		mustMosaic(t, "stop", "--timeout", "1s", name)
		r := runResult(t, exec.Command(build, "apply", name, "--json"))
		got, err := os.ReadFile(filepath.Join(ws, "f"))
		if build == weak {
			if r.code != 0 || string(got) != "EVIL\n" {
				t.Fatalf("the weakened build did not apply the change diff never showed (exit %d %s %s, f %q): this test proves nothing", r.code, r.stdout, r.stderr, got)
			}
			continue
		}
		if code, _ := jsonError(t, r); r.code != 3 || code != "change-refused" || err == nil {
			t.Fatalf("mosaic applied a change diff never showed: exit %d %s, f %q", r.code, r.stdout, got)
		}
		if !strings.Contains(mustMosaic(t, "diff", name).stdout, "+EVIL") {
			t.Fatal("diff does not show the change now")
		}
		mustMosaic(t, "apply", name)
		if got, _ := os.ReadFile(filepath.Join(ws, "f")); string(got) != "EVIL\n" {
			t.Errorf("after diff showed it, apply wrote f %q", got)
		}
	}
}
