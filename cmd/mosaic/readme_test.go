package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// The README and the reference pages under docs/ show mosaic command lines
// in ```sh blocks. Each one parses against the command tree; each one runs
// in the rig as written, or its trailing comment says what it needs that a
// test machine lacks, as "# needs: agent, network" (several words, comma
// separated, anywhere in the comment). A line that shows a failure says the
// exit code it must end with, as "# exits: 2". docs/dev/tests.md lists the
// words.

// exampleNeeds are the words a "needs:" marker may use, and what each stands
// for.
var exampleNeeds = map[string]string{
	"agent":    "an agent's CLI and its key",
	"network":  "the internet (an agent's vendor, a package registry)",
	"session":  "a session of the name it gives, made by an earlier line",
	"project":  "a workspace with the files it names (~/src/app, a Makefile)",
	"host":     "another machine reached over ssh (--host)",
	"terminal": "a person at a terminal",
	"bus":      "the bus installed (contrib/install-bus-unit.sh)",
}

// agentCommands are the agent CLIs an example may run; a line that runs one
// needs an agent.
var agentCommands = []string{"claude", "codex", "opencode", "pi"}

// docExample is one mosaic command line of a ```sh block.
type docExample struct {
	where string   // file:line, for messages
	args  []string // the words after "mosaic", as a shell splits them
	needs []string // the words of its "needs:" marker
	exits int      // the exit code it must end with ("exits:"), else 0
}

// docPages are the README and every page under docs/, relative to this
// package's directory.
func docPages(t *testing.T) []string {
	t.Helper()
	pages := []string{"../../README.md"}
	for _, pattern := range []string{"../../docs/*.md", "../../docs/*/*.md"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, m...)
	}
	return pages
}

// docExamples are the mosaic command lines of the sh blocks of the README
// and the docs, split into words as a shell would (quotes honoured, $VARIABLES
// left as they are: a variable is one word), with their markers.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	var out []docExample
	needsRE := regexp.MustCompile(`needs: ([a-z]+(?:, [a-z]+)*)`)
	exitsRE := regexp.MustCompile(`exits: ([0-9]+)`)
	for _, page := range docPages(t) {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		inSh := false
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(line, "```"):
				inSh = !inSh && line == "```sh"
				continue
			case !inSh || !strings.HasPrefix(line, "mosaic "):
				continue
			}
			words, comment := shellLine(line)
			ex := docExample{where: fmt.Sprintf("%s:%d", strings.TrimPrefix(page, "../../"), i+1), args: words[1:]}
			if m := needsRE.FindStringSubmatch(comment); m != nil {
				ex.needs = strings.Split(m[1], ", ")
			}
			if m := exitsRE.FindStringSubmatch(comment); m != nil {
				ex.exits, _ = strconv.Atoi(m[1])
			}
			out = append(out, ex)
		}
	}
	return out
}

// shellLine splits a command line as sh does, for the simple lines of a
// README: single and double quotes, and a # comment at a word's start,
// returned apart.
func shellLine(line string) (words []string, comment string) {
	var cur strings.Builder
	inWord, quote := false, byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			comment = line[i+1:]
			i = len(line)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, comment
}

// Every mosaic command line in the README and the docs parses: its verb and
// flags exist and take what they are given. Its marker uses known words, and
// a line that runs an agent or another machine says so. (The lines that need
// nothing are run by TestDocExamplesRun.)
func TestReadmeCommandsParse(t *testing.T) {
	examples := docExamples(t)
	if len(examples) < 40 {
		t.Fatalf("found only %d mosaic commands in the README and docs/", len(examples))
	}
	for _, ex := range examples {
		var stdout, stderr bytes.Buffer
		out := &output{stdout: &stdout, stderr: &stderr}
		app := newApp(out)
		noop(app.Commands)
		args := append([]string{"mosaic"}, ex.args...)
		if err := app.Run(reorderArgs(app, args)); err != nil || out.code != 0 {
			t.Errorf("%s: mosaic %s: %v %s", ex.where, strings.Join(ex.args, " "), err, stderr.String())
		}
		for _, n := range ex.needs {
			if _, ok := exampleNeeds[n]; !ok {
				t.Errorf("%s: needs %q, not one of the marker's words (readme_test.go's exampleNeeds)", ex.where, n)
			}
		}
		if want := exampleWants(ex.args); want != "" && !slices.Contains(ex.needs, want) {
			t.Errorf("%s: mosaic %s: mark it \"# needs: %s\"", ex.where, strings.Join(ex.args, " "), want)
		}
	}
}

// exampleWants is a need a command line shows by itself: an agent's CLI
// after "--", or another machine.
func exampleWants(args []string) string {
	for i, a := range args {
		switch {
		case a == "--host" || a == "-H" || a == "--all-hosts" || strings.HasPrefix(a, "--host="):
			return "host"
		case a == "--" && i+1 < len(args) && slices.Contains(agentCommands, filepath.Base(args[i+1])):
			return "agent"
		}
	}
	return ""
}

// noop replaces every command's action: only parsing is tested.
func noop(cmds []*cli.Command) {
	for _, c := range cmds {
		if c.Action != nil {
			c.Action = func(*cli.Context) error { return nil }
		}
		noop(c.Subcommands)
	}
}

// The README opens with the two commands that set everything up, make demo
// and make test, before any other word of it but its title.
func TestReadmeOpensWithTheTwoCommands(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 || !strings.HasPrefix(lines[0], "# ") || lines[1] != "" || lines[2] != "```sh" ||
		!strings.HasPrefix(lines[3], "make demo") || !strings.HasPrefix(lines[4], "make test") {
		t.Errorf("the README must open with its title and a sh block of `make demo` then `make test`; it opens:\n%s",
			strings.Join(lines[:min(len(lines), 6)], "\n"))
	}
	if len(lines) > 300 {
		t.Errorf("the README is %d lines: at most 300 (the reference goes under docs/)", len(lines))
	}
}

// Every command of the command tree and every flag of each is in the
// reference: each command path ("bus launch") in docs/sessions.md, the page
// of the CLI, and each flag, long and short, on some page under docs/.
// mosaic help and the man page are made from the same tree, so the three
// cannot drift apart.
func TestDocsNameEveryCommandAndFlag(t *testing.T) {
	cliPage, err := os.ReadFile("../../docs/sessions.md")
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	pages, _ := filepath.Glob("../../docs/*.md")
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
	}
	docs := all.String()
	var out output
	app := newApp(&out)
	checkFlags(t, docs, "mosaic", app.VisibleFlags())
	var walk func(parent string, cmds []*cli.Command)
	walk = func(parent string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			path := strings.TrimSpace(parent + " " + c.Name)
			if !strings.Contains(string(cliPage), "`"+path) && !strings.Contains(string(cliPage), "mosaic "+path) {
				t.Errorf("docs/sessions.md does not name the command %q", path)
			}
			checkFlags(t, docs, "mosaic "+path, c.VisibleFlags())
			walk(path, c.Subcommands)
		}
	}
	walk("", app.Commands)
}

// checkFlags fails the test for each flag of cmd whose names are not all in
// docs: a long name as "--name", a short one as "-n" in backquotes.
func checkFlags(t *testing.T, docs, cmd string, flags []cli.Flag) {
	t.Helper()
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == "help" || n == "h" {
				continue
			}
			var found bool
			if len(n) == 1 {
				found = regexp.MustCompile("`-" + n + "[ `]").MatchString(docs)
			} else {
				found = regexp.MustCompile(`--` + regexp.QuoteMeta(n) + `\b`).MatchString(docs)
			}
			if !found {
				t.Errorf("%s: its flag %s is named on no page under docs/", cmd, flagSpelling(n))
			}
		}
	}
}

// flagSpelling is a flag's name as typed.
func flagSpelling(n string) string {
	if len(n) == 1 {
		return "-" + n
	}
	return "--" + n
}

// The examples that need nothing run as written, in the rig, and end with
// the exit code they promise (0 unless "exits: N"). Each runs in a
// workspace of its own, with a session name the test cleans up after.
func TestDocExamplesRun(t *testing.T) {
	needRig(t)
	ran := 0
	for _, ex := range docExamples(t) {
		if len(ex.needs) > 0 {
			continue
		}
		ran++
		t.Run(ex.where, func(t *testing.T) {
			before := stateNames(t)
			cmd := execMosaic(ex.args...)
			cmd.Dir = workspace(t)
			r := runResult(t, cmd)
			t.Cleanup(func() { forgetNew(t, before) })
			if r.code != ex.exits {
				t.Errorf("mosaic %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(ex.args, " "), r.code, ex.exits, r.stdout, r.stderr)
			}
		})
	}
	if ran < 10 {
		t.Errorf("only %d examples need nothing: show more that a reader can run as written", ran)
	}
}

// execMosaic is the binary under test with args, not yet run.
func execMosaic(args ...string) *exec.Cmd {
	return exec.Command(mosaicBin, args...)
}

// stateNames are the names that have a state directory now.
func stateNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, e := range sessionEntries() {
		names[e] = true
	}
	return names
}

// forgetNew removes the sessions an example left that were not there
// before it (a doc example that names a session makes one).
func forgetNew(t *testing.T, before map[string]bool) {
	t.Helper()
	for name := range stateNames(t) {
		if !before[name] && !strings.HasPrefix(name, ".") {
			exec.Command(mosaicBin, "rm", "--force", name).Run()
		}
	}
}
