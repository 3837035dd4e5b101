package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mosaic/sandbox"
)

// TestKeptHomeHasNoMountPoints: bwrap makes a mount point in the session's
// home for every bind below HOME (a workspace under the user's home, a
// --ro path there), and in a kept home they piled up session after session,
// telling the next session of the name where the earlier ones worked. When
// a named session ends, the empty mount points are gone; what the session
// itself wrote in its home stays.
func TestKeptHomeHasNoMountPoints(t *testing.T) {
	needRig(t)
	for _, mode := range [][]string{{"run"}, {"run", "--scope", "--direct"}} {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			name := sessionName(t)
			home := filepath.Join(stateRoot(), "sessions", name, "home")
			for i := 0; i < 2; i++ {
				ws, ro := workspace(t), workspace(t)
				mustMosaic(t, append(mode, "--name", name, "-w", ws, "--ro", ro, "--", "sh", "-c", "mkdir -p $HOME/kept && echo x > $HOME/kept/file && test -d "+ws)...)
			}
			entries, err := os.ReadDir(home)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if strings.Join(names, " ") != "kept" {
				t.Errorf("the kept home holds %v, want only what the session wrote (kept)", names)
			}
		})
	}
}

// TestHomeLinksWarned: a session's kept home is mounted at the user's home
// path, so a symlink it plants there (.claude -> $HOME/.claude) is its own
// file inside but the user's real one on the host: a user who then puts an
// agent's settings into `mosaic home NAME`, as docs/agents.md shows, writes
// into the real home (shown first). mosaic home names each such link.
func TestHomeLinksWarned(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	real := filepath.Join(homeDir(), ".claude-"+randomHex())
	os.MkdirAll(real, 0o700)
	t.Cleanup(func() { os.RemoveAll(real) })
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--", "ln", "-s", real, filepath.Join(homeDir(), ".claude"))
	r := mustMosaic(t, "home", name)
	kept := strings.TrimSpace(r.stdout)
	// The user follows docs/agents.md: the write lands in the real home.
	if err := os.WriteFile(filepath.Join(kept, ".claude", "settings.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(real, "settings.json")); err != nil {
		t.Fatal("writing through the kept home's planted link did not reach the real home, so this test proves nothing")
	}
	if !strings.Contains(r.stderr, filepath.Join(kept, ".claude")+" -> "+real) || !strings.Contains(r.stderr, "real home") {
		t.Errorf("mosaic home did not name the planted link:\n%s", r.stderr)
	}
}

// TestHomeLinksResolved (issue 31, breaks 4 and 5): a magic link
// (.x -> /proc/self/root/HOME/...: inside the session its own home, on the
// host the real one) and a link that stays inside until a deeper one climbs
// out (.y -> a/b/c/d, d -> ../../../../..) were not named, and a write
// through them landed outside the kept home (shown first). mosaic home
// resolves each on the host and names both, also in --json.
func TestHomeLinksResolved(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	real := filepath.Join(homeDir(), ".mosaic-real-"+randomHex())
	os.MkdirAll(real, 0o700)
	t.Cleanup(func() { os.RemoveAll(real) })
	h := homeDir()
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--", "sh", "-c",
		"set -e; ln -s /proc/self/root"+real+" "+h+"/.x; mkdir -p "+h+"/a/b/c; ln -s ../../../../.. "+h+"/a/b/c/d; ln -s a/b/c/d "+h+"/.y")
	r := mustMosaic(t, "home", name)
	kept := strings.TrimSpace(r.stdout)
	for _, rel := range []string{".x", ".y"} {
		probe := filepath.Join(kept, rel, "probe-"+randomHex())
		if err := os.WriteFile(probe, nil, 0o600); err == nil {
			os.Remove(probe)
		}
		if p, _ := filepath.EvalSymlinks(filepath.Dir(probe)); sandbox.Within(p, kept) {
			t.Fatalf("%s leads to %s, inside the kept home, so this test proves nothing", rel, p)
		}
		if !strings.Contains(r.stderr, filepath.Join(kept, rel)+" -> ") {
			t.Errorf("mosaic home did not name %s:\n%s", rel, r.stderr)
		}
	}
	var doc struct {
		LinksOut []string `json:"links_out"`
	}
	if err := json.Unmarshal([]byte(mustMosaic(t, "home", "--json", name).stdout), &doc); err != nil || len(doc.LinksOut) != 3 { // .x, .y and d
		t.Errorf("home --json: links_out %v (%v)", doc.LinksOut, err)
	}
}

// TestHomeNamesPlantedRepositories: a session leaves a git repository in
// its kept home (~/.codex/.git, whose config runs a command on any git
// status there); git started there on the host runs it (shown), so
// mosaic home names it, on stderr and in --json.
func TestHomeNamesPlantedRepositories(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	mark := filepath.Join(t.TempDir(), "ran")
	mustMosaic(t, "run", "--name", name, "-w", workspace(t), "--", "sh", "-c",
		"set -e; git init -q ~/.codex; git -C ~/.codex config core.fsmonitor 'touch "+mark+"'; echo x > ~/.codex/config.toml")
	r := mustMosaic(t, "home", name)
	kept := strings.TrimSpace(r.stdout)
	git := exec.Command("git", "status", "--short")
	git.Dir = filepath.Join(kept, ".codex")
	git.Run()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("git on the host in the planted repository ran nothing, so this test proves nothing: %v", err)
	}
	planted := filepath.Join(kept, ".codex", ".git")
	if !strings.Contains(r.stderr, planted+": a git repository") {
		t.Errorf("mosaic home did not name %s:\n%s", planted, r.stderr)
	}
	var doc struct {
		Repos []string `json:"git_repositories"`
	}
	if err := json.Unmarshal([]byte(mustMosaic(t, "home", "--json", name).stdout), &doc); err != nil || !slices.Equal(doc.Repos, []string{planted}) {
		t.Errorf("home --json: git_repositories %v (%v)", doc.Repos, err)
	}
}

// TestHomeHardLinkOut (issue 31): a hard link in the kept home to a file
// outside it would need no symlink to lead a write out. On the host one is
// made at once (the workspace and the state share a file system: shown);
// inside a session, to a workspace file or a system file, link(2) fails with EXDEV (the home is a mount of its own), so
// mosaic home needs no look for them. A name a session gives a link (a
// newline, a terminal escape, a forged "mosaic:" line) comes out of mosaic
// home escaped on one line, on a pipe too.
func TestHomeHardLinkOut(t *testing.T) {
	needRig(t)
	name := sessionName(t)
	ws := workspace(t)
	os.WriteFile(filepath.Join(ws, "file"), []byte("x"), 0o600)
	kept := filepath.Join(stateRoot(), "sessions", name, "home")
	mustMosaic(t, "home", "--create", name)
	if err := os.Link(filepath.Join(ws, "file"), filepath.Join(kept, "host-made")); err != nil {
		t.Fatalf("on the host, a hard link from the workspace into the kept home failed (%v), so this test proves nothing", err)
	}
	os.Remove(filepath.Join(kept, "host-made"))
	h := homeDir()
	r := mosaic(t, "run", "--name", name, "-w", ws, "--", "sh", "-c",
		"for f in "+ws+"/file /etc/hostname /usr/bin/true; do ln \"$f\" "+h+"/hl-$(basename \"$f\") 2>&1 || true; done")
	for _, f := range []string{"file", "hostname", "true"} {
		if _, err := os.Lstat(filepath.Join(kept, "hl-"+f)); err == nil {
			t.Errorf("the session made a hard link to %s in its home:\n%s%s", f, r.stdout, r.stderr)
		}
	}
	if n := strings.Count(r.stdout, "cross-device"); n != 3 {
		t.Errorf("%d of 3 links failed as cross-device:\n%s%s", n, r.stdout, r.stderr)
	}
	odd := ".x\n\x1b]0;owned\x07mosaic: all clear"
	os.Symlink("/", filepath.Join(kept, odd))
	hr := mustMosaic(t, "home", name)
	if strings.Count(hr.stderr, "\n") != 1 || strings.ContainsAny(hr.stderr, "\x1b\x07") || !strings.Contains(hr.stderr, `.x\x0a\e]0;owned\x07mosaic: all clear -> /`) {
		t.Errorf("mosaic home named the odd link as:\n%q", hr.stderr)
	}
}

// TestKeptHomeHiddenOutlivesMovedBind: what the kept home holds where the
// session's workspace is bound (below the home) is hidden from the
// session, and the save carries it into the new home. A session that
// moves the directory above the bind (a rename moves the mount with it)
// and makes another of that name had the save look for the hidden entry
// where the bind went, find none, and drop it with the old home. Now the
// save carries it from where the load met the bind too: beside the
// session's own entry of that name as NAME.hidden (here the session made
// that too: NAME.hidden-RANDOM), or, where the session made a file of the
// directory's name above, into .hidden-RANDOM at the top. Shown to bite:
// without the load's places, the user's notes were gone from the kept
// home; with NAME.hidden alone, too, when the session made it; and with
// no place at the top, when it made the file.
func TestKeptHomeHiddenOutlivesMovedBind(t *testing.T) {
	needRig(t)
	for _, c := range []struct{ what, script, want string }{
		{"a directory of its name", `mkdir -p "$HOME/REL" "$HOME/REL.hidden" && echo mine > "$HOME/REL/notes"`, "REL.hidden-*/notes"},
		{"a file of its parent's name", `echo mine > "$HOME/PARENT"`, ".hidden-*/BASE/notes"},
	} {
		t.Run(c.what, func(t *testing.T) {
			name := sessionName(t)
			ws := filepath.Join(workspace(t), "proj")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			rel, err := filepath.Rel(homeDir(), ws)
			if err != nil {
				t.Fatal(err)
			}
			home := filepath.Join(stateRoot(), "sessions", name, "home")
			mustMosaic(t, "run", "--name", name, "--", "true")
			if err := os.MkdirAll(filepath.Join(home, rel), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, rel, "notes"), []byte("the user's"), 0o600); err != nil {
				t.Fatal(err)
			}
			r := strings.NewReplacer("REL", rel, "PARENT", filepath.Dir(rel), "BASE", filepath.Base(rel))
			mustMosaic(t, "run", "--name", name, "-w", ws, "--", "sh", "-c", `mv "$HOME/`+filepath.Dir(rel)+`" "$HOME/moved" && `+r.Replace(c.script))
			found, _ := filepath.Glob(filepath.Join(home, r.Replace(c.want)))
			if len(found) != 1 {
				t.Fatalf("the hidden notes after the session moved the bind away and made %s: %v", c.what, found)
			}
			if b, err := os.ReadFile(found[0]); err != nil || string(b) != "the user's" {
				t.Errorf("%s: %q %v", found[0], b, err)
			}
		})
	}
}
