package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/urfave/cli/v2"

	"mosaic/internal/errcode"
	"mosaic/internal/termsafe"
	"mosaic/manager"
	"mosaic/manager/clone/patchcheck"
	"mosaic/manager/request"
	"mosaic/units"
)

// cloneFlags are start's and run's flags of the workspace's mode.
func cloneFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "clone", Usage: "clone mode, the default: the session works in its own copy of the workspace (its repository's HEAD and your uncommitted changes, or a plain directory's files), never in your checkout; see mosaic diff, apply, discard"},
		&cli.BoolFlag{Name: "direct", Usage: "direct mode: the session writes your checkout in place, and your host's tools will run what it writes (the opposite of --clone)"},
		&cli.StringFlag{Name: "base", Usage: "clone mode from commit `REF` instead of HEAD and the working tree"},
	}
}

// modeFrom reads the workspace's mode from --clone and --direct: "" when
// neither is given (the profile's, mosaic.conf's, else clone).
func modeFrom(c *cli.Context) (string, error) {
	clone, direct := c.IsSet("clone") && c.Bool("clone"), c.IsSet("direct") && c.Bool("direct")
	if c.IsSet("clone") && !c.Bool("clone") {
		direct = true // --clone=false, as before
	}
	switch {
	case clone && direct:
		return "", errcode.BadClone.New("--clone and --direct say opposite things: give one of them")
	case clone:
		return request.ModeClone, nil
	case direct:
		return request.ModeDirect, nil
	}
	return "", nil
}

// changeDocument is what diff, apply and a clone-mode run say about a
// change with --json.
type changeDocument struct {
	Name    string             `json:"name"`
	Base    string             `json:"base"`
	Parent  string             `json:"parent"`
	Head    string             `json:"head,omitempty"`
	Summary patchcheck.Summary `json:"summary"`
	Line    string             `json:"line"`
	HostRun []patchcheck.File  `json:"host_run"`
	Refused string             `json:"refused,omitempty"`
	Applied string             `json:"applied,omitempty"`
	// AddErrors is what the finish step's git add could not add.
	AddErrors string `json:"add_errors,omitempty"`
	// MovedSubmodules are the submodules whose HEAD the session moved:
	// the change holds their files, never a gitlink.
	MovedSubmodules []string `json:"moved_submodules,omitempty"`
	Patch           string   `json:"patch,omitempty"`
}

func documentOf(name string, ch manager.Change, withPatch bool) changeDocument {
	d := changeDocument{Name: name, Base: ch.Clone.Base, Parent: ch.Clone.Parent, Head: ch.Clone.Head, Summary: ch.Summary,
		Line: ch.Clone.Line(), HostRun: hostRun(ch.Summary), Applied: ch.Clone.Applied, AddErrors: ch.AddErrors, MovedSubmodules: ch.Moved}
	if d.Summary.Files == nil {
		d.Summary.Files = []patchcheck.File{}
	}
	if ch.Refused != nil {
		d.Refused = ch.Refused.Error()
	}
	if withPatch {
		d.Patch = string(ch.Patch)
	}
	return d
}

func hostRun(s patchcheck.Summary) []patchcheck.File {
	out := []patchcheck.File{}
	for _, f := range s.Files {
		if f.HostRun != "" {
			out = append(out, f)
		}
	}
	return out
}

// callouts writes, before a change, the files in it that the user's tools
// run, and why apply would refuse it.
func callouts(w io.Writer, ch manager.Change, esc func(string) string) {
	if ch.Refused != nil {
		fmt.Fprintf(w, "mosaic: apply will refuse this change: %s\n", esc(ch.Refused.Error()))
	}
	if ch.AddErrors != "" {
		fmt.Fprintf(w, "mosaic: the finish step could not add everything the session left, which this change lacks: %s\n", esc(strings.ReplaceAll(ch.AddErrors, "\n", " | ")))
	}
	for _, p := range ch.Moved {
		fmt.Fprintf(w, "mosaic: the session moved submodule %s's HEAD (it committed or checked out there): this change holds its files, never a new commit for its gitlink; commit there yourself after apply\n", esc(p))
	}
	if hr := hostRun(ch.Summary); len(hr) > 0 {
		fmt.Fprintf(w, "mosaic: this change touches %d files your tools run; read them first:\n", len(hr))
		for _, f := range hr {
			p := f.Path
			if p == "" {
				p = f.OldPath
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", esc(p), f.Status, f.HostRun)
		}
	}
}

// stat writes git diff --stat's like lines of a summary.
func stat(w io.Writer, s patchcheck.Summary, esc func(string) string) {
	for _, f := range s.Files {
		p := f.Path
		if p == "" {
			p = f.OldPath
		} else if f.OldPath != "" {
			p = f.OldPath + " => " + f.Path
		}
		extra := ""
		if f.OldMode != "" && f.NewMode != "" && f.OldMode != f.NewMode {
			extra = fmt.Sprintf(" (mode %s => %s)", f.OldMode, f.NewMode)
		} else if f.Status == "added" || f.Status == "deleted" {
			extra = " (" + f.Status + ")"
		}
		if f.Binary {
			fmt.Fprintf(w, " %s | binary%s\n", esc(p), extra)
			continue
		}
		fmt.Fprintf(w, " %s | +%d -%d%s\n", esc(p), f.Added, f.Deleted, extra)
	}
	fmt.Fprintf(w, " %s\n", s.Line())
}

// colorLine colors a diff's line as git does by default.
func colorLine(l string) string {
	switch {
	case strings.HasPrefix(l, "diff --git "), strings.HasPrefix(l, "index "), strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "),
		strings.HasPrefix(l, "new file mode"), strings.HasPrefix(l, "deleted file mode"), strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"):
		return "\033[1m" + l + "\033[m"
	case strings.HasPrefix(l, "@@"):
		return "\033[36m" + l + "\033[m"
	case strings.HasPrefix(l, "+"):
		return "\033[32m" + l + "\033[m"
	case strings.HasPrefix(l, "-"):
		return "\033[31m" + l + "\033[m"
	}
	return l
}

// showPatch writes the patch: on a terminal each line escaped (termsafe:
// the session chose every byte) and colored; elsewhere the exact bytes.
func showPatch(w io.Writer, patch []byte, terminal bool) {
	if !terminal {
		w.Write(patch)
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(patch))
	sc.Buffer(make([]byte, 64<<10), patchcheck.MaxPatchBytes)
	for sc.Scan() {
		fmt.Fprintln(w, colorLine(termsafe.Escape(sc.Text(), false)))
	}
}

// pager starts the user's pager ($PAGER, else less -FRX) on a terminal,
// and returns where to write and what to call when done.
func pager() (io.Writer, func()) {
	if !isTerminal(os.Stdout) {
		return os.Stdout, func() {}
	}
	p := os.Getenv("PAGER")
	if p == "" {
		p = "less"
	}
	cmd := exec.Command("/bin/sh", "-c", p)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if os.Getenv("LESS") == "" {
		cmd.Env = append(os.Environ(), "LESS=FRX")
	}
	in, err := cmd.StdinPipe()
	if err != nil || cmd.Start() != nil {
		return os.Stdout, func() {}
	}
	return in, func() { in.Close(); cmd.Wait() }
}

func diffCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "diff",
		Usage:     "show a clone-mode session's change (a running session's is snapshotted first)",
		ArgsUsage: "NAME",
		Description: "The change is what the agent committed and left in its copy, from where the copy started.\n" +
			"Files your tools run (.envrc, .vscode, Makefile, CI, package.json, ...) are named at the top.",
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "stat", Usage: "only the files and their +/- counts"}, jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "mosaic diff "+name)
				prog.set("snapshotting the session's copy")
				err := m.Settle(ctx, name)
				var ch manager.Change
				if err == nil {
					ch, err = m.Current(ctx, name)
				}
				if err == nil {
					err = m.Shown(name, ch)
				}
				prog.done()
				if err != nil {
					return err
				}
				if out.json {
					out.result(documentOf(name, ch, !c.Bool("stat")), nil)
					return nil
				}
				term := onTerminal(out.stdout)
				esc := func(s string) string { return s }
				if term {
					esc = func(s string) string { return termsafe.Escape(s, false) }
				}
				w, done := out.stdout, func() {}
				if !c.Bool("stat") && term {
					w, done = pager()
				}
				defer done()
				callouts(w, ch, esc)
				if c.Bool("stat") || len(ch.Summary.Files) == 0 {
					stat(w, ch.Summary, esc)
					return nil
				}
				showPatch(w, ch.Patch, term)
				return nil
			})
		},
	}
}

func applyCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "apply",
		Usage:     "write an ended clone-mode session's change into your checkout, as unstaged changes or a branch",
		ArgsUsage: "NAME",
		Description: "Without --branch the change lands as unstaged changes in your working tree, all or nothing.\n" +
			"--branch makes a branch (default mosaic/NAME) holding the session's commits, from its bundle.\n" +
			"A change into .git, a gitlink, a symlink leading out or written through, or over the bounds is refused.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "branch", Usage: "make branch `BR` (default mosaic/NAME: give --branch= or --branch '') instead of changing the working tree"},
			jsonFlag,
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			branch := ""
			var name string
			var err error
			if c.IsSet("branch") && c.NArg() == 0 { // apply --branch NAME: the flag took the name
				name, branch = c.String("branch"), "mosaic/"+c.String("branch")
				err = units.ValidateName(name)
			} else if name, err = oneName(c); err == nil && c.IsSet("branch") {
				if branch = c.String("branch"); branch == "" {
					branch = "mosaic/" + name
				}
			}
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "mosaic apply "+name)
				prog.set("checking and applying the change")
				ch, err := m.Apply(ctx, name, branch)
				prog.done()
				if err != nil {
					return err
				}
				out.result(documentOf(name, ch, false), func(w io.Writer) {
					callouts(w, ch, out.safe)
					if branch != "" {
						fmt.Fprintf(w, "made branch %s of session %s's commits (%s)\n", branch, name, ch.Summary.Line())
						if ch.Clone.Base != ch.Clone.Parent {
							fmt.Fprintf(w, "mosaic: its first commit, %.12s, is your own uncommitted work at the session's start, not the agent's: rebase it out (git rebase --onto %.12s %.12s %s) before you push what you do not mean to\n",
								ch.Clone.Base, ch.Clone.Parent, ch.Clone.Base, branch)
						}
						return
					}
					if ch.Clone.Kind == units.ClonePlain {
						fmt.Fprintf(w, "applied session %s's change to %s (%s)\n", name, out.safe(ch.Workspace), ch.Summary.Line())
						return
					}
					fmt.Fprintf(w, "applied session %s's change to %s as unstaged changes (%s): git diff shows it\n", name, out.safe(ch.Workspace), ch.Summary.Line())
				})
				return nil
			})
		},
	}
}

func discardCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:         "discard",
		Usage:        "throw away an ended clone-mode session's change and its copy",
		ArgsUsage:    "NAME",
		Flags:        []cli.Flag{jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			name, err := oneName(c)
			if err != nil {
				return err
			}
			return out.connected(func(ctx context.Context, m *manager.Manager) error {
				if err := m.Discard(ctx, name); err != nil {
					return err
				}
				out.result(map[string]any{"discarded": name}, func(w io.Writer) {
					fmt.Fprintf(w, "discarded session %s's change and its copy (mosaic rm %s forgets the session)\n", name, name)
				})
				return nil
			})
		},
	}
}

// finishAfter snapshots a clone-mode session whose command ended (run,
// stop) and says in one line on stderr what it left (nothing with --json).
// A session that left nothing (no file changed, no commit) is quiet, and
// an unnamed run's is then forgotten, as a direct run's is: there is
// nothing to apply. unnamed is whether mosaic made the name up.
func finishAfter(ctx context.Context, out *output, m *manager.Manager, name string, unnamed bool) {
	prog := newProgress(out.stderr, !out.json && isTerminal(os.Stderr), "mosaic: session "+name)
	prog.set("snapshotting what it left (finish step)")
	ch, err := m.Finish(ctx, name)
	prog.done()
	if err == nil && len(ch.Summary.Files) == 0 && ch.Clone.Head == ch.Clone.Base && ch.AddErrors == "" && ch.Refused == nil {
		if unnamed {
			_ = m.Remove(ctx, name, false)
		}
		return
	}
	if out.json { // stderr holds run's JSON document: mosaic diff --json says the rest
		return
	}
	if err != nil {
		fmt.Fprintf(out.stderr, "mosaic: %s\n", out.safe(err.Error()))
		return
	}
	fmt.Fprintf(out.stderr, "mosaic: session %s left %s: mosaic diff %s, then mosaic apply %s (or --branch) or mosaic discard %s\n",
		name, ch.Summary.Line(), name, name, name)
}
