package clone

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"mosaic/internal/errcode"
	"mosaic/internal/testhook"
	"mosaic/manager/clone/patchcheck"
)

// refused is the refusal of a change patchcheck (or a check here) found.
func refused(name string, err error) error {
	return errcode.ChangeRefused.New("session %s's change is refused, nothing was changed: %w", name, err)
}

// Apply writes a change patchcheck accepted (s is its summary) into the
// working tree of the repository at ws as unstaged changes, all or nothing
// (git apply checks every hunk before it writes any): a path that is
// reached through a symlink in the checkout is refused first, and a change
// that does not apply names its files. patch is written to a file of
// mosaic's own (scratch) first, so that what git applies is what was checked,
// and every file it changes is copied into scratch's journal before git
// writes (applyJournaled): the caller records the change as applied, then
// calls EndJournal; an apply killed before that is undone by Recover.
func Apply(ctx context.Context, name, ws string, patch []byte, s patchcheck.Summary, scratch string) error {
	if err := notThroughSymlinks(ws, s); err != nil {
		return refused(name, err)
	}
	if len(s.Files) == 0 {
		return nil
	}
	f, err := os.CreateTemp(scratch, ".patch-"+name+"-*")
	if err != nil {
		return errcode.StateDir.New("cannot write the change of %s: %w", name, err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(patch)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errcode.StateDir.New("cannot write the change of %s: %w", name, err)
	}
	if out, err := gitAll(ctx, ws, "apply", "--check", "--whitespace=nowarn", f.Name()); err != nil {
		return errcode.ChangeConflict.New("session %s's change does not apply to %s as it is now, nothing was changed: conflicts in %s (commit or stash your own changes there, or use `mosaic apply --branch`)", name, ws, strings.Join(conflicts(out), ", "))
	}
	return applyJournaled(ctx, name, ws, f.Name(), s, filepath.Join(scratch, JournalName))
}

// applyJournaled runs git apply of the patch file patch in ws once every
// path it changes is copied into the journal (writeJournal): git apply
// deletes the files it changes before it writes them anew, so a kill or
// a full disk between the two would otherwise leave them gone. On a
// failure the journal puts them back; on success it is kept until the
// record says applied (the caller then calls EndJournal).
func applyJournaled(ctx context.Context, name, ws, patch string, s patchcheck.Summary, journal string) error {
	if err := writeJournal(journal, ws, s); err != nil {
		os.RemoveAll(journal)
		return errcode.StateDir.New("cannot keep a copy of what session %s's change replaces, nothing was changed: %w", name, err)
	}
	testhook.Call("clone.apply", "journaled")
	testhook.Pause("apply-journaled")
	out, err := gitAll(ctx, ws, "apply", "--whitespace=nowarn", patch)
	if err == nil {
		testhook.Call("clone.apply", "applied")
		testhook.Pause("apply-applied")
		return nil
	}
	if _, rerr := Recover(journal, ws, false); rerr != nil {
		return errcode.ChangeConflict.New("session %s's change did not apply to %s (%s), and putting your files back failed: %w; the next `mosaic apply %s` tries again", name, ws, firstLine(out), rerr, name)
	}
	return errcode.ChangeConflict.New("session %s's change did not apply to %s, nothing was changed: %s", name, ws, firstLine(out))
}

// EndJournal removes the journal of an apply that succeeded, once its
// record says so (scratch is what Apply was given).
func EndJournal(scratch string) error {
	return os.RemoveAll(filepath.Join(scratch, JournalName))
}

// gitAll runs git in dir and returns its stderr with the error.
func gitAll(ctx context.Context, dir string, args ...string) (string, error) {
	_, err := git(ctx, dir, nil, args...)
	if err != nil {
		return err.Error(), err
	}
	return "", nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// conflicts are the files git apply's errors name.
func conflicts(out string) []string {
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		i := strings.Index(l, "error: ")
		if i < 0 {
			continue
		}
		l = l[i+len("error: "):]
		var f string
		if rest, ok := strings.CutPrefix(l, "patch failed: "); ok {
			if j := strings.LastIndexByte(rest, ':'); j > 0 {
				f = rest[:j]
			}
		} else if j := strings.Index(l, ": "); j > 0 {
			f = l[:j]
		}
		if f != "" {
			seen[f] = true
		}
	}
	var names []string
	for f := range seen {
		names = append(names, fmt.Sprintf("%q", f))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return []string{"(git said: " + firstLine(out) + ")"}
	}
	return names
}

// notThroughSymlinks refuses a change that reaches a file through a
// directory that is a symlink in the checkout (git apply refuses that too:
// this says which), and one that changes a symlink of the checkout without
// saying its mode: git apply keeps the mode the file has there, so the
// change would make a symlink whose target patchcheck never read as one.
func notThroughSymlinks(ws string, s patchcheck.Summary) error {
	for _, f := range s.Files {
		if src := f.OldPath; f.Path != "" && f.NewMode == "" {
			if src == "" {
				src = f.Path
			}
			if fi, err := os.Lstat(filepath.Join(ws, src)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				return &patchcheck.Refusal{Path: f.Path, Why: fmt.Sprintf("changes %s, a symlink in your checkout, without saying its mode", src)}
			}
		}
		for _, p := range []string{f.Path, f.OldPath} {
			for d := path.Dir(p); p != "" && d != "."; d = path.Dir(d) {
				if fi, err := os.Lstat(filepath.Join(ws, d)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
					return &patchcheck.Refusal{Path: p, Why: fmt.Sprintf("written through %s, a symlink in your checkout", d)}
				}
			}
		}
	}
	return nil
}

// fsckStrict are git's object checks that mosaic makes errors, besides
// those that already are, for what comes from a session's bundle.
var fsckStrict = []string{
	"-c", "transfer.fsckObjects=true",
	"-c", "fetch.fsck.hasDotgit=error", "-c", "fetch.fsck.hasDot=error", "-c", "fetch.fsck.hasDotdot=error",
	"-c", "fetch.fsck.fullPathname=error", "-c", "fetch.fsck.emptyName=error", "-c", "fetch.fsck.badFilemode=error",
	"-c", "fetch.fsck.zeroPaddedFilemode=error",
}

// maxCommits bounds the commits a branch from a bundle may bring.
const maxCommits = 1000

// ApplyBranch makes branch in the repository at ws from a finish step's
// bundle: its header must hold only the snapshot's ref at head, with every
// prerequisite a commit the repository has; it is fetched, with git's
// object checks on, into a scratch repository of mosaic's own (borrowing
// ws's objects), the paths every commit after base changes are checked as
// apply checks a patch, the branch's files are compared with shown (the
// patch mosaic diff showed; nil for a change over its bound, shown only
// by size), and only then is the branch fetched into ws. A branch that
// exists is left alone (a refusal).
func ApplyBranch(ctx context.Context, name, ws string, bundle []byte, head, base, branch, scratch string, shown []byte) error {
	h, err := patchcheck.ParseBundleHeader(bundle)
	if err == nil {
		err = patchcheck.CheckBundle(h, head)
	}
	if err != nil {
		return refused(name, err)
	}
	if out, err := git(ctx, ws, nil, "check-ref-format", "--branch", branch); err != nil || out != branch {
		return errcode.BadClone.New("%q is not a branch name git takes", branch)
	}
	if _, err := git(ctx, ws, nil, "rev-parse", "-q", "--verify", "refs/heads/"+branch); err == nil {
		return errcode.ChangeConflict.New("branch %s exists in %s, nothing was changed: give another with --branch NAME, or delete it", branch, ws)
	}
	for _, p := range h.Prereqs {
		if _, err := git(ctx, ws, nil, "cat-file", "-e", p+"^{commit}"); err != nil {
			return refused(name, fmt.Errorf("the bundle needs commit %s, which %s does not have", p, ws))
		}
	}
	// The repository's own object directory, as git finds it: ws may be
	// a linked worktree (its .git a file) or a directory below the top.
	objects, err := git(ctx, ws, nil, "rev-parse", "--path-format=absolute", "--git-path", "objects")
	if err != nil {
		return errcode.CloneFailed.New("cannot find the object directory of %s: %w", ws, err)
	}
	os.RemoveAll(scratch)
	defer os.RemoveAll(scratch)
	if _, err := git(ctx, filepath.Dir(scratch), nil, "init", "-q", "--bare", "--template=", scratch); err != nil {
		return errcode.CloneFailed.New("cannot make a scratch repository: %w", err)
	}
	alt := filepath.Join(scratch, "objects", "info", "alternates")
	if err := os.MkdirAll(filepath.Dir(alt), 0o700); err != nil {
		return errcode.CloneFailed.New("scratch repository: %w", err)
	}
	if err := os.WriteFile(alt, []byte(objects+"\n"), 0o600); err != nil {
		return errcode.CloneFailed.New("scratch repository: %w", err)
	}
	bpath := filepath.Join(scratch, "change.bundle")
	if err := os.WriteFile(bpath, bundle, 0o600); err != nil {
		return errcode.CloneFailed.New("scratch repository: %w", err)
	}
	fetch := append(append([]string{}, fsckStrict...), "fetch", "-q", "--no-tags", "--no-write-fetch-head", bpath, patchcheck.SnapshotRef+":refs/heads/change")
	if _, err := git(ctx, scratch, nil, fetch...); err != nil {
		return refused(name, fmt.Errorf("the bundle does not pass git's checks: %w", err))
	}
	if err := checkCommits(ctx, scratch, append(h.Prereqs, base)); err != nil {
		return refused(name, err)
	}
	if err := sameAsShown(ctx, scratch, base, shown); err != nil {
		return refused(name, err)
	}
	fetch = append(append([]string{}, fsckStrict...), "fetch", "-q", "--no-tags", "--no-write-fetch-head", scratch, "refs/heads/change:refs/heads/"+branch)
	if _, err := git(ctx, ws, nil, fetch...); err != nil {
		return errcode.CloneFailed.New("cannot make branch %s in %s: %w", branch, ws, err)
	}
	return nil
}

// sameAsShown compares the tree the scratch repository's branch ends
// with and the tree of base with the patch mosaic diff showed applied
// (nil: nothing to compare, the change was over the patch's bound): the
// finish step ran in the session, where a replace ref or a graft can make
// git's diff show other files than the commits hold.
func sameAsShown(ctx context.Context, scratch, base string, shown []byte) error {
	if shown == nil {
		return nil
	}
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(scratch, "shown-index"), "GIT_NO_REPLACE_OBJECTS=1"}
	if _, err := git(ctx, scratch, env, "read-tree", base+"^{tree}"); err != nil {
		return err
	}
	if len(shown) > 0 {
		pf := filepath.Join(scratch, "shown.patch")
		if err := os.WriteFile(pf, shown, 0o600); err != nil {
			return err
		}
		if _, err := git(ctx, scratch, env, "apply", "--cached", "--whitespace=nowarn", pf); err != nil {
			return fmt.Errorf("the change mosaic diff showed does not apply to the branch's base: %w", err)
		}
	}
	want, err := git(ctx, scratch, env, "write-tree")
	if err != nil {
		return err
	}
	got, err := git(ctx, scratch, env, "rev-parse", "refs/heads/change^{tree}")
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("the branch's files are not the change mosaic diff showed (a replace ref or a graft in the session's repository can do that)")
	}
	return nil
}

// checkCommits checks each commit the scratch repository's branch brings
// beyond prereqs (the user's own commits, and the snapshot of the user's
// uncommitted changes the copy started from): the paths each changes, as
// patchcheck checks a patch's.
func checkCommits(ctx context.Context, scratch string, prereqs []string) error {
	args := []string{"rev-list", "refs/heads/change"}
	for _, p := range prereqs {
		args = append(args, "^"+p)
	}
	list, err := git(ctx, scratch, nil, args...)
	if err != nil {
		return err
	}
	commits := strings.Fields(list)
	if len(commits) > maxCommits {
		return fmt.Errorf("the branch brings %d commits, over the bound of %d", len(commits), maxCommits)
	}
	for _, c := range commits {
		out, err := git(ctx, scratch, nil, "diff-tree", "-r", "-z", "--no-renames", "-m", "--root", "--no-commit-id", c)
		if err != nil {
			return err
		}
		if err := checkEntries(ctx, scratch, rawEntries(out, true)); err != nil {
			return fmt.Errorf("commit %s: %w", c, err)
		}
	}
	return nil
}

// entry is one path of a tree with its mode and object.
type entry struct{ mode, id, path string }

// rawEntries reads git's -z output: diff-tree's raw (":old new oldid newid
// status\0path\0") or ls-tree's ("mode type id\tpath\0").
func rawEntries(out string, diff bool) []entry {
	var es []entry
	parts := strings.Split(out, "\x00")
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		if diff {
			f := strings.Fields(p)
			if len(f) != 5 || !strings.HasPrefix(f[0], ":") || i+1 >= len(parts) {
				continue
			}
			es = append(es, entry{mode: f[1], id: f[3], path: parts[i+1]})
			i++
			continue
		}
		meta, pth, ok := strings.Cut(p, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 {
			es = append(es, entry{mode: f[0], id: f[2], path: pth})
		}
	}
	return es
}

// checkEntries checks entries as patchcheck.Check checks a patch's files,
// reading each symlink's target.
func checkEntries(ctx context.Context, scratch string, es []entry) error {
	var s patchcheck.Summary
	for _, e := range es {
		if e.mode == "000000" { // deleted
			s.Files = append(s.Files, patchcheck.File{OldPath: e.path})
			continue
		}
		f := patchcheck.File{Path: e.path, NewMode: e.mode}
		if e.mode == "120000" {
			t, err := git(ctx, scratch, nil, "cat-file", "blob", e.id)
			if err != nil {
				return err
			}
			f.Target = t
		}
		s.Files = append(s.Files, f)
	}
	return patchcheck.Check(s)
}
