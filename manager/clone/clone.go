// Package clone is the host's side of clone mode (mosaic start --clone):
// making a session's own copy of the user's repository before the session
// starts (git runs in the user's checkout and in a copy no session has
// touched yet), and writing a finished change into the user's checkout
// after it (git runs in the user's checkout, and in a scratch repository of
// mosaic's own, on data patchcheck accepted). It never runs git in a copy a
// session has had: git reads a repository's config and runs what it names.
package clone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"mosaic/internal/errcode"
	"mosaic/units"
)

// parallelCheckout is the setting of every checkout mosaic has git make
// (checkout, checkout-index): a worker per CPU, about twice as fast as
// git's default of one.
var parallelCheckout = "checkout.workers=" + strconv.Itoa(runtime.NumCPU())

// gitTimeout bounds each git mosaic runs on the host.
const gitTimeout = 10 * time.Minute

// identity is who commits what mosaic commits (the snapshot of the
// uncommitted changes): the user may have none configured.
var identity = []string{
	"GIT_AUTHOR_NAME=mosaic", "GIT_AUTHOR_EMAIL=mosaic@localhost",
	"GIT_COMMITTER_NAME=mosaic", "GIT_COMMITTER_EMAIL=mosaic@localhost",
}

// git runs git in dir with env added to mosaic's, and returns its output
// trimmed; an error carries git's own words.
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return gitWith(ctx, dir, env, "", args...)
}

// gitIn is git with stdin as its input.
func gitIn(ctx context.Context, dir, stdin string, args ...string) (string, error) {
	return gitWith(ctx, dir, nil, stdin, args...)
}

func gitWith(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	argv := append([]string{"-C", dir}, args...)
	if strings.HasPrefix(dir, PinnedPrefix) { // see Pinned: git starts in it
		argv = args
	}
	cmd := exec.CommandContext(ctx, "git", argv...)
	if len(argv) == len(args) {
		cmd.Dir = dir
	}
	cmd.Env = append(os.Environ(), append([]string{"GIT_TERMINAL_PROMPT=0"}, env...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = err.Error()
		}
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		return "", &gitError{msg: fmt.Sprintf("git %s: %s", args[0], msg), interrupted: interruptedBy(cmd)}
	}
	return strings.TrimSpace(out.String()), nil
}

// ErrInterrupted is what an error of Make is (errors.Is) when a git it ran
// was ended by SIGINT, SIGTERM or SIGHUP: a Ctrl-C in the terminal reaches
// mosaic's own group, git with it. Such a start is given up, not retried.
var ErrInterrupted = errors.New("git was interrupted")

// gitError is a git's failure, in git's own words.
type gitError struct {
	msg         string
	interrupted bool
}

func (e *gitError) Error() string { return e.msg }

// Is makes an interrupted git's error ErrInterrupted.
func (e *gitError) Is(target error) bool { return e.interrupted && target == ErrInterrupted }

// interruptedBy reports whether cmd, which failed, was ended by SIGINT,
// SIGTERM or SIGHUP.
func interruptedBy(cmd *exec.Cmd) bool {
	if cmd.ProcessState == nil { // it did not start
		return false
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP:
		return true
	}
	return false
}

// Make makes the session's copy of the repository at ws in c.Dir, which
// must not exist, and returns c with its Base and Parent. Without c.Ref the
// copy starts from what the user sees: HEAD, plus the working tree's
// uncommitted changes (tracked and untracked, not ignored) as one commit on
// top, made with an index of its own (the user's index is not touched) into
// the copy's own object store. The copy is a `git clone --shared` (it
// borrows the user's objects: see units.ObjectsMount) checked out with
// parallel workers; its alternates then name where the session sees the
// user's objects. With spare, c.Dir holds a spare just taken (TakeSpare):
// it is brought up to date and checked out at the base, which writes only
// the files that differ. Each submodule the user initialised is then
// copied the same way, a repository of its own in the copy (makeSubs).
func Make(ctx context.Context, ws string, c units.Clone, spare bool) (units.Clone, error) {
	fail := func(err error) (units.Clone, error) {
		os.RemoveAll(c.Dir)
		return c, errcode.CloneFailed.New("cannot make the session's copy of %s: %w", ws, err)
	}
	if c.Kind == units.ClonePlain {
		return makePlain(ctx, ws, c)
	}
	rev := "HEAD"
	if c.Ref != "" {
		rev = c.Ref
	}
	index, parent := headOf(ctx, ws, rev)
	if parent == "" && c.Ref != "" {
		return c, errcode.BadClone.New("--base %s is not a commit of %s: give a branch, tag or commit id", c.Ref, ws)
	}
	c.Parent, c.Base = parent, parent // no parent: an unborn branch, the uncommitted files are the base
	// What can go at once does: the branch's name, and for a spare the
	// refs beside the snapshot (which writes only objects); a clone must
	// be there before the snapshot writes into it.
	var branch string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); branch, _ = git(ctx, ws, nil, "symbolic-ref", "-q", "--short", "HEAD") }()
	var err, refsErr error
	if spare {
		wg.Add(1)
		go func() { defer wg.Done(); refsErr = resetSpare(ctx, ws, c) }()
	} else {
		_, err = git(ctx, ws, nil, "clone", "-q", "--shared", "--no-checkout", ".", c.Dir)
	}
	gitDir := filepath.Join(c.Dir, ".git")
	snapIndex := filepath.Join(gitDir, "mosaic-snapshot-index")
	defer os.Remove(snapIndex)
	if err == nil && c.Ref == "" {
		c.Base, err = snapshot(ctx, ws, gitDir, snapIndex, index, parent, c.Objects)
	}
	wg.Wait()
	if err == nil {
		err = refsErr
	}
	if err != nil {
		return fail(err)
	}
	if err := checkoutBase(ctx, ws, c, branch, spare, snapIndex); err != nil {
		return fail(err)
	}
	// gc.auto 0 (no gc of the copy in the session's git), written
	// without starting a git for it: the copy's config is clone's.
	if err := appendFile(filepath.Join(gitDir, "config"), "[gc]\n\tauto = 0\n"); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(filepath.Join(gitDir, units.ObjectsMount), 0o700); err != nil && !(spare && os.IsExist(err)) {
		return fail(err)
	}
	if c.Subs, err = makeSubs(ctx, ws, c); err != nil {
		if errcode.Of(err).Code == errcode.BadWorkspace.Name { // a refusal, not a failure
			os.RemoveAll(c.Dir)
			return c, err
		}
		return fail(err)
	}
	if err := NameObjects(c, ws); err != nil {
		return fail(err)
	}
	return c, nil
}

// checkoutBase checks the copy at c.Dir out at c.Base, on branch (none:
// detached). A new copy of the working tree (no spare, no --base) is
// taken from the user's files where they are the base's (copyWorkTree,
// from the snapshot's index at snapIndex); anything else
// is git's checkout, which for a spare writes only what differs.
func checkoutBase(ctx context.Context, ws string, c units.Clone, branch string, spare bool, snapIndex string) error {
	if !spare && c.Ref == "" {
		head := make(chan error, 1)
		go func() { head <- setHead(ctx, c.Dir, branch, c.Base) }()
		err := copyWorkTree(ctx, ws, c.Dir, snapIndex, oidLength(c.Base))
		// A Ctrl-C that ended setHead's git gives the start up, not a
		// checkout by git instead.
		if herr := <-head; err == nil || errors.Is(herr, ErrInterrupted) {
			err = herr
		}
		if err != errIndexUnusual {
			return err
		}
	}
	if c.Ref != "" || branch == "" {
		_, err := git(ctx, c.Dir, nil, "-c", parallelCheckout, "checkout", "-q", "--detach", c.Base)
		return err
	}
	_, err := git(ctx, c.Dir, nil, "-c", parallelCheckout, "checkout", "-q", "--no-track", "-B", branch, c.Base)
	return err
}

// setHead points the copy's HEAD at base, as checkout -B branch (or
// --detach, without a branch) does, the working tree aside.
func setHead(ctx context.Context, dir, branch, base string) error {
	if branch == "" {
		_, err := git(ctx, dir, nil, "update-ref", "--no-deref", "HEAD", base)
		return err
	}
	if _, err := git(ctx, dir, nil, "update-ref", "refs/heads/"+branch, base); err != nil {
		return err
	}
	_, err := git(ctx, dir, nil, "symbolic-ref", "HEAD", "refs/heads/"+branch)
	return err
}

// headOf reads, in one git, the index file of the repository at ws (a
// linked worktree's is its own) and the commit rev names; "" for none (an
// unborn branch, or a rev that names no commit).
func headOf(ctx context.Context, ws, rev string) (index, commit string) {
	out, err := git(ctx, ws, nil, "rev-parse", "--git-path", "index", "-q", "--verify", "--end-of-options", rev+"^{commit}")
	index, commit, _ = strings.Cut(out, "\n")
	if err != nil {
		// No commit (an unborn branch): that git's output is lost with
		// it, and a linked worktree's index is not .git/index, so the
		// path is asked again alone.
		index, _ = git(ctx, ws, nil, "rev-parse", "--git-path", "index")
	}
	if index == "" {
		index = filepath.Join(".git", "index")
	}
	if !filepath.IsAbs(index) {
		index = filepath.Join(ws, index)
	}
	return index, strings.TrimSpace(commit)
}

// snapshot commits the working tree of ws as it is (the user's index,
// userIndex, plus every change git add -A sees) on top of parent, into
// the object store of the copy at gitDir, and returns the commit; parent
// itself when nothing is uncommitted. Its index is left at index: the
// base's entries, with the stat of the user's files they were read from
// (copyWorkTree).
func snapshot(ctx context.Context, ws, gitDir, index, userIndex, parent, objects string) (string, error) {
	if b, err := os.ReadFile(userIndex); err == nil {
		if err := os.WriteFile(index, b, 0o600); err != nil {
			return "", err
		}
	}
	env := []string{"GIT_INDEX_FILE=" + index, "GIT_OBJECT_DIRECTORY=" + filepath.Join(gitDir, "objects"),
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + objects}
	// Unsplit: a split index's git add writes its shared index beside
	// the user's (their .git, where the link names it), and the copy
	// takes apart no split index (copyWorkTree).
	if _, err := git(ctx, ws, env, "-c", "core.splitIndex=false", "add", "-A"); err != nil {
		return "", err
	}
	tree, err := git(ctx, ws, env, "write-tree")
	if err != nil {
		return "", err
	}
	if parent == "" { // an unborn branch
		return git(ctx, ws, append(env, identity...), "commit-tree", tree, "-m", "mosaic: the uncommitted changes at the session's start (no commit yet)")
	}
	if head, err := git(ctx, ws, nil, "rev-parse", parent+"^{tree}"); err == nil && head == tree {
		return parent, nil
	}
	// Authored as the user (your work, not the agent's), by git's own
	// identity of ws; mosaic's when the user has none configured.
	who := identity
	if _, err := git(ctx, ws, nil, "var", "GIT_AUTHOR_IDENT"); err == nil {
		who = nil
	}
	return git(ctx, ws, append(env, who...), "commit-tree", tree, "-p", parent, "-m", "Your uncommitted changes at the start of a mosaic session (yours, not the agent's)")
}

// appendFile appends text to the file at path, which must exist.
func appendFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
