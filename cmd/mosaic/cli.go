package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/urfave/cli/v2"
)

// version is set at build time (make build: -ldflags "-X main.version=...");
// otherwise the module's version control stamp is used.
var version = ""

// versionString is mosaic's version and the commit it was built from.
func versionString() string {
	v, commit, dirty := version, "", false
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if commit != "" && !strings.Contains(v, commit[:min(12, len(commit))]) {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		v += " (commit " + commit
		if dirty {
			v += ", modified"
		}
		v += ")"
	}
	return v
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
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
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
