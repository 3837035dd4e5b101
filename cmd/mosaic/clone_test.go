package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cloneRepo makes a repository in a fresh workspace with one commit, an
// uncommitted change (a.txt) and an untracked file (u.txt).
func cloneRepo(t *testing.T) string {
	t.Helper()
	ws := workspace(t)
	for _, args := range [][]string{{"init", "-q"}, {"config", "user.email", "u@example.com"}, {"config", "user.name", "u"}} {
		gitMust(t, ws, args...)
	}
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\n"), 0o644)
	gitMust(t, ws, "add", "a.txt")
	gitMust(t, ws, "commit", "-qm", "one")
	os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one\nuser's own\n"), 0o644)
	os.WriteFile(filepath.Join(ws, "u.txt"), []byte("untracked\n"), 0o644)
	return ws
}

func gitMust(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// cloneSession is a fresh session name whose finish state goes too.
func cloneSession(t *testing.T) string {
	name := sessionName(t)
	t.Cleanup(func() { os.RemoveAll(filepath.Join(stateRoot(), "sessions", name+"-finish")) })
	return name
}

type diffDoc struct {
	Summary struct {
		Files []struct {
			Path, Status string
			Added        int
		}
	}
	Refused string
	Patch   string
}

func diffOf(t *testing.T, name string) diffDoc {
	t.Helper()
	var d diffDoc
	r := mustMosaic(t, "diff", name, "--json")
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("diff --json: %v\n%s", err, r.stdout)
	}
	return d
}

func paths(d diffDoc) string {
	var p []string
	for _, f := range d.Summary.Files {
		p = append(p, f.Path)
	}
	return strings.Join(p, ",")
}

// TestCloneRunDiffApply: a clone-mode run starts from HEAD plus the
// user's uncommitted changes, never writes the checkout, and its change
// (the agent's commit and what it left) shows in mosaic diff only, until
// mosaic apply writes it as unstaged changes; rm refuses it before.
func TestCloneRunDiffApply(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	agent := `set -e
grep -q "user's own" a.txt && test -f u.txt
echo agent >> a.txt && echo new > added.txt
git -c user.name=a -c user.email=a@b commit -qam agent
echo left > left.txt
test ! -e ` + filepath.Join(ws, ".git", "mosaic-base-objects", "x") + `
! touch .git/mosaic-base-objects/x 2>/dev/null`
	r := mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", agent)
	if !strings.Contains(r.stderr, "3 files, +3 -0") {
		t.Errorf("run did not say what the session left:\n%s", r.stderr)
	}
	for _, f := range []string{"added.txt", "left.txt"} {
		if _, err := os.Lstat(filepath.Join(ws, f)); err == nil {
			t.Errorf("%s is in the checkout before apply", f)
		}
	}
	if got := paths(diffOf(t, name)); got != "a.txt,added.txt,left.txt" {
		t.Errorf("diff shows %s, want a.txt,added.txt,left.txt", got)
	}
	var st struct{ Clone struct{ Base, Parent string } }
	json.Unmarshal([]byte(mustMosaic(t, "status", name, "--json").stdout), &st)
	if st.Clone.Base == "" || st.Clone.Base == st.Clone.Parent {
		t.Errorf("status: base %q on parent %q, want a snapshot commit of the uncommitted changes", st.Clone.Base, st.Clone.Parent)
	}
	if !strings.Contains(mustMosaic(t, "status", name).stdout, "3 files, +3 -0, not applied") {
		t.Errorf("status does not show the pending change")
	}
	if r := mosaic(t, "rm", name, "--json"); r.code != 3 || !strings.Contains(r.stdout, "unapplied-changes") {
		t.Errorf("rm of an unapplied change: exit %d %s", r.code, r.stdout)
	}
	mustMosaic(t, "apply", name)
	b, _ := os.ReadFile(filepath.Join(ws, "a.txt"))
	if string(b) != "one\nuser's own\nagent\n" {
		t.Errorf("a.txt after apply: %q", b)
	}
	if s := gitMust(t, ws, "status", "--porcelain"); !strings.Contains(s, " M a.txt") || !strings.Contains(s, "?? added.txt") {
		t.Errorf("git status after apply:\n%s", s)
	}
	mustMosaic(t, "rm", name)
}

// TestCloneBranchAndConflict: two sessions on one repository at once;
// the second's change conflicts with the first's once applied and is
// refused with nothing changed and the file named; --branch makes
// mosaic/NAME of its commits instead.
func TestCloneBranchAndConflict(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	one, two := cloneSession(t), cloneSession(t)
	mustMosaic(t, "start", "--clone", "--name", one, "-w", ws, "--", "sh", "-c", "echo first > a.txt; sleep 30")
	mustMosaic(t, "run", "--clone", "--name", two, "-w", ws, "--", "sh", "-c", "echo second > a.txt")
	mustMosaic(t, "stop", one)
	mustMosaic(t, "apply", one)
	before := gitMust(t, ws, "status", "--porcelain")
	r := mosaic(t, "apply", two, "--json")
	if r.code != 3 || !strings.Contains(r.stdout, "change-conflict") || !strings.Contains(r.stdout, `a.txt`) {
		t.Fatalf("a conflicting apply: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	if after := gitMust(t, ws, "status", "--porcelain"); after != before {
		t.Errorf("a refused apply changed the checkout:\n%s\n%s", before, after)
	}
	if out := mustMosaic(t, "apply", "--branch", two).stdout; !strings.Contains(out, "your own uncommitted work at the session's start") {
		t.Errorf("apply --branch does not say the branch holds the user's own uncommitted work:\n%s", out)
	}
	if got := gitMust(t, ws, "show", "mosaic/"+two+":a.txt"); got != "second\n" {
		t.Errorf("branch mosaic/%s has a.txt %q", two, got)
	}
	// That commit is the user's, authored as the user (cloneRepo's u).
	if got := gitMust(t, ws, "log", "-1", "--format=%an %s", "mosaic/"+two+"~1"); !strings.HasPrefix(got, "u Your uncommitted changes") {
		t.Errorf("the base commit of the user's own work: %q", got)
	}
}

// TestCloneBaseRunningDiscardGC: --base starts the copy from a commit; a
// running session's diff is a snapshot; list shows the change; gc keeps the
// session until its change is discarded, and then rm needs no --force.
func TestCloneBaseRunningDiscardGC(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	gitMust(t, ws, "commit", "-qam", "two")
	name := cloneSession(t)
	mustMosaic(t, "start", "--base", "HEAD~1", "--name", name, "-w", ws, "--", "sh", "-c", `! grep -q "user's own" a.txt && test ! -e u.txt && echo b > b.txt; sleep 60`)
	eventually(t, 20*time.Second, "the running session's snapshot to hold b.txt", func() bool {
		return paths(diffOf(t, name)) == "b.txt"
	})
	if out := mustMosaic(t, "list").stdout; !strings.Contains(out, "CHANGE") || !strings.Contains(out, "clone: 1 file, +1 -0, not applied") {
		t.Errorf("list does not show the change:\n%s", out)
	}
	if r := mosaic(t, "apply", name, "--json"); r.code != 3 || !strings.Contains(r.stdout, "session-running") {
		t.Errorf("apply of a running session: exit %d %s", r.code, r.stdout)
	}
	mustMosaic(t, "stop", "--timeout", "1s", name)
	var gc struct {
		Kept []string `json:"kept_unapplied"`
	}
	json.Unmarshal([]byte(mustMosaic(t, "gc", "--json").stdout), &gc)
	if !strings.Contains(strings.Join(gc.Kept, ","), name) {
		t.Errorf("gc did not keep the unapplied session: %+v", gc)
	}
	mustMosaic(t, "discard", name)
	if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name, "clone")); err == nil {
		t.Error("discard left the copy")
	}
	mustMosaic(t, "rm", name)
	if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name+"-finish")); err == nil {
		t.Error("rm left the finish step's state")
	}
}

// TestApplyKilledMidway (issue 38): mosaic apply killed -9 in git apply's
// first phase (paused once its journal is written; the test then deletes
// a.txt as git does before writing it) leaves a checkout the next apply
// puts back first, saying so in one line, then applies cleanly: the
// user's uncommitted line in a.txt survives.
func TestApplyKilledMidway(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "echo agent >> a.txt && echo new > added.txt")
	cmd, _, _ := paused(t, "apply-journaled", nil, "apply", name)
	os.Remove(filepath.Join(ws, "a.txt"))
	cmd.Process.Kill()
	cmd.Wait()
	// The next command, even one that only reads (status), rolls back.
	st := mustMosaic(t, "status", name)
	if !strings.Contains(st.stdout, "not applied") {
		t.Errorf("status after the killed apply does not say not applied")
	}
	if !strings.Contains(st.stderr, "apply was interrupted; your checkout is as it was before it") {
		t.Errorf("status after a killed apply did not say it rolled back:\n%s", st.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\nuser's own\n" {
		t.Errorf("a.txt after status rolled the killed apply back: %q", b)
	}
	mustMosaic(t, "apply", name)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\nuser's own\nagent\n" {
		t.Errorf("a.txt after the second apply: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(stateRoot(), "sessions", name, ".apply-journal")); err == nil {
		t.Error("the journal outlived a clean apply")
	}
	mustMosaic(t, "rm", name)
}

// TestFinishLogKilled (issue 40): a diff killed -9 once its finish step's
// output file is made (paused there) leaves no file in the state root; on
// a filesystem without O_TMPFILE (MOSAIC_TEST_FINISH_NAMED: the file is
// named a moment, locked), the next diff of the session sweeps the one a
// killed diff left, and never the one a live diff holds (paused there).
func TestFinishLogKilled(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	// Running: each diff snapshots it anew (a finish step).
	mustMosaic(t, "start", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "echo agent >> a.txt; exec sleep 300")
	left := func() []string {
		m, _ := filepath.Glob(filepath.Join(stateRoot(), ".finish-"+name+"-*"))
		return m
	}
	killed := func(env ...string) {
		cmd, _, _ := paused(t, "finish-log-made", env, "diff", name)
		cmd.Process.Kill()
		cmd.Wait()
	}
	eventually(t, 20*time.Second, "the agent's change", func() bool { return strings.Contains(mustMosaic(t, "diff", name).stdout, "+agent") })
	killed()
	if l := left(); len(l) != 0 {
		t.Errorf("a diff killed once its finish file was made left %v", l)
	}
	killed("MOSAIC_TEST_FINISH_NAMED=1")
	if len(left()) != 1 {
		t.Fatalf("the named fallback, killed at its pause, left %v: want its file, or this test proves nothing", left())
	}
	mustMosaic(t, "diff", name)
	if l := left(); len(l) != 0 {
		t.Errorf("the next diff left the file of the killed one: %v", l)
	}
	live, goOn, out := paused(t, "finish-log-made", []string{"MOSAIC_TEST_FINISH_NAMED=1"}, "diff", name)
	if !strings.Contains(mustMosaic(t, "diff", name).stdout, "+agent") {
		t.Error("diff beside a paused one does not show the change")
	}
	if l := left(); len(l) != 1 {
		t.Errorf("after the next diff, the state root holds %v: want only the live diff's file", l)
	}
	goOn()
	if err := live.Wait(); err != nil || !strings.Contains(out.String(), "+agent") {
		t.Errorf("the diff paused beside another: %v\n%s", err, out)
	}
	if l := left(); len(l) != 0 {
		t.Errorf("after both diffs, the state root holds %v", l)
	}
	mustMosaic(t, "stop", name)
	mustMosaic(t, "discard", name)
	mustMosaic(t, "rm", name)
}

// TestLargeChangeKept (issue 38): an agent that writes a 70 MB file beside
// a one-line edit makes a patch over apply's bound. Before, diff said "0
// files, +0 -0" and "no change", and rm without --force deleted it; now
// diff, list and status say its size and the way out, rm keeps it, apply
// refuses naming --branch, and apply --branch makes the branch.
func TestLargeChangeKept(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c",
		"echo agent >> a.txt && head -c 70000000 /dev/urandom > big.bin")
	var d diffDoc
	json.Unmarshal([]byte(mustMosaic(t, "diff", "--stat", "--json", name).stdout), &d)
	if got := paths(d); got != "a.txt,big.bin" || !strings.Contains(d.Refused, "--branch") {
		t.Errorf("diff of a change over the bound: files %q, refused %q", got, d.Refused)
	}
	for _, args := range [][]string{{"list", "--all"}, {"status", name}} {
		if out := mustMosaic(t, args...).stdout; !strings.Contains(out, "over apply's bound") {
			t.Errorf("mosaic %s does not say the change is over apply's bound:\n%s", args[0], out)
		}
	}
	if r := mosaic(t, "rm", name); r.code == 0 {
		t.Errorf("rm without --force removed a large unapplied change")
	}
	if r := mosaic(t, "apply", name); r.code != 3 || !strings.Contains(r.stderr, "apply --branch") {
		t.Errorf("apply of a change over the bound: exit %d %s", r.code, r.stderr)
	}
	mustMosaic(t, "apply", "--branch", "big", name)
	if got := gitMust(t, ws, "ls-tree", "--name-only", "big"); !strings.Contains(got, "big.bin") {
		t.Errorf("the branch lacks big.bin: %s", got)
	}
	mustMosaic(t, "rm", name)
}

// TestChangeKnownAtEnd (issue 38): a session stopped while its agent
// works has its change in status and list --all with no diff first (before,
// both said "not snapshotted yet").
func TestChangeKnownAtEnd(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "start", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", "echo b > b.txt; sleep 60")
	eventually(t, 20*time.Second, "the agent to write b.txt", func() bool {
		out, _ := exec.Command("find", filepath.Join(stateRoot(), "sessions", name, "clone"), "-maxdepth", "1", "-name", "b.txt").Output()
		return len(out) > 0
	})
	mustMosaic(t, "stop", "--timeout", "1s", name)
	if out := mustMosaic(t, "status", name).stdout; !strings.Contains(out, "1 file, +1 -0, not applied") {
		t.Errorf("status of a stopped session does not show its change:\n%s", out)
	}
	if out := mustMosaic(t, "list", "--all").stdout; !strings.Contains(out, "1 file, +1 -0, not applied") {
		t.Errorf("list --all does not show the stopped session's change:\n%s", out)
	}
	mustMosaic(t, "stop", name)
	mustMosaic(t, "discard", name)
	mustMosaic(t, "rm", name)
}

// TestFinishStepNotBlockedByCopy (issue 40): what a session leaves in its
// copy's repository cannot make the finish step fail and so block the
// review of its change: a reference-transaction hook that exits 1, commit
// signing on, a required clean filter that fails on every file, a stale
// lock on the snapshot's ref and reflogs that cannot be written, a config
// value git refuses to read and an index that is garbage. Before, the hook
// alone made diff and apply fail (only discard worked), and so did the
// config or the index (git exits 128 on each) until the step used a
// repository of its own.
func TestFinishStepNotBlockedByCopy(t *testing.T) {
	needRig(t)
	ws := cloneRepo(t)
	name := cloneSession(t)
	mustMosaic(t, "run", "--clone", "--name", name, "-w", ws, "--", "sh", "-c", `set -e
echo agent >> a.txt
printf '#!/bin/sh\nexit 1\n' > .git/hooks/reference-transaction && chmod +x .git/hooks/reference-transaction
git config commit.gpgSign true
git config filter.bad.clean false && git config filter.bad.required true
echo '* filter=bad' > .gitattributes
mkdir -p .git/refs/mosaic .git/logs/refs && touch .git/refs/mosaic/snapshot.lock && echo x > .git/logs/refs/mosaic
git config core.autocrlf bogus && echo garbage > .git/index`)
	var d diffDoc
	r := mosaic(t, "diff", "--json", name)
	json.Unmarshal([]byte(r.stdout), &d)
	if r.code != 0 || paths(d) != ".gitattributes,a.txt" || !strings.Contains(d.Patch, "+agent") {
		t.Fatalf("diff of a copy with a failing hook, signing and filter: exit %d, files %q\n%s", r.code, paths(d), r.stderr)
	}
	mustMosaic(t, "apply", name)
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "one\nuser's own\nagent\n" {
		t.Errorf("a.txt after apply: %q", b)
	}
	mustMosaic(t, "rm", name)
}

// TestCloneScope: run --scope is in clone mode by default too (bwrap binds
// the copy at the workspace's path, the user's objects read-only inside
// it, there being no systemd layer): the checkout is not written, the
// change shows in diff and apply writes it; an unnamed scope run that
// changed nothing leaves no state behind. First shown with --direct,
// where the same command writes the checkout.
func TestCloneScope(t *testing.T) {
	needRig(t)
	agent := `set -e; grep -q "user's own" a.txt; echo agent >> a.txt; echo new > n.txt; ! touch .git/mosaic-base-objects/x 2>/dev/null`
	direct := cloneRepo(t)
	mustMosaic(t, "run", "--scope", "--direct", "-w", direct, "--", "sh", "-c", agent)
	if _, err := os.Stat(filepath.Join(direct, "n.txt")); err != nil {
		t.Fatalf("--direct --scope did not write the checkout (the weak case): %v", err)
	}

	ws := cloneRepo(t)
	name := cloneSession(t)
	r := mustMosaic(t, "run", "--scope", "--name", name, "-w", ws, "--", "sh", "-c", agent)
	if !strings.Contains(r.stderr, "left 2 files") {
		t.Errorf("run --scope did not say what the session left:\n%s", r.stderr)
	}
	if _, err := os.Lstat(filepath.Join(ws, "n.txt")); err == nil {
		t.Fatal("a --scope session wrote the checkout in clone mode")
	}
	if got := paths(diffOf(t, name)); got != "a.txt,n.txt" {
		t.Errorf("diff shows %s, want a.txt,n.txt", got)
	}
	mustMosaic(t, "apply", name)
	if b, _ := os.ReadFile(filepath.Join(ws, "n.txt")); string(b) != "new\n" {
		t.Errorf("n.txt after apply: %q", b)
	}
	mustMosaic(t, "rm", name)

	before := sessionEntries()
	mustMosaic(t, "run", "--scope", "-w", ws, "--", "true")
	if after := sessionEntries(); len(after) > len(before) {
		t.Errorf("an unnamed scope run that changed nothing left state: %v before, %v after", before, after)
	}
}
