package sandbox

import (
	"fmt"
)

// The exec shim is a service's main process:
//
//	mosaic exec-bwrap --promise P [--drop FILE] [--init-args FILE] [--home-store DIR] BWRAP [ARG...]
//
// It checks the outer layer (the unit's) against the promise read on the
// host, deletes the credential file systemd has read into its environment,
// and becomes bwrap (inside.ExecBwrap). Shim.Argv writes that command line
// and inside.ShimMain reads it (ParseShim). A scope has none: mosaic starts
// its bwrap itself (Held).

// ShimStage is the shim's name: mosaic's first argument.
const ShimStage = "exec-bwrap"

// Shim is one exec shim's command line.
type Shim struct {
	Promise string // the encoded Promise
	Drop    string // the session's credential file, deleted once read; "" for none
	// InitArgs is a file of the init's arguments after "init" (NUL-ended
	// each), which Args then end without; "" when Args hold them.
	InitArgs string
	// HomeStore is the session's state directory, which the shim opens
	// and hands to the init (HomeFDEnv) to load and save its home; "" for
	// none.
	HomeStore string
	Bwrap     string // bwrap's path
	// TUN: make the session's network device and its DNS sockets and hand
	// them to the init (package sandbox/inside), with the unit's capabilities, which
	// the shim then drops.
	TUN  bool
	Args []string
}

// Argv is the shim's command line, run as mosaicBin.
func (s Shim) Argv(mosaicBin string) []string {
	argv := []string{mosaicBin, ShimStage, "--promise", s.Promise}
	if s.Drop != "" {
		argv = append(argv, "--drop", s.Drop)
	}
	if s.InitArgs != "" {
		argv = append(argv, "--init-args", s.InitArgs)
	}
	if s.HomeStore != "" {
		argv = append(argv, "--home-store", s.HomeStore)
	}
	if s.TUN {
		argv = append(argv, "--tun")
	}
	return append(append(argv, s.Bwrap), s.Args...)
}

// ParseShim reads the shim's command line, after its name.
func ParseShim(args []string) (Shim, error) {
	var s Shim
	for len(args) > 1 && len(args[0]) > 2 && args[0][:2] == "--" {
		if args[0] == "--tun" {
			s.TUN, args = true, args[1:]
			continue
		}
		switch args[0] {
		case "--promise":
			s.Promise = args[1]
		case "--drop":
			s.Drop = args[1]
		case "--init-args":
			s.InitArgs = args[1]
		case "--home-store":
			s.HomeStore = args[1]
		default:
			return s, fmt.Errorf("unknown option %q", args[0])
		}
		args = args[2:]
	}
	if len(args) == 0 {
		return s, fmt.Errorf("usage: %s --promise P [--drop FILE] [--init-args FILE] [--home-store DIR] [--tun] BWRAP [ARG...]", ShimStage)
	}
	if s.Promise == "" {
		return s, fmt.Errorf("no --promise: nothing to check the sandbox against")
	}
	s.Bwrap, s.Args = args[0], args[1:]
	return s, nil
}

// OutputLostName is the file in a service's state directory that says its
// output reached no journal (noteOutputLost); `mosaic logs` reports it.
const OutputLostName = "output-lost"
