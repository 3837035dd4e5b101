package main

import "github.com/urfave/cli/v2"

// urfave/cli finds a flag by its names, and every Names() call makes them
// anew through a regexp (cli.FlagNames). After parsing, it asks IsSet of
// each of a command's flags (runFlagActions), and IsSet looks the flag up
// among all of them: quadratic in a command's flags, some 1,500 regexp
// runs for run and start (8% of the CLI's CPU, ~0.5 ms a start). The
// wrappers below answer Names() with the names computed once, at its first
// call; everything else is the library's flag's own (the embedded pointer).

// boolFlag is a cli.BoolFlag whose names are computed once.
type boolFlag struct {
	*cli.BoolFlag
	names []string
}

// Names returns the flag's names, computed at the first call.
func (f *boolFlag) Names() []string {
	if f.names == nil {
		f.names = f.BoolFlag.Names()
	}
	return f.names
}

// stringFlag is a cli.StringFlag whose names are computed once.
type stringFlag struct {
	*cli.StringFlag
	names []string
}

// Names returns the flag's names, computed at the first call.
func (f *stringFlag) Names() []string {
	if f.names == nil {
		f.names = f.StringFlag.Names()
	}
	return f.names
}

// stringSliceFlag is a cli.StringSliceFlag whose names are computed once.
type stringSliceFlag struct {
	*cli.StringSliceFlag
	names []string
}

// Names returns the flag's names, computed at the first call.
func (f *stringSliceFlag) Names() []string {
	if f.names == nil {
		f.names = f.StringSliceFlag.Names()
	}
	return f.names
}

// intFlag is a cli.IntFlag whose names are computed once.
type intFlag struct {
	*cli.IntFlag
	names []string
}

// Names returns the flag's names, computed at the first call.
func (f *intFlag) Names() []string {
	if f.names == nil {
		f.names = f.IntFlag.Names()
	}
	return f.names
}

// namesOnce gives every flag of cmds and their subcommands its names
// computed once (above); a flag of another type is left as it is.
func namesOnce(cmds []*cli.Command) {
	for _, c := range cmds {
		for i, f := range c.Flags {
			switch f := f.(type) {
			case *cli.BoolFlag:
				c.Flags[i] = &boolFlag{BoolFlag: f}
			case *cli.StringFlag:
				c.Flags[i] = &stringFlag{StringFlag: f}
			case *cli.StringSliceFlag:
				c.Flags[i] = &stringSliceFlag{StringSliceFlag: f}
			case *cli.IntFlag:
				c.Flags[i] = &intFlag{IntFlag: f}
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
