package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// readmeCommands are the mosaic command lines of the README's sh blocks,
// split into words as a shell would (quotes honoured, # comments and
// $VARIABLES left as they are: a variable is one word).
func readmeCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	for _, blk := range blocks {
		for _, line := range strings.Split(blk[1], "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "mosaic ") {
				continue
			}
			out = append(out, shellWords(line))
		}
	}
	return out
}

// shellWords splits a command line as sh does, for the simple lines of a
// README: single and double quotes, and a # comment at a word's start.
func shellWords(line string) []string {
	var words []string
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
			i = len(line)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every mosaic command line in the README parses: its verb and flags exist
// and take what they are given. (The commands are not run here: they name
// agents and keys a test machine does not have; the ones that can run are
// run by TestReadmeRuns.)
func TestReadmeCommandsParse(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) < 5 {
		t.Fatalf("found only %d mosaic commands in the README", len(cmds))
	}
	for _, args := range cmds {
		var stdout, stderr bytes.Buffer
		out := &output{stdout: &stdout, stderr: &stderr}
		app := newApp(out)
		noop(app.Commands)
		if err := app.Run(reorderArgs(app, args)); err != nil || out.code != 0 {
			t.Errorf("README: %s: %v %s", strings.Join(args, " "), err, stderr.String())
		}
	}
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
