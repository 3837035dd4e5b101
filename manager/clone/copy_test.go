package clone

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"mosaic/units"
)

// copyRepo is a repository whose working tree holds every kind of entry
// the copy meets: files in nested directories, an executable, a symlink,
// an uncommitted change, an untracked file, a deleted file, an ignored
// one; its index is settled (written a second after the files, so that
// no entry is racily clean) when settled.
func copyRepo(t *testing.T, settled bool) string {
	t.Helper()
	ws := userRepo(t)
	os.MkdirAll(filepath.Join(ws, "d", "e"), 0o755)
	os.WriteFile(filepath.Join(ws, "d", "e", "deep.txt"), []byte("deep\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "run.sh"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("gone\n"), 0o644)
	os.Symlink("a.txt", filepath.Join(ws, "link"))
	run(t, ws, "add", "d", "run.sh", "gone.txt", "link")
	run(t, ws, "commit", "-qm", "two")
	os.Remove(filepath.Join(ws, "gone.txt"))
	if settled {
		settle(t, ws)
	}
	return ws
}

// settle writes the index of ws again a second after its files, so that
// no entry is racily clean (its stat would not say the file is its own).
func settle(t *testing.T, ws string) {
	t.Helper()
	time.Sleep(1100 * time.Millisecond)
	run(t, ws, "update-index", "-q", "--really-refresh")
}

// takenPaths records, until the test ends, the paths the copy takes from
// the user's checkout (copyHook, which the copy's workers call side by
// side), and returns what it recorded so far, sorted.
func takenPaths(t *testing.T) func() []string {
	var mu sync.Mutex
	var paths []string
	copyHook = func(p string) {
		mu.Lock()
		defer mu.Unlock()
		paths = append(paths, p)
	}
	t.Cleanup(func() { copyHook = func(string) {} })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		sort.Strings(paths)
		return append([]string(nil), paths...)
	}
}

// makeCopy makes the copy of ws and returns it.
func makeCopy(t *testing.T, ws string) (units.Clone, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "clone")
	c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
	if err != nil {
		t.Fatal(err)
	}
	return c, dir
}

// inCopy runs git in the copy at dir of ws, its objects reached where
// the host has them (the copy's alternates name where a session sees
// them), and returns its standard output.
func inCopy(t *testing.T, ws, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(ws, ".git", "objects"))
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v in the copy: %v\n%s", args, err, errb.String())
	}
	return strings.TrimSpace(string(out))
}

// checkCopyIsBase fails unless the copy's working tree and index are
// exactly the base commit: nothing git sees as changed once it hashes
// every file again, HEAD at the base on the user's branch.
func checkCopyIsBase(t *testing.T, ws string, c units.Clone, dir string) {
	t.Helper()
	if got := inCopy(t, ws, dir, "rev-parse", "HEAD"); got != c.Base {
		t.Errorf("the copy's HEAD is %s, not the base %s", got, c.Base)
	}
	if got, want := inCopy(t, ws, dir, "symbolic-ref", "-q", "HEAD"), run(t, ws, "symbolic-ref", "-q", "HEAD"); got != want {
		t.Errorf("the copy is on %s, the user on %s", got, want)
	}
	if got := inCopy(t, ws, dir, "diff-index", "--cached", "--name-only", "HEAD"); got != "" {
		t.Errorf("the copy's index is not its base: %s", got)
	}
	// The index as git's fsck reads it (its checksum, its objects).
	inCopy(t, ws, dir, "fsck", "--no-dangling", "--no-progress")
	// Every file hashed again, not trusted by its stat.
	inCopy(t, ws, dir, "-c", "core.checkStat=default", "update-index", "-q", "--really-refresh")
	if got := inCopy(t, ws, dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("the copy's working tree is not its base:\n%s", got)
	}
}

func TestCopyWorkTreeIsTheBase(t *testing.T) {
	ws := copyRepo(t, true)
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if _, err := os.Lstat(filepath.Join(dir, "x.log")); err == nil {
		t.Error("an ignored file reached the copy")
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode()&0o100 == 0 {
		t.Errorf("the executable lost its mode: %v %v", fi.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "link")); err != nil || l != "a.txt" {
		t.Errorf("the symlink is %q, %v", l, err)
	}
}

// With a settled index every regular file is taken from the user's
// checkout (copyHook sees each), none inflated by git.
func TestCopyWorkTreeTakesTheUsersFiles(t *testing.T) {
	ws := copyRepo(t, true)
	copied := takenPaths(t)
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if got, want := strings.Join(copied(), " "), ".gitignore a.txt d/e/deep.txt run.sh u.txt"; got != want {
		t.Errorf("taken from the user's checkout: %s, want %s", got, want)
	}
}

// A file the user changed, same size, in the second their git wrote the
// index (racily clean: its stat proves nothing) is the base as the user
// sees it, and the copy holds it: its bytes are hashed, not trusted.
func TestCopyWorkTreeRacy(t *testing.T) {
	ws := copyRepo(t, true)
	a := filepath.Join(ws, "a.txt")
	for try := 0; ; try++ {
		// A fresh second, past the file system's clock's tick (coarse: a
		// file written just after the second began has the second before).
		time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
		run(t, ws, "add", "a.txt")
		os.WriteFile(a, []byte("one\nMINE\n"), 0o644) // the size "one\nmine\n" has
		fi, _ := os.Stat(a)
		ii, _ := os.Stat(filepath.Join(ws, ".git", "index"))
		if fi.ModTime().Unix() == ii.ModTime().Unix() {
			break
		}
		if try == 3 {
			t.Fatalf("cannot write the file in the second of its index: %v, %v", fi.ModTime(), ii.ModTime())
		}
	}
	time.Sleep(1100 * time.Millisecond) // the copy is made in a later second
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if got := inCopy(t, ws, dir, "show", c.Base+":a.txt"); got != "one\nMINE" {
		t.Errorf("the base holds %q of a.txt, not what the user sees", got)
	}
}

// A file the user writes while it is copied is not taken: git writes the
// base's blob instead (copyHook stands for the user's write, after the
// file's stat was found to be its entry's and before it is copied).
func TestCopyWorkTreeChangedWhileCopied(t *testing.T) {
	ws := copyRepo(t, true)
	before, _ := os.ReadFile(filepath.Join(ws, "d", "e", "deep.txt"))
	copyHook = func(path string) {
		if path == "d/e/deep.txt" {
			os.WriteFile(filepath.Join(ws, path), []byte("DEEP\n"), 0o644)
		}
	}
	defer func() { copyHook = func(string) {} }()
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if got, _ := os.ReadFile(filepath.Join(dir, "d", "e", "deep.txt")); !bytes.Equal(got, before) {
		t.Errorf("the copy holds %q, the base %q", got, before)
	}
}

// An index of another form (version 4's paths, a split index: the
// snapshot's is unsplit) makes the same copy; one the copy does not take
// apart (skip-worktree, an extended flag) leaves it to git's checkout,
// which does too.
func TestCopyWorkTreeUnusualIndex(t *testing.T) {
	for _, how := range [][]string{{"--index-version", "4"}, {"--split-index"}, {"--skip-worktree", "run.sh"}} {
		t.Run(strings.Join(how, " "), func(t *testing.T) {
			ws := copyRepo(t, true)
			run(t, ws, append([]string{"update-index"}, how...)...)
			c, dir := makeCopy(t, ws)
			checkCopyIsBase(t, ws, c, dir)
		})
	}
}

// The index this file writes is one git reads as its own: the same
// entries, and a clean tree where git's own index says so.
func TestIndexRoundTrip(t *testing.T) {
	for _, version := range []string{"2", "3", "4"} {
		t.Run("version "+version, func(t *testing.T) {
			ws := copyRepo(t, true)
			run(t, ws, "update-index", "--index-version", version)
			want := run(t, ws, "ls-files", "--debug", "-s")
			entries, err := readIndex(filepath.Join(ws, ".git", "index"), 20)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, ".git", "index"), encodeIndex(entries, 20), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := run(t, ws, "ls-files", "--debug", "-s"); got != want {
				t.Errorf("git reads another index:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// An entry whose file's bytes are not its blob (the stat of run.sh, the
// object id of another blob: what a change in the clock's tick the entry
// was recorded in would leave, which no stat shows) is not taken: the
// copy is hashed, and git writes the blob the entry names.
func TestCopyWorkTreeTakesOnlyTheBlob(t *testing.T) {
	ws := copyRepo(t, true)
	dir := filepath.Join(t.TempDir(), "clone")
	run(t, ws, "clone", "-q", "--shared", "--no-checkout", ".", dir)
	other := run(t, ws, "hash-object", "-w", "--stdin", "--path", "x") // the empty blob
	oid, _ := hex.DecodeString(other)
	entries, err := readIndex(filepath.Join(ws, ".git", "index"), 20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range entries {
		if entries[i].Path == "run.sh" {
			entries[i].OID = oid
		}
	}
	index := filepath.Join(t.TempDir(), "index")
	os.WriteFile(index, encodeIndex(entries, 20), 0o644)
	if err := copyWorkTree(context.Background(), ws, dir, index, 20); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "run.sh")); len(b) != 0 {
		t.Errorf("the copy's run.sh holds the user's %q, not the blob its entry names", b)
	}
	// The user's index names a.txt's committed bytes; the file has changed
	// since: the entry's blob is written.
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\n" {
		t.Errorf("the copy's a.txt: %q", b)
	}
}

// A file a filter of the user's own config changes on checkout is, in the
// user's checkout, not the blob's bytes; git's checkout in the copy (whose
// config has no such filter) writes the blob, and so does the copy.
func TestCopyWorkTreeFilteredFile(t *testing.T) {
	ws := copyRepo(t, true)
	run(t, ws, "config", "filter.upper.smudge", "tr a-z A-Z")
	run(t, ws, "config", "filter.upper.clean", "tr A-Z a-z")
	os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte("*.up filter=upper\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "f.up"), []byte("shout\n"), 0o644)
	run(t, ws, "add", ".gitattributes", "f.up")
	run(t, ws, "commit", "-qm", "filtered")
	os.Remove(filepath.Join(ws, "f.up"))
	run(t, ws, "checkout", "--", "f.up") // smudged: SHOUT
	if b, _ := os.ReadFile(filepath.Join(ws, "f.up")); string(b) != "SHOUT\n" {
		t.Fatalf("the user's f.up is %q: the filter did not run", b)
	}
	settle(t, ws)
	_, dir := makeCopy(t, ws)
	if b, _ := os.ReadFile(filepath.Join(dir, "f.up")); string(b) != "shout\n" {
		t.Errorf("the copy's f.up is %q, not the blob git's checkout writes", b)
	}
}

// An index naming a path outside the working tree, or in a .git, is not
// taken apart (git refuses such paths itself): nothing is written.
func TestCopyWorkTreeRefusesOddPaths(t *testing.T) {
	ws := copyRepo(t, true)
	for _, p := range []string{"../escape.txt", "/abs.txt", "d/../../escape.txt", ".git/hooks/pre-commit", "d/.GIT/x", "d//x"} {
		t.Run(p, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "clone")
			run(t, ws, "clone", "-q", "--shared", "--no-checkout", ".", dir)
			entries, err := readIndex(filepath.Join(ws, ".git", "index"), 20)
			if err != nil {
				t.Fatal(err)
			}
			entries[0].Path = p
			index := filepath.Join(t.TempDir(), "index")
			os.WriteFile(index, encodeIndex(entries, 20), 0o644)
			if err := copyWorkTree(context.Background(), ws, dir, index, 20); err != errIndexUnusual {
				t.Errorf("copyWorkTree: %v, want errIndexUnusual", err)
			}
			if names, _ := os.ReadDir(dir); len(names) != 1 {
				t.Errorf("the copy holds %d entries, want .git alone", len(names))
			}
			if _, err := os.Lstat(filepath.Join(filepath.Dir(dir), "escape.txt")); err == nil {
				t.Error("a file was written outside the copy")
			}
		})
	}
}

// gitsCheckout is what git's checkout of the copy's index writes for each
// file (checkout-index --all into a directory of its own), path -> bytes.
func gitsCheckout(t *testing.T, ws, dir string) map[string]string {
	t.Helper()
	ref := t.TempDir() + "/"
	inCopy(t, ws, dir, "checkout-index", "-f", "--all", "--prefix="+ref)
	files := map[string]string{}
	filepath.Walk(ref, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			files[strings.TrimPrefix(p, ref)] = string(b)
		}
		return nil
	})
	return files
}

// A file whose bytes are its blob's is still not the copy's when git's
// checkout converts it: an eol or ident attribute the user committed after
// their file was written (git does not write it again), or a global
// core.autocrlf. The copy then holds what git's checkout writes.
func TestCopyWorkTreeConvertedOnCheckout(t *testing.T) {
	for _, tc := range []struct{ name, attrs, autocrlf string }{
		{"eol attribute", "e.txt eol=crlf\n", ""},
		{"ident attribute", "i.txt ident\n", ""},
		{"text attribute and core.eol", "e.txt text\n", ""},
		{"global autocrlf", "", "true"},
		{"filter of the global config", "f.up filter=upper\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			global := filepath.Join(t.TempDir(), "gitconfig")
			os.WriteFile(global, nil, 0o644)
			t.Setenv("GIT_CONFIG_GLOBAL", global)
			ws := copyRepo(t, false)
			os.WriteFile(filepath.Join(ws, "e.txt"), []byte("line\nline\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "i.txt"), []byte("$Id$\n"), 0o644)
			os.WriteFile(filepath.Join(ws, "f.up"), []byte("low\n"), 0o644)
			run(t, ws, "config", "--global", "filter.upper.smudge", "tr a-z A-Z")
			os.WriteFile(filepath.Join(ws, ".gitattributes"), []byte(tc.attrs), 0o644)
			run(t, ws, "add", "e.txt", "i.txt", "f.up", ".gitattributes")
			run(t, ws, "commit", "-qm", "attributes after the files")
			if tc.autocrlf != "" {
				run(t, ws, "config", "--global", "core.autocrlf", tc.autocrlf)
			}
			if tc.name == "text attribute and core.eol" {
				run(t, ws, "config", "--global", "core.eol", "crlf")
			}
			settle(t, ws)
			_, dir := makeCopy(t, ws)
			for p, want := range gitsCheckout(t, ws, dir) {
				if got, _ := os.ReadFile(filepath.Join(dir, p)); string(got) != want {
					t.Errorf("the copy's %s is %q, git's checkout writes %q", p, got, want)
				}
			}
		})
	}
}

// A Ctrl-C that ends a git of the copy's (SIGINT reaches mosaic's group,
// git with it) gives the start up: Make's error is ErrInterrupted, and git
// does not check the copy out instead. The check-attr of a usual index;
// the update-ref of HEAD beside an unusual one (split: git's checkout).
func TestCopyWorkTreeInterrupted(t *testing.T) {
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git")
	}
	for _, tc := range []struct{ git, index string }{{"check-attr", "--no-split-index"}, {"update-ref", "--split-index"}} {
		t.Run(tc.git, func(t *testing.T) {
			ws := copyRepo(t, true)
			run(t, ws, "update-index", tc.index)
			bin := t.TempDir()
			script := "#!/bin/sh\nfor a; do [ \"$a\" = " + tc.git + " ] && kill -INT $$; done\nexec " + real + " \"$@\"\n"
			if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			dir := filepath.Join(t.TempDir(), "clone")
			_, err = Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
			if !errors.Is(err, ErrInterrupted) {
				t.Errorf("Make: %v, want ErrInterrupted", err)
			}
			if _, err := os.Lstat(dir); err == nil {
				t.Error("the copy is left behind")
			}
		})
	}
}

// A split index (the user's core.splitIndex) leaves the user's .git as
// it was: the snapshot's git add wrote its own shared index there (where
// the link of the index it was given names them), a file of the user's
// repository mosaic left behind. Unsplit, the snapshot's index is one the
// copy takes apart: the user's files are taken.
func TestCopyWorkTreeSplitIndex(t *testing.T) {
	ws := copyRepo(t, true)
	run(t, ws, "update-index", "--split-index")
	for i := range 10 { // more than splitIndex.maxPercentChange (20%) of the entries: a new shared index
		os.WriteFile(filepath.Join(ws, fmt.Sprintf("new%d.txt", i)), []byte("new\n"), 0o644)
	}
	shared := func() string {
		names, _ := filepath.Glob(filepath.Join(ws, ".git", "sharedindex.*"))
		return strings.Join(names, " ")
	}
	before := shared()
	copied := takenPaths(t)
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if after := shared(); after != before {
		t.Errorf("the user's .git has shared indexes %s, had %s", after, before)
	}
	if len(copied()) == 0 {
		t.Error("no file was taken from the user's checkout")
	}
}

// A path beginning with a blank (sorted first in the index) leaves the
// check of attributes as it is: every file is still taken, not the whole
// copy left to git's checkout.
func TestCopyWorkTreeBlankFirstPath(t *testing.T) {
	ws := copyRepo(t, false)
	os.WriteFile(filepath.Join(ws, " lead.txt"), []byte("lead\n"), 0o644)
	run(t, ws, "add", " lead.txt")
	run(t, ws, "commit", "-qm", "a blank first")
	settle(t, ws)
	copied := takenPaths(t)
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
	if got, want := strings.Join(copied(), ","), " lead.txt,.gitignore,a.txt,d/e/deep.txt,run.sh,u.txt"; got != want {
		t.Errorf("taken from the user's checkout: %q, want %q", got, want)
	}
}

// What a direct-mode session may leave at a tracked path is not read
// through: a directory made a symlink to a copy of it elsewhere (same
// bytes: it would pass the hash), a file made a symlink, a FIFO (opening
// it to read would wait for a writer). None is reached (copyHook), the
// copy does not hang, and git writes each from its blob.
func TestCopyWorkTreeReachesNothingElse(t *testing.T) {
	ws := copyRepo(t, true)
	outside := t.TempDir()
	os.Rename(filepath.Join(ws, "d"), filepath.Join(outside, "d"))
	os.Symlink(filepath.Join(outside, "d"), filepath.Join(ws, "d"))
	gi, _ := os.ReadFile(filepath.Join(ws, ".gitignore"))
	os.WriteFile(filepath.Join(outside, "gitignore"), gi, 0o644)
	os.Remove(filepath.Join(ws, ".gitignore"))
	os.Symlink(filepath.Join(outside, "gitignore"), filepath.Join(ws, ".gitignore"))
	os.Remove(filepath.Join(ws, "run.sh"))
	if err := unix.Mkfifo(filepath.Join(ws, "run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	copied := takenPaths(t)
	dir := filepath.Join(t.TempDir(), "clone")
	run(t, ws, "clone", "-q", "--shared", "--no-checkout", ".", dir)
	done := make(chan error, 1)
	go func() { done <- copyWorkTree(context.Background(), ws, dir, filepath.Join(ws, ".git", "index"), 20) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the copy hangs on a FIFO at a tracked path")
	}
	if got := strings.Join(copied(), " "); got != "a.txt" {
		t.Errorf("reached in the user's checkout: %s, want a.txt alone", got)
	}
	for p, want := range map[string]string{"d/e/deep.txt": "deep\n", "run.sh": "#!/bin/sh\n", ".gitignore": string(gi)} {
		if fi, err := os.Lstat(filepath.Join(dir, p)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("the copy's %s: %v, %v", p, fi, err)
		} else if b, _ := os.ReadFile(filepath.Join(dir, p)); string(b) != want {
			t.Errorf("the copy's %s is %q, want %q", p, b, want)
		}
	}
}

// A path git takes (relative to the top: under PATH_MAX) but that is
// longer than PATH_MAX once joined to the copy's directory is written as
// git's checkout writes it, relative: such a file in the user's checkout
// (one a direct-mode session can leave) failed every later start with
// "file name too long".
func TestCopyWorkTreeLongPath(t *testing.T) {
	ws := copyRepo(t, true)
	fd, err := unix.Open(ws, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	comp := strings.Repeat("x", 200)
	for range 20 { // 20*201 bytes of directories and a name of 60: below PATH_MAX (4096)
		if err := unix.Mkdirat(fd, comp, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, comp, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	leaf, err := unix.Openat(fd, strings.Repeat("l", 60), unix.O_WRONLY|unix.O_CREAT, 0o644)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(leaf, []byte("leaf\n"))
	unix.Close(leaf)
	c, dir := makeCopy(t, ws)
	checkCopyIsBase(t, ws, c, dir)
}
