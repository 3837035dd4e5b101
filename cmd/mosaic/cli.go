package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// Release is mosaic's semantic version (semver.org), changed by hand when
// a release is made; between releases it carries "-dev".
const Release = "0.9.0-dev"

// commit is set at build time where Go's build info has no commit (make
// build: -ldflags "-X main.commit=..."; a tree copied without .git); a
// plain `go build` or `go install` in a checkout records it itself
// (vcs.revision, vcs.modified).
var commit = ""

// buildVersion is what `mosaic version` reports.
type buildVersion struct {
	Version  string `json:"version"`            // Release
	Commit   string `json:"commit,omitempty"`   // the full commit id, when known
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
}

// versionOf reads the build's version: Go's build info first, then the
// commit stamped in by the Makefile ("ID", or "ID-dirty-HASH" with a hash
// of the modification, which tells the stage binary of one modified tree
// from another's: manager/stagebin).
func versionOf(info *debug.BuildInfo, stamped string) buildVersion {
	v := buildVersion{Version: Release}
	if info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	if v.Commit == "" && stamped != "" {
		v.Commit, _, v.Modified = strings.Cut(stamped, "-dirty")
	}
	return v
}

// String is the version as one line: "0.9.0-dev (commit 0123456789ab, modified)".
func (v buildVersion) String() string {
	s := v.Version
	if v.Commit == "" {
		return s + " (commit unknown)"
	}
	s += " (commit " + v.Commit[:min(12, len(v.Commit))]
	if v.Modified {
		s += ", modified"
	}
	return s + ")"
}

// thisVersion is this binary's version.
func thisVersion() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return versionOf(info, commit)
}

// reorderArgs lets flags follow a command's arguments, as git, kubectl and
// systemctl allow (`mosaic status fix-42 --json`): urfave/cli stops parsing
// flags at the first argument, so for the commands that take session NAMEs
// the flags after them are moved before them. Nothing after `--` is ever
// touched, and the commands that take a COMMAND (start, run, bus launch) are
// left as they are: what follows their first argument is the command's.
func reorderArgs(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	i, cmds := 1, app.Commands
	var cmd *cli.Command
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			return args // a global flag, or --: leave it to the library
		}
		c := findCommand(cmds, a)
		if c == nil {
			return args
		}
		cmd, i = c, i+1
		if len(c.Subcommands) == 0 {
			break
		}
		cmds = c.Subcommands
	}
	if cmd == nil || !takesNames(cmd) || cmd.SkipFlagParsing {
		return args
	}
	var flags, names []string
	rest := args[i:]
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		switch {
		case a == "--":
			names = append(names, rest[j:]...)
			j = len(rest)
		case strings.HasPrefix(a, "-") && a != "-":
			flags = append(flags, a)
			if !strings.Contains(a, "=") && takesValue(cmd, a) && j+1 < len(rest) {
				j++
				flags = append(flags, rest[j])
			}
		default:
			names = append(names, a)
		}
	}
	out := append(append([]string{}, args[:i]...), flags...)
	return append(out, names...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name {
			return c
		}
		for _, a := range c.Aliases {
			if a == name {
				return c
			}
		}
	}
	return nil
}

// takesNames reports whether a command's arguments are session names (or
// none at all), which flags may follow.
func takesNames(c *cli.Command) bool {
	return !strings.Contains(c.ArgsUsage, "COMMAND")
}

// takesValue reports whether flag arg of c takes a value in the next
// argument (every flag but a boolean one).
func takesValue(c *cli.Command, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				return !isBoolFlag(f)
			}
		}
	}
	return false
}

// commandPath is how a user types the command of c: `mosaic`, `mosaic
// stop`, `mosaic bus launch`.
func commandPath(c *cli.Context) string {
	if c == nil || c.Command == nil || c.Command.Name == "" || c.Command.Name == c.App.Name {
		return "mosaic"
	}
	return strings.TrimSpace(c.App.Name + " " + strings.TrimPrefix(c.Command.FullName(), c.App.Name+" "))
}

// suggestion is " (did you mean X?)" for a mistyped name among names, or "".
func suggestion(provided string, names []string) string {
	best, score := "", 0.0
	for _, n := range names {
		if s := similarity(provided, n); s > score {
			best, score = n, s
		}
	}
	if score < 0.6 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// similarity is 1 - the edit distance (a swap of two neighbours counts
// once) over the longer length: a cheap measure for "statsu" ~ "status",
// "--nmae" ~ "--name".
func similarity(a, b string) float64 {
	la, lb := len(a), len(b)
	if la == 0 || lb == 0 {
		return 0
	}
	d := make([][]int, la+1)
	for i := range d {
		d[i] = make([]int, lb+1)
		d[i][0] = i
	}
	for j := 0; j <= lb; j++ {
		d[0][j] = j
	}
	for i := 1; i <= la; i++ {
		for j := 1; j <= lb; j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return 1 - float64(d[la][lb])/float64(max(la, lb))
}
