package main

import (
	"slices"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every flag of every command has its names computed once (namesOnce), the
// same names the library's own flag gives, and stays what it was for the
// checks that ask (a boolean one takes no value).
func TestFlagNamesOnce(t *testing.T) {
	var walk func([]*cli.Command)
	walk = func(cmds []*cli.Command) {
		for _, c := range cmds {
			for _, f := range c.Flags {
				var inner cli.Flag
				switch w := f.(type) {
				case *boolFlag:
					inner = w.BoolFlag
				case *stringFlag:
					inner = w.StringFlag
				case *stringSliceFlag:
					inner = w.StringSliceFlag
				case *intFlag:
					inner = w.IntFlag
				default:
					t.Errorf("%s: flag %v (%T) has its names made at every lookup", c.Name, f.Names(), f)
					continue
				}
				if !slices.Equal(f.Names(), inner.Names()) || !slices.Equal(f.Names(), f.Names()) {
					t.Errorf("%s: names %v, the library's %v", c.Name, f.Names(), inner.Names())
				}
				_, isBool := inner.(*cli.BoolFlag)
				if isBoolFlag(f) != isBool {
					t.Errorf("%s --%s: a boolean flag: %v, want %v", c.Name, f.Names()[0], isBoolFlag(f), isBool)
				}
			}
			walk(c.Subcommands)
		}
	}
	walk(newApp(&output{}).Commands)
	// A flag given by its alias is set under either name.
	app := newApp(&output{})
	run := findCommand(app.Commands, "run")
	var set, setAlias bool
	run.Action = func(c *cli.Context) error {
		set, setAlias = c.IsSet("workspace"), c.IsSet("w")
		return nil
	}
	if err := app.Run([]string{"mosaic", "run", "-w", "/x", "--", "true"}); err != nil || !set || !setAlias {
		t.Errorf("run -w: %v, IsSet(workspace) %v, IsSet(w) %v", err, set, setAlias)
	}
}
