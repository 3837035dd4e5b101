package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHomeLinks (issue 31, breaks 4 and 5): every symlink of a kept home
// whose resolution on the host leaves it is named, at any depth: an
// absolute one, one that climbs out, a magic link (/proc/self/root/...,
// whose text names no home), and one that stays inside until a link
// deeper down climbs out. Each is first shown to lead a write out.
func TestHomeLinks(t *testing.T) {
	kept, real := t.TempDir(), t.TempDir()
	climb := strings.Repeat("../", strings.Count(kept, "/")+8) // to / from any of them
	os.MkdirAll(filepath.Join(kept, ".local", "bin"), 0o700)
	os.MkdirAll(filepath.Join(kept, ".config"), 0o700)
	os.MkdirAll(filepath.Join(kept, "a", "b", "c", "x", "y", "z"), 0o700)
	os.MkdirAll(filepath.Join(kept, ".local", "share", "tool", "bin"), 0o700)
	out := map[string]string{
		".claude":         real,                                  // absolute
		".config/x":       climb + strings.TrimPrefix(real, "/"), // climbs out
		".magic":          "/proc/self/root" + real,              // a magic link's path
		".deep":           "a/b/c/d",                             // inside, until d
		"a/b/c/d":         climb + strings.TrimPrefix(real, "/"),
		"a/b/c/x/y/z/far": real, // below any fixed depth
		".local/bin/node": "/usr/bin/node",
	}
	for rel, target := range out {
		os.Symlink(target, filepath.Join(kept, rel))
	}
	// Shown: a write through each lands outside the kept home.
	for rel := range out {
		if rel == ".local/bin/node" {
			continue
		}
		os.Remove(filepath.Join(real, "probe"))
		if err := os.WriteFile(filepath.Join(kept, rel, "probe"), nil, 0o600); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if _, err := os.Stat(filepath.Join(real, "probe")); err != nil {
			t.Fatalf("a write through %s did not land outside, so this test proves nothing", rel)
		}
	}
	inside := map[string]string{
		".local/bin/tool": "../share/tool/bin/tool", // stays inside
		".dangling":       "missing/file",           // a write makes it inside
		".loopless":       ".local/bin",
	}
	for rel, target := range inside {
		os.Symlink(target, filepath.Join(kept, rel))
	}
	links, _, complete := LookHome(kept)
	got := strings.Join(links, "\n")
	if !complete {
		t.Error("a small home was not looked through whole")
	}
	for rel, target := range out {
		if !strings.Contains(got, filepath.Join(kept, rel)+" -> "+target) {
			t.Errorf("%s -> %s not named:\n%s", rel, target, got)
		}
	}
	if !strings.Contains(got, "(on the host: "+real+")") {
		t.Errorf("where a link lands on the host is not said:\n%s", got)
	}
	for rel := range inside {
		if strings.Contains(got, filepath.Join(kept, rel)+" ->") {
			t.Errorf("%s, which stays inside, is named:\n%s", rel, got)
		}
	}
}

// TestHomeLinksBounded: a home a session filled with entries is looked
// through up to its budget of entries, and says it stopped; a link
// planted beyond the budget is not promised.
func TestHomeLinksBounded(t *testing.T) {
	defer func(b int) { homeLinksBudget = b }(homeLinksBudget)
	homeLinksBudget = 1000
	kept := t.TempDir()
	dir := filepath.Join(kept, "many")
	os.Mkdir(dir, 0o700)
	for i := 0; i < homeLinksBudget; i++ {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Symlink("/home/u/.ssh", filepath.Join(kept, ".ssh-link"))
	links, _, complete := LookHome(kept)
	if complete {
		t.Errorf("%d entries and more looked through whole", homeLinksBudget)
	}
	if len(links) > 1 {
		t.Errorf("links %v", links)
	}
}

// homeLinksWithin runs LookHome, failing the test if it takes over 10 s.
func homeLinksWithin(t *testing.T, home string) ([]string, bool) {
	t.Helper()
	type res struct {
		links    []string
		complete bool
	}
	done := make(chan res, 1)
	go func() { l, _, c := LookHome(home); done <- res{l, c} }()
	select {
	case r := <-done:
		return r.links, r.complete
	case <-time.After(10 * time.Second):
		t.Fatal("LookHome did not return within 10 s")
		return nil, false
	}
}

// TestHomeLinksHostile (issue 31): what a session leaves in its kept home
// does not stall or fool mosaic home: a FIFO (inside, and outside through
// a link: opening one blocks, shown) is never opened; a symlink loop is
// named, not followed; a link out below a directory nested deeper than a
// path can name (a write through it, made from the directories' fds, lands
// outside: shown) makes the look incomplete, said; a name with a newline
// and a terminal escape is named, as it is (mosaic home escapes it).
func TestHomeLinksHostile(t *testing.T) {
	kept, real := t.TempDir(), t.TempDir()
	unix.Mkfifo(filepath.Join(kept, "fifo"), 0o600)
	unix.Mkfifo(filepath.Join(real, "fifo"), 0o600)
	os.Symlink("fifo", filepath.Join(kept, ".in-fifo"))
	os.Symlink(filepath.Join(real, "fifo"), filepath.Join(kept, ".out-fifo"))
	os.Symlink(".loop-b", filepath.Join(kept, ".loop-a"))
	os.Symlink(".loop-a", filepath.Join(kept, ".loop-b"))
	odd := ".x\n\x1b]0;owned\x07mosaic: all clear"
	os.Symlink(real, filepath.Join(kept, odd))
	opened := make(chan struct{})
	go func() {
		if f, err := os.Open(filepath.Join(kept, ".out-fifo")); err == nil {
			f.Close()
		}
		close(opened)
	}()
	select {
	case <-opened:
		t.Fatal("opening the FIFO did not block, so this test proves nothing")
	case <-time.After(200 * time.Millisecond):
	}
	links, complete := homeLinksWithin(t, kept)
	if w, err := os.OpenFile(filepath.Join(real, "fifo"), os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
		w.Close() // lets the blocked open above go
	}
	got := strings.Join(links, "\n")
	for _, want := range []string{".out-fifo -> ", ".loop-a -> .loop-b", ".loop-b -> .loop-a", odd + " -> " + real} {
		if !strings.Contains(got, want) {
			t.Errorf("%q not named among:\n%s", want, got)
		}
	}
	if strings.Contains(got, ".in-fifo") || !complete {
		t.Errorf("named %q (complete %v), want the FIFO inside not named and the look complete", got, complete)
	}

	// Deeper than PATH_MAX, made (and written through) from fds.
	deep := t.TempDir()
	fd, _ := unix.Open(deep, unix.O_PATH|unix.O_DIRECTORY, 0)
	seg := strings.Repeat("d", 250)
	for i := 0; i < 20; i++ {
		unix.Mkdirat(fd, seg, 0o700)
		next, err := unix.Openat(fd, seg, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		unix.Close(fd)
		fd = next
	}
	if err := unix.Symlinkat(real, fd, "out"); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(real, "probe"))
	if w, err := unix.Openat(fd, "out/probe", unix.O_CREAT|unix.O_WRONLY, 0o600); err != nil {
		t.Fatal(err)
	} else {
		unix.Close(w)
	}
	unix.Close(fd)
	if _, err := os.Stat(filepath.Join(real, "probe")); err != nil {
		t.Fatal("a write through the deep link did not land outside, so this part proves nothing")
	}
	if links, complete := homeLinksWithin(t, deep); complete {
		t.Errorf("a home with a link out deeper than a path can name was called looked through whole (named %q)", links)
	}
}

// TestLookHomeNamesRepositories: a git repository a session leaves in its
// kept home runs its config's commands on the host once a git starts
// there (shown: git status in the planted directory runs its fsmonitor),
// so LookHome names each kind: a .git directory, a .git file, and a
// directory that is a git directory itself; not a directory that only
// has a HEAD.
func TestLookHomeNamesRepositories(t *testing.T) {
	kept := t.TempDir()
	codex := filepath.Join(kept, ".codex")
	mark := filepath.Join(t.TempDir(), "ran")
	for _, args := range [][]string{{"init", "-q", codex}, {"-C", codex, "config", "core.fsmonitor", "touch " + mark}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	os.WriteFile(filepath.Join(codex, "config.toml"), []byte("model = \"x\"\n"), 0o600)
	cmd := exec.Command("git", "status", "--short")
	cmd.Dir = codex
	cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(kept))
	cmd.Run()
	if _, err := os.Stat(mark); err != nil {
		t.Fatalf("a git started in the planted repository did not run its fsmonitor, so this test shows nothing: %v", err)
	}
	bare := filepath.Join(kept, "cache", "bare")
	for _, d := range []string{"objects", "refs", "../onlyhead"} {
		os.MkdirAll(filepath.Join(bare, d), 0o700)
	}
	os.WriteFile(filepath.Join(bare, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
	os.WriteFile(filepath.Join(kept, "cache", "onlyhead", "HEAD"), []byte("x\n"), 0o600)
	os.MkdirAll(filepath.Join(kept, "wt"), 0o700)
	os.WriteFile(filepath.Join(kept, "wt", ".git"), []byte("gitdir: /elsewhere\n"), 0o600)
	// git takes objects and refs through symlinks, or a commondir in
	// their place (shown: git rev-parse finds each a git directory).
	linked, common := filepath.Join(kept, "linked"), filepath.Join(kept, "common")
	for _, d := range []string{linked, common} {
		os.MkdirAll(d, 0o700)
		os.WriteFile(filepath.Join(d, "HEAD"), []byte("ref: refs/heads/main\n"), 0o600)
	}
	os.Symlink(filepath.Join(bare, "objects"), filepath.Join(linked, "objects"))
	os.Symlink(filepath.Join(bare, "refs"), filepath.Join(linked, "refs"))
	os.WriteFile(filepath.Join(common, "commondir"), []byte(bare+"\n"), 0o600)
	for _, d := range []string{linked, common} {
		cmd := exec.Command("git", "rev-parse", "--git-dir")
		cmd.Dir = d
		if out, err := cmd.Output(); err != nil || string(out) != ".\n" {
			t.Fatalf("git does not take %s for a git directory (%q %v), so this case shows nothing", d, out, err)
		}
	}
	_, repos, complete := LookHome(kept)
	want := []string{filepath.Join(codex, ".git"), bare, filepath.Join(kept, "wt", ".git"), linked, common}
	slices.Sort(repos)
	slices.Sort(want)
	if !complete || !slices.Equal(repos, want) {
		t.Errorf("repositories named: %q (complete %v), want %q", repos, complete, want)
	}
}
