package main

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/urfave/cli/v2"
)

// TestExamplesFitHelpWidth (issue 40): every line of every command's help
// (mosaic help, mosaic VERB [SUB] --help), examples included, fits 80
// columns; and each example fits the 74 left after its indentation and
// shows on a line of its own: the help printer wraps a longer line at word
// boundaries and, doing so, drops its leading spaces (`mosaic help start`
// showed its second example out of line). Checked against the example as
// it was: both halves failed.
func TestExamplesFitHelpWidth(t *testing.T) {
	for verb, lines := range examples {
		for _, ex := range lines {
			if utf8.RuneCountInString(ex)+6 > 80 {
				t.Errorf("mosaic help %s: example %q is %d columns, wider than the 74 that fit", verb, ex, utf8.RuneCountInString(ex))
			}
			if strings.Contains(ex, "\n") {
				t.Errorf("mosaic help %s: example %q spans lines", verb, ex)
			}
		}
	}
	helps := [][]string{{"mosaic", "help"}}
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			helps = append(helps, append(append([]string{"mosaic"}, p...), "--help"))
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(&output{}).Commands)
	for _, args := range helps {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 || stdout.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
			continue
		}
		if len(args) == 3 {
			for _, ex := range examples[args[1]] {
				if !strings.Contains(stdout.String(), "\n      "+ex+"\n") {
					t.Errorf("%s: the example %q is not on a line of its own, indented as the others", strings.Join(args, " "), ex)
				}
			}
		}
		for _, l := range strings.Split(stdout.String(), "\n") {
			if n := utf8.RuneCountInString(l); n > 80 {
				t.Errorf("%s: a line of %d columns: %q", strings.Join(args, " "), n, l)
			}
		}
	}
	if len(helps) < 20 {
		t.Errorf("only %d help texts checked: the walk missed the commands", len(helps))
	}
}
