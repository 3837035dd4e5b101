package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"mosaic/manager/clone"
)

// cloneSizes are the repositories clone mode is measured on: files, and
// bytes a file (the 100,000-file one smaller, so that the run stays short:
// 200 MB each).
var cloneSizes = []struct{ files, size int }{{1000, 20 << 10}, {10000, 20 << 10}, {100000, 2 << 10}}

// makeRepo makes a repository of n files of size bytes (half random, half
// text) in dir, committed, with git fast-import (no working tree is
// written twice), then checked out.
func makeRepo(dir string, n, size int) error {
	if err := runCmd([]string{"git", "init", "-q", dir}); err != nil {
		return err
	}
	cmd := exec.Command("git", "-C", dir, "fast-import", "--quiet")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	buf := make([]byte, size)
	fmt.Fprintf(in, "commit refs/heads/main\ncommitter bench <b@b> 0 +0000\ndata 4\ninit\n")
	for i := 0; i < n; i++ {
		f, _ := os.Open("/dev/urandom")
		f.Read(buf[:size/2])
		f.Close()
		copy(buf[size/2:], strings.Repeat(fmt.Sprintf("line %d\n", i), size/2/8+1))
		fmt.Fprintf(in, "M 100644 inline d%03d/f%06d.txt\ndata %d\n", i%100, i, size)
		in.Write(buf)
		fmt.Fprintln(in)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		return err
	}
	return runCmd([]string{"git", "-C", dir, "-c", "checkout.workers=0", "checkout", "-q", "-f", "main"})
}

// cloneMode measures clone mode against direct mode and against doing
// the same by hand, at each of cloneSizes: a start, `git clone --shared` +
// checkout, `git worktree add`; on the 10,000-file repository also the
// finish step and mosaic diff of a 100-file change.
func (b *bench) cloneMode(ctx context.Context, r *Report, only int) error {
	for _, sz := range cloneSizes {
		if only != 0 && sz.files != only {
			continue
		}
		n := 3
		if sz.files >= 100000 {
			n = 1 // each copy takes seconds: one run, no warm-up (the page cache is warm from making it)
		}
		progress("clone mode: making a repository of %d files", sz.files)
		repo := filepath.Join(b.ws, fmt.Sprintf("repo-%d", sz.files))
		if err := makeRepo(repo, sz.files, sz.size); err != nil {
			return err
		}
		label := fmt.Sprintf("%dk files, %d MB", sz.files/1000, sz.files*sz.size>>20)
		progress("clone mode, %s: starts", label)
		for _, m := range []struct{ name, cmd, mode string }{
			{"direct start, " + label, "mosaic start --direct -w REPO -- sleep 600", "direct"},
			{"clone start, cold, " + label, "mosaic start -w REPO -- sleep 600 (no spare copy)", "cold"},
			{"clone start, warm, " + label, "mosaic start -w REPO -- sleep 600 (a spare copy taken)", "warm"},
		} {
			s, err := b.cloneStarts(ctx, repo, sz.files, n, m.name, m.cmd, m.mode)
			if err != nil {
				return err
			}
			r.Clone = append(r.Clone, s)
		}
		for _, m := range []struct {
			name, cmd string
			f         func() error
		}{
			{"by hand: git clone --shared + checkout, " + label, "git clone -q --shared REPO COPY", b.byHand(repo, "clone")},
			{"by hand: git worktree add, " + label, "git worktree add -q --detach COPY", b.byHand(repo, "worktree")},
		} {
			s, err := measureN(m.name, m.cmd, n, n > 1, m.f)
			if err != nil {
				return err
			}
			r.Clone = append(r.Clone, s)
		}
		if sz.files == 10000 {
			if err := b.cloneChange(ctx, r, repo, label); err != nil {
				return err
			}
			if err := b.cloneRuns(r, repo, label); err != nil {
				return err
			}
		}
		if err := b.noSpare(); err != nil {
			return err
		}
		os.RemoveAll(repo)
		os.RemoveAll(b.trashDir())
	}
	return nil
}

// The copies a measurement made are moved aside (toTrash) and removed
// once the size is measured, not between its runs: on an ext4 without a
// journal (this project's machines) the inode allocator skips, one by
// one, every inode deleted in the last minute (fs/ext4/ialloc.c,
// recently_deleted), and a copy made just after 10,000 files were
// removed spent 1-2 s of system time in it, mosaic's and git's alike.
// A cold start is one with no copy to reuse, not one just after a copy
// was deleted.

// trashDir is where the bench's copies wait for their removal.
func (b *bench) trashDir() string { return filepath.Join(b.ws, "trash") }

// toTrash moves the tree at p aside (one rename: the trash is in the
// bench's directory, on the same file system as the home); it removes it
// when it cannot.
func (b *bench) toTrash(p string) {
	os.MkdirAll(b.trashDir(), 0o700)
	aside, err := os.MkdirTemp(b.trashDir(), "t")
	if err == nil {
		err = os.Rename(p, filepath.Join(aside, "t"))
	}
	if err != nil && !os.IsNotExist(err) {
		os.RemoveAll(p)
	}
}

// stateRoot is where mosaic keeps the sessions' state and the spare
// copies: the user's paths the bench's manager holds.
func (b *bench) stateRoot() string {
	p, _ := b.m.Paths()
	return p.StateRoot
}

// noSpare waits for the units making spare copies to end, then removes
// every spare: the next clone start is a repository's first.
func (b *bench) noSpare() error {
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		out, _ := exec.Command("systemctl", "--user", "list-units", "--plain", "--no-legend", "mosaic-spare.*").Output()
		if strings.TrimSpace(string(out)) == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("a spare copy is still being made after 5 minutes: %s", out)
		}
	}
	b.toTrash(clone.SparesDir(b.stateRoot()))
	return nil
}

// spareOf waits until the repository at repo has a spare copy.
func (b *bench) spareOf(repo string) error {
	root := b.stateRoot()
	for deadline := time.Now().Add(5 * time.Minute); !clone.HasSpare(root, repo); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no spare copy of %s after 5 minutes", repo)
		}
	}
	return nil
}

// cloneStarts measures n starts of a session on repo (files files) in
// mode: direct, clone cold (no spare copy: the first session of a
// repository) or clone warm (the spare the session before left made, which
// the start takes and resets to its base), with a warm-up first when n > 1.
// Only the start is timed: the session's stop and the copy's removal after
// it are not (a cold one's after the last run: toTrash says why).
func (b *bench) cloneStarts(ctx context.Context, repo string, files, n int, name, command, mode string) (Stat, error) {
	var ds []float64
	var ended []string
	defer func() { b.remove(ended...) }()
	for k := 0; k < n+min(n-1, 1); k++ {
		session := fmt.Sprintf("bench-clone-%d-%s-%d", files, mode, k)
		argv := []string{b.mosaic, "start", "--name", session, "-w", repo}
		switch mode {
		case "cold":
			if err := b.noSpare(); err != nil {
				return Stat{Name: name, Command: command}, err
			}
			argv = append(argv, "--clone")
		case "warm":
			if err := b.spareOf(repo); err != nil {
				return Stat{Name: name, Command: command}, err
			}
			argv = append(argv, "--clone")
		default:
			argv = append(argv, "--direct")
		}
		t := time.Now()
		err := runCmd(append(argv, "--", "sleep", "600"))
		d := time.Since(t)
		exec.Command("systemctl", "--user", "kill", "--signal=SIGKILL", "mosaic-"+session+".service").Run()
		b.m.WaitEnded(ctx, session)
		ended = append(ended, session)
		if mode != "cold" { // a cold one's copy is removed after the last (toTrash's why)
			b.remove(ended...)
			ended = nil
		}
		if err != nil {
			return Stat{Name: name, Command: command}, err
		}
		if k > 0 || n == 1 {
			ds = append(ds, ms(d))
		}
	}
	return summarise(name, command, ds), nil
}

// remove discards the ended sessions' copies and removes them.
func (b *bench) remove(sessions ...string) {
	for _, s := range sessions {
		exec.Command(b.mosaic, "discard", s).Run()
		exec.Command(b.mosaic, "rm", "--force", s).Run()
	}
}

// byHand is the same copy made by hand with git.
func (b *bench) byHand(repo, how string) func() error {
	return func() error {
		cp := repo + ".copy"
		defer func() {
			b.toTrash(cp)
			exec.Command("git", "-C", repo, "worktree", "prune").Run()
		}()
		if how == "clone" {
			return runCmd([]string{"git", "clone", "-q", "--shared", repo, cp})
		}
		return runCmd([]string{"git", "-C", repo, "worktree", "add", "-q", "--detach", cp})
	}
}

// cloneChange measures the finish step and mosaic diff of a session that
// changed 100 files.
func (b *bench) cloneChange(ctx context.Context, r *Report, repo, label string) error {
	name := "bench-clone-change"
	defer func() {
		exec.Command(b.mosaic, "discard", name).Run()
		exec.Command(b.mosaic, "rm", "--force", name).Run()
	}()
	change := "for i in $(seq 0 99); do echo changed >> d$(printf %03d $i)/f$(printf %06d $i).txt; done"
	if err := runCmd([]string{b.mosaic, "run", "--clone", "--name", name, "-w", repo, "--", "sh", "-c", change}); err != nil {
		return err
	}
	progress("clone mode: finish step and diff of a 100-file change")
	s, err := measure("finish step of a 100-file change, "+label, "mosaic-NAME-finish.service: commit, patch, bundle", 3, func() error {
		_, err := b.m.Finish(ctx, name)
		return err
	})
	if err != nil {
		return err
	}
	r.Clone = append(r.Clone, s)
	s, err = measure("mosaic diff --stat of that change (snapshot taken)", "mosaic diff --stat NAME", 3, func() error {
		return runCmd([]string{b.mosaic, "diff", "--stat", name})
	})
	if err != nil {
		return err
	}
	r.Clone = append(r.Clone, s)
	// apply of the same change made anew by a session each time (not
	// timed, nor is the checkout put back after it).
	var ds []float64
	for i := 0; i < 4; i++ {
		each := fmt.Sprintf("%s-apply-%d", name, i)
		if err := runCmd([]string{b.mosaic, "run", "--name", each, "-w", repo, "--", "sh", "-c", change}); err != nil {
			return err
		}
		if _, err := b.m.Finish(ctx, each); err != nil { // the run's end reads the change already; this is a no-op then
			return err
		}
		t := time.Now()
		err := runCmd([]string{b.mosaic, "apply", each})
		d := time.Since(t)
		exec.Command(b.mosaic, "rm", "--force", each).Run()
		if err != nil {
			return err
		}
		if i > 0 { // the first warms up
			ds = append(ds, ms(d))
		}
		if err := runCmd([]string{"git", "-C", repo, "checkout", "-q", "--", "."}); err != nil {
			return err
		}
	}
	r.Clone = append(r.Clone, summarise("mosaic apply of that change", "mosaic apply NAME", ds))
	return nil
}

// cloneRatios are clone mode's targets (issue 38): at 10,000 files a
// start at most 1.0 s over a direct one cold and 0.15 s warm; diff and
// apply of a 100-file change at most 0.3 s each; the finish step 1 s.
func cloneRatios(r *Report) []Ratio {
	by := map[string]float64{}
	for _, s := range r.Clone {
		by[s.Name] = s.MedianMs
	}
	var out []Ratio
	label := "10k files, 195 MB"
	for _, c := range []struct {
		mode   string
		target float64
	}{{"cold", 1000}, {"warm", 150}} {
		if d, s := by["direct start, "+label], by["clone start, "+c.mode+", "+label]; d > 0 && s > 0 {
			out = append(out, Ratio{What: "clone start minus direct start, " + c.mode + ", 10,000 files (ms, median)", Value: s - d, Target: fmt.Sprintf("≤ %.0f", c.target), Met: s-d <= c.target})
		}
	}
	if f := by["finish step of a 100-file change, "+label]; f > 0 {
		out = append(out, Ratio{What: "finish step of a 100-file change (ms, median)", Value: f, Target: "≤ 1000", Met: f <= 1000})
	}
	if f := by["mosaic diff --stat of that change (snapshot taken)"]; f > 0 {
		out = append(out, Ratio{What: "mosaic diff of a 100-file change (ms, median)", Value: f, Target: "≤ 300", Met: f <= 300})
	}
	if f := by["mosaic apply of that change"]; f > 0 {
		out = append(out, Ratio{What: "mosaic apply of a 100-file change (ms, median)", Value: f, Target: "≤ 300", Met: f <= 300})
	}
	return out
}

// measureN is measure with or without its warm-up run.
func measureN(name, command string, n int, warm bool, f func() error) (Stat, error) {
	if warm {
		return measure(name, command, n, f)
	}
	ds := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		t := time.Now()
		if err := f(); err != nil {
			return Stat{Name: name, Command: command}, err
		}
		ds = append(ds, ms(time.Since(t)))
	}
	return summarise(name, command, ds), nil
}

// cloneRuns measures a whole unnamed `mosaic run -- /usr/bin/true`, start
// to exit, in direct mode and in clone mode with a spare copy to take:
// the clone run's end also has its finish step (which finds no change)
// and the removal of its state, whose files go in the background
// (manager's removeState).
func (b *bench) cloneRuns(r *Report, repo, label string) error {
	progress("clone mode, %s: whole runs", label)
	for _, m := range []struct{ name, cmd, mode string }{
		{"whole run, direct, " + label, "mosaic run --direct -w REPO -- /usr/bin/true", "--direct"},
		{"whole run, clone, a spare copy taken, " + label, "mosaic run -w REPO -- /usr/bin/true", "--clone"},
	} {
		var ds []float64
		for i := 0; i < 4; i++ { // the first a warm-up
			if err := b.spareOf(repo); err != nil {
				return err
			}
			t := time.Now()
			if err := runCmd([]string{b.mosaic, "run", m.mode, "-w", repo, "--", "/usr/bin/true"}); err != nil {
				return err
			}
			if i > 0 {
				ds = append(ds, ms(time.Since(t)))
			}
		}
		r.Clone = append(r.Clone, summarise(m.name, m.cmd, ds))
	}
	return nil
}
