package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// craftIndex writes a version 4 index of n gitlinks, each path sharing
// all of the previous one (strip 0) and adding suffix: the paths grow one
// byte an entry while the index grows some 65 bytes an entry.
func craftIndex(n int, suffix string) []byte {
	b := []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, 4)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for i := 0; i < n; i++ {
		var e [62]byte // 40 bytes of stat data, a 20-byte hash, 2 of flags
		binary.BigEndian.PutUint32(e[24:28], 0o160000)
		b = append(b, e[:]...)
		b = append(b, 0) // strip nothing of the previous path
		b = append(b, suffix...)
		b = append(b, 0)
	}
	return b
}

// TestIndexBounded: the index is the session's file. A version 4 index of
// 4 MiB whose paths each extend the previous one made the parser allocate
// the sum of all their lengths (quadratic: gigabytes, on the host, at the
// session's end). Paths git cannot reach (over PATH_MAX) are not kept, and
// the count of gitlinks kept is bounded.
func TestIndexBounded(t *testing.T) {
	b := craftIndex(60000, "a")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	links, _ := parseIndex(b, 20)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 64<<20 {
		t.Fatalf("parsing a %d-byte index allocated %d MiB", len(b), got>>20)
	}
	for _, l := range links {
		if len(l) > 4096 {
			t.Fatalf("kept a gitlink path of %d bytes", len(l))
		}
	}
	// Many short distinct gitlinks: at most maxGitlinks kept, and said.
	b = []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, 30000)
	for i := 0; i < 30000; i++ {
		var e [62]byte
		binary.BigEndian.PutUint32(e[24:28], 0o160000)
		b = append(b, e[:]...)
		p := strings.Repeat("x", 1+i%5) + "/" + string(rune('a'+i%26))
		b = append(b, p...)
		for pad := 8 - (62+len(p))%8; pad > 0; pad-- {
			b = append(b, 0)
		}
	}
	links, err := parseIndex(b, 20)
	if len(links) > maxGitlinks || err == nil {
		t.Fatalf("kept %d gitlinks of 30000, error %v", len(links), err)
	}
}

// TestMovedSubmodulesListBounded: a session that plants thousands of
// submodules with long paths had each listed in end.json, which then
// passed the size mosaic reads a record at (16 MiB): the session's result
// and every move went unsaid. All are moved; a bounded number are listed.
func TestMovedSubmodulesListBounded(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var prefix string
	for i := 0; i < 14; i++ {
		prefix = filepath.Join(prefix, strings.Repeat(string(rune('a'+i)), 250))
	}
	const n = 3000
	b := []byte("DIRC")
	b = binary.BigEndian.AppendUint32(b, 2)
	b = binary.BigEndian.AppendUint32(b, n)
	for i := 0; i < n; i++ {
		p := filepath.Join(prefix, fmt.Sprintf("s%05d", i))
		if err := os.MkdirAll(filepath.Join(ws, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p, ".git"), []byte("gitdir: /nowhere\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var e [62]byte
		binary.BigEndian.PutUint32(e[24:28], 0o160000)
		b = append(append(b, e[:]...), p...)
		for pad := 8 - (62+len(p))%8; pad > 0; pad-- {
			b = append(b, 0)
		}
	}
	b = append(b, make([]byte, 20)...) // the checksum git writes last
	if err := os.WriteFile(filepath.Join(ws, ".git", "index"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	moved := MoveAsideRepos(ws, "s", start)
	doc, _ := json.Marshal(moved)
	if len(doc) > 1<<20 {
		t.Errorf("the list of what was moved is %d KiB", len(doc)>>10)
	}
	left := 0
	for i := 0; i < n; i++ {
		if _, err := os.Lstat(filepath.Join(ws, prefix, fmt.Sprintf("s%05d", i), ".git")); err == nil {
			left++
		}
	}
	if left != 0 {
		t.Errorf("%d planted links were not moved aside", left)
	}
}

// gitIn runs git on the host in dir, with the user's config ignored.
func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test", "-c", "protocol.file.allow=always"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func plantHook(t *testing.T, hooks, name, mark string) {
	t.Helper()
	os.MkdirAll(hooks, 0o755)
	if err := os.WriteFile(filepath.Join(hooks, name), []byte("#!/bin/sh\ntouch "+mark+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestSubmoduleGitDirs: git keeps a submodule's repository in
// .git/modules/NAME, which a session can write. A hook written into the
// git directory of the user's submodule ran at the host's next commit in
// it; a git directory planted for a submodule .gitmodules names but the
// user never checked out was reused ("reactivated") by the host's `git
// submodule update --init`, which ran its post-checkout. Both are shown to
// run first, on the host; after the session's end neither does.
func TestSubmoduleGitDirs(t *testing.T) {
	up := t.TempDir()
	gitIn(t, up, "init", "-q")
	gitIn(t, up, "commit", "-q", "--allow-empty", "-m", "x")
	mark := filepath.Join(t.TempDir(), "MARK")
	setup := func() (ws, planted string, start time.Time) {
		// The user's repository with a submodule, checked out...
		orig := t.TempDir()
		gitIn(t, orig, "init", "-q")
		gitIn(t, orig, "submodule", "add", "-q", up, "sub")
		gitIn(t, orig, "commit", "-q", "-m", "s")
		// ... and a clone of it where the submodule is not.
		ws = filepath.Join(t.TempDir(), "clone")
		gitIn(t, orig, "clone", "-q", orig, ws)
		start = time.Now()
		os.MkdirAll(filepath.Join(ws, ".git", "modules"), 0o755)
		gitIn(t, ws, "clone", "-q", "--bare", up, filepath.Join(ws, ".git", "modules", "sub"))
		gitIn(t, ws, "config", "-f", filepath.Join(ws, ".git", "modules", "sub", "config"), "core.bare", "false")
		plantHook(t, filepath.Join(ws, ".git", "modules", "sub", "hooks"), "post-checkout", mark)
		return ws, orig, start
	}
	ws, orig, _ := setup()
	// The hook written into an existing submodule's git directory.
	hooks := filepath.Join(orig, ".git", "modules", "sub", "hooks")
	// Its sample hooks are older than the session.
	var before time.Time
	if st, err := os.Stat(filepath.Join(hooks, "pre-commit.sample")); err == nil {
		before = st.ModTime().Add(2 * time.Second)
	}
	time.Sleep(time.Until(before))
	orig2start := time.Now()
	plantHook(t, hooks, "pre-commit", mark)
	os.Remove(mark)
	gitIn(t, filepath.Join(orig, "sub"), "commit", "-q", "--allow-empty", "-m", "y")
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the hook written into the submodule's git directory did not run at a commit in it, so this test proves nothing")
	}
	os.Remove(mark)
	gitIn(t, ws, "submodule", "update", "-q", "--init")
	if _, err := os.Stat(mark); err != nil {
		t.Fatal("the planted git directory's post-checkout did not run at git submodule update --init, so this test proves nothing")
	}

	// Again, with mosaic's end of the session in between.
	ws, _, start := setup()
	moved := MoveAsideRepos(ws, "s", start)
	os.Remove(mark)
	gitIn(t, ws, "submodule", "update", "-q", "--init")
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the planted git directory's hook ran at git submodule update after the session's end (moved %+v)", moved)
	}
	moved = MoveAsideRepos(orig, "s", orig2start)
	os.Remove(mark)
	gitIn(t, filepath.Join(orig, "sub"), "commit", "-q", "--allow-empty", "-m", "z")
	if _, err := os.Stat(mark); err == nil {
		t.Errorf("the hook written into the submodule's git directory ran at a commit after the session's end (moved %+v)", moved)
	}
	for _, m := range moved {
		if m.Why() != gitDirReason && !strings.HasSuffix(m.Path, "/.git") {
			t.Errorf("moved %+v, said as %q", m, m.Why())
		}
	}
}

// TestSplitIndex: git reads an index with a link extension as two files
// (.git/index and .git/sharedindex.HASH, both the session's) whatever its
// config says. A gitlink planted in the shared part, or as an entry of
// the index that replaces one of the shared part (with no path of its
// own), was not seen: the host's git status ran the submodule. Each case
// is shown to run on the host first.
func TestSplitIndex(t *testing.T) {
	git := func(ws string, args ...string) {
		t.Helper()
		if out, err := exec.Command("git", append([]string{"-C", ws}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	for _, replaced := range []bool{false, true} {
		ws := t.TempDir()
		git(ws, "init", "-q")
		mark := filepath.Join(t.TempDir(), "MARK")
		for i := 0; i < 20; i++ {
			os.WriteFile(filepath.Join(ws, fmt.Sprintf("f%02d", i)), nil, 0o644)
		}
		start := time.Now()
		if replaced {
			// sub is a file in the shared part; the gitlink replaces it.
			os.WriteFile(filepath.Join(ws, "sub"), nil, 0o644)
			git(ws, "add", ".")
			git(ws, "update-index", "--split-index")
			os.Remove(filepath.Join(ws, "sub"))
			plantSubmodule(t, ws, mark)
		} else {
			git(ws, "add", ".")
			plantSubmodule(t, ws, mark)
			git(ws, "update-index", "--split-index")
		}
		b, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
		links, pathless, _, err := indexLinks(b, 20)
		if err != nil || len(links) != 0 || replaced != (len(pathless) == 1) {
			t.Fatalf("replaced %v: the index proper has gitlinks %v and pathless %v (%v): not the case this test is for", replaced, links, pathless, err)
		}
		if !hostStatusRuns(t, ws, mark) {
			t.Fatalf("replaced %v: the planted submodule did not run on git status, so this test proves nothing", replaced)
		}
		moved := MoveAsideRepos(ws, "s", start)
		if hostStatusRuns(t, ws, mark) {
			t.Errorf("replaced %v: git status still runs the submodule planted in a split index (moved %+v)", replaced, moved)
		}
	}
}

// FuzzIndex: whatever the session writes as its index, reading it
// neither panics nor runs away (the seeds run in every go test).
func FuzzIndex(f *testing.F) {
	f.Add(craftIndex(3, "a"), []byte("link\x00\x00\x00\x1c"+strings.Repeat("\x01", 20)+"\x00\x00\x00\x40\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, index, ext []byte) {
		_, replacing, _, _ := indexLinks(index, 20)
		if link, err := linkExtension(ext, 20); err == nil && link != nil {
			if n, err := ewahSize(link[20:]); err == nil {
				ewahBits(link[20+n:], len(replacing)+3)
			}
		}
	})
}

// TestSubmoduleGitDirSymlinked: .git/modules, or .git/modules/NAME, made a
// symlink to a git directory the session wrote elsewhere: git follows it,
// and git submodule update ran its post-checkout. Shown to run first.
func TestSubmoduleGitDirSymlinked(t *testing.T) {
	up := t.TempDir()
	gitIn(t, up, "init", "-q")
	gitIn(t, up, "commit", "-q", "--allow-empty", "-m", "x")
	orig := t.TempDir()
	gitIn(t, orig, "init", "-q")
	gitIn(t, orig, "submodule", "add", "-q", up, "sub")
	gitIn(t, orig, "commit", "-q", "-m", "s")
	mark := filepath.Join(t.TempDir(), "MARK")
	for _, whole := range []bool{false, true} {
		setup := func() (string, time.Time) {
			ws := filepath.Join(t.TempDir(), "clone")
			gitIn(t, orig, "clone", "-q", orig, ws)
			start := time.Now()
			gitdir := filepath.Join(ws, "evil", "sub")
			gitIn(t, ws, "clone", "-q", "--bare", up, gitdir)
			gitIn(t, ws, "config", "-f", filepath.Join(gitdir, "config"), "core.bare", "false")
			plantHook(t, filepath.Join(gitdir, "hooks"), "post-checkout", mark)
			if whole {
				os.Symlink("../evil", filepath.Join(ws, ".git", "modules"))
			} else {
				os.MkdirAll(filepath.Join(ws, ".git", "modules"), 0o755)
				os.Symlink("../../evil/sub", filepath.Join(ws, ".git", "modules", "sub"))
			}
			return ws, start
		}
		ws, _ := setup()
		os.Remove(mark)
		gitIn(t, ws, "submodule", "update", "-q", "--init")
		if _, err := os.Stat(mark); err != nil {
			t.Fatalf("whole %v: the symlinked git directory's post-checkout did not run, so this test proves nothing", whole)
		}
		ws, start := setup()
		moved := MoveAsideRepos(ws, "s", start)
		os.Remove(mark)
		gitIn(t, ws, "submodule", "update", "-q", "--init")
		if _, err := os.Stat(mark); err == nil {
			t.Errorf("whole %v: the symlinked git directory's hook ran after the session's end (moved %+v)", whole, moved)
		}
	}
}
