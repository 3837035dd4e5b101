package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"mosaic/internal/errcode"
	"mosaic/manager/request"
)

// trustCommand shows a project file's asks and records the user's
// acceptance of its content: only then do the asks apply, until the file
// changes (request.ProjectFile).
func trustCommand(out *output) *cli.Command {
	return &cli.Command{
		Name:      "trust",
		Usage:     "show what a repository's " + request.ProjectFile + " asks for beyond your defaults, and accept it as it is now",
		ArgsUsage: "[DIR]",
		Description: "A " + request.ProjectFile + " at the workspace's top (or its repository's) may tighten any rule, which applies at once,\n" +
			"and ask for hosts, published ports and limits its builds need, which apply only once you accept the file\n" +
			"here: the acceptance is pinned to the file's content (SHA-256), so a change (yours, or a session's in direct\n" +
			"mode) asks again. On a terminal mosaic asks before it accepts; elsewhere --yes accepts, and without it the\n" +
			"file is only shown.",
		Flags:        []cli.Flag{&cli.BoolFlag{Name: "yes", Usage: "accept without asking"}, jsonFlag},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return errcode.Usage.New("mosaic trust takes at most one DIR")
			}
			proj, paths, err := projectOf(out, c.Args().First())
			if err != nil {
				return err
			}
			if proj == nil {
				return errcode.BadConfig.New("%s has no %s, and neither has its repository's top: nothing to trust", orDot(c.Args().First()), request.ProjectFile)
			}
			if !proj.Trusted && len(proj.Asks) > 0 && confirm(out, c.Bool("yes"), proj) {
				if err := request.Trust(proj, paths); err != nil {
					return err
				}
			}
			out.result(proj, func(w io.Writer) { printProject(w, out, proj) })
			return nil
		},
	}
}

// projectOf reads the project file that applies to dir ("": the current
// directory); nil if there is none.
func projectOf(out *output, dir string) (*request.Project, request.Paths, error) {
	paths, err := out.userPaths()
	if err != nil {
		return nil, paths, err
	}
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, paths, errcode.BadWorkspace.New("%s: %w", dir, err)
	}
	real := request.Resolve(abs)
	proj, err := request.ReadProject(real, paths)
	return proj, paths, err
}

// orDot is dir, or "." for none given.
func orDot(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// confirm says whether the user accepts proj's asks: --yes, else an
// answer on the terminal after the list; never without one of them.
func confirm(out *output, yes bool, proj *request.Project) bool {
	if yes {
		return true
	}
	if out.json || !isTerminal(os.Stdin) || !onTerminal(out.stderr) {
		return false
	}
	fmt.Fprintf(out.stderr, "%s asks for:\n", out.safe(proj.Path))
	for _, a := range proj.AskList() {
		fmt.Fprintf(out.stderr, "  %s\n", out.safe(a))
	}
	fmt.Fprint(out.stderr, "accept it as it is now? [y/N] ")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	return strings.EqualFold(strings.TrimSpace(line), "y") || strings.EqualFold(strings.TrimSpace(line), "yes")
}

// printProject writes what the project file says and whether it is
// accepted.
func printProject(w io.Writer, out *output, proj *request.Project) {
	fmt.Fprintf(w, "%s (sha256 %s)\n", out.safe(proj.Path), proj.Hash[:16])
	for _, r := range proj.Rules {
		fmt.Fprintf(w, "  tightens: %s = %s  (line %d, applies always)\n", r.Key, out.safe(r.Value), r.Line)
	}
	for _, a := range proj.AskList() {
		fmt.Fprintf(w, "  asks: %s\n", out.safe(a))
	}
	switch {
	case len(proj.Asks) == 0:
		fmt.Fprintln(w, "it asks for nothing beyond your defaults: nothing to accept")
	case proj.Trusted:
		fmt.Fprintln(w, "accepted: its asks apply to sessions here until the file changes")
	default:
		fmt.Fprintf(w, "not accepted: sessions here start without its asks (accept with: mosaic trust --yes %s)\n", out.safe(filepath.Dir(proj.Path)))
	}
}
