package main

import "github.com/urfave/cli/v2"

// urfave/cli finds a flag by its names, and every Names() call makes them
// anew through a regexp (cli.FlagNames). After parsing, it asks IsSet of
// each of a command's flags (runFlagActions), and IsSet looks the flag up
// among all of them: quadratic in a command's flags, some 1,500 regexp
// runs for run and start (8% of the CLI's CPU, ~0.5 ms a start). The
// wrappers below answer Names() with the names computed once; everything
// else is the library's flag's own (the embedded pointer).

// boolFlag is a cli.BoolFlag whose names are computed once.
type boolFlag struct {
	*cli.BoolFlag
	names []string
}

// Names returns the flag's names.
func (f *boolFlag) Names() []string { return f.names }

// stringFlag is a cli.StringFlag whose names are computed once.
type stringFlag struct {
	*cli.StringFlag
	names []string
}

// Names returns the flag's names.
func (f *stringFlag) Names() []string { return f.names }

// stringSliceFlag is a cli.StringSliceFlag whose names are computed once.
type stringSliceFlag struct {
	*cli.StringSliceFlag
	names []string
}

// Names returns the flag's names.
func (f *stringSliceFlag) Names() []string { return f.names }

// intFlag is a cli.IntFlag whose names are computed once.
type intFlag struct {
	*cli.IntFlag
	names []string
}

// Names returns the flag's names.
func (f *intFlag) Names() []string { return f.names }

// namesOnce gives every flag of cmds and their subcommands its names
// computed once (above); a flag of another type is left as it is.
func namesOnce(cmds []*cli.Command) {
	for _, c := range cmds {
		for i, f := range c.Flags {
			switch f := f.(type) {
			case *cli.BoolFlag:
				c.Flags[i] = &boolFlag{f, f.Names()}
			case *cli.StringFlag:
				c.Flags[i] = &stringFlag{f, f.Names()}
			case *cli.StringSliceFlag:
				c.Flags[i] = &stringSliceFlag{f, f.Names()}
			case *cli.IntFlag:
				c.Flags[i] = &intFlag{f, f.Names()}
			}
		}
		namesOnce(c.Subcommands)
	}
}

// isBoolFlag reports whether f is a boolean flag, wrapped or not.
func isBoolFlag(f cli.Flag) bool {
	switch f.(type) {
	case *cli.BoolFlag, *boolFlag:
		return true
	}
	return false
}
